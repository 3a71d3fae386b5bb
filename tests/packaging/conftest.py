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


def load_build_tool():
    """The build tool package (tools/arctic_build/) of this checkout, loaded once."""
    name = "arctic_build_under_test"
    if name not in sys.modules:
        package = REPO / "tools" / "arctic_build"
        spec = importlib.util.spec_from_file_location(
            name, package / "__init__.py", submodule_search_locations=[str(package)]
        )
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


@pytest.fixture(scope="session")
def arctic_build():
    """The build tool package (tools/arctic_build/) of this checkout."""
    return load_build_tool()


@pytest.fixture(scope="session")
def pin(arctic_build):
    """The default set's upstream pin (patches/verl-<newest release>/UPSTREAM): tests read it, never hard-code it."""
    return arctic_build.Upstream.load(arctic_build.default_folder())


@pytest.fixture(scope="session")
def sdist(arctic_build, pin) -> Path:
    """The pinned sdist, downloaded once into the user cache (./build.sh already put it there)."""
    return arctic_build.fetch_sdist(pin)


def fresh_install(wheel: Path, env_dir: Path) -> Path:
    """Install ``wheel`` (no deps) into a new venv whose dependencies come from this test environment.

    The test environment's site-packages is linked in entry by entry, minus its own verl/arctic_platform and their
    dist-info, so the fresh venv sees exactly one verl: the one under test. Returns the venv's bin/ directory.
    """
    import sysconfig
    import venv

    venv.create(env_dir, with_pip=False)
    py = env_dir / "bin" / "python"
    r = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    deps = env_dir / "deps"
    deps.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        name = entry.name
        if name in ("verl", "arctic_platform", "__pycache__") or name.startswith(("verl-", "zz_test_env")):
            continue
        (deps / name).symlink_to(entry)
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True
    ).stdout.strip()
    Path(site, "zz_test_env_deps.pth").write_text(f"import site; site.addsitedir({str(deps)!r})\n")
    return env_dir / "bin"


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
