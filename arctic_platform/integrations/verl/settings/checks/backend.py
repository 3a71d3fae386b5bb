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
"""The ``remote_backend.arctic`` options themselves."""

from __future__ import annotations

from ...refusal import Refusal, shown
from ..model import SettingsContext
from .common import RB, A, set_, verl_default

# ------------------------------------------------------------------------------------------------ the arctic options


def backend_options(ctx: SettingsContext) -> list[Refusal]:
    """The backend block: a URL for onprem; colocate with async; shared disk for checkpoints; job sizes."""
    out: list[Refusal] = []
    o = ctx.opts
    if o.backend.type == "onprem" and not o.backend.url:
        out.append(
            Refusal(
                shown(f"{RB}.backend.type", "onprem"),
                "the arctic backend",
                "needs the server's address, remote_backend.arctic.backend.url",
                "set remote_backend.arctic.backend.url, or use backend.type=local (the embedded server)",
                [set_(f"{RB}.backend.type", "local")],
            )
        )
    async_on = bool(ctx.get("remote_backend.async_rollout.enable"))
    if o.colocate and async_on:
        out.append(
            Refusal(
                f"{RB}.colocate=True, remote_backend.async_rollout.enable=True",
                ctx.name,
                "cannot sample the next batch while the policy trains: a colocated sampler sleeps meanwhile",
                "turn one of them off",
                [set_("remote_backend.async_rollout.enable", False)],
            )
        )
    shared = o.shared_filesystem if o.shared_filesystem is not None else o.backend.type != "cortex"
    save, resume = ctx.get("trainer.save_freq"), ctx.get("trainer.resume_mode")
    if not shared and (int(save) > 0 or resume != "disable"):
        out.append(
            Refusal(
                f"trainer.save_freq={save!r}, trainer.resume_mode={resume!r}",
                ctx.cortex_name,
                "saves and loads checkpoints on a filesystem the trainer does not share "
                f"({RB}.shared_filesystem is false for this backend), so verl's checkpoint folders stay empty",
                "set trainer.save_freq=-1 and trainer.resume_mode=disable, or use a backend that shares the filesystem",
                [set_("trainer.save_freq", -1), set_("trainer.resume_mode", "disable")],
            )
        )
    nodes, per_node = ctx.get("trainer.nnodes"), ctx.get("trainer.n_gpus_per_node")
    if int(nodes) * int(per_node) != 1:
        # verl's validate_config then asks the Megatron actor's model-parallel sizes to divide that one GPU (they
        # place verl's own engine only: no effect here)
        megatron = [
            set_(f"{A}.megatron.{k}", 1)
            for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size")
            if int(ctx.get(f"{A}.megatron.{k}") or 1) > 1
        ]
        out.append(
            Refusal(
                f"trainer.n_gpus_per_node={per_node!r}, trainer.nnodes={nodes!r}",
                "the arctic backend",
                "runs one forwarder worker (verl's side holds no model; the backend's jobs own the GPUs)",
                f"set trainer.n_gpus_per_node=1 and trainer.nnodes=1, and size the backend with {RB}.training_gpus, "
                "sampling_gpus and log_prob_gpus"
                + (" (and the Megatron actor's model-parallel sizes to 1: placement only)" if megatron else ""),
                [set_("trainer.n_gpus_per_node", 1), set_("trainer.nnodes", 1), *megatron],
            )
        )
    for job, why in (
        ("training", "every training step updates the policy there"),
        ("sampling", "every rollout generates there"),
    ):
        key = f"{RB}.{job}_gpus"
        if int(getattr(o, f"{job}_gpus")) == 0:
            out.append(
                Refusal(
                    shown(key, 0),
                    ctx.name,
                    f"would have no {job} job, and {why}",
                    "set it to at least 1",
                    [set_(key, 1)],
                )
            )
    for key in ("max_prompt_length", "max_response_length"):
        v = ctx.get(f"data.{key}")
        if v is None or int(v) <= 0:
            default = verl_default(ctx, f"data.{key}")
            out.append(
                Refusal(
                    shown(f"data.{key}", v),
                    "the arctic backend",
                    "sizes every job by it (prompt + response tokens), so it must be positive",
                    f"set it to a positive length (verl's default: {default})",
                    [set_(f"data.{key}", default)],
                )
            )
    return out
