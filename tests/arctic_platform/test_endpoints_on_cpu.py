# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The endpoint table (arctic_platform.endpoints) is the one the server's routes and the client use: every route is a
row (method, path, the job types its lookup accepts), every row is a route, every client call names a row, and the
Cortex dispatch maps only rows."""

from __future__ import annotations

import pytest

from arctic_platform.client.client import AsyncArcticRLClient
from arctic_platform.client.transports.onprem import OnPremTransport
from arctic_platform.client.transports.snowapi import CORTEX_NOOPS, CORTEX_ROUTES
from arctic_platform.endpoints import ENDPOINTS, OPERATION_TYPES


def _routes():
    from arctic_platform.server.routes import admin, jobs, sampling, training

    out = {}
    for module in (jobs, training, sampling, admin):
        for r in module.router.routes:
            if r.path in admin.LEGACY_PATHS:
                continue
            lookups = [d.call for d in r.dependant.dependencies if hasattr(d.call, "job_types")]
            out[(next(iter(r.methods)), r.path)] = lookups[0].job_types if lookups else None
    return out


def test_every_server_route_is_a_row_and_every_row_a_route():
    routes = _routes()
    rows = {(e.method, e.path) for e in ENDPOINTS.values()}
    assert set(routes) == rows
    for e in ENDPOINTS.values():
        looked_up = routes[(e.method, e.path)]
        if looked_up is not None:  # the route looks its job up with a dependency: the row's job types
            assert looked_up == e.job_types, (e.name, looked_up)
    assert OPERATION_TYPES == ("weight-sync", "reset-prefix-cache", "sleep-inference", "wake-inference")


class _Recorder(OnPremTransport):
    """The on-prem transport with its one sending method recording instead of sending (the client's dispatch is what
    is tested)."""

    async def call(self, name, job_id=None, *, json_body=None, tree=None, idempotent=None):
        self.seen.append((name, job_id, idempotent))
        return {"results": [{"token_ids": [1]}], "metrics": {}}


@pytest.mark.asyncio
async def test_every_client_call_goes_through_its_row_with_the_rows_job():
    from arctic_platform.client import ArcticRLClientConfig

    c = AsyncArcticRLClient(ArcticRLClientConfig(model_name="m", backend={"type": "onprem", "url": "http://x"}))
    c.capabilities = ("token_ids",)
    c._jobs.update({"training": 1, "sampling": 2, "log_prob": 3})
    c._transport = rec = _Recorder(c.config, c._jobs)
    rec.seen = []
    calls = {
        "health": (), "status": (), "job_info": (1,), "forward_backward": ({}, {}), "step": (), "profile": ("start",),
        "forward": ({}, {}), "save": (), "load_checkpoint": (), "generate": ([[5]],), "log_probs": (["x"],),
        "sleep_training": (), "wake_training": (), "empty_training_cache": (), "sleep_log_prob": (),
        "wake_log_prob": (), "sync_weights": (), "sleep_inference": (), "wake_inference": (),
        "reset_prefix_cache": (), "weight_norm": (),
    }  # fmt: skip
    for name, args in calls.items():
        rec.seen.clear()
        await getattr(c, name)(*args)
        (got, job_id, _), *_ = rec.seen
        row = ENDPOINTS[name]
        assert got == name, (name, got)
        want = {"training": 1, "sampling": 2, "log_prob": 3}[row.job_types[0]] if row.job_types else None
        assert job_id == (1 if name == "job_info" else want), (name, job_id)
    # a row's key makes the call idempotent
    rec.seen.clear()
    await c.save(step=3)
    await c.sync_weights(policy_version=4)
    await c.save()
    assert [i for _, _, i in rec.seen] == [True, True, False]
    client_rows = {n for n in ENDPOINTS if hasattr(AsyncArcticRLClient, n)}
    assert client_rows == set(calls)
    assert set(CORTEX_ROUTES) | set(CORTEX_NOOPS) <= set(ENDPOINTS)
