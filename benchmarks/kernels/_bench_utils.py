# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Shared helpers for the kernel benchmarks: result folder, CSV + PNG writers, a CPU timer."""

from __future__ import annotations

import csv
import os
import re
import statistics
import textwrap
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "results"
H200_HBM_BYTES_PER_S = 4.8e12  # H200 SXM HBM3e peak (datasheet); every GB/s figure is compared against it


def device_tag(device: str) -> str:
    """Folder name under benchmarks/results/: the GPU name, or ``cpu-<n>t`` with the torch thread count."""
    import torch

    if device.startswith("cuda"):
        return re.sub(r"[^A-Za-z0-9]+", "_", torch.cuda.get_device_name(device)).strip("_")
    return f"cpu-{torch.get_num_threads()}t"


def results_dir(device: str, out: str | None = None) -> Path:
    path = Path(out) if out else RESULTS / device_tag(device)
    path.mkdir(parents=True, exist_ok=True)
    return path


def time_cpu(fn, *, warmup: int = 2, reps: int = 9) -> dict[str, float]:
    """Wall time of ``fn()`` in ms: median and min over ``reps`` runs after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e3)
    return {"median_ms": statistics.median(ts), "min_ms": min(ts)}


def write_csv(path: Path, rows: list[dict]) -> None:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {path}")


def bar_png(path: Path, labels: list[str], values: list[float], *, ylabel: str, title: str) -> None:
    os.environ.setdefault("MPLBACKEND", "Agg")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(labels)), 4))
    bars = ax.bar(labels, values, color="#4477aa")
    ax.bar_label(bars, fmt="%.3g")
    ax.set_ylabel(ylabel)
    wrapped = "\n".join(textwrap.fill(line, 120) for line in title.splitlines())
    ax.set_title(wrapped, fontsize=8)
    ax.tick_params(axis="x", labelrotation=20, labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")
