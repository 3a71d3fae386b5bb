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
"""Registrations only: the ``arctic`` remote backend, its lazy worker and replica loaders, its Hydra config path.

Loaded by ``import verl`` through the wheel's ``verl.plugins`` entry point, or by
``VERL_USE_EXTERNAL_MODULES=arctic_platform.integrations.verl.register``; importing it twice is harmless. It imports
nothing heavy: the forwarder worker and the rollout replica modules load only when verl resolves them.
"""

from __future__ import annotations

import importlib.metadata

BACKEND_NAME = "arctic"
ROLLOUT_NAME = "arctic"


def _seam_missing_error(exc: Exception) -> RuntimeError:
    try:
        version = importlib.metadata.version("verl")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return RuntimeError(
        f"arctic_platform: the installed verl {version} lacks the RemoteBackend seam ({type(exc).__name__}: {exc}). "
        "Stock verl was probably installed over arctic-verl; reinstall the arctic-verl wheel: "
        "pip install --force-reinstall --no-deps dist/verl-*+arctic.*.whl (arctic-verl doctor shows the install)"
    )


try:
    from verl.remote_backend import RemoteBackendRegistry
    from verl.workers.rollout.replica import RolloutReplicaRegistry
except ImportError as _exc:  # stock verl (no seam)
    raise _seam_missing_error(_exc) from _exc

from .adapter import ArcticRemoteBackend  # noqa: E402  (light: no torch/ray/httpx at import)


def _load_worker():
    from .v1.worker import ArcticV1ActorRolloutRefWorker

    return ArcticV1ActorRolloutRefWorker


def _load_replica():
    from .v1.replica import ArcticV1Replica

    return ArcticV1Replica


def _register_hydra_search_path() -> None:
    """Put this package's config folder on Hydra's search path, so ``remote_backend=arctic`` composes."""
    from hydra.core.plugins import Plugins
    from hydra.plugins.search_path_plugin import SearchPathPlugin

    from .hydra_plugin import ArcticSearchPathPlugin

    plugins = Plugins.instance()
    if ArcticSearchPathPlugin not in plugins.discover(SearchPathPlugin):
        plugins.register(ArcticSearchPathPlugin)


def register() -> None:
    """Idempotent: the same class and loader objects are registered again as no-ops."""
    RemoteBackendRegistry.register(BACKEND_NAME)(ArcticRemoteBackend)
    RemoteBackendRegistry.register_worker(BACKEND_NAME, _load_worker)
    RolloutReplicaRegistry.register(ROLLOUT_NAME, _load_replica)
    _register_hydra_search_path()


register()
