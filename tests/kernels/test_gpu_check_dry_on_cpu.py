# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""benchmarks/gpu_check.sh on CPU: --dry runs every step's code path end to end (tiny shapes, TRITON_INTERPRET=1);
a step that breaks fails the run but not the later steps; the carry folder installs offline; the real mode refuses
to run without CUDA. Nothing here needs a GPU (how to run it on an H200: README, "GPU check")."""

import csv
import os
import re
import shutil
import subprocess
import sysconfig
import venv
from pathlib import Path

import pytest

pytest.importorskip("triton")


def run_script(repo_root, python_exe, out, *args, timeout=420, **env):
    full_env = {**os.environ, "PYTHON": python_exe, "ARCTIC_BENCH_OUT": str(out), "OMP_NUM_THREADS": "1", **env}
    full_env.pop("TRITON_INTERPRET", None)  # the script must set it itself in --dry mode
    full_env.setdefault("ARCTIC_GPU_CARRY", str(out / "no-carry"))  # a developer's gpu_carry/ must not leak in
    return subprocess.run(
        ["bash", str(repo_root / "benchmarks" / "gpu_check.sh"), *args],
        cwd=repo_root, env=full_env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def steps(out):
    return {r["step"]: r for r in read_csv(out / "steps.csv")}


def test_dry_mode_runs_every_step_and_writes_results(repo_root, python_exe, tmp_path):
    proc = run_script(repo_root, python_exe, tmp_path, "--dry")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    assert "GPU CHECK (dry) OK" in proc.stdout
    st = steps(tmp_path)
    assert list(st) == ["versions", "install", "import", "cascade", "densify", "engines", "sanitizer", "pytest"]
    assert {s: r["status"] for s, r in st.items() if r["status"] != "pass"} == {"install": "skip", "sanitizer": "skip"}
    assert "torch" in st["versions"]["note"] and "triton" in st["versions"]["note"]
    checks = read_csv(tmp_path / "cascade_check.csv")
    # 2 dtypes x 2 layouts x (3 eager split settings + 2 planned ones); the CUDA-graph row exists only on a GPU
    assert len(checks) == 20 and all(r["ok"] == "True" for r in checks)
    assert {r["check"] for r in checks} >= {"fca/planned/splits=3", "fca_noshare/eager/splits=auto"}
    rows = read_csv(tmp_path / "cascade.csv")
    providers = {r["provider"] for r in rows}
    assert {"fca_kernel", "fca_eager", "fca_noshare_kernel", "sdpa_gathered", "fca_kernel_s8"} <= providers
    assert next(r for r in rows if r["provider"] == "fca_eager")["wrapper_us"] != ""
    assert read_csv(tmp_path / "cascade_kernels.csv")[0]["n_regs"] == "n/a"  # interpreter: nothing compiled
    densify_rows = {r["provider"]: r for r in read_csv(tmp_path / "densify.csv")}
    assert {"per_row_loop", "vectorized", "triton_interpreted"} <= set(densify_rows)
    engines = read_csv(tmp_path / "engines_check.csv")
    assert len(engines) >= 8 and all(r["ok"] == "True" for r in engines)
    for png in ("cascade.png", "densify.png"):
        assert (tmp_path / png).stat().st_size > 1000
    summary = (tmp_path / "summary.txt").read_text()
    assert "fca kernel" in summary and "engines_check" in summary


def test_a_broken_step_fails_the_run_and_the_later_steps_still_run(repo_root, python_exe, tmp_path):
    proc = run_script(repo_root, python_exe, tmp_path, "--dry", ARCTIC_GPU_CHECK_FAIL="cascade",
                      ARCTIC_GPU_CHECK_ONLY="versions,cascade,densify")  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "GPU CHECK (dry) FAILED: cascade" in proc.stdout
    st = steps(tmp_path)
    assert st["cascade"]["status"] == "fail" and st["densify"]["status"] == "pass"
    assert st["engines"]["status"] == "skip" and st["engines"]["note"] == "not selected"
    checks = {r["check"] + "/" + r["dtype"]: r["ok"] for r in read_csv(tmp_path / "cascade_check.csv")}
    assert checks["fca/eager/splits=auto/bfloat16"] == "False" and checks["fca/planned/splits=1/bfloat16"] == "True"
    # the failing correctness row did not lose the step's own later figures
    assert (tmp_path / "cascade.csv").exists() and (tmp_path / "cascade.png").stat().st_size > 1000
    assert (tmp_path / "densify.csv").exists()


def test_a_step_failing_at_the_shell_is_recorded(repo_root, python_exe, tmp_path):
    proc = run_script(repo_root, python_exe, tmp_path, "--dry", ARCTIC_GPU_CHECK_FAIL="versions",
                      ARCTIC_GPU_CHECK_ONLY="versions,import")  # fmt: skip
    assert proc.returncode == 1
    st = steps(tmp_path)
    assert st["versions"]["status"] == "fail" and "injected" in st["versions"]["note"]
    assert st["import"]["status"] == "pass"


def python_without(tmp_path, *hidden: str) -> str:
    """A fresh venv that sees every package of this test environment except the ``hidden`` import names."""
    env = tmp_path / "env"
    venv.create(env, with_pip=False)
    deps = tmp_path / "deps"
    deps.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if entry.name.split(".")[0].split("-")[0] not in hidden:  # pytest_timeout.py, pytest_timeout-2.3.1.dist-info
            (deps / entry.name).symlink_to(entry)
    py = str(env / "bin" / "python")
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    Path(site, "zz_test_env_deps.pth").write_text(f"import site; site.addsitedir({str(deps)!r})\n")
    return py


def test_pytest_step_runs_without_pytest_timeout(repo_root, tmp_path):
    """pyproject's pytest config names pytest-timeout's `timeout` under --strict-config: without the plugin the
    step falls back to a minimal ini instead of failing with "Unknown config option: timeout" (exit 4)."""
    py = python_without(tmp_path, "pytest_timeout")
    probe = subprocess.run([py, "-c", "import pytest_asyncio, xdist, arctic_platform\nimport pytest_timeout"],
                           capture_output=True, text=True, cwd=tmp_path)  # fmt: skip
    assert probe.returncode != 0 and "No module named 'pytest_timeout'" in probe.stderr, probe.stderr
    proc = run_script(repo_root, py, tmp_path / "out", "--dry", ARCTIC_GPU_CHECK_ONLY="pytest")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    st = steps(tmp_path / "out")
    assert st["pytest"]["status"] == "pass", st["pytest"]
    log = (tmp_path / "out" / "logs" / "pytest.log").read_text()
    assert "pytest-timeout missing: running with a minimal ini" in log, log[-2000:]


def test_real_mode_fails_loudly_without_cuda(repo_root, python_exe, tmp_path):
    proc = run_script(repo_root, python_exe, tmp_path, CUDA_VISIBLE_DEVICES="")
    assert proc.returncode == 1
    assert "no CUDA device visible" in proc.stderr
    assert not (tmp_path / "cascade.csv").exists()


SERVER_STACK = ("fastapi", "uvicorn", "pydantic", "pytest-asyncio", "pytest-timeout")
"""gpu_check.sh --prepare's CARRY_PKGS, carried with their requirements."""


def python_with_only(tmp_path, dists) -> str:
    """A fresh venv that sees only the installed distributions ``dists`` of this test environment."""
    from importlib import metadata

    env = tmp_path / "bare"
    venv.create(env, with_pip=False)
    deps = tmp_path / "bare-deps"
    deps.mkdir()
    for name in dists:
        dist = metadata.distribution(name)
        tops = {f.parts[0] for f in dist.files or [] if f.parts and f.parts[0] not in ("..", "bin", "__pycache__")}
        for top in tops:
            src = Path(dist.locate_file(top))
            if src.exists() and not (deps / top).exists():
                (deps / top).symlink_to(src)
    py = str(env / "bin" / "python")
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    Path(site, "zz_test_env_deps.pth").write_text(f"import site; site.addsitedir({str(deps)!r})\n")
    return py


def test_the_engines_step_runs_on_a_bare_image_from_the_carry(repo_root, tmp_path):
    """A Python that sees only the bare image's packages (torch, triton, transformers, httpx, pytest and what they
    require): no ray, tensordict or omegaconf, no server stack, no arctic-verl. Its carry is made as --prepare makes
    it (the wheel under test, gpu_carry.py's ENGINES_IMPORTS and the server stack, ray as its stripped zip), here
    from this environment's installed files (this Python's ABI) instead of cp312 downloads; the install, import and
    engines steps then run and pass: the carry installs offline into a fresh folder the checks import from."""
    import importlib.util

    wheels = sorted((repo_root / "dist").glob("verl-*+arctic.*-py3-none-any.whl"), key=os.path.getmtime)
    if not wheels:
        pytest.skip("no built wheel in dist/ (run ./build.sh)")
    spec = importlib.util.spec_from_file_location("gpu_carry", repo_root / "benchmarks" / "gpu_carry.py")
    gpu_carry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_carry)
    bare = gpu_carry.closure(gpu_carry.BARE_IMAGE)
    py = python_with_only(tmp_path, sorted(bare))
    probe = subprocess.run([py, "-c", "import torch, transformers, httpx\nimport ray"], capture_output=True, text=True,
                           cwd=tmp_path)  # fmt: skip
    assert "No module named 'ray'" in probe.stderr, probe.stderr  # the premise: a bare image
    carry = tmp_path / "carry"
    carry.mkdir()
    shutil.copy(wheels[-1], carry)
    carried = {n.split("==")[0] for n in gpu_carry.carry_list()} | (gpu_carry.closure(SERVER_STACK) - bare)
    for dist in sorted(carried - {"verl"}):
        gpu_carry.zip_installed(dist, carry)
    gpu_carry.strip_ray(Path(sysconfig.get_paths()["purelib"]), carry / "ray-core.zip")
    proc = run_script(repo_root, py, tmp_path / "out", "--dry", ARCTIC_GPU_CARRY=str(carry),
                      ARCTIC_GPU_CHECK_ONLY="install,import,engines")  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    st = steps(tmp_path / "out")
    assert {s: st[s]["status"] for s in ("install", "import", "engines")} == dict.fromkeys(
        ("install", "import", "engines"), "pass"
    ), st
    # the carry installed offline (--no-index) into a fresh folder, and the checks import from there
    assert re.search(r"installed \d+ wheels", st["install"]["note"]), st["install"]
    assert "/site/arctic_platform/kernels" in st["import"]["note"] and ".venv" not in st["import"]["note"]
    engines = read_csv(tmp_path / "out" / "engines_check.csv")
    assert len(engines) >= 8 and all(r["ok"] == "True" for r in engines)
    assert any(r["check"] == "sharded_grad_norm" for r in engines)  # verl's FSDP2 wrapping ran too
