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
"""Job registry and lifecycle of the embedded Arctic RL server (protocol §2.3-§2.4).

* States: ``pending`` -> ``running`` -> ``failed`` / ``terminated``, each with a human-readable ``reason`` (non-empty
  when failed or terminated). Ids are ints from 1, never reused.
* One live (pending or running) job per ``job_type``; a second ``/initialize`` of a live type gets 409. A failed or
  terminated record stays visible in ``/status`` but never blocks a new job.
* Validation (type, server worker counts, model path, checkpoint path, dtype, device) happens before anything is
  built (400). The build runs in a worker thread; on any exception everything built so far is released and the job
  becomes ``failed`` with the exception as its reason, so a corrected ``/initialize`` succeeds without a restart.
* Every engine call holds the job's lock; waiting for it is bounded (``engine_timeout_s``) and expiry is an error
  with a reason, never a hang.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .engines import (
    EngineSettings,
    ForwardEngine,
    RequestError,
    SamplingEngine,
    TrainingEngine,
    TrainingSettings,
    resolve_dtype,
)

logger = logging.getLogger("arctic_platform.server")

JOB_TYPES = ("training", "sampling", "log_prob")
LIVE = ("pending", "running")


class OptimizerModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lr: float = Field(1e-6, ge=0)
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = Field(0.01, ge=0)
    eps: float = Field(1e-8, gt=0)


class TrainingConfigModel(BaseModel):
    """``JobConfig.training_config`` (strict: a misspelt key is a 422, not a silently default value)."""

    model_config = ConfigDict(extra="forbid")
    optimizer: OptimizerModel = Field(default_factory=OptimizerModel)
    grad_clip: float | None = 1.0
    lr_scheduler_type: Literal["constant", "cosine"] = "constant"
    warmup_steps: int = Field(0, ge=0)
    total_steps: int | None = Field(None, ge=1)
    min_lr_ratio: float = Field(0.0, ge=0, le=1)
    micro_batch_size: int | None = Field(None, ge=1)

    def settings(self) -> TrainingSettings:
        if self.lr_scheduler_type == "cosine" and self.total_steps is None:
            raise RequestError("training_config.total_steps is required for lr_scheduler_type='cosine'", 400)
        o = self.optimizer
        return TrainingSettings(
            lr=o.lr,
            betas=o.betas,
            weight_decay=o.weight_decay,
            eps=o.eps,
            grad_clip=self.grad_clip,
            lr_scheduler_type=self.lr_scheduler_type,
            warmup_steps=self.warmup_steps,
            total_steps=self.total_steps,
            min_lr_ratio=self.min_lr_ratio,
            micro_batch_size=self.micro_batch_size,
        )


class JobConfig(BaseModel):
    """``POST /initialize`` body (protocol §2.2 ``JobConfig``; extra keys such as ``ds_config`` are ignored)."""

    model_config = ConfigDict(extra="ignore", protected_namespaces=())
    model_name: str | None = None
    """HF model folder; None uses the server's ``--model``."""
    job_type: str = "training"
    num_devices: int | None = None
    training_config: dict | None = None
    log_prob_config: dict | None = None
    vllm_config: dict | None = None
    """Sampling engine kwargs (``max_num_seqs`` sets the decode batch; other vLLM keys are ignored on torch)."""
    engine_kwargs: dict | None = None
    """Same as ``vllm_config``; both are merged (this one wins)."""
    checkpoint_path: str | None = None
    arctic_inference_config: dict | None = None
    full_determinism: bool = False
    seed: int | None = 42
    cuda_ipc: bool = False
    low_memory: bool = False
    dtype: str | None = None
    device: str | None = None
    max_seq_len: int | None = Field(None, ge=1)
    attn_implementation: str | None = None

    @field_validator("seed", mode="after")
    @classmethod
    def _seed(cls, v):
        return 42 if v is None else v


@dataclass
class ServerLimits:
    """Server-wide settings the registry needs."""

    training_gpus: int = 1
    sampling_gpus: int = 1
    log_prob_gpus: int = 1
    default_model: str | None = None
    device: str = "auto"
    dtype: str | None = None
    max_seq_len: int = 8192
    engine_timeout_s: float = 1800.0
    max_batch_rows: int = 64
    job_devices: dict[str, str] = field(default_factory=dict)
    """Per-job device overrides (``--job-devices``); otherwise :func:`.placement.place_jobs` decides."""


@dataclass
class Job:
    job_id: int
    job_type: str
    model_name: str
    config: JobConfig
    status: str = "pending"
    reason: str = ""
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    engine: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    checkpoint_root: Path | None = None
    destroy_requested: bool = False
    device: str = "cpu"
    dtype: str = "float32"
    batcher: Any = None
    compute_s: float = 0.0
    """Seconds of engine work done for this job (measured under its lock; weight syncs count on the source)."""

    def set(self, status: str, reason: str = "") -> None:
        self.status, self.reason, self.updated_at = status, reason, time.time()

    def info(self) -> dict:
        d: dict[str, Any] = {
            "job_id": self.job_id,
            "job_type": self.job_type,
            "model_name": self.model_name,
            "status": self.status,
            "reason": self.reason,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "engine": "torch",
            "compute_s": self.compute_s,
            "device": self.device,
            "dtype": self.dtype,
            "checkpoint_path": str(self.checkpoint_root) if self.checkpoint_root else None,
            "sync_path": None,  # weight sync is an in-process copy; no file
            "cuda_ipc": self.config.cuda_ipc,
            "low_memory": self.config.low_memory,
        }
        if str(self.device).startswith("cuda") and torch_cuda_available():
            d["device_name"] = torch_cuda_device_name(self.device)
        eng = self.engine
        if self.job_type == "training" and eng is not None:
            d["global_steps"] = eng.global_steps
            d["policy_version"] = eng.policy_version
        if self.job_type == "sampling" and eng is not None:
            d["policy_version"] = eng.policy_version
            d["inference_state"] = eng.state
            b = self.batcher
            d["generate_requests"] = b.requests if b is not None else 0
            d["generate_batches"] = b.batches if b is not None else 0
        return d


class JobRegistry:
    """All jobs of one server; thread-safe."""

    def __init__(self, limits: ServerLimits):
        self.limits = limits
        self._jobs: dict[int, Job] = {}
        self._next_id = 1
        self._lock = threading.Lock()

    # ---- lookup ----
    def get(self, job_id: int) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise RequestError(f"unknown job id {job_id}", 404)
        return job

    def require(self, job_id: int | None, *types: str) -> Job:
        """The running job ``job_id`` of one of ``types`` (404 unknown, 400 wrong type, 409 not running)."""
        if job_id is None:
            raise RequestError("the job_id query parameter is required", 422)
        job = self.get(job_id)
        if job.job_type not in types:
            raise RequestError(
                f"job {job_id} is a {job.job_type} job; this endpoint needs a {' or '.join(types)} job", 400
            )
        if job.status != "running":
            why = f": {job.reason}" if job.reason else ""
            raise RequestError(f"job {job_id} is {job.status}{why}", 409)
        return job

    def live(self, job_type: str) -> Job | None:
        with self._lock:
            for j in self._jobs.values():
                if j.job_type == job_type and j.status in LIVE:
                    return j
        return None

    def all(self) -> list[Job]:
        with self._lock:
            return list(self._jobs.values())

    # ---- create ----
    def create(self, cfg: JobConfig) -> Job:
        """Validate ``cfg`` and register a pending job (nothing is built yet).

        Raises:
            RequestError: 400 on a bad config, 409 when a live job of the type exists.
        """
        lim = self.limits
        if cfg.job_type not in JOB_TYPES:
            raise RequestError(f"unknown job_type {cfg.job_type!r} (one of {JOB_TYPES})", 400)
        workers = {"training": lim.training_gpus, "sampling": lim.sampling_gpus, "log_prob": lim.log_prob_gpus}
        if workers[cfg.job_type] <= 0:
            flag = "--" + cfg.job_type.replace("_", "-") + "-gpus"
            raise RequestError(f"this server was started with {flag} 0; it cannot host a {cfg.job_type} job", 400)
        model = cfg.model_name or lim.default_model
        if not model:
            raise RequestError("model_name is required (the server has no --model default)", 400)
        mpath = Path(model).expanduser()
        if not (mpath / "config.json").is_file():
            raise RequestError(f"model_name {model!r} is not a local Hugging Face model folder (no config.json)", 400)
        device = job_device(lim, cfg)
        dtype = cfg.dtype or lim.dtype or ("bfloat16" if device.startswith("cuda") else "float32")
        resolve_dtype(dtype)
        if cfg.job_type == "training":
            if not cfg.checkpoint_path:
                raise RequestError("a training job needs checkpoint_path (where /save writes by default)", 400)
            try:
                Path(cfg.checkpoint_path).expanduser().mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise RequestError(
                    f"checkpoint_path {cfg.checkpoint_path!r} is not usable ({e.strerror})", 400
                ) from None
            try:
                TrainingConfigModel.model_validate(cfg.training_config or {}).settings()
            except RequestError:
                raise
            except Exception as e:  # pydantic.ValidationError
                raise RequestError(f"training_config: {_one_line(e)}", 422) from None
        with self._lock:
            live = [j for j in self._jobs.values() if j.job_type == cfg.job_type and j.status in LIVE]
            if live:
                raise RequestError(
                    f"a {cfg.job_type} job is already {live[0].status} (job {live[0].job_id}); destroy it first", 409
                )
            job = Job(self._next_id, cfg.job_type, str(mpath), cfg, device=device, dtype=dtype)
            self._next_id += 1
            if cfg.job_type == "training":
                job.checkpoint_root = Path(cfg.checkpoint_path).expanduser() / f"arctic_rl_job_{job.job_id}"
            self._jobs[job.job_id] = job
        return job

    def build(self, job: Job) -> None:
        """Build the engine of a pending job (blocking; call from a worker thread). Never raises."""
        cfg, lim = job.config, self.limits
        engine = None
        try:
            settings = EngineSettings(
                model_path=job.model_name,
                device=job.device,
                dtype=job.dtype,
                max_seq_len=cfg.max_seq_len or lim.max_seq_len,
                attn_implementation=cfg.attn_implementation or "sdpa",
                seed=int(cfg.seed),
            )
            if job.job_type == "training":
                ts = TrainingConfigModel.model_validate(cfg.training_config or {}).settings()
                job.checkpoint_root.mkdir(parents=True, exist_ok=True)
                engine = TrainingEngine(settings, ts)
            elif job.job_type == "sampling":
                kw = {**(cfg.vllm_config or {}), **(cfg.engine_kwargs or {})}
                rows = int(kw.pop("max_num_seqs", lim.max_batch_rows))
                ignored = sorted(k for k in kw if k not in ("max_model_len",))
                if ignored:
                    logger.info("sampling job %d: torch engine ignores engine kwargs %s", job.job_id, ignored)
                aic = cfg.arctic_inference_config or {}
                if isinstance(aic, dict) and (
                    (aic.get("zorro_inference") or {}).get("enable")
                    or (aic.get("speculative_decoding") or {}).get("model")
                ):
                    logger.warning(
                        "sampling job %d: arctic_inference_config asks for FCA / speculative decoding; the CPU torch "
                        "engine has neither and ignores it",
                        job.job_id,
                    )
                engine = SamplingEngine(settings, max_batch_rows=max(1, rows))
            else:
                engine = ForwardEngine(settings)
        except Exception as e:  # noqa: BLE001 - any build failure becomes the job's reason
            logger.exception("job %d (%s) failed to initialize", job.job_id, job.job_type)
            if engine is not None:
                engine.close()
            engine = None
            gc.collect()
            with self._lock:
                job.set("failed", f"initialization failed: {_one_line(e)}")
            return
        with self._lock:
            if job.destroy_requested:
                engine.close()
                job.set("terminated", "destroyed by a client while initializing")
                return
            job.engine = engine
            job.set("running")
        logger.info("job %d (%s) running: %s on %s/%s", job.job_id, job.job_type, job.model_name, job.device, job.dtype)

    # ---- destroy ----
    def destroy(self, job: Job, reason: str, lock_timeout: float | None = None) -> None:
        """Mark ``job`` terminated and release its engine (idempotent).

        Waits up to ``lock_timeout`` (default ``engine_timeout_s``) for a running engine call; past that the engine
        reference is dropped anyway and the call finishes on its own.
        """
        with self._lock:
            if job.status == "pending":
                job.destroy_requested = True
                return
            if job.status == "running":
                job.set("terminated", reason)
            elif job.status == "failed":
                job.set("terminated", f"{reason} (it had failed: {job.reason})")
            engine, job.engine = job.engine, None
        if engine is not None:
            if isinstance(engine, SamplingEngine):
                engine.abort.set()
            wait = self.limits.engine_timeout_s if lock_timeout is None else lock_timeout
            acquired = job.lock.acquire(timeout=wait)
            try:
                engine.close()
            finally:
                if acquired:
                    job.lock.release()
            gc.collect()

    def shutdown(self) -> None:
        for job in self.all():
            self.destroy(job, "server shut down", lock_timeout=5.0)


def job_device(lim: ServerLimits, cfg: JobConfig) -> str:
    """The device of a new job: the server's placement (one device per job, :mod:`.placement`) unless the job
    names ``cpu`` or ``cuda:N`` itself; a job asking for more than one GPU is refused (400).
    """
    import torch

    from .placement import ONE_DEVICE, PlacementError, check_device, place_jobs

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    requested = {"training": lim.training_gpus, "sampling": lim.sampling_gpus, "log_prob": lim.log_prob_gpus}
    try:
        asked = cfg.device or "auto"
        if asked in ("auto", "cuda"):
            device = place_jobs(requested, device=lim.device, device_count=count, overrides=lim.job_devices)[
                cfg.job_type
            ]
            if asked == "cuda" and not device.startswith("cuda"):
                device = check_device("cuda", count, f"{cfg.job_type} job")
        else:
            device = check_device(asked, count, f"{cfg.job_type} job")
    except PlacementError as e:
        raise RequestError(str(e), 400) from None
    if (cfg.num_devices or 1) > 1 and device.startswith("cuda"):
        raise RequestError(f"the {cfg.job_type} job asks for num_devices={cfg.num_devices}: {ONE_DEVICE}", 400)
    return device


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}"[:2000]


def torch_cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def torch_cuda_device_name(device: str) -> str:
    """GPU model name of ``device`` (e.g. "NVIDIA H200"), used by clients for MFU."""
    import torch

    return torch.cuda.get_device_name(torch.device(device))
