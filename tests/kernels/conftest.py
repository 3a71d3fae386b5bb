# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Kernel tests: run the Triton paths under the interpreter on CPU-only hosts.

Triton (3.x) decides between compiler and interpreter when a ``@triton.jit`` function is *defined*, i.e. when
``arctic_platform.kernels.densify`` / ``.cascade`` is first imported in a process. ``monkeypatch.setenv`` inside a
test is too late once another test in the same xdist worker has imported the module, so this conftest (imported
before any test module of this folder) sets ``TRITON_INTERPRET=1`` at import time. Cheap: no torch import here.
On a CUDA host it is left unset, so the GPU tests compile real kernels and the ``_on_cpu`` Triton cases run their
Triton path on the GPU instead; an explicit ``TRITON_INTERPRET`` in the environment always wins.
"""

import os

import pytest


def _cuda_host() -> bool:
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")


if not _cuda_host():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def triton_device() -> str:
    """Device for the Triton path: "cpu" under the interpreter, else "cuda"; skips when neither is possible."""
    pytest.importorskip("triton")
    from arctic_platform.kernels._utils import interpret_env

    if interpret_env():
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    pytest.skip("Triton path needs CUDA or TRITON_INTERPRET=1")
