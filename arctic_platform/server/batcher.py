# Copyright 2026 The arctic-verl Authors
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
# SPDX-License-Identifier: Apache-2.0
"""The generate batcher: concurrent ``/generate`` requests of one sampling job become batched engine calls.

A request waits at most ``--batch-wait-ms`` after the first one of a batch arrived, and a batch holds at most the
engine's ``max_batch_rows`` rows (a request's prompts are never split). Each batch is one engine call under the
job's lock, so a weight sync waits for the batch in flight (drain) and every result carries the policy version that
produced it. An engine that takes generate calls concurrently (``concurrent_generate``: vLLM, whose replicas admit
requests while they decode) gets each batch as soon as it is collected, under the lock's shared side
(:func:`.engine_calls.call_shared`): a short request is never held behind a long one, and a weight sync still waits
for every batch in flight.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .engine_calls import call_locked, call_shared, in_thread
from .engines.sampling_engine import GenerateItem
from .errors import RequestError
from .logs import events

if TYPE_CHECKING:
    from .jobs import Job, JobRegistry

__all__ = ["GenerateBatcher"]


class GenerateBatcher:
    """Collects concurrent /generate requests of one sampling job into batched engine calls.

    :meth:`close` (the job is destroyed) lets a batch already in the engine finish: destroy sets the engine's abort
    flag, so it stops at the next decode step and its requests answer 200 with what was generated so far and
    ``finish_reason: "abort"`` (verl's ``stop_reason: "aborted"``); every request not yet in the engine answers 409.
    """

    def __init__(self, job: Job, registry: JobRegistry, wait_s: float):
        self.job, self.registry, self.wait_s = job, registry, wait_s
        self.queue: asyncio.Queue = asyncio.Queue()
        self.task: asyncio.Task | None = None
        self.requests = 0
        self.batches = 0
        self.closed = False
        self._collecting: list = []  # requests taken off the queue for the next engine call
        self._in_engine = 0  # batches inside the engine
        self._dispatches: set[asyncio.Task] = set()  # concurrent engines: the batches in flight

    def _destroyed(self) -> RequestError:
        return RequestError(f"job {self.job.job_id} was destroyed", 409)

    async def submit(self, items: list[GenerateItem]) -> tuple[list[dict], int]:
        if self.closed:
            raise self._destroyed()
        if self.task is None:
            self.task = asyncio.create_task(self._run())
        fut = asyncio.get_running_loop().create_future()
        await self.queue.put((items, fut))
        return await asyncio.wait_for(fut, timeout=self.registry.limits.engine_timeout_s)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        engine = self.job.engine  # None once the job is destroyed: the loop then ends at its first batch
        max_rows = engine.max_batch_rows if engine is not None else 64
        while not self.closed:
            first = await self.queue.get()
            batch = self._collecting = [first]
            rows = len(first[0])
            deadline = loop.time() + self.wait_s
            while rows < max_rows:
                try:
                    nxt = self.queue.get_nowait()
                except asyncio.QueueEmpty:
                    left = deadline - loop.time()
                    if left <= 0:
                        break
                    try:
                        nxt = await asyncio.wait_for(self.queue.get(), left)
                    except (asyncio.TimeoutError, TimeoutError):
                        break
                batch.append(nxt)
                rows += len(nxt[0])
            self._collecting = []
            live = [(its, f) for its, f in batch if not f.done()]
            if not live:
                continue
            if getattr(engine, "concurrent_generate", False):
                task = asyncio.create_task(self._dispatch(live, call_shared))
                self._dispatches.add(task)
                task.add_done_callback(self._dispatches.discard)
            else:
                await self._dispatch(live, call_locked)

    async def _dispatch(self, live: list, call) -> None:
        """One engine call for the requests ``live``; each waiter gets its share of the results (or the error)."""
        items = [it for its, _ in live for it in its]
        self.requests += len(live)
        self.batches += 1
        self._in_engine += 1
        try:
            results, _version = await in_thread(
                call,
                self.job,
                lambda its=items: self.job.engine.generate(its),
                self.registry.limits.engine_timeout_s,
            )
        except BaseException as e:  # every waiter of the batch gets the engine's error
            for _, f in live:
                if not f.done():
                    f.set_exception(e)
            if isinstance(e, asyncio.CancelledError):
                raise
            return
        finally:
            self._in_engine -= 1
        aborted = sum(1 for r in results if r.get("finish_reason") == "abort")
        if aborted:
            events.info(
                "generate: sampling job %d destroyed while generating; %d of %d sequence(s) aborted",
                self.job.job_id,
                aborted,
                len(results),
            )
        pos = 0
        for its, f in live:
            part = results[pos : pos + len(its)]
            pos += len(its)
            if not f.done():
                f.set_result((part, part[0]["policy_version"] if part else _version))

    def close(self) -> None:
        """Stop taking requests (idempotent): a batch in the engine finishes (see the class doc), the rest get 409."""
        self.closed = True
        pending = list(self._collecting)  # taken off the queue, not yet in the engine
        while not self.queue.empty():
            pending.append(self.queue.get_nowait())
        for _, f in pending:
            if not f.done():
                f.set_exception(self._destroyed())
        if self.task is not None and (not self._in_engine or self._dispatches):
            self.task.cancel()  # concurrent batches in flight run as their own tasks and finish (aborted)
