# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""benchmarks/gpu_check.sh: its --dry mode runs end to end on CPU; its real mode refuses to run without CUDA."""

import csv
import os
import subprocess

import pytest

pytest.importorskip("triton")


def run_script(repo_root, python_exe, tmp_path, *args, **env):
    full_env = {**os.environ, "PYTHON": python_exe, "ARCTIC_BENCH_OUT": str(tmp_path), "OMP_NUM_THREADS": "1", **env}
    full_env.pop("TRITON_INTERPRET", None)  # the script must set it itself in --dry mode
    return subprocess.run(
        ["bash", str(repo_root / "benchmarks" / "gpu_check.sh"), *args],
        cwd=repo_root, env=full_env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_dry_mode_runs_and_writes_results(repo_root, python_exe, tmp_path):
    proc = run_script(repo_root, python_exe, tmp_path, "--dry")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "GPU CHECK (dry) OK" in proc.stdout
    checks = read_csv(tmp_path / "cascade_check.csv")
    assert len(checks) == 12 and all(r["ok"] == "True" for r in checks)  # 2 dtypes x 2 layouts x 3 split settings
    providers = {r["provider"] for r in read_csv(tmp_path / "cascade.csv")}
    assert {"fca", "fca_noshare", "sdpa_gathered", "fca_s1", "fca_s8"} <= providers
    densify_rows = {r["provider"]: r for r in read_csv(tmp_path / "densify.csv")}
    assert {"per_row_loop", "vectorized", "triton_interpreted"} <= set(densify_rows)
    assert all(float(r["median_ms"]) > 0 for r in densify_rows.values())
    for png in ("cascade.png", "densify.png"):
        assert (tmp_path / png).stat().st_size > 1000


def test_real_mode_fails_loudly_without_cuda(repo_root, python_exe, tmp_path):
    proc = run_script(repo_root, python_exe, tmp_path, CUDA_VISIBLE_DEVICES="")
    assert proc.returncode == 1
    assert "no CUDA device visible" in proc.stderr
    assert not (tmp_path / "cascade.csv").exists()
