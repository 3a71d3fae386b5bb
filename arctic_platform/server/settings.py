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
"""The embedded server's settings: what the app needs (:class:`ServerSettings`) and what the job registry needs
(:class:`ServerLimits`). Torch-free, so ``arctic-verl server``'s flags take their defaults from these fields.

Every default is written here once: the CLI (:mod:`.__main__`) reads it from the field (``ServerLimits.max_seq_len``),
the app and the registry get the objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..protocol import DEFAULT_JOB_GPUS, DEFAULT_MAX_SEQ_LEN, job_gpu_counts

SAMPLING_ENGINES = ("auto", "vllm", "torch")
"""``--sampling-engine`` / ``extensions.sampling_engine`` values
(:func:`.engines.vllm_engine.resolve_sampling_engine`)."""


@dataclass
class ServerLimits:
    """Server-wide settings the registry needs."""

    training_gpus: int = DEFAULT_JOB_GPUS
    """``--training-gpus``: training workers (0: no training job)."""
    sampling_gpus: int = DEFAULT_JOB_GPUS
    """``--sampling-gpus``: sampling workers (0: no sampling job)."""
    log_prob_gpus: int = DEFAULT_JOB_GPUS
    """``--log-prob-gpus``: log_prob workers (0: no log_prob job)."""
    log_prob_devices: str = "own"
    """``--log-prob-devices``: ``own`` GPUs, or the ``training`` job's (:func:`.placement.place_jobs`)."""
    default_model: str | None = None
    """``--model``: the model folder of ``/initialize`` bodies without ``model_name``."""
    device: str = "auto"
    """``--device``: auto, cpu, cuda or cuda:N (:func:`.placement.place_jobs`)."""
    dtype: str | None = None
    """``--dtype``; None: float32 on CPU, bfloat16 on CUDA."""
    max_seq_len: int = DEFAULT_MAX_SEQ_LEN
    """``--max-seq-len``: a job's max_seq_len when its config names none."""
    engine_timeout_s: float = 1800.0
    """``--engine-timeout``: bounded wait for a busy engine (s)."""
    max_batch_rows: int = 64
    """``--max-batch-rows``: generate rows decoded together."""
    job_devices: dict[str, str] = field(default_factory=dict)
    """Per-job device overrides (``--job-devices``); otherwise :func:`.placement.place_jobs` decides."""
    sampling_process: bool = False
    """Run each sampling job's engine in its own OS process (``--sampling-process``; a job's
    ``extensions.sampling_process`` overrides it): :mod:`.engines.sampling_process`."""
    sampling_engine: str = "auto"
    """``--sampling-engine``: ``auto`` (vLLM when installed, always on CUDA), ``vllm`` or ``torch``; a job's
    ``extensions.sampling_engine`` overrides it (:mod:`.engines.vllm_engine`)."""
    threads: int = 1
    """``--threads``: torch threads of the server; also the OpenMP threads of a CPU vLLM engine's worker."""
    weight_sync_bucket_mb: float = 1024.0
    """``--weight-sync-bucket-mb``: a weight sync to a vLLM sampler streams buckets of this size through
    ``/dev/shm`` (vLLM's packed IPC transfer uses 1 GiB buffers too)."""

    def job_gpus(self) -> dict[str, int]:
        """Job type -> workers asked for (0: the server hosts no such job), in ``protocol.JOB_TYPES`` order."""
        return job_gpu_counts(self)


@dataclass
class ServerSettings:
    """Everything the app needs; the CLI flags of ``arctic-verl server`` map onto these fields."""

    token: str | None = None
    """Bearer token checked on every request when set (required for a non-loopback bind)."""
    max_body_bytes: int = 1024 * 1024 * 1024
    """``--max-body-bytes``: request body limit (413 above)."""
    max_header_bytes: int = 64 * 1024 * 1024
    """``--max-header-bytes``: wire frame JSON header limit."""
    batch_wait_ms: float = 2.0
    """How long the generate batcher waits for more requests after the first one arrives."""
    limits: ServerLimits | None = None
