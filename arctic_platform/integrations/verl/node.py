# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The run's rollout parallelism and job sizes against the sampler and GPUs the backend has, before Ray starts.

verl's ``actor_rollout_ref.rollout.tensor_model_parallel_size`` (default 2) is the sampling job's vLLM
``tensor_parallel_size``: the embedded server runs ``remote_backend.arctic.sampling_gpus / TP`` independent vLLM
engines of TP GPUs each (as verl runs dense models). What the sampler cannot honour is refused here, one
:class:`~.refusal.Refusal` per setting naming it, the backend and the way out, instead of a 422 from the sampling
job's ``/initialize`` a minute into ``main_ppo``:

* the torch sampling loop (no vLLM, or ``backend.sampling_engine=torch``) runs one replica on one device: TP > 1 or
  ``sampling_gpus`` > 1 is refused;
* a vLLM sampler needs TP to divide ``sampling_gpus``; ``data_parallel_size`` / ``pipeline_model_parallel_size``
  other than 1 are refused (replicas come from ``sampling_gpus / TP``);
* on CUDA the three jobs must fit the node's GPUs (:func:`arctic_platform.server.placement.place_jobs`);
* forest cascade attention / speculative decoding (``remote_backend.arctic.rollout.*``) need ArcticInference's vLLM
  plugin, which the embedded server does not run.

An ``onprem`` / ``cortex`` server sizes its own engines: nothing here applies to it (verl's forwarder count is
:mod:`.settings`' check). :func:`node_refusals`
is a pure function of the config, the options and a :class:`SamplerView`; :func:`local_sampler` builds the view of
the server a ``local`` backend will start on this node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from omegaconf import DictConfig, OmegaConf

from .refusal import Refusal, shown

__all__ = ["CHECKS", "TP_KEY", "SamplerView", "local_sampler", "node_refusals", "sampler_view"]

R = "actor_rollout_ref.rollout"
TP_KEY = f"{R}.tensor_model_parallel_size"
EP_KEY = f"{R}.expert_parallel_size"
GPUS_KEY = "remote_backend.arctic.{}_gpus"
JOBS = ("training", "sampling", "log_prob")


@dataclass(frozen=True)
class SamplerView:
    """What the checks need to know of the backend: its name, the sampling engine the server will run (``vllm`` /
    ``torch``; None: a remote server sizes its own engines), whether it runs on CUDA and how many GPUs it has."""

    backend: str
    engine: Optional[str]
    cuda: bool = False
    device_count: int = 0
    problem: Optional[Refusal] = None
    """A refusal found while resolving the engine (e.g. vLLM asked for but not installed)."""


def local_sampler(opts: Any, backend: str) -> SamplerView:
    """The sampler a ``local`` backend starts on this node: ``remote_backend.arctic.backend.sampling_engine``
    (``auto``: the server's default, ``$ARCTIC_SAMPLING_ENGINE`` in the server's environment, else vLLM when
    installed) on ``remote_backend.arctic.device`` (``auto``: CUDA when this node has it), resolved by the server's
    own rule."""
    import os

    import torch

    from arctic_platform.server.engines.vllm_engine import resolve_sampling_engine
    from arctic_platform.server.errors import RequestError

    device = str(opts.device)
    cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    count = torch.cuda.device_count() if cuda and torch.cuda.is_available() else 0
    asked = str(opts.backend.sampling_engine)
    if asked == "auto":
        asked = {**os.environ, **dict(opts.backend.extra_env)}.get("ARCTIC_SAMPLING_ENGINE", "auto")
    try:
        engine = resolve_sampling_engine(asked, "cuda:0" if cuda else "cpu")
    except RequestError as e:
        problem = Refusal(
            shown("remote_backend.arctic.backend.sampling_engine", asked),
            backend,
            f"cannot start that sampler here ({e})",
            "install it, or set remote_backend.arctic.backend.sampling_engine=torch",
            ["remote_backend.arctic.backend.sampling_engine=torch"],
        )
        return SamplerView(backend, None, cuda, count, problem)
    return SamplerView(backend, engine, cuda, count)


def sampler_view(opts: Any, backend: Optional[str] = None) -> SamplerView:
    """:func:`local_sampler` for a ``local`` backend; a view without an engine (the server's own) otherwise.
    ``backend``: the name refusals use (default: the embedded server's, or the remote server's URL)."""
    kind = str(opts.backend.type)
    if kind == "local":
        from arctic_platform.backend_profile import EMBEDDED_NAME

        return local_sampler(opts, backend or EMBEDDED_NAME)
    default = f"the Arctic RL server at {opts.backend.url}" if kind == "onprem" else f"the {kind} backend"
    return SamplerView(backend or default, None)


def _int(cfg: DictConfig, path: str, default: int = 1) -> int:
    v = OmegaConf.select(cfg, path, default=default)
    return int(default if v is None else v)


def _install(view: SamplerView) -> str:
    extra = "verl[h200]" if view.cuda else "verl[cpu]"
    return f"or install vLLM (pip install '{extra}') and leave remote_backend.arctic.backend.sampling_engine at auto"


def tp_refusal(cfg: DictConfig, opts: Any, view: SamplerView) -> Optional[Refusal]:
    """``rollout.tensor_model_parallel_size``: 1 on the torch loop; a divisor of ``sampling_gpus`` on vLLM."""
    if view.engine is None:
        return view.problem
    tp, sampling = _int(cfg, TP_KEY), int(opts.sampling_gpus)
    if view.engine == "torch":
        if tp == 1:
            return None
        return Refusal(
            shown(TP_KEY, tp),
            f"{view.backend}'s torch sampling loop",
            "runs on one device (no tensor parallelism)",
            f"set {TP_KEY}=1, {_install(view)}",
            [f"{TP_KEY}=1"],
        )
    from arctic_platform.server.placement import PlacementError, replica_count, tp_sizes

    try:
        replica_count(sampling, tp)
        return None
    except PlacementError:
        pass
    fits = tp_sizes(sampling)
    multiple = max(tp, 1) * max(1, sampling // max(tp, 1))
    return Refusal(
        f"{shown(TP_KEY, tp)} with {shown(GPUS_KEY.format('sampling'), sampling)}",
        view.backend,
        f"runs sampling_gpus / tensor_model_parallel_size vLLM replicas of {tp} GPU(s) each, and {tp} does not "
        f"divide {sampling}",
        f"set {GPUS_KEY.format('sampling')}={multiple} or {TP_KEY} to one of {fits}",
        [f"{TP_KEY}={max(fits) if fits else 1}"],
    )


def replicas_refusal(cfg: DictConfig, opts: Any, view: SamplerView) -> Optional[Refusal]:
    """``remote_backend.arctic.sampling_gpus`` > 1 on the torch loop (one replica on one device)."""
    sampling = int(opts.sampling_gpus)
    if view.engine != "torch" or sampling <= 1:
        return None
    return Refusal(
        shown(GPUS_KEY.format("sampling"), sampling),
        f"{view.backend}'s torch sampling loop",
        "runs one replica on one device",
        f"set {GPUS_KEY.format('sampling')}=1, {_install(view)}",
        [f"{GPUS_KEY.format('sampling')}=1"],
    )


def parallel_refusal(key: str) -> Callable[[DictConfig, Any, SamplerView], Optional[Refusal]]:
    """``rollout.data_parallel_size`` / ``pipeline_model_parallel_size``: 1 (replicas come from sampling_gpus / TP)."""

    def check(cfg: DictConfig, opts: Any, view: SamplerView) -> Optional[Refusal]:
        value = _int(cfg, key)
        if view.engine is None or value == 1:
            return None
        fix, also = [f"{key}=1"], ""
        ep, tp = _int(cfg, EP_KEY), _int(cfg, TP_KEY)
        if key.endswith(".data_parallel_size") and ep > 1 and ep != tp:
            # verl's RolloutConfig asserts expert_parallel_size == TP x DP once it is above 1: keep that true
            fix.append(f"{EP_KEY}={tp}")
            also = f" and {EP_KEY}={tp} (verl wants TP x DP)"
        return Refusal(
            shown(key, value),
            view.backend,
            f"makes its sampling replicas from {GPUS_KEY.format('sampling')} / {TP_KEY} (independent engines, as "
            "verl runs dense models)",
            f"set {key}=1{also} and size {GPUS_KEY.format('sampling')}",
            fix,
        )

    return check


def job_sizes_refusal(cfg: DictConfig, opts: Any, view: SamplerView) -> Optional[Refusal]:
    """On CUDA the three jobs fit the node's GPUs (the server's own placement rule). Not checked where no GPU is
    visible (a dry run on another machine): the server's placement refuses them when it starts."""
    if view.engine is None or not view.cuda or view.device_count <= 0:
        return None
    from arctic_platform.server.placement import PlacementError, place_jobs, split_node

    counts = {j: int(getattr(opts, f"{j}_gpus")) for j in JOBS}
    on_training = opts.log_prob_devices == "training"
    if on_training and counts["log_prob"] != counts["training"]:
        return None  # log_prob_devices_refusal names it
    try:
        place_jobs(counts, device="cuda", device_count=view.device_count, log_prob_devices=opts.log_prob_devices)
        return None
    except PlacementError:
        pass
    way, fix = f"set them to add up to at most {view.device_count}", []
    if on_training:
        way = f"set training_gpus + sampling_gpus to at most {view.device_count} (the reference shares training's)"
    try:
        split = split_node(
            view.device_count,
            tensor_parallel_size=_int(cfg, TP_KEY),
            reference=counts["log_prob"] > 0,
            reference_on_training=on_training,
        )
        fix = [f"{GPUS_KEY.format(j)}={split[j]}" for j in JOBS]
        way += f" (this node's default split: {' '.join(fix)})"
    except PlacementError:
        pass
    return Refusal(
        " + ".join(shown(GPUS_KEY.format(j), n) for j, n in counts.items() if n),
        view.backend,
        f"on this node has {view.device_count} GPU(s)",
        way,
        fix,
    )


def log_prob_devices_refusal(cfg: DictConfig, opts: Any, view: SamplerView) -> Optional[Refusal]:
    """``remote_backend.arctic.log_prob_devices=training``: only the embedded server places jobs so, and the
    log_prob job then has as many GPUs as training (its shards sit beside training's)."""
    if opts.log_prob_devices != "training":
        return None
    key = "remote_backend.arctic.log_prob_devices"
    if str(opts.backend.type) != "local":
        return Refusal(
            f"{key}=training",
            view.backend,
            "places its own jobs (only the embedded server, backend.type=local, runs the reference on the training "
            "GPUs)",
            f"set {key}=own",
            [f"{key}=own"],
        )
    train, lp = int(opts.training_gpus), int(opts.log_prob_gpus)
    if lp not in (0, train):
        return Refusal(
            f"{key}=training, {shown(GPUS_KEY.format('log_prob'), lp)}",
            view.backend,
            f"runs the reference sharded on the training job's {train} GPU(s), so it needs as many",
            f"set {GPUS_KEY.format('log_prob')}={train}, or {key}=own",
            [f"{GPUS_KEY.format('log_prob')}={train}"],
        )
    return None


def arctic_inference_refusal(cfg: DictConfig, opts: Any, view: SamplerView) -> list[Refusal]:
    """Forest cascade attention (``rollout.zorro_inference``) and speculative decoding need ArcticInference's vLLM
    plugin, which the embedded server does not run (an Arctic-Platform server does): one line for each set."""
    if view.engine is None:
        return []
    out = []
    for key, value, off in (
        ("remote_backend.arctic.rollout.zorro_inference.enable", bool(opts.rollout.zorro_inference.enable), "false"),
        ("remote_backend.arctic.rollout.speculative_decoding.model", opts.rollout.speculative_decoding.model, "''"),
    ):
        if value:
            out.append(
                Refusal(
                    shown(key, value),
                    f"{view.backend}'s sampler",
                    "has no ArcticInference plugin (forest cascade attention, speculative decoding)",
                    "set it off, or use an Arctic-Platform server (remote_backend.arctic.backend.type=onprem)",
                    [f"{key}={off}"],
                )
            )
    return out


CHECKS = {
    TP_KEY: tp_refusal,
    f"{R}.data_parallel_size": parallel_refusal(f"{R}.data_parallel_size"),
    f"{R}.pipeline_model_parallel_size": parallel_refusal(f"{R}.pipeline_model_parallel_size"),
    GPUS_KEY.format("sampling"): replicas_refusal,
    GPUS_KEY.format("training"): job_sizes_refusal,
    "remote_backend.arctic.log_prob_devices": log_prob_devices_refusal,
    "remote_backend.arctic.rollout.zorro_inference.enable": arctic_inference_refusal,
}
"""Setting -> its check."""


def node_refusals(cfg: DictConfig, opts: Any, view: SamplerView) -> list[Refusal]:
    """Every rollout-parallelism and job-size setting ``view``'s backend cannot honour, one line each (module
    docstring); empty when all are honoured."""
    out: list[Refusal] = []
    for check in CHECKS.values():
        r = check(cfg, opts, view)
        out += r if isinstance(r, list) else [r] if r else []
    return out
