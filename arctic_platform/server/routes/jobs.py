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
"""Job lifecycle routes: /health, /status, /job/{id}, /initialize, /destroy."""

from __future__ import annotations

import asyncio
import time

from fastapi import FastAPI, Request

from ...protocol import CAPABILITIES, DestroyRequest, JobConfig, JobStatus
from ..capabilities import server_profile
from ..errors import RequestError
from ._common import AppContext, _json_body, _model, _thread, events


def register(app: FastAPI, ctx: AppContext) -> None:
    """Add the job lifecycle routes to ``app``."""
    limits, registry, background, started_at = ctx.limits, ctx.registry, ctx.background, ctx.started_at
    profile = server_profile().model_dump(mode="json")

    # ---- control plane ----
    @app.get("/health")
    async def health():
        # The reference answers {"status": "OK"}; "capabilities" (protocol.CAPABILITIES) and "profile" (what the
        # engines honour: backend_profile.BackendProfile) are this server's extensions.
        return {"status": "OK", "capabilities": list(CAPABILITIES), "profile": profile}

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
        served = ""
        if job.batcher is not None:  # kept, closed: a /generate that races the destroy gets its 409
            b = job.batcher
            served = f" (served {b.requests} generate request(s) in {b.batches} engine batch(es))"
            b.close()
        await _thread(registry.destroy, job, "destroyed by a client")
        events.info("destroy: %s job %s destroyed by a client%s", job.job_type, job_id, served)
        return {"job_id": job_id, "status": job.status}
