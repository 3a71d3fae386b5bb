# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""PPOTrainerRemoteBackend, the PPOTrainer hooks and arctic-verl's fixes of PR #7102 defects 1-4, 6, 7.

The backend and forwarder (tests/verl/conftest.py) are test plugins (what a plugin registers), not stand-ins for
verl: the trainer, registries, config and resource-pool manager are the installed patched verl.
"""

import asyncio
import functools

import pytest

from verl.trainer.ppo.utils import Role
from verl.trainer.ppo.v1 import PPOTrainerRemoteBackend, PPOTrainerSync, get_trainer_cls
from verl.trainer.ppo.v1.trainer_base import PPOTrainer

BASE = [
    "trainer.remote_backend=t_backend",
    "trainer.v1.trainer_mode=remote_backend",
    "algorithm.adv_estimator=grpo",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    "trainer.n_gpus_per_node=1",
    "trainer.nnodes=1",
    "trainer.logger=[console]",
    "trainer.val_before_train=true",
]


@pytest.fixture
def backend(register_backend):
    """``backend(cls=<the conftest's plugin backend>, worker=True)``: register it (+ a forwarder) under 't_backend'
    in an isolated copy of the registry; returns the class."""
    return functools.partial(register_backend, "t_backend")


def test_trainer_registry_dispatch():
    assert get_trainer_cls("remote_backend") is PPOTrainerRemoteBackend
    assert issubclass(PPOTrainerRemoteBackend, PPOTrainerSync)
    with pytest.raises(ValueError) as exc:
        get_trainer_cls("nope")
    assert str(exc.value) == (
        "Unknown trainer 'nope'. Available trainers: colocate_async, remote_backend, separate_async, sync."
    )


def test_hook_defaults_unbound():
    assert PPOTrainer._actor_rollout_wg_extra_kwargs(None) == {}
    assert PPOTrainer._llm_server_replica_init_kwargs(None) == {}
    assert PPOTrainer._checkpoint_engine_backend(None) == "naive"
    # fresh literals: callers may mutate them
    assert PPOTrainer._actor_rollout_wg_extra_kwargs(None) is not PPOTrainer._actor_rollout_wg_extra_kwargs(None)


def test_requires_a_backend_name(compose, backend):
    backend()
    cfg = compose([o for o in BASE if not o.startswith("trainer.remote_backend")])
    with pytest.raises(ValueError, match="^PPOTrainerRemoteBackend requires either trainer.remote_backend=<name>"):
        PPOTrainerRemoteBackend(cfg)


def test_construct_hooks_and_pinned_sync_mode(compose, backend):
    cls = backend()
    cfg = compose(BASE)
    trainer = PPOTrainerRemoteBackend(cfg)
    assert len(cls.instances) == 1
    assert cfg.trainer.v1.trainer_mode == "sync"  # the loop is the stock sync one
    assert trainer._checkpoint_engine_backend() == "remote_backend"
    extras = {"main_config": cfg, "backend_handle": {"name": "t_backend", "pid": 1}}
    assert trainer._actor_rollout_wg_extra_kwargs() == extras
    assert trainer._llm_server_replica_init_kwargs() == extras
    trainer._destroy_backend()
    trainer._destroy_backend()  # idempotent
    assert cls.instances[0].destroyed == 1


def test_name_from_group_is_copied_into_trainer(compose, backend, register_backend, plugin_conf_dir):
    backend()
    register_backend("dummy")
    cfg = compose([f"hydra.searchpath=[file://{plugin_conf_dir}]", "remote_backend=dummy"] + BASE[1:])
    assert cfg.trainer.remote_backend is None
    trainer = PPOTrainerRemoteBackend(cfg)
    assert cfg.trainer.remote_backend == "dummy"
    trainer._destroy_backend()


@pytest.mark.parametrize(
    "overrides, message",
    [
        pytest.param(
            ["algorithm.adv_estimator=gae"],
            r"^algorithm.adv_estimator=gae: PPOTrainerRemoteBackend runs no critic .*; use a critic-free estimator",
            id="gae",
        ),
        pytest.param(
            ["actor_rollout_ref.rollout.tensor_model_parallel_size=2"],
            r"^PPOTrainerRemoteBackend: rollout world size 2 \(actor_rollout_ref.rollout.tensor_model_parallel_size=2 "
            r"x data_parallel_size=1 x pipeline_model_parallel_size=1\)",
            id="zero-replicas",
        ),
        pytest.param(
            ["reward.reward_model.enable=true", "reward.reward_model.enable_resource_pool=false"],
            r"^reward.reward_model.enable=True, reward.reward_model.enable_resource_pool=False: PPOTrainer",
            id="colocated-reward-model",
        ),
    ],
)
def test_bad_config_fails_before_backend_exists(compose, backend, overrides, message):
    cls = backend()
    with pytest.raises(ValueError, match=message):
        PPOTrainerRemoteBackend(compose(BASE + overrides))
    assert cls.instances == []  # no backend was created, so nothing can leak


@pytest.mark.parametrize(
    "overrides, mapped",
    [
        pytest.param([], Role.ActorRollout, id="no-ref"),
        pytest.param(["actor_rollout_ref.actor.use_kl_loss=true"], Role.ActorRolloutRef, id="ref"),
        pytest.param(
            ["actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.model.lora_rank=8"],
            Role.ActorRollout,
            id="lora-ref-in-actor",
        ),
    ],
)
def test_forwarder_replaces_the_role_the_base_mapped(compose, backend, plugin_forwarder_cls, overrides, mapped):
    backend()
    trainer = PPOTrainerRemoteBackend(compose(BASE + overrides))
    trainer._init_resource_pool_mgr()
    assert set(trainer.role_worker_mapping) & {Role.ActorRollout, Role.ActorRolloutRef} == {mapped}
    assert trainer.role_worker_mapping[mapped].__ray_actor_class__ is plugin_forwarder_cls
    # what _setup does next must not KeyError (PR #7102 mapped ActorRolloutRef under LoRA)
    assert trainer.resource_pool_manager.get_resource_pool is not None
    assert trainer.resource_pool_manager.mapping[mapped] == "global_pool"
    assert trainer.resource_pool_manager.pool_use_gpu("global_pool") is False
    assert trainer.resource_pool_manager.use_gpu is True  # manager default untouched
    trainer._destroy_backend()


def test_reward_pool_keeps_gpus(compose, backend):
    backend()
    cfg = compose(
        BASE
        + [
            "reward.reward_model.enable=true",
            "reward.reward_model.enable_resource_pool=true",
            "reward.reward_model.n_gpus_per_node=1",
            "reward.reward_model.nnodes=1",
        ]
    )
    trainer = PPOTrainerRemoteBackend(cfg)
    trainer._init_resource_pool_mgr()
    assert trainer.resource_pool_manager.pool_use_gpu("reward_pool") is True
    assert trainer.resource_pool_manager.pool_use_gpu("global_pool") is False
    trainer._destroy_backend()


def test_missing_forwarder_worker(compose, backend):
    backend(worker=False)
    trainer = PPOTrainerRemoteBackend(compose(BASE))
    with pytest.raises(RuntimeError, match="^Remote backend 't_backend' did not register an ActorRollout forwarder"):
        trainer._init_resource_pool_mgr()
    trainer._destroy_backend()


def test_single_forwarder_required(compose, backend):
    backend()
    trainer = PPOTrainerRemoteBackend(compose(BASE[:-4] + ["trainer.n_gpus_per_node=2", "trainer.logger=[console]"]))
    with pytest.raises(AssertionError, match="^Backend 't_backend' requires a single forwarder worker"):
        trainer._init_resource_pool_mgr()
    trainer._destroy_backend()


def test_throughput_uses_backend_gpu_count(compose, backend, plugin_backend_cls, caplog):
    class GpuCountingBackend(plugin_backend_cls):
        def num_gpus(self):
            return 8

    backend(GpuCountingBackend)
    trainer = PPOTrainerRemoteBackend(compose(BASE))
    assert trainer._get_n_gpus_for_throughput() == 8
    trainer._destroy_backend()
    backend()
    trainer = PPOTrainerRemoteBackend(compose(BASE))
    with caplog.at_level("WARNING"):
        assert trainer._get_n_gpus_for_throughput() == 1
        assert trainer._get_n_gpus_for_throughput() == 1
    assert sum("perf/throughput is per forwarder" in r.getMessage() for r in caplog.records) == 1
    trainer._destroy_backend()


def test_backend_destroyed_when_init_of_trainer_fails(compose, backend):
    cls = backend()
    with pytest.raises(AssertionError):  # ReplayBuffer rejects the strategy inside PPOTrainer.__init__
        PPOTrainerRemoteBackend(compose(BASE + ["trainer.v1.sampler.max_off_policy_strategy=bogus"]))
    assert [b.destroyed for b in cls.instances] == [1]


@pytest.mark.parametrize("async_destroy", [False, True], ids=["sync-destroy", "async-destroy"])
def test_backend_destroyed_when_setup_fails(compose, backend, plugin_backend_cls, async_destroy, tmp_path):
    class AsyncDestroyBackend(plugin_backend_cls):
        async def destroy(self):
            await asyncio.sleep(0)
            self.destroyed += 1

    cls = backend(AsyncDestroyBackend if async_destroy else plugin_backend_cls)
    trainer = PPOTrainerRemoteBackend(compose(BASE + [f"actor_rollout_ref.model.path={tmp_path}/no-such-model"]))
    with pytest.raises(Exception):  # noqa: B017 - any setup failure (here: the tokenizer cannot load)
        trainer.init()
    assert [b.destroyed for b in cls.instances] == [1]  # an async destroy() is run to completion too


def test_backend_destroyed_when_fit_fails(compose, backend):
    cls = backend()
    trainer = PPOTrainerRemoteBackend(compose(BASE))
    with pytest.raises(Exception):  # noqa: B017 - fit() without init() fails in validation
        trainer.fit(agent_loop_manager=None)
    assert [b.destroyed for b in cls.instances] == [1]
