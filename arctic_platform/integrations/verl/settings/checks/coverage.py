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
"""Running one check (:func:`run`)."""

from __future__ import annotations

from ...refusal import Refusal
from ...verl_config import VerlConfigError
from ..model import Check, CheckResult, SettingsContext


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
