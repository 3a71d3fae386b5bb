# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Packaging tests build real wheels from copies of this checkout (build tooling is tested from the repo)."""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COPY_IGNORE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "runs", "__pycache__", "*.pyc", "results")


@pytest.fixture(scope="session")
def arctic_build():
    """The build tool module (tools/arctic_build.py) of this checkout."""
    spec = importlib.util.spec_from_file_location("arctic_build_under_test", REPO / "tools" / "arctic_build.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def sdist(arctic_build) -> Path:
    """The pinned sdist, downloaded once into the user cache (./build.sh already put it there)."""
    up = arctic_build.Upstream.load(arctic_build.default_folder())
    return arctic_build.fetch_sdist(up)


@pytest.fixture(scope="session")
def toolenv() -> str:
    """Share the checkout's pinned build-tool venv with the copies (saves a pip install per copy)."""
    path = REPO / "build" / ".toolenv"
    return str(path) if (path / "bin" / "python").exists() else ""


@pytest.fixture
def repo_copy(tmp_path) -> Path:
    """A copy of this checkout without git, build outputs or environments."""
    dst = tmp_path / "checkout"
    shutil.copytree(REPO, dst, ignore=COPY_IGNORE)
    return dst


def run_build(checkout: Path, *args: str, sdist: Path | None = None, toolenv: str = "", timeout: int = 300, **env):
    """Run ./build.sh in ``checkout`` with a fixed build number and date (no git in the copy)."""
    full_env = {
        **os.environ,
        "ARCTIC_BUILD_NUMBER": "7",
        "SOURCE_DATE_EPOCH": "1790000000",
        **({"ARCTIC_TOOLENV": toolenv} if toolenv else {}),
        **({"ARCTIC_VERL_SDIST": str(sdist)} if sdist else {}),
        **env,
    }
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        full_env.pop(var, None)
    return subprocess.run(
        ["bash", str(checkout / "build.sh"), *args],
        cwd=checkout,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
