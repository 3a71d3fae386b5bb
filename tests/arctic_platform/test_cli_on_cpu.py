# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The installed ``arctic-verl`` console script: ``tiny-model`` and ``server`` (the issue's user story)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest


def _console_script() -> str:
    exe = Path(sys.executable).with_name("arctic-verl")
    found = str(exe) if exe.exists() else shutil.which("arctic-verl")
    if not found:
        pytest.skip("the arctic-verl console script is not installed (run ./build.sh test)")
    return found


def test_tiny_model_then_server(tmp_path):
    cli = _console_script()
    r = subprocess.run([cli, "tiny-model", str(tmp_path / "tiny")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "94784 parameters" in r.stdout and (tmp_path / "tiny" / "config.json").is_file()

    proc = subprocess.Popen(
        [cli, "server", "--model", str(tmp_path / "tiny")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("Arctic RL server listening on http://127.0.0.1:"), line + proc.stderr.read()
        url = line.split(" on ", 1)[1].strip()
        assert httpx.get(url + "/health", timeout=30).json()["status"] == "OK"
        # --model is the default model of /initialize
        r = httpx.post(url + "/initialize", json={"job_type": "sampling"}, timeout=30)
        assert r.status_code == 200 and r.json()["status"] == "PENDING"
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and "Traceback" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_server_refuses_a_model_folder_without_config(tmp_path):
    r = subprocess.run(
        [_console_script(), "server", "--model", str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 2 and "tiny-model" in r.stderr
