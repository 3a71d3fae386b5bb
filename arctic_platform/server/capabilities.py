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


def attn_implementations() -> tuple[str, ...]:
    """The transformers attention implementations a training engine here can load (``eager`` and ``sdpa`` always)."""
    from transformers.utils import import_utils

    out = ["eager", "sdpa"]
    if getattr(import_utils, "is_flash_attn_2_available", lambda: False)():
        out.append("flash_attention_2")
    if getattr(import_utils, "is_torch_flex_attn_available", lambda: False)():
        out.append("flex_attention")
    return tuple(out)


@functools.lru_cache(maxsize=1)
def server_profile() -> BackendProfile:
    """The embedded server's profile (computed once per process)."""
    return embedded_profile(attn_implementations=attn_implementations())
