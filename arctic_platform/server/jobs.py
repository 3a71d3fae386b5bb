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
"""Job registry and lifecycle of the embedded Arctic RL server (docs/arctic-rl-protocol.md §3).

* States (:class:`arctic_platform.protocol.JobStatus`, the reference's spelling): ``PENDING`` -> ``RUNNING`` ->
  ``FAILED`` / ``TERMINATED``, each with a human-readable ``reason`` (non-empty when failed or terminated). Ids are
  ints from 1, never reused.
* One live (pending or running) job per ``job_type``; a second ``/initialize`` of a live type gets 409. A failed or
  terminated record stays visible in ``/status`` but never blocks a new job. Destroying a ``PENDING`` job frees its
  slot at once: the build is abandoned and its engine discarded when it finishes.
* Validation (type, server worker counts, model path, checkpoint path, dtype, device, ``ds_config``) happens before
  anything is built (400 / 422 naming the key). The build runs in a worker thread; on any exception everything built
  so far is released and the job becomes ``FAILED`` with the exception as its reason, so a corrected ``/initialize``
  succeeds without a restart.
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
from typing import Any

from ..protocol import JOB_TYPES, LIVE_STATES, DsConfigError, JobConfig, JobStatus, read_ds_config
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


def _ext(cfg: JobConfig, key: str) -> Any:
    return (cfg.extensions or {}).get(key)


_DS_WORKER_KEYS = ("attn_implementation", "use_liger", "enable_gradient_checkpointing")


def training_settings(cfg: JobConfig) -> TrainingSettings:
    """``TrainingSettings`` from ``cfg.ds_config`` (422 naming a key the torch engine cannot honour)."""
    if cfg.training_config:
        raise RequestError(
            "training_config is not read by this server; send optimizer, gradient_clipping and scheduler in ds_config",
            422,
        )
    try:
        kw = read_ds_config(cfg.ds_config)
    except DsConfigError as e:
        raise RequestError(str(e), 422) from None
    kw.pop("dtype", None)
    return TrainingSettings(**kw)


def _check_worker_config(cfg: JobConfig) -> None:
    wc = cfg.ds_worker_config or {}
    for k, v in wc.items():
        if k not in _DS_WORKER_KEYS:
            raise RequestError(f"ds_worker_config.{k} is not read by this server (known: {_DS_WORKER_KEYS})", 422)
        if k == "use_liger" and v:
            raise RequestError("ds_worker_config.use_liger=true: the torch engine has no Liger kernels", 422)


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
    status: str = JobStatus.PENDING
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
            # The reference's file-sync target. This server syncs by an in-process copy and never writes it.
            "sync_path": str(self.checkpoint_root / "weight_sync.pt") if self.checkpoint_root else None,
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
        if job.status != JobStatus.RUNNING:
            why = f": {job.reason}" if job.reason else ""
            raise RequestError(f"job {job_id} is {job.status}{why}", 409)
        return job

    def live(self, job_type: str) -> Job | None:
        with self._lock:
            for j in self._jobs.values():
                if j.job_type == job_type and j.status in LIVE_STATES:
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
        try:
            ds_dtype = read_ds_config(cfg.ds_config).get("dtype")
        except DsConfigError as e:
            raise RequestError(str(e), 422) from None
        ext_dtype = _ext(cfg, "dtype")
        if ext_dtype and ds_dtype and ext_dtype != ds_dtype:
            raise RequestError(f"extensions.dtype {ext_dtype!r} contradicts ds_config ({ds_dtype} enabled)", 422)
        dtype = ext_dtype or ds_dtype or lim.dtype or ("bfloat16" if device.startswith("cuda") else "float32")
        resolve_dtype(dtype)
        _check_worker_config(cfg)
        msl = _ext(cfg, "max_seq_len")
        if msl is not None and (isinstance(msl, bool) or not isinstance(msl, int) or msl < 1):
            raise RequestError(f"extensions.max_seq_len must be a positive int, got {msl!r}", 422)
        if cfg.job_type == "training":
            if not cfg.checkpoint_path:
                raise RequestError("a training job needs checkpoint_path (where /save writes by default)", 400)
            try:
                Path(cfg.checkpoint_path).expanduser().mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise RequestError(
                    f"checkpoint_path {cfg.checkpoint_path!r} is not usable ({e.strerror})", 400
                ) from None
            ts = training_settings(cfg)
            if ts.lr_scheduler_type == "cosine" and not ts.total_steps:
                raise RequestError("ds_config.scheduler.params.total_num_steps is required for WarmupCosineLR", 422)
        with self._lock:
            live = [j for j in self._jobs.values() if j.job_type == cfg.job_type and j.status in LIVE_STATES]
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
                max_seq_len=_max_seq_len(cfg, lim),
                attn_implementation=(cfg.ds_worker_config or {}).get("attn_implementation") or "sdpa",
                seed=int(cfg.seed),
            )
            if job.job_type == "training":
                ts = training_settings(cfg)
                job.checkpoint_root.mkdir(parents=True, exist_ok=True)
                engine = TrainingEngine(settings, ts)
                if (cfg.ds_worker_config or {}).get("enable_gradient_checkpointing"):
                    engine.model.gradient_checkpointing_enable()
            elif job.job_type == "sampling":
                kw = dict(cfg.vllm_config or {})
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
                if not job.destroy_requested:  # a destroyed (abandoned) build stays TERMINATED
                    job.set(JobStatus.FAILED, f"initialization failed: {_one_line(e)}")
            return
        with self._lock:
            abandoned = job.destroy_requested
            if not abandoned:
                job.engine = engine
                job.set(JobStatus.RUNNING)
        if abandoned:  # destroyed while building: the slot was freed at once; discard the result
            engine.close()
            gc.collect()
            logger.info("job %d (%s): build finished after destroy; result discarded", job.job_id, job.job_type)
            return
        logger.info("job %d (%s) running: %s on %s/%s", job.job_id, job.job_type, job.model_name, job.device, job.dtype)

    # ---- destroy ----
    def destroy(self, job: Job, reason: str, lock_timeout: float | None = None) -> None:
        """Mark ``job`` terminated and release its engine (idempotent).

        Waits up to ``lock_timeout`` (default ``engine_timeout_s``) for a running engine call; past that the engine
        reference is dropped anyway and the call finishes on its own.
        """
        with self._lock:
            if job.status == JobStatus.PENDING:
                # The build is abandoned: the slot is free now; build() discards the engine when it finishes.
                job.destroy_requested = True
                job.set(JobStatus.TERMINATED, f"{reason} while initializing (build abandoned)")
                return
            if job.status == JobStatus.RUNNING:
                job.set(JobStatus.TERMINATED, reason)
            elif job.status == JobStatus.FAILED:
                job.set(JobStatus.TERMINATED, f"{reason} (it had failed: {job.reason})")
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


def _max_seq_len(cfg: JobConfig, lim: ServerLimits) -> int:
    msl = _ext(cfg, "max_seq_len")
    if msl is None and cfg.job_type == "sampling":
        msl = (cfg.vllm_config or {}).get("max_model_len")
    return int(msl or lim.max_seq_len)


def job_device(lim: ServerLimits, cfg: JobConfig) -> str:
    """The device of a new job: the server's placement (one device per job, :mod:`.placement`) unless the job
    names ``cpu`` or ``cuda:N`` itself; a job asking for more than one GPU is refused (400).
    """
    import torch

    from .placement import ONE_DEVICE, PlacementError, check_device, place_jobs

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    requested = {"training": lim.training_gpus, "sampling": lim.sampling_gpus, "log_prob": lim.log_prob_gpus}
    try:
        asked = str(_ext(cfg, "device") or "auto")
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
