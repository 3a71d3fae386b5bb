# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Sync vs async remote backend: seconds per step of the CPU smoke, and where the time went.

Two runs in one invocation, same seed, same steps, same everything but `--async` (`arctic-verl smoke`, which runs
the real `python -m verl.trainer.main_ppo` against the embedded server). Per step, from verl's `timing_s/*`:

* generation wait = `gen` (the trainer blocked on the replay buffer, i.e. idle while the sampler works),
* training = `old_log_prob` + `ref` + `adv` + `update_actor`,
* sync = `update_weights`,
* other = `step` minus those (reward, TransferQueue, metrics).

The server's own `busy:` log line (written at every weight sync) gives the engine-side busy seconds per job and how
long sampling and training were busy at the same time (`overlap`). The headline ratio is the mean step time over the
steady steps 2..N-1 (step 1 carries the one-time actor warm-up; the async run's last step has nothing left to
prefetch); the total over all N steps is printed too. Writes CSV (per step) and a PNG (stacked breakdown). Needs the
installed wheel; run it from outside the repository root.

    python benchmarks/e2e/bench_async.py [--steps 12] [--repeats 1] [--inproc] [--uncoalesced] [--out ...]
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PHASES = ("generation_wait", "training", "sync", "other")
TIMINGS = ("step", "gen", "old_log_prob", "ref", "adv", "update_actor", "update_weights")
BUSY = re.compile(
    r"busy: training (?P<training>[\d.]+)s sampling (?P<sampling>[\d.]+)s log_prob (?P<log_prob>[\d.]+)s "
    r"any (?P<any>[\d.]+)s overlap (?P<overlap>[\d.]+)s"
)


def run(mode: str, args, workdir: Path) -> dict:
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / mode
    cli = shutil.which("arctic-verl", path=str(Path(sys.executable).parent)) or "arctic-verl"
    cmd = [cli, "smoke", "--steps", str(args.steps), "--seed", str(args.seed), "--no-learning-check", "--out", str(out)]
    if mode.startswith("async"):
        cmd.append("--async")
    if mode == "async-inproc":  # the server's engines as threads of one process (no --sampling-process)
        cmd.append("remote_backend.arctic.backend.sampling_process=false")
    if mode.endswith("-uncoalesced"):  # one /generate request per trajectory, as verl asks for them
        cmd.append("remote_backend.arctic.sampling.max_prompts_per_request=1")
    cmd += args.overrides  # the same Hydra overrides for every mode (e.g. a training-heavier step)
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir)
    if r.returncode != 0:
        raise SystemExit(f"{mode} smoke failed:\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = []
    for row in rows:
        m = row["metrics"]
        t = {k: float(m.get(f"timing_s/{k}", 0.0)) for k in TIMINGS}
        phases = {
            "generation_wait": t["gen"],
            "training": t["old_log_prob"] + t["ref"] + t["adv"] + t["update_actor"],
            "sync": t["update_weights"],
        }
        phases["other"] = max(0.0, t["step"] - sum(phases.values()))
        hist = {k.rsplit("/", 1)[1]: v for k, v in m.items() if k.startswith("training/off_policy/staleness_hist/")}
        steps.append({"mode": mode, "step": row["step"], "step_s": t["step"], **phases, "staleness_hist": hist})
    busy = {}
    for line in (out / "arctic_server.log").read_text(errors="replace").splitlines():
        match = BUSY.search(line)
        if match:
            busy = {k: float(v) for k, v in match.groupdict().items()}
    return {"mode": mode, "steps": steps, "busy": busy, "wall_s": time.time() - t0, "stdout": r.stdout}


def _pool(results: list[dict]) -> dict:
    """Several runs of one mode as one: their steps (tagged with the run), summed server busy seconds."""
    busy: dict[str, float] = {}
    for res in results:
        for k, v in res["busy"].items():
            busy[k] = busy.get(k, 0.0) + v
    steps = [{**s, "run": i} for i, res in enumerate(results) for s in res["steps"]]
    return {"mode": results[0]["mode"], "steps": steps, "busy": busy, "runs": len(results)}


def steady(result: dict) -> list[dict]:
    n = max(s["step"] for s in result["steps"])
    return [s for s in result["steps"] if 1 < s["step"] < n] or result["steps"]


def mean(rows: list[dict], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/cpu"))
    ap.add_argument("--repeats", type=int, default=1, help="runs per mode, in ABBA order (default 1)")
    ap.add_argument(
        "--inproc",
        action="store_true",
        help="add a third mode, async-inproc: async with the sampling engine in the server process (threads)",
    )
    ap.add_argument(
        "--uncoalesced",
        action="store_true",
        help="add sync-uncoalesced and async-uncoalesced: the rollout server sends one /generate per trajectory "
        "(sampling.max_prompts_per_request=1) instead of coalescing them",
    )
    ap.add_argument(
        "overrides",
        nargs="*",
        help="Hydra overrides passed to every mode's smoke, e.g. actor_rollout_ref.actor.ppo_epochs=3 for a step whose "
        "training costs about as much as its generation (as in the seed's 8xH200 figures)",
    )
    args = ap.parse_args()
    if args.steps < 4:
        raise SystemExit("--steps must be >= 4 (steady steps are 2..N-1)")
    # --repeats 2 runs sync, async, async, sync (ABBA) and pools the steps per mode, so a background load that
    # drifts during the benchmark (a shared machine) biases neither mode
    modes = ["sync", "async"] + (["async-inproc"] if args.inproc else [])
    modes += ["sync-uncoalesced", "async-uncoalesced"] if args.uncoalesced else []
    order = list(modes)
    for i in range(1, args.repeats):
        order += modes[::-1] if i % 2 else modes
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="bench-async-") as td:
        for i, mode in enumerate(order):
            runs[mode].append(run(mode, args, Path(td) / f"run{i}"))
    results = {mode: _pool(rs) for mode, rs in runs.items()}

    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "async.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["mode", "run", "step", "step_s", *PHASES, "staleness_hist"])
        w.writeheader()
        for res in results.values():
            for s in res["steps"]:
                w.writerow({**s, "staleness_hist": json.dumps(s["staleness_hist"])})

    print(
        f"{args.steps} steps, seed {args.seed}, {args.repeats} run(s) per mode ({' '.join(order)}); "
        f"per-step means over steps 2..{args.steps - 1}:"
    )
    for mode, res in results.items():
        rows = steady(res)
        parts = "  ".join(f"{p} {mean(rows, p):.3f}s" for p in PHASES)
        total = sum(s["step_s"] for s in res["steps"]) / res["runs"]
        b = res["busy"]
        server = (
            f"server busy: training {b['training']:.1f}s sampling {b['sampling']:.1f}s overlap {b['overlap']:.1f}s"
            if b
            else "server busy: n/a"
        )
        print(f"  {mode:17s}: step {mean(rows, 'step_s'):.3f}s  ({parts})  total {total:.1f}s  {server}")
    sync_rows, async_rows = steady(results["sync"]), steady(results["async"])
    ratio = mean(sync_rows, "step_s") / mean(async_rows, "step_s")
    total_ratio = (sum(s["step_s"] for s in results["sync"]["steps"]) / results["sync"]["runs"]) / (
        sum(s["step_s"] for s in results["async"]["steps"]) / results["async"]["runs"]
    )
    hist: dict[str, float] = {}
    for s in results["async"]["steps"]:
        for k, v in s["staleness_hist"].items():
            hist[k] = hist.get(k, 0) + v
    print(f"staleness histogram (async, trajectories per staleness): {dict(sorted(hist.items()))}")
    print(f"step-time ratio sync/async (steady steps): {ratio:.2f}x   (all {args.steps} steps: {total_ratio:.2f}x)")
    if "async-inproc" in results:
        inproc = mean(steady(results["async-inproc"]), "step_s")
        print(
            f"step-time ratio sync/async-inproc (steady steps): {mean(sync_rows, 'step_s') / inproc:.2f}x   "
            f"async-inproc/async: {inproc / mean(async_rows, 'step_s'):.2f}x"
        )
    if "sync-uncoalesced" in results:
        su, au = (mean(steady(results[m]), "step_s") for m in ("sync-uncoalesced", "async-uncoalesced"))
        print(
            f"coalescing: sync {su / mean(sync_rows, 'step_s'):.2f}x, async {au / mean(async_rows, 'step_s'):.2f}x "
            f"faster per step; uncoalesced sync/async: {su / au:.2f}x"
        )
    _plot(results, args.out / "async.png", ratio)
    return 0


def _plot(results: dict, path: Path, ratio: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    modes = list(results)
    bottom = [0.0] * len(modes)
    for phase in PHASES:
        vals = [mean(steady(results[m]), phase) for m in modes]
        ax.bar(modes, vals, bottom=bottom, label=phase.replace("_", " "))
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_ylabel("seconds per step (steady steps)")
    ax.set_title(f"CPU smoke, sync vs async remote backend: {ratio:.2f}x")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
