# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""arctic_platform.client.ArcticRLClient mirrors AsyncArcticRLClient: every public coroutine method has a sync twin
with the same name, parameters and docstring, which returns the result instead of a coroutine."""

from __future__ import annotations

import inspect

import pytest

from arctic_platform.client import ArcticRLClient, ArcticRLError, AsyncArcticRLClient

# coroutine methods whose sync twin is written by hand: it returns the sync client itself, or releases its loop
HAND_WRITTEN = {"connect", "start", "close"}


def _coroutine_methods() -> list[str]:
    return sorted(
        n
        for n, f in vars(AsyncArcticRLClient).items()
        if not n.startswith("_") and inspect.iscoroutinefunction(f) and n not in HAND_WRITTEN
    )


def test_every_coroutine_method_has_a_sync_twin_with_its_signature_and_docstring():
    names = _coroutine_methods()
    assert "generate" in names and "forward_backward" in names and len(names) >= 20
    for name in names:
        sync = getattr(ArcticRLClient, name, None)
        assert sync is not None, f"ArcticRLClient has no {name}"
        assert not inspect.iscoroutinefunction(sync), name
        want = inspect.signature(getattr(AsyncArcticRLClient, name))
        assert inspect.signature(sync) == want, name
        assert sync.__doc__ == getattr(AsyncArcticRLClient, name).__doc__, name
        assert sync.__name__ == name and sync.__qualname__ == f"ArcticRLClient.{name}"


def test_the_sync_twin_runs_the_coroutine_and_returns_its_result():
    client = ArcticRLClient({"model_name": "unused"})
    try:
        # not started: the async client refuses before any I/O; the sync twin runs it and raises its error
        with pytest.raises(ArcticRLError, match="not started"):
            client.status()
        assert client.job_body("sampling")["job_type"] == "sampling"
    finally:
        client.close()
