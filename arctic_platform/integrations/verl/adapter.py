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
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

from omegaconf import DictConfig, OmegaConf

from verl.remote_backend import RemoteBackend

from .options import ArcticOptions, arctic_options, read_options
from .platform_keys import translate
from .refusal import ArcticConfigError, Refusal, shown
from .settings import check_settings, placement_note
from .settings import settings_notes as _settings_notes
from .verl_config import actor_config, optimizer_steps_per_training_step, per_gpu, rollout_config, training_spec

if TYPE_CHECKING:
    from arctic_platform.backend_profile import BackendProfile

logger = logging.getLogger(__name__)

__all__ = [
    "ArcticConfigError",
    "ArcticRemoteBackend",
    "BackendSource",
    "arctic_options",
    "build_client_config",
    "check_config",
    "coalesce_settings",
    "refuse",
    "settings_notes",
    "settings_refusals",
    "static_profile",
    "validate_arctic_config",
]


def coalesce_settings(opts: ArcticOptions) -> tuple[int, float]:
    """``(max_prompts, window_s)`` of the /generate coalescer from ``remote_backend.arctic.sampling``.

    ``max_prompts_per_request: null`` means 64 on the embedded server (``backend.type=local``: its torch engine runs
    concurrent requests as one static batch anyway) and 1 (off) elsewhere (a continuous-batching vLLM server returns
    each sequence when it is done; coalescing would make short ones wait for long ones). The options model keeps both
    in range.
    """
    sampling = opts.sampling
    max_prompts = sampling.max_prompts_per_request
    if max_prompts is None:
        max_prompts = 64 if opts.backend.type == "local" else 1
    return int(max_prompts), float(sampling.coalesce_window_ms) / 1000.0


def validate_arctic_config(main_config: DictConfig, opts: Optional[ArcticOptions] = None) -> ArcticOptions:
    """The run's ``remote_backend.arctic`` options, after the checks of the options themselves.

    Raises:
        ArcticConfigError: every invalid option and every refusal of the backend block (:func:`check_config` runs
            these with the verl settings, all at once).
    """
    return _validated(main_config, opts)[0]


def _validated(main_config: DictConfig, opts: Optional[ArcticOptions] = None):
    """:func:`validate_arctic_config` and the translation of Arctic-Platform's keys it ran (whose ``retarget``
    names a later refusal in the spelling the script used)."""
    translation = translate(main_config)  # Arctic-Platform's plugin keys (a no-op once main_ppo's check ran it)
    refusals = list(translation.refusals)
    if opts is None:
        opts, more = read_options(main_config)
        refusals += more
    from arctic_platform.backend_profile import ARCTIC_PLATFORM_MAIN

    from .settings.checks import backend_options
    from .settings.model import SettingsContext

    refusals += backend_options(SettingsContext(main_config, opts, ARCTIC_PLATFORM_MAIN))
    refusals = [translation.retarget(r) for r in refusals]
    if refusals:
        raise ArcticConfigError(_header(refusals, "the arctic backend's options", None), refusals)
    return opts, translation


class BackendSource(NamedTuple):
    """The profile the start-up checks run against, where it came from, and whether the server answered."""

    profile: BackendProfile
    source: str
    reachable: bool = True


def static_profile(opts: ArcticOptions, *, timeout: float = 5.0) -> BackendSource:
    """The backend's profile without creating anything, and where it came from.

    ``local``: the embedded server of this environment (the one the client will start); ``onprem``: the server's
    ``/health`` (Arctic-Platform main's profile when it advertises none); when it cannot be reached, Arctic-Platform
    main's, the strictest known, with ``reachable`` False (:func:`check_config` refuses that too, naming it);
    ``cortex``: the fixed Cortex profile (SnowAPI has no ``/health``; :data:`arctic_platform.backend_profile.CORTEX`).
    """
    from arctic_platform.backend_profile import ARCTIC_PLATFORM_MAIN, CORTEX, profile_from_health

    if opts.backend.type == "local":
        from arctic_platform.server.capabilities import server_profile

        return BackendSource(server_profile(), "the embedded server of this environment")
    if opts.backend.type == "onprem" and opts.backend.url:
        import httpx

        url = str(opts.backend.url).rstrip("/")
        try:
            reply = httpx.get(f"{url}/health", timeout=timeout, trust_env=False)
            reply.raise_for_status()
            return BackendSource(profile_from_health(reply.json()), f"{url}/health")
        except Exception as e:  # unreachable: check against the strictest known profile, and say so
            return BackendSource(
                ARCTIC_PLATFORM_MAIN,
                f"{url} not reached ({type(e).__name__}: {' '.join(str(e).split())[:160]}); Arctic-Platform main's "
                "profile assumed",
                reachable=False,
            )
    return BackendSource(CORTEX, "cortex (fixed: SnowAPI has no /health)")


def _unreachable(opts: ArcticOptions, src: BackendSource) -> Refusal:
    return Refusal(
        shown("remote_backend.arctic.backend.url", opts.backend.url),
        "the Arctic RL server",
        f"did not answer /health ({src.source.split('; ')[0]}), so the other lines are checked against "
        f"{src.profile.name}'s profile, assumed",
        "start the server, or fix the URL",
    )


def settings_refusals(main_config: DictConfig, opts: ArcticOptions, profile: BackendProfile) -> list[Refusal]:
    """Every verl setting the backend with ``profile`` cannot honour, one line each (:mod:`.settings`), then the
    rollout parallelism and job sizes its sampler and GPUs cannot honour (:mod:`.node`): the sampler of the embedded
    server this node would start, only when that server is the profile checked against (another profile, e.g.
    ``compose_check --profile arctic-platform-main`` or a server that did not answer, is a server sizing its own
    engines)."""
    from arctic_platform.backend_profile import EMBEDDED_NAME

    from .node import SamplerView, node_refusals, sampler_view

    view = sampler_view(opts, profile.name) if profile.name == EMBEDDED_NAME else SamplerView(profile.name, None)
    return check_settings(main_config, opts, profile) + node_refusals(main_config, opts, view)


def settings_notes(main_config: DictConfig, opts: ArcticOptions, profile: BackendProfile) -> list[str]:
    """Start-up lines for settings the backend handles differently without changing the training."""
    return _settings_notes(main_config, opts, profile)


def _header(refusals: list[Refusal], who: str, source: Optional[str]) -> str:
    lines = "\n".join(f"  - {r}" for r in refusals)
    where = f"; profile from {source}" if source else ""
    return f"{len(refusals)} setting(s) cannot be honoured by {who} (remote_backend=arctic{where}):\n{lines}"


def refuse(refusals: list[Refusal], profile: BackendProfile, source: Optional[str] = None) -> None:
    """Raise :class:`ArcticConfigError` listing ``refusals`` (nothing when empty)."""
    if refusals:
        raise ArcticConfigError(_header(list(refusals), profile.name, source), refusals)


def check_config(
    main_config: DictConfig, profile: Optional[BackendProfile] = None
) -> tuple[ArcticOptions, BackendSource]:
    """Every start-up check that needs no job, all at once: the arctic options, the backend block and every verl
    setting against the backend's profile (``profile``, else :func:`static_profile`; an unreachable server is a
    refusal of its own). What ``main_ppo`` runs before Ray starts and ``compose_check`` runs for a dry run.

    Raises:
        ArcticConfigError: every refusal, one line each, naming the profile and where it came from.
    """
    translation = translate(main_config)
    for line in translation.lines:  # once, before Ray starts: what a script written for Arctic-Platform's plugin means
        logger.warning(f"arctic backend: {line}")
    opts, refusals = read_options(main_config)
    refusals = [*translation.refusals, *refusals]
    src = BackendSource(profile, "given") if profile is not None else static_profile(opts)
    if not src.reachable:
        refusals.insert(0, _unreachable(opts, src))
    refusals += [r for r in settings_refusals(main_config, opts, src.profile) if r not in refusals]
    refusals = list(dict.fromkeys(translation.retarget(r) for r in refusals))
    refuse(refusals, src.profile, src.source)
    return opts, src


def batch_sizing(main_config: DictConfig, opts: ArcticOptions) -> dict[str, Any]:
    """DeepSpeed batch sizing from verl's mini / micro batch sizes, as the reference adapter derives it.

    ``train_batch_size`` = ``ppo_mini_batch_size`` x ``rollout.n`` sequences (one optimizer step per mini-batch);
    ``micro_batch_size`` = ``ppo_micro_batch_size_per_gpu`` (None with ``use_dynamic_bsz``: token budgets decide);
    the client derives ``gradient_accumulation_steps`` = train_batch_size // (micro x training_gpus).
    """
    actor = actor_config(main_config)
    gpus = int(opts.training_gpus)
    micro = None if actor.use_dynamic_bsz else per_gpu(actor, "ppo_micro_batch_size", gpus)
    # verl's FSDP dataclass has copied the deprecated actor.ulysses_sequence_parallel_size into fsdp_config; an engine
    # without Ulysses (megatron, ...) has no such key: no sequence parallelism
    fsdp = getattr(actor, "fsdp_config", None)
    sp = int(getattr(fsdp, "ulysses_sequence_parallel_size", None) or 1)
    return {
        "micro_batch_size": micro,
        "train_batch_size": int(actor.ppo_mini_batch_size) * int(rollout_config(main_config).n),
        "sequence_parallel_size": sp,
    }


def ds_worker_config(main_config: DictConfig, opts: ArcticOptions) -> dict[str, Any]:
    """``ds_worker_config``: attention implementation (``model.override_config``; None = the server's default, which
    the client fills in from the backend profile), gradient checkpointing and Liger, as the reference adapter sends;
    with ZoRRo training (``train.zorro_train.enable``) also the keys its ZoRRo path reads from here: the response
    length, the per-GPU token budget (``actor.ppo_max_token_len_per_gpu``), ``rollout.n``, the rollout temperature,
    ``use_unpad`` and the logits settings (the reference adapter's set and order)."""
    model = main_config.actor_rollout_ref.model
    override = model.override_config or {}
    out: dict[str, Any] = {
        "use_liger": bool(model.use_liger),
        "enable_gradient_checkpointing": bool(model.enable_gradient_checkpointing),
        "attn_implementation": override.get("attn_implementation"),
    }
    if opts.train.zorro_train.enable:
        rollout, logits = rollout_config(main_config), opts.train.logits
        out.update(
            zorro_train_enable=True,
            response_len=int(main_config.data.max_response_length),
            max_token_len=int(actor_config(main_config).ppo_max_token_len_per_gpu),
            rollout_n=int(rollout.n),
            temperature=float(rollout.temperature),
            use_unpad=True,  # the reference adapter always packs its ZoRRo path
            logits_optimization=str(logits.optimization),
            logits_optimization_peak_mem_size_in_gib=logits.optimization_peak_mem_size_in_gib,
            logits_compute_from_fp32_inputs=bool(logits.compute_from_fp32_inputs),
            logits_compute_in_fp32=bool(logits.compute_in_fp32),
        )
    return out


def _engine_args(engine: str) -> list[str]:
    """``--sampling-engine`` for the local server; ``auto`` passes nothing (the server's default decides)."""
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
    rank = int(model.lora_rank or 0)
    if rank == 0:
        return None

    def plain(v):
        return OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v

    return {
        "rank": rank,
        "alpha": plain(model.lora_alpha),
        "target_modules": plain(model.target_modules),
        "exclude_modules": plain(model.exclude_modules),
        "target_parameters": plain(model.get("target_parameters")),
    }


def vllm_engine_kwargs(main_config: DictConfig, opts: ArcticOptions) -> dict[str, Any]:
    """The user's vLLM engine kwargs: verl's ``rollout.engine_kwargs.vllm``, with ``remote_backend.arctic.sampling.
    engine_kwargs`` over them (the arctic-specific one wins)."""
    verl_kwargs = main_config.actor_rollout_ref.rollout.engine_kwargs.get("vllm") or {}
    verl_kwargs = OmegaConf.to_container(verl_kwargs, resolve=True) if OmegaConf.is_config(verl_kwargs) else verl_kwargs
    return {**dict(verl_kwargs), **opts.sampling.engine_kwargs}


def build_client_config(main_config: DictConfig, opts: ArcticOptions):
    """The :class:`arctic_platform.client.ArcticRLClientConfig` for this verl config."""
    from arctic_platform.client import ArcticRLClientConfig, CortexConfig, LocalConfig, OnPremConfig

    arr = main_config.actor_rollout_ref
    spec = training_spec(main_config)
    backend_type = opts.backend.type
    if backend_type == "local":
        b = opts.backend
        backend = LocalConfig(
            port=b.port,
            startup_timeout=b.startup_timeout,
            threads=b.threads,
            log_file=b.log_file,
            extra_env={str(k): str(v) for k, v in b.extra_env.items()},
            token_env_var=b.token_env_var,
            server_args=(["--sampling-process"] if b.sampling_process else []) + _engine_args(b.sampling_engine),
        )
    elif backend_type == "onprem":
        backend = OnPremConfig(url=opts.backend.url, token_env_var=opts.backend.token_env_var)
    else:
        backend = CortexConfig.from_env()
    from .vllm_config import CPU_NOT_SENT, arctic_inference_flags, sampling_vllm_config

    engine_kwargs = vllm_engine_kwargs(main_config, opts)
    zorro = opts.rollout.zorro_inference.enable
    # FCA / zorro reach a reference server where it reads them: cudagraph_mode in vllm_config, use_fca through
    # arctic_inference_config (docs/arctic-rl-protocol.md §7).
    cpu = sampler_on_cpu(opts.device, local=backend_type == "local")
    vllm_config = sampling_vllm_config(engine_kwargs, arr.rollout, zorro=zorro, cpu=cpu)
    if cpu:
        for key, why in CPU_NOT_SENT.items():
            if arr.rollout.get(key, None) and key not in engine_kwargs:
                logger.info(f"arctic backend: actor_rollout_ref.rollout.{key} is not sent to a CPU sampler: {why}")
    inference_flags = arctic_inference_flags(zorro, opts.rollout.speculative_decoding.model)
    seed = opts.seed if opts.seed is not None else rollout_config(main_config).seed
    return ArcticRLClientConfig(
        model_name=str(opts.model_path or arr.model.path),
        seed=int(seed),
        dtype=opts.dtype,
        device=opts.device,
        max_seq_len=int(main_config.data.max_prompt_length) + int(main_config.data.max_response_length),
        training_gpus=opts.training_gpus,
        sampling_gpus=opts.sampling_gpus,
        log_prob_gpus=opts.log_prob_gpus,
        log_prob_devices=opts.log_prob_devices,
        job_ready_timeout=opts.timeouts.job_ready,
        request_timeout=opts.timeouts.request,
        connect_timeout=opts.timeouts.connect,
        training={
            "optimizer": spec.optimizer,
            # verl counts warmup and horizon in training steps (one tick per update_actor); a server without verl's
            # schedule counts optimizer steps, k per training step
            "lr_schedule": spec.schedule,
            "optimizer_steps_per_tick": optimizer_steps_per_training_step(main_config),
            "checkpoint_path": os.path.abspath(main_config.trainer.default_local_dir),
            **batch_sizing(main_config, opts),
            "deepspeed": opts.train.deepspeed.model_dump(),
            "ds_worker_config": ds_worker_config(main_config, opts),
            "full_determinism": opts.train.determinism.full,
            "cuda_ipc": opts.weight_sync.cuda_ipc,
            "low_memory": opts.weight_sync.low_memory,
            "lora": lora_settings(arr.model),
        },
        log_prob={
            "micro_batch_size": per_gpu(arr.ref, "log_prob_micro_batch_size", opts.log_prob_gpus),
            "zero_stage": opts.log_prob.zero_stage,
        },
        sampling={
            "vllm_config": vllm_config,
            "arctic_inference_config": inference_flags,
            "prompt_format": opts.sampling.prompt_format,
            "max_retokenize_mismatch_rate": opts.sampling.max_retokenize_mismatch_rate,
        },
        backend=backend,
    )


def planned_client(main_config: DictConfig):
    """``(options, translation, client config)`` of a run whose options and GPUs pass; refused (every line the static
    profile gives) before any server starts."""
    try:
        opts, translation = _validated(main_config)
    except ArcticConfigError:  # the options are wrong: refuse them with every line the static profile gives
        check_config(main_config)
        raise
    from .node import node_refusals, sampler_view

    view = sampler_view(opts)
    early = node_refusals(main_config, opts, view)
    if early:  # the sampler and GPUs cannot honour the run: refuse before a server starts
        raise ArcticConfigError(_header(early, view.backend, None), early)
    return opts, translation, build_client_config(main_config, opts)


def connect_and_refuse(main_config: DictConfig, opts: ArcticOptions, translation, client, client_config) -> None:
    """Connect ``client`` and refuse what the backend's profile cannot honour (read from its ``/health``; Cortex's is
    fixed), every line at once, before any job exists; then log the notes."""
    cortex = opts.backend.type == "cortex"
    client.connect()
    retarget = translation.retarget  # name the key the script wrote (Arctic-Platform's spelling)
    refusals = [retarget(r) for r in settings_refusals(main_config, opts, client.backend_profile)]
    if cortex:
        # what the create body has no field for (client config terms; the client refuses it too)
        from arctic_platform.client.transports.cortex_body import cortex_refusals

        refusals += [f"remote_backend.arctic: {r}" for r in cortex_refusals(client_config)]
    refuse(refusals, client.backend_profile, "cortex" if cortex else "/health")
    for note in settings_notes(main_config, opts, client.backend_profile):
        logger.warning(f"arctic backend: {note}")
    if cortex:
        logger.warning(
            "arctic backend: cortex has no /forward: verl's old log-probs are zeros the update never reads "
            "(or the rollout's, in bypass mode), so actor/entropy reads 0"
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
        opts, translation, client_config = planned_client(main_config)
        from arctic_platform.client import ArcticRLClient
        from arctic_platform.protocol import distinct_gpus

        placement = placement_note(main_config)
        if placement:  # one line, before the backend is asked anything
            logger.warning(f"arctic backend: {placement}")
        from .prestart import adopt

        client = adopt(client_config) or ArcticRLClient(client_config)
        cortex = opts.backend.type == "cortex"
        try:
            connect_and_refuse(main_config, opts, translation, client, client_config)
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
        gpus = distinct_gpus(client_config)
        handle["num_gpus"] = gpus if on_gpu else 0
        handle["training_gpus"] = client_config.training_gpus if on_gpu else 0
        handle["device_name"] = training.get("device_name", "")
        handle["profile"] = client.backend_profile.model_dump(mode="json")
        logger.info(f"arctic backend ready: {client!r}")
        return cls(main_config, handle, owner_client=client)

    def reconnect_handle(self) -> dict[str, Any]:
        return dict(self._handle)

    @classmethod
    def check_config(cls, main_config: DictConfig) -> None:
        """Before Ray starts (``main_ppo``) and in a dry run (``compose_check``): every refusal at once
        (:func:`check_config`). A local server's GPUs are the ones this driver sees: recorded here, before Ray
        starts, for the server verl's TaskRunner actor spawns
        (:func:`arctic_platform.client.transports.local_server.record_node_devices`)."""
        opts, _ = check_config(main_config)
        if opts.backend.type == "local":
            from arctic_platform.client.transports.local_server import record_node_devices

            record_node_devices()

    @classmethod
    def prestart(cls, main_config: DictConfig) -> None:
        """Before Ray starts (``main_ppo``): the local server and its jobs, adopted by the TaskRunner's
        :meth:`from_config` (:mod:`.prestart`)."""
        from arctic_platform.client import ArcticRLClient

        from .prestart import keep, skip_reason

        opts, translation, client_config = planned_client(main_config)
        why = skip_reason(main_config, opts)
        if why is not None:
            logger.info(f"arctic backend: not started before Ray: {why}")
            return
        client = ArcticRLClient(client_config)
        try:  # refusals that need the server's /health come here, before Ray, instead of in the TaskRunner
            connect_and_refuse(main_config, opts, translation, client, client_config)
            client.start(wait_for=())  # every job created; the engines build while Ray and the TaskRunner start
        except BaseException:
            client.close()
            raise
        keep(client, client_config)

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
