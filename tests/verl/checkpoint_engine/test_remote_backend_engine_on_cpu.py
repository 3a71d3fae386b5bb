# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The "remote_backend" checkpoint engine and CheckpointEngineManager's short-circuit (patches 0001, 0002).

Real Ray, a real RayWorkerGroup on a CPU-only pool, a real CheckpointEngineManager; the replicas are
RolloutReplica subclasses (a plugin's role), with and without ``set_global_steps``.
"""

import asyncio
import importlib.util
import sys

import pytest
import ray
from ray import cloudpickle

from verl.checkpoint_engine import CheckpointEngineManager, CheckpointEngineRegistry, RemoteBackendCheckpointEngine
from verl.checkpoint_engine.remote_backend import RemoteBackendCheckpointEngine as FromModule
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, register
from verl.single_controller.ray import RayClassWithInitArgs, RayWorkerGroup, ResourcePoolManager
from verl.workers.config.rollout import CheckpointEngineConfig
from verl.workers.rollout.replica import RolloutReplica

cloudpickle.register_pickle_by_value(sys.modules[__name__])


class RecordingForwarder(Worker):
    """A forwarder-shaped worker: async update_weights registered ONE_TO_ALL, non-blocking (seam contract)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    @register(dispatch_mode=Dispatch.ONE_TO_ALL, blocking=False)
    async def update_weights(self, global_steps=None, mode="auto"):
        await asyncio.sleep(0)
        self.calls.append((global_steps, mode))
        return {"ignored": True}

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def get_calls(self):
        return list(self.calls)


class _Replica(RolloutReplica):
    async def launch_servers(self):
        return None


class StepReplica(_Replica):
    def __init__(self):  # no rollout config needed: the manager only calls set_global_steps
        self.steps = []

    async def set_global_steps(self, global_steps):
        self.steps.append(global_steps)


class PlainReplica(_Replica):
    def __init__(self):
        pass


class SyncStepReplica(_Replica):
    def __init__(self):
        pass

    def set_global_steps(self, global_steps):  # plain def: the fan-out must refuse it
        return None


def test_registered_on_import():
    assert CheckpointEngineRegistry.get("remote_backend") is RemoteBackendCheckpointEngine is FromModule
    engine = CheckpointEngineRegistry.new("remote_backend", bucket_size=0, is_master=True)
    assert isinstance(engine, RemoteBackendCheckpointEngine)
    assert (engine.bucket_size, engine.is_master) == (0, True)
    assert RemoteBackendCheckpointEngine(unexpected="ignored").bucket_size == 0


def test_only_naive_and_remote_backend_without_optional_engines():
    optional = ("cupy", "nixl", "mooncake", "torch_npu")
    if any(importlib.util.find_spec(m) for m in optional):
        pytest.skip("an optional transport is installed, so more engines register")
    assert set(CheckpointEngineRegistry._registry) == {"naive", "remote_backend"}


def test_engine_is_a_no_op_that_refuses_to_move_weights():
    engine = RemoteBackendCheckpointEngine()
    assert engine.prepare() is None
    assert engine.init_process_group(rank=0) is None
    assert engine.finalize() is None
    assert RemoteBackendCheckpointEngine.build_topology(1, 1, [{}]) == ({}, {})
    with pytest.raises(NotImplementedError):
        asyncio.run(engine.send_weights(iter([])))
    with pytest.raises(NotImplementedError):
        engine.receive_weights()  # raises at call time: a plain function, not a generator


@pytest.fixture(scope="module")
def forwarder_wg(ray_cpu):
    mgr = ResourcePoolManager(resource_pool_spec={"global_pool": [1]}, mapping={}, use_gpu=False)
    mgr.create_resource_pool()
    pool = mgr.resource_pool_dict["global_pool"]
    assert pool.use_gpu is False
    wg = RayWorkerGroup(resource_pool=pool, ray_cls_with_init=RayClassWithInitArgs(cls=ray.remote(RecordingForwarder)))
    assert wg.use_gpu is False
    return wg


def _manager(wg, replicas, backend="remote_backend"):
    return CheckpointEngineManager(config=CheckpointEngineConfig(backend=backend), actor_wg=wg, replicas=replicas)


def test_update_weights_short_circuits_and_fans_out_steps(forwarder_wg):
    with_steps, plain = StepReplica(), PlainReplica()
    manager = _manager(forwarder_wg, [with_steps, plain])
    assert manager.update_weights(global_steps=7) == {}
    assert forwarder_wg.get_calls()[0][-1] == (7, "remote_backend")
    assert with_steps.steps == [7]  # replicas without set_global_steps are skipped


def test_update_weights_without_step_does_not_fan_out(forwarder_wg):
    with_steps = StepReplica()
    manager = _manager(forwarder_wg, [with_steps])
    assert manager.update_weights() == {}  # as _validate calls it
    assert forwarder_wg.get_calls()[0][-1] == (None, "remote_backend")
    assert with_steps.steps == []


def test_naive_backend_keeps_stock_behaviour(forwarder_wg):
    with_steps = StepReplica()
    manager = _manager(forwarder_wg, [with_steps], backend="naive")
    assert manager.update_weights(global_steps=3) == {}
    assert forwarder_wg.get_calls()[0][-1] == (3, "naive")
    assert with_steps.steps == []  # the naive path pushes steps inside the actor's update_weights instead


def test_plain_def_set_global_steps_is_rejected(forwarder_wg):
    manager = _manager(forwarder_wg, [SyncStepReplica()])
    with pytest.raises(TypeError, match="awaitable is required"):
        manager.update_weights(global_steps=1)
