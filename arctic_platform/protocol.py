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
* the sections of a ``JobConfig`` the embedded server reads, typed (``DsConfig``, ``ReferenceTrainingConfig``,
  ``DsWorkerConfig``, ``Extensions``), refusing what it cannot honour by key path (:func:`first_error`) (the
  ``ds_config`` builder and the readers that turn the sections into training settings are :mod:`.ds_config`);
* the capabilities the embedded server advertises in ``/health`` (extensions: the reference has none);
* batch keys, processing names and the loss-mode / agg-mode / KL-type lists.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    Strict,
    ValidationError,
    field_validator,
    model_validator,
)
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
    "DestroyRequest",
    "DsConfig",
    "DsWorkerConfig",
    "Extensions",
    "GenerateRequest",
    "JobConfig",
    "JobStatus",
    "DEFAULT_JOB_GPUS",
    "JobType",
    "JobTypeName",
    "LOG_PROB_DEVICES",
    "Lora",
    "LrSchedule",
    "OptimizerSpec",
    "ReferenceTrainingConfig",
    "SamplingParams",
    "first_error",
    "distinct_gpus",
    "gpus_flag",
    "job_gpu_counts",
    "normalize_state",
]

# ------------------------------------------------------------------------------------------------
# jobs and states (docs/arctic-rl-protocol.md §2)
# ------------------------------------------------------------------------------------------------

JobType = Literal["training", "sampling", "log_prob"]
"""A job type (request models: :data:`JobTypeName`, which refuses another value with 400 naming the types)."""
JOB_TYPES: tuple[JobType, ...] = get_args(JobType)
"""The job types in the server's order (placement, ``/status``, flags)."""
JOB_CREATE_ORDER: tuple[JobType, ...] = ("sampling", "log_prob", "training")
"""Creation order; destruction runs in reverse."""


def job_gpu_counts(source: Any) -> dict[str, int]:
    """Job type -> GPUs (0: no such job), read from ``source``'s ``<job type>_gpus`` fields: the server's
    ``--training-gpus`` / ``--sampling-gpus`` / ``--log-prob-gpus`` flags, its ``ServerLimits``, the client config."""
    return {t: int(getattr(source, f"{t}_gpus")) for t in JOB_TYPES}


DEFAULT_JOB_GPUS = 1
"""A job's GPUs (CPU workers) when nothing says: ``--training-gpus`` / ``--sampling-gpus`` / ``--log-prob-gpus``, the
client's and the plugin's ``*_gpus`` (Arctic-Platform's defaults too)."""

LOG_PROB_DEVICES = ("own", "training")
"""Where the log_prob (reference) job runs: ``own`` GPUs after the other jobs', or the ``training`` job's GPUs (a
sharded forward-only copy beside the training shards, used between the training job's phases, as stock verl
colocates its reference): server ``--log-prob-devices``, client and plugin ``log_prob_devices``."""


def distinct_gpus(source: Any) -> int:
    """The GPUs ``source``'s jobs occupy together: the sum of :func:`job_gpu_counts`, less the log_prob job's when it
    runs on the training job's GPUs (``log_prob_devices == "training"``)."""
    counts = job_gpu_counts(source)
    shared = getattr(source, "log_prob_devices", "own") == "training"
    return sum(counts.values()) - (counts["log_prob"] if shared else 0)


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

# ------------------------------------------------------------------------------------------------
# job configuration: the sections of a JobConfig the embedded server reads, typed
# ------------------------------------------------------------------------------------------------
# Every section refuses a key it does not read by name (a setting is never silently lost); DeepSpeed's keys that only
# size or place its work are fields typed Any, accepted without effect. A refusal names the full key path
# (``ds_config.optimizer.params.foo``): :func:`first_error` renders the first error of a ValidationError.


def _refuse(why: str, at: str = "", status: int = 422) -> PydanticCustomError:
    """A refusal rendered by :func:`first_error` as ``<key path>[.<at>] <why>``, answered with ``status``."""
    return PydanticCustomError("refused", "{why}", {"why": why, "at": at, "status": status})


def first_error(e: ValidationError) -> tuple[str, str, int]:
    """``(path, reason, status)`` of ``e``'s first error: the dotted key path, a one-line reason starting with it
    (``<path> <why>`` for a refusal, ``<path>: <pydantic's message>`` otherwise) and the HTTP status a server answers
    with (422, or the refusal's own: 400 for an unknown job type, as the reference)."""
    err = e.errors()[0]
    ctx = err.get("ctx") or {}
    path = ".".join([str(x) for x in err["loc"]] + ([ctx["at"]] if ctx.get("at") else []))
    if err["type"] == "refused":
        return path, f"{path} {ctx['why']}" if path else ctx["why"], ctx["status"]
    return path, f"{path}: {err['msg']}" if path else err["msg"], 422


def _checked(tp: Any, ok: Callable[[Any], bool], what: str) -> Any:
    """``tp`` taken as sent when ``ok``, else refused as ``<path> must be <what>, got <value>``."""

    def check(v: Any) -> Any:
        if not ok(v):
            raise _refuse(f"must be {what}, got {v!r}")
        return v

    return Annotated[tp, PlainValidator(check)]


def _number(lo: float | None = 0.0, hi: float | None = None, *, above: bool = False, integer: bool = False) -> Any:
    """A JSON number (an int when ``integer``; never a bool or a string), finite, in ``[lo, hi]`` (``lo`` excluded
    when ``above``), kept as sent."""

    def ok(v: Any) -> bool:
        if isinstance(v, bool) or not isinstance(v, int if integer else (int, float)) or not math.isfinite(v):
            return False
        return (lo is None or (v > lo if above else v >= lo)) and (hi is None or v <= hi)

    if integer:
        what = f"an int >= {lo}"
    elif hi is not None:
        what = f"in [{lo}, {hi}]"
    else:
        what = "a finite number" + ("" if lo is None else f" {'>' if above else '>='} {lo}")
    return _checked(int if integer else float, ok, what)


def _one_of(kind: Any, why: str, status: int = 422) -> Any:
    """The ``Literal`` ``kind``; another value is refused as ``<path> <value>: <why>``."""
    allowed = get_args(kind)

    def check(v: Any) -> Any:
        if v not in allowed:
            raise _refuse(f"{v!r}: {why}", status=status)
        return v

    return Annotated[kind, PlainValidator(check)]


_Number = _number()
_Positive = _number(above=True)
_Fraction = _number(0.0, 1.0)
_Real = _number(None)
_Count = _number(1, integer=True)
_Rank = _number(0, integer=True)
_Steps = _number(1)
_Zero = _checked(float, lambda v: not isinstance(v, bool) and v == 0, "0 (warmup starts at 0 here)")
_Names = _checked(
    str | list[str],
    lambda v: isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v)),
    "a string or a list of strings",
)
_LinearWarmup = _one_of(Literal["linear"], "only 'linear' warmup is implemented")
_DsSchedulerType = _one_of(Literal["WarmupLR", "WarmupCosineLR"], "only WarmupLR and WarmupCosineLR are implemented")
_NoSequenceParallel = _one_of(Literal[1], "the embedded torch server has no sequence parallelism (use 1)")
_DecoupledOnly = _one_of(Literal[True, None], "L2 Adam is not implemented; AdamW only")
_TcSchedulerType = _one_of(Literal["constant", "cosine"], "constant or cosine")
_NoLiger = _one_of(Literal[False, None], "the torch engine has no Liger kernels")
_NoZorro = _one_of(Literal[False, None], "the torch engine has no ZoRRo training")
_Enabled = _one_of(Literal[True, False, "auto"], "true, false or 'auto'")
_LrKind = _one_of(Literal["constant", "cosine"], "verl knows 'constant' and 'cosine'")
JobTypeName = _one_of(JobType, f"unknown job_type (one of {JOB_TYPES})", status=400)
"""A request's ``job_type``: :data:`JobType`; another value is refused with 400 (the reference's status)."""


class _Read(BaseModel):
    """A section the embedded server reads: a key that is not a field is refused by name, with the known keys."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _unknown_keys(cls, data: Any) -> Any:
        unknown = sorted(k for k in data if k not in cls.model_fields) if isinstance(data, dict) else []
        if unknown:
            raise _refuse(f"is not read by this server (known: {', '.join(cls.model_fields)})", at=str(unknown[0]))
        return data


class DsOptimizerParams(_Read):
    """``ds_config.optimizer.params``; a missing value is the training default."""

    lr: _Number | None = None
    betas: tuple[_Number, _Number] | None = None
    eps: _Positive | None = None
    weight_decay: _Number | None = None
    """Decoupled (AdamW) weight decay."""
    adam_w_mode: bool = True
    """Must stay true with ``type: Adam`` (L2 Adam is not implemented); ``AdamW`` is decoupled either way."""
    torch_adam: bool | None = None
    fused: bool | None = None
    """Implementation choices (``torch_adam``, ``fused``): accepted, the math is the same."""


class DsOptimizer(_Read):
    """``ds_config.optimizer``: AdamW (``type`` ``AdamW``, or ``Adam`` with ``adam_w_mode``; any case)."""

    type: str = "AdamW"
    params: DsOptimizerParams = Field(default_factory=DsOptimizerParams)

    @field_validator("type")
    @classmethod
    def _adamw(cls, v: str) -> str:
        if v.lower() not in ("adamw", "adam"):
            raise _refuse(f"{v!r}: this server runs AdamW only")
        return v

    @model_validator(mode="after")
    def _decoupled(self) -> DsOptimizer:
        if self.type.lower() == "adam" and not self.params.adam_w_mode:
            raise _refuse("must be true: L2 Adam is not implemented (AdamW only)", at="params.adam_w_mode")
        return self


_WARMUP_PARAMS = {"warmup_type", "warmup_num_steps", "last_batch_iteration"}
_SCHEDULER_PARAMS = {
    "WarmupLR": _WARMUP_PARAMS | {"warmup_min_lr", "warmup_max_lr"},
    "WarmupCosineLR": _WARMUP_PARAMS | {"warmup_min_ratio", "total_num_steps", "cos_min_ratio"},
}
"""The ``scheduler.params`` keys of each scheduler type (DeepSpeed's)."""


class DsSchedulerParams(_Read):
    """``ds_config.scheduler.params`` (:data:`_SCHEDULER_PARAMS`: which keys each type takes)."""

    warmup_type: _LinearWarmup = Field("log", validate_default=True)
    """DeepSpeed's default, ``log``, is refused: name ``linear``."""
    warmup_min_lr: _Zero = 0.0
    warmup_max_lr: _Number | None = None
    """WarmupLR's peak: the optimizer's ``lr`` (they must agree)."""
    warmup_num_steps: _Number | None = None
    """Warmup ticks (WarmupLR's default 1000, WarmupCosineLR's 0)."""
    warmup_min_ratio: _Fraction = 0.0
    """WarmupCosineLR's warmup start, a fraction of the peak (verl's ``init_lr_ratio``)."""
    total_num_steps: _Steps | None = None
    """WarmupCosineLR's horizon in ticks (required there)."""
    cos_min_ratio: _Fraction = 0.0
    last_batch_iteration: Any = None
    """Accepted: a resumed job's schedule position comes from its checkpoint."""


class DsScheduler(_Read):
    """``ds_config.scheduler``: ``WarmupLR`` (constant after a linear warmup from 0) or ``WarmupCosineLR``, one tick
    per ``/step``."""

    type: _DsSchedulerType
    params: DsSchedulerParams = Field(default_factory=dict, validate_default=True)

    @model_validator(mode="after")
    def _params_of_type(self) -> DsScheduler:
        other = sorted(self.params.model_fields_set - _SCHEDULER_PARAMS[self.type])
        if other:
            raise _refuse(f"is not read by {self.type}", at=f"params.{other[0]}")
        if self.type == "WarmupCosineLR" and self.params.total_num_steps is None:
            raise _refuse("is required for WarmupCosineLR", at="params.total_num_steps")
        return self


class DsPrecision(BaseModel):
    """``ds_config.bf16`` / ``fp16``: ``enabled`` (true or ``"auto"``) selects the job's dtype. DeepSpeed's
    loss-scaling keys beside it are accepted without effect (a float16 training job is refused for want of it)."""

    model_config = ConfigDict(extra="allow")
    enabled: _Enabled = False


class DsConfig(_Read):
    """A DeepSpeed config as the embedded torch server reads it (``ds_config``, ``log_prob_config``).

    Honoured: ``optimizer``, ``scheduler``, ``gradient_clipping``, ``train_micro_batch_size_per_gpu``, ``bf16`` /
    ``fp16`` (:func:`read_ds_config`); ``sequence_parallel_size`` only as 1. The keys typed ``Any`` are accepted
    without effect, because they only size or place DeepSpeed's work (batch sizing, ZeRO, logging) and DeepSpeed
    allows values such as ``"auto"`` there. Any other key is refused by name.
    """

    optimizer: DsOptimizer | None = None
    scheduler: DsScheduler | None = None
    gradient_clipping: _Number | None = None
    """Max global grad norm; absent or 0: no clipping (DeepSpeed's default)."""
    train_micro_batch_size_per_gpu: _Count | None = None
    sequence_parallel_size: _NoSequenceParallel = 1
    bf16: DsPrecision | None = None
    fp16: DsPrecision | None = None
    train_batch_size: Any = None
    gradient_accumulation_steps: Any = None
    steps_per_print: Any = None
    wall_clock_breakdown: Any = None
    log_level: Any = None
    zero_optimization: Any = None
    zero_allow_untested_optimizer: Any = None
    torch_autocast: Any = None
    communication_data_type: Any = None
    data_types: Any = None
    prescale_gradients: Any = None
    gradient_predivide_factor: Any = None
    dump_state: Any = None

    @model_validator(mode="after")
    def _one_peak_rate(self) -> DsConfig:
        peak = self.scheduler.params.warmup_max_lr if self.scheduler else None
        lr = self.optimizer.params.lr if self.optimizer else None
        if peak is not None and lr is not None and peak != lr:
            raise _refuse(f"{peak} != optimizer.params.lr {lr} (one peak rate)", at="scheduler.params.warmup_max_lr")
        return self


class TrainingOptimizer(_Read):
    """``training_config.optimizer`` (Arctic-Platform's keys and defaults)."""

    lr: _Number = 1e-5
    betas: tuple[_Number, _Number] | None = None
    """Or ``beta1`` / ``beta2``."""
    beta1: _Number = 0.9
    beta2: _Number = 0.999
    eps: _Positive = 1e-8
    weight_decay: _Number = 0.0
    gradient_clipping: _Number | None = None
    max_grad_norm: _Number | None = None
    """Either name of the clipping norm, over ``training_config.gradient_clipping``."""
    torch_adam: bool | None = None
    adam_w_mode: _DecoupledOnly = None


class TrainingLrScheduler(_Read):
    """``training_config.lr_scheduler``: over ``training_horizon`` optimizer steps (none without a horizon)."""

    type: _TcSchedulerType = "constant"
    warmup_steps: _Number | None = None
    warmup_ratio: _Number = 0.0
    """Of the horizon, when ``warmup_steps`` is absent."""
    min_lr_ratio: _Number | None = None


class ReferenceTrainingConfig(_Read):
    """``training_config``: the reference's training settings, read before ``ds_config`` and winning over it."""

    optimizer: TrainingOptimizer | None = None
    gradient_accumulation_steps: Any = None
    gradient_clipping: _Number | None = None
    lr_scheduler: TrainingLrScheduler | None = None
    training_horizon: _Number | None = None


class DsWorkerConfig(_Read):
    """``ds_worker_config``: the keys the torch engines read (the reference adapter's set)."""

    attn_implementation: str | None = None
    """A transformers attention implementation this server can load (checked at ``/initialize``); None: sdpa."""
    enable_gradient_checkpointing: bool | None = None
    use_liger: _NoLiger = None
    zorro_train_enable: _NoZorro = None


class LrSchedule(_Read):
    """The LR schedule, one typed spec from the verl plugin through the client to the server: verl's ``actor.optim``
    schedule keys (sent as ``extensions.lr_schedule``), counted in *ticks* (verl: one per training step).

    :meth:`warmup` is verl's warmup rule (``lr_warmup_steps`` when > 0, else ``lr_warmup_steps_ratio`` of the
    horizon), written here once: the server's scheduler, the plugin's checks and :func:`ds_scheduler` (the DeepSpeed
    scheduler a reference server gets) all call it. ``total_training_steps`` None or <= 0 means "not known yet" (a
    ``/step`` brings it). ``init_lr_ratio`` is where a cosine warmup starts (verl's ``get_cosine_schedule_with_warmup``
    argument; Megatron's ``lr_warmup_init`` / ``lr``); ``warmup_style`` is verl's deprecated name of
    ``lr_scheduler_type``.
    """

    lr_scheduler_type: _LrKind | None = None
    warmup_style: _LrKind | None = None
    """verl's deprecated name of ``lr_scheduler_type`` (they must agree)."""
    lr_warmup_steps: _Real | None = None
    lr_warmup_steps_ratio: _Fraction | None = None
    total_training_steps: _Real | None = None
    min_lr_ratio: _Fraction | None = None
    num_cycles: _Real | None = None
    zero_indexed_step: Annotated[bool, Strict()] = True
    init_lr_ratio: _Fraction | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> LrSchedule:
        style, kind = self.warmup_style, self.lr_scheduler_type
        if style is not None and kind not in (None, style):
            raise _refuse(f"{style!r} contradicts lr_scheduler_type {kind!r}", at="warmup_style")
        if self.init_lr_ratio and self.kind != "cosine":
            raise _refuse("is read by the cosine schedule only (verl's constant schedule warms up from 0)",
                          at="init_lr_ratio")  # fmt: skip
        return self

    @property
    def kind(self) -> str:
        """``constant`` or ``cosine``."""
        return self.warmup_style or self.lr_scheduler_type or "constant"

    @property
    def horizon(self) -> int | None:
        """The horizon in ticks; None while unknown."""
        t = self.total_training_steps
        return int(t) if t is not None and t > 0 else None

    def warmup(self, horizon: int | None = None) -> int:
        """verl's warmup rule: ``lr_warmup_steps`` when > 0, else ``int(lr_warmup_steps_ratio * horizon)``
        (``horizon``: this schedule's own when None; 0 while neither is known)."""
        w = self.lr_warmup_steps
        if w is not None and w > 0:
            return int(w)
        horizon = self.horizon if horizon is None else horizon
        return int(float(self.lr_warmup_steps_ratio or 0.0) * horizon) if horizon else 0

    def needs_horizon(self) -> bool:
        """Whether the schedule cannot be built before the horizon is known (cosine, or a warmup ratio)."""
        w = self.lr_warmup_steps
        return self.kind == "cosine" or ((w is None or w <= 0) and float(self.lr_warmup_steps_ratio or 0.0) > 0)

    def moves(self) -> bool:
        """Whether the rate ever differs from ``lr`` (a warmup or a cosine)."""
        return self.kind != "constant" or self.needs_horizon() or self.warmup() > 0


class OptimizerSpec(BaseModel):
    """The training job's AdamW and gradient clipping, one typed spec from the verl plugin through the client to the
    ``ds_config`` a server reads (:func:`build_ds_config`). Defaults apply when nothing names a value."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    lr: float = Field(DEFAULT_LR, ge=0)
    betas: tuple[float, float] = DEFAULT_BETAS
    eps: float = Field(DEFAULT_EPS, gt=0)
    weight_decay: float = Field(DEFAULT_WEIGHT_DECAY, ge=0)
    """Decoupled (AdamW) weight decay."""
    grad_clip: float | None = DEFAULT_GRAD_CLIP
    """Max global grad norm; None or <= 0: no clipping (the norm is still reported)."""


class Lora(_Read):
    """``extensions.lora``: verl's ``model.lora_rank``, ``lora_alpha``, ``target_modules``, ``exclude_modules``,
    ``target_parameters``; rank 0 means full fine-tuning."""

    rank: _Rank = 0
    alpha: _Positive = 16
    target_modules: _Names | None = "all-linear"
    exclude_modules: _Names | None = None
    target_parameters: _Names | None = None


class Extensions(_Read):
    """``JobConfig.extensions``: the embedded server's settings with no reference field (the reference ignores it)."""

    device: str | None = None
    """``auto`` / ``cpu`` / ``cuda`` / ``cuda:N``; placement checks it (400)."""
    dtype: str | None = None
    """``float32`` / ``bfloat16`` / ``float16`` (checked at ``/initialize``, 400); a training job keeps float32 master
    weights and uses it as the autocast dtype."""
    max_seq_len: _Count | None = None
    """Prompt + response limit (sampling: else ``vllm_config.max_model_len``; then the server's ``--max-seq-len``)."""
    sampling_engine: str | None = None
    """``auto`` / ``vllm`` / ``torch``: overrides ``--sampling-engine``."""
    sampling_process: Annotated[bool, Strict()] | None = None
    """Overrides ``--sampling-process`` (the torch engine only)."""
    lr_schedule: LrSchedule | None = None
    lora: Lora | None = None


# ------------------------------------------------------------------------------------------------
# request models (reference names: common/utils/server_models.py)
# ------------------------------------------------------------------------------------------------

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
    place they moved to, so a setting is never silently lost. The sections the embedded server reads are typed and
    refuse what it cannot honour by key path (:func:`first_error`)."""

    model_config = ConfigDict(extra="ignore", protected_namespaces=())
    model_name: str | None = None
    """HF model (the reference requires it; the embedded server falls back to its ``--model``)."""
    job_type: JobTypeName = "training"
    num_devices: int | None = None
    ds_config: DsConfig | None = None
    training_config: ReferenceTrainingConfig | None = None
    log_prob_config: DsConfig | None = None
    """The log_prob job's DeepSpeed config (only that job's)."""
    ds_worker_config: DsWorkerConfig = Field(default_factory=DsWorkerConfig)
    vllm_config: dict[str, Any] | None = None
    """vLLM engine arguments: open-ended (vLLM's ``EngineArgs``, which move with its version), so a plain object;
    the sampling engine checks them against the installed vLLM (``vllm_engine.check_vllm_config``)."""
    checkpoint_path: str | None = None
    arctic_inference_config: dict[str, Any] | None = None
    """ArcticInference's plugin settings (FCA, speculative decoding): open-ended like ``vllm_config``; the torch
    engine ignores them with one warning."""
    full_determinism: bool = False
    seed: int = DEFAULT_SEED
    cuda_ipc: bool = False
    low_memory: bool = False
    extensions: Extensions = Field(default_factory=Extensions)
    """Extension (the reference ignores it): :class:`Extensions`."""

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

    @field_validator("ds_worker_config", "extensions", mode="before")
    @classmethod
    def _null_is_empty(cls, v: Any) -> Any:
        return {} if v is None else v

    @model_validator(mode="after")
    def _log_prob_config_on_its_job(self) -> JobConfig:
        if self.log_prob_config is not None and self.job_type != "log_prob":
            raise _refuse(f"log_prob_config on a {self.job_type} job (it configures the log_prob job)")
        return self


class DestroyRequest(BaseModel):
    job_type: JobTypeName


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
    min_tokens: int = Field(0, ge=0)
    """vLLM's: EOS and ``stop_token_ids`` cannot end a sequence before it has this many tokens."""

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
