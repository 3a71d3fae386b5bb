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
"""This server's capability profile (``GET /health`` ``profile``): what its engines honour in this environment."""

from __future__ import annotations

import functools

from ..backend_profile import BackendProfile, embedded_profile

FAST_ATTENTION = ("flash_attention_3", "flash_attention_2", "sdpa")
"""The attention a launcher picks for the embedded server, first available first (:func:`default_attention`)."""


def attn_implementations() -> tuple[str, ...]:
    """The transformers attention implementations a training engine here can train with (``eager`` and ``sdpa``
    always; ``flash_attention_3`` when installed and every visible GPU is a Hopper one, the only architecture it runs
    on; ``flex_attention`` with a GPU)."""
    from transformers.utils import import_utils

    out = ["eager", "sdpa"]
    if getattr(import_utils, "is_flash_attn_2_available", lambda: False)():
        out.append("flash_attention_2")
    if getattr(import_utils, "is_flash_attn_3_available", lambda: False)() and _all_hopper():
        out.append("flash_attention_3")
    # flex attention has no backward on CPU ("FlexAttention does not support backward on CPU"): it trains on GPUs only
    if getattr(import_utils, "is_torch_flex_attn_available", lambda: False)() and _cuda():
        out.append("flex_attention")
    return tuple(out)


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _all_hopper() -> bool:
    import torch

    if not torch.cuda.is_available():
        return False
    return all(torch.cuda.get_device_capability(i)[0] == 9 for i in range(torch.cuda.device_count()))


def default_attention(available: tuple[str, ...] | None = None) -> str:
    """The first of :data:`FAST_ATTENTION` the engines here can load (``available``: :func:`attn_implementations`)."""
    available = attn_implementations() if available is None else available
    return next(a for a in FAST_ATTENTION if a in available)


@functools.lru_cache(maxsize=1)
def server_profile() -> BackendProfile:
    """The embedded server's profile (computed once per process)."""
    return embedded_profile(attn_implementations=attn_implementations())
