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
"""The embedded server started by ``main_ppo`` before Ray, and adopted by verl's TaskRunner.

Without it the server and its jobs start when the TaskRunner actor calls ``from_config``: after Ray, TransferQueue
and the TaskRunner's own imports (~30 s on this 2-core CPU), so verl's first weight sync waits for the vLLM engine.
``ArcticRemoteBackend.prestart`` (``RemoteBackend.prestart``, called by ``main_ppo`` in the driver) starts the local
server and creates the jobs without waiting for them; :func:`keep` holds that client until the driver exits and
leaves its handle in :data:`EARLY_ENV`, which Ray's processes inherit (the driver's environment when it starts the
local cluster). :func:`adopt` (in the TaskRunner's
``from_config``) re-attaches to them when the TaskRunner's client config is the one they were created from; then
the TaskRunner's backend owns the jobs (it destroys them as before) and the driver stops the server when it exits
(the server also exits with the driver). A config that differs destroys the early jobs and starts afresh, saying
which keys differ.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
from typing import Any, Optional

from omegaconf import DictConfig

logger = logging.getLogger(__name__)

EARLY_ENV = "ARCTIC_VERL_EARLY_BACKEND"
"""What :func:`keep` holds: ``{"pid", "handle", "config"}`` (JSON; the driver's pid, the client's reconnect
handle, the client config it was created from)."""

_early: Optional[Any] = None  # the driver's owning ArcticRLClient


def skip_reason(main_config: DictConfig, opts) -> Optional[str]:
    """Why this run's backend is not started before Ray (``None``: it is)."""
    if opts.backend.type != "local":
        return f"backend.type={opts.backend.type}: the server is not this run's to start"
    if not opts.backend.prestart:
        return "remote_backend.arctic.backend.prestart=false"
    ray_init = (main_config.get("ray_kwargs", None) or {}).get("ray_init", None) or {}
    if ray_init.get("address", None) or os.environ.get("RAY_ADDRESS"):
        return "Ray joins a running cluster (the TaskRunner may run on another node)"
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        return "Ray is already running (its processes would not see the early server)"
    return None


def _config_dump(client_config) -> dict:
    return client_config.model_dump(mode="json")


def keep(client, client_config) -> None:
    """Hold ``client`` (the driver's, owning the jobs it just created) until the driver exits, and leave its handle
    and config in :data:`EARLY_ENV` for Ray's processes (set before ``ray.init``, so the TaskRunner inherits it)."""
    global _early
    release()  # a second main() in one process (a notebook) replaces the first's
    _early = client
    atexit.register(release)
    os.environ[EARLY_ENV] = json.dumps(
        {"pid": os.getpid(), "handle": client.reconnect_handle(), "config": _config_dump(client_config)},
        sort_keys=True,
    )
    logger.warning(f"arctic backend: started before Ray: {client!r} (verl's TaskRunner adopts its jobs)")


def release() -> None:
    """The driver's end (``atexit``): destroy what is left of the early jobs and stop the server."""
    global _early
    client, _early = _early, None
    if client is not None:
        client.close()


def _differences(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b), key=str):
            out += _differences(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
        return out
    return [] if a == b else [path or "(the whole config)"]


def adopt(client_config) -> Optional[Any]:
    """An :class:`ArcticRLClient` re-attached to the jobs the driver created (:func:`keep`) from this same client
    config, owning them (its ``close`` destroys them); ``None`` when there are none (then the caller starts its own).
    Early jobs created from another config are destroyed first (their GPUs are the ones the caller's jobs need)."""
    raw = os.environ.pop(EARLY_ENV, None)  # one adoption: a later from_config in this process starts its own
    if not raw:
        return None
    from arctic_platform.client import ArcticRLClient

    early = json.loads(raw)
    client = ArcticRLClient.from_handle(early["handle"])
    diff = _differences(early["config"], _config_dump(client_config))
    if diff:
        shown = ", ".join(diff[:8]) + (f" and {len(diff) - 8} more" if len(diff) > 8 else "")
        logger.warning(
            f"arctic backend: the jobs main_ppo started before Ray were created from another config ({shown}); "
            "destroying them and starting afresh"
        )
        client.connect()
        client.adopt_jobs()
        client.close()
        return None
    client.adopt_jobs()
    logger.info(f"arctic backend: adopting the jobs main_ppo started before Ray (pid {early['pid']})")
    return client
