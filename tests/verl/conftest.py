# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Fixtures for tests of what the patches and overlay promise, against the installed patched verl."""

import os

import pytest


@pytest.fixture(scope="module")
def ray_cpu():
    """A local CPU-only Ray instance for this module (logical CPUs are accounting only)."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        num_cpus=8,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}},
        _temp_dir=os.environ.get("ARCTIC_RAY_TMPDIR"),
    )
    yield ray
    ray.shutdown()
