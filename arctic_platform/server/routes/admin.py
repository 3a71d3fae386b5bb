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

from fastapi import FastAPI, Request

from ...protocol import OperationRequest, WeightNormRequest, WeightSyncRequest
from ..engines import SamplingEngine, weight_norm
from ..errors import RequestError
from ..sampling_process import engine_weight_norm
from ._common import AppContext, _err, _json_body, _locked, _model, _thread, events
from .sampling import InferenceOps

LEGACY_PATHS = {
    "/fwd-bwd": "/forward-backward",
    "/fwd-no-grad": "/forward",
    "/save-checkpoint": "/save",
    "/sync-weights": "/weight-sync",
}


def register(app: FastAPI, ctx: AppContext, ops: InferenceOps) -> None:
    """Add the weight-sync, weight-norm, operation and legacy routes to ``app``."""
    registry, timeout = ctx.registry, ctx.timeout
    _sleep, _wake, _reset = ops.sleep, ops.wake, ops.reset

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
                t.engine.load_weights_from(train.engine.weights_for_sync())
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

    @app.post("/weight-sync")
    async def weight_sync(request: Request, job_id: int | None = None):
        return await _weight_sync(job_id, _model(WeightSyncRequest, await _json_body(request)))

    @app.post("/weight-norm")
    async def weight_norm_ep(request: Request):
        req = _model(WeightNormRequest, await _json_body(request, required=True))
        train = registry.require(req.training_job_id, "training")
        samp = registry.require(req.sampling_job_id, "sampling", "log_prob")

        def do():
            tn, tc = weight_norm(train.engine.weights_for_sync())
            sn, sc = engine_weight_norm(samp.engine)
            return {
                "training_norm": tn,
                "sampling_norm": sn,
                "training_num_params": tc,
                "sampling_num_params": sc,
                "policy_version": getattr(samp.engine, "policy_version", None),
            }

        return await _thread(_locked, train, do, timeout, samp)

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
