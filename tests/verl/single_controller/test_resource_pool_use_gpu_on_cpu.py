# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""ResourcePoolManager.use_gpu and the per-pool override (patch 0003), on a real CPU-only Ray instance."""

import dataclasses
import sys

import pytest
import ray
from ray import cloudpickle

from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, register
from verl.single_controller.ray import RayClassWithInitArgs, RayWorkerGroup, ResourcePoolManager

cloudpickle.register_pickle_by_value(sys.modules[__name__])


class AsyncWorker(Worker):
    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    async def ping(self, x):
        import ray as _ray

        return {"x": x + 1, "gpu_ids": _ray.get_gpu_ids(), "rank": self.rank}


def test_use_gpu_is_the_last_field_defaulting_true():
    fields = dataclasses.fields(ResourcePoolManager)
    assert fields[-1].name == "use_gpu" and fields[-1].default is True
    mgr = ResourcePoolManager(resource_pool_spec={"global_pool": [1]}, mapping={})
    assert mgr.use_gpu is True and mgr.pool_use_gpu("global_pool") is True
    mgr.set_pool_use_gpu("global_pool", False)
    assert mgr.pool_use_gpu("global_pool") is False and mgr.pool_use_gpu("reward_pool") is True


def test_manager_wide_false_skips_gpu_check(ray_cpu):
    mgr = ResourcePoolManager(resource_pool_spec={"global_pool": [1], "other": [1]}, mapping={}, use_gpu=False)
    mgr.create_resource_pool()  # 0.9.1 raised "Total available GPUs 0 is less than total desired GPUs 2"
    assert all(not p.use_gpu for p in mgr.resource_pool_dict.values())


def test_per_pool_override_keeps_other_pools_on_gpu(ray_cpu):
    mgr = ResourcePoolManager(resource_pool_spec={"global_pool": [1], "reward_pool": [1]}, mapping={})
    mgr.set_pool_use_gpu("global_pool", False)
    # Only the reward pool still wants a GPU, so the check counts 1 (not 2) and fails on this CPU machine.
    with pytest.raises(ValueError, match="less than total desired GPUs 1$"):
        mgr.create_resource_pool()
    assert mgr.resource_pool_dict["global_pool"].use_gpu is False
    assert mgr.resource_pool_dict["reward_pool"].use_gpu is True


def test_worker_group_on_cpu_pool_calls_async_method(ray_cpu):
    mgr = ResourcePoolManager(resource_pool_spec={"global_pool": [1]}, mapping={})
    mgr.set_pool_use_gpu("global_pool", False)
    mgr.create_resource_pool()
    pool = mgr.resource_pool_dict["global_pool"]
    assert pool.get_placement_groups()[0].bundle_specs == [{"CPU": 3.0}]
    wg = RayWorkerGroup(resource_pool=pool, ray_cls_with_init=RayClassWithInitArgs(cls=ray.remote(AsyncWorker)))
    assert wg.use_gpu is False
    (out,) = wg.ping(41)
    assert out == {"x": 42, "gpu_ids": [], "rank": 0}
