# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""RemoteBackendRegistry and worker_utils, as upstream PR #7102 specifies them (tests/remote_backend there)."""

import pytest
import torch

from verl.remote_backend import RemoteBackend, RemoteBackendRegistry
from verl.remote_backend.worker_utils import normalize_backend_metrics
from verl.utils.metric import AggregationType, Metric

# each test runs on its own copy of the process-wide registry (tests/verl/conftest.py), restored afterwards
pytestmark = pytest.mark.usefixtures("remote_backend_registry")


@pytest.fixture
def other_backend_cls(plugin_backend_cls):
    """A second backend class, distinct from the conftest's test plugin."""
    return type("OtherBackend", (plugin_backend_cls,), {})


def test_abc_members_are_abstract():
    with pytest.raises(TypeError):
        RemoteBackend()  # type: ignore[abstract]
    assert RemoteBackend.__abstractmethods__ == {
        "from_config",
        "reconnect_handle",
        "destroy",
        "update_weights",
        "save_checkpoint",
        "requires_single_forwarder",
    }


def test_register_same_class_twice_is_noop_and_returns_class(plugin_backend_cls):
    assert RemoteBackendRegistry.register("t_same")(plugin_backend_cls) is plugin_backend_cls
    assert RemoteBackendRegistry.register("t_same")(plugin_backend_cls) is plugin_backend_cls
    assert RemoteBackendRegistry.get("t_same") is plugin_backend_cls


def test_register_collision_raises(plugin_backend_cls, other_backend_cls):
    RemoteBackendRegistry.register("t_coll")(plugin_backend_cls)
    with pytest.raises(ValueError, match="already registered") as exc:
        RemoteBackendRegistry.register("t_coll")(other_backend_cls)
    assert str(exc.value).startswith("Remote backend name 't_coll' is already registered to ")
    assert RemoteBackendRegistry.get("t_coll") is plugin_backend_cls


def test_unknown_backend_keyerror_lists_registered(plugin_backend_cls):
    RemoteBackendRegistry.register("t_known")(plugin_backend_cls)
    with pytest.raises(KeyError, match="Unknown remote backend") as exc:
        RemoteBackendRegistry.get("nope")
    msg = exc.value.args[0]
    assert msg.startswith("Unknown remote backend 'nope'. Registered: [")
    assert "'t_known'" in msg and "VERL_USE_EXTERNAL_MODULES=" in msg


def test_list_is_sorted(plugin_backend_cls, other_backend_cls):
    RemoteBackendRegistry.register("t_b")(plugin_backend_cls)
    RemoteBackendRegistry.register("t_a")(other_backend_cls)
    names = RemoteBackendRegistry.list()
    assert names == sorted(names) and {"t_a", "t_b"} <= set(names)


def test_worker_loader_is_lazy_and_called_once():
    calls = []

    class Fwd:
        pass

    def loader():
        calls.append(1)
        return Fwd

    RemoteBackendRegistry.register_worker("t_lazy", loader)
    assert calls == []  # not called at registration
    RemoteBackendRegistry.register_worker("t_lazy", loader)  # same loader object: no-op
    assert RemoteBackendRegistry.get_worker("t_lazy") is Fwd
    assert RemoteBackendRegistry.get_worker("t_lazy") is Fwd
    assert calls == [1]  # exactly once across two lookups
    with pytest.raises(ValueError) as exc:
        RemoteBackendRegistry.register_worker("t_lazy", lambda: Fwd)
    assert str(exc.value).startswith("Remote backend 't_lazy' worker loader already registered to ")
    assert RemoteBackendRegistry.get_worker("t_nothing") is None


def test_normalize_backend_metrics():
    m = Metric(value=2.0, aggregation=AggregationType.MEAN)
    dp = [Metric(value=1.0, aggregation="mean"), Metric(value=3.0, aggregation="mean")]
    out = normalize_backend_metrics({"a": 1.5, "b": m, "c": [1, 2], "d": torch.tensor(3.0), "e": dp})
    assert out["b"] is m
    assert out["c"] == [1, 2]
    assert isinstance(out["a"], Metric) and out["a"].aggregation == AggregationType.MEAN and out["a"].values == [1.5]
    assert out["d"].values == [3.0]
    assert out["e"] == 2.0  # Metric.aggregate_dp: mean over dp ranks
