# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Rule T1: test folders match the code rooms they test (as verl's validate_structure.py does for upstream)."""

import importlib.util
from pathlib import Path

from .conftest import REPO

ROOMS = {"packaging", "verl", "arctic_platform", "kernels"}  # plus verl's documented special_* folders
# Test folders with no code room of their own, and why.
NO_COUNTERPART = {
    ("arctic_platform", "conformance"): "the Arctic-Platform conformance suite (recorded reference data, issue 11)",
}


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    return Path(next(iter(spec.submodule_search_locations)))


def test_top_level_rooms():
    dirs = {p.name for p in (REPO / "tests").iterdir() if p.is_dir() and p.name != "__pycache__"}
    odd = sorted(d for d in dirs - ROOMS if not d.startswith("special_"))
    assert not odd, f"tests/ holds only {sorted(ROOMS)} and special_* folders; move {odd}"


def test_test_folders_mirror_installed_packages():
    checked = {}
    for room, package in (("verl", "verl"), ("arctic_platform", "arctic_platform")):
        root = _package_dir(package)
        checked[room] = 0
        for d in (REPO / "tests" / room).rglob("*"):
            if d.is_dir() and d.name != "__pycache__":
                rel = d.relative_to(REPO / "tests" / room)
                if (room, rel.parts[0]) in NO_COUNTERPART:
                    continue
                assert (root / rel).is_dir(), f"tests/{room}/{rel} has no counterpart {package}/{rel}"
                checked[room] += 1
    # the walk saw the rooms' folders (an empty walk, e.g. a moved tests/ tree, would pass without this)
    assert checked["verl"] >= 4 and checked["arctic_platform"] >= 4, checked


def test_file_names_say_the_hardware():
    for f in (REPO / "tests").rglob("*.py"):
        name = f.name
        if name in ("conftest.py", "__init__.py") or not name.startswith("test_"):
            continue
        if f.parent.name == "packaging" or "special_e2e" in f.parts:
            assert name.endswith("_on_cpu.py"), f"{f.relative_to(REPO)}: CI-run tests end in _on_cpu.py"
        # other test files either end in _on_cpu.py or may assume a GPU (and must skip without one)
        if not name.endswith("_on_cpu.py"):
            text = f.read_text()
            assert "cuda" in text and ("skip" in text or "importorskip" in text), (
                f"{f.relative_to(REPO)}: a GPU test must skip on machines without CUDA"
            )


def test_benchmarks_are_never_collected():
    offenders = [p for p in (REPO / "benchmarks").rglob("test_*.py")]
    assert not offenders, offenders
