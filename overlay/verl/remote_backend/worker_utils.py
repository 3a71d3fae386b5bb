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
"""Helpers for remote-backend forwarder workers: backend metrics in the shape verl's ``reduce_metrics`` reads."""

from __future__ import annotations

from typing import Any

import torch

from verl.utils.metric import AggregationType, Metric


def normalize_backend_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """Wrap backend metric values the way verl's ``reduce_metrics`` expects them.

    ``Metric`` values are kept; a list of ``Metric`` becomes ``Metric.aggregate_dp(list)``; other lists are kept;
    scalars become ``Metric(value=v, aggregation=MEAN)``.
    """
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        if isinstance(value, Metric):
            out[key] = value
        elif isinstance(value, list):
            out[key] = Metric.aggregate_dp(value) if value and all(isinstance(v, Metric) for v in value) else value
        else:
            if isinstance(value, torch.Tensor):
                value = value.item()
            out[key] = Metric(value=value, aggregation=AggregationType.MEAN)
    return out
