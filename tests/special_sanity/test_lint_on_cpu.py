# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The lint step of ``./build.sh test`` (tools/lint.py): verl's ruff config over what we wrote, fails on a violation.

Each test runs the same entry point build.sh runs on a small copy (this checkout's pyproject.toml plus one clean
file in every linted folder), with one violation injected.
"""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT = REPO / "tools" / "lint.py"
CLEAN = '"""A clean module."""\n\nimport os\n\n\ndef cwd() -> str:\n    return os.getcwd()\n'
FOLDERS = ("arctic_platform", "kernels", "overlay", "tools", "tests", "benchmarks")


def _lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(LINT), "--root", str(root)], capture_output=True, text=True, timeout=120)


@pytest.fixture
def tree(tmp_path) -> Path:
    root = tmp_path / "checkout"
    root.mkdir()
    (root / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    for folder in FOLDERS:
        (root / folder).mkdir()
        (root / folder / "mod.py").write_text(CLEAN)
    (root / "setup.py").write_text(CLEAN)
    return root


def test_clean_tree_passes(tree):
    r = _lint(tree)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("lint: clean (ruff 0.17.6")


@pytest.mark.parametrize("where", [*FOLDERS, "setup.py"])
def test_a_check_violation_anywhere_we_wrote_fails(tree, where):
    target = tree / where if where.endswith(".py") else tree / where / "mod.py"
    target.write_text(target.read_text() + "\n\ndef unused():\n    import json\n")  # F401 in a function
    r = _lint(tree)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "lint: `ruff check` failed" in r.stderr and "F401" in r.stderr
    assert str(Path(where if where.endswith(".py") else f"{where}/mod.py")) in r.stderr
    assert r.stderr.rstrip().splitlines()[-1].startswith("lint: FAILED: ruff check (over ")


def test_a_format_violation_fails(tree):
    (tree / "kernels" / "mod.py").write_text(CLEAN.replace("return os.getcwd()", "return  os.getcwd( )"))
    r = _lint(tree)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "lint: `ruff format --check` failed" in r.stderr and "kernels/mod.py" in r.stderr
    assert "lint: FAILED: ruff format --check (over " in r.stderr


def test_verls_line_length_is_the_config(tree):
    """The copy's pyproject.toml is read: a 121-character line violates E501, a 120-character one does not."""
    line = 'X = "' + "a" * 114 + '"'
    assert len(line) == 120
    (tree / "tools" / "mod.py").write_text(line + "\n")
    r = _lint(tree)
    assert r.returncode == 0, r.stderr
    (tree / "tools" / "mod.py").write_text(line.replace('"a', '"aa', 1) + "\n")
    r = _lint(tree)
    assert r.returncode == 1 and "E501" in r.stderr, r.stderr


def test_build_output_is_not_linted(tree):
    (tree / "build" / "src").mkdir(parents=True)
    (tree / "build" / "src" / "upstream.py").write_text("import os\n")  # upstream code is not ours to lint
    assert _lint(tree).returncode == 0


def test_missing_config_is_named(tmp_path):
    r = _lint(tmp_path)
    assert r.returncode == 2 and "pyproject.toml not found" in r.stderr
