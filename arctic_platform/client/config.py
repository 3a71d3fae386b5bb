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
"""Configuration of the Arctic RL client (pydantic v2; unknown fields are errors).

``ArcticRLClientConfig.backend`` is discriminated by ``type``: ``local`` (the client starts the embedded server and
owns it), ``onprem`` (an existing server URL) or ``cortex`` (Snowflake Cortex over SnowAPI: :mod:`.cortex`). Any other
transport value (for example the reference's ``ray``) fails validation; nothing is silently replaced.

Secrets never live in these models as plain values: servers get a token through the *name* of an environment
variable (``token_env_var``), and the Cortex PAT is a ``SecretStr`` (masked in repr) or an env-var name.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from ..ds_config import build_ds_config
from ..protocol import (
    DEFAULT_JOB_GPUS,
    DEFAULT_MAX_SEQ_LEN,
    JOB_CREATE_ORDER,
    LrSchedule,
    OptimizerSpec,
    job_gpu_counts,
)

__all__ = [
    "ArcticRLClientConfig",
    "CortexConfig",
    "LocalConfig",
    "LogProbConfig",
    "OnPremConfig",
    "SamplingConfig",
    "TrainingConfig",
    "JOB_CREATE_ORDER",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class TrainingConfig(_Model):
    """Optimizer, LR schedule and checkpoint root of the training job.

    ``optimizer`` and ``lr_schedule`` are the protocol's typed specs (:class:`~arctic_platform.protocol.OptimizerSpec`,
    :class:`~arctic_platform.protocol.LrSchedule`), as the verl plugin builds them from verl's own config: the job
    body sends the schedule as ``extensions.lr_schedule`` (a server with verl's schedule) and, derived from it by
    :func:`~arctic_platform.ds_config.ds_scheduler`, as ``ds_config.scheduler`` (a reference server).
    """

    optimizer: OptimizerSpec = Field(default_factory=OptimizerSpec)
    """AdamW and gradient clipping."""
    lr_schedule: LrSchedule = Field(default_factory=LrSchedule)
    """verl's schedule, counted in ticks (verl: one per training step); default: a constant rate."""
    optimizer_steps_per_tick: int = Field(1, ge=1)
    """Optimizer steps (``/step`` calls) per schedule tick (verl: PPO mini-batches x epochs per training step), which
    scales the DeepSpeed scheduler a server that ticks per ``/step`` gets."""
    checkpoint_path: str | None = None
    """Default save root: saves land in ``<checkpoint_path>/arctic_rl_job_<id>/`` unless ``save(path=...)``."""
    micro_batch_size: int | None = Field(None, ge=1)
    """``ds_config.train_micro_batch_size_per_gpu``: rows per micro-batch (None: the whole call at once)."""
    train_batch_size: int | None = Field(None, ge=1)
    """``ds_config.train_batch_size``: sequences per optimizer step (verl's ppo_mini_batch_size x rollout.n)."""
    sequence_parallel_size: int = Field(1, ge=1)
    """``ds_config.sequence_parallel_size`` (verl's ulysses_sequence_parallel_size)."""
    deepspeed: dict[str, Any] = Field(default_factory=dict)
    """The user's DeepSpeed block (``zero_optimization``, ``log_level``, ...), passed through into ``ds_config``."""
    ds_worker_config: dict[str, Any] = Field(default_factory=dict)
    """``JobConfig.ds_worker_config`` (``attn_implementation``, ``enable_gradient_checkpointing``, ``use_liger``)."""
    full_determinism: bool = False
    """``JobConfig.full_determinism`` of the training and log_prob jobs."""
    cuda_ipc: bool = False
    """``JobConfig.cuda_ipc`` (weight sync of a colocated server)."""
    low_memory: bool = False
    """``JobConfig.low_memory`` (with cuda_ipc: one parameter at a time)."""
    lora: dict[str, Any] | None = None
    """Extension ``extensions.lora`` (embedded server): ``{rank, alpha, target_modules, exclude_modules,
    target_parameters}`` as verl's ``model.lora_rank`` / ``lora_alpha`` / ...; rank 0 or None: full fine-tuning."""


class LogProbConfig(_Model):
    """The reference (log_prob) job: a forward-only DeepSpeed engine on a reference server."""

    micro_batch_size: int | None = Field(None, ge=1)
    """``log_prob_config.train_micro_batch_size_per_gpu`` (None: the training job's)."""
    zero_stage: int | None = Field(None, ge=0, le=3)
    """``log_prob_config.zero_optimization.stage`` (None: the training job's)."""


class SamplingConfig(_Model):
    """Sampling job settings."""

    vllm_config: dict[str, Any] = Field(default_factory=dict)
    """``JobConfig.vllm_config``: vLLM engine args on a reference server (``max_num_seqs`` also sizes the decode batch
    of the torch engine; ``max_model_len`` defaults to ``max_seq_len``). ``engine_kwargs`` is its old name."""
    arctic_inference_config: dict[str, Any] | None = None
    """The verl ``rollout`` block (FCA / speculative decoding); the CPU torch engine warns once and ignores it."""
    prompt_format: Literal["auto", "text"] = "auto"
    """``auto``: send token-id prompts when the server advertises ``token_ids`` in /health, else decoded text;
    ``text``: always text (as the reference client does)."""
    max_retokenize_mismatch_rate: float = Field(0.0, ge=0, le=1)
    """Text prompts: fraction of prompts whose ``encode(decode(ids)) != ids`` tolerated before generate fails."""

    @model_validator(mode="before")
    @classmethod
    def _old_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and "engine_kwargs" in data:
            data = dict(data)
            old = data.pop("engine_kwargs") or {}
            data["vllm_config"] = {**old, **(data.get("vllm_config") or {})}
        return data


class LocalConfig(_Model):
    """Start the embedded server as a subprocess on this machine; the client owns it and stops it on close."""

    type: Literal["local"] = "local"
    host: str = "127.0.0.1"
    """Bind address; anything but loopback needs ``token_env_var``."""
    port: int = Field(0, ge=0, le=65535)
    """0: the server binds a free port itself and reports it through a port file (never probe-then-hand-on)."""
    startup_timeout: float = Field(120.0, gt=0)
    """Seconds to wait for the server to listen and answer /health."""
    python: str = Field(default_factory=lambda: sys.executable)
    """Interpreter that runs ``-m arctic_platform.server``."""
    extra_env: dict[str, str] = Field(default_factory=dict)
    """Added to the server's environment."""
    log_file: str | None = None
    """Server stdout/stderr go here (appended); None: a temporary file removed on close."""
    threads: int = Field(1, ge=1)
    """``--threads`` of the server (torch intra-op threads)."""
    token_env_var: str | None = None
    """Name of the variable holding a bearer token for the server (inherited by it); the value is never logged."""
    server_args: list[str] = Field(default_factory=list)
    """Extra ``arctic-verl server`` flags, e.g. ``["--max-body-bytes", "1000000"]``."""


class OnPremConfig(_Model):
    """An Arctic RL server that is already running."""

    type: Literal["onprem"] = "onprem"
    url: str
    """Base URL, e.g. ``http://10.0.0.5:7000``."""
    token_env_var: str | None = None
    """Name of the variable holding the bearer token (sent as ``Authorization: Bearer``); never its value."""
    protocol: Literal["http"] = "http"
    """Only HTTP; the reference's ``ray`` protocol is not implemented and is rejected here."""


_CORTEX_ENV = {
    "base_url": "ARCTIC_CORTEX_BASE_URL",
    "host": "ARCTIC_CORTEX_HOST",
    "pat_env_var": "ARCTIC_CORTEX_PAT_ENV_VAR",
    "database": "ARCTIC_CORTEX_DATABASE",
    "schema_": "ARCTIC_CORTEX_SCHEMA",
    "endpoint": "ARCTIC_CORTEX_ENDPOINT",
}


class CortexConfig(_Model):
    """Snowflake Cortex: SnowAPI's training endpoint (``{base_url | https://host}/api/v2/databases/{database}/schemas/
    {schema}/{endpoint}``). ``base_url`` is a direct or mock URL without auth; ``host`` authenticates every call with
    a programmatic access token (PAT), read from ``pat`` or the variable ``pat_env_var`` names when the client
    starts. The PAT is never in a repr, a reconnect handle, a log line or an error."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_assignment=True)
    type: Literal["cortex"] = "cortex"
    base_url: str | None = None
    """Direct / mock URL (no auth)."""
    host: str | None = None
    """``<account>.<region>.snowflakecomputing.com`` (PAT auth)."""
    pat: SecretStr | None = None
    """The Programmatic Access Token itself (masked in repr); prefer ``pat_env_var``."""
    pat_env_var: str = "CORTEX_PAT"
    """Name of the variable holding the PAT."""
    database: str = ""
    schema_: str = Field("", alias="schema")
    endpoint: str = "cortex-training"
    max_retries: int = Field(10, ge=0)
    """Retries of a failed call (the specification's ten; exponential backoff with jitter, 0.5 s up to 10 s)."""
    max_chunk_bytes: int = Field(60 * 1024 * 1024, ge=16 * 1024)
    """Largest octet request body: a larger frame travels as several DSSST1 chunks (SnowAPI's 60 MiB cap)."""
    ca_file: str | None = None
    """PEM file of the certificate authorities that verify the service's TLS certificate (None: the system's)."""

    def api_prefix(self) -> str:
        """The URL every call is relative to."""
        base = (self.base_url or f"https://{self.host}").rstrip("/")
        return f"{base}/api/v2/databases/{self.database}/schemas/{self.schema_}/{self.endpoint}"

    @model_validator(mode="after")
    def _target(self):
        if not self.base_url and not self.host:
            raise ValueError("cortex needs base_url or host (ARCTIC_CORTEX_BASE_URL / ARCTIC_CORTEX_HOST)")
        if self.host and not self.base_url and not (self.database and self.schema_):
            raise ValueError("cortex with host needs database and schema (ARCTIC_CORTEX_DATABASE / _SCHEMA)")
        return self

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: Any) -> CortexConfig:
        """Read ``ARCTIC_CORTEX_*``; empty values are ignored and explicit ``overrides`` win.

        Args:
            environ: mapping to read (default ``os.environ``).
            **overrides: field values that take precedence (``schema`` or ``schema_`` both work).
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field, var in _CORTEX_ENV.items():
            v = env.get(var)
            if v:
                values[field] = v
        if "schema" in overrides:
            overrides["schema_"] = overrides.pop("schema")
        values.update({k: v for k, v in overrides.items()})
        return cls(**values)

    def resolve_pat(self, environ: dict[str, str] | None = None) -> str | None:
        env = os.environ if environ is None else environ
        if self.pat is not None:
            return self.pat.get_secret_value()
        return env.get(self.pat_env_var) or None


Backend = Annotated[LocalConfig | OnPremConfig | CortexConfig, Field(discriminator="type")]


class ArcticRLClientConfig(_Model):
    """Everything the client needs; ``*_job_id`` set means re-attach to existing jobs (create and destroy nothing)."""

    model_name: str
    """HF model folder (a path the server can read)."""
    seed: int | None = None
    """Job seed (None: the server's 42). Seeds unseeded sampling."""
    dtype: str | None = None
    """None: float32 on CPU, bfloat16 on CUDA."""
    max_seq_len: int = Field(DEFAULT_MAX_SEQ_LEN, ge=1)
    """Prompt + response limit of every job."""
    device: str = "auto"
    """auto (cuda if available, else cpu), cpu, cuda[:N]."""
    training_gpus: int = Field(DEFAULT_JOB_GPUS, ge=0)
    """0: no training job."""
    sampling_gpus: int = Field(DEFAULT_JOB_GPUS, ge=0)
    """0: no sampling job."""
    log_prob_gpus: int = Field(DEFAULT_JOB_GPUS, ge=0)
    """0: no log_prob job; ``forward(ref=True)`` then raises "No log_prob job initialized."."""
    log_prob_devices: Literal["own", "training"] = "own"
    """Where the embedded server runs the log_prob job: GPUs of its ``own``, or the ``training`` job's (sharded
    beside the training shards; ``log_prob_gpus`` must then equal ``training_gpus``). A remote server places its
    jobs itself: ``training`` is refused for ``onprem`` and ``cortex``."""
    job_ready_timeout: float = Field(1800.0, gt=0)
    """Max seconds for a job to become running (a terminal state fails at once)."""
    request_timeout: float = Field(1800.0, gt=0)
    """Read timeout of every call."""
    connect_timeout: float = Field(10.0, gt=0)
    """Connect timeout of every call."""
    max_retries: int = Field(3, ge=0)
    """Retries for connection failures (any call) and read failures / 502-504 (idempotent calls only)."""
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    log_prob: LogProbConfig = Field(default_factory=LogProbConfig)
    backend: Backend = Field(default_factory=LocalConfig)
    training_job_id: int | str | None = None
    sampling_job_id: int | str | None = None
    log_prob_job_id: int | str | None = None

    @model_validator(mode="after")
    def _some_job(self):
        if not self.reconnecting and max(job_gpu_counts(self).values()) == 0:
            raise ValueError("at least one of training_gpus / sampling_gpus / log_prob_gpus must be > 0")
        if self.log_prob_devices == "training":
            if self.backend.type != "local":
                raise ValueError(
                    f"log_prob_devices=training places jobs on the embedded server; the {self.backend.type} backend "
                    "places its own jobs: use log_prob_devices=own"
                )
            if self.log_prob_gpus not in (0, self.training_gpus):
                raise ValueError(
                    f"log_prob_devices=training runs the log_prob job on the training job's {self.training_gpus} "
                    f"GPU(s), but log_prob_gpus={self.log_prob_gpus}: set log_prob_gpus={self.training_gpus}"
                )
        return self

    @property
    def reconnecting(self) -> bool:
        return any(x is not None for x in (self.training_job_id, self.sampling_job_id, self.log_prob_job_id))

    def job_gpus(self, job_type: str) -> int:
        """GPUs of ``job_type`` (``training_gpus`` / ``sampling_gpus`` / ``log_prob_gpus``; 0: no such job)."""
        return job_gpu_counts(self)[job_type]

    def job_config(self, job_type: str) -> dict[str, Any]:
        """The ``/initialize`` body of ``job_type``: a reference ``JobConfig`` (docs/arctic-rl-protocol.md §2).

        The reference adapter's shape, which Arctic-Platform's DeepSpeed workers accept: the training job gets
        ``ds_config`` (the user's DeepSpeed block + verl's batch sizing + AdamW ``optimizer``, ``gradient_clipping``
        and ``scheduler``), ``ds_worker_config``, ``full_determinism``, ``checkpoint_path``, ``cuda_ipc`` and
        ``low_memory``; the log_prob job the same ``ds_config`` and ``ds_worker_config`` plus ``log_prob_config``
        (its forward-only DeepSpeed engine: without a ``ds_config`` a reference server puts it on vLLM, which has no
        ``/forward``); the sampling job ``vllm_config`` and ``arctic_inference_config``. The embedded server's own
        settings with no reference field (``device``, ``dtype``, ``max_seq_len``) go in ``extensions``.
        """
        model = self.model_name
        if isinstance(self.backend, LocalConfig) and os.path.isdir(model):
            model = os.path.abspath(model)
        body: dict[str, Any] = {
            "model_name": model,
            "job_type": job_type,
            "num_devices": self.job_gpus(job_type),
        }
        if self.seed is not None:
            body["seed"] = self.seed
        ext: dict[str, Any] = {"device": self.device, "max_seq_len": self.max_seq_len}
        if self.dtype is not None:
            ext["dtype"] = self.dtype
        body["extensions"] = ext
        t = self.training
        if job_type in ("training", "log_prob"):
            body["full_determinism"] = t.full_determinism
            body["ds_config"] = self.training_ds_config()
            if t.ds_worker_config:
                body["ds_worker_config"] = dict(t.ds_worker_config)
        if job_type == "training":
            ckpt = t.checkpoint_path
            if ckpt and isinstance(self.backend, LocalConfig):
                ckpt = os.path.abspath(ckpt)  # the local server runs in its own working directory
            body["checkpoint_path"] = ckpt
            body["cuda_ipc"] = t.cuda_ipc
            body["low_memory"] = t.low_memory
            ext["lr_schedule"] = t.lr_schedule.model_dump(exclude_defaults=True)
            if t.lora:
                ext["lora"] = dict(t.lora)
        elif job_type == "log_prob":
            body["log_prob_config"] = self.log_prob_ds_config()
        elif job_type == "sampling":
            body["vllm_config"] = {"max_model_len": self.max_seq_len, **self.sampling.vllm_config}
            if self.sampling.arctic_inference_config:
                body["arctic_inference_config"] = self.sampling.arctic_inference_config
        return body

    def _sizing(self, micro: int | None, gpus: int) -> dict[str, Any]:
        """DeepSpeed batch sizing as the reference adapter derives it (micro-batches of ``micro`` rows per GPU)."""
        t = self.training
        out: dict[str, Any] = {}
        if micro is not None:
            out["train_micro_batch_size_per_gpu"] = micro
        if t.train_batch_size is not None:
            out["train_batch_size"] = t.train_batch_size
            if micro is not None:
                out["gradient_accumulation_steps"] = max(1, t.train_batch_size // (micro * max(1, gpus)))
        out["sequence_parallel_size"] = t.sequence_parallel_size
        return out

    def training_ds_config(self) -> dict[str, Any]:
        """The training job's ``ds_config``: the DeepSpeed block, sizing, optimizer, clipping, scheduler."""
        t = self.training
        base = {**t.deepspeed, **self._sizing(t.micro_batch_size, self.training_gpus)}
        return build_ds_config(t.optimizer, t.lr_schedule, ticks_per_step=t.optimizer_steps_per_tick, base=base)

    def log_prob_ds_config(self) -> dict[str, Any]:
        """The log_prob job's ``log_prob_config``: the DeepSpeed block and sizing, no optimizer."""
        import copy

        t, lp = self.training, self.log_prob
        cfg = copy.deepcopy(t.deepspeed)
        if lp.zero_stage is not None:
            cfg.setdefault("zero_optimization", {})["stage"] = lp.zero_stage
        micro = lp.micro_batch_size if lp.micro_batch_size is not None else t.micro_batch_size
        cfg.update(self._sizing(micro, self.log_prob_gpus))
        return cfg
