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
"""What a settings check reads and returns: :class:`Setting` (one row of the table), :class:`SettingsContext` (the
config through verl's dataclasses, the arctic options, the backend profile) and the roles."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Optional

from omegaconf import DictConfig, ListConfig, OmegaConf

from arctic_platform.backend_profile import BackendProfile

from .. import verl_config
from ..options import ArcticOptions
from ..refusal import Refusal

__all__ = ["ARR", "BACKEND", "PLACEMENT", "REFUSED", "VERL", "Check", "Setting", "SettingsContext"]

VERL, BACKEND, PLACEMENT, REFUSED = "verl", "backend", "placement", "refused"
ARR = "actor_rollout_ref"


@dataclass
class SettingsContext:
    """What a check reads: the main config, the arctic options, the backend profile.

    verl's blocks come as verl's own dataclasses (:mod:`..verl_config`): :attr:`actor`, :attr:`optim`,
    :attr:`rollout`, :attr:`algorithm`, :attr:`spec` (the optimizer and schedule the backend runs). A block verl's
    dataclass rejects raises :class:`~..verl_config.VerlConfigError` from the property; :func:`.checks.verl_rejects`
    turns that into one refusal and the checks that read the block are skipped. :meth:`get` reads the composed
    config (the model and reference blocks, whose every key holds verl's yaml default after composition).
    """

    cfg: DictConfig
    opts: ArcticOptions
    profile: BackendProfile

    def get(self, path: str) -> Any:
        """The composed value at ``path`` (plain data; None where the config has no such key)."""
        v = OmegaConf.select(self.cfg, path, default=None)
        return OmegaConf.to_container(v, resolve=True) if isinstance(v, (DictConfig, ListConfig)) else v

    @functools.cached_property
    def actor(self):
        return verl_config.actor_config(self.cfg)

    @functools.cached_property
    def optim(self):
        return verl_config.optimizer_config(self.cfg)

    @functools.cached_property
    def rollout(self):
        return verl_config.rollout_config(self.cfg)

    @functools.cached_property
    def algorithm(self):
        return verl_config.algorithm_config(self.cfg)

    @functools.cached_property
    def spec(self) -> verl_config.TrainingSpec:
        return verl_config.training_spec(self.cfg)

    @property
    def backend_type(self) -> str:
        return self.opts.backend.type

    @property
    def name(self) -> str:
        """The backend as a refusal names it."""
        return self.profile.name

    @property
    def over(self) -> str:
        """The backend as a cortex refusal names it: "Snowflake Cortex", or "<profile> over cortex"."""
        from arctic_platform.backend_profile import CORTEX

        return self.name if self.name == CORTEX.name else f"{self.name} over cortex"

    @property
    def cortex_name(self) -> str:
        """The backend, naming the cortex transport when it is the one at fault."""
        return self.over if self.backend_type == "cortex" else self.profile.name

    def old_from_rollout(self) -> bool:
        """verl's bypass mode: ``old_log_probs`` are the rollout's (verl never calls compute_log_prob)."""
        return bool((self.get("algorithm.rollout_correction") or {}).get("bypass_mode"))


CheckResult = Refusal | list[Refusal] | None
Check = Callable[[SettingsContext], CheckResult]
Note = Callable[[SettingsContext], Optional[str]]


@dataclass(frozen=True)
class Setting:
    """One verl setting (``pattern`` is a dotted path from the config root; ``.*`` covers a sub-tree)."""

    pattern: str
    role: str
    how: str
    """How it is honoured (or why it cannot be), as the table shows it."""
    check: Optional[Check] = None
    note: Optional[Note] = None
    """A line worth showing at start-up that refuses nothing (a backend difference that changes no number)."""
