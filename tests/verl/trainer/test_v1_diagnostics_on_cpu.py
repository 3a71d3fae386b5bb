# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Issue-8 patches: poll interval config (0015), TransferQueue CPU check (0016), agent-loop errors (0017).

The end-to-end agent-loop failure (a rollout server that raises) runs with the arctic plugin in
tests/arctic_platform/integrations/verl/test_trainer_e2e_on_cpu.py.
"""

import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from verl.trainer.ppo.v1 import PPOTrainerSync
from verl.trainer.ppo.v1.diagnostics import (
    check_ray_cpus_for_transfer_queue,
    describe_agent_loop_error,
    first_agent_loop_error,
    ray_cpu_demand,
)
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

BASE = ["algorithm.adv_estimator=grpo", "trainer.n_gpus_per_node=1", "trainer.nnodes=1"]


def _wait(replay_buffer, monkeypatch) -> list[float]:
    """The sleeps one poll wait asks for (recorded, not timed: no timing assertion)."""
    import verl.trainer.ppo.v1.replay_buffer as rb

    slept: list[float] = []
    monkeypatch.setattr(rb, "time", SimpleNamespace(sleep=slept.append, time=time.time))
    replay_buffer._wait_for_next_poll("train", time.time())
    return slept


def test_poll_interval_default_unchanged(compose, monkeypatch):
    cfg = compose(BASE)
    assert cfg.trainer.v1.sampler.poll_interval == 2.0
    trainer = PPOTrainerSync(cfg)
    assert type(trainer.replay_buffer) is ReplayBuffer
    assert trainer.replay_buffer.poll_interval == 2.0
    assert _wait(trainer.replay_buffer, monkeypatch) == [2.0]


def test_poll_interval_reaches_the_sampler_and_shortens_the_wait(compose, monkeypatch):
    trainer = PPOTrainerSync(compose(BASE + ["trainer.v1.sampler.poll_interval=0.05"]))
    assert trainer.replay_buffer.poll_interval == 0.05
    assert _wait(trainer.replay_buffer, monkeypatch) == [0.05]  # 2.0 s before patch 0015


def test_cpu_demand_with_defaults_and_small_settings(compose):
    demand = ray_cpu_demand(compose(BASE))
    assert demand == {
        "transfer_queue_controller": 1,
        "transfer_queue_storage_units": 8,
        "worker_bundles": 3,
        "free_for_default_actors": 1,
        "total": 13,
    }
    small = compose(BASE + ["transfer_queue.backend.SimpleStorage.num_data_storage_units=2"])
    assert check_ray_cpus_for_transfer_queue(small, available_cpus=7)["total"] == 7
    with pytest.raises(RuntimeError) as exc:
        check_ray_cpus_for_transfer_queue(compose(BASE), available_cpus=2)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith("Ray has 2 logical CPUs available but needs 13")
    assert "ray_kwargs.ray_init.num_cpus" in msg
    assert "transfer_queue.backend.SimpleStorage.num_data_storage_units" in msg


def test_cpu_demand_counts_reward_and_teacher_pools(compose):
    cfg = compose(
        BASE
        + [
            "reward.reward_model.enable_resource_pool=true",
            "reward.reward_model.n_gpus_per_node=2",
            "reward.reward_model.nnodes=1",
        ]
    )
    assert ray_cpu_demand(cfg)["worker_bundles"] == 3 * (1 + 2)


def test_main_fails_fast_when_ray_is_too_small(tmp_path):
    """A real driver with 2 logical CPUs: an error naming both numbers, not a silent hang (B4)."""
    env = {**os.environ, "HYDRA_FULL_ERROR": "1", "RAY_DEDUP_LOGS": "0"}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "verl.trainer.main_ppo",
            f"hydra.run.dir={tmp_path / 'hydra'}",
            *BASE,
            "ray_kwargs.ray_init.num_cpus=2",
            "+ray_kwargs.ray_init.include_dashboard=false",
            f"actor_rollout_ref.model.path={tmp_path}/model",
            "actor_rollout_ref.rollout.name=vllm",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
            "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
            "data.train_batch_size=4",
            "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        ],
        capture_output=True,
        text=True,
        timeout=240,  # the bug this guards against hung forever: a hang fails here, no timing assertion
        env=env,
        cwd=tmp_path,
    )
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "Ray has 2 logical CPUs available but needs 13" in out, out[-3000:]
    assert (tmp_path / "hydra" / ".hydra" / "overrides.yaml").exists() and not (tmp_path / "outputs").exists()


def test_agent_loop_error_description_and_lookup():
    err = describe_agent_loop_error(ValueError("Expected Qwen newline\nto tokenize to one token"))
    assert err == "ValueError: Expected Qwen newline to tokenize to one token"
    assert len(describe_agent_loop_error(RuntimeError("x" * 5000))) == 500
    tags = {
        "u0": {"is_prompt": True, "status": "finished"},
        "u0_0": {"status": "finished"},
        "u1": {"is_prompt": True, "status": "failure"},  # a failure recorded by an older agent loop
        "u2": {"is_prompt": True, "status": "failure", "error": err},
    }
    assert first_agent_loop_error(tags) == f"{err} (uid=u2)"
    assert first_agent_loop_error({"u0": tags["u0"]}) is None


def test_ray_task_errors_are_unwrapped_to_their_cause():
    import ray

    @ray.remote
    def boom():
        raise ValueError("top_p must be <= 1")

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        with pytest.raises(ray.exceptions.RayTaskError) as exc:
            ray.get(boom.remote())
    finally:
        ray.shutdown()
    assert describe_agent_loop_error(exc.value) == "ValueError: top_p must be <= 1"
