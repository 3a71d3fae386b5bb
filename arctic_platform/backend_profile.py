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
"""What an Arctic RL backend honours: its capability profile (torch-free, pydantic only).

The embedded server advertises its profile in ``GET /health`` (``{"status": "OK", "capabilities": [...],
"profile": {...}}``, an extension). A server that advertises none is an Arctic-Platform server: Arctic-Platform main
answers ``{"status": "OK"}``, and gets :data:`ARCTIC_PLATFORM_MAIN`, the profile measured on its real training
engine (DeepSpeed workers on CPU; ``../shared/fixtures/arctic-platform/engine/``) and read from its code (main,
commit 5864380). The verl plugin checks a run's settings against the profile at start-up
(:mod:`arctic_platform.integrations.verl.settings`), so a setting the backend would silently mishandle is refused
before any job exists.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .protocol import AGG_MODES, CAPABILITIES, KL_TYPES, LOSS_MODES

__all__ = [
    "ARCTIC_PLATFORM_MAIN",
    "CORTEX",
    "EMBEDDED_NAME",
    "BackendProfile",
    "embedded_profile",
    "profile_from_health",
]


class BackendProfile(BaseModel):
    """The settings a backend honours with verl's semantics (anything else the plugin refuses at start-up)."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    name: str
    """Shown in refusals, e.g. "Arctic-Platform main"."""
    loss_modes: tuple[str, ...]
    """``policy_loss.loss_mode`` values computed as verl computes them."""
    clip_ratios: Literal["config"] | tuple[float, float, float] = "config"
    """``config``: clip_ratio_low / high / c are read from the actor config; a tuple: hard-coded (low, high, c)."""
    agg_modes: tuple[str, ...]
    """``loss_agg_mode`` values aggregated per sequence as verl does."""
    kl_types: tuple[str, ...]
    """``kl_loss_type`` values."""
    rollout_is_weights: bool
    """Per-token rollout IS weights (``batch.rollout_is_weights``) scale the policy loss."""
    token_ids: bool
    """``/generate`` takes token-id prompts and returns the exact generated ids."""
    rollout_logprobs: bool
    """``sampling_params.logprobs`` returns the sampled tokens' log-probs."""
    lora: bool
    """LoRA adapters (``extensions.lora``)."""
    lr_schedule: bool
    """verl's LR schedule (``extensions.lr_schedule``: verl's own schedule functions and options), ticked once per
    training step (``/step`` ``lr_scheduler_step``), its horizon given by the first ``/step`` when verl derives it
    from the dataloader. Without it the backend ticks its ``ds_config`` scheduler on every ``/step``."""
    dynamic_bsz: bool
    """Token-budget micro-batches (``actor.use_dynamic_bsz``)."""
    profiler: bool = False
    """``/profile`` (the training engine's torch profiler, for ``global_profiler.steps``)."""
    training_config: bool
    """``JobConfig.training_config`` is read."""
    training_zero_stages: tuple[int, ...] | None = None
    """ZeRO stages a training job initialises with (None: not a DeepSpeed engine; ``zero_optimization`` is only
    placement)."""
    log_prob_zero_stages: tuple[int, ...] | None = None
    """ZeRO stages a log_prob (no optimizer) job initialises with."""
    attn_implementations: tuple[str, ...] | None = None
    """Attention implementations the training engine can load (None: not advertised)."""
    default_attn_implementation: str = "sdpa"
    """``ds_worker_config.attn_implementation`` the plugin sends when ``model.override_config`` names none."""
    sampling_penalties: bool = True
    """``repetition_penalty`` / ``presence_penalty`` / ``frequency_penalty`` / ``min_p`` are applied by the sampler."""
    sleep_wake: bool = True
    """``/sleep-inference`` and ``/wake-inference`` with tags (the colocated staged wake)."""
    hf_export: bool = True
    """``/save`` with ``export_hf`` writes a Hugging Face model."""
    liger: bool = False
    """``ds_worker_config.use_liger`` (Liger kernels)."""
    sequence_parallel: bool = False
    """``ds_config.sequence_parallel_size`` > 1 (Ulysses) for verl's models."""
    compute_dtypes: tuple[str, ...] = ("bfloat16", "float32", "float64")
    """dtypes the jobs compute in, over float32 master weights on the training job (verl's FSDP default:
    ``model_dtype`` fp32, ``mixed_precision.param_dtype`` bf16 as the autocast dtype). Several: the job's dtype
    picks one (``remote_backend.arctic.dtype`` -> ``extensions.dtype``; null: bfloat16 on CUDA, float32 on CPU);
    one: fixed by the backend's engine."""
    image_inputs: bool = False
    """``/generate`` takes images / videos with a prompt (a multimodal model's rollout)."""
    packed_attention: tuple[str, ...] | None = None
    """When the training engine packs each micro-batch into one ``[1, T]`` row: the attention implementations that
    keep its sequences apart (by ``position_ids``); with any other, a sequence attends to the ones packed before it.
    None: rows stay apart (padded ``[b, L]`` batches)."""
    zorro_train: bool = False
    """Arctic-Platform's ZoRRo training path (``ds_worker_config.zorro_train_enable``: each prompt computed once for
    its n rollouts; log-probs returned response-aligned)."""
    logits_optimizations: tuple[str, ...] = ("none", "compute")
    """``meta.logits_optimization`` modes (the same numbers; they trade memory for compute)."""
    zorro_only_logits: tuple[str, ...] = ()
    """Of :attr:`logits_optimizations`, the modes that exist only on the ZoRRo path."""
    extensions: tuple[str, ...] = Field(default_factory=tuple)
    """The embedded server's capability flags (:data:`arctic_platform.protocol.CAPABILITIES`)."""


ARCTIC_PLATFORM_MAIN = BackendProfile(
    name="Arctic-Platform main",
    # integrations/verl/grpo_loss.py: loss_mode is read and ignored (always vanilla), clip constants hard-coded
    loss_modes=("vanilla",),
    clip_ratios=(0.2, 0.2, 3.0),
    # the engine packs a micro-batch to [1, T], so a "sequence" is a whole micro-batch: only the modes whose value
    # does not depend on sequence boundaries survive; token-sum raises (docs/arctic-rl-protocol.md §6.2)
    agg_modes=("token-mean", "seq-mean-token-sum"),
    kl_types=KL_TYPES,
    # read only from meta (not DP-split, not unpadded: a [b, R] tensor there crashes the loss), ignored in batch
    rollout_is_weights=False,
    token_ids=False,
    rollout_logprobs=False,  # ArcticLLMEngine sets CompletionOutput.logprobs=None
    lora=False,
    lr_schedule=False,  # /step: "on-prem uses the DeepSpeed scheduler's LR", ticked by every engine.step()
    dynamic_bsz=False,  # micro-batches come from gradient_accumulation_steps (token budgets only on the ZoRRo path)
    training_config=True,
    # measured: stage 0 fails ("unsupported mix of model_dtype=bfloat16 and grad_accum_dtype=float32"), 1, 2 and 3
    # train (the same loss and grad norm on the reference adapter's frame);
    # a log_prob engine (no optimizer) fails at stage 1 ("zero stage 1 requires an optimizer") and runs at 3
    training_zero_stages=(1, 2, 3),
    log_prob_zero_stages=(3,),
    attn_implementations=None,
    default_attn_implementation="flash_attention_2",  # the reference adapter's default for its GPU fleet
    # rl/processors/pipeline.py packs a micro-batch to [1, T] with position_ids: only flash attention's varlen path
    # keeps the rows apart (measured on CPU with eager: a row's log-probs change with the rows packed before it)
    packed_attention=("flash_attention_2", "flash_attention_3"),
    sampling_penalties=True,  # sampling_params are vLLM SamplingParams kwargs
    sleep_wake=True,
    hf_export=True,
    liger=True,
    # common/deepspeed_worker.py only copies ds_config.sequence_parallel_size into DeepSpeed's config; no Ulysses
    # process group or attention is set up for the models verl trains (only the qwen3.5-MoE loader has one)
    sequence_parallel=False,
    # ds_training_config: bf16 enabled and torch_autocast bfloat16 by default (fp32 master weights in DeepSpeed's
    # bf16 optimizer, fp32 gradient accumulation); extensions.dtype is not read
    compute_dtypes=("bfloat16",),
    # rl/processors: ZoRRo training from ds_worker_config; logits "memory" (recompute in backward) on that path only
    zorro_train=True,
    logits_optimizations=("none", "compute", "memory"),
    zorro_only_logits=("memory",),
)


CORTEX = ARCTIC_PLATFORM_MAIN.model_copy(
    update=dict(
        name="Snowflake Cortex",
        # the fixed profile of the cortex transport (SnowAPI has no /health): Arctic-Platform main's engine, as the
        # grpo contract carries it (arctic_platform.client.transports.cortex_body)
        clip_ratios="config",  # eps_clip / eps_clip_higher / c_clip travel in processing.config
        token_ids=True,  # spec 6.6: prompts take token-id lists, results carry token_ids
        rollout_logprobs=True,  # sampling_params are vLLM's (logprobs); a result without them fails the call
        lr_schedule=True,  # verl's schedule runs in the client; every /step carries its learning_rate
        hf_export=False,  # /save writes a resumable checkpoint in the service's store, no Hugging Face export
        sleep_wake=False,  # sub-jobs are always awake: sleep / wake are no-ops, nothing is colocated
        zorro_train=False,  # the grpo contract's create body has no ds_worker_config ZoRRo keys
        logits_optimizations=("none", "compute"),
        zorro_only_logits=(),
    )
)
"""Snowflake Cortex over SnowAPI (:mod:`arctic_platform.client.transports.cortex`): no ``/health`` to read, so fixed."""


EMBEDDED_NAME = "the embedded arctic-verl server"
"""The embedded server's name in refusals (its profile's ``name``)."""


def embedded_profile(*, attn_implementations: tuple[str, ...]) -> BackendProfile:
    """The embedded torch server's profile (what ``GET /health`` advertises): verl's own losses, schedules and
    micro-batching (:mod:`arctic_platform.server.loss`), LoRA through peft, the torch profiler."""
    return BackendProfile(
        name=EMBEDDED_NAME,
        loss_modes=LOSS_MODES,
        agg_modes=AGG_MODES,
        kl_types=KL_TYPES,
        rollout_is_weights=True,
        token_ids=True,
        rollout_logprobs=True,
        lora=True,
        lr_schedule=True,
        dynamic_bsz=True,
        profiler=True,
        training_config=True,
        attn_implementations=attn_implementations,
        default_attn_implementation="sdpa" if "sdpa" in attn_implementations else attn_implementations[0],
        sampling_penalties=True,
        extensions=CAPABILITIES,
    )


def profile_from_health(health: Any) -> BackendProfile:
    """The profile a ``/health`` reply advertises; :data:`ARCTIC_PLATFORM_MAIN` when it advertises none."""
    profile = health.get("profile") if isinstance(health, dict) else None
    if isinstance(profile, dict):
        return BackendProfile.model_validate(profile)
    return ARCTIC_PLATFORM_MAIN
