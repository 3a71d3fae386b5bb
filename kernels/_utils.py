# Copyright 2026 The arctic-verl Authors
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
# SPDX-License-Identifier: Apache-2.0
"""Helpers shared by the kernels: optional Triton import, interpreter detection, device and dot-size checks.

Importable without Triton and without a GPU. Triton decides between the compiler and the interpreter when a
``@triton.jit`` function is *defined* (module import), reading ``TRITON_INTERPRET`` at that moment (triton 3.x).
So the kernel modules record how their kernels were built (:func:`is_interpreted`) instead of re-reading the
environment at launch time: a process has either compiled or interpreted kernels, never a mix.
"""

from __future__ import annotations

import os

import torch

try:  # Triton is optional: CPU-only installs still get the torch references.
    import triton  # noqa: F401
    import triton.language as tl  # noqa: F401

    HAS_TRITON = True
except ImportError:  # pragma: no cover - exercised on machines without triton
    triton = None
    tl = None
    HAS_TRITON = False

#: Smallest M, N and K that ``tl.dot`` compiles on NVIDIA GPUs. The interpreter accepts smaller ones, so the
#: wrappers check this explicitly: a CPU test must never pass a shape the device rejects.
MIN_DOT_SIZE = 16


def interpret_env() -> bool:
    """True when ``TRITON_INTERPRET`` is set to a true value in the environment right now."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def is_interpreted(kernel) -> bool:
    """True when ``kernel`` (a ``@triton.jit`` object) was built by the Triton interpreter."""
    return type(kernel).__name__ == "InterpretedFunction"


def require_triton(what: str) -> None:
    """Raise an ImportError that names the fix when Triton is missing."""
    if not HAS_TRITON:
        raise ImportError(
            f"{what} needs Triton (pip install 'triton>=3.4' on Linux x86_64); "
            "the pure-torch reference paths work without it"
        )


def check_triton_device(kernel, *tensors: torch.Tensor, what: str) -> None:
    """Compiled kernels need CUDA tensors; interpreted kernels run on CPU tensors (or CUDA ones).

    Raises:
        RuntimeError: CPU tensors handed to compiled kernels, naming ``TRITON_INTERPRET=1`` as the way to run on CPU.
        ValueError: the tensors live on different devices.
    """
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        raise ValueError(f"{what}: all tensors must be on one device, got {sorted(str(d) for d in devices)}")
    device = next(iter(devices))
    if device.type != "cuda" and not is_interpreted(kernel):
        raise RuntimeError(
            f"{what}: the Triton path needs CUDA tensors (got {device}); set TRITON_INTERPRET=1 before importing "
            "arctic_platform.kernels to run it on CPU, or use the torch path"
        )


def check_min_dot_size(**dims: int) -> None:
    """Assert every ``tl.dot`` dimension is at least :data:`MIN_DOT_SIZE` (what the GPU compiler accepts).

    Raises:
        ValueError: naming the first dimension that is too small.
    """
    for name, value in dims.items():
        if value < MIN_DOT_SIZE:
            raise ValueError(f"tl.dot needs {name} >= {MIN_DOT_SIZE} on the GPU, got {name}={value}")


def next_power_of_2(n: int) -> int:
    """Smallest power of two >= n (1 for n <= 1)."""
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def dot_dtype(kernel, dtype: torch.dtype):
    """``tl.dot`` operand dtype as a constexpr: the input's half type on the GPU, fp32 under the interpreter.

    bf16 arithmetic is wrong in the Triton interpreter (``tl.dot``, ``tl.sum`` and products give garbage or NaN),
    so interpreted kernels upcast right after every load and multiply in fp32. fp32 inputs always use fp32 dots.
    """
    require_triton("dot_dtype")
    if is_interpreted(kernel) or dtype == torch.float32:
        return tl.float32
    if dtype == torch.bfloat16:
        return tl.bfloat16
    if dtype == torch.float16:
        return tl.float16
    raise TypeError(f"unsupported attention dtype {dtype} (float32, bfloat16 or float16)")


def bits_dtype(dtype: torch.dtype) -> torch.dtype:
    """Same-width integer dtype, so a kernel can copy values of any dtype bit for bit (NaN payloads included)."""
    size = torch.empty((), dtype=dtype).element_size()
    return {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]
