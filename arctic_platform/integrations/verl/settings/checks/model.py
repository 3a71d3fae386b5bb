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
"""The model and LoRA: adapters, Liger, ``override_config``, sequence parallelism."""

from __future__ import annotations

from typing import Optional

from ...refusal import Refusal, shown
from ..model import Check, SettingsContext
from .common import RB, A, F, M, set_

# ------------------------------------------------------------------------------------------------ model and LoRA


def lora(ctx: SettingsContext) -> Optional[Refusal]:
    rank = int(ctx.get(f"{M}.lora_rank") or 0)
    if rank > 0 and (not ctx.profile.lora or ctx.backend_type == "cortex"):
        return Refusal(
            shown(f"{M}.lora_rank", rank),
            ctx.cortex_name,
            "has no LoRA (it would train the full model)",
            "set it to 0 (full fine-tuning)",
            [set_(f"{M}.lora_rank", 0)],
        )
    return None


def megatron_lora(ctx: SettingsContext) -> Optional[Refusal]:
    rank = int(ctx.get(f"{M}.lora.rank") or 0)
    if rank == 0 or int(ctx.get(f"{M}.lora_rank") or 0) > 0:
        return None
    if ctx.profile.lora and ctx.backend_type != "cortex":
        way_out = f"set {M}.lora_rank={rank} (and lora_alpha, target_modules) instead"
        fix = [set_(f"{M}.lora.rank", 0), set_(f"{M}.lora_rank", rank)]
    else:
        way_out = "set it to 0 (this backend has no LoRA)"
        fix = [set_(f"{M}.lora.rank", 0)]
    return Refusal(
        shown(f"{M}.lora.rank", rank), ctx.cortex_name, "does not read verl's Megatron LoRA block", way_out, fix
    )


def liger(ctx: SettingsContext) -> Optional[Refusal]:
    if ctx.get(f"{M}.use_liger") and not ctx.profile.liger:
        path = f"{M}.use_liger"
        return Refusal(shown(path, True), ctx.name, "has no Liger kernels", "set it to false", [set_(path, False)])
    return None


def override_config(ctx: SettingsContext) -> list[Refusal]:
    override = ctx.get(f"{M}.override_config") or {}
    out = [
        Refusal(
            shown(f"{M}.override_config.{k}", override[k]),
            ctx.name,
            "loads the model from its own path and applies only attn_implementation from override_config",
            "remove it (edit the model's config.json instead)",
            [f"~{M}.override_config.{k}"],
        )
        for k in sorted(override)
        if k != "attn_implementation"
    ]
    attn = override.get("attn_implementation")
    allowed = ctx.profile.attn_implementations
    if attn and allowed is not None and attn not in allowed:
        # the way out is the backend's own default (sdpa on CPU): one that trains on its devices
        fix = ctx.profile.default_attn_implementation
        fix = fix if fix in allowed else allowed[0]
        out.append(
            Refusal(
                shown(f"{M}.override_config.attn_implementation", attn),
                ctx.name,
                f"can train with {list(allowed)} on its devices",
                f"use {fix} (its default) or another of them",
                [set_(f"{M}.override_config.attn_implementation", fix)],
            )
        )
    return out


def packed_attention_note(ctx: SettingsContext) -> Optional[str]:
    # a note, not a refusal: it is the only way to run such an engine without flash attention (CPU, tests)
    attn = (ctx.get(f"{M}.override_config") or {}).get("attn_implementation")
    packed = ctx.profile.packed_attention
    if attn and packed is not None and attn not in packed:
        return (
            f"{M}.override_config.attn_implementation={attn!r}: {ctx.name} packs each micro-batch into one "
            f"row and only {list(packed)} keep its sequences apart: with {attn!r} a sequence also attends to the ones "
            "packed before it (log-probs and loss differ from verl's); leave attn_implementation unset on GPUs"
        )
    return None


def sequence_parallel(path: str) -> Check:
    """Ulysses sequence parallelism: verl 0.9.1 reads ``<block>.fsdp_config.ulysses_sequence_parallel_size`` (the
    deprecated ``<block>.ulysses_sequence_parallel_size`` is copied into it when > 1)."""

    def check(ctx: SettingsContext) -> Optional[Refusal]:
        sp = int(ctx.get(path) or 1)
        if path == f"{F}.ulysses_sequence_parallel_size" and sp == int(
            ctx.get(f"{A}.ulysses_sequence_parallel_size") or 1
        ):
            return None  # verl's interpolation of the actor's deprecated key, refused there
        if sp > 1 and not ctx.profile.sequence_parallel:
            return Refusal(
                shown(path, sp),
                ctx.name,
                "has no Ulysses sequence parallelism for verl's models (each GPU would compute whole sequences)",
                f"set it to 1 (long sequences: more GPUs or ZeRO offload in {RB}.train.deepspeed)",
                [set_(path, 1)],
            )
        return None

    return check
