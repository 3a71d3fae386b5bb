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
"""The transport interface: how :class:`~arctic_platform.client.client.AsyncArcticRLClient` reaches one backend.

The client owns the call surface: every method builds the Arctic RL API's body for a row of the endpoint table
(:data:`arctic_platform.endpoints.ENDPOINTS`) and hands it to :meth:`Transport.call`, and it never asks which
transport it holds. A transport owns what differs between deployments: how the backend is reached (and started),
how jobs are created, re-attached, waited for and released, and how a row's canonical body travels (on-prem: the
body as it is; Cortex: SnowAPI's route, with the body lowered to what SnowAPI takes).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection
from typing import Any

from ...backend_profile import ARCTIC_PLATFORM_MAIN, BackendProfile
from ...protocol import JOB_CREATE_ORDER
from ..config import ArcticRLClientConfig

JobId = int | str


class Transport(ABC):
    """One backend deployment as the client sees it.

    Args:
        config: the client's config.
        jobs: the client's job ids by job type (``None``: no such job); :meth:`create_jobs` fills it, and every
            other method reads it. The same dict as the client's.

    Attributes set by :meth:`connect`: ``url`` (what a reconnect handle names), ``capabilities`` (what the backend
    advertised: ``token_ids``, ...), ``profile`` (what it honours). ``owned``: the jobs this transport created or
    adopted, as ``(job id, job type)``, released by :meth:`close`.
    """

    def __init__(self, config: ArcticRLClientConfig, jobs: dict[str, JobId | None]):
        self.config = config
        self.jobs = jobs
        self.url: str | None = None
        self.capabilities: tuple[str, ...] = ()
        self.profile: BackendProfile = ARCTIC_PLATFORM_MAIN
        self.owned: list[tuple[JobId, str]] = []
        self.closed = False

    # ---- lifecycle ----
    @abstractmethod
    async def connect(self) -> None:
        """Reach the backend (starting it when this transport runs it) and read what it advertises; create nothing.

        Raises:
            ArcticRLError: the backend cannot be reached (whatever this started is left for :meth:`close`).
        """

    @abstractmethod
    async def create_jobs(self, body: Callable[[str], dict], wait_for: Collection[str] | None) -> None:
        """Create the config's jobs (``body(job_type)``: a job's ``/initialize`` body), record their ids in
        :attr:`jobs` and :attr:`owned`, and wait until those of ``wait_for`` (None: all) run."""

    @abstractmethod
    async def attach(self, wait_for: Collection[str] | None) -> None:
        """Check that the ids in :attr:`jobs` name live jobs of their types; wait for those of ``wait_for``."""

    @abstractmethod
    async def wait_ready(self, job_types: Collection[str]) -> None:
        """Wait until the jobs of ``job_types`` run; a failed or destroyed job raises with its reason."""

    @abstractmethod
    async def job_info(self, job_id: JobId) -> dict:
        """The job's state as ``/job/{id}`` reports it (``status``, ``job_type``, ``reason``, ...)."""

    @abstractmethod
    async def close(self) -> list[str]:
        """Release the jobs in :attr:`owned`, the connection and whatever this transport started.

        Returns:
            One line per job that may still be running (its release failed after the retries).
        """

    def adopt(self) -> None:
        """Own the jobs :attr:`jobs` names (:meth:`close` releases them)."""
        self.owned = [(jid, jt) for jt in JOB_CREATE_ORDER if (jid := self.jobs[jt]) is not None]

    # ---- calls ----
    def check_route(self, name: str) -> None:
        """Raise when this backend has no route for endpoint row ``name`` (default: it serves every row)."""
        return None

    @abstractmethod
    async def call(
        self, name: str, job_id: Any = None, *, json_body: Any = None, tree: Any = None, idempotent: bool | None = None
    ) -> Any:
        """Send the call of endpoint row ``name`` with its canonical body (``json_body``, or ``tree`` for a frame
        body) and return the reply. ``idempotent`` overrides the row's when the call carries the row's key."""

    # ---- what differs in the values a call carries ----
    def server_path(self, path: str | None) -> str | None:
        """A path as the backend must read it (default: as given)."""
        return path

    def handle_fields(self) -> dict[str, Any]:
        """What a reconnect handle needs beyond the common fields (default: nothing)."""
        return {}
