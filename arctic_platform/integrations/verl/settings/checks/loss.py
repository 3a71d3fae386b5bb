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
"""The loss: policy loss, clipping, aggregation, KL, epochs, micro-batching."""

from __future__ import annotations

from typing import Optional

from ...refusal import Refusal, shown
from ...verl_config import per_gpu
from ..model import SettingsContext
from .common import RB, A, F, R, set_

# ------------------------------------------------------------------------------------------------ the loss


def loss_mode(ctx: SettingsContext) -> Optional[Refusal]:
    mode = ctx.actor.policy_loss.loss_mode
    if mode not in ctx.profile.loss_modes:
        path = f"{A}.policy_loss.loss_mode"
        return Refusal(
            shown(path, mode),
            ctx.name,
            f"computes only {list(ctx.profile.loss_modes)}",
            "use loss_mode=vanilla, or a backend that implements it",
            [set_(path, "vanilla")],
        )
    return None


def clip_ratios(ctx: SettingsContext) -> Optional[Refusal]:
    fixed = ctx.profile.clip_ratios
    if fixed == "config":
        return None
    a = ctx.actor
    low, high = ctx.get(f"{A}.clip_ratio_low"), ctx.get(f"{A}.clip_ratio_high")
    eff = (a.clip_ratio if low is None else low, a.clip_ratio if high is None else high, a.clip_ratio_c)
    if tuple(float(x) for x in eff) == tuple(fixed):
        return None
    # name what the user set: clip_ratio where it stands in for an unset low / high
    names = ("clip_ratio" if low is None else "clip_ratio_low", "clip_ratio" if high is None else "clip_ratio_high")
    off = [f"{A}.{n}={v}" for n, v, f in zip((*names, "clip_ratio_c"), eff, fixed, strict=True) if float(v) != f]
    return Refusal(
        ", ".join(dict.fromkeys(off)),
        ctx.name,
        f"hard-codes (clip_ratio_low, clip_ratio_high, clip_ratio_c) = {fixed} and ignores the config",
        f"set them to {fixed} (clip_ratio={fixed[0]}), or use a backend that reads them",
        [
            set_(f"{A}.clip_ratio", fixed[0]),
            set_(f"{A}.clip_ratio_low", fixed[0]),
            set_(f"{A}.clip_ratio_high", fixed[1]),
            set_(f"{A}.clip_ratio_c", fixed[2]),
        ],
    )


def agg_mode(ctx: SettingsContext) -> Optional[Refusal]:
    mode = ctx.actor.loss_agg_mode
    allowed = list(ctx.profile.agg_modes)
    if mode in allowed:
        return None
    why = (
        "packs each micro-batch into one row, so this mode would aggregate micro-batches, not sequences"
        if mode.startswith("seq-mean")
        else "does not implement it"
    )
    path = f"{A}.loss_agg_mode"
    return Refusal(shown(path, mode), ctx.name, why, f"use one of {allowed}", [set_(path, allowed[0])])


def kl_type(ctx: SettingsContext) -> Optional[Refusal]:
    a = ctx.actor
    if not a.use_kl_loss or a.kl_loss_type in ctx.profile.kl_types:
        return None
    allowed = list(ctx.profile.kl_types)
    path = f"{A}.kl_loss_type"
    return Refusal(
        shown(path, a.kl_loss_type),
        ctx.name,
        f"computes only {allowed}",
        "use one of them, or set use_kl_loss=false",
        [set_(path, allowed[0])],
    )


def _needs_reference(ctx: SettingsContext, path: str, off: str) -> Optional[Refusal]:
    if ctx.backend_type == "cortex":
        return Refusal(
            shown(path, True),
            ctx.over,
            "has no /forward, and this needs its reference log-probs",
            f"{off}, or use backend.type=onprem",
            [set_(path, False)],
        )
    if int(ctx.opts.log_prob_gpus) == 0:
        return Refusal(
            shown(path, True),
            ctx.name,
            f"has no reference (log_prob) job with {RB}.log_prob_gpus=0, and it needs reference log-probs",
            f"set {RB}.log_prob_gpus >= 1, or {off}",
            [set_(f"{RB}.log_prob_gpus", 1)],
        )
    return None


def use_kl(ctx: SettingsContext) -> Optional[Refusal]:
    if not ctx.actor.use_kl_loss:
        return None
    return _needs_reference(ctx, f"{A}.use_kl_loss", "use_kl_loss=false")


def kl_in_reward(ctx: SettingsContext) -> Optional[Refusal]:
    if not ctx.algorithm.use_kl_in_reward:
        return None
    return _needs_reference(ctx, "algorithm.use_kl_in_reward", "use_kl_in_reward=false")


# Cortex has no /forward: verl's old log-probs are the rollout's (bypass mode), or are not computed at all and the
# backend's loss uses the current policy's, detached, which equals verl's only for one mini-batch of one epoch.
_NO_FORWARD_WAY_OUT = (
    "or take the old log-probs from the rollout (algorithm.rollout_correction.bypass_mode=true with "
    f"{R}.calculate_log_probs=true), or use backend.type=onprem"
)


def ppo_epochs(ctx: SettingsContext) -> Optional[Refusal]:
    epochs = int(ctx.actor.ppo_epochs)
    if ctx.backend_type == "cortex" and epochs > 1 and not ctx.old_from_rollout():
        path = f"{A}.ppo_epochs"
        return Refusal(
            shown(path, epochs),
            ctx.over,
            "has no /forward, and a second epoch needs old log-probs from it (those of the updated policy)",
            f"set ppo_epochs=1, {_NO_FORWARD_WAY_OUT}",
            [set_(path, 1)],
        )
    return None


def cortex_mini_batches(ctx: SettingsContext) -> Optional[Refusal]:
    if ctx.backend_type != "cortex" or ctx.old_from_rollout():
        return None
    mini, batch = int(ctx.actor.ppo_mini_batch_size), int(ctx.get("data.train_batch_size"))
    if mini < batch:
        return Refusal(
            f"{A}.ppo_mini_batch_size={mini}, data.train_batch_size={batch} (several optimizer steps a training step)",
            ctx.over,
            "has no /forward for the old log-probs they need (after the first step the current policy is no longer "
            "the old one)",
            f"set ppo_mini_batch_size=data.train_batch_size, {_NO_FORWARD_WAY_OUT}",
            [set_(f"{A}.ppo_mini_batch_size", batch)],
        )
    return None


def cortex_entropy(ctx: SettingsContext) -> Optional[Refusal]:
    coeff = float(ctx.actor.entropy_coeff or 0.0)
    if ctx.backend_type == "cortex" and coeff != 0.0:
        path = f"{A}.entropy_coeff"
        return Refusal(
            shown(path, coeff),
            ctx.over,
            "estimates entropy from the detached log-probs in its grpo loss, so the bonus has no gradient",
            "set entropy_coeff=0, or use backend.type=onprem",
            [set_(path, 0)],
        )
    return None


def _divisor(n: int, at_most: int) -> int:
    return max(d for d in range(1, max(1, min(n, at_most)) + 1) if n % d == 0)


def dynamic_bsz(ctx: SettingsContext) -> Optional[Refusal]:
    # an Arctic-Platform server's ZoRRo path packs micro-batches by the token budget (ds_worker_config.max_token_len =
    # ppo_max_token_len_per_gpu), as verl's dynamic batch size does
    zorro = ctx.profile.zorro_train and ctx.opts.train.zorro_train.enable
    if not ctx.actor.use_dynamic_bsz or ctx.profile.dynamic_bsz or zorro:
        return None
    gpus = max(1, int(ctx.opts.training_gpus))
    rows = int(ctx.actor.ppo_mini_batch_size) * int(ctx.rollout.n)
    micro = _divisor(max(1, rows // gpus), 8)
    fix = [set_(f"{A}.use_dynamic_bsz", False), set_(f"{A}.ppo_micro_batch_size_per_gpu", micro)]
    # without token budgets verl's validate_config asks the log-prob micro-batch sizes too
    for block in (R, F):
        if (
            ctx.get(f"{block}.log_prob_micro_batch_size") is None
            and ctx.get(f"{block}.log_prob_micro_batch_size_per_gpu") is None
        ):
            fix.append(set_(f"{block}.log_prob_micro_batch_size_per_gpu", micro))
    return Refusal(
        shown(f"{A}.use_dynamic_bsz", True),
        ctx.name,
        "has no token-budget micro-batches (it splits a mini-batch into ppo_micro_batch_size_per_gpu rows)",
        f"set use_dynamic_bsz=false and ppo_micro_batch_size_per_gpu (e.g. {micro}, a divisor of the {rows // gpus} "
        "rows per GPU), and the rollout's and reference's log_prob_micro_batch_size_per_gpu verl then asks for",
        fix,
    )


def micro_batches(ctx: SettingsContext) -> Optional[Refusal]:
    """verl asserts that a mini-batch per data-parallel rank is a whole number of fixed micro-batches (and DeepSpeed
    that train_batch_size = micro x gradient_accumulation_steps x GPUs); the backend would cut an uneven last one."""
    a = ctx.actor
    if a.use_dynamic_bsz:
        return None
    gpus = max(1, int(ctx.opts.training_gpus))
    micro = per_gpu(a, "ppo_micro_batch_size", gpus)
    rows = int(a.ppo_mini_batch_size) * int(ctx.rollout.n)
    if micro is None or rows % (micro * gpus) == 0:
        return None
    given = "ppo_micro_batch_size_per_gpu" if a.ppo_micro_batch_size_per_gpu is not None else "ppo_micro_batch_size"
    if rows % gpus:
        way_out, fix = (f"set {RB}.training_gpus to a divisor of {rows}", [set_(f"{RB}.training_gpus", 1)])
    else:
        d = _divisor(rows // gpus, micro)
        way_out = f"set ppo_micro_batch_size_per_gpu to a divisor of {rows // gpus}"
        fix = [set_(f"{A}.ppo_micro_batch_size", None), set_(f"{A}.ppo_micro_batch_size_per_gpu", d)]
    return Refusal(
        shown(f"{A}.{given}", getattr(a, given)),
        ctx.name,
        f"would train an uneven last micro-batch: a mini-batch of ppo_mini_batch_size x rollout.n = {rows} rows on "
        f"{RB}.training_gpus={gpus} is not a whole number of micro-batches of {micro} rows per GPU (verl asserts it)",
        way_out,
        fix,
    )
