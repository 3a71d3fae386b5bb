# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Cheap root conftest: no torch, verl or ray at import time.

* ``ARCTIC_SAMPLING_ENGINE=torch`` (the default of the server's ``--sampling-engine``) unless set: see below.
* ``*_on_cpu.py`` files get the ``cpu`` marker (``-m cpu`` selects them); other test files may assume a GPU.
* Tests import the installed wheel. Running from a source checkout without ``./build.sh test`` is refused, so a test
  can never pass against the repo's unbuilt files.
"""

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Triton picks compiler or interpreter when a @triton.jit function is defined (at import of a kernel module), so the
# choice must be made before any test module is collected: the interpreter on CPU-only hosts, unless set explicitly.
if not (os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")):
    os.environ.setdefault("TRITON_INTERPRET", "1")

# Every embedded server a test starts (and the servers of the runs it launches) samples with the torch decode loop
# unless the test asks for vLLM (`--sampling-engine vllm`, `extensions.sampling_engine`, the smoke's
# `--sampling-engine vllm`): a vLLM engine takes ~20-30 s to start here. The vLLM engine's own tests
# (tests/arctic_platform/server/test_sampling_conformance_on_cpu.py, the e2e smokes) ask for it explicitly.
os.environ.setdefault("ARCTIC_SAMPLING_ENGINE", "torch")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name.endswith("_on_cpu.py"):
            item.add_marker(pytest.mark.cpu)


def pytest_sessionstart(session):
    for name in ("verl", "arctic_platform"):
        spec = __import__("importlib.util").util.find_spec(name)
        if spec is None:
            raise pytest.UsageError(f"{name} is not installed: run ./build.sh test (tests run against the built wheel)")
        origin = Path(spec.origin or next(iter(spec.submodule_search_locations))).resolve()
        if REPO in origin.parents and ".venv" not in origin.parts:
            raise pytest.UsageError(
                f"{name} resolves to the source tree ({origin}); tests must import the installed wheel"
            )


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def python_exe() -> str:
    return sys.executable


@pytest.fixture(scope="module")
def ray_cpu():
    """A local CPU-only Ray instance for one test module (logical CPUs are accounting only); ray imported lazily."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        num_cpus=8,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}},
    )
    yield ray
    ray.shutdown()
