# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""A helper of the server tests that start their own server: wait for a job to leave PENDING."""

from __future__ import annotations

import time


def wait_running(http, job_id, timeout: float = 600.0) -> dict:
    """``/job/{job_id}`` once the job is RUNNING (asserted; any other end state fails with the job's record)."""
    deadline = time.monotonic() + timeout
    while True:
        info = http.get(f"/job/{job_id}").json()
        if info["status"] != "PENDING":
            assert info["status"] == "RUNNING", info
            return info
        assert time.monotonic() < deadline, info
        time.sleep(0.1)
