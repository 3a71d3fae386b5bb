# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Async (one-step off-policy) mode of PPOTrainerRemoteBackend: config, replay buffer, staleness bound, version tags.

The trainer, its replay buffers and the config are the installed patched verl; the backend is a test plugin (what a
plugin registers). The end-to-end runs are in tests/special_e2e/test_smoke_on_cpu.py (``--async``).
"""

import re

import pytest

from verl.trainer.ppo.v1 import PPOTrainerRemoteBackend
from verl.trainer.ppo.v1.remote_backend_async import (
    ASYNC_TRAINER_MODE,
    StalenessBoundReplayBuffer,
    check_staleness,
    trajectory_staleness,
)
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync

BASE = [
    "trainer.remote_backend=t_async",
    "trainer.v1.trainer_mode=remote_backend",
    "algorithm.adv_estimator=grpo",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    "trainer.n_gpus_per_node=1",
    "trainer.nnodes=1",
    "trainer.logger=[console]",
    "trainer.v1.sampler.poll_interval=0.1",
]
ASYNC = ["+remote_backend.async_rollout.enable=true"]


@pytest.fixture
def backend(register_backend):
    """The conftest's test plugin backend (+ its forwarder) under 't_async', in an isolated copy of the registry."""
    return register_backend("t_async")


def test_sync_mode_is_the_default_and_unchanged(compose, backend):
    cfg = compose(BASE)
    trainer = PPOTrainerRemoteBackend(cfg)
    assert trainer._async is None
    assert cfg.trainer.v1.trainer_mode == "sync" and trainer.trainer_mode == "sync"
    assert type(trainer.replay_buffer) is ReplayBuffer  # verl's sync buffer, not the async one
    assert trainer.replay_buffer.max_off_policy_threshold == 8  # verl's default, untouched
    assert trainer.replay_buffer.poll_interval == 0.1
    # an explicit enable=false is the sync loop too
    cfg = compose(BASE + ["+remote_backend.async_rollout.enable=false"])
    assert type(PPOTrainerRemoteBackend(cfg).replay_buffer) is ReplayBuffer


def test_async_mode_uses_verls_async_buffer_with_the_staleness_threshold(compose, backend):
    cfg = compose(BASE + ASYNC + ["trainer.v1.sampler.max_off_policy_strategy=wait"])
    trainer = PPOTrainerRemoteBackend(cfg)
    assert trainer.trainer_mode == ASYNC_TRAINER_MODE == cfg.trainer.v1.trainer_mode
    rb = trainer.replay_buffer
    assert isinstance(rb, ReplayBufferAsync) and type(rb) is StalenessBoundReplayBuffer
    # verl counts spanned versions: one-step off-policy spans 2
    assert rb.max_off_policy_threshold == 2 == cfg.trainer.v1.sampler.max_off_policy_threshold
    assert rb.max_off_policy_strategy == "wait" and rb.max_staleness == 1 and rb.poll_interval == 0.1
    assert (trainer._async.max_staleness, trainer._async.prefetch_batches) == (1, 1)
    assert trainer.parameter_sync_step == 1


def test_async_staleness_two_prefetches_two(compose, backend):
    trainer = PPOTrainerRemoteBackend(compose(BASE + ASYNC + ["+remote_backend.async_rollout.max_staleness=2"]))
    assert trainer.replay_buffer.max_off_policy_threshold == 3
    assert (trainer._async.max_staleness, trainer._async.prefetch_batches) == (2, 2)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["+remote_backend.async_rollout.max_staleness=0"], "max_staleness must be an integer >= 1"),
        (["+remote_backend.async_rollout.prefetch_batches=2"], r"prefetch_batches must be an integer in \[1, max_s"),
        (
            ["trainer.v1.sampler.custom_sampler.path=x.py", "trainer.v1.sampler.custom_sampler.name=X"],
            "unset trainer.v1.sampler.custom_sampler",
        ),
        (["+remote_backend.async_rollout.drain_timeout_s=-1"], "drain_timeout_s must be >= 0"),
    ],
)
def test_bad_async_config_fails_before_the_backend_exists(compose, backend, overrides, message):
    with pytest.raises(ValueError, match=f"^PPOTrainerRemoteBackend: remote_backend.async_rollout.*{message}"):
        PPOTrainerRemoteBackend(compose(BASE + ASYNC + overrides))
    assert backend.instances == []


def _tags(versions, pad=0):
    tags = [{"status": "success", "min_global_steps": v, "max_global_steps": v} for v in versions]
    return tags + [{"is_padding": True} for _ in range(pad)]


def test_version_tags_give_the_staleness_histogram():
    # step 5 trains with policy version 4: tags 4 are fresh, 3 is one step old; padding rows do not count
    tags = _tags([4, 3, 3, 4, 3], pad=2) + [{"status": "success", "min_global_steps": None}]
    assert trajectory_staleness(tags, 5) == [0, 1, 1, 0, 1]
    assert check_staleness(tags, 5, max_staleness=1) == {
        "training/off_policy/staleness_hist/0": 2,
        "training/off_policy/staleness_hist/1": 3,
    }


@pytest.mark.parametrize("versions, bad", [([4, 2], "[2]"), ([5, 4], "[-1]")])
def test_staleness_bound_is_enforced(versions, bad):
    # version 2 at step 5 is two steps old; version 5 at step 5 was never synced (a mis-tagged result)
    with pytest.raises(RuntimeError, match=re.escape(f"step 5 sampled trajectories with staleness {bad} outside")):
        check_staleness(_tags(versions), 5, max_staleness=1)
    assert check_staleness(_tags([4, 2]), 5, max_staleness=2) == {
        "training/off_policy/staleness_hist/0": 1,
        "training/off_policy/staleness_hist/2": 1,
    }
