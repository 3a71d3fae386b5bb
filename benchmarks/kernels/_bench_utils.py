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


def inject_failure(step: str) -> bool:
    """True when ``ARCTIC_GPU_CHECK_FAIL`` names ``step``: the script then corrupts one result on purpose, so the
    dry-mode test proves that a broken step is reported as failed (and that the later figures are still written)."""
    return os.environ.get("ARCTIC_GPU_CHECK_FAIL", "") == step


def kernel_stats(kernel, name: str) -> list[dict]:
    """Registers, spills, shared memory and warps of every compiled variant of a ``@triton.jit`` kernel.

    Read from the kernel's per-device cache after it ran (triton 3.x: ``device_caches[dev][0]`` maps a
    specialization key to a CompiledKernel whose ``n_regs``/``n_spills`` are set once it is loaded). Under the
    interpreter there is nothing compiled: one row saying so.
    """
    caches = getattr(kernel, "device_caches", None)
    if caches is None:
        return [
            {"kernel": name, "variant": "-", "n_regs": "n/a", "n_spills": "n/a", "note": "not compiled (interpreter)"}
        ]
    rows = []
    for dev, entry in caches.items():
        for i, ck in enumerate(entry[0].values()):
            try:  # n_regs / n_spills are filled when the binary is loaded (first launch); load it if not yet
                ck._init_handles()
            except Exception:  # older/newer triton: the attributes may already be there
                pass
            md = getattr(ck, "metadata", None)
            consts = getattr(getattr(ck, "src", None), "constants", None) or {}
            shown = {k if isinstance(k, str) else str(k): v for k, v in dict(consts).items()}
            rows.append({
                "kernel": name, "device": dev, "variant": i,
                "n_regs": getattr(ck, "n_regs", "?"), "n_spills": getattr(ck, "n_spills", "?"),
                "shared_bytes": getattr(md, "shared", "?"), "num_warps": getattr(md, "num_warps", "?"),
                "constexprs": " ".join(f"{k}={v}" for k, v in sorted(shown.items()) if "stride" not in k)[:300],
            })  # fmt: skip
    return rows or [{"kernel": name, "variant": "-", "n_regs": "?", "n_spills": "?", "note": "no compiled variant"}]
