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
"""Cross-job and admin routes: /weight-sync, /weight-norm, /operation, and 410 on the 0.1.2-generation paths."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request

from ...endpoints import OPERATION_TYPES, endpoint
from ...protocol import JOB_TYPES, OperationRequest, WeightNormRequest, WeightSyncRequest
from ..engine_calls import call_locked, in_thread
from ..engines.base import SamplingInterface
from ..error_handlers import error_reply
from ..errors import RequestError
from ..logs import events
from . import inference_ops
from .bodies import parse_model, read_json
from .context import AppContext, Ctx

LEGACY_PATHS = {
    "/fwd-bwd": "/forward-backward",
    "/fwd-no-grad": "/forward",
    "/save-checkpoint": "/save",
    "/sync-weights": "/weight-sync",
}

router = APIRouter()


async def _weight_sync(ctx: AppContext, job_id: int | None, req: WeightSyncRequest) -> dict:
    registry = ctx.registry
    train = registry.require(job_id, *endpoint("sync_weights").job_types)
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
            t.engine.load_weights_from(train.engine.weights_for_sync())
            if isinstance(t.engine, SamplingInterface):
                t.engine.policy_version = (
                    req.policy_version if req.policy_version is not None else t.engine.policy_version + 1
                )
                version = t.engine.policy_version
        if version is None:
            version = req.policy_version if req.policy_version is not None else train.engine.policy_version
        train.engine.policy_version = version
        return version

    version = await in_thread(call_locked, train, do, ctx.timeout, *targets)
    events.info(
        "weight-sync: training job %s -> jobs %s, policy_version %s",
        train.job_id,
        [t.job_id for t in targets],
        version,
    )
    busy = registry.meter.snapshot()
    events.info(
        "busy: %s any %.2fs overlap %.2fs (weight-sync waited %.3fs for in-flight work)",
        " ".join(f"{k} {busy[k + '_s']:.2f}s" for k in JOB_TYPES),
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


@router.post(endpoint("weight_sync_route").path)
async def weight_sync(request: Request, ctx: Ctx, job_id: int | None = None):
    return await _weight_sync(ctx, job_id, parse_model(WeightSyncRequest, await read_json(request)))


@router.post(endpoint("weight_norm").path)
async def weight_norm_ep(request: Request, ctx: Ctx):
    req = parse_model(WeightNormRequest, await read_json(request, required=True))
    train = ctx.registry.require(req.training_job_id, "training")
    samp = ctx.registry.require(req.sampling_job_id, "sampling", "log_prob")

    def do():
        tn, tc = train.engine.weight_norm()
        sn, sc = samp.engine.weight_norm()
        return {
            "training_norm": tn,
            "sampling_norm": sn,
            "training_num_params": tc,
            "sampling_num_params": sc,
            "policy_version": samp.engine.policy_version,
        }

    return await in_thread(call_locked, train, do, ctx.timeout, samp)


@router.post(endpoint("sync_weights").path)
async def operation(request: Request, ctx: Ctx, job_id: int | None = None):
    req = parse_model(OperationRequest, await read_json(request, required=True))
    p = req.payload
    if req.operation_type == "weight-sync":
        ws = WeightSyncRequest(
            source_sub_job_id=p.get("source_sub_job_id"),
            target_sub_job_ids=p.get("target_sub_job_ids"),
            cuda_ipc=p.get("cuda_ipc"),
            low_memory=p.get("low_memory"),
            policy_version=p.get("policy_version"),
        )
        return await _weight_sync(ctx, job_id, ws)
    if req.operation_type == "sleep-inference":
        return await inference_ops.sleep_inference(ctx, job_id, int(p.get("level", 1)))
    if req.operation_type == "wake-inference":
        return await inference_ops.wake_inference(ctx, job_id, p.get("tags"))
    if req.operation_type == "reset-prefix-cache":
        return await inference_ops.reset_prefix_cache(ctx, job_id)
    raise RequestError(f"unknown operation_type {req.operation_type!r} ({', '.join(OPERATION_TYPES)})", 400)


def _gone(old: str, new: str):
    async def gone(_request: Request):
        return error_reply(410, f"{old} is a 0.1.2-generation endpoint (pickle wire); use {new}")

    return gone


for _old, _new in LEGACY_PATHS.items():
    router.add_api_route(_old, _gone(_old, _new), methods=["POST", "GET"])
