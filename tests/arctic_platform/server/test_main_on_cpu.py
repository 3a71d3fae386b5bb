# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""``python -m arctic_platform.server``: bind safety, the bearer token on every request, clean shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx
import pytest


def _run(args, tmp_path, env=None, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "arctic_platform.server", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
        env={**os.environ, **(env or {})},
    )


def test_non_loopback_bind_without_token_is_refused(tmp_path):
    env = {"ARCTIC_RL_TOKEN": ""}
    r = _run(["--host", "0.0.0.0", "--port", "0"], tmp_path, env=env)
    assert r.returncode == 2 and "without a token" in r.stderr and "ARCTIC_RL_TOKEN" in r.stderr
    r = _run(["--host", "0.0.0.0", "--port", "0", "--token-env", "MY_TOKEN"], tmp_path, env={"MY_TOKEN": ""})
    assert r.returncode == 2 and "MY_TOKEN" in r.stderr


def test_token_is_checked_on_every_request(tmp_path, serve_server, tiny_model_dir):
    secret = "s3cr3t-" + os.urandom(4).hex()
    env = {"ARCTIC_RL_TOKEN": secret}
    with serve_server(tmp_path, "--host", "0.0.0.0", "--model", str(tiny_model_dir), env=env, token=secret) as s:
        good = {"Authorization": f"Bearer {secret}"}
        for path, method in (("/health", "GET"), ("/status", "GET"), ("/job/1", "GET"), ("/initialize", "POST")):
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": secret}):
                r = httpx.request(method, s.url + path, headers=headers, json={"job_type": "sampling"}, timeout=30)
                assert r.status_code == 401 and "bearer token" in r.json()["detail"], (path, headers)
                assert secret not in r.text
        assert httpx.get(s.url + "/health", headers=good, timeout=30).json()["status"] == "OK"
        r = httpx.post(s.url + "/initialize", headers=good, json={"job_type": "log_prob"}, timeout=30)
        assert r.status_code == 200
    assert secret not in s.log_text()


def test_sigint_stops_cleanly_and_reports_the_port(tmp_path, tiny_model_dir):
    port_file = tmp_path / "port"
    proc = subprocess.Popen(
        [sys.executable, "-m", "arctic_platform.server", "--model", str(tiny_model_dir), "--port-file", str(port_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("Arctic RL server listening on http://127.0.0.1:")
        port = int(line.rsplit(":", 1)[1])
        assert int(port_file.read_text()) == port
        url = f"http://127.0.0.1:{port}"
        assert httpx.get(url + "/health", timeout=30).status_code == 200
        assert httpx.post(url + "/initialize", json={"job_type": "log_prob"}, timeout=30).status_code == 200
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _health_on(sock) -> bytes:
    """One ``GET /health`` on an open socket; the raw reply (b"" when the server closed the connection)."""
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    reply = b""
    while b"\r\n\r\n" not in reply:
        chunk = sock.recv(65536)
        if not chunk:
            return reply
        reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    length = int(next(h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")))
    while len(body) < length:
        body += sock.recv(65536)
    return head


def test_an_idle_keep_alive_connection_outlives_the_clients_pool_expiry(tmp_path, serve_server):
    """A connection idle for longer than httpx keeps one in its pool (5 s) still answers: the server's keep-alive
    (KEEP_ALIVE_S) is above it, so a client never sends on a connection the server is closing. (With uvicorn's
    default of 5 s the second request below gets no reply.)"""
    import socket
    import time

    from arctic_platform.server.__main__ import KEEP_ALIVE_S

    expiry = httpx.Limits().keepalive_expiry
    assert KEEP_ALIVE_S > expiry + 30
    with serve_server(tmp_path) as srv:
        host, port = srv.url.removeprefix("http://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            assert _health_on(sock).startswith(b"HTTP/1.1 200")
            time.sleep(expiry + 1)
            assert _health_on(sock).startswith(b"HTTP/1.1 200")


def test_keep_alive_calls_do_not_wait_for_delayed_acks(tmp_path, serve_server):
    """Nagle + delayed ACK would cost ~40 ms per keep-alive call: the listening socket sets TCP_NODELAY, which every
    accepted connection inherits. Asserted as the socket option (speed belongs in benchmarks, not in a test)."""
    import socket

    from arctic_platform.server.__main__ import _bind

    s = _bind("127.0.0.1", 0)
    assert s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)  # inherited by every accepted connection
    s.close()
    with serve_server(tmp_path) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        assert [c.get("/health").status_code for _ in range(5)] == [200] * 5  # one keep-alive connection


@pytest.mark.parametrize("flag", ["--log-prob-engine=vllm", "--colocate", "--no-ray-auto-attach"])
def test_flags_that_did_nothing_are_refused(flag, capsys):
    """Flags the server once accepted and never read (a log-prob engine it never used, a colocation it never did)
    are refused by name: an unknown option, not one silently ignored."""
    import argparse

    from arctic_platform.server.__main__ import add_arguments

    parser = argparse.ArgumentParser(prog="python -m arctic_platform.server")
    add_arguments(parser)
    with pytest.raises(SystemExit) as e:
        parser.parse_args([flag])
    assert e.value.code == 2 and "unrecognized arguments" in capsys.readouterr().err
