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
uvicorn. The app is the routers of :mod:`.routes` (one per concern), their shared :class:`.routes.context.AppContext`
in ``app.state.ctx``, the error handlers of :mod:`.error_handlers` and the :class:`.guard.Guard` in front.

Request bodies: ``application/octet-stream`` is an :mod:`arctic_platform.wire` frame, ``application/json`` is JSON;
the decoder is chosen by Content-Type only. Replies to data-plane calls are frames, control replies JSON.

Every error is ``{"detail": "<one-line reason>"}``: 400 bad request / framing / wrong job type, 401 missing token,
404 unknown job, 409 job state, 413 body too large, 415 wrong content type, 422 schema, 503/504 engine busy or
timed out, 500 a server bug. After any of them the server keeps serving.
"""

from __future__ import annotations

import time
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from .capabilities import server_profile
from .engine_calls import in_thread
from .error_handlers import install_error_handlers
from .guard import Guard
from .jobs import JobRegistry
from .routes import admin, sampling, training
from .routes import jobs as job_routes
from .routes.context import AppContext
from .settings import ServerLimits, ServerSettings

__all__ = ["ServerSettings", "create_app"]


def create_app(settings: ServerSettings) -> Any:
    """Build the ASGI app (FastAPI wrapped in :class:`Guard`). ``app.state.registry`` holds the jobs."""
    limits = settings.limits or ServerLimits()
    registry = JobRegistry(limits)

    @asynccontextmanager
    async def lifespan(_app):
        yield
        for job in registry.all():
            if job.batcher is not None:
                job.batcher.close()
        await in_thread(registry.shutdown)

    app = FastAPI(title="Arctic RL server (arctic-verl embedded)", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.registry = registry
    app.state.ctx = AppContext(
        settings=settings,
        limits=limits,
        registry=registry,
        background=set(),
        started_at=time.time(),
        profile=server_profile().model_dump(mode="json"),
    )
    install_error_handlers(app)
    for module in (job_routes, training, sampling, admin):
        app.include_router(module.router)
    return Guard(app, token=settings.token, max_body_bytes=settings.max_body_bytes)
