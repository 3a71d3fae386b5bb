# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Every other sdist-pinned release set builds a wheel whose doctor passes and whose quick smoke (2 steps) passes.

The default set's wheel is what the rest of the suite installs; this is the check that the series, the overlay and
the plugin (through its compat module) also hold for the older set (verl 0.9.0, the oldest with ``verl.plugins``).
"""

import os
import subprocess

import pytest

from .conftest import fresh_install, load_build_tool, run_build

_AB = load_build_tool()
OTHER_SETS = [
    f
    for f in _AB.patch_folders()
    if f != _AB.default_folder() and _AB.Upstream.load(f).kind == "sdist" and not _AB.set_version(f).is_prerelease
]


@pytest.mark.parametrize("folder", OTHER_SETS, ids=[f.name for f in OTHER_SETS])
def test_other_release_set_builds_doctors_and_smokes(folder, repo_copy, toolenv, tmp_path):
    pin = _AB.Upstream.load(folder)
    r = run_build(repo_copy, "--patches", folder.name, toolenv=toolenv)
    assert r.returncode == 0, r.stderr
    (wheel,) = (repo_copy / "dist").glob("*.whl")
    assert wheel.name == f"verl-{pin.version}+arctic.7-py3-none-any.whl"
    bin_dir = fresh_install(wheel, tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", PYTHONNOUSERSITE="1")
    doctor = subprocess.run([str(bin_dir / "arctic-verl"), "doctor"], capture_output=True, text=True, timeout=600,
                            env=env, cwd=tmp_path)  # fmt: skip
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert f"upstream: verl {pin.version} from PyPI sdist {pin.sdist} sha256 {pin.sha256[:16]}" in doctor.stdout
    assert f"compat: 1 upstream internal(s) adapted for verl {pin.version}" in doctor.stdout
    # the quick smoke: 2 steps cannot show learning, so it checks steps, versions and staleness and says so. It
    # samples on the server's torch engine: which engine samples is the server's (the same code under every verl
    # release set; vLLM runs in the default set's smokes), and vLLM's start costs ~35 CPU-s on this 2-core machine
    out = tmp_path / "smoke"
    smoke = subprocess.run([str(bin_dir / "arctic-verl"), "smoke", "--steps", "2", "--sampling-engine", "torch",
                            "--out", str(out)],
                           capture_output=True, text=True, timeout=1500, env=env, cwd=tmp_path)  # fmt: skip
    assert smoke.returncode == 0, smoke.stdout[-3000:] + smoke.stderr[-3000:]
    assert "smoke: 2 steps, reward" in smoke.stdout and "policy_version 2," in smoke.stdout
    assert "learning check not run: it needs --steps >= 10" in smoke.stdout
    assert "sampling engine: torch" in (out / "arctic_server.log").read_text()
