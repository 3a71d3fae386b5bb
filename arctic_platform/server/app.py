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
"""FastAPI app of the embedded Arctic RL server (docs/arctic-rl-protocol.md §2; endpoints: docs/arctic-rl-server.md).

``create_app(ServerSettings(...))`` returns the ASGI app; :mod:`arctic_platform.server.__main__` serves it with
uvicorn. Request bodies: ``application/octet-stream`` is an :mod:`arctic_platform.wire` frame, ``application/json``
is JSON; the decoder is chosen by Content-Type only. Replies to data-plane calls are frames, control replies JSON.

Every error is ``{"detail": "<one-line reason>"}``: 400 bad request / framing / wrong job type, 401 missing token,
404 unknown job, 409 job state, 413 body too large, 415 wrong content type, 422 schema, 503/504 engine busy or
timed out, 500 a server bug. After any of them the server keeps serving.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .. import wire
from ..protocol import (
    CAPABILITIES,
    SLEEP_TRAINING_MODES,
    DestroyRequest,
    JobConfig,
    JobStatus,
    LoadCheckpointRequest,
    LogProbsRequest,
    OperationRequest,
    ResetPrefixCacheRequest,
    SaveRequest,
    SleepRequest,
    SleepTrainingRequest,
    StepRequest,
    WeightNormRequest,
    WeightSyncRequest,
)
from .engines import GenerateItem, RequestError, SamplingEngine, weight_norm
from .jobs import Job, JobRegistry, ServerLimits, _one_line
from .sampling_process import engine_weight_norm

logger = logging.getLogger("arctic_platform.server")
# Lifecycle events (weight syncs, checkpoints) are logged at INFO even when the server is not --verbose.
events = logging.getLogger("arctic_platform.server.events")

OCTET = wire.CONTENT_TYPE
LEGACY_PATHS = {
    "/fwd-bwd": "/forward-backward",
    "/fwd-no-grad": "/forward",
    "/save-checkpoint": "/save",
    "/sync-weights": "/weight-sync",
}


@dataclass
class ServerSettings:
    """Everything the app needs; the CLI flags of ``arctic-verl server`` map onto these fields."""

    token: str | None = None
    """Bearer token checked on every request when set (required for a non-loopback bind)."""
    max_body_bytes: int = 1024 * 1024 * 1024
    max_header_bytes: int = 64 * 1024 * 1024
    batch_wait_ms: float = 2.0
    """How long the generate batcher waits for more requests after the first one arrives."""
    limits: ServerLimits | None = None


# ------------------------------------------------------------------------------------------------
# request models
# ------------------------------------------------------------------------------------------------


class SamplingParams(BaseModel):
    """vLLM-style sampling parameters the torch engine implements; others are ignored unless ``strict``."""

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


# vLLM parameters the torch engine does not implement, with the value that means "off" (accepted silently).
_NEUTRAL_EXTRAS: dict[str, Any] = {
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "min_p": 0.0,
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


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------


def _err(status: int, reason: str) -> JSONResponse:
    return JSONResponse({"detail": reason}, status_code=status)


def _thread(fn, *args):
    """Run ``fn`` in a daemon thread and await its result (engine work never blocks the event loop)."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def target():
        def deliver(ok: bool, value) -> None:
            if not fut.done():
                fut.set_result(value) if ok else fut.set_exception(value)

        try:
            res = fn(*args)
        except BaseException as e:  # noqa: BLE001 - delivered to the awaiting handler
            loop.call_soon_threadsafe(deliver, False, e)
        else:
            loop.call_soon_threadsafe(deliver, True, res)

    threading.Thread(target=target, daemon=True, name="arctic-engine").start()
    return fut


def _locked(job: Job, fn, timeout: float, *more: Job):
    """Call ``fn()`` holding ``job``'s lock (then ``more`` locks, in order), each wait bounded by ``timeout``."""
    held = []
    try:
        for j in (job, *more):
            if not j.lock.acquire(timeout=timeout):
                raise RequestError(f"job {j.job_id} stayed busy for {timeout:.0f}s (engine_timeout_s)", 503)
            held.append(j)
            if j.status != JobStatus.RUNNING or j.engine is None:
                raise RequestError(f"job {j.job_id} is {j.status}" + (f": {j.reason}" if j.reason else ""), 409)
        t0 = time.perf_counter()
        if job.meter is not None:
            job.meter.enter(job.job_type)
        try:
            return fn()
        finally:
            job.compute_s += time.perf_counter() - t0
            if job.meter is not None:
                job.meter.exit(job.job_type)
    finally:
        for j in reversed(held):
            j.lock.release()


def _content_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()


async def _json_body(request: Request, *, required: bool = False) -> Any:
    body = await request.body()
    if not body:
        if required:
            raise RequestError("a JSON body is required", 422)
        return None
    ct = _content_type(request)
    if ct != "application/json":
        raise RequestError(f"this endpoint takes application/json, got {ct or 'no content type'!r}", 415)
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RequestError(f"malformed JSON body ({e})", 400) from None


def _model(model: type[BaseModel], data: Any) -> Any:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise RequestError(f"the JSON body must be an object, got {type(data).__name__}", 422)
    return model.model_validate(data)


class GenerateBatcher:
    """Collects concurrent /generate requests of one sampling job into batched engine calls."""

    def __init__(self, job: Job, registry: JobRegistry, wait_s: float):
        self.job, self.registry, self.wait_s = job, registry, wait_s
        self.queue: asyncio.Queue = asyncio.Queue()
        self.task: asyncio.Task | None = None
        self.requests = 0
        self.batches = 0

    async def submit(self, items: list[GenerateItem]) -> tuple[list[dict], int]:
        if self.task is None:
            self.task = asyncio.create_task(self._run())
        fut = asyncio.get_running_loop().create_future()
        await self.queue.put((items, fut))
        return await asyncio.wait_for(fut, timeout=self.registry.limits.engine_timeout_s)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        max_rows = getattr(self.job.engine, "max_batch_rows", 64)
        while True:
            first = await self.queue.get()
            batch = [first]
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
            live = [(its, f) for its, f in batch if not f.done()]
            if not live:
                continue
            items = [it for its, _ in live for it in its]
            self.requests += len(live)
            self.batches += 1
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
            pos = 0
            for its, f in live:
                part = results[pos : pos + len(its)]
                pos += len(its)
                if not f.done():
                    f.set_result((part, part[0]["policy_version"] if part else _version))

    def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
        while not self.queue.empty():
            _, f = self.queue.get_nowait()
            if not f.done():
                f.set_exception(RequestError(f"job {self.job.job_id} was destroyed", 409))


# ------------------------------------------------------------------------------------------------
# ASGI guard: bearer token + body size limit (before any body byte is read)
# ------------------------------------------------------------------------------------------------


class Guard:
    """Checks the bearer token on every request and refuses bodies over ``max_body_bytes`` with 413."""

    def __init__(self, app, *, token: str | None, max_body_bytes: int):
        self.app, self.token, self.max_body = app, token, max_body_bytes

    @staticmethod
    async def _send_error(send, status: int, reason: str) -> None:
        body = json.dumps({"detail": reason}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        if self.token is not None:
            got = headers.get(b"authorization", b"").decode("latin-1")
            if not hmac.compare_digest(got.encode(), f"Bearer {self.token}".encode()):
                return await self._send_error(send, 401, "missing or invalid bearer token (Authorization: Bearer ...)")
        cl = headers.get(b"content-length")
        if cl is not None:
            try:
                n = int(cl)
            except ValueError:
                return await self._send_error(send, 400, "malformed Content-Length header")
            if n > self.max_body:
                return await self._send_error(
                    send, 413, f"request body of {n} bytes exceeds the server limit of {self.max_body} bytes"
                )
        seen = 0

        async def counting_receive():
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.max_body:  # a chunked body without Content-Length; the handlers answer 413
                    raise RequestError(f"request body exceeds the server limit of {self.max_body} bytes", 413)
            return msg

        await self.app(scope, counting_receive, send)


# ------------------------------------------------------------------------------------------------
# app
# ------------------------------------------------------------------------------------------------


def create_app(settings: ServerSettings) -> Any:
    """Build the ASGI app (FastAPI wrapped in :class:`Guard`). ``app.state.registry`` holds the jobs."""
    limits = settings.limits or ServerLimits()
    registry = JobRegistry(limits)
    background: set[asyncio.Task] = set()
    started_at = time.time()

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(_app):
        yield
        for job in registry.all():
            if job.batcher is not None:
                job.batcher.close()
        await _thread(registry.shutdown)

    app = FastAPI(title="Arctic RL server (arctic-verl embedded)", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.registry = registry
    timeout = limits.engine_timeout_s

    # ---- errors: always {"detail": one line} ----
    @app.exception_handler(RequestError)
    async def _request_error(_r, e: RequestError):
        return _err(e.status, e.reason)

    @app.exception_handler(wire.WireError)
    async def _wire_error(_r, e: wire.WireError):
        return _err(400, f"malformed frame: {e}")

    @app.exception_handler(ValidationError)
    async def _validation(_r, e: ValidationError):
        first = e.errors()[0] if e.errors() else {}
        loc = ".".join(str(x) for x in first.get("loc", ()))
        return _err(422, f"{loc}: {first.get('msg', str(e))}" if loc else first.get("msg", str(e)))

    @app.exception_handler(RequestValidationError)
    async def _req_validation(_r, e: RequestValidationError):
        first = e.errors()[0] if e.errors() else {}
        loc = ".".join(str(x) for x in first.get("loc", ()))
        return _err(422, f"{loc}: {first.get('msg', 'invalid request')}")

    @app.exception_handler(Exception)
    async def _bug(_r, e: Exception):
        logger.exception("unhandled error")
        return _err(500, f"internal server error: {_one_line(e)}")

    async def _frame_body(request: Request) -> dict:
        ct = _content_type(request)
        if ct != OCTET:
            raise RequestError(
                f"this endpoint takes {OCTET} (an arctic wire frame), got {ct or 'no content type'!r}", 415
            )
        body = await request.body()
        tree = await _thread(
            lambda: wire.decode(
                body, max_header_bytes=settings.max_header_bytes, max_body_bytes=settings.max_body_bytes
            )
        )
        if not isinstance(tree, dict):
            raise RequestError("the frame must hold a dict {batch, meta, processing}", 422)
        return tree

    def _frame(obj: Any) -> Response:
        return Response(content=wire.encode(obj), media_type=OCTET)

    # ---- control plane ----
    @app.get("/health")
    async def health():
        # The reference answers {"status": "OK"}; "capabilities" is this server's extension (protocol.CAPABILITIES).
        return {"status": "OK", "capabilities": list(CAPABILITIES)}

    @app.get("/status")
    async def status():
        return {
            "training_gpus": limits.training_gpus,
            "sampling_gpus": limits.sampling_gpus,
            "log_prob_gpus": limits.log_prob_gpus,
            "jobs": {str(j.job_id): j.info() for j in registry.all()},
            "server": {
                "uptime_s": time.time() - started_at,
                "default_model": limits.default_model,
                "busy": registry.meter.snapshot(),
            },
        }

    @app.get("/job/{job_id}")
    async def job_info(job_id: int):
        return registry.get(job_id).info()

    @app.post("/initialize")
    async def initialize(request: Request):
        cfg = _model(JobConfig, await _json_body(request, required=True))
        job = registry.create(cfg)

        async def build():
            await _thread(registry.build, job)

        task = asyncio.create_task(build())
        background.add(task)
        task.add_done_callback(background.discard)
        return {
            "job_id": job.job_id,
            "job_type": job.job_type,
            "running": job.status == JobStatus.RUNNING,
            "status": job.status,  # extension: PENDING while the build runs (poll /job/{id})
        }

    @app.post("/destroy")
    async def destroy(request: Request, job_id: int | None = None):
        req = _model(DestroyRequest, await _json_body(request, required=True))
        if job_id is None:
            raise RequestError("the job_id query parameter is required", 422)
        job = registry.get(job_id)
        if req.job_type != job.job_type:
            raise RequestError(f"job {job_id} is a {job.job_type} job, not {req.job_type}", 400)
        if job.batcher is not None:
            job.batcher.close()
            job.batcher = None
        await _thread(registry.destroy, job, "destroyed by a client")
        events.info("destroy: %s job %s destroyed by a client", job.job_type, job_id)
        return {"job_id": job_id, "status": job.status}

    # ---- training ----
    @app.post("/forward-backward")
    async def forward_backward(request: Request, job_id: int | None = None):
        job = registry.require(job_id, "training")
        tree = await _frame_body(request)
        out = await _thread(
            _locked,
            job,
            lambda: (
                job.engine.require_awake()
                or job.engine.forward_backward(tree.get("batch"), tree.get("meta") or {}, tree.get("processing"))
            ),
            timeout,
        )
        return _frame({"job_id": job.job_id, **out})

    @app.post("/forward")
    async def forward(request: Request, job_id: int | None = None):
        job = registry.require(job_id, "training", "log_prob")
        tree = await _frame_body(request)
        out = await _thread(
            _locked,
            job,
            lambda: (
                job.engine.require_awake()
                or job.engine.forward(tree.get("batch"), tree.get("meta") or {}, tree.get("processing"))
            ),
            timeout,
        )
        return _frame({"job_id": job.job_id, "avg_loss": None, **out})

    @app.post("/step")
    async def step(request: Request, job_id: int | None = None):
        job = registry.require(job_id, "training")
        req = _model(StepRequest, await _json_body(request))
        out = await _thread(
            _locked, job, lambda: job.engine.require_awake() or job.engine.step(req.learning_rate), timeout
        )
        return {"job_id": job.job_id, "batch": {}, **out}

    @app.post("/save")
    async def save(request: Request, job_id: int | None = None):
        job = registry.require(job_id, "training")
        req = _model(SaveRequest, await _json_body(request))
        root = Path(req.path).expanduser() if req.path else job.checkpoint_root
        out = await _thread(
            _locked, job, lambda: job.engine.save(root, req.step, req.save_total_limit, req.export_hf), timeout
        )
        events.info("save: training job %s -> %s (global_step %s)", job.job_id, out.get("path"), out.get("global_step"))
        return {"job_id": job.job_id, **out}

    @app.post("/load-checkpoint")
    async def load_checkpoint(request: Request, job_id: int | None = None):
        job = registry.require(job_id, "training")
        req = _model(LoadCheckpointRequest, await _json_body(request))
        target = _resolve_checkpoint(job, req.path, req.step)
        out = await _thread(_locked, job, lambda: job.engine.load(target), timeout)
        events.info(
            "load-checkpoint: training job %s <- %s (global_step %s)",
            job.job_id,
            out.get("path"),
            out.get("global_step"),
        )
        return {"job_id": job.job_id, **out}

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
        return {"job_id": job.job_id, "sampling": [True]}  # the torch engine keeps no prefix cache

    async def _weight_sync(job_id: int | None, req: WeightSyncRequest) -> dict:
        train = registry.require(job_id, "training")
        if req.source_sub_job_id is not None and req.source_sub_job_id != train.job_id:
            raise RequestError(f"source_sub_job_id {req.source_sub_job_id} != job_id {train.job_id}", 422)
        if req.target_sub_job_ids:
            targets = [registry.require(t, "sampling", "log_prob") for t in req.target_sub_job_ids]
        else:
            samp = registry.live("sampling")
            if samp is None:
                raise RequestError("no sampling job to sync to (pass target_sub_job_ids)", 409)
            targets = [registry.require(samp.job_id, "sampling")]

        requested = time.perf_counter()
        waited: list[float] = []

        def do():
            waited.append(time.perf_counter() - requested)  # drain: the generate batch in flight finished first
            version = None
            for t in targets:
                t.engine.load_weights_from(train.engine.model)
                if isinstance(t.engine, SamplingEngine):
                    t.engine.policy_version = (
                        req.policy_version if req.policy_version is not None else t.engine.policy_version + 1
                    )
                    version = t.engine.policy_version
            if version is None:
                version = req.policy_version if req.policy_version is not None else train.engine.policy_version
            train.engine.policy_version = version
            return version

        version = await _thread(_locked, train, do, timeout, *targets)
        events.info(
            "weight-sync: training job %s -> jobs %s, policy_version %s",
            train.job_id,
            [t.job_id for t in targets],
            version,
        )
        busy = registry.meter.snapshot()
        events.info(
            "busy: %s any %.2fs overlap %.2fs (weight-sync waited %.3fs for in-flight work)",
            " ".join(f"{k} {busy[k + '_s']:.2f}s" for k in ("training", "sampling", "log_prob")),
            busy["any_s"],
            busy["overlap_s"],
            waited[0] if waited else 0.0,
        )
        return {
            "job_id": train.job_id,
            "status": "ok",
            "policy_version": version,
            "target_job_ids": [t.job_id for t in targets],
        }

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

    @app.post("/weight-sync")
    async def weight_sync(request: Request, job_id: int | None = None):
        return await _weight_sync(job_id, _model(WeightSyncRequest, await _json_body(request)))

    @app.post("/weight-norm")
    async def weight_norm_ep(request: Request):
        req = _model(WeightNormRequest, await _json_body(request, required=True))
        train = registry.require(req.training_job_id, "training")
        samp = registry.require(req.sampling_job_id, "sampling", "log_prob")

        def do():
            tn, tc = weight_norm(train.engine.model)
            sn, sc = engine_weight_norm(samp.engine)
            return {
                "training_norm": tn,
                "sampling_norm": sn,
                "training_num_params": tc,
                "sampling_num_params": sc,
                "policy_version": getattr(samp.engine, "policy_version", None),
            }

        return await _thread(_locked, train, do, timeout, samp)

    # ---- training / log_prob memory: offload ("sleep") and reload ("wake") the torch engines ----
    async def _offload(job_id: int | None, job_type: str, mode: str) -> dict:
        job = registry.require(job_id, job_type)
        out = await _thread(_locked, job, lambda: job.engine.offload(mode), timeout)
        events.info("sleep: %s job %s offloaded (mode %s)", job_type, job.job_id, mode)
        return {"job_id": job.job_id, "workers": [out]}

    async def _reload(job_id: int | None, job_type: str) -> dict:
        job = registry.require(job_id, job_type)
        out = await _thread(_locked, job, lambda: job.engine.reload(), timeout)
        return {"job_id": job.job_id, "workers": [out]}

    @app.post("/sleep-training")
    async def sleep_training(request: Request, job_id: int | None = None, mode: str = "all"):
        body = await _json_body(request)
        if isinstance(body, dict) and body.get("mode") is not None:
            mode = _model(SleepTrainingRequest, body).mode
        if mode not in SLEEP_TRAINING_MODES:
            raise RequestError(f"mode {mode!r} is not one of {list(SLEEP_TRAINING_MODES)}", 422)
        return await _offload(job_id, "training", mode)

    @app.post("/wake-training")
    async def wake_training(request: Request, job_id: int | None = None):
        await _json_body(request)
        return await _reload(job_id, "training")

    @app.post("/sleep-log-prob")
    async def sleep_log_prob(request: Request, job_id: int | None = None):
        await _json_body(request)
        return await _offload(job_id, "log_prob", "all")

    @app.post("/wake-log-prob")
    async def wake_log_prob(request: Request, job_id: int | None = None):
        await _json_body(request)
        return await _reload(job_id, "log_prob")

    @app.post("/empty-training-cache")
    async def empty_training_cache(request: Request, job_id: int | None = None):
        await _json_body(request)
        job = registry.require(job_id, "training")
        out = await _thread(_locked, job, lambda: job.engine.empty_cache(), timeout)
        return {"job_id": job.job_id, "workers": [out]}

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

    @app.post("/operation")
    async def operation(request: Request, job_id: int | None = None):
        req = _model(OperationRequest, await _json_body(request, required=True))
        p = req.payload
        if req.operation_type == "weight-sync":
            ws = WeightSyncRequest(
                source_sub_job_id=p.get("source_sub_job_id"),
                target_sub_job_ids=p.get("target_sub_job_ids"),
                cuda_ipc=p.get("cuda_ipc"),
                low_memory=p.get("low_memory"),
                policy_version=p.get("policy_version"),
            )
            return await _weight_sync(job_id, ws)
        if req.operation_type == "sleep-inference":
            return await _sleep(job_id, int(p.get("level", 1)))
        if req.operation_type == "wake-inference":
            return await _wake(job_id, p.get("tags"))
        if req.operation_type == "reset-prefix-cache":
            return await _reset(job_id)
        raise RequestError(
            f"unknown operation_type {req.operation_type!r} (weight-sync, sleep-inference, wake-inference, "
            "reset-prefix-cache)",
            400,
        )

    for old, new in LEGACY_PATHS.items():

        async def gone(_request: Request, _new=new, _old=old):
            return _err(410, f"{_old} is a 0.1.2-generation endpoint (pickle wire); use {_new}")

        app.add_api_route(old, gone, methods=["POST", "GET"])

    return Guard(app, token=settings.token, max_body_bytes=settings.max_body_bytes)


def _resolve_checkpoint(job: Job, path: str | None, step: int | None) -> Path:
    """As the reference: ``step`` -> ``<path or job dir>/checkpoint-<step>``; ``path`` alone -> that folder; neither
    -> the job dir's ``latest`` (a step number, or a folder name) if present, else the job dir itself."""
    root = Path(path).expanduser() if path else job.checkpoint_root
    if step is not None:
        target = root / f"checkpoint-{step}"
    elif (root / "latest").is_file() and (path is None or not (root / "trainer_state.json").is_file()):
        name = (root / "latest").read_text().strip()
        target = root / (f"checkpoint-{name}" if name.isdigit() else name)
    else:
        target = root
    if not (target / "trainer_state.json").is_file():
        raise RequestError(f"no checkpoint at {target} (no trainer_state.json)", 404)
    return target


def _generate_items(tree: dict, engine: SamplingEngine) -> list[GenerateItem]:
    """Validate a GenerateRequest into per-prompt items (422 naming the field on any problem)."""
    sp_raw = tree.get("sampling_params") or {}
    if not isinstance(sp_raw, dict):
        raise RequestError("sampling_params must be an object", 422)
    sp = SamplingParams.model_validate(sp_raw)
    strict = bool(tree.get("strict", False))
    unsupported = _unsupported_params(sp.model_extra or {})
    if unsupported and strict:
        raise RequestError(f"sampling_params {unsupported} are not supported by the torch engine (strict=true)", 422)
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
            )
        )
    return items
