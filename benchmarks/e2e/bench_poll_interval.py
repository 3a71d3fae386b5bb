# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Seconds per step of the CPU smoke with verl's default replay-buffer poll (2.0 s) vs the smoke's 0.1 s.

Two runs of the same length (`arctic-verl smoke --no-learning-check`), mean `timing_s/step` and `timing_s/gen` over
steps 2..N (step 1 carries the one-time actor warm-up). Prints the ratio, writes CSV. Needs the installed wheel.

    python benchmarks/e2e/bench_poll_interval.py [--steps 8] [--out benchmarks/results/cpu]
"""

import argparse
import csv
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(poll: float, steps: int, workdir: Path) -> dict:
    out = workdir / f"poll-{poll}"
    cli = shutil.which("arctic-verl", path=str(Path(sys.executable).parent)) or "arctic-verl"
    t0 = time.time()
    r = subprocess.run(
        [cli, "smoke", "--steps", str(steps), "--no-learning-check", "--poll-interval", str(poll), "--out", str(out)],
        capture_output=True, text=True, cwd=workdir,
    )  # fmt: skip
    if r.returncode != 0:
        raise SystemExit(f"smoke with poll {poll} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steady = [row["timing_s"] for row in rows if row["step"] > 1]
    return {
        "poll_interval_s": poll,
        "steps": steps,
        "step_s": sum(t["step"] for t in steady) / len(steady),
        "gen_s": sum(t["gen"] for t in steady) / len(steady),
        "wall_s": time.time() - t0,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/cpu"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-poll-") as td:
        rows = [run(2.0, args.steps, Path(td)), run(0.1, args.steps, Path(td))]
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "poll_interval.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    for row in rows:
        print(
            f"poll {row['poll_interval_s']:>4}s: step {row['step_s']:.2f}s  gen {row['gen_s']:.2f}s"
            f"  (run {row['wall_s']:.0f}s)"
        )
    print(f"seconds per step, poll 2.0 / poll 0.1: {rows[0]['step_s'] / rows[1]['step_s']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
