# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Stock verl's own loop vs the embedded Arctic backend on this CPU: steady step, time to the first step, whole run.

Runs A B B A (A: stock verl 0.9.1's V1 sync GRPO, colocated FSDP2 + vLLM, `../shared/tools/stock-verl-cpu/run_stock.sh`;
B: `arctic-verl smoke --sampling-engine vllm`, the real `main_ppo` against the embedded server) with the same model,
data, batch, lengths, n, lr and steps. Per run, measured from outside: the wall time from launch to exit, and the time
from launch until verl's file logger writes step 1 (the first step done); from verl's `timing_s/*` the mean step over
steps 2..N. Prints the arctic/stock ratio of each (below 1: arctic is ahead) and writes a CSV.

Set-up (the stock side's venv and fixture, as the tool's README says): `$STOCK_VERL_DIR` (default /tmp/stockverl)
holds `venv/` (this wheel with its `cpu` extra) and `fixture/{model,data}` (what `arctic-verl smoke` writes).

    python benchmarks/e2e/bench_vs_stock.py [--steps 12] [--order ABBA] [--tool DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "results" / "e2e"
TOOL = HERE.parent.parent.parent / "shared" / "tools" / "stock-verl-cpu"


def _steps(metrics: Path) -> dict[int, dict]:
    rows = {}
    if metrics.exists():
        for line in metrics.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                rows[int(r["step"])] = r["data"]
    return rows


def run(side: str, args, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    if side == "stock":
        cmd = ["bash", str(Path(args.tool) / "run_stock.sh"), str(out), str(args.steps)]
        metrics = out / "verl_metrics.jsonl"
    else:
        cli = shutil.which("arctic-verl", path=str(Path(sys.executable).parent)) or "arctic-verl"
        cmd = [cli, "smoke", "--steps", str(args.steps), "--sampling-engine", "vllm", "--out", str(out)]
        metrics = out / "verl_metrics.jsonl"
    t0 = time.monotonic()
    first = None
    with open(out.parent / f"{out.name}.log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        while proc.poll() is None:
            if first is None and 1 in _steps(metrics):
                first = time.monotonic() - t0
            time.sleep(0.2)
    wall = time.monotonic() - t0
    steps = _steps(metrics)
    if proc.returncode != 0 or len(steps) != args.steps:
        log = out.parent / f"{out.name}.log"
        raise SystemExit(f"{side} run failed (rc {proc.returncode}, {len(steps)} steps): see {log}")
    steady = [steps[s]["timing_s/step"] for s in sorted(steps) if s > 1]
    score = [steps[s].get("critic/score/mean", float("nan")) for s in sorted(steps)]
    return {
        "side": side,
        "steady_step_s": statistics.mean(steady),
        "first_step_done_s": first if first is not None else float("nan"),
        "wall_s": wall,
        "reward_first": score[0],
        "reward_last": score[-1],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--order", default="ABBA", help="A = stock verl, B = arctic")
    p.add_argument("--tool", default=os.environ.get("STOCK_VERL_TOOL", str(TOOL)))
    p.add_argument("--out", default=str(RESULTS))
    args = p.parse_args()
    sv = Path(os.environ.get("STOCK_VERL_DIR", "/tmp/stockverl"))
    if not (sv / "venv" / "bin" / "python").exists() or not (sv / "fixture" / "model").exists():
        raise SystemExit(f"{sv}: no venv/ or fixture/ (see {args.tool}/README.md)")
    work = Path(tempfile.mkdtemp(prefix="bench-vs-stock-"))
    rows = []
    for i, label in enumerate(args.order):
        side = {"A": "stock", "B": "arctic"}[label]
        r = run(side, args, work / f"{i}-{side}")
        rows.append({"run": i, **r})
        print(
            f"{i} {side:6s} steady step {r['steady_step_s']:.2f} s  first step done {r['first_step_done_s']:.1f} s  "
            f"wall {r['wall_s']:.1f} s  reward {r['reward_first']:.3f} -> {r['reward_last']:.3f}",
            flush=True,
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "vs_stock.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    for key in ("steady_step_s", "first_step_done_s", "wall_s"):
        a = statistics.mean(r[key] for r in rows if r["side"] == "stock")
        b = statistics.mean(r[key] for r in rows if r["side"] == "arctic")
        print(f"{key}: stock {a:.2f}  arctic {b:.2f}  arctic/stock x{b / a:.2f}")
    print(f"csv: {path}  (runs under {work})")


if __name__ == "__main__":
    main()
