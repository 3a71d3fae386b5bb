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
"""The Arctic RL HTTP API's transports: :class:`OnPremTransport` (a server at a URL) and :class:`LocalTransport`
(the embedded server, started as a child process of the client and stopped with it).

Every endpoint row is sent as it is: its method and path, ``?job_id=`` when the row names job types, the row's
idempotency (see :mod:`.http_session` for the retry policy), a frame body encoded with :mod:`arctic_platform.wire`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Collection
from typing import Any

from ...backend_profile import profile_from_health
from ...endpoints import endpoint
from ...protocol import JOB_CREATE_ORDER, JOB_TYPES, TERMINAL_STATES, normalize_state
from ..config import ArcticRLClientConfig
from ..errors import ArcticRLError, ArcticRLJobError
from .base import JobId, Transport
from .http_session import HttpSession, read_token
from .local_server import LocalServer

logger = logging.getLogger("arctic_platform.client")

DESTROY_RETRIES = 4
"""Retries of a ``/destroy`` that got no reply or a 5xx (backoff 0.5, 1, 2, 4 s); 404 means already gone."""


class OnPremTransport(Transport):
    """An Arctic RL server at ``backend.url`` (this project's, or Arctic-Platform's own)."""

    def __init__(self, config: ArcticRLClientConfig, jobs: dict[str, JobId | None]):
        super().__init__(config, jobs)
        self.session: HttpSession | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self.url!r})"

    # ---- lifecycle ----
    async def _reach(self) -> float:
        """Set :attr:`url`; return how long to wait for ``/health``."""
        self.url = self.config.backend.url.rstrip("/")
        return self.config.connect_timeout

    async def connect(self) -> None:
        c = self.config
        token = read_token(c.backend.token_env_var)
        health_wait = await self._reach()
        self.session = HttpSession(
            self.url, token=token, connect_timeout=c.connect_timeout, request_timeout=c.request_timeout,
            max_retries=c.max_retries,
        )  # fmt: skip
        health = await self._wait_health(health_wait)
        caps = health.get("capabilities") if isinstance(health, dict) else None
        self.capabilities = tuple(str(x) for x in caps) if isinstance(caps, list) else ()
        self.profile = profile_from_health(health)

    def _server_exited(self) -> str | None:
        """Why the backend cannot answer any more (a local server that exited), else None."""
        return None

    async def _wait_health(self, timeout: float) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                return await self.session.request(
                    "GET", endpoint("health").path, timeout=min(5.0, self.config.request_timeout)
                )
            except ArcticRLError as e:
                gone = self._server_exited()
                if gone is not None:
                    raise ArcticRLError(None, gone, "/health") from None
                if e.status is not None and e.status < 500 or loop.time() > deadline:
                    raise
            await asyncio.sleep(0.1)

    async def create_jobs(self, body: Callable[[str], dict], wait_for: Collection[str] | None) -> None:
        for jt in JOB_CREATE_ORDER:
            if self.config.job_gpus(jt) <= 0:
                continue
            r = await self.call("initialize", json_body=body(jt))
            self.owned.append((r["job_id"], jt))
            self.jobs[jt] = r["job_id"]
        await self.wait_ready(JOB_TYPES if wait_for is None else wait_for)

    async def attach(self, wait_for: Collection[str] | None) -> None:
        for jt, jid in self.jobs.items():
            if jid is None:
                continue
            info = await self.job_info(jid)
            if info.get("job_type") != jt:
                raise ArcticRLJobError(None, f"job {jid} is a {info.get('job_type')} job, not {jt}", "start", jid)
            state = normalize_state(info.get("status"))
            if state in TERMINAL_STATES or state != "running" and (wait_for is None or jt in wait_for):
                await self._wait_running(jid)  # still building: wait; failed or gone: raises

    async def wait_ready(self, job_types: Collection[str]) -> None:
        await asyncio.gather(
            *(self._wait_running(jid) for jt, jid in self.jobs.items() if jid is not None and jt in job_types)
        )

    async def job_info(self, job_id: JobId) -> dict:
        return await self.call("job_info", job_id)

    async def _wait_running(self, job_id: JobId) -> dict:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.job_ready_timeout
        delay = 0.05
        while True:
            info = await self.job_info(job_id)
            st = normalize_state(info.get("status"))
            if st == "running":
                return info
            if st in TERMINAL_STATES:
                subs = await self._sub_job_states()
                raise ArcticRLJobError(
                    None,
                    f"job {job_id} ({info.get('job_type')}) is {st}: reason={info.get('reason') or '(no reason)'} "
                    f"sub_jobs=[{subs}]",
                    f"/job/{job_id}",
                    job_id,
                    st,
                )
            if loop.time() > deadline:
                raise ArcticRLJobError(
                    None, f"job {job_id} still {st} after job_ready_timeout={self.config.job_ready_timeout:.0f}s",
                    f"/job/{job_id}", job_id, st,
                )  # fmt: skip
            await asyncio.sleep(delay)
            delay = min(1.0, delay * 1.5)

    async def _sub_job_states(self) -> str:
        parts = []
        for jt, jid in self.jobs.items():
            if jid is None:
                continue
            try:
                parts.append(f"{jt}={normalize_state((await self.job_info(jid)).get('status'))}")
            except ArcticRLError:
                parts.append(f"{jt}=unknown")
        return ",".join(parts)

    async def close(self) -> list[str]:
        """Destroy the owned jobs (reverse order, retried with backoff; 404 = already gone), close the session."""
        self.closed = True
        errors = []
        if self.session is not None:
            for jid, jt in reversed([] if self._server_exited() else self.owned):
                try:  # retried with backoff: a job left behind makes the next start's /initialize a 409
                    await self.session.request(
                        "POST", endpoint("destroy").path, params={"job_id": jid}, json_body={"job_type": jt},
                        idempotent=True, timeout=min(60.0, self.config.request_timeout),
                        max_retries=DESTROY_RETRIES, retry_status=(500, 502, 503, 504),
                    )  # fmt: skip
                except ArcticRLError as e:
                    if e.status != 404:
                        errors.append(f"job {jid} ({jt}) may still be running: {e}")
            self.owned.clear()
            await self.session.aclose()
        return errors

    # ---- calls ----
    async def call(
        self, name: str, job_id: Any = None, *, json_body: Any = None, tree: Any = None, idempotent: bool | None = None
    ) -> Any:
        row = endpoint(name)
        path = row.path.replace("{job_id}", str(job_id)) if "{job_id}" in row.path else row.path
        if self.session is None:
            raise ArcticRLError(None, "the client is not started (await client.start())", path)
        if self.closed:
            raise ArcticRLError(None, "the client is closed", path)
        frame = None
        if row.body == "frame":
            from ... import wire

            frame = await asyncio.to_thread(wire.encode, tree)
        return await self.session.request(
            row.method, path, params={"job_id": job_id} if row.job_types else None, json_body=json_body, frame=frame,
            idempotent=row.idempotent if idempotent is None else idempotent,
        )  # fmt: skip


class LocalTransport(OnPremTransport):
    """The embedded server as this client's child process (:class:`.local_server.LocalServer`): started by
    :meth:`connect`, stopped by :meth:`close`. Relative paths in calls are the caller's working directory's."""

    def __init__(self, config: ArcticRLClientConfig, jobs: dict[str, JobId | None]):
        super().__init__(config, jobs)
        self.server: LocalServer | None = None

    async def _reach(self) -> float:
        c = self.config
        if c.reconnecting:
            raise ArcticRLError(
                None, "job ids given (reconnect) with a local backend; use onprem with the URL", "start"
            )
        self.server = LocalServer(
            c.backend, job_gpus={t: c.job_gpus(t) for t in JOB_CREATE_ORDER}, max_seq_len=c.max_seq_len,
            device=c.device, log_prob_devices=c.log_prob_devices,
        )  # fmt: skip
        self.url = await self.server.start()
        return max(1.0, self.server.deadline - time.monotonic())

    def _server_exited(self) -> str | None:
        srv = self.server
        if srv is None or srv.proc is None or srv.proc.poll() is None:
            return None
        return f"the local server exited ({srv.proc.returncode}); log tail:\n{srv.log_tail()}"

    async def close(self) -> list[str]:
        errors = await super().close()
        if self.server is not None:
            await self.server.stop()
        return errors

    def server_path(self, path: str | None) -> str | None:
        """Relative paths mean the caller's working directory; the local server runs elsewhere."""
        return os.path.abspath(path) if path is not None else None
