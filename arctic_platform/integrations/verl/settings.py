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
"""Every verl actor / rollout / model setting, and what the arctic backend does with it, per backend profile.

A user who switches a working GRPO config from stock verl to ``remote_backend=arctic`` expects the same training,
so no setting under ``actor_rollout_ref`` may be silently ignored. :data:`SETTINGS` classifies each one (a test
walks verl's composed default config and fails on any leaf no entry covers):

* ``verl``: verl's own control loop uses it (dataloader, agent loop, advantages, iterator): unchanged;
* ``backend``: sent to the backend and honoured there with verl's semantics, or refused at start-up when the
  backend's :class:`~arctic_platform.backend_profile.BackendProfile` lacks it;
* ``placement``: how verl's *own* engines place memory or pick kernels (FSDP, offload, torch.compile, fused kernels,
  padding removal): it changes no number of the training, and with a remote backend the backend's engine config
  (``remote_backend.arctic.train.deepspeed``) decides placement. ``compose_check`` and ``arctic-verl probe`` list
  the non-default ones;
* ``refused``: a non-default value is refused on every backend (a feature the backend does not have).

:func:`check_settings` returns one refusal per setting (naming the setting, the backend and the way out); the
adapter raises them all at once, before any job exists, and ``compose_check`` shows them before Ray starts.
``python -m arctic_platform.integrations.verl.settings`` prints the table (docs/settings.md).
"""

from __future__ import annotations

import fnmatch
import sys
from dataclasses import dataclass
from typing import Any, Callable, Optional

from omegaconf import DictConfig, ListConfig, OmegaConf

from arctic_platform.backend_profile import BackendProfile

from .options import (
    arctic_options,
    compose_config,
    lr_scheduler_type,
    optimizer_steps_per_training_step,
    per_gpu,
)

__all__ = [
    "SETTINGS",
    "Setting",
    "SettingsContext",
    "check_settings",
    "covering",
    "non_default_placement",
    "placement_note",
    "settings_notes",
]

VERL, BACKEND, PLACEMENT, REFUSED = "verl", "backend", "placement", "refused"
ARR = "actor_rollout_ref"


@dataclass
class SettingsContext:
    """What a check reads: the main config, the merged ``remote_backend.arctic`` options, the backend profile."""

    cfg: DictConfig
    opts: DictConfig
    profile: BackendProfile

    def get(self, path: str, default: Any = None) -> Any:
        v = OmegaConf.select(self.cfg, path, default=default)
        return OmegaConf.to_container(v, resolve=True) if isinstance(v, (DictConfig, ListConfig)) else v

    @property
    def backend_type(self) -> str:
        return str(self.opts.backend.type)

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def over(self) -> str:
        """The backend as a cortex refusal names it: "Snowflake Cortex", or "<profile> over cortex"."""
        from arctic_platform.backend_profile import CORTEX

        return self.name if self.name == CORTEX.name else f"{self.name} over cortex"

    def old_from_rollout(self) -> bool:
        """verl's bypass mode: ``old_log_probs`` are the rollout's (verl never calls compute_log_prob)."""
        return bool((self.get("algorithm.rollout_correction", {}) or {}).get("bypass_mode"))


Check = Callable[[SettingsContext], Optional[str]]


@dataclass(frozen=True)
class Setting:
    """One verl setting (``pattern`` is a dotted path from the config root; ``.*`` covers a sub-tree)."""

    pattern: str
    role: str
    how: str
    """How it is honoured (or why it cannot be), as the table shows it."""
    check: Optional[Check] = None
    note: Optional[Check] = None
    """A line worth showing at start-up that refuses nothing (a backend difference that changes no number)."""


# ------------------------------------------------------------------------------------------------ checks


def _refuse_unless_default(path: str, default: Any, why: str, way_out: str) -> Check:
    """Refuse a non-default ``path``: "<path>=<value>: <backend> <why>; <way_out>"."""

    def check(ctx: SettingsContext) -> Optional[str]:
        v = ctx.get(path, default)
        if v != default and not (default is None and v in (None, "", 0, False, [], {})):
            return f"{path}={v!r}: {ctx.name} {why}; {way_out}"
        return None

    return check


def _loss_mode(ctx):
    mode = ctx.get(f"{ARR}.actor.policy_loss.loss_mode", "vanilla")
    if mode not in ctx.profile.loss_modes:
        return (
            f"{ARR}.actor.policy_loss.loss_mode={mode!r}: {ctx.name} computes only {list(ctx.profile.loss_modes)}; "
            "use loss_mode=vanilla or a backend that implements it"
        )
    return None


def _clip_ratios(ctx):
    fixed = ctx.profile.clip_ratios
    if fixed == "config":
        return None
    a = f"{ARR}.actor"
    base = ctx.get(f"{a}.clip_ratio", 0.2)
    low = ctx.get(f"{a}.clip_ratio_low")
    high = ctx.get(f"{a}.clip_ratio_high")
    eff = (base if low is None else low, base if high is None else high, ctx.get(f"{a}.clip_ratio_c", 3.0))
    if tuple(float(x) for x in eff) != tuple(fixed):
        # name what the user set: clip_ratio where it stands in for an unset low / high
        names = ("clip_ratio" if low is None else "clip_ratio_low", "clip_ratio" if high is None else "clip_ratio_high")
        off = [f"{a}.{n}={v}" for n, v, f in zip((*names, "clip_ratio_c"), eff, fixed, strict=True) if float(v) != f]
        off = ", ".join(dict.fromkeys(off))
        return (
            f"{off}: {ctx.name} hard-codes (clip_ratio_low, clip_ratio_high, clip_ratio_c) = {fixed} and ignores the "
            f"config; set them to {fixed} (clip_ratio={fixed[0]}) or use a backend that reads them"
        )
    return None


def _agg_mode(ctx):
    mode = ctx.get(f"{ARR}.actor.loss_agg_mode", "token-mean")
    if mode not in ctx.profile.agg_modes:
        why = (
            "packs each micro-batch into one row, so this mode would aggregate micro-batches, not sequences"
            if mode.startswith("seq-mean")
            else "does not implement it"
        )
        return f"{ARR}.actor.loss_agg_mode={mode!r}: {ctx.name} {why}; use one of {list(ctx.profile.agg_modes)}"
    return None


def _kl_type(ctx):
    if not ctx.get(f"{ARR}.actor.use_kl_loss", False):
        return None
    kind = str(ctx.get(f"{ARR}.actor.kl_loss_type", "low_var_kl"))
    if kind not in ctx.profile.kl_types:
        return (
            f"{ARR}.actor.kl_loss_type={kind!r}: {ctx.name} computes only {list(ctx.profile.kl_types)}; use one of "
            "them, or set use_kl_loss=false"
        )
    return None


def _use_kl(ctx):
    if ctx.backend_type == "cortex" and ctx.get(f"{ARR}.actor.use_kl_loss", False):
        return (
            f"{ARR}.actor.use_kl_loss=True needs /forward log-probs, which {ctx.over} does not have; "
            "set use_kl_loss=false or use backend.type=onprem"
        )
    if ctx.get(f"{ARR}.actor.use_kl_loss", False) and int(ctx.opts.log_prob_gpus) == 0:
        return (
            f"{ARR}.actor.use_kl_loss=True needs reference log-probs, but with remote_backend.arctic.log_prob_gpus=0 "
            f"{ctx.name} has no reference (log_prob) job; set remote_backend.arctic.log_prob_gpus >= 1, or "
            "use_kl_loss=false"
        )
    return None


def _kl_in_reward(ctx):
    if not ctx.get("algorithm.use_kl_in_reward", False):
        return None
    if ctx.backend_type == "cortex":
        return (
            f"algorithm.use_kl_in_reward=True needs /forward log-probs, which {ctx.over} does not have; "
            "set it to false or use backend.type=onprem"
        )
    if int(ctx.opts.log_prob_gpus) == 0:
        return (
            "algorithm.use_kl_in_reward=True needs reference log-probs, but with remote_backend.arctic.log_prob_gpus=0 "
            f"{ctx.name} has no reference (log_prob) job; set remote_backend.arctic.log_prob_gpus >= 1, or "
            "use_kl_in_reward=false"
        )
    return None


# Cortex has no /forward: verl's old log-probs are the rollout's (bypass mode), or are not computed at all and the
# backend's loss uses the current policy's, detached, which equals verl's only for one mini-batch of one epoch.
_NO_FORWARD_WAY_OUT = (
    "or take the old log-probs from the rollout (algorithm.rollout_correction.bypass_mode=true with "
    f"{ARR}.rollout.calculate_log_probs=true), or use backend.type=onprem"
)


def _ppo_epochs(ctx):
    if ctx.backend_type == "cortex" and int(ctx.get(f"{ARR}.actor.ppo_epochs", 1)) > 1 and not ctx.old_from_rollout():
        return (
            f"{ARR}.actor.ppo_epochs > 1 needs old log-probs from /forward, which {ctx.over} does not have; "
            f"set ppo_epochs=1, {_NO_FORWARD_WAY_OUT}"
        )
    return None


def _cortex_mini_batches(ctx):
    if ctx.backend_type != "cortex" or ctx.old_from_rollout():
        return None
    mini, batch = int(ctx.get(f"{ARR}.actor.ppo_mini_batch_size")), int(ctx.get("data.train_batch_size"))
    if mini < batch:
        return (
            f"{ARR}.actor.ppo_mini_batch_size={mini} < data.train_batch_size={batch} (several optimizer steps per "
            f"training step) needs old log-probs from /forward, which {ctx.over} does not have (after the first "
            f"step the current policy is no longer the old one); set ppo_mini_batch_size=data.train_batch_size, "
            + _NO_FORWARD_WAY_OUT
        )
    return None


def _cortex_entropy(ctx):
    coeff = float(ctx.get(f"{ARR}.actor.entropy_coeff", 0.0) or 0.0)
    if ctx.backend_type == "cortex" and coeff != 0.0:
        return (
            f"{ARR}.actor.entropy_coeff={coeff}: {ctx.over}'s grpo loss estimates entropy from the detached "
            "log-probs, so the bonus has no gradient; set entropy_coeff=0, or use backend.type=onprem"
        )
    return None


def _dynamic_bsz(ctx):
    if ctx.get(f"{ARR}.actor.use_dynamic_bsz", False) and not ctx.profile.dynamic_bsz:
        return (
            f"{ARR}.actor.use_dynamic_bsz=True: {ctx.name} has no token-budget micro-batches (it splits a mini-batch "
            "into ppo_micro_batch_size_per_gpu rows); set use_dynamic_bsz=false and ppo_micro_batch_size_per_gpu"
        )
    return None


def _lora(ctx):
    rank = int(ctx.get(f"{ARR}.model.lora_rank", 0) or 0)
    if rank > 0 and (not ctx.profile.lora or ctx.backend_type == "cortex"):
        name = f"{ctx.name} over cortex" if ctx.backend_type == "cortex" else ctx.name
        return f"{ARR}.model.lora_rank={rank}: {name} has no LoRA (it would train the full model); set it to 0"
    return None


def _megatron_lora(ctx):
    if int(ctx.get(f"{ARR}.model.lora.rank", 0) or 0) > 0 and int(ctx.get(f"{ARR}.model.lora_rank", 0) or 0) == 0:
        return (
            f"{ARR}.model.lora.rank is verl's Megatron LoRA block, which {ctx.name} does not read; set "
            f"{ARR}.model.lora_rank (and lora_alpha, target_modules) instead"
        )
    return None


def _profile_steps(ctx):
    if ctx.get("global_profiler.steps") and not ctx.profile.profiler:
        return (
            f"global_profiler.steps: {ctx.name} has no profiler endpoint, so the profiled steps are not profiled on "
            "the backend (verl's own side still is)"
        )
    return None


def _liger(ctx):
    if ctx.get(f"{ARR}.model.use_liger", False) and not ctx.profile.liger:
        return f"{ARR}.model.use_liger=True: {ctx.name} has no Liger kernels; set it to false"
    return None


def _sequence_parallel(path: str) -> Check:
    """Ulysses sequence parallelism: verl 0.9.1 reads ``<block>.fsdp_config.ulysses_sequence_parallel_size`` (the
    deprecated ``<block>.ulysses_sequence_parallel_size`` is copied into it when > 1)."""

    def check(ctx: SettingsContext) -> Optional[str]:
        sp = int(ctx.get(path, 1) or 1)
        if path == f"{F}.ulysses_sequence_parallel_size" and sp == int(
            ctx.get(f"{A}.ulysses_sequence_parallel_size", 1) or 1
        ):
            return None  # verl's interpolation of the actor's deprecated key, refused there
        if sp > 1 and not ctx.profile.sequence_parallel:
            return (
                f"{path}={sp}: {ctx.name} has no Ulysses sequence parallelism for verl's models (each GPU would "
                "compute whole sequences); set it to 1 (long sequences: more GPUs or ZeRO offload in "
                "remote_backend.arctic.train.deepspeed)"
            )
        return None

    return check


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


def _dtype(v: Any) -> str:
    """verl's precision names (``PrecisionType``: bf16, fp32, ...) and torch's, as torch names."""
    return _DTYPE_NAMES.get(str(v).lower(), str(v))


def _compute_dtype_refusal(ctx: SettingsContext, setting: str, value: Any) -> Optional[str]:
    """A non-default compute dtype ``value`` (verl's default: bfloat16) must be the one the backend computes in."""
    want = _dtype(value)
    allowed = ctx.profile.compute_dtypes
    if want not in allowed:
        why = " (float16 needs loss scaling, which it does not do)" if want == "float16" else ""
        return f"{setting}={value!r}: {ctx.name} computes in {list(allowed)} only{why}; leave it bf16 (verl's default)"
    job = ctx.opts.get("dtype", None)
    have = _dtype(job) if job else "bfloat16"  # null: bfloat16 on CUDA (float32 on a CPU server, as by default)
    if len(allowed) > 1 and have != want:
        return (
            f"{setting}={value!r}: {ctx.name} computes in the job's dtype, remote_backend.arctic.dtype="
            f"{job or 'null'} (null: bfloat16 on CUDA); set remote_backend.arctic.dtype={want}, or leave it bf16 "
            "(verl's default)"
        )
    return None


def _master_weights(block: str) -> Check:
    """``<block>.fsdp_config.model_dtype``: the dtype verl's FSDP engine loads and keeps the parameters in (fp32)."""
    path = f"{ARR}.{block}.fsdp_config.model_dtype"

    def check(ctx: SettingsContext) -> Optional[str]:
        v = ctx.get(path, "fp32")
        if v is None or _dtype(v) == "float32":
            return None  # null: verl's FSDP engine trains in fp32 too
        if block == "ref":
            return (
                f"{path}={v!r}: {ctx.name} loads the reference from the checkpoint into its compute dtype, as verl "
                "casts fp32 weights to mixed_precision.param_dtype; it does not round them to another dtype "
                "first; set it to fp32"
            )
        dtypes = ctx.profile.compute_dtypes
        compute = "remote_backend.arctic.dtype" if len(dtypes) > 1 else dtypes[0]
        return (
            f"{path}={v!r}: {ctx.name} keeps float32 master weights (verl's default) and computes in {compute}; set "
            "it to fp32"
        )

    return check


def _mixed_precision(block: str) -> Check:
    """``<block>.fsdp_config.mixed_precision``: verl's FSDP engine reads ``param_dtype`` (the autocast / compute
    dtype, bf16), ``reduce_dtype`` and ``buffer_dtype`` (fp32); null means those defaults."""
    path = f"{ARR}.{block}.fsdp_config.mixed_precision"

    def check(ctx: SettingsContext) -> Optional[str]:
        mp = ctx.get(path, None)
        if not isinstance(mp, dict):
            return None
        for key in ("reduce_dtype", "buffer_dtype"):
            v = mp.get(key, "fp32")
            if _dtype(v) != "float32":
                return (
                    f"{path}.{key}={v!r}: {ctx.name} keeps gradients and buffers in float32 (verl's default); set it "
                    "to fp32"
                )
        if "param_dtype" in mp and _dtype(mp["param_dtype"]) != "bfloat16":
            return _compute_dtype_refusal(ctx, f"{path}.param_dtype", mp["param_dtype"])
        return None

    return check


def _rollout_dtype(ctx):
    """``rollout.dtype``: the sampler's dtype (vLLM's ``dtype``), bfloat16 by default."""
    v = ctx.get(f"{ARR}.rollout.dtype", "bfloat16")
    if v is None or _dtype(v) == "bfloat16":
        return None
    return _compute_dtype_refusal(ctx, f"{ARR}.rollout.dtype", v)


def _log_prob_dynamic_note(block: str) -> Check:
    """Token-budget log-prob micro-batches on a backend that cuts them by its micro-batch size: memory only."""

    def note(ctx: SettingsContext) -> Optional[str]:
        if ctx.get(f"{block}.log_prob_use_dynamic_bsz", False) and not ctx.profile.dynamic_bsz:
            return (
                f"{block}.log_prob_use_dynamic_bsz=True: {ctx.name} cuts /forward micro-batches by its micro-batch "
                "size, not by token budgets; log-probs are per row, so only its memory use differs"
            )
        return None

    return note


def _override_config(ctx):
    override = ctx.get(f"{ARR}.model.override_config", {}) or {}
    other = sorted(k for k in override if k != "attn_implementation")
    if other:
        return (
            f"{ARR}.model.override_config.{other[0]}: {ctx.name} loads the model from its own path and "
            "applies only attn_implementation (sent as ds_worker_config.attn_implementation); edit the model's "
            "config.json instead"
        )
    attn = override.get("attn_implementation")
    allowed = ctx.profile.attn_implementations
    if attn and allowed is not None and attn not in allowed:
        return (
            f"{ARR}.model.override_config.attn_implementation={attn!r}: {ctx.name} can load {list(allowed)}; use "
            "one of them"
        )
    return None


def _packed_attention_note(ctx):
    # a note, not a refusal: it is the only way to run such an engine without flash attention (CPU, tests)
    attn = (ctx.get(f"{ARR}.model.override_config", {}) or {}).get("attn_implementation")
    packed = ctx.profile.packed_attention
    if attn and packed is not None and attn not in packed:
        return (
            f"{ARR}.model.override_config.attn_implementation={attn!r}: {ctx.name} packs each micro-batch into one "
            f"row and only {list(packed)} keep its sequences apart: with {attn!r} a sequence also attends to the ones "
            "packed before it (log-probs and loss differ from verl's); leave attn_implementation unset on GPUs"
        )
    return None


def _rollout_logprobs_note(ctx):
    on = ctx.get(f"{ARR}.rollout.calculate_log_probs", False)
    if on and ctx.backend_type == "cortex" and not ctx.old_from_rollout():
        return (
            f"{ARR}.rollout.calculate_log_probs=True: {ctx.over} has no /forward, so verl's old log-probs are "
            "zeros the update never reads; verl's rollout-vs-old log-prob diagnostics compare against them"
        )
    if on and not ctx.profile.rollout_logprobs:
        return (
            f"{ARR}.rollout.calculate_log_probs=True: {ctx.name}'s sampler returns no log-probs, so they are not "
            "requested; training is unchanged (verl recomputes old log-probs), only verl's rollout-vs-training "
            "log-prob diagnostics are absent"
        )
    return None


def _rollout_is(ctx):
    rc = ctx.get("algorithm.rollout_correction", {}) or {}
    p = ctx.profile
    if ctx.backend_type == "cortex" and not rc.get("bypass_mode"):
        for key in ("rollout_is", "rollout_rs"):
            if rc.get(key):
                return (
                    f"algorithm.rollout_correction.{key}={rc[key]!r} compares the rollout's log-probs with verl's "
                    f"recomputed old ones, which {ctx.over} cannot compute (no /forward); turn it off, or use "
                    "bypass_mode=true (old log-probs from the rollout)"
                )
    if rc.get("rollout_is") and not (p.rollout_is_weights and p.rollout_logprobs):
        return (
            f"algorithm.rollout_correction.rollout_is={rc['rollout_is']!r}: {p.name} "
            + ("drops rollout IS weights" if p.rollout_logprobs else "returns no rollout log-probs")
            + ", so the updates would be silently unweighted; set it to null, or use the embedded server"
        )
    for key in ("rollout_rs", "bypass_mode"):
        if rc.get(key) and not p.rollout_logprobs:
            return (
                f"algorithm.rollout_correction.{key}={rc[key]!r} needs the rollout's log-probs, which {p.name}'s "
                "sampler does not return; turn it off"
            )
    return None


def _logprobs_mode(ctx):
    mode = ctx.get(f"{ARR}.rollout.logprobs_mode", "processed_logprobs")
    if mode != "processed_logprobs":
        return (
            f"{ARR}.rollout.logprobs_mode={mode!r}: {ctx.name} returns log-probs of the processed "
            "(temperature-scaled) distribution only; use processed_logprobs"
        )
    return None


def _rollout_name(ctx):
    name = ctx.get(f"{ARR}.rollout.name")
    if name != "arctic":
        return (
            f"{ARR}.rollout.name={name!r}: remote_backend=arctic generates through {ctx.name}'s sampling job; set "
            "actor_rollout_ref.rollout.name=arctic"
        )
    return None


def _optimizer(ctx):
    name = str(ctx.get(f"{ARR}.actor.optim.optimizer", "AdamW"))
    impl = str(ctx.get(f"{ARR}.actor.optim.optimizer_impl", "torch.optim"))
    if name.lower() != "adamw":
        return f"{ARR}.actor.optim.optimizer={name!r}: {ctx.name} runs AdamW only; use AdamW"
    if impl not in ("torch.optim", "torch.optim.AdamW"):
        return (
            f"{ARR}.actor.optim.optimizer_impl={impl!r}: {ctx.name} runs its own torch/DeepSpeed AdamW; use torch.optim"
        )
    return None


def _scheduler(ctx):
    kind = _schedule_kind(ctx)
    if kind not in ("constant", "cosine"):
        return (
            f"{ARR}.actor.optim.lr_scheduler_type={kind!r}: {ctx.name} implements constant and cosine; use one of them"
        )
    return None


def _save_contents(ctx):
    contents = ctx.get(f"{ARR}.actor.checkpoint.save_contents", []) or []
    if "hf_model" in contents and not ctx.profile.hf_export:
        return (
            f"{ARR}.actor.checkpoint.save_contents has hf_model: {ctx.name} cannot export a Hugging Face model; "
            "remove hf_model (convert the backend's checkpoint offline)"
        )
    return None


def _colocate(ctx):
    if ctx.opts.get("colocate", False) and not ctx.profile.sleep_wake:
        return (
            f"remote_backend.arctic.colocate=true: {ctx.name} has no sleep/wake to free the sampler's memory; set "
            "it to false"
        )
    return None


def _zero_stage(ctx):
    stage = ctx.get("remote_backend.arctic.train.deepspeed.zero_optimization.stage")
    if stage is None:
        stage = OmegaConf.select(ctx.opts, "train.deepspeed.zero_optimization.stage")
    lp_stage = OmegaConf.select(ctx.opts, "log_prob.zero_stage")
    lp_stage = stage if lp_stage is None else lp_stage
    ok, lp_ok = ctx.profile.training_zero_stages, ctx.profile.log_prob_zero_stages
    if ok is not None and stage is not None and int(stage) not in ok:
        return (
            f"remote_backend.arctic.train.deepspeed.zero_optimization.stage={stage}: {ctx.name}'s training engine "
            f"initialises with stages {list(ok)} (stage 0 with its bf16 + fp32 gradient accumulation fails in "
            "DeepSpeed); use stage 3"
        )
    if lp_ok is not None and lp_stage is not None and int(ctx.opts.log_prob_gpus) > 0 and int(lp_stage) not in lp_ok:
        return (
            f"remote_backend.arctic.log_prob.zero_stage={lp_stage} (defaults to the training stage): {ctx.name}'s "
            f"log_prob engine has no optimizer and initialises with stages {list(lp_ok)}; set "
            "remote_backend.arctic.log_prob.zero_stage=3"
        )
    return None


def _schedule_kind(ctx) -> str:
    return lr_scheduler_type(ctx.cfg.actor_rollout_ref.actor.optim)


def _warmup(ctx) -> tuple[int, float]:
    """``(lr_warmup_steps, lr_warmup_steps_ratio)``; verl uses the ratio when the step count is <= 0."""
    optim = f"{ARR}.actor.optim"
    warm = ctx.get(f"{optim}.lr_warmup_steps", -1)
    return int(warm if warm is not None else -1), float(ctx.get(f"{optim}.lr_warmup_steps_ratio", 0.0) or 0.0)


def _lr_per_step(ctx):
    """verl ticks the LR once per training step; a backend without verl's schedule ticks once per /step."""
    if ctx.profile.lr_schedule:
        return None
    optim = f"{ARR}.actor.optim"
    kind = _schedule_kind(ctx)
    warm, ratio = _warmup(ctx)
    moving = kind != "constant" or warm > 0 or (warm <= 0 and ratio > 0)
    k = optimizer_steps_per_training_step(ctx.cfg)
    if moving and k > 1 and not ctx.opts.train.get("lr_per_optimizer_step", False):
        if kind != "constant":
            what = f"lr_scheduler_type={kind!r}"
        else:
            what = f"lr_warmup_steps={warm}" if warm > 0 else f"lr_warmup_steps_ratio={ratio}"
        return (
            f"{optim}.{what} (a moving LR) with {k} optimizer steps per training step: "
            f"{ctx.name} ticks its scheduler on every /step (verl ticks once per training step, so every mini-batch "
            "of a step gets the same LR); set actor.ppo_mini_batch_size=data.train_batch_size (one step), or accept "
            "the per-optimizer-step schedule with remote_backend.arctic.train.lr_per_optimizer_step=true"
        )
    return None


def _total_steps(ctx):
    """A horizon verl derives from the dataloader reaches only a backend with verl's schedule (first /step): a backend
    that builds its scheduler with the job needs ``trainer.total_training_steps`` for a cosine schedule and for a
    warmup given as a ratio (without a horizon the ratio gives zero warmup steps)."""
    if ctx.profile.lr_schedule or ctx.get("trainer.total_training_steps"):
        return None
    optim = f"{ARR}.actor.optim"
    warm, ratio = _warmup(ctx)
    if _schedule_kind(ctx) == "cosine":
        return (
            f"trainer.total_training_steps=null with {optim}.lr_scheduler_type='cosine': {ctx.name} creates its "
            "scheduler with the job, before verl counts the dataloader, so the cosine has no horizon; set "
            "trainer.total_training_steps"
        )
    if warm <= 0 and ratio > 0:
        return (
            f"trainer.total_training_steps=null with {optim}.lr_warmup_steps_ratio={ratio}: {ctx.name} creates its "
            "scheduler with the job, before verl counts the dataloader, so the ratio would give zero warmup steps; "
            "set trainer.total_training_steps, or lr_warmup_steps (a step count) instead of the ratio"
        )
    return None


def _cosine_option(key: str, default: Any) -> Check:
    """``num_cycles`` / ``zero_indexed_step``: read by verl's cosine schedule only; a backend without verl's schedule
    runs DeepSpeed's ``WarmupCosineLR`` from ``ds_config``, which has neither option."""
    path = f"{ARR}.actor.optim.{key}"

    def check(ctx: SettingsContext) -> Optional[str]:
        v = ctx.get(path, default)
        if ctx.profile.lr_schedule or _schedule_kind(ctx) != "cosine" or v is None or v == default:
            return None
        return (
            f"{path}={v!r}: {ctx.name} runs DeepSpeed's WarmupCosineLR (ds_config.scheduler), which has no such "
            f"option; set it to {default!r} (verl's default)"
        )

    return check


def _hdfs(ctx):
    if ctx.get("trainer.default_hdfs_dir"):
        return (
            f"trainer.default_hdfs_dir={ctx.get('trainer.default_hdfs_dir')!r}: {ctx.name} writes checkpoints on its "
            "own filesystem, so verl's HDFS copy would copy nothing; unset it"
        )
    return None


def _micro_batches(ctx):
    """verl asserts that a mini-batch per data-parallel rank is a whole number of fixed micro-batches (and DeepSpeed
    that train_batch_size = micro x gradient_accumulation_steps x GPUs); the backend would cut an uneven last one."""
    a = f"{ARR}.actor"
    if ctx.get(f"{a}.use_dynamic_bsz", False):
        return None
    gpus = max(1, int(ctx.opts.training_gpus))
    micro = per_gpu(ctx.cfg.actor_rollout_ref.actor, "ppo_micro_batch_size", gpus)
    rows = int(ctx.get(f"{a}.ppo_mini_batch_size")) * int(ctx.get(f"{ARR}.rollout.n", 1) or 1)
    if micro is None or rows % (micro * gpus) == 0:
        return None
    given = (
        "ppo_micro_batch_size_per_gpu"
        if ctx.get(f"{a}.ppo_micro_batch_size_per_gpu") is not None
        else "ppo_micro_batch_size"
    )
    way_out = (
        f"set remote_backend.arctic.training_gpus to a divisor of {rows}"
        if rows % gpus
        else f"set ppo_micro_batch_size_per_gpu to a divisor of {rows // gpus}"
    )
    return (
        f"{a}.{given}={ctx.get(f'{a}.{given}')}: a mini-batch of ppo_mini_batch_size x rollout.n = {rows} rows on "
        f"remote_backend.arctic.training_gpus={gpus} is not a whole number of micro-batches of {micro} rows per GPU "
        f"(verl asserts it; {ctx.name} would train an uneven last micro-batch); {way_out}"
    )


# ------------------------------------------------------------------------------------------------ the table

A = f"{ARR}.actor"
R = f"{ARR}.rollout"
M = f"{ARR}.model"
F = f"{ARR}.ref"
_PLACE = "verl's own engine placement / kernels; no effect on the numbers (the backend's engine config places memory)"
_SAMPLER = "sent in the sampling job's vllm_config (vLLM engine arg); the torch sampler honours or refuses it"
_MASTER = "fp32 weights (verl's FSDP default); the backend keeps float32 master weights (reference: checkpoint dtype)"
_MIXED = (
    "verl's FSDP reads param_dtype (autocast dtype, bf16), reduce_dtype and buffer_dtype (fp32); the backend computes "
    "in the job's dtype over float32 weights, gradients and buffers"
)
_FSDP_DTYPE = "not read by verl 0.9.1's FSDP engine (only its Megatron engine reads engine dtype); no effect either way"
_SP = "Ulysses sequence parallelism (verl 0.9.1's key)"

SETTINGS: tuple[Setting, ...] = (
    # ---- actor: the loss (meta.actor_config / meta.policy_loss_config of every /forward-backward)
    Setting(f"{A}.policy_loss.loss_mode", BACKEND, "selects the policy loss", _loss_mode),
    Setting(f"{A}.policy_loss.*", BACKEND, "sent in meta.policy_loss_config (read by the selected loss)"),
    Setting(f"{A}.clip_ratio", BACKEND, "PPO clip ε (default of low/high)", _clip_ratios),
    Setting(f"{A}.clip_ratio_low", BACKEND, "ε_low", _clip_ratios),
    Setting(f"{A}.clip_ratio_high", BACKEND, "ε_high", _clip_ratios),
    Setting(f"{A}.clip_ratio_c", BACKEND, "dual-clip c", _clip_ratios),
    Setting(f"{A}.loss_agg_mode", BACKEND, "aggregation per sequence with the global denominators", _agg_mode),
    Setting(
        f"{A}.loss_scale_factor",
        BACKEND,
        "K of seq-mean-token-sum-norm (sent as is; null = verl's per-micro-batch rule)",
    ),
    Setting(
        f"{A}.entropy_coeff",
        BACKEND,
        "entropy bonus; entropy is computed whenever it is non-zero (verl's rule)",
        _cortex_entropy,
    ),
    Setting(f"{A}.calculate_entropy", BACKEND, "meta.calculate_entropy of the update"),
    Setting(f"{A}.use_kl_loss", BACKEND, "KL term against the reference job's log-probs", _use_kl),
    Setting(f"{A}.kl_loss_coef", BACKEND, "KL weight"),
    Setting(f"{A}.kl_loss_type", BACKEND, "KL estimator", _kl_type),
    Setting(f"{A}.tau_pos", BACKEND, "SAPO temperature (read by loss_mode=sapo)"),
    Setting(f"{A}.tau_neg", BACKEND, "SAPO temperature (read by loss_mode=sapo)"),
    Setting(
        f"{A}.calculate_sum_pi_squared",
        REFUSED,
        "Σπ² statistic of verl's FSDP actor",
        _refuse_unless_default(
            f"{A}.calculate_sum_pi_squared", False, "the arctic backend does not compute it", "set it to false"
        ),
    ),  # fmt: skip
    # ---- actor: batching and the optimizer (job bodies and the worker's mini-batch loop)
    Setting(
        f"{A}.ppo_mini_batch_size",
        BACKEND,
        "verl's mini-batch iterator; ds_config.train_batch_size = mini x n",
        _cortex_mini_batches,
    ),
    Setting(
        f"{A}.ppo_micro_batch_size",
        BACKEND,
        "deprecated global size: per GPU = size / training_gpus (sent resolved, as ppo_micro_batch_size_per_gpu)",
        _micro_batches,
    ),
    Setting(
        f"{A}.ppo_micro_batch_size_per_gpu",
        BACKEND,
        "ds_config.train_micro_batch_size_per_gpu (+ gas); must divide the mini-batch per GPU, as verl asserts",
        _micro_batches,
    ),
    Setting(f"{A}.use_dynamic_bsz", BACKEND, "token-budget micro-batches", _dynamic_bsz),
    Setting(f"{A}.ppo_max_token_len_per_gpu", BACKEND, "meta.max_token_len_per_gpu (token budget)"),
    Setting(f"{A}.ppo_epochs", VERL, "the worker's mini-batch loop runs this many epochs", _ppo_epochs),
    Setting(f"{A}.shuffle", VERL, "verl's mini-batch iterator"),
    Setting(f"{A}.data_loader_seed", VERL, "verl's mini-batch iterator"),
    Setting(f"{A}.rollout_n", VERL, "verl (mirrors rollout.n)"),
    Setting(f"{A}.optim.optimizer", BACKEND, "ds_config.optimizer (AdamW)", _optimizer),
    Setting(f"{A}.optim.optimizer_impl", BACKEND, "AdamW implementation", _optimizer),
    Setting(f"{A}.optim.lr", BACKEND, "ds_config.optimizer.params.lr"),
    Setting(f"{A}.optim.betas", BACKEND, "ds_config.optimizer.params.betas"),
    Setting(f"{A}.optim.weight_decay", BACKEND, "ds_config.optimizer.params.weight_decay"),
    Setting(f"{A}.optim.clip_grad", BACKEND, "ds_config.gradient_clipping"),
    Setting(f"{A}.grad_clip", BACKEND, "ds_config.gradient_clipping when optim.clip_grad is null"),
    Setting(f"{A}.optim.lr_scheduler_type", BACKEND, "extensions.lr_schedule / ds_config.scheduler", _scheduler),
    Setting(f"{A}.optim.lr_warmup_steps", BACKEND, "warmup (training steps)", _lr_per_step),
    Setting(f"{A}.optim.lr_warmup_steps_ratio", BACKEND, "warmup ratio of the horizon", _lr_per_step),
    Setting(f"{A}.optim.total_training_steps", VERL, "set by verl after the dataloader (the horizon, first /step)"),
    Setting(
        f"{A}.optim.min_lr_ratio",
        BACKEND,
        "cosine floor: extensions.lr_schedule, or ds_config WarmupCosineLR cos_min_ratio (same floor)",
    ),
    Setting(
        f"{A}.optim.num_cycles",
        BACKEND,
        "cosine cycles (extensions.lr_schedule; WarmupCosineLR is a half cosine)",
        _cosine_option("num_cycles", 0.5),
    ),
    Setting(
        f"{A}.optim.zero_indexed_step",
        BACKEND,
        "cosine step origin (extensions.lr_schedule)",
        _cosine_option("zero_indexed_step", True),
    ),
    Setting(f"{A}.optim.warmup_style", BACKEND, "deprecated alias of lr_scheduler_type (wins over it, as in verl)"),
    Setting(
        f"{A}.optim.override_optimizer_config",
        REFUSED,
        "extra optimizer kwargs",
        _refuse_unless_default(
            f"{A}.optim.override_optimizer_config",
            None,
            "the arctic backend's AdamW takes lr, betas, eps and weight_decay only",
            "unset it",
        ),
    ),  # fmt: skip
    # ---- actor: checkpoints and profiling
    Setting(
        f"{A}.checkpoint.save_contents",
        BACKEND,
        "model + optimizer + extra always; hf_model -> export_hf",
        _save_contents,
    ),
    Setting(f"{A}.checkpoint.load_contents", BACKEND, "resume restores model, optimizer, scheduler and counters"),
    Setting(
        f"{A}.checkpoint.async_save",
        REFUSED,
        "asynchronous checkpoint writes",
        _refuse_unless_default(
            f"{A}.checkpoint.async_save", False, "the arctic backend saves synchronously", "set it to false"
        ),
    ),  # fmt: skip
    Setting(f"{A}.checkpoint.strict", VERL, "strict resume (the backend refuses a checkpoint of another model)"),
    Setting(f"{A}.profiler.*", VERL, "verl's profiler config of the forwarder (global_profiler.steps)"),
    # ---- actor: verl's own engines
    Setting(f"{A}.strategy", PLACEMENT, _PLACE),
    Setting(f"{A}.fsdp_config.model_dtype", BACKEND, _MASTER, _master_weights("actor")),
    Setting(f"{A}.fsdp_config.mixed_precision.*", BACKEND, _MIXED, _mixed_precision("actor")),
    Setting(f"{A}.fsdp_config.dtype", PLACEMENT, _FSDP_DTYPE),
    Setting(
        f"{A}.fsdp_config.ulysses_sequence_parallel_size",
        BACKEND,
        _SP,
        _sequence_parallel(f"{A}.fsdp_config.ulysses_sequence_parallel_size"),
    ),
    Setting(f"{A}.fsdp_config.*", PLACEMENT, _PLACE),
    Setting(f"{A}.megatron.*", PLACEMENT, _PLACE),
    Setting(f"{A}.engine.*", PLACEMENT, _PLACE),
    Setting(f"{A}.use_torch_compile", PLACEMENT, _PLACE),
    Setting(f"{A}.use_fused_kernels", PLACEMENT, _PLACE),
    Setting(f"{A}.use_remove_padding", PLACEMENT, _PLACE),
    Setting(f"{A}.pad_to_length", PLACEMENT, _PLACE),
    Setting(f"{A}.entropy_from_logits_with_chunking", PLACEMENT, _PLACE),
    Setting(f"{A}.entropy_from_logits_chunk_size", PLACEMENT, _PLACE),
    Setting(f"{A}.entropy_checkpointing", PLACEMENT, _PLACE),
    Setting(f"{A}.use_prefix_grouper", PLACEMENT, _PLACE),
    Setting(f"{A}.freeze_vision_tower", PLACEMENT, "vision towers only (the arctic backends are text-only)"),
    Setting(
        f"{A}.ulysses_sequence_parallel_size",
        BACKEND,
        "deprecated: copied into fsdp_config.ulysses_sequence_parallel_size by verl",
        _sequence_parallel(f"{A}.ulysses_sequence_parallel_size"),
    ),
    Setting(
        f"{A}.qat.*",
        REFUSED,
        "quantisation-aware training",
        _refuse_unless_default(f"{A}.qat.enable", False, "the arctic backend has no QAT", "set it to false"),
    ),
    # ---- reference policy (the log_prob job)
    Setting(
        f"{F}.log_prob_micro_batch_size",
        BACKEND,
        "deprecated global: per GPU = size / log_prob_gpus -> log_prob_config and the /forward meta.micro_batch_size",
    ),
    Setting(
        f"{F}.log_prob_micro_batch_size_per_gpu",
        BACKEND,
        "log_prob_config.train_micro_batch_size_per_gpu and the reference /forward's meta.micro_batch_size",
    ),
    Setting(
        f"{F}.log_prob_use_dynamic_bsz",
        BACKEND,
        "the reference /forward's meta.use_dynamic_bsz (token-budget micro-batches; log-probs are per row)",
        note=_log_prob_dynamic_note(F),
    ),
    Setting(f"{F}.log_prob_max_token_len_per_gpu", BACKEND, "the reference /forward's meta.max_token_len_per_gpu"),
    Setting(f"{F}.rollout_n", VERL, "verl (mirrors rollout.n)"),
    Setting(f"{F}.fsdp_config.model_dtype", BACKEND, _MASTER, _master_weights("ref")),
    Setting(f"{F}.fsdp_config.mixed_precision.*", BACKEND, _MIXED, _mixed_precision("ref")),
    Setting(f"{F}.fsdp_config.dtype", PLACEMENT, _FSDP_DTYPE),
    Setting(
        f"{F}.fsdp_config.ulysses_sequence_parallel_size",
        BACKEND,
        _SP,
        _sequence_parallel(f"{F}.fsdp_config.ulysses_sequence_parallel_size"),
    ),
    Setting(
        f"{F}.ulysses_sequence_parallel_size",
        BACKEND,
        "verl's interpolation of actor.ulysses_sequence_parallel_size",
        _sequence_parallel(f"{F}.ulysses_sequence_parallel_size"),
    ),
    Setting(f"{F}.*", PLACEMENT, _PLACE),
    # ---- model
    Setting(f"{M}.path", BACKEND, "every job's model_name (remote_backend.arctic.model_path overrides)"),
    Setting(f"{M}.tokenizer_path", VERL, "verl's tokenizer (dataset, reward)"),
    Setting(
        f"{M}.hf_config_path",
        REFUSED,
        "a config.json other than the model's",
        _refuse_unless_default(
            f"{M}.hf_config_path", None, "the backend loads the model's own config.json", "unset it"
        ),
    ),  # fmt: skip
    Setting(f"{M}.use_shm", PLACEMENT, "how verl's own workers load the weights"),
    Setting(f"{M}.trust_remote_code", VERL, "verl's tokenizer; the backend loads transformers models"),
    Setting(f"{M}.custom_chat_template", VERL, "verl's chat template (dataset)"),
    Setting(f"{M}.external_lib", VERL, "imported by verl"),
    Setting(f"{M}.enable_gradient_checkpointing", BACKEND, "ds_worker_config.enable_gradient_checkpointing"),
    Setting(f"{M}.enable_activation_offload", PLACEMENT, _PLACE),
    Setting(f"{M}.use_remove_padding", PLACEMENT, _PLACE),
    Setting(f"{M}.use_fused_kernels", PLACEMENT, _PLACE),
    Setting(f"{M}.fused_kernel_options.*", PLACEMENT, _PLACE),
    Setting(f"{M}.tiled_mlp.*", PLACEMENT, _PLACE),
    Setting(f"{M}.use_liger", BACKEND, "ds_worker_config.use_liger", _liger),
    Setting(
        f"{M}.override_config.*",
        BACKEND,
        "attn_implementation -> ds_worker_config",
        _override_config,
        note=_packed_attention_note,
    ),
    Setting(f"{M}.lora_rank", BACKEND, "LoRA through peft (extensions.lora): the adapter trains, syncs merge", _lora),
    Setting(f"{M}.lora_alpha", BACKEND, "LoRA alpha"),
    Setting(f"{M}.target_modules", BACKEND, "LoRA target modules"),
    Setting(f"{M}.exclude_modules", BACKEND, "LoRA excluded modules"),
    Setting(
        f"{M}.lora_adapter_path",
        BACKEND,
        "a LoRA adapter to start from",
        _refuse_unless_default(
            f"{M}.lora_adapter_path", None, "the arctic backend starts LoRA from scratch", "unset it"
        ),
    ),  # fmt: skip
    Setting(f"{M}.lora.rank", REFUSED, "Megatron-style LoRA block", _megatron_lora),
    Setting(f"{M}.lora.*", BACKEND, "Megatron-style LoRA block (used only with lora.rank > 0)"),
    Setting(
        f"{M}.mtp.*",
        REFUSED,
        "multi-token prediction",
        _refuse_unless_default(f"{M}.mtp.enable", False, "the arctic backend has no MTP heads", "set it to false"),
    ),
    # ---- rollout (the sampling job)
    Setting(f"{R}.name", BACKEND, "must be arctic", _rollout_name),
    Setting(f"{R}.mode", VERL, "async agent loop (the only V1 mode)"),
    Setting(f"{R}.temperature", BACKEND, "sampling_params.temperature (and the log-prob temperature)"),
    Setting(f"{R}.top_k", BACKEND, "sampling_params.top_k"),
    Setting(f"{R}.top_p", BACKEND, "sampling_params.top_p"),
    Setting(f"{R}.seed", BACKEND, "the jobs' seed (remote_backend.arctic.seed overrides)"),
    Setting(f"{R}.full_determinism", PLACEMENT, "vLLM batch invariance; remote_backend.arctic.train.determinism"),
    Setting(f"{R}.prompt_length", VERL, "data.max_prompt_length (dense layout width P)"),
    Setting(f"{R}.response_length", BACKEND, "sampling_params.max_tokens"),
    Setting(f"{R}.ignore_eos", BACKEND, "sampling_params.ignore_eos"),
    Setting(f"{R}.do_sample", VERL, "verl's validation settings"),
    Setting(f"{R}.n", VERL, "verl repeats each prompt n times"),
    Setting(f"{R}.over_sample_rate", VERL, "verl's agent loop"),
    Setting(f"{R}.val_kwargs.*", VERL, "validation sampling params, sent per request"),
    Setting(f"{R}.multi_turn.*", VERL, "verl's agent loop"),
    Setting(f"{R}.agent.*", VERL, "verl's agent loop"),
    Setting(f"{R}.trace.*", VERL, "verl's rollout tracing"),
    Setting(f"{R}.profiler.*", VERL, "verl's rollout profiler config"),
    Setting(f"{R}.calculate_log_probs", BACKEND, "sampling_params.logprobs", note=_rollout_logprobs_note),
    Setting(f"{R}.logprobs_mode", BACKEND, "log-probs of the temperature-scaled distribution", _logprobs_mode),
    Setting(f"{R}.gpu_memory_utilization", BACKEND, _SAMPLER),
    Setting(f"{R}.enforce_eager", BACKEND, _SAMPLER),
    Setting(f"{R}.enable_chunked_prefill", BACKEND, _SAMPLER + "; not sent to a CPU sampler (vLLM CPU bug)"),
    Setting(f"{R}.max_model_len", BACKEND, _SAMPLER),
    Setting(f"{R}.max_num_seqs", BACKEND, _SAMPLER),
    Setting(f"{R}.max_num_batched_tokens", PLACEMENT, "vLLM scheduler budget (set it in sampling.engine_kwargs)"),
    Setting(f"{R}.enable_prefix_caching", PLACEMENT, "vLLM prefix cache (set it in sampling.engine_kwargs)"),
    Setting(f"{R}.cudagraph_capture_sizes", PLACEMENT, "vLLM CUDA graphs (set it in sampling.engine_kwargs)"),
    Setting(f"{R}.dtype", BACKEND, "the sampler's dtype: the job's (remote_backend.arctic.dtype)", _rollout_dtype),
    Setting(f"{R}.free_cache_engine", BACKEND, "with remote_backend.arctic.colocate: sleep the sampler", _colocate),
    Setting(f"{R}.multi_stage_wake_up", BACKEND, "colocated staged wake (weights, sync, kv_cache, reset)"),
    Setting(f"{R}.tensor_model_parallel_size", VERL, "must leave one replica (the backend sizes its engines)"),
    Setting(f"{R}.data_parallel_size", VERL, "must leave one replica"),
    Setting(f"{R}.expert_parallel_size", PLACEMENT, _PLACE),
    Setting(f"{R}.pipeline_model_parallel_size", VERL, "must leave one replica"),
    Setting(f"{R}.nnodes", PLACEMENT, _PLACE),
    Setting(f"{R}.n_gpus_per_node", PLACEMENT, _PLACE),
    Setting(f"{R}.load_format", PLACEMENT, "the backend loads the model itself"),
    Setting(f"{R}.layered_summon", PLACEMENT, _PLACE),
    Setting(
        f"{R}.log_prob_micro_batch_size",
        BACKEND,
        "deprecated global: per GPU = size / training_gpus -> compute_log_prob's /forward meta.micro_batch_size",
    ),
    Setting(
        f"{R}.log_prob_micro_batch_size_per_gpu", BACKEND, "compute_log_prob's /forward meta.micro_batch_size"
    ),  # fmt: skip
    Setting(
        f"{R}.log_prob_use_dynamic_bsz",
        BACKEND,
        "compute_log_prob's /forward meta.use_dynamic_bsz (token-budget micro-batches; log-probs are per row)",
        note=_log_prob_dynamic_note(R),
    ),
    Setting(f"{R}.log_prob_max_token_len_per_gpu", BACKEND, "compute_log_prob's /forward meta.max_token_len_per_gpu"),
    Setting(f"{R}.disable_log_stats", PLACEMENT, "vLLM logging"),
    Setting(f"{R}.scheduling_policy", PLACEMENT, "vLLM request order"),
    Setting(f"{R}.skip_tokenizer_init", PLACEMENT, "verl's own vLLM engines"),
    Setting(f"{R}.checkpoint_engine.*", VERL, "the remote_backend checkpoint engine (a no-op) replaces it"),
    Setting(f"{R}.moe_load_balance_metrics_interval", PLACEMENT, "verl's own vLLM metrics"),
    Setting(
        f"{R}.prometheus.*",
        REFUSED,
        "vLLM metrics server",
        _refuse_unless_default(
            f"{R}.prometheus.enable", False, "the arctic backend runs no Prometheus exporter", "set it to false"
        ),
    ),  # fmt: skip
    Setting(
        f"{R}.router_config_path",
        REFUSED,
        "request router",
        _refuse_unless_default(f"{R}.router_config_path", None, "the arctic backend has one sampling job", "unset it"),
    ),  # fmt: skip
    Setting(
        f"{R}.enable_rollout_routing_replay",
        REFUSED,
        "MoE routing replay",
        _refuse_unless_default(
            f"{R}.enable_rollout_routing_replay",
            False,
            "the arctic backend returns no routed experts",
            "set it to false",
        ),
    ),  # fmt: skip
    Setting(
        f"{R}.quantization",
        REFUSED,
        "rollout quantisation",
        _refuse_unless_default(f"{R}.quantization", None, "the arctic backend samples unquantised", "unset it"),
    ),  # fmt: skip
    Setting(
        f"{R}.quantization_config_file",
        REFUSED,
        "rollout quantisation",
        _refuse_unless_default(
            f"{R}.quantization_config_file", None, "the arctic backend samples unquantised", "unset it"
        ),
    ),  # fmt: skip
    Setting(f"{R}.mtp", REFUSED, "MTP speculative decoding (mirrors model.mtp)"),
    Setting(f"{R}.qat", REFUSED, "QAT rollout (mirrors actor qat)"),
    Setting(
        f"{R}.disaggregation.*",
        REFUSED,
        "prefill/decode disaggregation",
        _refuse_unless_default(
            f"{R}.disaggregation.enabled", False, "the arctic backend has one sampling job", "set it to false"
        ),
    ),  # fmt: skip
    Setting(f"{ARR}.hybrid_engine", VERL, "verl's worker layout"),
    Setting(f"{ARR}.nccl_timeout", PLACEMENT, "verl's own process groups"),
    # ---- outside actor_rollout_ref: settings whose meaning depends on the backend
    Setting("algorithm.use_kl_in_reward", VERL, "verl's KL reward on the reference job's log-probs", _kl_in_reward),
    Setting("algorithm.rollout_correction.*", BACKEND, "rollout IS weights in batch.rollout_is_weights", _rollout_is),
    Setting("remote_backend.arctic.train.deepspeed.*", BACKEND, "ds_config (ZeRO stage)", _zero_stage),
    Setting("trainer.default_hdfs_dir", REFUSED, "HDFS checkpoint copies", _hdfs),
    Setting(
        "trainer.total_training_steps",
        VERL,
        "the horizon; verl derives it from the dataloader when null (reaches the backend with the first /step)",
        _total_steps,
    ),
    Setting(
        "global_profiler.steps",
        VERL,
        "the forwarder's start/stop_profile drive the backend's profiler",
        note=_profile_steps,
    ),  # fmt: skip
)


def covering(path: str) -> Optional[Setting]:
    """The first :data:`SETTINGS` entry covering ``path`` (exact, or a ``.*`` sub-tree pattern)."""
    for s in SETTINGS:
        if s.pattern == path or (s.pattern.endswith(".*") and fnmatch.fnmatchcase(path, s.pattern)):
            return s
        if s.pattern.endswith(".*") and path == s.pattern[:-2]:
            return s
    return None


def check_settings(cfg: DictConfig, opts: DictConfig, profile: BackendProfile) -> list[str]:
    """One message per setting the backend cannot honour (empty: all honoured). Each check runs once."""
    ctx = SettingsContext(cfg, opts, profile)
    seen: set[int] = set()
    out: list[str] = []
    for s in SETTINGS:
        if s.check is None or id(s.check) in seen:
            continue
        seen.add(id(s.check))
        msg = s.check(ctx)
        if msg and msg not in out:
            out.append(msg)
    return out


def settings_notes(cfg: DictConfig, opts: DictConfig, profile: BackendProfile) -> list[str]:
    """Start-up lines for settings the backend handles differently without changing the training."""
    ctx = SettingsContext(cfg, opts, profile)
    return [m for s in SETTINGS if s.note is not None and (m := s.note(ctx))]


def _defaults_in(cfg: DictConfig, defaults: DictConfig) -> dict:
    """verl's default ``actor_rollout_ref``, resolved inside ``cfg``: a default that follows another setting by
    interpolation (``rollout.n_gpus_per_node: ${trainer.n_gpus_per_node}``) follows the user's value of it."""
    try:
        inside = cfg.copy()
        OmegaConf.set_readonly(inside, False)
        OmegaConf.set_struct(inside, False)
        inside[ARR] = defaults[ARR]
        return OmegaConf.to_container(inside[ARR], resolve=True)
    except Exception:  # an interpolation cfg cannot resolve: verl's defaults on their own
        return OmegaConf.to_container(defaults[ARR], resolve=True)


def non_default_placement(cfg: DictConfig, defaults: DictConfig) -> list[str]:
    """``placement`` settings whose value differs from verl's default (``defaults``: the whole default trainer
    config, e.g. :func:`.options.verl_defaults`), as ``path=value``."""
    default_leaves = dict(_leaves(_defaults_in(cfg, defaults), ARR))
    out = []
    for path, value in _leaves(OmegaConf.to_container(cfg[ARR], resolve=True), ARR):
        s = covering(path)
        if s is not None and s.role == PLACEMENT and value != default_leaves.get(path):
            out.append(f"{path}={value!r}")
    return out


def placement_note(cfg: DictConfig, defaults: DictConfig) -> Optional[str]:
    """The one start-up line listing the non-default ``placement`` settings (None when there are none): the adapter
    logs it at start-up, ``compose_check`` and the probe print it."""
    placement = non_default_placement(cfg, defaults)
    if not placement:
        return None
    return "no effect with a remote backend (verl's own engine placement / kernels): " + ", ".join(placement)


def _leaves(d: Any, prefix: str):
    if isinstance(d, dict):
        for k, v in d.items():
            yield from _leaves(v, f"{prefix}.{k}")
    else:
        yield prefix, d


EXAMPLES: dict[str, Any] = {
    f"{A}.policy_loss.loss_mode": "gspo",
    f"{A}.clip_ratio": 0.1,
    f"{A}.clip_ratio_low": 0.1,
    f"{A}.clip_ratio_high": 0.28,
    f"{A}.clip_ratio_c": 10.0,
    f"{A}.loss_agg_mode": "seq-mean-token-mean",
    f"{A}.use_kl_loss": True,
    f"{A}.kl_loss_type": "k3+",
    f"{A}.calculate_sum_pi_squared": True,
    f"{A}.use_dynamic_bsz": True,
    f"{A}.ppo_epochs": 2,
    f"{A}.ppo_mini_batch_size": 2,
    f"{A}.entropy_coeff": 0.01,
    f"{A}.optim.optimizer": "SGD",
    f"{A}.optim.optimizer_impl": "bitsandbytes.optim",
    f"{A}.optim.lr_scheduler_type": "cosine",
    f"{A}.optim.lr_warmup_steps": 10,
    f"{A}.optim.lr_warmup_steps_ratio": 0.1,
    f"{A}.optim.num_cycles": 1.0,
    f"{A}.optim.zero_indexed_step": False,
    f"{A}.ppo_micro_batch_size": 3,
    f"{A}.ppo_micro_batch_size_per_gpu": 3,
    f"{A}.fsdp_config.model_dtype": "bf16",
    f"{A}.fsdp_config.mixed_precision.*": {"param_dtype": "fp32"},
    f"{A}.fsdp_config.ulysses_sequence_parallel_size": 2,
    f"{F}.fsdp_config.model_dtype": "bf16",
    f"{F}.fsdp_config.mixed_precision.*": {"param_dtype": "fp32"},
    f"{F}.fsdp_config.ulysses_sequence_parallel_size": 2,
    f"{F}.ulysses_sequence_parallel_size": 2,
    f"{F}.log_prob_use_dynamic_bsz": True,
    f"{R}.log_prob_use_dynamic_bsz": True,
    f"{R}.dtype": "float32",
    "trainer.total_training_steps": None,
    f"{A}.optim.override_optimizer_config": {"amsgrad": True},
    f"{A}.checkpoint.save_contents": ["model", "hf_model"],
    f"{A}.checkpoint.async_save": True,
    f"{A}.ulysses_sequence_parallel_size": 2,
    f"{A}.qat.*": {"enable": True},
    f"{M}.hf_config_path": "/other/config",
    f"{M}.use_liger": True,
    f"{M}.override_config.*": {"attn_implementation": "flash_attention_2"},
    f"{M}.lora_rank": 8,
    f"{M}.lora_adapter_path": "/some/adapter",
    f"{M}.lora.rank": 8,
    "global_profiler.steps": [2],
    f"{M}.mtp.*": {"enable": True},
    f"{R}.name": "vllm",
    f"{R}.calculate_log_probs": True,
    f"{R}.logprobs_mode": "raw_logprobs",
    f"{R}.free_cache_engine": True,
    f"{R}.prometheus.*": {"enable": True},
    f"{R}.router_config_path": "/router.yaml",
    f"{R}.enable_rollout_routing_replay": True,
    f"{R}.quantization": "fp8",
    f"{R}.quantization_config_file": "/q.json",
    f"{R}.disaggregation.*": {"enabled": True},
    "algorithm.use_kl_in_reward": True,
    "algorithm.rollout_correction.*": {"rollout_is": "token"},
    "remote_backend.arctic.train.deepspeed.*": {"zero_optimization": {"stage": 0}},
    "trainer.default_hdfs_dir": "hdfs://x",
}
"""For the table: a non-default value of each checked setting (the table shows what each profile says to it)."""
# settings whose example needs another one to mean something
_EXAMPLE_CONTEXT = {
    f"{A}.kl_loss_type": {f"{A}.use_kl_loss": True},
    f"{A}.optim.lr_warmup_steps": {"data.train_batch_size": 4, f"{A}.ppo_mini_batch_size": 2},
    f"{A}.optim.lr_warmup_steps_ratio": {"data.train_batch_size": 4, f"{A}.ppo_mini_batch_size": 2},
    f"{A}.ppo_mini_batch_size": {"data.train_batch_size": 4},
    f"{A}.clip_ratio": {f"{A}.clip_ratio_low": None, f"{A}.clip_ratio_high": None},  # verl's config sets both
    f"{A}.ppo_micro_batch_size": {f"{A}.ppo_micro_batch_size_per_gpu": None},
    f"{A}.optim.num_cycles": {f"{A}.optim.lr_scheduler_type": "cosine"},
    f"{A}.optim.zero_indexed_step": {f"{A}.optim.lr_scheduler_type": "cosine"},
    "trainer.total_training_steps": {f"{A}.optim.lr_scheduler_type": "cosine"},
    f"{R}.free_cache_engine": {"remote_backend.arctic.colocate": True},
}


def example_context(setting: Setting, cfg: DictConfig, profile: BackendProfile, cortex: bool = False):
    """``(ctx, shown)``: ``cfg`` with :data:`EXAMPLES`' value of ``setting`` (and the settings it needs), as the
    check sees it; None when the setting has no example."""
    path = setting.pattern
    if path not in EXAMPLES:
        return None
    example = EXAMPLES[path]
    c = cfg.copy()
    OmegaConf.set_struct(c, False)
    updates = {**_EXAMPLE_CONTEXT.get(path, {})}
    if path.endswith(".*"):
        for k, v in example.items():
            updates[f"{path[:-2]}.{k}"] = v
    else:
        updates[path] = example
    for k, v in updates.items():
        OmegaConf.update(c, k, v, force_add=True)
    opts = arctic_options(c)
    if cortex:
        opts.backend.type = "cortex"
    ctx = SettingsContext(c, opts, profile)
    shown = ", ".join(f"{k.rsplit('.', 1)[-1]}={v!r}" for k, v in updates.items() if k.startswith(path.rstrip("*.")))
    return ctx, shown


def _example_verdict(setting: Setting, cfg: DictConfig, profile: BackendProfile) -> str:
    example = example_context(setting, cfg, profile)
    if example is None or (setting.check is None and setting.note is None):
        return {VERL: "verl (unchanged)", PLACEMENT: "no effect (placement)"}.get(setting.role, "honoured")
    ctx, shown = example
    if setting.check is not None and (msg := setting.check(ctx)):
        return f"refused: {msg}"
    if setting.note is not None and (msg := setting.note(ctx)):
        return f"honoured, with a start-up note: {msg}"
    return f"{shown}: honoured"


def render_table(cfg: DictConfig, profiles: tuple[BackendProfile, ...]) -> str:
    """Markdown: every setting, its role, how it is honoured, and per profile what it says to a non-default value."""
    head = "| setting | role | how | " + " | ".join(p.name for p in profiles) + " |"
    lines = [head, "|" + "---|" * (3 + len(profiles))]
    for s in SETTINGS:
        cells = [_example_verdict(s, cfg, p).replace("|", "\\|") for p in profiles]
        lines.append(f"| `{s.pattern}` | {s.role} | {s.how} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print docs/settings.md's table (the embedded server as on a CPU host: eager and sdpa attention)."""
    from arctic_platform.backend_profile import ARCTIC_PLATFORM_MAIN, embedded_profile

    cfg = compose_config(
        ["remote_backend=arctic", "actor_rollout_ref.rollout.name=arctic", "trainer.total_training_steps=10"]
    )
    print(render_table(cfg, (embedded_profile(attn_implementations=("eager", "sdpa")), ARCTIC_PLATFORM_MAIN)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
