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
"""The optimizer and LR schedule."""

from __future__ import annotations

from typing import Optional

from ...refusal import Refusal, shown
from ...verl_config import OPTIM
from ..model import SettingsContext
from .common import RB, A, set_

# ------------------------------------------------------------------------------------------------ optimizer, schedule


def training_spec(ctx: SettingsContext) -> list[Refusal]:
    """The optimizer and schedule values the backend would run differently (:func:`...verl_config.training_spec`)."""
    return [Refusal(shown(f"{OPTIM}.{m.key}", m.value), ctx.name, m.why, m.way_out, m.fix) for m in ctx.spec.mismatches]


def lr_per_step(ctx: SettingsContext) -> Optional[Refusal]:
    """verl ticks the LR once per training step; a backend without verl's schedule ticks once per /step."""
    from ...verl_config import optimizer_steps_per_training_step

    if ctx.profile.lr_schedule:
        return None
    schedule = ctx.spec.schedule
    k = optimizer_steps_per_training_step(ctx.cfg)
    if not schedule.moves() or k <= 1 or ctx.opts.train.lr_per_optimizer_step:
        return None
    if schedule.kind != "constant":
        what = shown(f"{OPTIM}.{ctx.spec.kind_key}", schedule.kind)
    elif schedule.lr_warmup_steps is not None and schedule.lr_warmup_steps > 0:
        what = shown(f"{OPTIM}.lr_warmup_steps", int(schedule.lr_warmup_steps))
    else:
        what = shown(f"{OPTIM}.lr_warmup_steps_ratio", schedule.lr_warmup_steps_ratio)
    flag = f"{RB}.train.lr_per_optimizer_step"
    return Refusal(
        f"{what} (a moving LR) with {k} optimizer steps per training step",
        ctx.name,
        "ticks its scheduler on every /step (verl ticks once per training step, so every mini-batch of a step gets "
        "the same LR)",
        f"set actor.ppo_mini_batch_size=data.train_batch_size (one step), or accept the per-optimizer-step schedule "
        f"with {flag}=true",
        [set_(flag, True)],
    )


def total_steps(ctx: SettingsContext) -> Optional[Refusal]:
    """A horizon verl derives from the dataloader reaches only a backend with verl's schedule (first /step): a backend
    that builds its scheduler with the job needs ``trainer.total_training_steps`` for a cosine schedule and for a
    warmup given as a ratio (without a horizon the ratio gives zero warmup steps)."""
    schedule = ctx.spec.schedule
    if ctx.profile.lr_schedule or schedule.horizon is not None or not schedule.needs_horizon():
        return None
    if schedule.kind == "cosine":
        what, why = shown(f"{OPTIM}.{ctx.spec.kind_key}", "cosine"), "the cosine would have no horizon"
    else:
        what = shown(f"{OPTIM}.lr_warmup_steps_ratio", schedule.lr_warmup_steps_ratio)
        why = "the ratio would give zero warmup steps"
    return Refusal(
        f"trainer.total_training_steps=None with {what}",
        ctx.name,
        f"creates its scheduler with the job, before verl counts the dataloader, so {why}",
        "set trainer.total_training_steps"
        + ("" if schedule.kind == "cosine" else ", or lr_warmup_steps (a step count) instead of the ratio"),
    )


def cosine_options(ctx: SettingsContext) -> list[Refusal]:
    """``num_cycles`` / ``zero_indexed_step``: read by verl's cosine schedule only; a backend without verl's schedule
    runs DeepSpeed's ``WarmupCosineLR`` from ``ds_config``, which has neither option."""
    schedule = ctx.spec.schedule
    if ctx.profile.lr_schedule or schedule.kind != "cosine":
        return []
    out = []
    for key in ("num_cycles", "zero_indexed_step"):
        if not hasattr(ctx.optim, key):
            continue
        v, default = getattr(ctx.optim, key), type(ctx.optim).__dataclass_fields__[key].default
        if v != default:
            out.append(
                Refusal(
                    shown(f"{OPTIM}.{key}", v),
                    ctx.name,
                    "runs DeepSpeed's WarmupCosineLR (ds_config.scheduler), which has no such option",
                    f"set it to {default!r} (verl's default)",
                    [set_(f"{OPTIM}.{key}", default)],
                )
            )
    return out


def grad_clip_note(ctx: SettingsContext) -> Optional[str]:
    """``actor.grad_clip``: verl's V1 engines clip at ``optim.clip_grad`` only."""
    legacy = ctx.get(f"{A}.grad_clip")
    if legacy is not None and float(legacy) != float(ctx.optim.clip_grad):
        return (
            f"{A}.grad_clip={legacy}: not read by verl's V1 engines, nor by {ctx.name}; the gradients are clipped at "
            f"{OPTIM}.clip_grad={ctx.optim.clip_grad} (set that one)"
        )
    return None
