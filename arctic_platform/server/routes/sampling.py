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
"""Sampling routes: /generate (through the per-job :class:`GenerateBatcher`), /sleep-inference, /wake-inference,
/reset-prefix-cache, and /log-probs (job ``log_prob``).
"""

from __future__ import annotations

import asyncio
from typing import Any, NamedTuple

import torch
from fastapi import FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ...protocol import LogProbsRequest, ResetPrefixCacheRequest, SleepRequest
from ..engines import GenerateItem, SamplingEngine
from ..errors import RequestError
from ..jobs import Job, JobRegistry
from ._common import (
    AppContext,
    _content_type,
    _frame,
    _json_body,
    _locked,
    _model,
    _thread,
    events,
    frame_body_reader,
    logger,
)

# ------------------------------------------------------------------------------------------------
# request models
# ------------------------------------------------------------------------------------------------


class SamplingParams(BaseModel):
    """vLLM-style sampling parameters both sampling engines implement (vLLM's ranges); others are ignored unless
    ``strict``."""

    model_config = ConfigDict(extra="allow")
    temperature: float = Field(1.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: int = -1
    max_tokens: int | None = Field(None, ge=0)
    stop_token_ids: list[int] | None = None
    seed: int | None = None
    logprobs: int | None = Field(None, ge=0)
    ignore_eos: bool = False
    n: int = Field(1, ge=1, le=1)
    repetition_penalty: float = Field(1.0, gt=0)
    presence_penalty: float = Field(0.0, ge=-2, le=2)
    frequency_penalty: float = Field(0.0, ge=-2, le=2)
    min_p: float = Field(0.0, ge=0, le=1)

    @field_validator("logprobs", mode="before")
    @classmethod
    def _bool_logprobs(cls, v):
        """verl passes ``rollout.calculate_log_probs`` as a bool: True = the sampled token's, False = none."""
        if isinstance(v, bool):
            return 0 if v else None
        return v

    @field_validator("top_k", mode="before")
    @classmethod
    def _top_k_none(cls, v):
        return -1 if v is None else v


# vLLM parameters the engines do not implement, with the value that means "off" (accepted silently).
_NEUTRAL_EXTRAS: dict[str, Any] = {
    "min_tokens": 0,
    "stop": None,
    "prompt_logprobs": None,
    "bad_words": None,
    "logit_bias": None,
}
# Output-formatting flags that do not change the sampled token ids.
_HARMLESS_EXTRAS = {
    "detokenize",
    "skip_special_tokens",
    "spaces_between_special_tokens",
    "include_stop_str_in_output",
    "output_kind",
    "truncate_prompt_tokens",
}


def _unsupported_params(extra: dict[str, Any]) -> list[str]:
    out = []
    for k, v in extra.items():
        if k in _HARMLESS_EXTRAS or v is None or v == [] or v == {}:
            continue
        if k in _NEUTRAL_EXTRAS and v == _NEUTRAL_EXTRAS[k]:
            continue
        out.append(k)
    return sorted(out)


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
        self._in_engine = False

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
        max_rows = getattr(self.job.engine, "max_batch_rows", 64)
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
            items = [it for its, _ in live for it in its]
            self.requests += len(live)
            self.batches += 1
            self._in_engine = True
            try:
                results, _version = await _thread(
                    _locked,
                    self.job,
                    lambda its=items: self.job.engine.generate(its),
                    self.registry.limits.engine_timeout_s,
                )
            except BaseException as e:  # noqa: BLE001
                for _, f in live:
                    if not f.done():
                        f.set_exception(e)
                if isinstance(e, asyncio.CancelledError):
                    raise
                continue
            finally:
                self._in_engine = False
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
        pending = [] if self._in_engine else list(self._collecting)
        while not self.queue.empty():
            pending.append(self.queue.get_nowait())
        for _, f in pending:
            if not f.done():
                f.set_exception(self._destroyed())
        if self.task is not None and not self._in_engine:
            self.task.cancel()


class InferenceOps(NamedTuple):
    """The sleep / wake / reset calls /operation reuses (docs/arctic-rl-protocol.md §7)."""

    sleep: Any
    wake: Any
    reset: Any


def register(app: FastAPI, ctx: AppContext) -> InferenceOps:
    """Add the sampling routes to ``app``; returns the calls /operation shares with them."""
    settings, registry, timeout = ctx.settings, ctx.registry, ctx.timeout
    _frame_body = frame_body_reader(settings)

    # ---- sampling ----
    @app.post("/generate")
    async def generate(request: Request, job_id: int | None = None):
        job = registry.require(job_id, "sampling")
        ct = _content_type(request)
        if ct == "application/json":
            tree = await _json_body(request, required=True)
        else:
            tree = await _frame_body(request)
        if not isinstance(tree, dict):
            raise RequestError("the generate body must be an object {prompts, sampling_params}", 422)
        engine: SamplingEngine = job.engine
        if engine.state != "ready":
            raise RequestError(f"the sampling engine is {engine.state}; call /wake-inference first", 409)
        items = _generate_items(tree, engine)
        if job.batcher is None:
            job.batcher = GenerateBatcher(job, registry, settings.batch_wait_ms / 1000.0)
        try:
            results, version = await job.batcher.submit(items)
        except (asyncio.TimeoutError, TimeoutError):
            raise RequestError(f"generation did not finish within {timeout:.0f}s (engine_timeout_s)", 504) from None
        out = {"job_id": job.job_id, "results": results, "policy_version": version}
        return out if ct == "application/json" else _frame(out)

    async def _sleep(job_id: int | None, level: int) -> dict:
        job = registry.require(job_id, "sampling")
        out = await _thread(_locked, job, lambda: job.engine.sleep(level), timeout)
        return {"job_id": job.job_id, "sampling": [{"replica": 0, **out}]}

    async def _wake(job_id: int | None, body: Any) -> dict:
        job = registry.require(job_id, "sampling")
        if isinstance(body, dict):
            tags = body.get("tags")
        else:
            tags = body
        if tags is not None and (not isinstance(tags, list) or not all(isinstance(t, str) for t in tags)):
            raise RequestError("wake-inference takes a tag list, {'tags': [...]}, or null", 422)
        out = await _thread(_locked, job, lambda: job.engine.wake(tags), timeout)
        return {"job_id": job.job_id, "sampling": [{"replica": 0, "tags": tags, **out}]}

    async def _reset(job_id: int | None) -> dict:
        job = registry.require(job_id, "sampling")
        reset = getattr(job.engine, "reset_prefix_cache", None)
        if reset is None:  # the torch engine keeps no prefix cache
            return {"job_id": job.job_id, "sampling": [True]}
        done = await _thread(_locked, job, reset, timeout)  # the job lock: after the batch in flight (drain)
        return {"job_id": job.job_id, "sampling": [bool(done)]}

    @app.post("/sleep-inference")
    async def sleep_inference(request: Request, job_id: int | None = None, level: int = 1):
        body = await _json_body(request)
        if body is not None:
            level = _model(SleepRequest, body).level
        return await _sleep(job_id, level)

    @app.post("/wake-inference")
    async def wake_inference(request: Request, job_id: int | None = None):
        return await _wake(job_id, await _json_body(request))

    @app.post("/reset-prefix-cache")
    async def reset_prefix_cache(request: Request, job_id: int | None = None):
        _model(ResetPrefixCacheRequest, await _json_body(request))
        return await _reset(job_id)

    @app.post("/log-probs")
    async def log_probs(request: Request, job_id: int | None = None):
        job = registry.require(job_id, "log_prob")
        req = _model(LogProbsRequest, await _json_body(request, required=True))
        if req.completions is not None and len(req.completions) != len(req.prompts):
            raise RequestError(f"completions has {len(req.completions)} items, prompts {len(req.prompts)}", 422)
        if not req.prompts:
            raise RequestError("prompts is empty", 422)

        def do():
            job.engine.require_awake()
            return job.engine.log_probs_text(job.engine.tokenizer(), req.prompts, req.completions, req.top_k)

        results = await _thread(_locked, job, do, timeout)
        return _frame({"job_id": job.job_id, "results": results})

    return InferenceOps(_sleep, _wake, _reset)


def _generate_items(tree: dict, engine: SamplingEngine) -> list[GenerateItem]:
    """Validate a GenerateRequest into per-prompt items (422 naming the field on any problem)."""
    sp_raw = tree.get("sampling_params") or {}
    if not isinstance(sp_raw, dict):
        raise RequestError("sampling_params must be an object", 422)
    sp = SamplingParams.model_validate(sp_raw)
    strict = bool(tree.get("strict", False))
    unsupported = _unsupported_params(sp.model_extra or {})
    if unsupported and strict:
        raise RequestError(f"sampling_params {unsupported} are not supported by the sampling engine (strict=true)", 422)
    if unsupported:
        logger.info("generate: ignoring unsupported sampling_params %s (send strict=true to refuse)", unsupported)
    prompts: list[list[int]] = []
    texts: list[str | None] = []
    raw = tree.get("prompts")
    if not isinstance(raw, list) or not raw:
        raise RequestError("prompts must be a non-empty list of strings (or token-id lists: capability token_ids)", 422)
    for i, p in enumerate(raw):
        if isinstance(p, str):
            prompts.append(list(engine.tokenizer().encode(p, add_special_tokens=False)))
            texts.append(p)
        elif isinstance(p, torch.Tensor) and p.dim() == 1 and not p.dtype.is_floating_point:
            prompts.append(p.long().tolist())
            texts.append(None)
        elif isinstance(p, (list, tuple)) and all(isinstance(t, int) and not isinstance(t, bool) for t in p):
            prompts.append(list(p))
            texts.append(None)
        else:
            raise RequestError(f"prompts[{i}] must be a list of token ids or a string", 422)
    if not prompts:
        raise RequestError("prompts is empty", 422)
    max_seq = engine.settings.max_seq_len
    stop = tuple(sp.stop_token_ids or ())
    items = []
    for i, p in enumerate(prompts):
        if not p:
            raise RequestError(f"prompts[{i}] is empty", 422)
        if len(p) > max_seq:
            raise RequestError(
                f"prompts[{i}] has {len(p)} tokens, more than max_seq_len {max_seq} (never truncated)", 400
            )
        if min(p) < 0 or max(p) >= engine.vocab_size:
            raise RequestError(f"prompts[{i}] holds token ids outside [0, {engine.vocab_size})", 422)
        room = max_seq - len(p)
        max_tokens = room if sp.max_tokens is None else min(sp.max_tokens, room)
        items.append(
            GenerateItem(
                prompt=p,
                temperature=sp.temperature,
                top_p=sp.top_p,
                top_k=sp.top_k if sp.top_k > 0 else 0,
                max_tokens=max_tokens,
                stop_token_ids=stop,
                ignore_eos=sp.ignore_eos,
                logprobs=sp.logprobs,
                seed=sp.seed,
                text=texts[i],
                repetition_penalty=sp.repetition_penalty,
                presence_penalty=sp.presence_penalty,
                frequency_penalty=sp.frequency_penalty,
                min_p=sp.min_p,
            )
        )
    return items
