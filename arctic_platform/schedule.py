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
"""Optimizer, LR-schedule, precision and LoRA settings of a training job; the schedule is verl's own.

It sits below both the server (whose training engines step it) and the client (whose Cortex transport computes the
same schedule for a backend that has none), so neither imports the other.

The LR scheduler is built by verl's functions (``verl.utils.torch_functional.get_constant_schedule_with_warmup`` /
``get_cosine_schedule_with_warmup``) with verl's arguments (``num_cycles``, ``zero_indexed_step``, ``min_lr_ratio``,
warmup in steps or as a ratio of the horizon), exactly as verl's FSDP engine builds it (``_build_lr_scheduler``).
Who ticks it is the client's choice per ``/step`` (``lr_scheduler_step``): verl ticks once per *training step*, on the
last mini-batch, so its warmup and horizon count training steps; a client that says nothing gets one tick per
``/step`` (the reference server's DeepSpeed semantics).

The horizon may arrive late: verl computes ``total_training_steps`` from the dataloader after the backend exists, so a
job may be created without it and learn it from the first ``/step`` that carries ``total_training_steps``
(extension); the scheduler is built then, before the first optimizer step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .protocol import DEFAULT_BETAS, DEFAULT_EPS, DEFAULT_GRAD_CLIP, DEFAULT_LR, DEFAULT_WEIGHT_DECAY, LrSchedule


@dataclass
class TrainingSettings:
    """Optimizer, schedule, precision and adapter of a training job (the server builds it in
    :func:`arctic_platform.server.jobs.training_settings`)."""

    lr: float = DEFAULT_LR
    betas: tuple[float, float] = DEFAULT_BETAS
    weight_decay: float = DEFAULT_WEIGHT_DECAY
    eps: float = DEFAULT_EPS
    grad_clip: float | None = DEFAULT_GRAD_CLIP
    lr_scheduler_type: str = "constant"
    """``constant`` or ``cosine`` (verl's ``optim.lr_scheduler_type``)."""
    warmup_steps: int = 0
    """Warmup ticks; <= 0 means ``warmup_steps_ratio`` × ``total_steps`` (verl's ``lr_warmup_steps``)."""
    warmup_steps_ratio: float = 0.0
    """verl's ``lr_warmup_steps_ratio``."""
    total_steps: int | None = None
    """Horizon in ticks (verl's ``optim.total_training_steps``); None: not known yet."""
    min_lr_ratio: float = 0.0
    """Cosine floor (verl's ``min_lr_ratio``)."""
    num_cycles: float = 0.5
    """Cosine waves (verl's ``num_cycles``)."""
    zero_indexed_step: bool = True
    """verl's ``zero_indexed_step``: False counts ticks from 1."""
    init_lr_ratio: float = 0.0
    """Where a cosine warmup starts, as a fraction of ``lr`` (verl's ``init_lr_ratio``)."""
    micro_batch_size: int | None = None
    """``ds_config.train_micro_batch_size_per_gpu``: rows per micro-batch when the call's meta names none."""
    gradient_checkpointing: bool = False
    """``ds_worker_config.enable_gradient_checkpointing`` (HF, ``use_reentrant=False`` as verl)."""
    lora: dict[str, Any] | None = field(default=None)
    """``extensions.lora`` (rank > 0): train a peft LoRA adapter only."""

    def schedule(self) -> LrSchedule:
        """These settings as the protocol's :class:`~arctic_platform.protocol.LrSchedule` (whose rules they use)."""
        return LrSchedule(
            lr_scheduler_type=self.lr_scheduler_type,
            lr_warmup_steps=self.warmup_steps,
            lr_warmup_steps_ratio=self.warmup_steps_ratio,
            total_training_steps=self.total_steps,
            min_lr_ratio=self.min_lr_ratio,
            num_cycles=self.num_cycles,
            zero_indexed_step=self.zero_indexed_step,
            init_lr_ratio=self.init_lr_ratio or None,
        )

    def needs_horizon(self) -> bool:
        """Whether the schedule cannot be built without ``total_steps``."""
        return self.schedule().needs_horizon()

    def resolved_warmup(self) -> int:
        """The warmup in ticks (:meth:`LrSchedule.warmup`, verl's rule)."""
        return self.schedule().warmup()


def build_scheduler(optimizer, ts: TrainingSettings, last_epoch: int = -1):
    """verl's LR scheduler for ``ts`` (``ts.total_steps`` must be known when :meth:`TrainingSettings.needs_horizon`)."""
    from verl.utils.torch_functional import get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup

    warmup = ts.resolved_warmup()
    if ts.lr_scheduler_type == "cosine":
        return get_cosine_schedule_with_warmup(
            optimizer=optimizer,
            num_warmup_steps=warmup,
            num_training_steps=int(ts.total_steps),
            min_lr_ratio=ts.min_lr_ratio,
            num_cycles=ts.num_cycles,
            init_lr_ratio=ts.init_lr_ratio,
            zero_indexed_step=ts.zero_indexed_step,
            last_epoch=last_epoch,
        )
    if ts.lr_scheduler_type == "constant":
        return get_constant_schedule_with_warmup(optimizer=optimizer, num_warmup_steps=warmup, last_epoch=last_epoch)
    raise ValueError(f"lr_scheduler_type {ts.lr_scheduler_type!r} is not 'constant' or 'cosine'")
