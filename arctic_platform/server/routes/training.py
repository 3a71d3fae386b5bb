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
"""Training routes (job ``training``; /forward also ``log_prob``): /forward-backward, /forward, /step, /save,
/load-checkpoint, /sleep-training, /wake-training, /sleep-log-prob, /wake-log-prob, /empty-training-cache, and the
extension /profile (torch profiler of the training engine).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request

from ...endpoints import endpoint
from ...protocol import (
    SLEEP_TRAINING_MODES,
    LoadCheckpointRequest,
    ProfileRequest,
    SaveRequest,
    SleepTrainingRequest,
    StepRequest,
)
from ..engine_calls import call_locked, in_thread
from ..errors import RequestError
from ..jobs import Job
from ..logs import events
from .bodies import frame_reply, parse_model, read_frame, read_json
from .context import AppContext, Ctx, ForwardJob, TrainingJob

router = APIRouter()


async def _batch_op(request: Request, ctx: AppContext, job: Job, backward: bool):
    """Read the frame body, then ``forward_backward`` (``backward``) or ``forward`` of the job's awake engine with
    ``(batch, meta, processing)``, under the job's lock."""
    tree = await read_frame(request, ctx.settings)

    def call():
        engine = job.engine
        engine.require_awake()
        args = (tree.get("batch"), tree.get("meta") or {}, tree.get("processing"))
        return engine.forward_backward(*args) if backward else engine.forward(*args)

    return await in_thread(call_locked, job, call, ctx.timeout)


@router.post(endpoint("forward_backward").path)
async def forward_backward(request: Request, ctx: Ctx, job: TrainingJob):
    out = await _batch_op(request, ctx, job, backward=True)
    return frame_reply({"job_id": job.job_id, **out})


@router.post(endpoint("forward").path)
async def forward(request: Request, ctx: Ctx, job: ForwardJob):
    out = await _batch_op(request, ctx, job, backward=False)
    return frame_reply({"job_id": job.job_id, "avg_loss": None, **out})


@router.post(endpoint("step").path)
async def step(request: Request, ctx: Ctx, job: TrainingJob):
    req = parse_model(StepRequest, await read_json(request))

    def call():
        job.engine.require_awake()
        return job.engine.step(
            req.learning_rate,
            lr_scheduler_step=req.lr_scheduler_step,
            total_training_steps=req.total_training_steps,
        )

    out = await in_thread(call_locked, job, call, ctx.timeout)
    return {"job_id": job.job_id, "batch": {}, **out}


@router.post(endpoint("profile").path)
async def profile(request: Request, ctx: Ctx, job: TrainingJob):
    """Extension: start / stop the training engine's torch profiler (``{"action": "start"|"stop", ...}``)."""
    req = parse_model(ProfileRequest, await read_json(request))
    path = Path(req.path).expanduser() if req.path else job.checkpoint_root / "profile"
    out = await in_thread(call_locked, job, lambda: job.engine.profile(req.action, path, req.tag), ctx.timeout)
    events.info("profile: training job %s %s %s", job.job_id, req.action, out.get("trace", ""))
    return {"job_id": job.job_id, **out}


@router.post(endpoint("save").path)
async def save(request: Request, ctx: Ctx, job: TrainingJob):
    req = parse_model(SaveRequest, await read_json(request))
    root = Path(req.path).expanduser() if req.path else job.checkpoint_root
    out = await in_thread(
        call_locked, job, lambda: job.engine.save(root, req.step, req.save_total_limit, req.export_hf), ctx.timeout
    )
    events.info("save: training job %s -> %s (global_step %s)", job.job_id, out.get("path"), out.get("global_step"))
    return {"job_id": job.job_id, **out}


@router.post(endpoint("load_checkpoint").path)
async def load_checkpoint(request: Request, ctx: Ctx, job: TrainingJob):
    req = parse_model(LoadCheckpointRequest, await read_json(request))
    target = _resolve_checkpoint(job, req.path, req.step)
    out = await in_thread(call_locked, job, lambda: job.engine.load(target), ctx.timeout)
    events.info(
        "load-checkpoint: training job %s <- %s (global_step %s)",
        job.job_id,
        out.get("path"),
        out.get("global_step"),
    )
    return {"job_id": job.job_id, **out}


# ---- training / log_prob memory: offload ("sleep") and reload ("wake") the torch engines ----
# These read their body first and look the job up after it, as they always have.


async def _engine_op(ctx: AppContext, job_id: int | None, name: str, op: str, mode: str = "all") -> dict:
    """Run ``job.engine.<op>`` (``offload(mode)``, ``reload()`` or ``empty_cache()``) under the job's lock, on the job
    endpoint ``name`` names."""
    job = ctx.registry.require(job_id, *endpoint(name).job_types)
    job_type = job.job_type

    def call():  # job.engine is read under the lock
        engine = job.engine
        if op == "offload":
            return engine.offload(mode)
        if op == "reload":
            return engine.reload()
        return engine.empty_cache()

    out = await in_thread(call_locked, job, call, ctx.timeout)
    if op == "offload":
        events.info("sleep: %s job %s offloaded (mode %s)", job_type, job.job_id, mode)
    return {"job_id": job.job_id, "workers": [out]}


@router.post(endpoint("sleep_training").path)
async def sleep_training(request: Request, ctx: Ctx, job_id: int | None = None, mode: str = "all"):
    body = await read_json(request)
    if isinstance(body, dict) and body.get("mode") is not None:
        mode = parse_model(SleepTrainingRequest, body).mode
    if mode not in SLEEP_TRAINING_MODES:
        raise RequestError(f"mode {mode!r} is not one of {list(SLEEP_TRAINING_MODES)}", 422)
    return await _engine_op(ctx, job_id, "sleep_training", "offload", mode)


def _bodyless_route(name: str, op: str):
    """A route with no body arguments: an empty body or any well-formed JSON body (checked, then ignored)."""

    async def route(request: Request, ctx: Ctx, job_id: int | None = None):
        await read_json(request)
        return await _engine_op(ctx, job_id, name, op)

    return route


for _name, _op in (
    ("wake_training", "reload"),
    ("sleep_log_prob", "offload"),
    ("wake_log_prob", "reload"),
    ("empty_training_cache", "empty_cache"),
):
    router.post(endpoint(_name).path, name=_name)(_bodyless_route(_name, _op))


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
