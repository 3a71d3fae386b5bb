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
"""``RemoteBackend`` ABC and its registry.

A remote backend is a plugin that owns training, log-prob computation, rollout and weight sync in its own
processes (for example an Arctic RL server). verl keeps the control loop and talks to it through

* a *forwarder* Ray worker (registered with :meth:`RemoteBackendRegistry.register_worker`) that replaces
  ``ActorRolloutRefWorker`` in a CPU-only resource pool,
* a ``RolloutReplica`` registered under ``actor_rollout_ref.rollout.name``,
* the no-op ``"remote_backend"`` checkpoint engine.

This module imports only the standard library and omegaconf, so it loads on machines without torch.
"""

from __future__ import annotations

import abc
from typing import Any, Callable, Optional

from omegaconf import DictConfig


class RemoteBackend(abc.ABC):
    """An out-of-process backend for verl's V1 trainer. Options live under ``main_config.remote_backend.<name>``."""

    @classmethod
    @abc.abstractmethod
    def from_config(cls, main_config: DictConfig, *, handle: Optional[dict[str, Any]] = None) -> RemoteBackend:
        """Sole public constructor.

        Args:
            main_config: the whole trainer config.
            handle: ``None`` creates the backend (driver); a dict from :meth:`reconnect_handle` re-attaches to it
                (forwarder workers, rollout replicas).
        """

    @classmethod
    def check_config(cls, main_config: DictConfig) -> None:
        """Optional start-up check, run by ``main_ppo`` before Ray starts and by a dry run: raise ``ValueError``
        naming every setting the backend cannot honour (one line each). The default accepts everything."""
        return None

    @classmethod
    def prestart(cls, main_config: DictConfig) -> None:
        """Optional: start what is slow to start (a server, its engines) before Ray starts. ``main_ppo`` calls it
        once, after :meth:`check_config` and before ``ray.init``, in the driver; what it starts must outlive the
        call (the driver lives for the whole run) and be released when the driver exits. :meth:`from_config`, run
        later in verl's TaskRunner actor, may then adopt it instead of starting its own. The default starts
        nothing."""
        return None

    @abc.abstractmethod
    def reconnect_handle(self) -> dict[str, Any]:
        """A serializable handle that :meth:`from_config` accepts to re-attach in another process."""

    @abc.abstractmethod
    def destroy(self) -> None:
        """Release the backend. Idempotent. Callers also accept an awaitable result (plugins may be async)."""

    @abc.abstractmethod
    async def update_weights(self) -> dict[str, Any]:
        """Train -> rollout weight sync (no-op when colocated)."""

    @abc.abstractmethod
    async def save_checkpoint(self) -> dict[str, Any]:
        """Save model and optimizer state."""

    @abc.abstractmethod
    def requires_single_forwarder(self) -> bool:
        """``True`` makes the trainer require ``trainer.n_gpus_per_node * trainer.nnodes == 1``."""


class RemoteBackendRegistry:
    """Process-wide registry of remote backends and their lazily loaded forwarder workers.

    Identity is by object: registering the same class (or loader) object again is a no-op, a different object
    under a taken name raises ``ValueError``. Re-running a registering test in one process, or reloading a
    module that registers a fresh lambda loader, therefore raises; this is deliberate (upstream behaviour).
    """

    _backends: dict[str, type[RemoteBackend]] = {}
    _worker_loaders: dict[str, Callable[[], type]] = {}
    _resolved_workers: dict[str, type] = {}

    @classmethod
    def register(cls, name: str) -> Callable[[type[RemoteBackend]], type[RemoteBackend]]:
        """Class decorator registering a :class:`RemoteBackend` under ``name``."""

        def decorator(backend_cls: type[RemoteBackend]) -> type[RemoteBackend]:
            existing = cls._backends.get(name)
            if existing is not None and existing is not backend_cls:
                raise ValueError(
                    f"Remote backend name '{name}' is already registered to {existing.__module__}."
                    f"{existing.__qualname__}; cannot re-register it to {backend_cls.__module__}."
                    f"{backend_cls.__qualname__}."
                )
            cls._backends[name] = backend_cls
            return backend_cls

        return decorator

    @classmethod
    def get(cls, name: str) -> type[RemoteBackend]:
        """Return the backend class registered under ``name``.

        Raises:
            KeyError: unknown name (the message lists the registered names and how to register a plugin).
        """
        try:
            return cls._backends[name]
        except KeyError:
            raise KeyError(
                f"Unknown remote backend '{name}'. Registered: {sorted(cls._backends)}. Install the backend's "
                f"plugin (a 'verl.plugins' entry point registers it on `import verl`) or set "
                f"VERL_USE_EXTERNAL_MODULES=<pkg>.integrations.verl.register"
            ) from None

    @classmethod
    def list(cls) -> list[str]:
        """Sorted names of the registered backends."""
        return sorted(cls._backends)

    @classmethod
    def register_worker(cls, name: str, loader: Callable[[], type]) -> None:
        """Register a zero-argument ``loader`` returning the forwarder worker class of backend ``name``.

        The loader is not called here, so the worker module (and its heavy imports) loads only when a trainer
        resolves it. The same loader object again is a no-op; a different one raises ``ValueError``.
        """
        existing = cls._worker_loaders.get(name)
        if existing is not None and existing is not loader:
            raise ValueError(f"Remote backend '{name}' worker loader already registered to {existing!r}")
        cls._worker_loaders[name] = loader

    @classmethod
    def get_worker(cls, name: str) -> Optional[type]:
        """Return the forwarder worker class of backend ``name``, calling its loader once and caching the result.

        Returns ``None`` when no loader is registered; ``PPOTrainerRemoteBackend`` then raises ``RuntimeError``
        (there is no fallback to the stock ``ActorRolloutRefWorker``, which would need GPUs).
        """
        if name in cls._resolved_workers:
            return cls._resolved_workers[name]
        loader = cls._worker_loaders.get(name)
        if loader is None:
            return None
        worker_cls = loader()
        cls._resolved_workers[name] = worker_cls
        return worker_cls
