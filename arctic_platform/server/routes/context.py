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
"""FastAPI dependencies every route module shares: the app context (:class:`AppContext`, built once by
:func:`..app.create_app` and kept in ``app.state.ctx``) and the lookup of the running job a ``job_id`` query
parameter names.

Routes that read their body before looking the job up (so a malformed body is reported first, as it always was)
call ``ctx.registry.require`` themselves after reading it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from ..jobs import Job, JobRegistry
from ..settings import ServerLimits, ServerSettings

__all__ = ["AppContext", "Ctx", "ForwardJob", "LogProbJob", "SamplingJob", "TrainingJob", "app_context", "running_job"]


@dataclass
class AppContext:
    """The state every route reaches through the :data:`Ctx` dependency."""

    settings: ServerSettings
    limits: ServerLimits
    registry: JobRegistry
    background: set[asyncio.Task]
    """Tasks the app keeps alive (job builds)."""
    started_at: float
    profile: dict
    """What ``/health`` advertises as ``profile`` (:func:`..capabilities.server_profile`, computed at start)."""

    @property
    def timeout(self) -> float:
        """``engine_timeout_s``: the bounded wait for a busy engine."""
        return self.limits.engine_timeout_s


async def app_context(request: Request) -> AppContext:
    """Dependency: the app's :class:`AppContext`."""
    return request.app.state.ctx


Ctx = Annotated[AppContext, Depends(app_context)]


def running_job(*job_types: str):
    """Dependency: the running job named by the ``job_id`` query parameter, of one of ``job_types`` (422 without
    ``job_id``, 404 unknown, 400 another type, 409 not running: :meth:`.JobRegistry.require`)."""

    async def lookup(request: Request, job_id: int | None = None) -> Job:
        return request.app.state.ctx.registry.require(job_id, *job_types)

    lookup.job_types = job_types  # what the endpoint table's row says (a test compares them)
    return Depends(lookup)


TrainingJob = Annotated[Job, running_job("training")]
SamplingJob = Annotated[Job, running_job("sampling")]
LogProbJob = Annotated[Job, running_job("log_prob")]
ForwardJob = Annotated[Job, running_job("training", "log_prob")]
"""/forward: the training job or the log_prob (reference) job."""
