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
"""Profiling notes."""

from __future__ import annotations

from typing import Optional

from ..model import SettingsContext
from .common import A, R

# ------------------------------------------------------------------------------------------------ profiling


def _profiled(ctx: SettingsContext) -> bool:
    return bool(ctx.get("global_profiler.steps"))


def profile_steps_note(ctx: SettingsContext) -> Optional[str]:
    if _profiled(ctx) and ctx.actor.profiler.enable and not ctx.profile.profiler:
        return (
            f"global_profiler.steps: {ctx.name} has no profiler endpoint, so the profiled steps are not profiled on "
            "the backend (verl's own side still is)"
        )
    return None


def actor_profiler_note(ctx: SettingsContext) -> Optional[str]:
    """``actor.profiler``: what of verl's torch profiler settings the backend's profiler (a trace of every training
    engine call between the step's start and stop) does not apply."""
    if not (_profiled(ctx) and ctx.profile.profiler):
        return None
    prof = ctx.actor.profiler
    if not prof.enable:
        return None
    tool = str(prof.tool or "torch")
    if tool != "torch":
        return (
            f"{A}.profiler.tool={tool!r}: {ctx.name} traces its training job with torch's profiler only; the {tool} "
            "trace covers verl's side"
        )
    torch_cfg = (prof.tool_config or {}).get("torch")
    parts = []
    if torch_cfg is not None:
        extra = [c for c in (torch_cfg.contents or []) if c not in ("cpu", "cuda")]
        if extra:
            parts.append(f"contents {extra} (it records CPU and CUDA activity)")
        if torch_cfg.discrete:
            parts.append("discrete=True (it writes one trace per profiled step)")
        sched = torch_cfg.schedule
        if sched is not None and int(sched.active or 0) > 0:
            parts.append(
                f"schedule (wait={sched.wait}, warmup={sched.warmup}, active={sched.active}): it traces every "
                "engine call between the step's start and stop"
            )
    if not parts:
        return None
    return f"{A}.profiler.tool_config.torch: {ctx.name}'s training-job trace does not apply " + "; ".join(parts)


def rollout_profiler_note(ctx: SettingsContext) -> Optional[str]:
    if _profiled(ctx) and ctx.profile.profiler and ctx.get(f"{R}.profiler.enable"):
        return (
            f"{R}.profiler.enable=True: {ctx.name} has no profiler on its sampling job, so generation is not traced "
            "(the training job is, with actor.profiler)"
        )
    return None
