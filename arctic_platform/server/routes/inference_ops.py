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
"""The sampling job's memory and cache calls, shared by their own routes (/sleep-inference, /wake-inference,
/reset-prefix-cache) and by /operation, which carries them in a payload (docs/arctic-rl-protocol.md §7)."""

from __future__ import annotations

from typing import Any

from ...endpoints import endpoint
from ..engine_calls import call_locked, in_thread
from ..errors import RequestError
from .context import AppContext

__all__ = ["reset_prefix_cache", "sleep_inference", "wake_inference"]


async def sleep_inference(ctx: AppContext, job_id: int | None, level: int) -> dict:
    """Put the sampling engine to sleep at ``level`` (vLLM's sleep levels)."""
    job = ctx.registry.require(job_id, *endpoint("sleep_inference").job_types)
    out = await in_thread(call_locked, job, lambda: job.engine.sleep(level), ctx.timeout)
    return {"job_id": job.job_id, "sampling": [{"replica": 0, **out}]}


async def wake_inference(ctx: AppContext, job_id: int | None, body: Any) -> dict:
    """Wake the sampling engine; ``body`` is a tag list, ``{"tags": [...]}`` or None (everything)."""
    job = ctx.registry.require(job_id, *endpoint("wake_inference").job_types)
    if isinstance(body, dict):
        tags = body.get("tags")
    else:
        tags = body
    if tags is not None and (not isinstance(tags, list) or not all(isinstance(t, str) for t in tags)):
        raise RequestError("wake-inference takes a tag list, {'tags': [...]}, or null", 422)
    out = await in_thread(call_locked, job, lambda: job.engine.wake(tags), ctx.timeout)
    return {"job_id": job.job_id, "sampling": [{"replica": 0, "tags": tags, **out}]}


async def reset_prefix_cache(ctx: AppContext, job_id: int | None) -> dict:
    """Drop the sampling engine's prefix cache after the batch in flight (the job's lock drains it)."""
    job = ctx.registry.require(job_id, *endpoint("reset_prefix_cache").job_types)
    done = await in_thread(call_locked, job, lambda: job.engine.reset_prefix_cache(), ctx.timeout)
    return {"job_id": job.job_id, "sampling": [bool(done)]}
