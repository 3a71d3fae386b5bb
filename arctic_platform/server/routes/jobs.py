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
import os
import time

from fastapi import APIRouter, Request

from ...endpoints import endpoint
from ...protocol import CAPABILITIES, DestroyRequest, JobConfig, JobStatus
from ..engine_calls import in_thread
from ..errors import RequestError
from ..logs import events
from .bodies import parse_model, read_json
from .context import Ctx

router = APIRouter()


@router.get(endpoint("health").path)
async def health(ctx: Ctx):
    # The reference answers {"status": "OK"}; "capabilities" (protocol.CAPABILITIES) and "profile" (what the
    # engines honour: backend_profile.BackendProfile) are this server's extensions.
    return {"status": "OK", "capabilities": list(CAPABILITIES), "profile": ctx.profile}


@router.get(endpoint("status").path)
async def status(ctx: Ctx):
    limits, registry = ctx.limits, ctx.registry
    return {
        **{f"{job_type}_gpus": n for job_type, n in limits.job_gpus().items()},
        "jobs": {str(j.job_id): j.info() for j in registry.all()},
        "server": {
            "uptime_s": time.time() - ctx.started_at,
            "default_model": limits.default_model,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "busy": registry.meter.snapshot(),
        },
    }


@router.get(endpoint("job_info").path)
async def job_info(ctx: Ctx, job_id: int):
    return ctx.registry.get(job_id).info()


@router.post(endpoint("initialize").path)
async def initialize(request: Request, ctx: Ctx):
    registry = ctx.registry
    cfg = parse_model(JobConfig, await read_json(request, required=True))
    job = registry.create(cfg)

    async def build():
        await in_thread(registry.build, job)

    task = asyncio.create_task(build())
    ctx.background.add(task)
    task.add_done_callback(ctx.background.discard)
    return {
        "job_id": job.job_id,
        "job_type": job.job_type,
        "running": job.status == JobStatus.RUNNING,
        "status": job.status,  # extension: PENDING while the build runs (poll /job/{id})
    }


@router.post(endpoint("destroy").path)
async def destroy(request: Request, ctx: Ctx, job_id: int | None = None):
    # the body first, then the job: as the reference checks them
    req = parse_model(DestroyRequest, await read_json(request, required=True))
    if job_id is None:
        raise RequestError("the job_id query parameter is required", 422)
    job = ctx.registry.get(job_id)
    if req.job_type != job.job_type:
        raise RequestError(f"job {job_id} is a {job.job_type} job, not {req.job_type}", 400)
    served = ""
    if job.batcher is not None:  # kept, closed: a /generate that races the destroy gets its 409
        b = job.batcher
        served = f" (served {b.requests} generate request(s) in {b.batches} engine batch(es))"
        b.close()
    await in_thread(ctx.registry.destroy, job, "destroyed by a client")
    events.info("destroy: %s job %s destroyed by a client%s", job.job_type, job_id, served)
    return {"job_id": job_id, "status": job.status}
