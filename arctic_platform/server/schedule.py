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
"""Optimizer and LR-schedule settings of a training job (warmup + constant / cosine, as verl's schedules)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class TrainingSettings:
    """Optimizer and schedule (from ``JobConfig.ds_config``: :func:`arctic_platform.protocol.read_ds_config`)."""

    lr: float = 1e-6
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.01
    eps: float = 1e-8
    grad_clip: float | None = 1.0
    lr_scheduler_type: str = "constant"
    warmup_steps: int = 0
    total_steps: int | None = None
    min_lr_ratio: float = 0.0
    micro_batch_size: int | None = None


def _lr_lambda_factory(ts: TrainingSettings):
    warmup = int(ts.warmup_steps or 0)
    kind = ts.lr_scheduler_type
    total = ts.total_steps
    min_ratio = float(ts.min_lr_ratio or 0.0)

    def lr_lambda(step: int) -> float:
        if kind == "cosine":
            # verl.utils.torch_functional.get_cosine_schedule_with_warmup (init_lr_ratio 0, zero-indexed steps)
            if step < warmup:
                return float(step) / float(max(1, warmup))
            progress = float(step - warmup) / float(max(1, (total or 1) - warmup))
            x = math.cos(math.pi * 0.5 * 2.0 * progress)
            return max(min_ratio, x * (1 - min_ratio) * 0.5 + (1 + min_ratio) * 0.5)
        # constant with warmup: verl.utils.torch_functional.get_constant_schedule_with_warmup
        if step < warmup:
            return float(step) / float(max(1.0, warmup))
        return 1.0

    return lr_lambda
