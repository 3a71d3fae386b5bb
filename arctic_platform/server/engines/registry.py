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
"""(job type, engine kind) -> engine class, imported on first use (as verl's ``_ROLLOUT_REGISTRY`` /
``get_rollout_class`` and ``EngineRegistry`` pick a worker's engine): the job registry builds every engine through
:func:`engine_class`, so a new kind is one row here (or one :func:`register_engine` call), not a new branch.
"""

from __future__ import annotations

import importlib

from .base import Engine

__all__ = ["ENGINE_KINDS", "SHARDED_JOB_TYPES", "engine_class", "job_kind", "register_engine"]

_PACKAGE = __name__.rsplit(".", 1)[0]  # arctic_platform.server.engines

_ENGINES: dict[tuple[str, str], str] = {
    ("training", "torch"): ".training_engine:TrainingEngine",
    ("training", "fsdp"): ".fsdp_engine:ShardedTrainingEngine",
    ("log_prob", "torch"): ".logprob_engine:ForwardEngine",
    ("log_prob", "fsdp"): ".fsdp_engine:ShardedForwardEngine",
    ("sampling", "torch"): ".sampling_engine:SamplingEngine",
    ("sampling", "torch-process"): ".sampling_process:ProcessSamplingEngine",
    ("sampling", "vllm"): ".vllm_engine:VllmSamplingEngine",
}

ENGINE_KINDS = tuple(dict.fromkeys(kind for _, kind in _ENGINES))
"""The engine kinds registered at import (a later :func:`register_engine` may add more)."""


def register_engine(job_type: str, kind: str, target: str) -> None:
    """Register ``target`` (``module:Class``; a module starting with ``.`` is relative to
    ``arctic_platform.server.engines``) as the engine of ``job_type`` jobs of ``kind``."""
    if ":" not in target:
        raise ValueError(f"engine target {target!r} is not 'module:Class'")
    _ENGINES[(job_type, kind)] = target


def engine_class(job_type: str, kind: str) -> type[Engine]:
    """The engine class of (``job_type``, ``kind``), its module imported now.

    Raises:
        KeyError: no engine registered for the pair (naming the kinds that are).
    """
    target = _ENGINES.get((job_type, kind))
    if target is None:
        have = sorted(k for j, k in _ENGINES if j == job_type)
        raise KeyError(f"no {kind!r} engine for {job_type} jobs (registered: {have})")
    module, _, name = target.partition(":")
    cls = getattr(importlib.import_module(module, _PACKAGE if module.startswith(".") else None), name)
    if not (isinstance(cls, type) and issubclass(cls, Engine)):
        raise TypeError(f"{target} is not an Engine")
    return cls


SHARDED_JOB_TYPES = ("training", "log_prob")
"""Job types whose engine runs on several devices (kind ``fsdp``: :mod:`.fsdp_engine`)."""


def job_kind(cfg, limits, device: str, devices: tuple[str, ...]) -> str:
    """The engine kind of a new job: a training / log_prob job on several devices is ``fsdp`` (one rank process per
    device), on one ``torch``; a sampling job's engine is the one asked (``extensions.sampling_engine``, else the
    server's ``--sampling-engine``; ``auto``: vLLM when installed, always on CUDA), and the torch loop runs in its own
    process (``torch-process``) with ``extensions.sampling_process`` (else the server's ``--sampling-process``)."""
    if cfg.job_type in SHARDED_JOB_TYPES:
        return "fsdp" if len(devices) > 1 else "torch"
    from .vllm_engine import resolve_sampling_engine

    if resolve_sampling_engine(str(cfg.extensions.sampling_engine or limits.sampling_engine), device) == "vllm":
        return "vllm"
    own = cfg.extensions.sampling_process
    return "torch-process" if (limits.sampling_process if own is None else own) else "torch"
