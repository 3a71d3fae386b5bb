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
"""The rollout: log-probs, rollout correction, the rollout name, colocation."""

from __future__ import annotations

from typing import Optional

from ...refusal import Refusal, shown
from ..model import SettingsContext
from .common import RB, R, set_, verl_default

# ------------------------------------------------------------------------------------------------ rollout


def log_prob_dynamic_note(block: str):
    """Token-budget log-prob micro-batches on a backend that cuts them by its micro-batch size: memory only."""

    def note(ctx: SettingsContext) -> Optional[str]:
        if ctx.get(f"{block}.log_prob_use_dynamic_bsz") and not ctx.profile.dynamic_bsz:
            return (
                f"{block}.log_prob_use_dynamic_bsz=True: {ctx.name} cuts /forward micro-batches by its micro-batch "
                "size, not by token budgets; log-probs are per row, so only its memory use differs"
            )
        return None

    return note


def rollout_logprobs_note(ctx: SettingsContext) -> Optional[str]:
    on = ctx.rollout.calculate_log_probs
    if on and ctx.backend_type == "cortex" and not ctx.old_from_rollout():
        return (
            f"{R}.calculate_log_probs=True: {ctx.over} has no /forward, so verl's old log-probs are "
            "zeros the update never reads; verl's rollout-vs-old log-prob diagnostics compare against them"
        )
    if on and not ctx.profile.rollout_logprobs:
        return (
            f"{R}.calculate_log_probs=True: {ctx.name}'s sampler returns no log-probs, so they are not "
            "requested; training is unchanged (verl recomputes old log-probs), only verl's rollout-vs-training "
            "log-prob diagnostics are absent"
        )
    return None


def rollout_correction(ctx: SettingsContext) -> list[Refusal]:
    rc = ctx.algorithm.rollout_correction or {}  # verl's RolloutCorrectionConfig, kept a mapping by AlgoConfig
    p = ctx.profile
    out: list[Refusal] = []
    base = "algorithm.rollout_correction"
    if ctx.backend_type == "cortex" and not rc.get("bypass_mode"):
        for key in ("rollout_is", "rollout_rs"):
            if rc.get(key):
                out.append(
                    Refusal(
                        shown(f"{base}.{key}", rc.get(key)),
                        ctx.over,
                        "cannot recompute verl's old log-probs (no /forward), and this compares the rollout's with "
                        "them",
                        "turn it off, or use bypass_mode=true (old log-probs from the rollout)",
                        [set_(f"{base}.{key}", None)],
                    )
                )
        if out:
            return out
    if rc.get("rollout_is") and not (p.rollout_is_weights and p.rollout_logprobs):
        out.append(
            Refusal(
                shown(f"{base}.rollout_is", rc.get("rollout_is")),
                p.name,
                ("drops rollout IS weights" if p.rollout_logprobs else "returns no rollout log-probs")
                + ", so the updates would be silently unweighted",
                "set it to null, or use the embedded server",
                [set_(f"{base}.rollout_is", None)],
            )
        )
    for key in ("rollout_rs", "bypass_mode"):
        v = rc.get(key)
        if v and not p.rollout_logprobs:
            out.append(
                Refusal(
                    shown(f"{base}.{key}", v),
                    p.name,
                    "returns no rollout log-probs from its sampler, and this needs them",
                    "turn it off",
                    [set_(f"{base}.{key}", None if key == "rollout_rs" else False)],
                )
            )
    return out


def logprobs_mode(ctx: SettingsContext) -> Optional[Refusal]:
    mode = ctx.rollout.logprobs_mode
    default = verl_default(ctx, f"{R}.logprobs_mode")
    if mode != default:
        return Refusal(
            shown(f"{R}.logprobs_mode", mode),
            ctx.name,
            "returns log-probs of the processed (temperature-scaled) distribution only",
            f"use {default}",
            [set_(f"{R}.logprobs_mode", default)],
        )
    return None


def rollout_name(ctx: SettingsContext) -> Optional[Refusal]:
    name = ctx.get(f"{R}.name")
    if name != "arctic":
        return Refusal(
            shown(f"{R}.name", name),
            ctx.name,
            "generates through its sampling job (remote_backend=arctic), not verl's own rollout engines",
            "set actor_rollout_ref.rollout.name=arctic",
            [set_(f"{R}.name", "arctic")],
        )
    return None


def engine_kwargs_note(ctx: SettingsContext) -> Optional[str]:
    """``rollout.engine_kwargs.<engine>`` of an engine the backend does not sample with (vLLM's are sent)."""
    kwargs = ctx.get(f"{R}.engine_kwargs") or {}
    other = {e: kw for e, kw in kwargs.items() if e != "vllm" and kw}
    if other:
        listed = ", ".join(f"{R}.engine_kwargs.{e}.{k}" for e, kw in other.items() for k in kw)
        return f"{listed}: {ctx.name} samples with vLLM (or its torch engine), so these have no effect"
    return None


def colocate(ctx: SettingsContext) -> Optional[Refusal]:
    if ctx.opts.colocate and not ctx.profile.sleep_wake:
        return Refusal(
            shown(f"{RB}.colocate", True),
            ctx.name,
            "has no sleep/wake to free the sampler's memory",
            "set it to false",
            [set_(f"{RB}.colocate", False)],
        )
    return None
