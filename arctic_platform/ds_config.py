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
"""The DeepSpeed-shaped sections of a ``JobConfig`` and the training settings they stand for, both ways: the
``ds_config`` builder (the client, in the reference adapter's shape) and the readers that turn ``ds_config``,
``training_config``, ``extensions.lr_schedule`` and ``extensions.lora`` into the embedded server's training settings.
The request models themselves are :mod:`.protocol`. Torch-free (pydantic only).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from .protocol import (
    DsConfig,
    Lora,
    LrSchedule,
    OptimizerSpec,
    ReferenceTrainingConfig,
    TrainingOptimizer,
    first_error,
)

__all__ = [
    "DsConfigError",
    "build_ds_config",
    "ds_scheduler",
    "read_ds_config",
    "read_lora",
    "read_lr_schedule",
    "read_training_config",
    "schedule_settings",
]


# ------------------------------------------------------------------------------------------------
# ds_config: the reference adapter's shape (client) and the training settings it asks for (server)
# ------------------------------------------------------------------------------------------------


class DsConfigError(ValueError):
    """A ``ds_config`` (or ``root``) the embedded server cannot honour; ``key`` is the dotted path in ``root``."""

    def __init__(self, key: str, message: str, root: str = "ds_config"):
        super().__init__(message)
        self.key = key
        self.root = root


M = TypeVar("M", bound=BaseModel)


def _typed(model: type[M], value: Any, root: str) -> M | None:
    """``value`` (None, a ``model``, or its JSON) as ``model``; an error is a :class:`DsConfigError` naming the key
    path below ``root``."""
    if value is None or isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except ValidationError as e:
        key, reason, _ = first_error(e)
        raise DsConfigError(key, f"{root}.{reason}" if key else f"{root}: {reason}", root) from None


def ds_scheduler(schedule: LrSchedule, lr: float, ticks_per_step: int = 1) -> dict | None:
    """The DeepSpeed ``scheduler`` a server that ticks once per ``/step`` needs to run ``schedule`` (a reference
    server: it does not read ``extensions.lr_schedule``): ``WarmupLR`` (a constant rate after a linear warmup from 0)
    or ``WarmupCosineLR``, warmup and horizon scaled by ``ticks_per_step`` (optimizer steps per schedule tick: verl
    ticks once per training step, a DeepSpeed server once per optimizer step). None when there is nothing to
    schedule (a constant rate without warmup) or the horizon it needs is not known yet.

    ``num_cycles`` and ``zero_indexed_step`` have no DeepSpeed counterpart (WarmupCosineLR is verl's default half
    cosine from step 0); the verl plugin refuses them for a server without verl's schedule.
    """
    k = max(1, int(ticks_per_step))
    if schedule.needs_horizon() and schedule.horizon is None:
        return None
    warmup = schedule.warmup() * k
    if schedule.kind == "cosine":
        return {
            "type": "WarmupCosineLR",
            "params": {
                "total_num_steps": int(schedule.horizon) * k,
                "warmup_num_steps": warmup,
                "warmup_min_ratio": float(schedule.init_lr_ratio or 0.0),
                "cos_min_ratio": float(schedule.min_lr_ratio or 0.0),
                "warmup_type": "linear",
            },
        }
    if warmup > 0:
        return {
            "type": "WarmupLR",
            "params": {
                "warmup_min_lr": 0.0,
                "warmup_max_lr": float(lr),
                "warmup_num_steps": warmup,
                "warmup_type": "linear",
            },
        }
    return None


def build_ds_config(
    optimizer: OptimizerSpec,
    schedule: LrSchedule | None = None,
    *,
    ticks_per_step: int = 1,
    micro_batch_size: int | None = None,
    base: dict | None = None,
) -> dict:
    """A ``ds_config`` in the reference adapter's shape: AdamW ``optimizer``, ``gradient_clipping`` and the
    ``scheduler`` of :func:`ds_scheduler` (one tick per ``/step``), over ``base`` (e.g. a zero config)."""
    cfg = dict(base or {})
    cfg["optimizer"] = {
        "type": "AdamW",
        "params": {
            "lr": float(optimizer.lr),
            "betas": [float(b) for b in optimizer.betas],
            "eps": float(optimizer.eps),
            "weight_decay": optimizer.weight_decay,
        },
    }
    if optimizer.grad_clip is not None and optimizer.grad_clip > 0:
        cfg["gradient_clipping"] = float(optimizer.grad_clip)
    scheduler = ds_scheduler(schedule, optimizer.lr, ticks_per_step) if schedule is not None else None
    if scheduler is not None:
        cfg["scheduler"] = scheduler
    if micro_batch_size is not None:
        cfg["train_micro_batch_size_per_gpu"] = int(micro_batch_size)
    return cfg


def schedule_settings(schedule: LrSchedule) -> dict[str, Any]:
    """``schedule`` as the server's ``TrainingSettings`` keyword arguments (the readers below all end here)."""
    w = schedule.lr_warmup_steps
    return {
        "lr_scheduler_type": schedule.kind,
        "warmup_steps": int(w) if w is not None and w > 0 else 0,
        "warmup_steps_ratio": float(schedule.lr_warmup_steps_ratio or 0.0),
        "total_steps": schedule.horizon,
        "min_lr_ratio": float(schedule.min_lr_ratio or 0.0),
        "num_cycles": 0.5 if schedule.num_cycles is None else float(schedule.num_cycles),
        "zero_indexed_step": schedule.zero_indexed_step,
        "init_lr_ratio": float(schedule.init_lr_ratio or 0.0),
    }


def read_ds_config(ds_config: DsConfig | dict | None) -> dict[str, Any]:
    """The training settings a ``ds_config`` asks for (:class:`DsConfig`), as keyword arguments of the server's
    ``TrainingSettings``: the optimizer's, ``grad_clip``, the scheduler's (``WarmupLR``: constant after the warmup;
    ``WarmupCosineLR``; as an :class:`LrSchedule`, :func:`schedule_settings`), ``micro_batch_size`` and the ``dtype``
    ``bf16`` / ``fp16`` enables. ``None`` gives ``{}`` (the defaults); a dict that :class:`DsConfig` refuses raises
    :class:`DsConfigError` naming the key.
    """
    ds = _typed(DsConfig, ds_config, "ds_config")
    if ds is None:
        return {}
    out: dict[str, Any] = {"grad_clip": float(ds.gradient_clipping) if ds.gradient_clipping else None}
    if ds.optimizer is not None:
        p = ds.optimizer.params
        out.update({k: float(v) for k in ("lr", "eps", "weight_decay") if (v := getattr(p, k)) is not None})
        if p.betas is not None:
            out["betas"] = (float(p.betas[0]), float(p.betas[1]))
    if ds.scheduler is not None:
        p = ds.scheduler.params
        if ds.scheduler.type == "WarmupLR":
            warmup = 1000 if p.warmup_num_steps is None else p.warmup_num_steps
            schedule = LrSchedule(lr_scheduler_type="constant", lr_warmup_steps=int(warmup))
            if p.warmup_max_lr is not None:
                out["lr"] = float(p.warmup_max_lr)
        else:
            schedule = LrSchedule(
                lr_scheduler_type="cosine",
                total_training_steps=int(p.total_num_steps),
                lr_warmup_steps=int(p.warmup_num_steps or 0),
                min_lr_ratio=float(p.cos_min_ratio),
                init_lr_ratio=float(p.warmup_min_ratio) or None,
            )
        out.update(schedule_settings(schedule))
    if ds.train_micro_batch_size_per_gpu is not None:
        out["micro_batch_size"] = ds.train_micro_batch_size_per_gpu
    for key, dtype in (("bf16", "bfloat16"), ("fp16", "float16")):
        if getattr(ds, key) is not None and getattr(ds, key).enabled in (True, "auto"):
            out["dtype"] = dtype
    return out


def read_training_config(tc: ReferenceTrainingConfig | dict | None) -> dict[str, Any]:
    """The settings a reference ``training_config`` asks for (Arctic-Platform reads it before ``ds_config`` and lets
    it win: optimizer, gradient clipping, ``lr_scheduler`` over ``training_horizon`` optimizer steps).

    Same keyword arguments as :func:`read_ds_config`; with ``training_config`` the reference's defaults apply to
    missing optimizer keys (lr 1e-5, weight decay 0). A dict it refuses raises :class:`DsConfigError`.
    """
    tc = _typed(ReferenceTrainingConfig, tc, "training_config")
    if tc is None:
        return {}
    o = tc.optimizer or TrainingOptimizer()
    betas = o.betas or (o.beta1, o.beta2)
    out: dict[str, Any] = {
        "lr": float(o.lr),
        "betas": (float(betas[0]), float(betas[1])),
        "eps": float(o.eps),
        "weight_decay": float(o.weight_decay),
    }
    clip = next((c for c in (o.gradient_clipping, o.max_grad_norm, tc.gradient_clipping) if c is not None), None)
    if clip is not None:
        out["grad_clip"] = float(clip) if clip > 0 else None
    s, horizon = tc.lr_scheduler, int(tc.training_horizon or 0)
    if s is not None and horizon > 0:
        # the reference rounds a warmup ratio of its horizon (verl truncates): resolved here, as a step count
        warmup = s.warmup_steps if s.warmup_steps is not None else s.warmup_ratio * horizon
        cosine = s.type == "cosine"
        schedule = LrSchedule(
            lr_scheduler_type=s.type,
            lr_warmup_steps=int(round(warmup)),
            total_training_steps=horizon if cosine else None,
            min_lr_ratio=float(s.min_lr_ratio or 0.0) if cosine else None,
        )
        out.update(schedule_settings(schedule))
    return out


# ------------------------------------------------------------------------------------------------
# extensions.lr_schedule and extensions.lora of a training job (verl's own keys)
# ------------------------------------------------------------------------------------------------


def read_lr_schedule(value: LrSchedule | dict | None) -> LrSchedule | None:
    """``extensions.lr_schedule`` as an :class:`LrSchedule` (None when absent). A dict :class:`LrSchedule` refuses
    raises :class:`DsConfigError`."""
    return _typed(LrSchedule, value, "extensions.lr_schedule")


def read_lora(value: Lora | dict | None) -> dict[str, Any] | None:
    """``extensions.lora`` as the training settings' adapter; None (or rank 0) means full fine-tuning."""
    lora = _typed(Lora, value, "extensions.lora")
    return lora.model_dump() if lora is not None and lora.rank > 0 else None
