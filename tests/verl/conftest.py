# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the verl tests: an isolated RemoteBackendRegistry and a minimal test plugin backend.

The plugin backend is what a plugin registers (every abstract member of verl's ``RemoteBackend``, nothing more), not
a stand-in for verl: the registry, trainer and config the tests drive are the installed patched verl. verl is
imported inside the fixtures, so collecting this folder stays cheap.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def remote_backend_registry(monkeypatch):
    """verl's ``RemoteBackendRegistry`` with its tables copied for this test (the process-wide ones come back after)."""
    from verl.remote_backend import RemoteBackendRegistry

    for table in ("_backends", "_worker_loaders", "_resolved_workers"):
        monkeypatch.setattr(RemoteBackendRegistry, table, dict(getattr(RemoteBackendRegistry, table)))
    return RemoteBackendRegistry


@pytest.fixture(scope="session")
def plugin_backend_cls():
    """A test plugin backend class: ``instances`` lists what ``from_config`` made, ``destroyed`` counts
    ``destroy()`` calls; ``reconnect_handle()`` is ``{"name": <the name it was registered under>, "pid": 1}``."""
    from verl.remote_backend import RemoteBackend

    class PluginBackend(RemoteBackend):
        instances: list = []
        registered_as = "t_backend"

        def __init__(self):
            self.destroyed = 0

        @classmethod
        def from_config(cls, main_config, *, handle=None):
            inst = cls()
            cls.instances.append(inst)
            return inst

        def reconnect_handle(self):
            return {"name": self.registered_as, "pid": 1}

        def destroy(self):
            self.destroyed += 1

        async def update_weights(self):
            return {}

        async def save_checkpoint(self):
            return {}

        def requires_single_forwarder(self):
            return True

    return PluginBackend


@pytest.fixture(scope="session")
def plugin_forwarder_cls():
    """The test plugin's forwarder: a bare verl ``Worker`` subclass."""
    from verl.single_controller.base import Worker

    class Forwarder(Worker):
        pass

    return Forwarder


@pytest.fixture
def register_backend(remote_backend_registry, plugin_backend_cls, plugin_forwarder_cls):
    """``register_backend(name, cls=<plugin_backend_cls>, worker=True)``: put ``cls`` (its ``instances`` emptied)
    and, with ``worker``, ``plugin_forwarder_cls`` under ``name`` in the isolated registry; returns ``cls``."""

    def register(name: str, cls=plugin_backend_cls, worker: bool = True):
        cls.instances = []
        cls.registered_as = name
        remote_backend_registry._backends[name] = cls
        if worker:
            remote_backend_registry._worker_loaders[name] = lambda: plugin_forwarder_cls
        return cls

    return register
