# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Fixtures shared by the arctic_platform tests: the tiny model and a real server on 127.0.0.1.

Nothing heavy is imported at module level. A server is a subprocess (``python -m arctic_platform.server``) that binds
port 0 itself and reports the port it got through ``--port-file`` (never probe-then-hand-on); every server started
here is stopped (SIGTERM, then SIGKILL) when its fixture ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """The tiny Qwen2 fixture (seed 0), made once per xdist worker."""
    from arctic_platform.fixtures import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


@dataclass
class RunningServer:
    url: str
    proc: subprocess.Popen
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def _stop(proc: subprocess.Popen, grace: float = 15.0) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=grace)


@contextlib.contextmanager
def serve(workdir: Path, *args: str, env: dict | None = None, timeout: float = 90.0, token: str | None = None):
    """Run ``python -m arctic_platform.server --port 0 ARGS`` and yield a :class:`RunningServer` once /health is OK."""
    import httpx

    tag = uuid.uuid4().hex[:8]
    port_file = workdir / f"port-{tag}"
    log = workdir / f"server-{tag}.log"
    full_env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", **(env or {})}
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            [sys.executable, "-m", "arctic_platform.server", "--port", "0", "--port-file", str(port_file), *args],
            stdout=logf,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=full_env,
            cwd=workdir,  # never the repository root: ``-m`` would import the source tree instead of the wheel
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + timeout
        while not port_file.exists():
            assert proc.poll() is None, f"server exited early ({proc.returncode}):\n{log.read_text()}"
            assert time.monotonic() < deadline, f"server did not listen within {timeout}s:\n{log.read_text()}"
            time.sleep(0.05)
        host = "127.0.0.1"
        for i, a in enumerate(args):
            if a == "--host":
                host = args[i + 1]
        host = "127.0.0.1" if host in ("0.0.0.0", "localhost") else host
        url = f"http://{host}:{int(port_file.read_text())}"
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        while True:
            try:
                if httpx.get(f"{url}/health", headers=headers, timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"/health not OK within {timeout}s:\n{log.read_text()}"
            time.sleep(0.05)
        yield RunningServer(url, proc, log)
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def serve_server():
    """The :func:`serve` context manager, for tests that start their own server."""
    return serve


@pytest.fixture(scope="session")
def proxy_cls():
    """:class:`proxy.Proxy`: a recording, fault-injecting HTTP proxy in front of a real server (``Answer``, ``Call``
    are attributes of the returned class's module, ``proxy_cls.module``)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("arctic_test_proxy", Path(__file__).parent / "proxy.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve their module by name
    spec.loader.exec_module(mod)
    mod.Proxy.module = mod
    return mod.Proxy
