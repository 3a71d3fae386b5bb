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
"""Every verl setting, and what the arctic backend does with it, per backend profile.

A user who switches a working config from stock verl to ``remote_backend=arctic`` expects the same training, so no
setting may be silently ignored. :data:`SETTINGS` classifies each one (a test walks verl's composed config of every
``model_engine`` and fails on any leaf no entry covers; at start-up a key no entry covers is refused):

* ``verl``: verl's own control loop uses it (dataloader, agent loop, advantages, iterator): unchanged;
* ``backend``: sent to the backend and honoured there with verl's semantics, or refused at start-up when the
  backend's :class:`~arctic_platform.backend_profile.BackendProfile` lacks it;
* ``placement``: how verl's *own* engines place memory or pick kernels (FSDP, offload, torch.compile, fused kernels,
  padding removal): it changes no number of the training, and with a remote backend the backend's engine config
  (``remote_backend.arctic.train.deepspeed``) decides placement. ``compose_check`` and ``arctic-verl probe`` list
  the non-default ones;
* ``refused``: a non-default value is refused on every backend (a feature the backend does not have).

:func:`check_settings` returns every refusal of a config at once, one :class:`~..refusal.Refusal` line each
(``<setting>=<value>: <backend> <why>; <way out>``); the start-up path (:func:`..adapter.startup_refusals`) adds the
arctic options' own and raises them together before any job exists. The package is split by concern:
:mod:`.model` (what a check reads), :mod:`.checks`, :mod:`.table` (the rows), :mod:`.render` (docs/settings.md:
``python -m arctic_platform.integrations.verl.settings``).
"""

from __future__ import annotations

from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from arctic_platform.backend_profile import BackendProfile

from ..options import ArcticOptions
from ..refusal import Refusal
from .checks import VERL_ITSELF, run
from .model import ARR, BACKEND, PLACEMENT, REFUSED, VERL, Setting, SettingsContext
from .table import GLOBAL_CHECKS, SETTINGS, covering

__all__ = [
    "BACKEND",
    "PLACEMENT",
    "REFUSED",
    "SETTINGS",
    "VERL",
    "Setting",
    "SettingsContext",
    "check_settings",
    "covering",
    "main",
    "non_default_placement",
    "placement_note",
    "settings_notes",
]


def check_settings(cfg: DictConfig, opts: ArcticOptions, profile: BackendProfile) -> list[Refusal]:
    """Every refusal of ``cfg`` by a backend with ``profile`` (empty: all honoured). Each check runs once."""
    ctx = SettingsContext(cfg, opts, profile)
    seen: set[int] = set()
    out: list[Refusal] = []
    for check in (*GLOBAL_CHECKS, *(s.check for s in SETTINGS if s.check is not None)):
        if id(check) in seen:
            continue
        seen.add(id(check))
        try:
            refusals = run(check, ctx)
        except (TypeError, ValueError):
            if not any(r.backend == VERL_ITSELF for r in out):
                raise
            refusals = []  # a value verl's own check refused above (a string for an int, ...) stops this one
        for refusal in refusals:
            if refusal not in out:
                out.append(refusal)
    return out


def settings_notes(cfg: DictConfig, opts: ArcticOptions, profile: BackendProfile) -> list[str]:
    """Start-up lines for settings the backend handles differently without changing the training."""
    from ..verl_config import VerlConfigError

    ctx = SettingsContext(cfg, opts, profile)
    out: list[str] = []
    for s in SETTINGS:
        if s.note is None:
            continue
        try:
            line = s.note(ctx)
        except VerlConfigError:  # the block is refused (verl_rejects); nothing to note about it
            continue
        if line and line not in out:
            out.append(line)
    return out


def _defaults_in(cfg: DictConfig, defaults: DictConfig) -> dict:
    """verl's default ``actor_rollout_ref``, resolved inside ``cfg``: a default that follows another setting by
    interpolation (``rollout.n_gpus_per_node: ${trainer.n_gpus_per_node}``) follows the user's value of it."""
    try:
        inside = cfg.copy()
        OmegaConf.set_readonly(inside, False)
        OmegaConf.set_struct(inside, False)
        inside[ARR] = defaults[ARR]
        return OmegaConf.to_container(inside[ARR], resolve=True)
    except Exception:  # an interpolation cfg cannot resolve: verl's defaults on their own
        return OmegaConf.to_container(defaults[ARR], resolve=True)


def _leaves(d: Any, prefix: str):
    if isinstance(d, dict):
        for k, v in d.items():
            yield from _leaves(v, f"{prefix}.{k}")
    else:
        yield prefix, d


def non_default_placement(cfg: DictConfig, defaults: Optional[DictConfig] = None) -> list[str]:
    """``placement`` settings whose value differs from verl's default (``defaults``: the whole default trainer
    config; None: verl's generated default of the run's ``model_engine``, :func:`..options.verl_defaults`), as
    ``path=value``."""
    if defaults is None:
        from ..options import verl_defaults

        defaults = verl_defaults(str(cfg.model_engine))
    default_leaves = dict(_leaves(_defaults_in(cfg, defaults), ARR))
    out = []
    for path, value in _leaves(OmegaConf.to_container(cfg[ARR], resolve=True), ARR):
        s = covering(path)
        if s is not None and s.role == PLACEMENT and value != default_leaves.get(path):
            out.append(f"{path}={value!r}")
    return out


def placement_note(cfg: DictConfig, defaults: Optional[DictConfig] = None) -> Optional[str]:
    """The one start-up line listing the non-default ``placement`` settings (None when there are none): the adapter
    logs it at start-up, ``compose_check`` and the probe print it."""
    placement = non_default_placement(cfg, defaults)
    if not placement:
        return None
    return "no effect with a remote backend (verl's own engine placement / kernels): " + ", ".join(placement)


def main(argv: list[str] | None = None) -> int:
    """Print docs/settings.md's table (:func:`.render.main`)."""
    from .render import main as render_main

    return render_main(argv)
