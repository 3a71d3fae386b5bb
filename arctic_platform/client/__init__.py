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
"""Arctic RL client: an async client plus a sync wrapper, with ``local`` / ``onprem`` / ``cortex`` transports.

| File | Role |
|---|---|
| ``config.py`` | pydantic configs: ``ArcticRLClientConfig``, ``LocalConfig``, ``OnPremConfig``, ``CortexConfig`` |
| ``client.py`` | ``AsyncArcticRLClient`` (job lifecycle, the calls' bodies) and ``ArcticRLClient`` (sync wrapper) |
| ``transports/`` | one ``Transport`` interface; its ``local``, ``onprem`` (HTTP) and ``cortex`` (SnowAPI) classes |
| ``coalesce.py`` | batches concurrent ``generate`` calls of the verl plugin's rollout servers |
| ``errors.py`` | ``ArcticRLError`` and subclasses |

Exports are lazy (PEP 562): importing this package does not import torch or httpx.
"""

import importlib

_EXPORTS = {
    "AsyncArcticRLClient": "client",
    "ArcticRLClient": "client",
    "ArcticRLClientConfig": "config",
    "LocalConfig": "config",
    "OnPremConfig": "config",
    "CortexConfig": "config",
    "TrainingConfig": "config",
    "SamplingConfig": "config",
    "ArcticRLError": "errors",
    "ArcticRLJobError": "errors",
    "ArcticRLUnavailableError": "errors",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return __all__
