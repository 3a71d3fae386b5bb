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
"""The sections of a ``JobConfig`` the embedded server reads, typed (``DsConfig``, ``ReferenceTrainingConfig``,
``DsWorkerConfig``, ``LrSchedule``, ``Lora``, ``Extensions``): each refuses what it cannot honour by key path
(:func:`first_error`). The ``ds_config`` builder and the readers that turn the sections into training settings are
:mod:`arctic_platform.ds_config`."""

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

from .vocabulary import (
    DEFAULT_BETAS,
    DEFAULT_EPS,
    DEFAULT_GRAD_CLIP,
    DEFAULT_LR,
    DEFAULT_WEIGHT_DECAY,
    JOB_TYPES,
    JobType,
)

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
