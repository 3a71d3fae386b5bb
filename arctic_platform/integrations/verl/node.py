# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The run's rollout parallelism and job sizes against the sampler and GPUs the backend has, before Ray starts.

verl's ``actor_rollout_ref.rollout.tensor_model_parallel_size`` (default 2) is the sampling job's vLLM
``tensor_parallel_size``: the embedded server runs ``remote_backend.arctic.sampling_gpus / TP`` independent vLLM
engines of TP GPUs each (as verl runs dense models). What the sampler cannot honour is refused here, one line per
setting naming it, the backend and the way out, instead of a 422 from the sampling job's ``/initialize`` a minute
into ``main_ppo``:

* the torch sampling loop (no vLLM, or ``backend.sampling_engine=torch``) runs one replica on one device: TP > 1 or
  ``sampling_gpus`` > 1 is refused;
* a vLLM sampler needs TP to divide ``sampling_gpus``; ``data_parallel_size`` / ``pipeline_model_parallel_size``
  other than 1 are refused (replicas come from ``sampling_gpus / TP``);
* on CUDA the three jobs must fit the node's GPUs (:func:`arctic_platform.server.placement.place_jobs`);
* verl runs one forwarder for the backend (``trainer.n_gpus_per_node`` x ``trainer.nnodes`` = 1);
* forest cascade attention / speculative decoding (``remote_backend.arctic.rollout.*``) need ArcticInference's vLLM
  plugin, which the embedded server does not run.

An ``onprem`` / ``cortex`` server sizes its own engines: only the forwarder count is checked. :func:`node_refusals`
is a pure function of the config and a :class:`SamplerView`; :func:`local_sampler` builds the view of the server a
``local`` backend will start on this node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from omegaconf import DictConfig

__all__ = ["CHECKS", "TP_KEY", "SamplerView", "local_sampler", "node_refusals", "sampler_view"]

R = "actor_rollout_ref.rollout"
TP_KEY = f"{R}.tensor_model_parallel_size"
GPUS_KEY = "remote_backend.arctic.{}_gpus"


@dataclass(frozen=True)
class SamplerView:
    """What the check needs to know of the backend: its name, the sampling engine the server will run (``vllm`` /
    ``torch``; None: a remote server sizes its own engines), whether it runs on CUDA and how many GPUs it has."""

    backend: str
    engine: Optional[str]
    cuda: bool = False
    device_count: int = 0
    problem: Optional[str] = None
    """A refusal found while resolving the engine (e.g. vLLM asked for but not installed)."""


def local_sampler(opts: DictConfig, backend: str) -> SamplerView:
    """The sampler a ``local`` backend starts on this node: ``remote_backend.arctic.backend.sampling_engine`` (``auto``:
    the server's default, ``$ARCTIC_SAMPLING_ENGINE`` in the server's environment, else vLLM when installed) on
    ``remote_backend.arctic.device`` (``auto``: CUDA when this node has it), resolved by the server's own rule."""
    import os

    import torch

    from arctic_platform.server.errors import RequestError
    from arctic_platform.server.vllm_engine import resolve_sampling_engine

    device = str(opts.device)
    cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    count = torch.cuda.device_count() if cuda and torch.cuda.is_available() else 0
    asked = str(opts.backend.get("sampling_engine", "auto"))
    if asked == "auto":
        env = {**os.environ, **{str(k): str(v) for k, v in (opts.backend.get("extra_env", None) or {}).items()}}
        asked = env.get("ARCTIC_SAMPLING_ENGINE", "auto")
    try:
        engine = resolve_sampling_engine(asked, "cuda:0" if cuda else "cpu")
    except RequestError as e:
        return SamplerView(backend, None, cuda, count, f"remote_backend.arctic.backend.sampling_engine={asked!r}: {e}")
    return SamplerView(backend, engine, cuda, count)


def sampler_view(opts: DictConfig, backend: Optional[str] = None) -> SamplerView:
    """:func:`local_sampler` for a ``local`` backend; a view without an engine (the server's own) otherwise.
    ``backend``: the name refusals use (default: the embedded server's, or the remote server's URL)."""
    kind = str(opts.backend.type)
    if kind == "local":
        from arctic_platform.backend_profile import EMBEDDED_NAME

        return local_sampler(opts, backend or EMBEDDED_NAME)
    default = f"the Arctic RL server at {opts.backend.url}" if kind == "onprem" else f"the {kind} backend"
    return SamplerView(backend or default, None)


def _int(cfg: DictConfig, path: str, default: int = 1) -> int:
    from omegaconf import OmegaConf

    v = OmegaConf.select(cfg, path, default=default)
    return int(default if v is None else v)


def forwarders_refusal(cfg: DictConfig, opts: DictConfig, view: SamplerView) -> Optional[str]:
    """verl runs one forwarder worker for the backend (``trainer.n_gpus_per_node`` x ``trainer.nnodes`` = 1)."""
    per_node, nodes = _int(cfg, "trainer.n_gpus_per_node"), _int(cfg, "trainer.nnodes")
    if per_node * nodes == 1:
        return None
    return (
        f"trainer.n_gpus_per_node={per_node} x trainer.nnodes={nodes}: with {view.backend} verl runs one forwarder "
        f"worker (the backend's jobs own the GPUs: {GPUS_KEY.format('{training,sampling,log_prob}')}); set "
        "trainer.n_gpus_per_node=1 trainer.nnodes=1"
    )


def _install(view: SamplerView) -> str:
    extra = "verl[h200]" if view.cuda else "verl[cpu]"
    return f"or install vLLM (pip install '{extra}') and leave remote_backend.arctic.backend.sampling_engine at auto"


def tp_refusal(cfg: DictConfig, opts: DictConfig, view: SamplerView) -> Optional[str]:
    """``rollout.tensor_model_parallel_size``: 1 on the torch loop; a divisor of ``sampling_gpus`` on vLLM."""
    if view.engine is None:
        return view.problem
    tp, sampling = _int(cfg, TP_KEY), int(opts.sampling_gpus)
    if view.engine == "torch":
        if tp == 1:
            return None
        return (
            f"{TP_KEY}={tp}: {view.backend}'s torch sampling loop runs on one device (no tensor parallelism); set "
            f"{TP_KEY}=1, {_install(view)}"
        )
    if tp >= 1 and sampling % tp == 0:
        return None
    fits = [d for d in range(1, sampling + 1) if sampling % d == 0]
    return (
        f"{TP_KEY}={tp} with {GPUS_KEY.format('sampling')}={sampling}: {view.backend} runs sampling_gpus / "
        f"tensor_model_parallel_size vLLM replicas of {tp} GPU(s) each, and {tp} does not divide {sampling}; set "
        f"{GPUS_KEY.format('sampling')}={max(tp, 1) * max(1, sampling // max(tp, 1))} or {TP_KEY} to one of {fits}"
    )


def replicas_refusal(cfg: DictConfig, opts: DictConfig, view: SamplerView) -> Optional[str]:
    """``remote_backend.arctic.sampling_gpus`` > 1 on the torch loop (one replica on one device)."""
    sampling = int(opts.sampling_gpus)
    if view.engine != "torch" or sampling <= 1:
        return None
    return (
        f"{GPUS_KEY.format('sampling')}={sampling}: {view.backend}'s torch sampling loop runs one replica on one "
        f"device; set {GPUS_KEY.format('sampling')}=1, {_install(view)}"
    )


def parallel_refusal(key: str):
    """``rollout.data_parallel_size`` / ``pipeline_model_parallel_size``: 1 (replicas come from sampling_gpus / TP)."""

    def check(cfg: DictConfig, opts: DictConfig, view: SamplerView) -> Optional[str]:
        value = _int(cfg, key)
        if view.engine is None or value == 1:
            return None
        return (
            f"{key}={value}: {view.backend} makes its sampling replicas from {GPUS_KEY.format('sampling')} / "
            f"{TP_KEY} (independent engines, as verl runs dense models); set {key}=1 and size "
            f"{GPUS_KEY.format('sampling')}"
        )

    return check


def job_sizes_refusal(cfg: DictConfig, opts: DictConfig, view: SamplerView) -> Optional[str]:
    """On CUDA the three jobs fit the node's GPUs (the server's own placement rule). Not checked where no GPU is
    visible (a dry run on another machine): the server's placement refuses them when it starts."""
    if view.engine is None or not view.cuda or view.device_count <= 0:
        return None
    from arctic_platform.protocol import JOB_TYPES
    from arctic_platform.server.placement import PlacementError, place_jobs, split_node

    counts = {j: int(opts[f"{j}_gpus"]) for j in JOB_TYPES}
    try:
        place_jobs(counts, device="cuda", device_count=view.device_count)
        return None
    except PlacementError:
        asked = " + ".join(f"{GPUS_KEY.format(j)}={n}" for j, n in counts.items() if n)
        way = f"set them to add up to at most {view.device_count}"
        try:
            split = split_node(
                view.device_count, tensor_parallel_size=_int(cfg, TP_KEY), reference=counts["log_prob"] > 0
            )
            way += (
                " (this node's default split: " + " ".join(f"{GPUS_KEY.format(j)}={split[j]}" for j in JOB_TYPES) + ")"
            )
        except PlacementError:
            pass
        return f"{asked}: {view.backend} on this node has {view.device_count} GPU(s); {way}"


def arctic_inference_refusal(cfg: DictConfig, opts: DictConfig, view: SamplerView) -> Optional[str]:
    """Forest cascade attention (``rollout.zorro_inference``) and speculative decoding need ArcticInference's vLLM
    plugin, which the embedded server does not run (an Arctic-Platform server does)."""
    if view.engine is None:
        return None
    zorro = bool(opts.rollout.zorro_inference.enable)
    spec = opts.rollout.speculative_decoding.model or ""
    if not zorro and not spec:
        return None
    key = (
        "remote_backend.arctic.rollout.zorro_inference.enable=true"
        if zorro
        else f"remote_backend.arctic.rollout.speculative_decoding.model={spec!r}"
    )
    return (
        f"{key}: {view.backend}'s sampler has no ArcticInference plugin (forest cascade attention, speculative "
        "decoding); set it off, or use an Arctic-Platform server (remote_backend.arctic.backend.type=onprem)"
    )


CHECKS = {
    "trainer.n_gpus_per_node": forwarders_refusal,
    TP_KEY: tp_refusal,
    f"{R}.data_parallel_size": parallel_refusal(f"{R}.data_parallel_size"),
    f"{R}.pipeline_model_parallel_size": parallel_refusal(f"{R}.pipeline_model_parallel_size"),
    GPUS_KEY.format("sampling"): replicas_refusal,
    GPUS_KEY.format("training"): job_sizes_refusal,
    "remote_backend.arctic.rollout.zorro_inference.enable": arctic_inference_refusal,
}
"""Setting -> its check (what the settings table runs for that setting)."""


def node_refusals(cfg: DictConfig, opts: DictConfig, view: SamplerView) -> list[str]:
    """Every rollout-parallelism and job-size setting ``view``'s backend cannot honour, one line each (module
    docstring); empty when all are honoured."""
    return [m for check in CHECKS.values() if (m := check(cfg, opts, view))]
