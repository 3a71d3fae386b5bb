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
"""Helpers for remote-backend forwarder workers: nested-jagged <-> dense tensors, backend metrics."""

from __future__ import annotations

from typing import Any

import torch

from verl.utils.metric import AggregationType, Metric


def make_njt(data, tensor: torch.Tensor) -> torch.Tensor:
    """Turn a dense ``[B, L]`` left-padded tensor into a nested-jagged tensor on ``data["input_ids"]``'s offsets.

    Row ``b`` starts at the first valid column of ``data["attention_mask"][b]`` (``argmax``), so the dense
    layout is assumed **left-padded**. V1 TransferQueue rows carry no ``attention_mask``: a forwarder must build
    one before calling this.

    Args:
        data: a TensorDict with nested ``input_ids`` and a dense ``attention_mask`` ``[B, L]``.
        tensor: dense ``[B, L]`` values aligned with ``attention_mask``.

    Returns:
        A nested tensor (``layout=torch.jagged``) whose row ``b`` has ``len(input_ids[b])`` values.
    """
    offsets = data["input_ids"].offsets()
    lengths = offsets.diff()
    starts = data["attention_mask"].long().argmax(dim=-1)
    rows = [tensor[b, starts[b] : starts[b] + lengths[b]] for b in range(tensor.shape[0])]
    values = torch.cat(rows) if rows else tensor.new_empty((0,))
    return torch.nested.nested_tensor_from_jagged(values, offsets.to(values.device))


def shift_nested_response_aligned_to_predict_next(njt: torch.Tensor) -> torch.Tensor:
    """Shift a nested tensor's flat values left by one; each sequence's last slot becomes 0.

    ``[[1, 2, 3, 4], [5, 6]] -> [[2, 3, 4, 5], [6, 0]]``. Safe for verl's consumers: ``response_from_nested`` and
    ``no_padding_2_padding`` never read a sequence's last slot.
    """
    offsets = njt.offsets()
    values = njt.values()
    shifted = torch.zeros_like(values)
    if values.numel() > 1:
        shifted[:-1] = values[1:]
    ends = offsets[1:] - 1
    ends = ends[offsets[1:] > offsets[:-1]]
    shifted[ends] = 0
    return torch.nested.nested_tensor_from_jagged(shifted, offsets)


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
