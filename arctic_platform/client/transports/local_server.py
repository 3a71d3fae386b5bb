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
"""The local transport's server process, :class:`LocalServer`: ``python -m arctic_platform.server --port 0 --port-file
F`` in its own session; the port is read from the file the server writes after binding. Stopping sends SIGTERM,
waits, then SIGKILL (bounded). Also the GPUs it gets (:func:`server_environment`)."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
import weakref
from pathlib import Path

from ...protocol import JOB_TYPES, gpus_flag
from ..config import LocalConfig
from ..errors import ArcticRLError

logger = logging.getLogger("arctic_platform.client")


def _signal_group(proc: subprocess.Popen, sig: int, fallback) -> None:
    """``sig`` to the server's process group; ``fallback()`` (the child alone) when the group cannot be signalled."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        fallback()


async def _signal_and_wait(proc: subprocess.Popen, sig: int, fallback, grace: float) -> None:
    """:func:`_signal_group`, then poll up to ``grace`` s for the child to exit (without blocking the loop)."""
    _signal_group(proc, sig, fallback)
    t0 = time.monotonic()
    while proc.poll() is None and time.monotonic() - t0 < grace:
        await asyncio.sleep(0.05)


def _terminate(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM the server's process group, wait up to ``grace`` s, then SIGKILL (synchronous; used at exit)."""
    if proc.poll() is not None:
        return
    _signal_group(proc, signal.SIGTERM, proc.terminate)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        _signal_group(proc, signal.SIGKILL, proc.kill)
        proc.wait(timeout=grace)


NODE_DEVICES_ENV = "ARCTIC_NODE_CUDA_VISIBLE_DEVICES"
"""The driver's ``CUDA_VISIBLE_DEVICES`` before Ray started (:func:`record_node_devices`): the node's GPUs a local
server may use. A local Ray cluster's raylet, and every worker it starts, inherit it."""


def record_node_devices(environ: dict | None = None) -> None:
    """Remember this process's ``CUDA_VISIBLE_DEVICES`` under :data:`NODE_DEVICES_ENV` (nothing when it is unset:
    then the node's GPUs are all of them). Called by the verl plugin's preflight, before Ray starts."""
    environ = os.environ if environ is None else environ
    if "CUDA_VISIBLE_DEVICES" in environ and NODE_DEVICES_ENV not in environ:
        environ[NODE_DEVICES_ENV] = environ["CUDA_VISIBLE_DEVICES"]


def _ray_gave_no_gpu() -> bool:
    """Whether this process is a Ray worker that holds no GPU (verl's TaskRunner actor), asked without importing Ray."""
    import sys

    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return False
    try:
        return not ray.get_runtime_context().get_accelerator_ids().get("GPU")
    except Exception:  # not inside a worker (a driver) or an older Ray: nothing assigned by Ray to undo
        return False


def server_environment(environ, extra_env: dict[str, str], *, ray_gave_no_gpu: bool) -> dict[str, str]:
    """The local server's environment: ``environ`` with ``extra_env`` over it, and the node's GPUs.

    ``CUDA_VISIBLE_DEVICES`` is ``extra_env``'s when it names one, else this process's own unless this is a Ray worker
    that holds no GPU (verl's TaskRunner actor, which spawns the server): there it is the value the driver recorded
    before Ray started (:data:`NODE_DEVICES_ENV`), else the inherited one, except Ray's empty value (Ray 2.60 keeps the
    node's value for such a worker unless ``RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=1``; older Rays blank it), which
    becomes none: every GPU of the node. The server's placement maps its jobs through that list.
    """
    env = {**environ, **extra_env}
    if "CUDA_VISIBLE_DEVICES" in extra_env or not ray_gave_no_gpu:
        return env  # the user's choice, or this process's own view (a driver, or a Ray worker holding GPUs)
    if NODE_DEVICES_ENV in env:
        env["CUDA_VISIBLE_DEVICES"] = env[NODE_DEVICES_ENV]
    elif env.get("CUDA_VISIBLE_DEVICES") == "":
        del env["CUDA_VISIBLE_DEVICES"]
    return env


class LocalServer:
    """The embedded server as a child process (its own session, so a terminal's Ctrl-C reaches only the client)."""

    def __init__(
        self,
        cfg: LocalConfig,
        *,
        job_gpus: dict[str, int],
        max_seq_len: int,
        device: str,
        log_prob_devices: str = "own",
    ):
        self.cfg = cfg
        self.job_gpus = job_gpus
        self.log_prob_devices = log_prob_devices
        self.max_seq_len = max_seq_len
        self.device = device
        self.proc: subprocess.Popen | None = None
        self.url: str | None = None
        self._tmp: str | None = None
        self._log = None
        self._finalizer = None

    @property
    def log_path(self) -> str | None:
        return self.cfg.log_file or (os.path.join(self._tmp, "server.log") if self._tmp else None)

    def log_tail(self, n: int = 30) -> str:
        p = self.log_path
        if not p or not os.path.exists(p):
            return ""
        with open(p, "rb") as f:
            return b"\n".join(f.read().splitlines()[-n:]).decode(errors="replace")

    async def start(self) -> str:
        cfg = self.cfg
        self._tmp = tempfile.mkdtemp(prefix="arctic-rl-server-")
        port_file = os.path.join(self._tmp, "port")
        self._log = open(self.log_path, "ab")  # closed in stop()
        argv = [
            cfg.python, "-m", "arctic_platform.server",
            "--host", cfg.host,
            "--port", str(cfg.port),
            "--port-file", port_file,
            *(a for jt in JOB_TYPES for a in (gpus_flag(jt), str(self.job_gpus[jt]))),
            "--threads", str(cfg.threads),
            "--max-seq-len", str(self.max_seq_len),
            "--device", self.device,
            "--log-prob-devices", self.log_prob_devices,
            "--exit-with-parent",
        ]  # fmt: skip
        if cfg.token_env_var:
            argv += ["--token-env", cfg.token_env_var]  # the value travels in the inherited environment only
        argv += list(cfg.server_args)
        env = server_environment(os.environ, cfg.extra_env, ray_gave_no_gpu=_ray_gave_no_gpu())
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self._tmp,  # ``-m`` puts the cwd first on sys.path: never let a source checkout shadow the install
            start_new_session=True,
        )
        self._finalizer = weakref.finalize(self, _terminate, self.proc, 5.0)
        deadline = time.monotonic() + cfg.startup_timeout
        while not os.path.exists(port_file):
            if self.proc.poll() is not None:
                raise ArcticRLError(
                    None,
                    f"the local server exited with status {self.proc.returncode} before listening; log tail:\n"
                    + self.log_tail(),
                    "start",
                )
            if time.monotonic() > deadline:
                raise ArcticRLError(None, f"the local server did not listen within {cfg.startup_timeout:.0f}s", "start")
            await asyncio.sleep(0.05)
        port = int(Path(port_file).read_text().strip())
        host = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
        self.url = f"http://{host}:{port}"
        self.deadline = deadline
        return self.url

    async def stop(self, grace: float = 10.0) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            await _signal_and_wait(proc, signal.SIGTERM, proc.terminate, grace)
            if proc.poll() is None:
                logger.warning("local server pid %d ignored SIGTERM for %.0fs; killing it", proc.pid, grace)
                await _signal_and_wait(proc, signal.SIGKILL, proc.kill, grace)
        if self._finalizer is not None:
            self._finalizer.detach()
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
