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
"""Precision: master weights, mixed precision, the rollout dtype."""

from __future__ import annotations

from typing import Any, Optional

from ...refusal import Refusal, shown
from ..model import ARR, Check, SettingsContext
from .common import RB, R, set_, verl_default

# ------------------------------------------------------------------------------------------------ precision

_DTYPE_NAMES = {
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
    "half": "float16",
    "fp32": "float32",
    "float32": "float32",
    "float": "float32",
    "fp64": "float64",
    "float64": "float64",
}


def dtype_name(v: Any) -> str:
    """verl's precision names (``PrecisionType``: bf16, fp32, ...) and torch's, as torch names."""
    return _DTYPE_NAMES.get(str(v).lower(), str(v))


def _compute_dtype(ctx: SettingsContext, path: str, value: Any, default: Any) -> Optional[Refusal]:
    """A compute dtype ``value`` other than verl's ``default`` must be the one the backend computes in."""
    want = dtype_name(value)
    allowed = ctx.profile.compute_dtypes
    if want not in allowed:
        why = " (float16 needs loss scaling, which it does not do)" if want == "float16" else ""
        return Refusal(
            shown(path, value),
            ctx.name,
            f"computes in {list(allowed)} only{why}",
            f"leave it {default} (verl's default)",
            [set_(path, default)],
        )
    job = ctx.opts.dtype
    have = dtype_name(job) if job else "bfloat16"  # null: bfloat16 on CUDA (float32 on a CPU server, as by default)
    if len(allowed) > 1 and have != want:
        return Refusal(
            shown(path, value),
            ctx.name,
            f"computes in the job's dtype, {RB}.dtype={job or 'null'} (null: bfloat16 on CUDA)",
            f"set {RB}.dtype={want}, or leave it {default} (verl's default)",
            [set_(f"{RB}.dtype", want)],
        )
    return None


def master_weights(block: str) -> Check:
    """``<block>.fsdp_config.model_dtype``: the dtype verl's FSDP engine loads and keeps the parameters in."""
    path = f"{ARR}.{block}.fsdp_config.model_dtype"

    def check(ctx: SettingsContext) -> Optional[Refusal]:
        v, default = ctx.get(path), verl_default(ctx, path)
        if v is None or dtype_name(v) == "float32":
            return None  # null: verl's FSDP engine trains in fp32 too
        if block == "ref":
            return Refusal(
                shown(path, v),
                ctx.name,
                "loads the reference from the checkpoint into its compute dtype, as verl casts fp32 weights to "
                "mixed_precision.param_dtype; it does not round them to another dtype first",
                f"set it to {default} (verl's default)",
                [set_(path, default)],
            )
        dtypes = ctx.profile.compute_dtypes
        compute = f"{RB}.dtype" if len(dtypes) > 1 else dtypes[0]
        return Refusal(
            shown(path, v),
            ctx.name,
            f"keeps float32 master weights (verl's default) and computes in {compute}",
            f"set it to {default} (verl's default)",
            [set_(path, default)],
        )

    return check


def mixed_precision(block: str) -> Check:
    """``<block>.fsdp_config.mixed_precision``: verl's FSDP engine reads ``param_dtype`` (the autocast / compute
    dtype), ``reduce_dtype`` and ``buffer_dtype``; null means verl's defaults (those of its engine config)."""
    path = f"{ARR}.{block}.fsdp_config.mixed_precision"

    def check(ctx: SettingsContext) -> Optional[Refusal]:
        mp = ctx.get(path)
        if not isinstance(mp, dict):
            return None
        for key in ("reduce_dtype", "buffer_dtype"):
            v = mp.get(key)
            if v is not None and dtype_name(v) != "float32":
                return Refusal(
                    shown(f"{path}.{key}", v),
                    ctx.name,
                    "keeps gradients and buffers in float32 (verl's default)",
                    "set it to fp32",
                    [set_(f"{path}.{key}", "fp32")],
                )
        if mp.get("param_dtype") is not None and dtype_name(mp["param_dtype"]) != "bfloat16":
            return _compute_dtype(ctx, f"{path}.param_dtype", mp["param_dtype"], "bf16")
        return None

    return check


def rollout_dtype(ctx: SettingsContext) -> Optional[Refusal]:
    """``rollout.dtype``: the sampler's dtype (vLLM's ``dtype``), verl's default bfloat16."""
    v = ctx.rollout.dtype
    default = verl_default(ctx, f"{R}.dtype")
    if v is None or dtype_name(v) == dtype_name(default):
        return None
    return _compute_dtype(ctx, f"{R}.dtype", v, default)
