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
"""The ``arctic`` RemoteBackend: verl config -> Arctic RL client, jobs, weight sync, checkpoints.

Light at import (no torch, ray or httpx): ``register.py`` imports this module during ``import verl``.

On the driver, :meth:`ArcticRemoteBackend.from_config` validates what the backend can honour, starts the embedded
server (``backend.type=local``) or attaches to one (``onprem``), and creates the training, sampling and reference
jobs. Forwarder workers and rollout servers re-attach with the handle and never create or destroy jobs.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Any, Optional

from omegaconf import DictConfig, OmegaConf

from verl.remote_backend import RemoteBackend

from .options import arctic_options, lr_scheduler_type, optimizer_steps_per_training_step, per_gpu, verl_defaults
from .settings import check_settings, placement_note
from .settings import settings_notes as _settings_notes

if TYPE_CHECKING:
    from arctic_platform.backend_profile import BackendProfile

logger = logging.getLogger(__name__)

BACKEND_TYPES = ("local", "onprem", "cortex")


class ArcticConfigError(ValueError):
    """A verl configuration the arctic backend cannot honour (raised at start-up, naming the setting)."""


def coalesce_settings(opts: DictConfig) -> tuple[int, float]:
    """``(max_prompts, window_s)`` of the /generate coalescer from ``remote_backend.arctic.sampling``.

    ``max_prompts_per_request: null`` means 64 on the embedded server (``backend.type=local``: its torch engine runs
    concurrent requests as one static batch anyway) and 1 (off) elsewhere (a continuous-batching vLLM server returns
    each sequence when it is done; coalescing would make short ones wait for long ones).
    """
    sampling = opts.sampling
    max_prompts = sampling.get("max_prompts_per_request", None)
    if max_prompts is None:
        max_prompts = 64 if opts.backend.type == "local" else 1
    window_ms = float(sampling.get("coalesce_window_ms", 5.0))
    if int(max_prompts) < 1 or window_ms < 0:
        raise ArcticConfigError(
            "remote_backend.arctic.sampling: max_prompts_per_request must be >= 1 and coalesce_window_ms >= 0 "
            f"(got {max_prompts}, {window_ms})"
        )
    return int(max_prompts), window_ms / 1000.0


def validate_arctic_config(main_config: DictConfig, opts: Optional[DictConfig] = None) -> DictConfig:
    """Reject backend options the arctic backend cannot honour, naming the setting. Returns the merged options.

    The verl settings themselves (loss, optimizer, batching, rollout, ...) are checked against the backend's
    capability profile by :func:`settings_refusals` (:mod:`.settings`).
    """
    opts = opts if opts is not None else arctic_options(main_config)
    backend_type = opts.backend.type
    if backend_type not in BACKEND_TYPES:
        raise ArcticConfigError(
            f"remote_backend.arctic.backend.type={backend_type!r} is not supported; use one of {list(BACKEND_TYPES)}"
        )
    if backend_type == "onprem" and not opts.backend.url:
        raise ArcticConfigError("remote_backend.arctic.backend.type=onprem needs remote_backend.arctic.backend.url")
    coalesce_settings(opts)
    if main_config.algorithm.adv_estimator == "gae" or main_config.critic.get("enable", False):
        raise ArcticConfigError(
            "algorithm.adv_estimator=gae needs a critic, which the arctic backend does not run; use grpo (or another "
            "critic-free estimator)"
        )
    async_on = bool(((main_config.get("remote_backend", None) or {}).get("async_rollout", None) or {}).get("enable"))
    if opts.get("colocate", False) and async_on:
        raise ArcticConfigError(
            "remote_backend.arctic.colocate=true with remote_backend.async_rollout.enable=true: a colocated sampler "
            "sleeps while the policy trains, so it cannot sample the next batch meanwhile; turn one of them off"
        )
    shared = opts.shared_filesystem if opts.shared_filesystem is not None else backend_type != "cortex"
    if not shared and (main_config.trainer.save_freq > 0 or main_config.trainer.resume_mode != "disable"):
        raise ArcticConfigError(
            "trainer.save_freq > 0 or trainer.resume_mode != disable saves/loads backend checkpoints under "
            "trainer.default_local_dir, but remote_backend.arctic.shared_filesystem is false for this backend; "
            "set trainer.save_freq=-1 and trainer.resume_mode=disable, or use a backend that shares the filesystem"
        )
    for key in ("max_prompt_length", "max_response_length"):
        if int(main_config.data[key]) <= 0:
            raise ArcticConfigError(f"data.{key} must be positive")
    return opts


def static_profile(opts: DictConfig, *, timeout: float = 5.0) -> tuple[BackendProfile, str]:
    """The backend's profile without creating anything, and where it came from.

    ``local``: the embedded server of this environment (the one the client will start); ``onprem``: the server's
    ``/health`` (Arctic-Platform main's profile when it advertises none; when it cannot be reached, also Arctic-Platform
    main's, the strictest known, so a dry run errs on the side of refusing); ``cortex``: the fixed Cortex profile
    (SnowAPI has no ``/health``; :data:`arctic_platform.backend_profile.CORTEX`).
    """
    from arctic_platform.backend_profile import ARCTIC_PLATFORM_MAIN, CORTEX, profile_from_health

    if opts.backend.type == "local":
        from arctic_platform.server.capabilities import server_profile

        return server_profile(), "the embedded server of this environment"
    if opts.backend.type == "onprem":
        import httpx

        url = str(opts.backend.url).rstrip("/")
        try:
            reply = httpx.get(f"{url}/health", timeout=timeout, trust_env=False)
            reply.raise_for_status()
            return profile_from_health(reply.json()), f"{url}/health"
        except Exception as e:  # unreachable: check against the strictest known profile
            return ARCTIC_PLATFORM_MAIN, f"{url} unreachable ({type(e).__name__}); assumed Arctic-Platform main"
    return CORTEX, "cortex (fixed: SnowAPI has no /health)"


def settings_refusals(main_config: DictConfig, opts: DictConfig, profile: BackendProfile) -> list[str]:
    """Every verl setting the backend with ``profile`` cannot honour, one message each (:mod:`.settings`)."""
    return check_settings(main_config, opts, profile)


def settings_notes(main_config: DictConfig, opts: DictConfig, profile: BackendProfile) -> list[str]:
    """Start-up lines for settings the backend handles differently without changing the training."""
    return _settings_notes(main_config, opts, profile)


def refuse(refusals: list[str], profile: BackendProfile) -> None:
    """Raise :class:`ArcticConfigError` listing ``refusals`` (nothing when empty)."""
    if refusals:
        lines = "\n".join(f"  - {r}" for r in refusals)
        raise ArcticConfigError(
            f"{len(refusals)} setting(s) cannot be honoured by {profile.name} (remote_backend=arctic):\n{lines}"
        )


def batch_sizing(main_config: DictConfig, opts: DictConfig) -> dict[str, Any]:
    """DeepSpeed batch sizing from verl's mini / micro batch sizes, as the reference adapter derives it.

    ``train_batch_size`` = ``ppo_mini_batch_size`` x ``rollout.n`` sequences (one optimizer step per mini-batch);
    ``micro_batch_size`` = ``ppo_micro_batch_size_per_gpu`` (None with ``use_dynamic_bsz``: token budgets decide);
    the client derives ``gradient_accumulation_steps`` = train_batch_size // (micro x training_gpus).
    """
    arr = main_config.actor_rollout_ref
    actor = arr.actor
    gpus = int(opts.training_gpus)
    micro = None if actor.get("use_dynamic_bsz", False) else per_gpu(actor, "ppo_micro_batch_size", gpus)
    sp = actor.get("ulysses_sequence_parallel_size", None) or (actor.get("fsdp_config", None) or {}).get(
        "ulysses_sequence_parallel_size", 1
    )
    return {
        "micro_batch_size": micro,
        "train_batch_size": int(actor.ppo_mini_batch_size) * int(arr.rollout.n),
        "sequence_parallel_size": int(sp or 1),
    }


def ds_worker_config(main_config: DictConfig) -> dict[str, Any]:
    """``ds_worker_config``: attention implementation (``model.override_config``; None = the server's default, which
    the client fills in from the backend profile), gradient checkpointing and Liger, as the reference adapter sends."""
    model = main_config.actor_rollout_ref.model
    override = model.get("override_config", None) or {}
    return {
        "use_liger": bool(model.get("use_liger", False)),
        "enable_gradient_checkpointing": bool(model.get("enable_gradient_checkpointing", False)),
        "attn_implementation": override.get("attn_implementation", None),
    }


def _engine_args(engine: str) -> list[str]:
    """``--sampling-engine`` for the local server; ``auto`` passes nothing (the server's default decides)."""
    if engine not in ("auto", "vllm", "torch"):
        raise ArcticConfigError(f"remote_backend.arctic.backend.sampling_engine={engine!r}: one of auto, vllm, torch")
    return [] if engine == "auto" else ["--sampling-engine", engine]


def sampler_on_cpu(device: str, *, local: bool) -> bool:
    """Whether the sampling job will run on CPU: ``remote_backend.arctic.device=cpu``, or ``auto`` with a local
    server on a host without CUDA (the server's own ``auto`` rule). A remote server's ``auto`` is its own choice:
    False here (an embedded server on CPU then refuses a key it cannot honour by name)."""
    if device == "cpu":
        return True
    if device != "auto" or not local:
        return False
    import torch

    return not torch.cuda.is_available()


def lora_settings(model: DictConfig) -> Optional[dict[str, Any]]:
    """``extensions.lora`` from verl's FSDP LoRA keys (``model.lora_rank``, ``lora_alpha``, ``target_modules``, ...).

    None without LoRA. What the backend cannot honour (Megatron's ``model.lora.rank``, a saved adapter to start
    from, LoRA on a backend without it) is refused by :mod:`.settings` before any job exists.
    """
    rank = int(model.get("lora_rank", 0) or 0)
    if rank == 0:
        return None

    def plain(v):
        return OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v

    return {
        "rank": rank,
        "alpha": plain(model.get("lora_alpha", 16)),
        "target_modules": plain(model.get("target_modules", "all-linear")),
        "exclude_modules": plain(model.get("exclude_modules", None)),
        "target_parameters": plain(model.get("target_parameters", None)),
    }


def verl_lr_schedule(main_config: DictConfig) -> dict[str, Any]:
    """``extensions.lr_schedule``: verl's own schedule keys, counted in training steps (one tick per update_actor).

    ``total_training_steps`` is ``trainer.total_training_steps`` when given; otherwise verl derives it from the
    dataloader after the backend exists, and the forwarder sends it with its first ``/step``.
    """
    optim = main_config.actor_rollout_ref.actor.optim
    warmup = optim.get("lr_warmup_steps", -1)
    return {
        "lr_scheduler_type": lr_scheduler_type(optim),
        "lr_warmup_steps": int(warmup) if warmup is not None else -1,
        "lr_warmup_steps_ratio": float(optim.get("lr_warmup_steps_ratio", 0.0) or 0.0),
        "total_training_steps": main_config.trainer.get("total_training_steps") or None,
        "min_lr_ratio": float(optim.get("min_lr_ratio", 0.0) or 0.0),
        "num_cycles": float(optim.get("num_cycles", 0.5)),
        "zero_indexed_step": bool(optim.get("zero_indexed_step", True)),
    }


def build_client_config(main_config: DictConfig, opts: DictConfig):
    """The :class:`arctic_platform.client.ArcticRLClientConfig` for this verl config."""
    from arctic_platform.client import ArcticRLClientConfig, CortexConfig, LocalConfig, OnPremConfig

    arr = main_config.actor_rollout_ref
    optim = arr.actor.optim
    k = optimizer_steps_per_training_step(main_config)
    total_training_steps = main_config.trainer.get("total_training_steps") or None
    warmup = int(optim.get("lr_warmup_steps", -1) or -1)
    if warmup < 0:
        ratio = float(optim.get("lr_warmup_steps_ratio", 0.0) or 0.0)
        warmup = int(ratio * total_training_steps) if total_training_steps else 0
    clip = optim.get("clip_grad", None)
    if clip is None:
        clip = arr.actor.get("grad_clip", None)
    training_sizing = batch_sizing(main_config, opts)
    backend_type = opts.backend.type
    if backend_type == "local":
        backend = LocalConfig(
            port=int(opts.backend.port),
            startup_timeout=float(opts.backend.startup_timeout),
            threads=int(opts.backend.threads),
            log_file=opts.backend.log_file,
            extra_env={str(k_): str(v) for k_, v in (opts.backend.extra_env or {}).items()},
            token_env_var=opts.backend.token_env_var,
            server_args=(["--sampling-process"] if opts.backend.get("sampling_process", False) else [])
            + _engine_args(str(opts.backend.get("sampling_engine", "auto"))),
        )
    elif backend_type == "onprem":
        backend = OnPremConfig(url=opts.backend.url, token_env_var=opts.backend.token_env_var)
    else:
        backend = CortexConfig.from_env()
    from .vllm_config import CPU_NOT_SENT, arctic_inference_flags, sampling_vllm_config

    engine_kwargs = OmegaConf.to_container(opts.sampling.engine_kwargs, resolve=True) or {}
    zorro = bool(opts.rollout.zorro_inference.enable)
    spec_model = opts.rollout.speculative_decoding.model or ""
    # FCA / zorro reach a reference server where it reads them: cudagraph_mode in vllm_config, use_fca through
    # arctic_inference_config (docs/arctic-rl-protocol.md §7).
    cpu = sampler_on_cpu(str(opts.device), local=backend_type == "local")
    vllm_config = sampling_vllm_config(engine_kwargs, arr.rollout, zorro=zorro, cpu=cpu)
    if cpu:
        for key, why in CPU_NOT_SENT.items():
            if arr.rollout.get(key, None) and key not in engine_kwargs:
                logger.info(f"arctic backend: actor_rollout_ref.rollout.{key} is not sent to a CPU sampler: {why}")
    inference_flags = arctic_inference_flags(zorro, spec_model)
    seed = opts.seed if opts.seed is not None else arr.rollout.get("seed", 42)
    return ArcticRLClientConfig(
        model_name=str(opts.model_path or arr.model.path),
        seed=int(seed),
        dtype=opts.dtype,
        device=str(opts.device),
        max_seq_len=int(main_config.data.max_prompt_length) + int(main_config.data.max_response_length),
        training_gpus=int(opts.training_gpus),
        sampling_gpus=int(opts.sampling_gpus),
        log_prob_gpus=int(opts.log_prob_gpus),
        job_ready_timeout=float(opts.timeouts.job_ready),
        request_timeout=float(opts.timeouts.request),
        connect_timeout=float(opts.timeouts.connect),
        training={
            "optimizer": {
                "lr": float(optim.lr),
                "betas": tuple(float(b) for b in optim.get("betas", (0.9, 0.999))),
                "weight_decay": float(optim.get("weight_decay", 0.01)),
                "eps": float(optim.get("eps", 1e-8) or 1e-8),
            },
            "grad_clip": float(clip) if clip is not None else None,
            "lr_scheduler_type": lr_scheduler_type(optim),
            # verl counts warmup and horizon in training steps; the backend counts optimizer steps
            "warmup_steps": warmup * k,
            "total_steps": total_training_steps * k if total_training_steps else None,
            "min_lr_ratio": float(optim.get("min_lr_ratio", 0.0) or 0.0),
            "checkpoint_path": os.path.abspath(main_config.trainer.default_local_dir),
            **training_sizing,
            "deepspeed": OmegaConf.to_container(opts.train.deepspeed, resolve=True) or {},
            "ds_worker_config": ds_worker_config(main_config),
            "full_determinism": bool(opts.train.determinism.full),
            "cuda_ipc": bool(opts.weight_sync.cuda_ipc),
            "low_memory": bool(opts.weight_sync.low_memory),
            "lr_schedule": verl_lr_schedule(main_config),
            "lora": lora_settings(arr.model),
        },
        log_prob={
            "micro_batch_size": per_gpu(arr.ref, "log_prob_micro_batch_size", int(opts.log_prob_gpus)),
            "zero_stage": opts.log_prob.get("zero_stage", None),
        },
        sampling={
            "vllm_config": vllm_config,
            "arctic_inference_config": inference_flags,
            "prompt_format": str(opts.sampling.get("prompt_format", "auto")),
            "max_retokenize_mismatch_rate": float(opts.sampling.get("max_retokenize_mismatch_rate", 0.0)),
        },
        backend=backend,
    )


class ArcticRemoteBackend(RemoteBackend):
    """verl's handle on an Arctic RL backend (one training, one sampling and an optional reference job)."""

    def __init__(self, main_config: DictConfig, handle: dict[str, Any], owner_client=None):
        self.main_config = main_config
        self._handle = dict(handle)
        self._owner_client = owner_client  # sync client that created the jobs (driver only)
        self._async_clients: dict[int, Any] = {}
        self._client_locks: dict[int, asyncio.Lock] = {}
        self._num_gpus = int(handle.get("num_gpus", 0))

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_config(cls, main_config: DictConfig, *, handle: Optional[dict[str, Any]] = None) -> ArcticRemoteBackend:
        if handle is not None:
            return cls(main_config, handle)
        opts = validate_arctic_config(main_config)
        client_config = build_client_config(main_config, opts)
        from arctic_platform.client import ArcticRLClient
        from arctic_platform.protocol import job_gpu_counts

        placement = placement_note(main_config, verl_defaults())
        if placement:  # one line, before the backend is asked anything
            logger.warning(f"arctic backend: {placement}")
        client = ArcticRLClient(client_config)
        cortex = opts.backend.type == "cortex"
        try:
            # what the backend honours is known once it answers /health (cortex: fixed): refuse before any job
            client.connect()
            refuse(settings_refusals(main_config, opts, client.backend_profile), client.backend_profile)
            for note in settings_notes(main_config, opts, client.backend_profile):
                logger.warning(f"arctic backend: {note}")
            if cortex:
                # what the create body has no field for (client config terms; the client refuses it too)
                from arctic_platform.client.cortex_body import cortex_refusals

                refuse([f"remote_backend.arctic: {r}" for r in cortex_refusals(client_config)], client.backend_profile)
                logger.warning(
                    "arctic backend: cortex has no /forward: verl's old log-probs are zeros the update never reads "
                    "(or the rollout's, in bypass mode), so actor/entropy reads 0"
                )
            # The sampling job's engine keeps building while verl starts its workers (a vLLM start is ~40 s on CPU,
            # minutes on a GPU node); the first process to use it (the weight sync before step 1) waits for it in its
            # re-attach, and a failed build raises there with the server's reason.
            client.start(wait_for=("training", "log_prob"))
            handle = dict(client.reconnect_handle())
            # Cortex reports no device: its sub-jobs run on the GPUs the create asked for
            training = {} if cortex else client.job_info(client.training_job_id)
        except BaseException:
            client.close()
            raise
        on_gpu = cortex or str(training.get("device", "cpu")).startswith("cuda")
        gpus = sum(job_gpu_counts(client_config).values())
        handle["num_gpus"] = gpus if on_gpu else 0
        handle["training_gpus"] = client_config.training_gpus if on_gpu else 0
        handle["device_name"] = training.get("device_name", "")
        handle["profile"] = client.backend_profile.model_dump(mode="json")
        logger.info(f"arctic backend ready: {client!r}")
        return cls(main_config, handle, owner_client=client)

    def reconnect_handle(self) -> dict[str, Any]:
        return dict(self._handle)

    @property
    def profile(self) -> BackendProfile:
        """What the backend honours (read from its /health when the driver created the jobs)."""
        from arctic_platform.backend_profile import ARCTIC_PLATFORM_MAIN, BackendProfile

        p = self._handle.get("profile")
        return BackendProfile.model_validate(p) if isinstance(p, dict) else ARCTIC_PLATFORM_MAIN

    async def client(self):
        """An :class:`AsyncArcticRLClient` re-attached to this backend's jobs (one per event loop; never owns jobs)."""
        from arctic_platform.client import AsyncArcticRLClient

        key = id(asyncio.get_running_loop())
        client = self._async_clients.get(key)
        if client is not None:
            return client
        async with self._client_locks.setdefault(key, asyncio.Lock()):  # concurrent generate() calls share one
            client = self._async_clients.get(key)
            if client is None:
                client = AsyncArcticRLClient.from_handle(self._handle)
                await client.start()  # re-attach: checks health and the jobs, creates nothing
                self._async_clients[key] = client
        return client

    # ------------------------------------------------------------------ RemoteBackend API

    def destroy(self) -> None:
        """Owner (driver): destroy the jobs it created and stop a local server. Re-attached: nothing to destroy."""
        client, self._owner_client = self._owner_client, None
        if client is not None:
            client.close()

    async def aclose(self) -> None:
        """Close this process's HTTP connections (never destroys jobs)."""
        clients, self._async_clients = list(self._async_clients.values()), {}
        for c in clients:
            await c.close()

    async def update_weights(self, policy_version: Optional[int] = None) -> dict[str, Any]:
        """Training -> sampling weight copy; the sampler serves the new weights once this returns."""
        return await (await self.client()).sync_weights(policy_version=policy_version)

    async def save_checkpoint(
        self,
        path: Optional[str] = None,
        step: Optional[int] = None,
        save_total_limit: Optional[int] = None,
        export_hf: bool = False,
    ) -> dict[str, Any]:
        return await (await self.client()).save(
            path=path, step=step, save_total_limit=save_total_limit, export_hf=export_hf
        )

    def requires_single_forwarder(self) -> bool:
        return True  # the backend owns its parallelism; verl runs one CPU forwarder

    def num_gpus(self) -> int:
        """GPUs the backend computes on (0 for a CPU server); verl normalises throughput by max(1, this)."""
        return self._num_gpus
