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
"""Checkpoints, HDFS, ZeRO stage, ZoRRo training, logits optimizations."""

from __future__ import annotations

from typing import Optional

from ...refusal import Refusal, shown
from ..model import SettingsContext
from .common import RB, A, set_

# ------------------------------------------------------------------------------------------------ checkpoints, misc


def save_contents(ctx: SettingsContext) -> Optional[Refusal]:
    contents = list(ctx.actor.checkpoint.save_contents or [])
    if "hf_model" in contents and not ctx.profile.hf_export:
        path = f"{A}.checkpoint.save_contents"
        return Refusal(
            shown(path, contents),
            ctx.name,
            "cannot export a Hugging Face model",
            "remove hf_model (convert the backend's checkpoint offline)",
            [set_(path, [c for c in contents if c != "hf_model"])],
        )
    return None


def hdfs(ctx: SettingsContext) -> Optional[Refusal]:
    v = ctx.get("trainer.default_hdfs_dir")
    if v:
        return Refusal(
            shown("trainer.default_hdfs_dir", v),
            ctx.name,
            "writes checkpoints on its own filesystem, so verl's HDFS copy would copy nothing",
            "unset it",
            [set_("trainer.default_hdfs_dir", None)],
        )
    return None


def zero_stage(ctx: SettingsContext) -> list[Refusal]:
    stage = ctx.opts.train.deepspeed.zero_optimization.stage
    lp_stage = ctx.opts.log_prob.zero_stage
    lp_stage = stage if lp_stage is None else lp_stage
    ok, lp_ok = ctx.profile.training_zero_stages, ctx.profile.log_prob_zero_stages
    out = []
    if ok is not None and int(stage) not in ok:
        out.append(
            Refusal(
                shown(f"{RB}.train.deepspeed.zero_optimization.stage", stage),
                ctx.name,
                f"initialises its training engine with stages {list(ok)} only (stage 0 with its bf16 + fp32 gradient "
                "accumulation fails in DeepSpeed)",
                "use stage 3",
                [set_(f"{RB}.train.deepspeed.zero_optimization.stage", 3)],
            )
        )
    follows = ctx.opts.log_prob.zero_stage is None and out  # fixing the training stage fixes the one it follows
    if lp_ok is not None and int(ctx.opts.log_prob_gpus) > 0 and int(lp_stage) not in lp_ok and not follows:
        out.append(
            Refusal(
                shown(f"{RB}.log_prob.zero_stage", lp_stage) + " (defaults to the training stage)",
                ctx.name,
                f"initialises its log_prob engine (no optimizer) with stages {list(lp_ok)} only",
                f"set {RB}.log_prob.zero_stage=3",
                [set_(f"{RB}.log_prob.zero_stage", 3)],
            )
        )
    return out


def zorro_train(ctx: SettingsContext) -> list[Refusal]:
    """ZoRRo training (``train.zorro_train``): an Arctic-Platform server's path; ``logits.compute_from_fp32_inputs``
    is read on that path only."""
    o, out = ctx.opts.train, []
    key = f"{RB}.train.zorro_train.enable"
    if o.zorro_train.enable and not ctx.profile.zorro_train:
        out.append(
            Refusal(
                shown(key, True),
                ctx.cortex_name,
                "has no ZoRRo training path (Arctic-Platform's prompt de-duplication; the loss is the same without it)",
                "set it to false, or train on an Arctic-Platform server (remote_backend.arctic.backend.type=onprem)",
                [set_(key, False)],
            )
        )
    fp32 = f"{RB}.train.logits.compute_from_fp32_inputs"
    if o.logits.compute_from_fp32_inputs and not (o.zorro_train.enable and ctx.profile.zorro_train):
        out.append(
            Refusal(
                shown(fp32, True),
                ctx.cortex_name,
                "reads it on the ZoRRo training path only"
                + ("" if ctx.profile.zorro_train else ", which it does not have"),
                "set it to false" + (f", or {key}=true" if ctx.profile.zorro_train else ""),
                [set_(fp32, False)],
            )
        )
    return out


def logits_optimization(ctx: SettingsContext) -> Optional[Refusal]:
    """``train.logits.optimization``: the modes the backend computes (Arctic-Platform's ``memory`` on its ZoRRo path
    only), checked here so that no call is the first to refuse it."""
    key, v = f"{RB}.train.logits.optimization", ctx.opts.train.logits.optimization
    modes = ctx.profile.logits_optimizations
    zorro_only = v in ctx.profile.zorro_only_logits and not ctx.opts.train.zorro_train.enable
    if v in modes and not zorro_only:
        return None
    why = (
        f"computes {v} only on its ZoRRo training path (remote_backend.arctic.train.zorro_train.enable is false)"
        if zorro_only
        else f"computes log-probs with {list(m for m in modes if m not in ctx.profile.zorro_only_logits)} only"
    )
    return Refusal(
        shown(key, v), ctx.cortex_name, why, "set it to none (the same numbers, full logits)", [set_(key, "none")]
    )
