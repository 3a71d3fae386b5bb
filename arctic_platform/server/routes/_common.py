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
"""What every route module shares: the app context, body readers, frame / JSON replies, engine-thread calls with the
job lock, error mapping ({"detail": one line}) and the ASGI token / body-size :class:`Guard`.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError

from ... import wire
from ...protocol import JobStatus
from ..errors import RequestError
from ..jobs import Job, JobRegistry, ServerLimits, _one_line

if TYPE_CHECKING:
    from ..app import ServerSettings

logger = logging.getLogger("arctic_platform.server")
# Lifecycle events (weight syncs, checkpoints) are logged at INFO even when the server is not --verbose.
events = logging.getLogger("arctic_platform.server.events")

OCTET = wire.CONTENT_TYPE


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


@dataclass
class AppContext:
    """The state every route module's ``register`` closes over (built once by :func:`create_app`)."""

    settings: ServerSettings
    limits: ServerLimits
    registry: JobRegistry
    background: set[asyncio.Task]
    started_at: float

    @property
    def timeout(self) -> float:
        return self.limits.engine_timeout_s


def install_error_handlers(app: FastAPI) -> None:
    """Map every error onto ``{"detail": "<one-line reason>"}`` with its status."""

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


def frame_body_reader(settings: ServerSettings):
    """``await _frame_body(request)``: the request's wire frame, decoded in a thread within the body limits."""

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

    return _frame_body


def _frame(obj: Any) -> Response:
    return Response(content=wire.encode(obj), media_type=OCTET)


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
