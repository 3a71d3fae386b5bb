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
"""Coverage: settings no table entry covers, and running one check."""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

import verl

from ...refusal import Refusal, shown
from ...verl_config import VerlConfigError
from ..model import ARR, Check, CheckResult, SettingsContext

# ------------------------------------------------------------------------------------------------ coverage


def uncovered(ctx: SettingsContext) -> list[Refusal]:
    """Keys under ``actor_rollout_ref`` no table entry covers (added with ``+``): never silently ignored."""
    from ..table import covering

    tree = OmegaConf.to_container(ctx.cfg.actor_rollout_ref, resolve=False)
    out = []
    for path, value in _leaves(tree, ARR):
        if path.endswith("._target_") or covering(path) is not None:
            continue
        out.append(
            Refusal(
                shown(path, value),
                ctx.name,
                f"does not know this setting (verl {verl.__version__}'s config has no such key, so nothing reads it)",
                "remove it",
                [f"~{path}"],
            )
        )
    return out


def _leaves(d: Any, prefix: str):
    if isinstance(d, dict) and d:
        for k, v in d.items():
            yield from _leaves(v, f"{prefix}.{k}")
    else:
        yield prefix, d


def run(check: Check, ctx: SettingsContext) -> list[Refusal]:
    """``check``'s refusals as a list; a check that reads a block verl rejects yields none (:func:`verl_rejects`
    reports the block once)."""
    try:
        result: CheckResult = check(ctx)
    except VerlConfigError:
        return []
    if result is None:
        return []
    return list(result) if isinstance(result, list) else [result]
