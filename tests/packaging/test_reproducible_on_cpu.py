# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Two builds of the same inputs give byte-identical wheels, regardless of build directory and time."""

import hashlib
import shutil
import time

from .conftest import REPO, run_build


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_two_builds_same_sha256(tmp_path, sdist, toolenv, pin):
    shas = []
    for name in ("first", "second-in-another-dir"):
        checkout = tmp_path / name / "checkout"
        shutil.copytree(REPO, checkout, ignore=shutil.ignore_patterns(".git", ".venv", "build", "dist", "runs"))
        r = run_build(checkout, sdist=sdist, toolenv=toolenv)
        assert r.returncode == 0, r.stderr
        (wheel,) = (checkout / "dist").glob("*.whl")
        assert wheel.name == f"verl-{pin.version}+arctic.7-py3-none-any.whl"
        shas.append(_sha(wheel))
        time.sleep(1.1)  # a different wall-clock second for the second build
    assert shas[0] == shas[1]


def test_rebuild_is_idempotent_and_quick(repo_copy, sdist, toolenv):
    first = run_build(repo_copy, sdist=sdist, toolenv=toolenv)
    assert first.returncode == 0, first.stderr
    (wheel,) = (repo_copy / "dist").glob("*.whl")
    sha = _sha(wheel)
    again = run_build(repo_copy, sdist=sdist, toolenv=toolenv)
    assert again.returncode == 0 and "up to date" in again.stdout
    assert _sha(wheel) == sha
    # a change to shipped code produces a different wheel (the stamp covers it)
    (repo_copy / "arctic_platform" / "cli.py").write_text((repo_copy / "arctic_platform" / "cli.py").read_text() + "\n")
    third = run_build(repo_copy, sdist=sdist, toolenv=toolenv)
    assert third.returncode == 0 and "inputs changed" in third.stdout
    (wheel,) = (repo_copy / "dist").glob("*.whl")
    assert _sha(wheel) != sha


def test_source_tree_build_matches_sdist_build(repo_copy, sdist, toolenv, tmp_path, arctic_build):
    r1 = run_build(repo_copy, sdist=sdist, toolenv=toolenv)
    assert r1.returncode == 0, r1.stderr
    (wheel,) = (repo_copy / "dist").glob("*.whl")
    from_sdist = (repo_copy / "build" / "src" / "verl" / "arctic_build_manifest.json").read_text()
    up = arctic_build.Upstream.load(arctic_build.default_folder())
    arctic_build.extract_verl(sdist, up, tmp_path / "unpacked")
    sdist_obtained = f'"obtained": "{up.sdist}"'
    source_obtained = '"obtained": "--source unpacked"'
    sdist_verified = '"verified": "sha256 and tree_sha256"'
    source_verified = '"verified": "tree_sha256"'
    shutil.rmtree(repo_copy / "dist")
    r2 = run_build(repo_copy, "--source", str(tmp_path / "unpacked"), toolenv=toolenv)
    assert r2.returncode == 0, r2.stderr
    from_source = (repo_copy / "build" / "src" / "verl" / "arctic_build_manifest.json").read_text()
    # identical patched tree; the manifest records that the sdist's own sha256 was not checked
    assert from_source.replace('"verified_sdist_sha256": null', "X").replace(source_obtained, "O").replace(
        source_verified, "V"
    ) == from_sdist.replace(f'"verified_sdist_sha256": "{up.sha256}"', "X").replace(sdist_obtained, "O").replace(
        sdist_verified, "V"
    )
    # a --source tree that is not the pinned upstream is refused by its pinned tree digest
    (tmp_path / "unpacked" / "verl" / "protocol.py").write_text("# not upstream\n")
    r3 = run_build(repo_copy, "--source", str(tmp_path / "unpacked"), toolenv=toolenv)
    assert r3.returncode != 0 and "does not match tree_sha256" in r3.stderr
