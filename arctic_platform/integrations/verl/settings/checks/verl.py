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
"""What verl's own dataclasses reject (stock verl fails on it too)."""

from __future__ import annotations

from ...refusal import Refusal, shown
from ...verl_config import VerlConfigError, typed_value_errors
from ..model import SettingsContext
from .common import VERL_ITSELF, A, R, set_, verl_default

# ------------------------------------------------------------------------------------------------ verl itself


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def verl_rejects(ctx: SettingsContext) -> list[Refusal]:
    """Blocks verl's own dataclasses reject, and values of the wrong type (verl checks neither until it runs them):
    stock verl fails on these too, with any backend."""
    out: list[Refusal] = []
    for block in ("actor", "optim", "rollout", "algorithm"):
        try:
            dc = getattr(ctx, block)
        except VerlConfigError as e:
            out.append(
                Refusal(
                    e.path,
                    VERL_ITSELF,
                    f"rejects it (as stock verl does, with any backend): {e.message}",
                    "fix this block as verl's message says",
                )
            )
            continue
        if block == "optim":
            continue  # walked with the actor (its optim field)
        path = {"actor": A, "rollout": R, "algorithm": "algorithm"}[block]
        for key, value, type_name in typed_value_errors(dc, path):
            out.append(
                Refusal(
                    shown(key, value),
                    VERL_ITSELF,
                    f"declares it {_article(type_name)} {type_name} (a {type(value).__name__} fails when verl reads "
                    "it)",
                    f"set it to {_article(type_name)} {type_name}",
                    [set_(key, verl_default(ctx, key))],
                )
            )
    return out
