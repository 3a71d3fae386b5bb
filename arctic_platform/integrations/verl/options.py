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
"""A run's configuration as the plugin reads it: verl's config tree and the ``remote_backend.arctic`` options.

The one place the adapter (:mod:`.adapter`), the settings table (:mod:`.settings`), the dry run
(:mod:`.compose_check`) and the probe read the config from, so none of them imports another to get at it:

* :func:`compose_config`: the trainer config exactly as ``main_ppo`` composes it (Hydra, for the dry run, the probe
  and the settings table);
* :func:`verl_defaults`: verl's default config without Hydra (safe inside a running Hydra app), what the
  non-default ``placement`` settings are measured against at start-up;
* :func:`arctic_options`: ``remote_backend.arctic`` merged over the packaged defaults;
* :func:`optimizer_steps_per_training_step`: PPO mini-batches x epochs; :func:`per_gpu`: a micro-batch size per GPU
  from verl's ``*_per_gpu`` key or its deprecated global one;
* :func:`sleeps_between_rollouts`: whether a colocated sampler sleeps after each rollout (the replica and the
  forwarder's staged wake read this one rule).

Light at import (omegaconf only): the adapter imports it during ``import verl``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from omegaconf import DictConfig, OmegaConf, open_dict

__all__ = [
    "DEFAULTS_YAML",
    "arctic_options",
    "compose_config",
    "lr_scheduler_type",
    "optimizer_steps_per_training_step",
    "per_gpu",
    "sleeps_between_rollouts",
    "verl_defaults",
]

DEFAULTS_YAML = Path(__file__).resolve().parent / "config" / "remote_backend" / "arctic.yaml"


def arctic_options(main_config: DictConfig) -> DictConfig:
    """``remote_backend.arctic`` merged over the packaged defaults (works without the Hydra group too)."""
    defaults = OmegaConf.load(DEFAULTS_YAML).arctic
    group = main_config.get("remote_backend", None)
    user = group.get("arctic", None) if group is not None else None
    merged = OmegaConf.merge(defaults, user) if user is not None else defaults
    OmegaConf.set_readonly(merged, False)
    return merged


def optimizer_steps_per_training_step(main_config: DictConfig) -> int:
    """One forward-backward + /step per PPO mini-batch per epoch."""
    actor = main_config.actor_rollout_ref.actor
    num_minibatches = max(1, main_config.data.train_batch_size // actor.ppo_mini_batch_size)
    return int(actor.ppo_epochs) * num_minibatches


def lr_scheduler_type(optim: DictConfig) -> str:
    """verl's schedule kind: ``optim.warmup_style`` (deprecated, still copied over ``lr_scheduler_type`` by verl's
    ``OptimizerConfig``) when set, else ``optim.lr_scheduler_type`` (default constant)."""
    return str(optim.get("warmup_style", None) or optim.get("lr_scheduler_type", "constant") or "constant")


def per_gpu(block: DictConfig, name: str, gpus: int) -> Optional[int]:
    """verl's ``<name>_per_gpu``, else its deprecated global ``<name>`` divided over ``gpus`` (verl's rule for the
    deprecated size: per GPU = size // data-parallel GPUs); None if neither is set."""
    value = block.get(f"{name}_per_gpu", None)
    if value is not None:
        return int(value)
    total = block.get(name, None)
    return max(1, int(total) // max(1, gpus)) if total else None


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


def verl_defaults() -> DictConfig:
    """verl's default trainer config, read without Hydra: ``verl/trainer/config/_generated_ppo_trainer.yaml``, the
    flattened ``ppo_trainer`` composition verl's own CI keeps current (so it is safe at start-up, inside the running
    ``main_ppo`` Hydra app). Interpolations resolve within it."""
    import verl

    return OmegaConf.load(Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml")


def sleeps_between_rollouts(main_config: DictConfig, opts: DictConfig) -> bool:
    """Whether the sampler sleeps after each rollout: a colocated backend (``remote_backend.arctic.colocate``) with
    ``rollout.free_cache_engine``. The replica sleeps it (level 1) and the forwarder's weight sync wakes it in stages;
    both read this one rule, so a sampler that never slept is never woken."""
    free_cache = bool(main_config.actor_rollout_ref.rollout.get("free_cache_engine", True))
    return bool(opts.get("colocate", False)) and free_cache
