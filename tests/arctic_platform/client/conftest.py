# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the client tests: one real server on 127.0.0.1 per module (``serve_server`` in the parent conftest)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def onprem_server(tiny_model_dir, tmp_path_factory, serve_server):
    """A server with the tiny model and ``--max-seq-len 64``; ``.url``, ``.work`` (its working folder)."""
    work = tmp_path_factory.mktemp("onprem")
    with serve_server(work, "--model", str(tiny_model_dir), "--max-seq-len", "64") as s:
        s.work = work
        yield s
