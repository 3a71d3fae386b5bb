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
"""Helpers and setting paths every start-up check uses."""

from __future__ import annotations

import functools
from typing import Any, Optional

from omegaconf import OmegaConf

from ...refusal import Refusal, shown
from ..model import ARR, Check, SettingsContext

A = f"{ARR}.actor"
R = f"{ARR}.rollout"
M = f"{ARR}.model"
F = f"{ARR}.ref"
RB = "remote_backend.arctic"
VERL_ITSELF = "verl 0.9.1"
"""Who refuses a config verl's own dataclasses reject (stock verl fails on it too, with any backend)."""
V1 = "verl's V1 trainer (remote_backend=arctic)"
"""Who cannot run what the remote loop never feeds (an estimator's input): verl's own trainer, on any backend."""


def hydra_value(v: Any) -> str:
    """``v`` as the right-hand side of a Hydra override."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(hydra_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{hydra_value(x)}" for k, x in v.items()) + "}"
    return str(v)


def set_(path: str, value: Any) -> str:
    """The override ``path=value``."""
    return f"{path}={hydra_value(value)}"


@functools.lru_cache(maxsize=8)
def _verl_default_config(engine: str):
    from ...options import verl_defaults

    return verl_defaults(engine)


def verl_default(ctx: SettingsContext, path: str) -> Any:
    """verl's default of ``path`` for the run's ``model_engine`` (verl's generated default config)."""
    node = _verl_default_config(str(ctx.cfg.model_engine))
    v = OmegaConf.select(node, path, default=None, throw_on_resolution_failure=False)
    return OmegaConf.to_container(v, resolve=False) if OmegaConf.is_config(v) else v


def _off(v: Any) -> bool:
    return v in (None, "", 0, False, [], {})


def refuse_unless_default(path: str, why: str, way_out: str = "set it back to verl's default") -> Check:
    """Refuse ``path`` when it differs from verl's default (an unset / off default also accepts any off value)."""

    def check(ctx: SettingsContext) -> Optional[Refusal]:
        default, v = verl_default(ctx, path), ctx.get(path)
        if v == default or (_off(default) and _off(v)):
            return None
        return Refusal(shown(path, v), ctx.name, why, f"{way_out} ({hydra_value(default)})", [set_(path, default)])

    return check


def router_replay(role: str) -> Check:
    """MoE router record / replay (``<role>.router_replay``: verl 0.9.0's actor and ref trees; 0.9.1 moved it into
    the Megatron engine's config): any mode but ``disabled`` is refused, the backends route every token themselves."""
    path = f"{ARR}.{role}.router_replay.mode"

    def check(ctx: SettingsContext) -> Optional[Refusal]:
        v = ctx.get(path)
        if v in (None, "disabled"):
            return None
        return Refusal(
            shown(path, v),
            ctx.name,
            "has no MoE router record / replay",
            "set it to disabled",
            [set_(path, "disabled")],
        )

    return check
