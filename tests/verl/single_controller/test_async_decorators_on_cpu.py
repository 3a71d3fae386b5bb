# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Coroutine status survives verl's worker decorators (patches 0012-0014, PR #7102 defect 5)."""

import asyncio
import functools
import inspect

import pytest
import ray
from tensordict import TensorDict

from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import MAGIC_ATTR, Dispatch, register
from verl.single_controller.ray import RayClassWithInitArgs
from verl.single_controller.ray.base import create_colocated_worker_cls
from verl.utils.profiler import DistProfiler
from verl.workers.engine_workers import _with_routing_replay_flag


def _sync_passthrough(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapper


def test_register_rejects_async_hidden_by_sync_wrapper():
    with pytest.raises(TypeError) as exc:

        class _W(Worker):
            @register(dispatch_mode=Dispatch.ONE_TO_ALL)
            @_sync_passthrough
            async def compute(self, x):
                return x

    assert str(exc.value).startswith("@register: async method '")
    assert "compute' is wrapped by a synchronous decorator" in str(exc.value)


def test_register_keeps_plain_sync_and_async():
    class _W(Worker):
        @register(dispatch_mode=Dispatch.ONE_TO_ALL)
        def a(self):
            return 1

        @register(dispatch_mode=Dispatch.ONE_TO_ALL)
        async def b(self):
            return 2

    assert not inspect.iscoroutinefunction(_W.a) and inspect.iscoroutinefunction(_W.b)


class _Owner:
    def __init__(self, profiler):
        self.profiler = profiler
        self.enable_routing_replay = True
        self.calls = 0


class _RecordingImpl:
    """A profiler backend whose annotate yields sync wrappers only (as verl's nsys/torch backends do)."""

    def __init__(self):
        self.annotated = []

    def annotate(self, **kwargs):
        def deco(func):
            @functools.wraps(func)
            def wrapper(*args, **kw):
                self.annotated.append(func.__name__)
                return func(*args, **kw)

            return wrapper

        return deco


async def _target(self, x):
    self.calls += 1
    await asyncio.sleep(0)
    return x * 2


@pytest.mark.parametrize("enabled", [False, True], ids=["profiler-off", "profiler-on"])
def test_annotate_keeps_coroutine_status_and_calls_once(enabled, monkeypatch):
    profiler = DistProfiler(rank=0)
    impl = _RecordingImpl()
    monkeypatch.setattr(profiler, "_impl", impl, raising=False)
    for check in ("check_enable", "check_this_step", "check_this_rank"):
        monkeypatch.setattr(profiler, check, lambda enabled=enabled: enabled)
    decorated = DistProfiler.annotate(color="red", role="actor_compute")(_target)
    assert inspect.iscoroutinefunction(decorated)
    owner = _Owner(profiler)
    assert asyncio.run(decorated(owner, 21)) == 42
    assert owner.calls == 1
    assert impl.annotated == (["_target"] if enabled else [])
    # without a profiler attribute the target is awaited directly
    owner.profiler = None
    assert asyncio.run(decorated(owner, 1)) == 2 and owner.calls == 2


def test_annotate_sync_path_unchanged():
    def f(self, x):
        return x + 1

    decorated = DistProfiler.annotate()(f)
    assert not inspect.iscoroutinefunction(decorated)
    assert decorated(_Owner(None), 1) == 2


def test_routing_replay_flag_keeps_coroutine_status():
    decorated = _with_routing_replay_flag(True)(_target_td)
    assert inspect.iscoroutinefunction(decorated)
    owner = _Owner(None)
    td = TensorDict({}, batch_size=[])
    assert asyncio.run(decorated(owner, td)) == "ok"
    assert td["enable_routing_replay"] is True or td.get_non_tensor("enable_routing_replay") is True


async def _target_td(self, data):
    await asyncio.sleep(0)
    return "ok"


class StockStyleWorker(Worker):
    """Decorated like the stock ActorRolloutRefWorker compute methods, but async."""

    def __init__(self):
        super().__init__()
        self.profiler = None
        self.enable_routing_replay = False

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    @DistProfiler.annotate(color="blue", role="actor_compute_log_prob")
    @_with_routing_replay_flag(enabled=False)
    async def compute_log_prob(self, data):
        return data


def test_workerdict_proxy_stays_a_coroutine_function():
    wd = create_colocated_worker_cls({"actor": RayClassWithInitArgs(cls=ray.remote(StockStyleWorker))})
    proxy = wd.cls.__ray_actor_class__.actor_compute_log_prob
    assert inspect.iscoroutinefunction(proxy)
    assert getattr(proxy, MAGIC_ATTR)["dispatch_mode"] == Dispatch.ONE_TO_ALL
