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
"""verl's settings as verl's own config dataclasses: the one typed boundary between verl and the plugin.

The actor, its optimizer, the rollout and the algorithm are read with verl's ``omega_conf_to_dataclass`` (the
``_target_`` of each block: ``FSDPActorConfig`` / ``McoreActorConfig`` / ..., ``FSDPOptimizerConfig`` /
``McoreOptimizerConfig`` / ..., ``RolloutConfig``, ``AlgoConfig``), so every default, every deprecated alias
(``warmup_style``, ``optim.grad_clip``) and every validation is verl's. A block verl itself rejects raises
:class:`VerlConfigError` naming it (stock verl would fail on it too). The model block is read from the composed
config instead (``HFModelConfig`` loads the model to build itself), and so is the reference block (verl builds no
dataclass of its own for it); after Hydra composition every key of both holds verl's yaml default.

:func:`training_spec` maps the optimizer dataclass of each ``model_engine`` verl 0.9.1 ships (dp/FSDP, megatron,
torchtitan, veomni) onto the protocol's :class:`~arctic_platform.protocol.OptimizerSpec` and
:class:`~arctic_platform.protocol.LrSchedule` (what the backend runs), with one :class:`Mismatch` for each value the
backend would run differently; the start-up check refuses those and the adapter sends the spec, so both read the
same mapping. Light at import: verl and torch are imported inside the functions.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any, Optional

from omegaconf import DictConfig

from arctic_platform.protocol import LrSchedule, OptimizerSpec

__all__ = [
    "Mismatch",
    "TrainingSpec",
    "VerlConfigError",
    "actor_config",
    "algorithm_config",
    "optimizer_config",
    "optimizer_steps_per_training_step",
    "per_gpu",
    "rollout_config",
    "training_spec",
    "typed_value_errors",
]

ARR = "actor_rollout_ref"
OPTIM = f"{ARR}.actor.optim"


class VerlConfigError(ValueError):
    """A block of the config verl's own dataclass rejects (``path``: the block, ``message``: verl's words)."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path, self.message = path, message


def _dataclass(cfg: DictConfig, path: str) -> Any:
    from verl.utils.config import omega_conf_to_dataclass

    node = cfg
    for key in path.split("."):
        node = node[key]
    try:
        return omega_conf_to_dataclass(node)
    except Exception as e:  # verl's own validation (an assert, a ValueError inside hydra's instantiate)
        cause = e.__cause__ or e
        words = " ".join(str(cause).split()) or type(cause).__name__
        raise VerlConfigError(path, words) from None


def actor_config(cfg: DictConfig):
    """``actor_rollout_ref.actor`` as verl's actor dataclass of the run's ``model_engine``."""
    return _dataclass(cfg, f"{ARR}.actor")


def optimizer_config(cfg: DictConfig):
    """``actor_rollout_ref.actor.optim`` as verl's optimizer dataclass of the run's ``model_engine``."""
    return _dataclass(cfg, OPTIM)


def rollout_config(cfg: DictConfig):
    """``actor_rollout_ref.rollout`` as verl's ``RolloutConfig``."""
    return _dataclass(cfg, f"{ARR}.rollout")


def algorithm_config(cfg: DictConfig):
    """``algorithm`` as verl's ``AlgoConfig``."""
    return _dataclass(cfg, "algorithm")


_SCALARS = {int: (int,), float: (int, float), bool: (bool,), str: (str,)}


def typed_value_errors(dc: Any, path: str) -> list[tuple[str, Any, str]]:
    """``(key, value, type name)`` of each field of verl's dataclass ``dc`` (recursively) whose value is not of its
    declared scalar type (``ppo_epochs='two'``): verl's dataclasses do not check types, so such a value would fail
    mid-run, far from the setting."""
    out: list[tuple[str, Any, str]] = []
    hints = typing.get_type_hints(type(dc))
    for f in dataclasses.fields(dc):
        if f.name.startswith("_"):
            continue
        value = getattr(dc, f.name)
        if dataclasses.is_dataclass(value):
            out.extend(typed_value_errors(value, f"{path}.{f.name}"))
            continue
        hint = hints.get(f.name)
        args = typing.get_args(hint)
        optional = typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args
        base = next((a for a in args if a is not type(None)), None) if optional else hint
        if base not in _SCALARS or value is None:  # None: unset (verl fills several such fields in at run time)
            continue
        ok = isinstance(value, _SCALARS[base]) and not (base in (int, float) and isinstance(value, bool))
        if not ok:
            out.append((f"{path}.{f.name}", value, base.__name__))
    return out


def per_gpu(block: Any, name: str, gpus: int) -> Optional[int]:
    """verl's ``<name>_per_gpu``, else its deprecated global ``<name>`` divided over ``gpus`` (verl's rule for the
    deprecated size: per GPU = size // data-parallel GPUs); None if neither is set."""
    value = block.get(f"{name}_per_gpu", None)
    if value is not None:
        return int(value)
    total = block.get(name, None)
    return max(1, int(total) // max(1, gpus)) if total else None


def optimizer_steps_per_training_step(cfg: DictConfig) -> int:
    """One forward-backward + /step per PPO mini-batch per epoch (verl's mini-batch iterator)."""
    actor = cfg.actor_rollout_ref.actor
    return int(actor.ppo_epochs) * max(1, int(cfg.data.train_batch_size) // int(actor.ppo_mini_batch_size))


# ------------------------------------------------------------------------------------------------ the optimizer


@dataclass(frozen=True)
class Mismatch:
    """A value of ``actor.optim`` the backend would run differently from verl's engine (a refusal at start-up).

    ``key`` is relative to ``actor_rollout_ref.actor.optim``; ``why`` completes "<backend> ..."; ``fix`` holds Hydra
    overrides (full keys) that make the schedule one the backend runs as verl does.
    """

    key: str
    value: Any
    why: str
    way_out: str
    fix: tuple[str, ...] = ()


@dataclass(frozen=True)
class TrainingSpec:
    """What the backend's training job runs for this verl config, and what of it would differ from verl."""

    optimizer: OptimizerSpec
    schedule: LrSchedule
    engine: str
    """verl's optimizer dataclass, e.g. ``FSDPOptimizerConfig``."""
    mismatches: tuple[Mismatch, ...]
    kind_key: str = "lr_scheduler_type"
    """The ``actor.optim`` key that chooses the schedule's kind on this engine (Megatron: ``lr_decay_style``)."""


def _torch_adamw_eps() -> float:
    """torch's AdamW ``eps`` default: what verl's FSDP / VeOmni engines get (they pass no eps)."""
    import inspect

    import torch

    return float(inspect.signature(torch.optim.AdamW).parameters["eps"].default)


def _set(key: str, value: Any) -> str:
    text = "null" if value is None else str(value).lower() if isinstance(value, bool) else value
    return f"{OPTIM}.{key}={text}"


def _no_warmup(optim) -> tuple[str, ...]:
    return (_set("lr_warmup_steps", -1), _set("lr_warmup_steps_ratio", 0.0))


def _warmup_is_zero(optim) -> bool:
    w = optim.lr_warmup_steps
    return (w is None or w <= 0) and not optim.lr_warmup_steps_ratio


def training_spec(cfg: DictConfig) -> TrainingSpec:
    """The optimizer and LR schedule the backend runs for ``cfg`` (verl's optimizer dataclass of the run's
    ``model_engine``, mapped), and the values it would run differently (:class:`Mismatch`).

    Horizon: ``trainer.total_training_steps`` when given; otherwise verl derives it from the dataloader after the
    backend exists, and the forwarder sends it with its first ``/step``.

    Raises:
        VerlConfigError: verl's optimizer dataclass rejects ``actor.optim``.
    """
    optim = optimizer_config(cfg)
    horizon = cfg.trainer.get("total_training_steps") or None
    engine = type(optim).__name__
    mapper = _MAPPERS.get(engine, _constant_only)
    optimizer, schedule, mismatches = mapper(optim, horizon)
    override = getattr(optim, "override_optimizer_config", None)
    if override:
        mismatches.append(
            Mismatch(
                "override_optimizer_config",
                dict(override),
                "runs AdamW with lr, betas, eps and weight_decay only",
                "unset it",
                (_set("override_optimizer_config", None),),
            )
        )
    kind_key = "lr_decay_style" if engine == "McoreOptimizerConfig" else "lr_scheduler_type"
    return TrainingSpec(optimizer, schedule, engine, tuple(mismatches), kind_key)


def _fsdp(optim, horizon) -> tuple[OptimizerSpec, LrSchedule, list[Mismatch]]:
    """``FSDPOptimizerConfig`` (verl's own schedules; ``warmup_style`` already copied over by the dataclass)."""
    mismatches = []
    name, impl = str(optim.optimizer), str(optim.optimizer_impl)
    if name.lower() != "adamw" or impl not in ("torch.optim", "torch.optim.AdamW"):
        key, value = ("optimizer", name) if name.lower() != "adamw" else ("optimizer_impl", impl)
        mismatches.append(
            Mismatch(
                key,
                value,
                f"runs torch's AdamW only (not {impl}.{name})",
                "use optimizer=AdamW, optimizer_impl=torch.optim",
                (_set("optimizer", "AdamW"), _set("optimizer_impl", "torch.optim")),
            )
        )
    eps = float(optim.eps) if hasattr(optim, "eps") else _torch_adamw_eps()
    schedule = LrSchedule(
        lr_scheduler_type=optim.lr_scheduler_type,
        lr_warmup_steps=optim.lr_warmup_steps,
        lr_warmup_steps_ratio=optim.lr_warmup_steps_ratio,
        total_training_steps=horizon,
        min_lr_ratio=optim.min_lr_ratio,
        num_cycles=optim.num_cycles,
        zero_indexed_step=optim.zero_indexed_step,
    )
    return _adamw(optim, eps), schedule, mismatches


def _adamw(optim, eps: float) -> OptimizerSpec:
    return OptimizerSpec(
        lr=float(optim.lr),
        betas=tuple(float(b) for b in optim.betas),
        eps=eps,
        weight_decay=float(optim.weight_decay),
        grad_clip=float(optim.clip_grad) if optim.clip_grad is not None else None,
    )


def _megatron(optim, horizon) -> tuple[OptimizerSpec, LrSchedule, list[Mismatch]]:
    """``McoreOptimizerConfig``: Megatron-core's ``adam`` (decoupled weight decay, i.e. AdamW) and its
    ``OptimizerParamScheduler`` (warmup from ``lr_warmup_init`` to ``lr``, then ``constant`` or a ``cosine`` to
    ``min_lr`` over ``lr_decay_steps``, default the horizon), which equals verl's cosine with ``init_lr_ratio`` =
    lr_warmup_init / lr and ``min_lr_ratio`` = min_lr / lr. Megatron-core's other styles (linear,
    inverse-square-root, WSD), a decay horizon other than the run's, another optimizer and lower-precision optimizer
    state are mismatches."""
    mismatches = []
    if str(optim.optimizer).lower() != "adam":
        mismatches.append(
            Mismatch(
                "optimizer",
                optim.optimizer,
                "runs AdamW only (Megatron-core's adam, decoupled weight decay)",
                "use optimizer=adam",
                (_set("optimizer", "adam"),),
            )
        )
    if optim.use_precision_aware_optimizer:
        low = [k for k in ("main_grads_dtype", "exp_avg_dtype", "exp_avg_sq_dtype") if "16" in str(getattr(optim, k))]
        if low:
            mismatches.append(
                Mismatch(
                    "use_precision_aware_optimizer",
                    True,
                    f"keeps gradients and Adam moments in float32 ({', '.join(low)} would be bf16)",
                    "set it to false",
                    (_set("use_precision_aware_optimizer", False),),
                )
            )
    if optim.use_checkpoint_opt_param_scheduler:
        mismatches.append(
            Mismatch(
                "use_checkpoint_opt_param_scheduler",
                True,
                "takes the schedule's options from the run's config on resume (its checkpoint keeps the position)",
                "set it to false",
                (_set("use_checkpoint_opt_param_scheduler", False),),
            )
        )
    lr = float(optim.lr)
    style = str(optim.lr_decay_style)
    if style not in ("constant", "cosine"):
        mismatches.append(
            Mismatch(
                "lr_decay_style",
                style,
                "runs verl's constant and cosine schedules only (Megatron-core's constant and cosine are the same)",
                "use lr_decay_style=cosine or constant",
                (_set("lr_decay_style", "cosine"),),
            )
        )
        style = "cosine"
    init = float(optim.lr_warmup_init or 0.0)
    if style == "constant" and init and not _warmup_is_zero(optim):
        mismatches.append(
            Mismatch(
                "lr_warmup_init",
                init,
                "warms a constant schedule up from 0 (verl's constant schedule has no start value)",
                "set it to 0.0, or use lr_decay_style=cosine",
                (_set("lr_warmup_init", 0.0),),
            )
        )
    decay = optim.lr_decay_steps
    if decay is not None and style == "cosine" and (horizon is None or int(decay) != int(horizon)):
        mismatches.append(
            Mismatch(
                "lr_decay_steps",
                decay,
                "decays over the run's horizon, trainer.total_training_steps (Megatron-core would decay over "
                "lr_decay_steps and then hold min_lr)",
                "unset it (null: the horizon, Megatron-core's default too)",
                (_set("lr_decay_steps", None),),
            )
        )
    schedule = LrSchedule(
        lr_scheduler_type=style,
        lr_warmup_steps=optim.lr_warmup_steps,
        lr_warmup_steps_ratio=optim.lr_warmup_steps_ratio,
        total_training_steps=horizon,
        min_lr_ratio=(float(optim.min_lr) / lr if lr > 0 else 0.0) if style == "cosine" else None,
        init_lr_ratio=(init / lr if lr > 0 else 0.0) if style == "cosine" and init else None,
    )
    # Megatron-core's adam_eps default is torch AdamW's (1e-8); verl's McoreOptimizerConfig does not expose it
    return _adamw(optim, _torch_adamw_eps()), schedule, mismatches


def _constant_only(optim, horizon) -> tuple[OptimizerSpec, LrSchedule, list[Mismatch]]:
    """An engine whose LR scheduler comes from its own library (torchtitan's ``decay_type`` / ``min_lr_factor``,
    VeOmni's ``lr_scheduler_type`` / ``lr_min`` / ``lr_start`` / ``lr_decay_ratio``): the backend runs verl's
    schedules, so only the schedule every library agrees on is honoured, a constant rate without warmup."""
    mismatches = []
    name = str(getattr(optim, "name", None) or getattr(optim, "optimizer", "AdamW"))
    if name.lower() != "adamw":
        key = "name" if hasattr(optim, "name") else "optimizer"
        mismatches.append(
            Mismatch(key, name, "runs AdamW only", f"use {key}=AdamW", (_set(key, "AdamW"),))
        )  # fmt: skip
    engine = type(optim).__name__
    if engine == "TorchtitanOptimizerConfig":
        constant = float(optim.min_lr_factor) == 1.0 and _warmup_is_zero(optim)
        keys = ("decay_type", "min_lr_factor", "lr_warmup_steps", "lr_warmup_steps_ratio")
        fix = (_set("min_lr_factor", 1.0), *_no_warmup(optim))
        key, value = "min_lr_factor", optim.min_lr_factor
    else:  # VeOmniOptimizerConfig (and any other engine's): its own lr_scheduler_type
        kind = str(getattr(optim, "lr_scheduler_type", "constant"))
        constant = kind == "constant" and not optim.lr_warmup_steps_ratio
        keys = ("lr_scheduler_type", "lr_min", "lr_start", "lr_decay_ratio", "lr_warmup_steps_ratio")
        fix = (_set("lr_scheduler_type", "constant"), *_no_warmup(optim))
        key, value = "lr_scheduler_type", kind
    shown = ", ".join(f"{k}={getattr(optim, k)!r}" for k in keys if hasattr(optim, k))
    if not constant:
        mismatches.append(
            Mismatch(
                key,
                value,
                f"runs verl's FSDP schedules, not {engine}'s own ({shown}); only a constant rate without warmup is "
                "the same on both",
                "make it constant without warmup, or use model_engine=dp for verl's constant / cosine schedules",
                fix,
            )
        )
    eps = float(optim.eps) if hasattr(optim, "eps") else _torch_adamw_eps()
    return _adamw(optim, eps), LrSchedule(lr_scheduler_type="constant", total_training_steps=horizon), mismatches


_MAPPERS = {
    "FSDPOptimizerConfig": _fsdp,
    "McoreOptimizerConfig": _megatron,
}
