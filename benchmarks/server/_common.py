# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Shared helpers of the server benchmarks: timing, CSV output, a tiny model and a server subprocess."""

from __future__ import annotations

import contextlib
import csv
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "results" / "server"


def timeit(fn, *, repeat: int, warmup: int = 1) -> float:
    """Median wall seconds of ``fn()`` over ``repeat`` runs after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def write_csv(name: str, rows: list[dict], out_dir: Path | None = None) -> Path:
    """Write ``rows`` to ``<out_dir or benchmarks/results/server>/<name>.csv`` with the host's CPU added."""
    out = Path(out_dir) if out_dir is not None else RESULTS
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.csv"
    host = {"host_cpu": platform.processor() or platform.machine(), "cpus": os.cpu_count()}
    rows = [dict(r, **host) for r in rows]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


CHILD_MARK = "bench-child-result: "
"""The line a benchmark's child process prints its JSON result after (:func:`child_result`, :func:`run_child`)."""


def child_result(value: dict) -> None:
    """Print a child process's result for :func:`run_child` (other output, e.g. vLLM's, may surround it)."""
    import json

    print(CHILD_MARK + json.dumps(value), flush=True)


def run_child(cmd: list[str], code: str | None) -> dict:
    """Run a benchmark's child ``cmd`` with ``code`` (another checkout's root, or None: the installed package) first
    on ``PYTHONPATH``; its :func:`child_result`, or exit naming the code and the child's stderr."""
    import json

    env = dict(os.environ, PYTHONPATH=code) if code else dict(os.environ)
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith(CHILD_MARK)]
    if res.returncode != 0 or not lines:
        raise SystemExit(f"{code or 'installed'}: the child failed (exit {res.returncode}):\n{res.stderr[-3000:]}")
    return json.loads(lines[-1].removeprefix(CHILD_MARK))


def tiny_model(workdir: Path) -> Path:
    from arctic_platform.fixtures import make_tiny_model

    return make_tiny_model(workdir / "tiny", seed=0)


@contextlib.contextmanager
def server(workdir: Path, *args: str):
    """``python -m arctic_platform.server --port 0`` in ``workdir``; yields its URL; always stopped."""
    import httpx

    port_file = workdir / "port"
    log = open(workdir / "server.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "arctic_platform.server", "--port", "0", "--port-file", str(port_file), *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=workdir,
        start_new_session=True,
    )
    try:
        while not port_file.exists():
            if proc.poll() is not None:
                raise RuntimeError((workdir / "server.log").read_text())
            time.sleep(0.05)
        url = f"http://127.0.0.1:{int(port_file.read_text())}"
        while True:
            try:
                if httpx.get(url + "/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        log.close()


def workdir() -> Path:
    """A scratch folder removed when the benchmark exits."""
    import atexit
    import shutil

    d = Path(tempfile.mkdtemp(prefix="arctic-bench-"))
    atexit.register(shutil.rmtree, d, True)
    return d
