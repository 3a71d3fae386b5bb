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
"""The engines of the embedded Arctic RL server: their interfaces, their registry, and their public names.

Every engine implements one interface of :mod:`.base` (:class:`TrainingInterface`, :class:`ForwardInterface`,
:class:`SamplingInterface`); the job registry picks the class through :mod:`.registry` (job type, engine kind) and
builds it with ``from_spec``; routes call the interfaces' named methods. What engines that keep their model in
another process share (the ``/dev/shm`` folder, the atomic weight file, the name / shape check of a sync, the parent
watchdog) lives in :mod:`.shared`.

The torch + transformers engines own an ``AutoModelForCausalLM`` each (CPU float32 by default, CUDA bfloat16):

* :class:`TrainingEngine` (job ``training``, kind ``torch``): ``forward_backward`` (verl policy loss, gradients
  accumulate), ``step`` (grad clipping + AdamW + verl's LR schedule), ``forward``, checkpoints (safetensors + JSON).
* :class:`SamplingEngine` (job ``sampling``, kind ``torch``): batched KV-cache decoding of token-id prompts with
  per-request seeds; its weights change only through ``load_weights_from`` (``/weight-sync``). Kind
  ``torch-process`` runs it in a child process (:mod:`.sampling_process`), kind ``vllm`` is vLLM
  (:mod:`.vllm_engine`).
* :class:`ForwardEngine` (job ``log_prob``, kind ``torch``): forward-only log-probs with the initial weights.

Engines are not thread-safe; the job registry serialises calls with one lock per job. Log-prob conventions (all
paths, docs/arctic-rl-protocol.md §6): logits are divided by ``meta.temperature`` when the frame's ``processing.post``
names ``apply_temperature`` or the frame sends no ``processing`` (``temperature <= 0`` means 1.0, as greedy sampling
reports log-probs at T = 1); ``logprobs[:, i] = log P(input_ids[:, i + 1])`` on real tokens,
0 elsewhere (the last column, padding, and the slot before the first real token).

Every engine lives in this package, one module per engine; the names below are imported on first use (the engine
modules import this package's :mod:`.base`), each defined in its own module (import anything else from the module
that defines it):

| Module | Holds |
|---|---|
| ``engines/base.py`` | the interfaces, ``EngineSpec``, ``EngineSettings``, ``GenerateItem``, ``weight_norm`` |
| ``engines/registry.py`` | :func:`engine_class`, :func:`register_engine` |
| ``engines/shared.py`` | ``shm_dir``, ``weights_file``, ``check_weight_layout``, ``watch_parent``, the sync's buckets |
| ``engines/model_engine.py`` | loading, the forward pass, :class:`ModelEngine` |
| ``engines/training_engine.py`` | :class:`TrainingEngine` (kind ``torch``: loss, step, checkpoints) |
| ``engines/fsdp_engine.py`` | :class:`ShardedTrainingEngine`, :class:`ShardedForwardEngine` (kind ``fsdp``) |
| ``engines/fsdp_worker.py`` | the FSDP2 rank process (its trainer and forward-only engine) |
| ``engines/logprob_engine.py`` | :class:`ForwardEngine` (kind ``torch``) |
| ``engines/sampling_engine.py`` | :class:`SamplingEngine` (kind ``torch``) |
| ``engines/sampling_process.py`` | :class:`ProcessSamplingEngine` (kind ``torch-process``) |
| ``engines/vllm_engine.py`` | :class:`VllmSamplingEngine` (kind ``vllm``; ``engines/vllm_worker.py``: its workers) |
| ``errors.py`` (server) | :class:`RequestError` |
| ``batch.py`` (server) | dense batch schema (:func:`parse_dense_batch`), processing allow-lists |
| ``arctic_platform/schedule.py`` | :class:`TrainingSettings`, verl's LR schedule (:func:`build_scheduler`) |
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..errors import RequestError
from .base import (
    Engine,
    EngineSettings,
    EngineSpec,
    ForwardInterface,
    GenerateItem,
    SamplingInterface,
    TrainingInterface,
    WeightSource,
    weight_norm,
)
from .registry import engine_class, register_engine

if TYPE_CHECKING:
    from ...schedule import TrainingSettings
    from .logprob_engine import ForwardEngine
    from .sampling_engine import SamplingEngine
    from .training_engine import TrainingEngine

_LAZY = {
    "ForwardEngine": ".logprob_engine",
    "SamplingEngine": ".sampling_engine",
    "TrainingSettings": "...schedule",
    "TrainingEngine": ".training_engine",
}

__all__ = [
    "Engine",
    "EngineSettings",
    "EngineSpec",
    "ForwardEngine",
    "ForwardInterface",
    "GenerateItem",
    "RequestError",
    "SamplingEngine",
    "SamplingInterface",
    "TrainingEngine",
    "TrainingInterface",
    "TrainingSettings",
    "WeightSource",
    "engine_class",
    "register_engine",
    "weight_norm",
]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
