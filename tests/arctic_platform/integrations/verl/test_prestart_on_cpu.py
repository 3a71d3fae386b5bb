# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The embedded server started before Ray (``ArcticRemoteBackend.prestart``) and adopted by ``from_config``: a real
server on 127.0.0.1 with the torch sampler (the vLLM path runs in the smoke)."""

import os

import pytest

from arctic_platform.client import ArcticRLClient
from arctic_platform.integrations.verl import prestart as early
from arctic_platform.integrations.verl.adapter import ArcticRemoteBackend


@pytest.fixture
def cfg(compose_arctic, tiny_model, tmp_path):
    def _cfg(*extra):
        return compose_arctic(
            [
                f"actor_rollout_ref.model.path={tiny_model}",
                f"trainer.default_local_dir={tmp_path / 'ckpt'}",
                f"remote_backend.arctic.backend.log_file={tmp_path / 'server.log'}",
                "remote_backend.arctic.backend.sampling_engine=torch",
                *extra,
            ]
        )

    yield _cfg
    os.environ.pop(early.EARLY_ENV, None)
    early.release()


def _jobs(handle):
    return {jt: handle[f"{jt}_job_id"] for jt in ("training", "sampling", "log_prob")}


def _states(url, jobs):
    probe = ArcticRLClient.from_handle(
        {"version": 1, "backend": "onprem", "url": url, "model_name": "probe", **{f"{k}_job_id": None for k in jobs}}
    )
    probe.connect()
    try:
        return {jt: probe.job_info(jid).get("status") for jt, jid in jobs.items()}
    finally:
        probe.close()


def test_from_config_adopts_the_prestarted_server_and_jobs(cfg, tmp_path):
    c = cfg()
    ArcticRemoteBackend.prestart(c)
    assert early.EARLY_ENV in os.environ  # what Ray's processes inherit
    driver = early._early
    url, jobs = driver.url, {jt: getattr(driver, f"{jt}_job_id") for jt in ("training", "sampling", "log_prob")}
    assert all(jobs.values())
    backend = ArcticRemoteBackend.from_config(c)  # as verl's TaskRunner does
    try:
        handle = backend.reconnect_handle()
        assert handle["url"] == url and _jobs(handle) == jobs  # the same server and jobs: nothing started twice
        assert early.EARLY_ENV not in os.environ  # adopted once
        log = (tmp_path / "server.log").read_text()
        assert log.count("Arctic RL server listening") == 1
    finally:
        backend.destroy()  # the adopter owns the jobs: it destroys them, as a TaskRunner's backend did
    assert _states(url, jobs) == dict.fromkeys(jobs, "TERMINATED")
    server = driver._client._transport.server.proc
    assert server.poll() is None  # the driver's server outlives the TaskRunner's backend ...
    early.release()
    assert server.wait(30) is not None  # ... and stops when the driver releases it (atexit)


def test_a_changed_config_destroys_the_early_jobs_and_starts_afresh(cfg, tmp_path, caplog):
    ArcticRemoteBackend.prestart(cfg())
    driver = early._early
    url, jobs = driver.url, {jt: getattr(driver, f"{jt}_job_id") for jt in ("training", "sampling", "log_prob")}
    with caplog.at_level("WARNING"):
        backend = ArcticRemoteBackend.from_config(cfg("actor_rollout_ref.actor.optim.lr=0.02"))
    try:
        assert backend.reconnect_handle()["url"] != url  # its own server
        assert any(
            "created from another config (training.optimizer" in r.getMessage() and "starting afresh" in r.getMessage()
            for r in caplog.records
        ), [r.getMessage() for r in caplog.records]
        # the early jobs are gone: their GPUs are the ones the new jobs need
        assert _states(url, jobs) == dict.fromkeys(jobs, "TERMINATED")
    finally:
        backend.destroy()


@pytest.mark.parametrize(
    "extra, why",
    [
        (["remote_backend.arctic.backend.prestart=false"], "remote_backend.arctic.backend.prestart=false"),
        (["+ray_kwargs.ray_init.address=auto"], "Ray joins a running cluster"),
    ],
)
def test_no_prestart_where_the_taskrunner_could_not_adopt(cfg, extra, why, caplog):
    with caplog.at_level("INFO", logger=ArcticRemoteBackend.__module__):
        ArcticRemoteBackend.prestart(cfg(*extra))
    assert early._early is None and early.EARLY_ENV not in os.environ
    assert any(why in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
