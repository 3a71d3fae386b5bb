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
"""The plugin's own options, typed: ``remote_backend.*`` as :class:`RemoteBackendOptions` (mirrors
``config/remote_backend/arctic.yaml``; a test holds the two equal), and how a run's config is composed.

* :func:`arctic_options`: ``remote_backend.arctic`` merged over the packaged yaml and validated as
  :class:`ArcticOptions`; :func:`read_options` also returns one :class:`~.refusal.Refusal` per invalid value (named
  by its full key, with its default as the way out) and options in which each invalid value is the default, so the
  other start-up checks still run in the same try;
* :func:`compose_config`: the trainer config exactly as ``main_ppo`` composes it (Hydra, for the dry run, the probe
  and the settings table); :func:`verl_defaults`: verl's default config without Hydra (safe inside a running Hydra
  app), what the non-default ``placement`` settings are measured against;
* :func:`sleeps_between_rollouts`: whether a colocated sampler sleeps after each rollout (the replica and the
  forwarder's staged wake read this one rule).

verl's own settings are read through verl's config dataclasses (:mod:`.verl_config`). Light at import (omegaconf and
pydantic): the adapter imports it during ``import verl``.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Literal, Optional

from omegaconf import DictConfig, OmegaConf, open_dict
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from arctic_platform.protocol import DEFAULT_JOB_GPUS

from .refusal import ArcticConfigError, Refusal, shown

__all__ = [
    "DEFAULTS_YAML",
    "ArcticOptions",
    "GroupKeys",
    "RemoteBackendOptions",
    "arctic_options",
    "compose_config",
    "read_options",
    "sleeps_between_rollouts",
    "verl_defaults",
]

DEFAULTS_YAML = Path(__file__).resolve().parent / "config" / "remote_backend" / "arctic.yaml"
PREFIX = "remote_backend.arctic"


class _Options(BaseModel):
    """A block of the yaml: a key it does not have is refused by name (a typo is never silently ignored)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class _PassThrough(BaseModel):
    """A DeepSpeed block: its own keys pass through to ``ds_config``; the keys named here are typed."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)


class AsyncRollout(_Options):
    """``remote_backend.async_rollout``: one-step off-policy mode of verl's remote-backend trainer (docs/async.md)."""

    enable: bool = False
    max_staleness: int = Field(1, ge=1)
    prefetch_batches: Optional[int] = Field(None, ge=1)
    drain_timeout_s: float = Field(120, ge=0)


class BackendOptions(_Options):
    """``backend``: where the Arctic RL server runs."""

    type: Literal["local", "onprem", "cortex"] = "local"
    url: Optional[str] = None
    token_env_var: Optional[str] = None
    port: int = Field(0, ge=0, le=65535)
    startup_timeout: float = Field(300, gt=0)
    threads: int = Field(1, ge=1)
    log_file: Optional[str] = None
    extra_env: dict[str, str] = Field(default_factory=dict)
    sampling_process: bool = False
    sampling_engine: Literal["auto", "vllm", "torch"] = "auto"
    prestart: bool = True


class Offload(_PassThrough):
    device: Literal["none", "cpu", "nvme"] = "none"


class ZeroOptimization(_PassThrough):
    stage: int = Field(3, ge=0, le=3, strict=True)
    offload_optimizer: Offload = Field(default_factory=Offload)
    offload_param: Offload = Field(default_factory=Offload)


class DeepSpeedBlock(_PassThrough):
    """``train.deepspeed``: passed into the training job's ``ds_config`` (the keys not named here as they are)."""

    zero_optimization: ZeroOptimization = Field(default_factory=ZeroOptimization)
    log_level: str = "INFO"


class Determinism(_Options):
    full: bool = False


class Logits(_Options):
    optimization: Literal["none", "compute", "memory"] = "none"
    optimization_peak_mem_size_in_gib: float = Field(4, gt=0)
    compute_in_fp32: bool = False
    compute_from_fp32_inputs: bool = False


class ZorroTrain(_Options):
    """``train.zorro_train``: Arctic-Platform's ZoRRo training (each prompt computed once for its n rollouts)."""

    enable: bool = False
    max_rollouts: Optional[int] = Field(None, ge=1)


class TrainOptions(_Options):
    deepspeed: DeepSpeedBlock = Field(default_factory=DeepSpeedBlock)
    determinism: Determinism = Field(default_factory=Determinism)
    load_balancer: bool = True
    zorro_train: ZorroTrain = Field(default_factory=ZorroTrain)
    logits: Logits = Field(default_factory=Logits)
    lr_per_optimizer_step: bool = False


class WeightSync(_Options):
    cuda_ipc: bool = False
    low_memory: bool = False


class Timeouts(_Options):
    job_ready: float = Field(600, gt=0)
    request: float = Field(1800, gt=0)
    connect: float = Field(10, gt=0)


class SamplingOptions(_Options):
    max_tokens: Optional[int] = Field(None, ge=1)
    engine_kwargs: dict[str, Any] = Field(default_factory=dict)
    prompt_format: Literal["auto", "text"] = "auto"
    max_retokenize_mismatch_rate: float = Field(0.0, ge=0, le=1)
    max_prompts_per_request: Optional[int] = Field(None, ge=1)
    coalesce_window_ms: float = Field(25, ge=0)


class LogProbOptions(_Options):
    drop_position_ids: bool = True
    zero_stage: Optional[int] = Field(None, ge=0, le=3, strict=True)


class ZorroInference(_Options):
    enable: bool = False


class SpeculativeDecoding(_Options):
    model: str = ""


class RolloutFlags(_Options):
    zorro_inference: ZorroInference = Field(default_factory=ZorroInference)
    speculative_decoding: SpeculativeDecoding = Field(default_factory=SpeculativeDecoding)


class ArcticOptions(_Options):
    """``remote_backend.arctic``: every key of the yaml's ``arctic`` block, with its default (the yaml says what each
    one means)."""

    backend: BackendOptions = Field(default_factory=BackendOptions)
    colocate: bool = False
    train: TrainOptions = Field(default_factory=TrainOptions)
    weight_sync: WeightSync = Field(default_factory=WeightSync)
    model_path: Optional[str] = None
    device: str = "auto"
    dtype: Optional[Literal["float32", "bfloat16", "float16", "float64"]] = None
    seed: Optional[int] = None
    training_gpus: int = Field(DEFAULT_JOB_GPUS, ge=0)
    sampling_gpus: int = Field(DEFAULT_JOB_GPUS, ge=0)
    log_prob_gpus: int = Field(DEFAULT_JOB_GPUS, ge=0)
    log_prob_devices: Literal["own", "training"] = "own"
    shared_filesystem: Optional[bool] = None
    timeouts: Timeouts = Field(default_factory=Timeouts)
    sampling: SamplingOptions = Field(default_factory=SamplingOptions)
    log_prob: LogProbOptions = Field(default_factory=LogProbOptions)
    rollout: RolloutFlags = Field(default_factory=RolloutFlags)


# ------------------------------------------------------------------ Arctic-Platform's plugin keys (null = not set)


class _Theirs(_Options):
    """A block of Arctic-Platform's plugin keys: every value optional (null = the script did not set it); what each
    means here is :mod:`.platform_keys`'s table."""


class TheirWeightSync(_Theirs):
    cuda_ipc: Optional[bool] = None
    low_memory: Optional[bool] = None


class TheirZorroTrain(_Theirs):
    enable: Optional[bool] = None
    max_rollouts: Optional[int] = Field(None, ge=1)


class TheirLogits(_Theirs):
    optimization: Optional[Literal["none", "compute", "memory"]] = None
    optimization_peak_mem_size_in_gib: Optional[float] = Field(None, gt=0)
    compute_in_fp32: Optional[bool] = None
    compute_from_fp32_inputs: Optional[bool] = None


class TheirDeterminism(_Theirs):
    full: Optional[bool] = None
    seed: Optional[int] = None


class TheirOffload(_PassThrough):
    device: Optional[Literal["none", "cpu", "nvme"]] = None


class TheirZero(_PassThrough):
    stage: Optional[int] = Field(None, ge=0, le=3, strict=True)
    offload_optimizer: TheirOffload = Field(default_factory=TheirOffload)
    offload_param: TheirOffload = Field(default_factory=TheirOffload)


class TheirDeepSpeed(_PassThrough):
    zero_optimization: TheirZero = Field(default_factory=TheirZero)
    log_level: Optional[str] = None


class TheirTrain(_Theirs):
    load_balancer: Optional[bool] = None
    zorro_train: TheirZorroTrain = Field(default_factory=TheirZorroTrain)
    logits: TheirLogits = Field(default_factory=TheirLogits)
    determinism: TheirDeterminism = Field(default_factory=TheirDeterminism)
    deepspeed: TheirDeepSpeed = Field(default_factory=TheirDeepSpeed)


class TheirZorroInference(_Theirs):
    enable: Optional[bool] = None


class TheirSpeculativeDecoding(_Theirs):
    model: Optional[str] = None


class TheirRollout(_Theirs):
    zorro_inference: TheirZorroInference = Field(default_factory=TheirZorroInference)
    speculative_decoding: TheirSpeculativeDecoding = Field(default_factory=TheirSpeculativeDecoding)


class TheirComms(_Theirs):
    protocol: Optional[Literal["ray", "http"]] = None
    drop_position_ids: Optional[bool] = None


class GroupKeys(_Options):
    """The ``remote_backend`` group's own keys and Arctic-Platform's plugin keys, everything but ``arctic``."""

    name: str = "arctic"
    custom_backend_module: Optional[str] = None
    async_rollout: AsyncRollout = Field(default_factory=AsyncRollout)
    colocate: Optional[bool] = None
    training_gpus: Optional[int] = Field(None, ge=0)
    sampling_gpus: Optional[int] = Field(None, ge=0)
    log_prob_gpus: Optional[int] = Field(None, ge=0)
    sampling_tp_size: Optional[int] = Field(None, ge=1)
    weight_sync: TheirWeightSync = Field(default_factory=TheirWeightSync)
    train: TheirTrain = Field(default_factory=TheirTrain)
    rollout: TheirRollout = Field(default_factory=TheirRollout)
    comms: TheirComms = Field(default_factory=TheirComms)


class RemoteBackendOptions(GroupKeys):
    """The whole ``remote_backend`` group of ``arctic.yaml`` (``remote_backend=arctic`` puts it at
    ``remote_backend.*``)."""

    arctic: ArcticOptions = Field(default_factory=ArcticOptions)


@functools.lru_cache(maxsize=1)
def _packaged_defaults() -> DictConfig:
    """The packaged yaml's ``arctic`` block, parsed once per process and read-only (a merge copies it)."""
    defaults = OmegaConf.load(DEFAULTS_YAML).arctic
    OmegaConf.set_readonly(defaults, True)
    return defaults


def _merged(main_config: DictConfig) -> dict:
    """``remote_backend.arctic`` over the packaged yaml's, as plain data (works without the Hydra group too)."""
    defaults = _packaged_defaults()
    group = main_config.get("remote_backend", None)
    user = group.get("arctic", None) if group is not None else None
    merged = OmegaConf.merge(defaults, user) if user is not None else defaults
    return OmegaConf.to_container(merged, resolve=True)


def _drop(data: dict, loc: tuple) -> bool:
    """Remove the value at ``loc`` from ``data`` (so the model's default applies); False if there is none."""
    node = data
    for key in loc[:-1]:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    if isinstance(node, dict) and loc and loc[-1] in node:
        del node[loc[-1]]
        return True
    return False


def _default_at(loc: tuple) -> Any:
    value: Any = ArcticOptions()
    for key in loc:
        value = getattr(value, str(key), None) if isinstance(value, BaseModel) else None
    return value


def _refusal(err: dict) -> Refusal:
    path = ".".join([PREFIX, *(str(x) for x in err["loc"])])
    default = _default_at(err["loc"])
    if err["type"] == "extra_forbidden":
        return Refusal(
            shown(path, err["input"]),
            "the arctic backend",
            "has no such option (arctic.yaml lists them)",
            "remove it (a typo of another key?)",
        )
    value = "null" if default is None else str(default).lower() if isinstance(default, bool) else default
    msg = str(err["msg"])
    why = (
        f"needs {msg.removeprefix('Input should be ')}" if msg.startswith("Input should be ") else f"refuses it: {msg}"
    )
    return Refusal(
        shown(path, err["input"]),
        "the arctic backend",
        why,
        f"set it to {value} (its default) or a valid value",
        [f"{path}={value}"],
    )


def read_options(main_config: DictConfig) -> tuple[ArcticOptions, list[Refusal]]:
    """``(options, refusals)``: one refusal per invalid ``remote_backend.arctic`` value, by its full key; in
    ``options`` each invalid value is its default, so the run's other checks still see the rest."""
    data = _merged(main_config)
    refusals: list[Refusal] = []
    for _ in range(64):  # each pass drops the values it refused; a config has far fewer bad values than this
        try:
            return ArcticOptions.model_validate(data), refusals
        except ValidationError as e:
            errors = e.errors()
            refusals.extend(_refusal(err) for err in errors)
            if not any([_drop(data, err["loc"]) for err in errors]):
                break
    return ArcticOptions(), refusals


def arctic_options(main_config: DictConfig) -> ArcticOptions:
    """``remote_backend.arctic`` merged over the packaged defaults, validated.

    Raises:
        ArcticConfigError: every invalid value, one line each (:func:`read_options`).
    """
    opts, refusals = read_options(main_config)
    if refusals:
        lines = "\n".join(f"  - {r}" for r in refusals)
        raise ArcticConfigError(f"{len(refusals)} invalid remote_backend.arctic option(s):\n{lines}", refusals)
    return opts


def compose_config(overrides: list[str]) -> DictConfig:
    """The resolved trainer config exactly as ``main_ppo`` would see it after its choice hook (Hydra composition;
    not for use inside a running Hydra app, whose global state it replaces)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    import verl  # noqa: F401  (loads the verl.plugins entry point: arctic's Hydra search path)
    import verl.trainer.main_ppo as main_ppo

    config_dir = str(Path(main_ppo.__file__).parent / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = compose("ppo_trainer", overrides=overrides, return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        with open_dict(cfg):
            del cfg["hydra"]
        main_ppo._resolve_remote_backend_from_hydra_choice(cfg)
    return cfg


def verl_defaults(model_engine: str = "dp") -> DictConfig:
    """verl's default trainer config of ``model_engine``, read without Hydra: ``verl/trainer/config/
    _generated_ppo[_<engine>]_trainer.yaml``, the flattened ``ppo_trainer`` composition verl's own CI keeps current
    (so it is safe at start-up, inside the running ``main_ppo`` Hydra app). Interpolations resolve within it."""
    import verl

    name = "_generated_ppo_trainer.yaml" if model_engine == "dp" else f"_generated_ppo_{model_engine}_trainer.yaml"
    return OmegaConf.load(Path(verl.__file__).parent / "trainer" / "config" / name)


def sleeps_between_rollouts(main_config: DictConfig, opts: ArcticOptions) -> bool:
    """Whether the sampler sleeps after each rollout: a colocated backend (``remote_backend.arctic.colocate``) with
    ``rollout.free_cache_engine``. The replica sleeps it (level 1) and the forwarder's weight sync wakes it in stages;
    both read this one rule, so a sampler that never slept is never woken."""
    return opts.colocate and bool(main_config.actor_rollout_ref.rollout.free_cache_engine)
