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
"""The client's transports: one interface (:class:`.base.Transport`), three implementations.

| Module | Role |
|---|---|
| ``base.py`` | ``Transport``: connect, create / attach / wait for / release jobs, send an endpoint row's call |
| ``onprem.py`` | ``OnPremTransport`` (a server at a URL), ``LocalTransport`` (the embedded server as a child process) |
| ``http_session.py`` | their HTTP session: timeouts, the retry policy, the bearer token |
| ``local_server.py`` | the local server's process and the GPUs it gets |
| ``cortex.py`` | ``CortexTransport``: the calls on Snowflake Cortex's SnowAPI, bodies lowered to what it takes |
| ``snowapi.py`` | SnowAPI itself: create / wait / cancel, chunked octet bodies, polling, its retry rules |
| ``cortex_body.py`` | what is sent to Cortex: create body, forward-backward frame, per-step learning rate, refusals |
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..config import ArcticRLClientConfig, CortexConfig, LocalConfig, OnPremConfig
from .base import JobId, Transport

__all__ = ["Transport", "config_fields", "transport_for"]


def transport_for(
    config: ArcticRLClientConfig,
    jobs: dict[str, JobId | None],
    *,
    sleep: Callable[[float], Awaitable[Any]] | None = None,
    handle: dict | None = None,
) -> Transport:
    """The transport of ``config.backend`` (``local``, ``onprem`` or ``cortex``), over the client's ``jobs``.
    ``sleep`` and ``handle``: see :class:`.cortex.CortexTransport` (the HTTP transports take neither)."""
    b = config.backend
    if isinstance(b, CortexConfig):
        from .cortex import CortexTransport

        return CortexTransport(config, jobs, sleep=sleep, handle=handle)
    from .onprem import LocalTransport, OnPremTransport

    if isinstance(b, LocalConfig):
        return LocalTransport(config, jobs)
    assert isinstance(b, OnPremConfig), type(b)
    return OnPremTransport(config, jobs)


def config_fields(handle: dict) -> dict[str, Any]:
    """The backend's config fields of a client re-attached from a reconnect handle (a local server is re-attached
    as ``onprem``: the re-attached client does not own it)."""
    if handle.get("backend") == "cortex":
        from .cortex import CortexTransport

        return CortexTransport.config_fields(handle)
    return {"backend": OnPremConfig(url=handle["url"], token_env_var=handle.get("token_env_var"))}
