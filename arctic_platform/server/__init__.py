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
"""The embedded Arctic RL server: FastAPI app, job registry and torch + transformers engines.

| File | Role |
|---|---|
| ``app.py`` | ``create_app(ServerSettings)``: assembles the app from the ``routes/`` routers (jobs, training, ...) |
| ``settings.py`` | ``ServerSettings`` (the app) and ``ServerLimits`` (the registry): every server default, once |
| ``routes/`` | one ``APIRouter`` per concern; ``context.py``: the app context and job lookup as FastAPI dependencies |
| ``error_handlers.py`` / ``guard.py`` | errors as ``{"detail": one line}``; the token / body-size ASGI guard |
| ``engine_calls.py`` | engine calls in a worker thread under the job's lock (routes and the batcher) |
| ``batcher.py`` | the generate batcher: concurrent ``/generate`` requests into batched engine calls |
| ``jobs.py`` | job registry: PENDING -> RUNNING -> FAILED / TERMINATED, validation, transactional build |
| ``engines.py`` | the engines' public names (``training`` / ``sampling`` / ``logprob`` ``_engine.py`` modules) |
| ``loss.py`` | verl-semantics policy loss, aggregation modes and KL estimators |
| ``__main__.py`` | ``python -m arctic_platform.server`` = ``arctic-verl server`` |

Nothing heavy is imported here.
"""

import importlib

__all__ = ["create_app", "ServerSettings"]


def __getattr__(name: str):  # PEP 562: lazy exports
    if name in __all__:
        return getattr(importlib.import_module(f"{__name__}.app"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
