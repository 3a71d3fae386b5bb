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
"""The one definition of the Arctic RL protocol (docs/arctic-rl-protocol.md), shared by client, server and adapter.

Torch-free (pydantic only), so the verl adapter can import it during ``import verl``. It holds:

* the job types and their creation order, the job status vocabulary (the reference's upper-case strings) and the
  client-side state normalisation;
* the request models of every JSON endpoint, with the reference's field names (``JobConfig``, ``GenerateRequest``,
  ``SaveRequest``, ...); where this project adds a field it is marked "extension";
* the ``ds_config`` subset the embedded torch server honours, as one builder (client) and one reader (server);
* the capabilities the embedded server advertises in ``/health`` (extensions: the reference has none);
* batch keys, processing names and the loss-mode / agg-mode / KL-type lists.
"""

from __future__ import annotations

import math
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

__all__ = [
    "AGG_MODES",
    "CAPABILITIES",
    "FORWARD_PROCESSING",
    "DEFAULT_MAX_SEQ_LEN",
    "JOB_CREATE_ORDER",
    "JOB_TYPES",
    "KL_BASE_TYPES",
    "KL_TYPES",
    "LIVE_STATES",
    "LOSS_MODES",
    "RESPONSE_FIELDS",
    "TERMINAL_STATES",
    "UPDATE_PROCESSING",
    "DsConfigError",
    "GenerateRequest",
    "JobConfig",
    "JobStatus",
    "JobType",
    "SamplingParams",
    "build_ds_config",
    "gpus_flag",
    "job_gpu_counts",
    "normalize_state",
    "read_ds_config",
    "read_lora",
    "read_lr_schedule",
    "read_training_config",
]

# ------------------------------------------------------------------------------------------------
# jobs and states (docs/arctic-rl-protocol.md §2)
# ------------------------------------------------------------------------------------------------

JobType = Literal["training", "sampling", "log_prob"]
"""A job type. The request models keep ``job_type: str``: the server refuses an unknown type with its own 400 naming
the types (a ``Literal`` field would turn that into pydantic's 422)."""
JOB_TYPES: tuple[JobType, ...] = get_args(JobType)
"""The job types in the server's order (placement, ``/status``, flags)."""
JOB_CREATE_ORDER: tuple[JobType, ...] = ("sampling", "log_prob", "training")
"""Creation order; destruction runs in reverse."""


def job_gpu_counts(source: Any) -> dict[str, int]:
    """Job type -> GPUs (0: no such job), read from ``source``'s ``<job type>_gpus`` fields: the server's
    ``--training-gpus`` / ``--sampling-gpus`` / ``--log-prob-gpus`` flags, its ``ServerLimits``, the client config."""
    return {t: int(getattr(source, f"{t}_gpus")) for t in JOB_TYPES}


def gpus_flag(job_type: str) -> str:
    """The server flag of a job type's GPU count: ``--training-gpus``, ``--sampling-gpus``, ``--log-prob-gpus``."""
    return "--" + job_type.replace("_", "-") + "-gpus"


DEFAULT_MAX_SEQ_LEN = 8192
"""Prompt + response limit of a job when nothing else says (server ``--max-seq-len``, client ``max_seq_len``)."""


class JobStatus:
    """``job_info.status`` values, spelt as the reference server reports them (its client waits for ``RUNNING``)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    FAILED = "FAILED"
    TERMINATED = "TERMINATED"


LIVE_STATES = (JobStatus.PENDING, JobStatus.RUNNING)
TERMINAL_STATES = ("failed", "terminated", "done", "cancelled")  # after normalize_state (which maps "canceled")
"""Normalised (lower-case) states after which a client stops waiting (Cortex's states included)."""


def normalize_state(state: Any) -> str:
    """Lower case, without a ``job_state_`` / ``request_state_`` prefix, so ``RUNNING`` == ``running``, and one
    spelling of cancelled: servers send both ``cancelled`` and ``canceled``."""
    s = str(state or "").strip().lower()
    for prefix in ("job_state_", "request_state_"):
        if s.startswith(prefix):
            s = s[len(prefix) :]
    return "cancelled" if s == "canceled" else s


CAPABILITIES = (
    "token_ids",
    "policy_version",
    "rollout_logprobs",
    "job_states",
    "verl_losses",
    "lr_schedule",
    "lora",
    "profile",
)
"""What ``GET /health`` advertises beyond the reference's ``{"status": "OK"}`` (extension):

* ``token_ids``: ``/generate`` and ``/log-probs`` accept ``prompts: list[list[int]]`` and ``token_ids`` in results
  are exactly the generated ids (no decode / re-tokenize round trip).
* ``policy_version``: generate results, weight syncs and job infos carry the policy version.
* ``rollout_logprobs``: ``sampling_params.logprobs`` is honoured (sampled token's log-prob at the sampling T).
* ``job_states``: ``/initialize`` may return while the job is ``PENDING``; failures become ``FAILED`` + ``reason``.
* ``verl_losses``: ``/forward-backward`` computes verl's actor loss with verl's own functions for every
  ``policy_loss.loss_mode`` in :data:`LOSS_MODES`, micro-batched as the actor config says (fixed rows or a token
  budget), with verl's metric names and reductions.
* ``lr_schedule``: ``extensions.lr_schedule`` (verl's schedule keys) and ``/step`` ``lr_scheduler_step`` /
  ``total_training_steps``: verl's LR schedule, ticked once per training step.
* ``lora``: ``extensions.lora``: a peft LoRA adapter trains; syncs and HF exports carry merged weights.
* ``profile``: ``POST /profile`` starts / stops a torch profiler on the training job.
"""

# ------------------------------------------------------------------------------------------------
# batch keys and processing names (§4)
# ------------------------------------------------------------------------------------------------

RESPONSE_FIELDS = ("response_mask", "old_log_probs", "advantages", "ref_log_prob", "rollout_is_weights", "loss_mask")
"""Response-aligned batch tensors: ``[b, R]`` or left-padded ``[b, P+R]`` on the wire."""
RESPONSE_PAD_VALUES = {
    "response_mask": 0,
    "old_log_probs": 0.0,
    "advantages": 0.0,
    "ref_log_prob": 0.0,
    "rollout_is_weights": 1.0,
    "loss_mask": 0,
}
"""Right-padding value of each response-aligned tensor (IS weights pad with a neutral 1.0)."""
UPDATE_PROCESSING = {"post": ["apply_temperature", "compute_entropy_and_logprobs"], "loss_fn": "verl_grpo"}
FORWARD_PROCESSING = {"post": ["apply_temperature", "compute_entropy_and_logprobs"], "loss_fn": None}
ALLOWED_POST = ("apply_temperature", "compute_entropy_and_logprobs")
ALLOWED_LOSS_FNS = (None, "verl_grpo", "verl_ppo", "vanilla")

# ------------------------------------------------------------------------------------------------
# loss vocabulary (§6)
# ------------------------------------------------------------------------------------------------

LOSS_MODES = (
    "bypass_mode",
    "cispo",
    "clip_cov",
    "dppo_kl",
    "dppo_tv",
    "dro",
    "geo_mean",
    "gpg",
    "gspo",
    "kl_cov",
    "sapo",
    "vanilla",
)
"""``policy_loss.loss_mode`` values the embedded server computes: every name in verl 0.9.1's ``POLICY_LOSS_REGISTRY``
(the server calls ``get_policy_loss_fn``; a test holds this torch-free copy equal to the registry)."""
AGG_MODES = ("token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
KL_BASE_TYPES = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3")
KL_TYPES = KL_BASE_TYPES + tuple(k + "+" for k in KL_BASE_TYPES)
"""A ``+`` suffix is the straight-through variant (forward value of the base, gradient of k2)."""

# ------------------------------------------------------------------------------------------------
# request models (reference names: common/utils/server_models.py)
# ------------------------------------------------------------------------------------------------

DEFAULT_SEED = 42
"""A job's seed when its config names none (the reference's)."""
DEFAULT_LR = 1e-6
"""Peak learning rate of a training job when nothing names one (verl's actor default)."""
DEFAULT_BETAS = (0.9, 0.999)
DEFAULT_EPS = 1e-8
DEFAULT_WEIGHT_DECAY = 0.01
"""Decoupled (AdamW) weight decay (verl's default)."""
DEFAULT_GRAD_CLIP = 1.0
"""Max global grad norm (verl's actor ``grad_clip``)."""
_LEGACY_JOB_KEYS = {
    "device": "extensions.device",
    "dtype": "extensions.dtype",
    "max_seq_len": "extensions.max_seq_len (sampling: vllm_config.max_model_len)",
    "attn_implementation": "ds_worker_config.attn_implementation",
    "engine_kwargs": "vllm_config",
}


class JobConfig(BaseModel):
    """``POST /initialize``. Unknown keys are ignored, as by the reference, except this project's old top-level names
    (``device``, ``dtype``, ``max_seq_len``, ``attn_implementation``, ``engine_kwargs``), which are refused with the
    place they moved to, so a setting is never silently lost."""

    model_config = ConfigDict(extra="ignore", protected_namespaces=())
    model_name: str | None = None
    """HF model (the reference requires it; the embedded server falls back to its ``--model``)."""
    job_type: str = "training"
    num_devices: int | None = None
    ds_config: dict | None = None
    """DeepSpeed config; the embedded server honours the subset :func:`read_ds_config` reads and refuses the rest."""
    training_config: dict | None = None
    log_prob_config: dict | None = None
    ds_worker_config: dict | None = None
    vllm_config: dict | None = None
    checkpoint_path: str | None = None
    arctic_inference_config: dict | None = None
    full_determinism: bool = False
    seed: int = DEFAULT_SEED
    cuda_ipc: bool = False
    low_memory: bool = False
    extensions: dict | None = None
    """Extension (the reference ignores it): embedded-server settings with no reference field:
    ``device`` (auto / cpu / cuda[:N]), ``dtype`` (float32 / bfloat16 / float16; a training job keeps float32 master
    weights and uses it as the autocast dtype), ``max_seq_len``, ``lr_schedule`` (verl's optimizer schedule keys,
    :func:`read_lr_schedule`) and ``lora`` (:func:`read_lora`)."""

    @model_validator(mode="before")
    @classmethod
    def _legacy_names(cls, data: Any) -> Any:
        if isinstance(data, dict):
            bad = sorted(k for k in data if k in _LEGACY_JOB_KEYS)
            if bad:
                where = "; ".join(f"{k} -> {_LEGACY_JOB_KEYS[k]}" for k in bad)
                raise ValueError(f"JobConfig keys {bad} are not protocol fields (a real server ignores them): {where}")
        return data

    @field_validator("seed", mode="before")
    @classmethod
    def _seed(cls, v: Any) -> Any:
        return DEFAULT_SEED if v is None else v


class DestroyRequest(BaseModel):
    job_type: str


class SamplingParams(BaseModel):
    """vLLM-style sampling parameters both sampling engines implement (vLLM's ranges); others are ignored unless
    ``strict`` (:meth:`unsupported`)."""

    model_config = ConfigDict(extra="allow")
    temperature: float = Field(1.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: int = -1
    max_tokens: int | None = Field(None, ge=0)
    stop_token_ids: list[int] | None = None
    seed: int | None = None
    logprobs: int | None = Field(None, ge=0)
    ignore_eos: bool = False
    n: int = Field(1, ge=1, le=1)
    repetition_penalty: float = Field(1.0, gt=0)
    presence_penalty: float = Field(0.0, ge=-2, le=2)
    frequency_penalty: float = Field(0.0, ge=-2, le=2)
    min_p: float = Field(0.0, ge=0, le=1)

    @field_validator("logprobs", mode="before")
    @classmethod
    def _bool_logprobs(cls, v):
        """verl passes ``rollout.calculate_log_probs`` as a bool: True = the sampled token's, False = none."""
        if isinstance(v, bool):
            return 0 if v else None
        return v

    @field_validator("top_k", mode="before")
    @classmethod
    def _top_k_none(cls, v):
        return -1 if v is None else v

    def unsupported(self) -> list[str]:
        """The extra (vLLM) parameters given that the engines do not implement, sorted; empty, None and "off"
        values (:data:`NEUTRAL_SAMPLING_EXTRAS`) and output-formatting flags (:data:`HARMLESS_SAMPLING_EXTRAS`) do not
        count."""
        out = []
        for k, v in (self.model_extra or {}).items():
            if k in HARMLESS_SAMPLING_EXTRAS or v is None or v == [] or v == {}:
                continue
            if k in NEUTRAL_SAMPLING_EXTRAS and v == NEUTRAL_SAMPLING_EXTRAS[k]:
                continue
            out.append(k)
        return sorted(out)


NEUTRAL_SAMPLING_EXTRAS: dict[str, Any] = {
    "min_tokens": 0,
    "stop": None,
    "prompt_logprobs": None,
    "bad_words": None,
    "logit_bias": None,
}
"""vLLM parameters the engines do not implement, with the value that means "off" (accepted silently)."""
HARMLESS_SAMPLING_EXTRAS = frozenset(
    {
        "detokenize",
        "skip_special_tokens",
        "spaces_between_special_tokens",
        "include_stop_str_in_output",
        "output_kind",
        "truncate_prompt_tokens",
    }
)
"""Output-formatting flags that do not change the sampled token ids."""


class GenerateRequest(BaseModel):
    """``POST /generate`` (a DSSST1 frame, or JSON). ``prompts`` as token-id lists is an extension (capability
    ``token_ids``).

    Read as the embedded server has always read it: a missing or empty ``sampling_params`` means the defaults (its
    errors name the parameter alone, e.g. ``temperature: ...``), ``strict`` is taken by truthiness, and unknown keys
    are ignored. Each prompt is checked against the model by the server (strings are tokenized, ids range-checked).
    """

    prompts: list[Any]
    """Strings or token ids (lists of ints; inside a frame also 1-D integer tensors); not empty."""
    sampling_params: SamplingParams = Field(default_factory=SamplingParams)
    routing_key: Any = None
    strict: bool = False
    """Refuse :meth:`SamplingParams.unsupported` parameters (422) instead of ignoring them."""

    @model_validator(mode="before")
    @classmethod
    def _read(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        sp = data.get("sampling_params") or {}
        if not isinstance(sp, (dict, SamplingParams)):
            raise PydanticCustomError("sampling_params", "sampling_params must be an object")
        sp = SamplingParams.model_validate(sp)
        data["sampling_params"] = sp
        data["strict"] = bool(data.get("strict", False))
        unsupported = sp.unsupported()
        if unsupported and data["strict"]:
            raise PydanticCustomError(
                "sampling_params",
                f"sampling_params {unsupported} are not supported by the sampling engine (strict=true)",
            )
        if not isinstance(data.get("prompts"), list) or not data["prompts"]:
            raise PydanticCustomError(
                "prompts", "prompts must be a non-empty list of strings (or token-id lists: capability token_ids)"
            )
        return data


class LogProbsRequest(BaseModel):
    """``POST /log-probs`` (JSON in, frame out). Token-id prompts/completions are an extension (``token_ids``)."""

    prompts: list[str] | list[list[int]]
    completions: list[str] | list[list[int]] | None = None
    top_k: int = Field(1, ge=0)


class StepRequest(BaseModel):
    learning_rate: float | None = Field(None, ge=0)
    lr_scheduler_step: bool | None = None
    """Extension: advance the LR schedule after this step (None: yes, one tick per ``/step`` as the reference does;
    verl's actor ticks only on the last mini-batch of a training step, so its client sends false on the others)."""
    total_training_steps: int | None = Field(None, ge=1)
    """Extension: the schedule's horizon in ticks, when the job was created without it (verl's
    ``actor.optim.total_training_steps``, known only after verl built its dataloader)."""


class ProfileRequest(BaseModel):
    """Extension ``POST /profile?job_id=`` (training): torch profiler around the job's engine calls."""

    model_config = ConfigDict(extra="forbid")
    action: str
    """``start`` or ``stop``."""
    path: str | None = None
    """``stop``: folder for the chrome trace (default: the job's checkpoint folder / ``profile``)."""
    tag: str | None = None
    """``stop``: trace file name without ``.json`` (default ``training_step_<n>``)."""


class SaveRequest(BaseModel):
    checkpoint_id: str | None = None
    checkpoint_type: str = "resumable"
    path: str | None = None
    step: int | None = Field(None, ge=0)
    export_hf: bool = False
    save_total_limit: int | None = Field(None, ge=1)
    stage_info: dict[str, Any] | None = None


class LoadCheckpointRequest(BaseModel):
    path: str | None = None
    step: int | None = Field(None, ge=0)


class ResetPrefixCacheRequest(BaseModel):
    drain: bool = True
    timeout_s: float = 60.0
    retry_interval_s: float = 0.1


class WeightSyncRequest(BaseModel):
    source_sub_job_id: int | None = None
    target_sub_job_ids: list[int] | None = None
    cuda_ipc: bool | None = None
    low_memory: bool | None = None
    policy_version: int | None = Field(None, ge=0)
    """Extension: the version the sampler serves after the sync (default: its previous version + 1)."""


class OperationRequest(BaseModel):
    operation_type: str
    sub_job_id: int | str | None = None
    sub_job_type: str | None = None
    payload: dict[str, Any] = Field(default_factory=dict)


class WeightNormRequest(BaseModel):
    training_job_id: int
    sampling_job_id: int


class SleepRequest(BaseModel):
    level: int = 1


class SleepTrainingRequest(BaseModel):
    mode: str = "all"


SLEEP_TRAINING_MODES = ("all", "non_lp", "lp_params")

# ------------------------------------------------------------------------------------------------
# ds_config: the subset the embedded torch server honours
# ------------------------------------------------------------------------------------------------


class DsConfigError(ValueError):
    """A ``ds_config`` (or ``root``) key the embedded server cannot honour; ``key`` is its dotted path in ``root``."""

    def __init__(self, key: str, why: str, root: str = "ds_config"):
        super().__init__(f"{root}.{key}: {why}" if key else f"{root}: {why}")
        self.key = key
        self.root = root


# Keys that size or place DeepSpeed's work and do not change the math of a single-process torch engine.
_DS_INFORMATIONAL = {
    "train_batch_size",
    "gradient_accumulation_steps",
    "steps_per_print",
    "wall_clock_breakdown",
    "log_level",
    "zero_optimization",
    "zero_allow_untested_optimizer",
    "torch_autocast",
    "communication_data_type",
    "data_types",
    "prescale_gradients",
    "gradient_predivide_factor",
    "dump_state",
}
_OPTIMIZER_TYPES = ("adamw", "adam")
_OPT_PARAMS = {"lr", "betas", "eps", "weight_decay", "adam_w_mode", "torch_adam", "fused"}


def build_ds_config(
    *,
    lr: float,
    betas: tuple[float, float] = DEFAULT_BETAS,
    eps: float = DEFAULT_EPS,
    weight_decay: float = DEFAULT_WEIGHT_DECAY,
    grad_clip: float | None = None,
    lr_scheduler_type: str = "constant",
    warmup_steps: int = 0,
    total_steps: int | None = None,
    min_lr_ratio: float = 0.0,
    micro_batch_size: int | None = None,
    base: dict | None = None,
) -> dict:
    """A ``ds_config`` in the reference adapter's shape: AdamW ``optimizer``, ``gradient_clipping`` and a
    ``WarmupLR`` / ``WarmupCosineLR`` ``scheduler`` (one tick per ``/step``), over ``base`` (e.g. a zero config)."""
    cfg = dict(base or {})
    cfg["optimizer"] = {
        "type": "AdamW",
        "params": {
            "lr": float(lr),
            "betas": [float(b) for b in betas],
            "eps": float(eps),
            "weight_decay": weight_decay,
        },
    }
    if grad_clip is not None and grad_clip > 0:
        cfg["gradient_clipping"] = float(grad_clip)
    if lr_scheduler_type == "cosine":
        if not total_steps:
            raise ValueError("lr_scheduler_type='cosine' needs total_steps")
        cfg["scheduler"] = {
            "type": "WarmupCosineLR",
            "params": {
                "total_num_steps": int(total_steps),
                "warmup_num_steps": int(warmup_steps),
                "warmup_min_ratio": 0.0,
                "cos_min_ratio": float(min_lr_ratio),
                "warmup_type": "linear",
            },
        }
    elif lr_scheduler_type == "constant":
        if warmup_steps > 0:
            cfg["scheduler"] = {
                "type": "WarmupLR",
                "params": {
                    "warmup_min_lr": 0.0,
                    "warmup_max_lr": float(lr),
                    "warmup_num_steps": int(warmup_steps),
                    "warmup_type": "linear",
                },
            }
    else:
        raise ValueError(f"lr_scheduler_type {lr_scheduler_type!r} is not 'constant' or 'cosine'")
    if micro_batch_size is not None:
        cfg["train_micro_batch_size_per_gpu"] = int(micro_batch_size)
    return cfg


def _num(key: str, v: Any, *, lo: float = 0.0, strict: bool = False, root: str = "ds_config") -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < lo or (strict and v == lo):
        raise DsConfigError(key, f"must be a finite number {'>' if strict else '>='} {lo}, got {v!r}", root)
    return float(v)


def read_ds_config(ds_config: dict | None) -> dict[str, Any]:
    """The training settings a ``ds_config`` asks for, as keyword arguments of the server's ``TrainingSettings``.

    Honoured: ``optimizer`` (AdamW / Adam with ``adam_w_mode``: lr, betas, eps, weight_decay), ``gradient_clipping``
    (absent or 0 = no clipping, DeepSpeed's default), ``scheduler`` (``WarmupLR`` / ``WarmupCosineLR`` with linear
    warmup from 0), ``train_micro_batch_size_per_gpu`` and ``bf16`` / ``fp16`` (``enabled`` selects the dtype).
    Accepted without effect, because they only size or place DeepSpeed's work: batch sizing, ``zero_optimization``,
    logging keys. Anything else raises :class:`DsConfigError` naming the key. ``None`` gives ``{}`` (the defaults).
    """
    if ds_config is None:
        return {}
    if not isinstance(ds_config, dict):
        raise DsConfigError("", f"must be an object, got {type(ds_config).__name__}")
    out: dict[str, Any] = {"grad_clip": None}
    for key, value in ds_config.items():
        if key in _DS_INFORMATIONAL:
            continue
        if key == "optimizer":
            if not isinstance(value, dict):
                raise DsConfigError("optimizer", "must be an object {type, params}")
            unknown = sorted(set(value) - {"type", "params"})
            if unknown:
                raise DsConfigError(f"optimizer.{unknown[0]}", "is not read by this server")
            kind = str(value.get("type", "AdamW")).lower()
            params = value.get("params") or {}
            if kind not in _OPTIMIZER_TYPES:
                raise DsConfigError("optimizer.type", f"{value.get('type')!r}: this server runs AdamW only")
            if kind == "adam" and not params.get("adam_w_mode", True):
                raise DsConfigError("optimizer.params.adam_w_mode", "false (L2 Adam) is not implemented; AdamW only")
            for p in sorted(set(params) - _OPT_PARAMS):
                raise DsConfigError(f"optimizer.params.{p}", "is not read by this server")
            if "lr" in params:
                out["lr"] = _num("optimizer.params.lr", params["lr"])
            if "eps" in params:
                out["eps"] = _num("optimizer.params.eps", params["eps"], strict=True)
            if "weight_decay" in params:
                out["weight_decay"] = _num("optimizer.params.weight_decay", params["weight_decay"])
            if "betas" in params:
                b = params["betas"]
                if not isinstance(b, (list, tuple)) or len(b) != 2:
                    raise DsConfigError("optimizer.params.betas", f"must be two numbers, got {b!r}")
                out["betas"] = (_num("optimizer.params.betas", b[0]), _num("optimizer.params.betas", b[1]))
        elif key == "gradient_clipping":
            g = _num("gradient_clipping", value)
            out["grad_clip"] = g if g > 0 else None
        elif key == "scheduler":
            out.update(_read_scheduler(value))
        elif key == "sequence_parallel_size":
            if value != 1:
                raise DsConfigError(key, f"{value!r}: the embedded torch server has no sequence parallelism (use 1)")
        elif key == "train_micro_batch_size_per_gpu":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DsConfigError(key, f"must be a positive int, got {value!r}")
            out["micro_batch_size"] = value
        elif key in ("bf16", "fp16"):
            if not isinstance(value, dict):
                raise DsConfigError(key, "must be an object {enabled: bool}")
            if value.get("enabled") is True or value.get("enabled") == "auto":
                out["dtype"] = "bfloat16" if key == "bf16" else "float16"
        else:
            raise DsConfigError(key, "is not honoured by the embedded torch server (it would be silently lost)")
    if "warmup_max_lr" in out:
        peak = out.pop("warmup_max_lr")
        if "lr" in out and out["lr"] != peak:
            raise DsConfigError(
                "scheduler.params.warmup_max_lr", f"{peak} != optimizer.params.lr {out['lr']} (one peak rate)"
            )
        out["lr"] = peak
    return out


_TC_OPTIMIZER = {"lr", "betas", "beta1", "beta2", "eps", "weight_decay", "torch_adam", "adam_w_mode"}
_TC_CLIP = ("gradient_clipping", "max_grad_norm")
_TC_KEYS = {"optimizer", "gradient_accumulation_steps", "gradient_clipping", "lr_scheduler", "training_horizon"}
_TC_SCHEDULER = {"type", "warmup_steps", "warmup_ratio", "min_lr_ratio"}


def read_training_config(tc: dict | None) -> dict[str, Any]:
    """The settings a reference ``training_config`` asks for (Arctic-Platform reads it before ``ds_config`` and lets
    it win: optimizer, gradient clipping, ``lr_scheduler`` over ``training_horizon`` optimizer steps).

    Same keyword arguments as :func:`read_ds_config`; with ``training_config`` the reference's defaults apply to
    missing optimizer keys (lr 1e-5, weight decay 0). A key it does not read raises :class:`DsConfigError`
    (``key`` is ``training_config.<path>``).
    """
    if tc is None:
        return {}
    if not isinstance(tc, dict):
        raise DsConfigError("", "must be an object", root="training_config")

    def bad(key: str, why: str) -> DsConfigError:
        return DsConfigError(key, why, root="training_config")

    def _tc_num(key: str, v: Any, **kw: Any) -> float:
        return _num(key, v, root="training_config", **kw)

    for k in sorted(set(tc) - _TC_KEYS):
        raise bad(k, "is not read (known: " + ", ".join(sorted(_TC_KEYS)) + ")")
    opt = tc.get("optimizer") or {}
    if not isinstance(opt, dict):
        raise bad("optimizer", "must be an object")
    for k in sorted(set(opt) - _TC_OPTIMIZER - set(_TC_CLIP)):
        raise bad(f"optimizer.{k}", "is not read")
    if opt.get("adam_w_mode") is False:
        raise bad("optimizer.adam_w_mode", "false (L2 Adam) is not implemented; AdamW only")
    betas = opt.get("betas")
    if betas is None:
        betas = [opt.get("beta1", 0.9), opt.get("beta2", 0.999)]
    if not isinstance(betas, (list, tuple)) or len(betas) != 2:
        raise bad("optimizer.betas", f"must be two numbers, got {betas!r}")
    out: dict[str, Any] = {
        "lr": _tc_num("optimizer.lr", opt.get("lr", 1e-5)),
        "betas": (_tc_num("optimizer.betas", betas[0]), _tc_num("optimizer.betas", betas[1])),
        "eps": _tc_num("optimizer.eps", opt.get("eps", 1e-8), strict=True),
        "weight_decay": _tc_num("optimizer.weight_decay", opt.get("weight_decay", 0.0)),
    }
    clip = next((opt[k] for k in _TC_CLIP if k in opt), tc.get("gradient_clipping"))
    if clip is not None:
        g = _tc_num("gradient_clipping", clip)
        out["grad_clip"] = g if g > 0 else None
    sched = tc.get("lr_scheduler")
    horizon = tc.get("training_horizon", 0) or 0
    if sched is not None:
        if not isinstance(sched, dict):
            raise bad("lr_scheduler", "must be an object")
        for k in sorted(set(sched) - _TC_SCHEDULER):
            raise bad(f"lr_scheduler.{k}", "is not read")
        kind = sched.get("type", "constant")
        if kind not in ("constant", "cosine"):
            raise bad("lr_scheduler.type", f"{kind!r}: constant or cosine")
        if horizon > 0:
            h = int(_tc_num("training_horizon", horizon, lo=1))
            if "warmup_steps" in sched:
                warm = round(_tc_num("lr_scheduler.warmup_steps", sched["warmup_steps"]))
            else:
                warm = round(_tc_num("lr_scheduler.warmup_ratio", sched.get("warmup_ratio", 0.0)) * h)
            out["lr_scheduler_type"] = kind
            out["warmup_steps"] = int(warm)
            if kind == "cosine":
                out["total_steps"] = h
                out["min_lr_ratio"] = _tc_num("lr_scheduler.min_lr_ratio", sched.get("min_lr_ratio") or 0.0)
    return out


def _read_scheduler(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DsConfigError("scheduler", "must be an object {type, params}")
    kind = value.get("type")
    p = dict(value.get("params") or {})
    warmup_type = p.pop("warmup_type", "log")
    if warmup_type != "linear":
        raise DsConfigError("scheduler.params.warmup_type", f"{warmup_type!r}: only 'linear' warmup is implemented")
    if kind == "WarmupLR":
        out: dict[str, Any] = {"lr_scheduler_type": "constant"}
        if _num("scheduler.params.warmup_min_lr", p.pop("warmup_min_lr", 0.0)) != 0.0:
            raise DsConfigError("scheduler.params.warmup_min_lr", "only 0 is implemented (warmup starts at 0)")
        if "warmup_max_lr" in p:
            out["warmup_max_lr"] = _num("scheduler.params.warmup_max_lr", p.pop("warmup_max_lr"))
        out["warmup_steps"] = int(_num("scheduler.params.warmup_num_steps", p.pop("warmup_num_steps", 1000)))
    elif kind == "WarmupCosineLR":
        out = {"lr_scheduler_type": "cosine"}
        if _num("scheduler.params.warmup_min_ratio", p.pop("warmup_min_ratio", 0.0)) != 0.0:
            raise DsConfigError("scheduler.params.warmup_min_ratio", "only 0 is implemented (warmup starts at 0)")
        if "total_num_steps" not in p:
            raise DsConfigError("scheduler.params.total_num_steps", "is required for WarmupCosineLR")
        out["total_steps"] = int(_num("scheduler.params.total_num_steps", p.pop("total_num_steps"), lo=1))
        out["warmup_steps"] = int(_num("scheduler.params.warmup_num_steps", p.pop("warmup_num_steps", 0)))
        out["min_lr_ratio"] = _num("scheduler.params.cos_min_ratio", p.pop("cos_min_ratio", 0.0))
        if out["min_lr_ratio"] > 1:
            raise DsConfigError("scheduler.params.cos_min_ratio", "must be <= 1")
    else:
        raise DsConfigError("scheduler.type", f"{kind!r}: only WarmupLR and WarmupCosineLR are implemented")
    p.pop("last_batch_iteration", None)
    if p:
        raise DsConfigError(f"scheduler.params.{sorted(p)[0]}", "is not read by this server")
    return out


# ------------------------------------------------------------------------------------------------
# extensions.lr_schedule and extensions.lora of a training job (verl's own keys)
# ------------------------------------------------------------------------------------------------

LR_SCHEDULE_KEYS = (
    "lr_scheduler_type",
    "warmup_style",
    "lr_warmup_steps",
    "lr_warmup_steps_ratio",
    "total_training_steps",
    "min_lr_ratio",
    "num_cycles",
    "zero_indexed_step",
)
"""verl's ``actor.optim`` schedule keys, accepted as they are in ``extensions.lr_schedule``."""


def read_lr_schedule(value: Any) -> dict[str, Any]:
    """``extensions.lr_schedule`` (verl's optimizer keys) as ``TrainingSettings`` keyword arguments.

    ``lr_warmup_steps`` <= 0 or None means ``lr_warmup_steps_ratio`` of the horizon; ``total_training_steps`` None or
    <= 0 means "not known yet" (a ``/step`` brings it); ``warmup_style`` is verl's deprecated name of
    ``lr_scheduler_type``. Unknown keys raise ``ValueError`` naming ``extensions.lr_schedule.<key>``.
    """
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("extensions.lr_schedule must be an object of verl optimizer keys")
    where = "extensions.lr_schedule"
    for k in value:
        if k not in LR_SCHEDULE_KEYS:
            raise ValueError(f"{where}.{k} is not read by this server (known: {list(LR_SCHEDULE_KEYS)})")
    kind = value.get("lr_scheduler_type") or "constant"
    style = value.get("warmup_style")
    if style is not None:
        if value.get("lr_scheduler_type") not in (None, style):
            raise ValueError(f"{where}.warmup_style {style!r} contradicts lr_scheduler_type {kind!r}")
        kind = style
    if kind not in ("constant", "cosine"):
        raise ValueError(f"{where}.lr_scheduler_type {kind!r}: verl knows 'constant' and 'cosine'")
    out: dict[str, Any] = {"lr_scheduler_type": kind}

    def number(key: str, lo: float | None = None, hi: float | None = None) -> float | None:
        v = value.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{where}.{key} must be a finite number, got {v!r}")
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise ValueError(f"{where}.{key} must be in [{lo}, {hi}], got {v!r}")
        return float(v)

    w = number("lr_warmup_steps")
    out["warmup_steps"] = int(w) if w is not None and w > 0 else 0
    out["warmup_steps_ratio"] = number("lr_warmup_steps_ratio", 0.0, 1.0) or 0.0
    t = number("total_training_steps")
    out["total_steps"] = int(t) if t is not None and t > 0 else None
    out["min_lr_ratio"] = number("min_lr_ratio", 0.0, 1.0) or 0.0
    cycles = number("num_cycles")
    out["num_cycles"] = 0.5 if cycles is None else cycles
    z = value.get("zero_indexed_step", True)
    if not isinstance(z, bool):
        raise ValueError(f"{where}.zero_indexed_step must be true or false, got {z!r}")
    out["zero_indexed_step"] = z
    return out


LORA_KEYS = ("rank", "alpha", "target_modules", "exclude_modules", "target_parameters")
"""``extensions.lora`` keys: verl's ``model.lora_rank``, ``lora_alpha``, ``target_modules``, ``exclude_modules``,
``target_parameters``."""


def read_lora(value: Any) -> dict[str, Any] | None:
    """``extensions.lora`` checked; None (or rank 0) means full fine-tuning."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("extensions.lora must be an object {rank, alpha, target_modules, ...}")
    for k in value:
        if k not in LORA_KEYS:
            raise ValueError(f"extensions.lora.{k} is not read by this server (known: {list(LORA_KEYS)})")
    rank = value.get("rank", 0)
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise ValueError(f"extensions.lora.rank must be a non-negative int, got {rank!r}")
    if rank == 0:
        return None
    alpha = value.get("alpha", 16)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not alpha > 0:
        raise ValueError(f"extensions.lora.alpha must be a positive number, got {alpha!r}")
    out: dict[str, Any] = {"rank": rank, "alpha": alpha, "target_modules": value.get("target_modules", "all-linear")}
    for k in ("target_modules", "exclude_modules", "target_parameters"):
        v = value.get(k, out.get(k))
        if v is not None and not (isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))):
            raise ValueError(f"extensions.lora.{k} must be a string or a list of strings, got {v!r}")
        out[k] = v
    return out
