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
"""torch + transformers engines of the embedded Arctic RL server: training, sampling and forward-only.

Every engine owns its own ``AutoModelForCausalLM`` (CPU float32 by default, CUDA bfloat16 when present):

* :class:`TrainingEngine` (job ``training``): ``forward_backward`` (verl policy loss, gradients accumulate),
  ``step`` (grad clipping + AdamW + verl's LR schedule), ``forward``, checkpoints (safetensors + JSON).
* :class:`SamplingEngine` (job ``sampling``): batched KV-cache decoding of token-id prompts with per-request seeds;
  its weights change only through :meth:`SamplingEngine.load_weights_from` (``/weight-sync``).
* :class:`ForwardEngine` (job ``log_prob``): forward-only log-probs with the initial weights.

Engines are not thread-safe; the job registry serialises calls with one lock per job. Log-prob conventions (all
paths, docs/arctic-rl-protocol.md §6): logits are divided by ``meta.temperature`` when the frame's ``processing.post``
names ``apply_temperature`` or the frame sends no ``processing`` (``temperature <= 0`` means 1.0, as greedy sampling
reports log-probs at T = 1); ``logprobs[:, i] = log P(input_ids[:, i + 1])`` on real tokens,
0 elsewhere (the last column, padding, and the slot before the first real token).

This module is the engines' public face: the names below, each defined in its own module (import anything else from
the module that defines it):

| Module | Holds |
|---|---|
| ``errors.py`` | :class:`RequestError` |
| ``batch.py`` | dense batch schema (:func:`parse_dense_batch`), processing allow-lists |
| ``schedule.py`` | :class:`TrainingSettings`, verl's LR schedule (:func:`build_scheduler`) |
| ``model_engine.py`` | :class:`EngineSettings`, loading, forward pass, :class:`ModelEngine`, :func:`weight_norm` |
| ``training_engine.py`` | :class:`TrainingEngine` (loss, step, checkpoint save / load / pruning) |
| ``sampling_engine.py`` | :class:`GenerateItem`, :class:`SamplingEngine` |
| ``logprob_engine.py`` | :class:`ForwardEngine` |
"""

from __future__ import annotations

from .errors import RequestError
from .logprob_engine import ForwardEngine
from .model_engine import EngineSettings, weight_norm
from .sampling_engine import GenerateItem, SamplingEngine
from .schedule import TrainingSettings
from .training_engine import TrainingEngine

__all__ = [
    "EngineSettings",
    "ForwardEngine",
    "GenerateItem",
    "RequestError",
    "SamplingEngine",
    "TrainingEngine",
    "TrainingSettings",
    "weight_norm",
]
