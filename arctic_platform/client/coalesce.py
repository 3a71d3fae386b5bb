# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Client-side coalescing of single-prompt ``/generate`` calls into multi-prompt requests.

verl's agent loop asks for one trajectory at a time (``generate(request_id, prompt_ids, sampling_params)``), so a
GRPO step of B prompts x n samples is B*n HTTP round trips, each with its own frame encode / decode, connection-pool
work and server-side routing. :class:`GenerateCoalescer` collects the calls that arrive within ``window_s`` of the
first one and carry the same sampling params into one ``/generate`` with up to ``max_prompts`` prompts (the
Arctic RL API takes a prompt list with one ``sampling_params``), then hands each caller its own result.

Semantics:

* results are returned to their callers in order; each keeps the ``policy_version`` the server put on it;
* calls with different sampling params are never mixed (one bucket per canonical params key);
* a failed multi-prompt request is retried one prompt at a time when the server refused it (HTTP 4xx), so one bad
  prompt (e.g. longer than the server's ``max_seq_len``) fails only its own caller with the server's reason; any
  other error (timeout, connection, 5xx) is raised to every caller of that request;
* a cancelled caller does not cancel the request the others wait on.

The price is head-of-line blocking: a coalesced request returns when its longest sequence is done. On this project's
torch engine that costs nothing (its server-side batcher already runs concurrent requests as one static batch); on a
continuous-batching server (vLLM) it delays short sequences, which is why ``max_prompts=1`` (off) is the default there.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Callable

from arctic_platform.client.errors import ArcticRLError

Send = Callable[[list[list[int]], dict[str, Any]], Awaitable[list[dict]]]


class GenerateCoalescer:
    """Batches concurrent ``generate_one`` calls into ``send(prompts, params)`` calls (see the module docstring)."""

    def __init__(self, send: Send, *, max_prompts: int, window_s: float):
        if int(max_prompts) < 1:
            raise ValueError(f"max_prompts must be >= 1, got {max_prompts}")
        if float(window_s) < 0:
            raise ValueError(f"window_s must be >= 0, got {window_s}")
        self._send = send
        self.max_prompts = int(max_prompts)
        self.window_s = float(window_s)
        self._buckets: dict[str, list[tuple[list[int], asyncio.Future]]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task] = set()
        self.requests = 0  # /generate requests sent (after coalescing)
        self.prompts = 0  # prompts submitted

    async def generate_one(self, prompt: list[int], params: dict[str, Any]) -> dict:
        """One prompt's result dict, as ``send`` returns it."""
        self.prompts += 1
        if self.max_prompts == 1:
            self.requests += 1
            (result,) = await self._send([prompt], params)
            return result
        key = json.dumps(params, sort_keys=True, default=str)
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        fut.add_done_callback(_retrieve)  # a caller that gave up leaves no "exception never retrieved" behind
        bucket = self._buckets.setdefault(key, [])
        bucket.append((prompt, fut))
        if len(bucket) >= self.max_prompts:
            self._flush(key, params)
        elif len(bucket) == 1:
            self._timers[key] = loop.call_later(self.window_s, self._flush, key, params)
        # shield: a caller that gives up must not cancel the request its neighbours wait on
        return await asyncio.shield(fut)

    def _flush(self, key: str, params: dict[str, Any]) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        batch = self._buckets.pop(key, [])
        if batch:
            task = asyncio.get_running_loop().create_task(self._run(batch, params))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, batch: list[tuple[list[int], asyncio.Future]], params: dict[str, Any]) -> None:
        prompts = [p for p, _ in batch]
        try:
            self.requests += 1
            results = await self._send(prompts, params)
            if len(results) != len(batch):
                raise ArcticRLError(None, f"{len(results)} results for {len(batch)} prompts", "/generate")
        except ArcticRLError as e:
            if len(batch) > 1 and e.status is not None and 400 <= e.status < 500:
                await asyncio.gather(*(self._run([item], params) for item in batch))
                return
            _fail(batch, e)
            return
        except BaseException as e:  # every waiter gets the error, then it propagates
            _fail(batch, e)
            if isinstance(e, asyncio.CancelledError):
                raise
            return
        for (_, fut), result in zip(batch, results, strict=True):
            if not fut.done():
                fut.set_result(result)


def _retrieve(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()


def _fail(batch, error: BaseException) -> None:
    for _, fut in batch:
        if not fut.done():
            fut.set_exception(error)
