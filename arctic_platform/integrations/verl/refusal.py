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
"""The one form of a start-up refusal: ``<setting>=<value>: <backend> <why>; <way out>``.

Every check of the plugin (the arctic options, verl's settings per backend profile, what the remote loop cannot
run) returns :class:`Refusal` lines; the start-up path collects all of them before it raises, so a config is refused
once with everything wrong in it. A refusal is a ``str`` (the line, as logs, docs and the probe print it) that also
carries its parts and ``fix``: Hydra overrides that apply the way out (the corpus test applies them and checks that
the config then passes). Torch-free, no verl import.
"""

from __future__ import annotations

from typing import Any, Iterable

__all__ = ["ArcticConfigError", "Refusal", "shown"]


def shown(path: str, value: Any) -> str:
    """``path=value`` as a refusal names a setting (``repr`` of the value, as the user would read it back)."""
    return f"{path}={value!r}"


class Refusal(str):
    """One line: ``<setting>: <backend> <why>; <way out>`` (a ``str``), with its parts as attributes.

    Args:
        setting: what the user set, as ``path=value`` (:func:`shown`; several joined by ", "), or a bare path.
        backend: who cannot honour it: a backend profile's name ("Arctic-Platform main"), or "verl 0.9.1" for a
            config verl itself rejects.
        why: the rest of the sentence after ``backend`` (a verb phrase: "computes only ['vanilla']").
        way_out: what to change, in words ("set it to false").
        fix: Hydra overrides that apply ``way_out`` (empty when it needs something outside the config).
    """

    setting: str
    backend: str
    why: str
    way_out: str
    fix: tuple[str, ...]

    def __new__(cls, setting: str, backend: str, why: str, way_out: str, fix: Iterable[str] = ()) -> Refusal:
        line = f"{setting}: {backend} {why}; {way_out}"
        obj = super().__new__(cls, " ".join(line.split()))
        obj.setting, obj.backend, obj.why, obj.way_out, obj.fix = setting, backend, why, way_out, tuple(fix)
        return obj

    def __reduce__(self):
        return (Refusal, (self.setting, self.backend, self.why, self.way_out, self.fix))


class ArcticConfigError(ValueError):
    """A verl configuration the arctic backend cannot honour, raised at start-up with every :class:`Refusal` of it
    (``refusals``), one line each."""

    def __init__(self, message: str, refusals: Iterable[Refusal] = ()):
        super().__init__(message)
        self.refusals = list(refusals)
