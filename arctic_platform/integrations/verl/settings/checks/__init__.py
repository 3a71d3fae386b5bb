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
"""The start-up checks: each returns the :class:`~...refusal.Refusal` lines (``<setting>=<value>: <backend> <why>;
<way out>``, with ``fix`` overrides that apply the way out) of what the backend with the context's profile cannot
honour, or a note. verl's values come from verl's dataclasses (:class:`..model.SettingsContext`), verl's defaults
from verl (its dataclasses, or its generated default config for the run's ``model_engine``), never from a literal.

One module per concern, as verl's ``workers/config/{actor,rollout,optimizer}.py`` split verl's own settings:
``common`` (setting paths and helpers), ``verl`` (what verl itself rejects), ``backend`` (the arctic options),
``loop`` (the estimator, multimodal data), ``loss``, ``model`` (LoRA, Liger, sequence parallelism), ``precision``,
``rollout``, ``optimizer`` (and the LR schedule), ``misc`` (checkpoints, ZeRO, ZoRRo), ``profiling`` and ``coverage``
(settings no table entry covers; running one check). The table (:mod:`..table`) names every check through this
package.
"""

from __future__ import annotations

from .backend import backend_options
from .common import (
    RB,
    V1,
    VERL_ITSELF,
    A,
    F,
    M,
    R,
    hydra_value,
    refuse_unless_default,
    router_replay,
    set_,
    verl_default,
)
from .coverage import run
from .loop import estimator, multimodal
from .loss import (
    agg_mode,
    clip_ratios,
    cortex_entropy,
    cortex_mini_batches,
    dynamic_bsz,
    kl_in_reward,
    kl_type,
    loss_mode,
    micro_batches,
    ppo_epochs,
    use_kl,
)
from .misc import hdfs, logits_optimization, save_contents, zero_stage, zorro_train
from .model import liger, lora, megatron_lora, override_config, packed_attention_note, sequence_parallel
from .optimizer import cosine_options, grad_clip_note, lr_per_step, total_steps, training_spec
from .precision import dtype_name, master_weights, mixed_precision, rollout_dtype
from .profiling import actor_profiler_note, profile_steps_note, rollout_profiler_note
from .rollout import (
    colocate,
    engine_kwargs_note,
    log_prob_dynamic_note,
    logprobs_mode,
    rollout_correction,
    rollout_logprobs_note,
    rollout_name,
)
from .verl import verl_rejects

__all__ = [
    "A",
    "F",
    "M",
    "R",
    "RB",
    "V1",
    "VERL_ITSELF",
    "actor_profiler_note",
    "agg_mode",
    "backend_options",
    "clip_ratios",
    "colocate",
    "cortex_entropy",
    "cortex_mini_batches",
    "cosine_options",
    "dtype_name",
    "dynamic_bsz",
    "engine_kwargs_note",
    "estimator",
    "grad_clip_note",
    "hdfs",
    "hydra_value",
    "kl_in_reward",
    "kl_type",
    "liger",
    "log_prob_dynamic_note",
    "logits_optimization",
    "logprobs_mode",
    "lora",
    "loss_mode",
    "lr_per_step",
    "master_weights",
    "megatron_lora",
    "micro_batches",
    "mixed_precision",
    "multimodal",
    "override_config",
    "packed_attention_note",
    "ppo_epochs",
    "profile_steps_note",
    "refuse_unless_default",
    "rollout_correction",
    "rollout_dtype",
    "rollout_logprobs_note",
    "rollout_name",
    "rollout_profiler_note",
    "router_replay",
    "run",
    "save_contents",
    "sequence_parallel",
    "set_",
    "total_steps",
    "training_spec",
    "use_kl",
    "verl_default",
    "verl_rejects",
    "zero_stage",
    "zorro_train",
]
