# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""A colocated backend's staged wake / sleep around the weight sync, ``arctic-verl probe``, and the start-up refusal
on a server that advertises no profile.

All run the plugin's real classes against a real embedded server; a recording proxy shows the calls in the order
they reached the server (and rewrites ``/health`` where a test plays Arctic-Platform main).
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys

import pytest


@pytest.fixture(scope="module")
def proxied(tiny_model_dir, tmp_path_factory, serve_server, proxy_cls):
    work = tmp_path_factory.mktemp("colocate")
    with serve_server(work, "--model", str(tiny_model_dir)) as srv, proxy_cls(srv.url) as proxy:
        proxy.work = work
        yield proxy


def _run(compose_arctic, proxy, tiny_model_dir, colocate: bool, extra=()):
    from arctic_platform.integrations.verl.adapter import ArcticRemoteBackend
    from arctic_platform.integrations.verl.v1.server import ArcticV1LLMServer
    from arctic_platform.integrations.verl.v1.worker import ArcticV1ActorRolloutRefWorker

    for k, v in {"WORLD_SIZE": "1", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29617"}.items():
        os.environ.setdefault(k, v)
    cfg = compose_arctic(
        [
            f"actor_rollout_ref.model.path={tiny_model_dir}",
            f"trainer.default_local_dir={proxy.work / 'ckpt'}",
            "remote_backend.arctic.backend.type=onprem",
            f"remote_backend.arctic.backend.url={proxy.url}",
            f"remote_backend.arctic.colocate={str(colocate).lower()}",
            *extra,
        ]
    )
    backend = ArcticRemoteBackend.from_config(cfg)
    handle = backend.reconnect_handle()
    worker = ArcticV1ActorRolloutRefWorker(config=cfg.actor_rollout_ref, role="actor_rollout_ref", main_config=cfg,
                                           backend_handle=handle)  # fmt: skip
    worker.init_model()
    server = ArcticV1LLMServer(cfg, handle)
    return backend, worker, server


def _paths(calls) -> list[str]:
    out = []
    for c in calls:
        body = c.json() if c.body[:1] in (b"{", b"[") else None
        if c.path == "/operation":
            out.append(f"/operation {body['operation_type']}")
        elif c.path == "/wake-inference":
            out.append(f"/wake-inference {body.get('tags')}")
        elif c.path == "/sleep-inference":
            out.append(f"/sleep-inference level={body.get('level')}")
        elif c.path not in ("/health", "/status") and not c.path.startswith("/job/"):
            out.append(c.path)
    return out


def test_colocated_backend_sleeps_after_rollout_and_wakes_in_stages(compose_arctic, proxied, tiny_model_dir):
    backend, worker, server = _run(compose_arctic, proxied, tiny_model_dir, colocate=True)

    async def cycle():
        await worker.update_weights(global_steps=0)  # on_init_end: the first sync
        n = len(proxied.calls)
        first = await server.generate("r0", [5, 6, 7], {"temperature": 1.0})
        assert len(first.token_ids) > 0
        await server.sleep()  # verl's sync loop, after every rollout
        with pytest.raises(Exception, match="sleeping"):
            await server.generate("r1", [5, 6, 7], {"temperature": 1.0})  # training now owns the memory
        await worker.update_weights(global_steps=1)
        again = await server.generate("r2", [5, 6, 7], {"temperature": 1.0})
        assert again.extra_fields["global_steps"] == 1
        await worker.backend.aclose()
        await server.backend.aclose()
        return _paths(proxied.calls[n:])

    try:
        paths = asyncio.run(cycle())
    finally:
        backend.destroy()
    assert paths == [
        "/generate",
        "/sleep-inference level=1",
        "/generate",  # 409: sleeping
        "/wake-inference ['weights']",
        "/operation weight-sync",
        "/wake-inference ['kv_cache']",
        "/operation reset-prefix-cache",
        "/generate",
    ], paths


def _sleep_then_sync(compose_arctic, proxy, tiny_model_dir, colocate: bool, extra=()) -> list[str]:
    """The replica's sleep after a rollout, then the forwarder's weight sync: the calls that reached the server."""
    backend, worker, server = _run(compose_arctic, proxy, tiny_model_dir, colocate=colocate, extra=extra)

    async def cycle():
        n = len(proxy.calls)
        await server.sleep()
        await worker.update_weights(global_steps=1)
        await worker.backend.aclose()
        await server.backend.aclose()
        return _paths(proxy.calls[n:])

    try:
        return asyncio.run(cycle())
    finally:
        backend.destroy()


def test_a_backend_that_is_not_colocated_never_sleeps(compose_arctic, proxied, tiny_model_dir):
    assert _sleep_then_sync(compose_arctic, proxied, tiny_model_dir, colocate=False) == ["/operation weight-sync"]


def test_a_colocated_sampler_that_keeps_its_cache_is_never_woken(compose_arctic, proxied, tiny_model_dir):
    """colocate=true with rollout.free_cache_engine=false: the replica never sleeps the sampler, so the weight sync
    sends no wake calls either (one rule decides both)."""
    keep_cache = ["actor_rollout_ref.rollout.free_cache_engine=false"]
    calls = _sleep_then_sync(compose_arctic, proxied, tiny_model_dir, colocate=True, extra=keep_cache)
    assert calls == ["/operation weight-sync"]


def _probe(args, cwd):
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "arctic_platform.cli", "probe", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_probe_against_the_embedded_server(arctic_overrides, tiny_model_dir, tmp_path):
    args = [
        *arctic_overrides,
        f"actor_rollout_ref.model.path={tiny_model_dir}",
        f"trainer.default_local_dir={tmp_path}",
    ]
    r = _probe(args, tmp_path)
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    for line in (
        "ok   GET /health",
        "capability check: 0 refusal(s) by the embedded arctic-verl server",
        "ok   POST /initialize x3 (the plugin's bodies)",
        "ok   update_actor: POST /forward-backward + POST /step",
        "ok   compute_log_prob: POST /forward (training job)",
        "ok   compute_ref_log_prob: POST /forward (log_prob job)",
        "ok   generate: POST /generate",
        "ok   update_weights: weight sync training -> sampling",
        "ok   POST /destroy",
        "probe: OK",
    ):
        assert line in out, (line, out)
    assert "grad_norm=" in out and "sampling=1 RUNNING" in out


def test_probe_reports_refusals_and_the_servers_words(arctic_overrides, proxied, tiny_model_dir, tmp_path):
    """A server that advertises no profile is taken for Arctic-Platform main: its refusals are listed, and the
    embedded server's own 422 for flash_attention_2 (that profile's default) is shown as it said it."""
    proxied.rewrite = lambda call, body: (
        {k: v for k, v in body.items() if k not in ("profile", "capabilities")} if call.path == "/health" else body
    )
    try:
        r = _probe(
            ["--url", proxied.url, *arctic_overrides, f"actor_rollout_ref.model.path={tiny_model_dir}",
             f"trainer.default_local_dir={tmp_path}", "actor_rollout_ref.actor.clip_ratio_high=0.28"],
            tmp_path,
        )  # fmt: skip
    finally:
        proxied.rewrite = None
    out = r.stdout
    assert r.returncode == 1, out + r.stderr
    assert "REFUSED actor_rollout_ref.actor.clip_ratio_high=0.28: Arctic-Platform main hard-codes" in out
    assert "NOTE actor_rollout_ref.rollout.calculate_log_probs=True" in out
    assert "FAIL POST /initialize x3" in out and "flash_attention_2" in out and "(422)" in out, out
    assert "probe: FAILED" in out


def test_probe_fails_when_a_job_outlives_its_destroy(arctic_overrides, proxied, tiny_model_dir, tmp_path):
    """The sampling job's /destroy answers 500 every time (the first try and each of the client's retries): the
    probe names that job as possibly still running and exits 1, instead of reporting a clean run while a job holds
    the server; the other two jobs are destroyed. (One failing job, not three: each pays the retries' backoff.)"""
    import httpx

    from arctic_platform.client.transports.onprem import DESTROY_RETRIES

    answer = proxied.module.Answer
    proxied.rule = lambda call, calls: (
        answer(500) if call.path == "/destroy" and (call.json() or {}).get("job_type") == "sampling" else None
    )
    n = len(proxied.calls)
    try:
        r = _probe(
            ["--url", proxied.url, *arctic_overrides, f"actor_rollout_ref.model.path={tiny_model_dir}",
             f"trainer.default_local_dir={tmp_path}"],
            tmp_path,
        )  # fmt: skip
    finally:
        proxied.rule = None
        for job in httpx.get(f"{proxied.upstream}/status", timeout=30).json()["jobs"].values():
            if job["status"] in ("PENDING", "RUNNING"):  # what this test leaked: the next test starts clean
                httpx.post(f"{proxied.upstream}/destroy", params={"job_id": job["job_id"]},
                           json={"job_type": job["job_type"]}, timeout=120)  # fmt: skip
    out = r.stdout
    assert r.returncode == 1, out + r.stderr
    assert "ok   POST /initialize x3" in out and "ok   update_actor" in out, out
    assert "FAIL POST /destroy" in out and "(sampling) may still be running" in out, out
    assert "(training) may still be running" not in out and "(log_prob) may still be running" not in out, out
    assert "probe: FAILED (1 failed call(s), 0 refusal(s))" in out, out
    destroys = [(c.json()["job_type"], c.status) for c in proxied.calls[n:] if c.path == "/destroy"]
    assert sorted(destroys) == sorted(
        [("sampling", 500)] * (1 + DESTROY_RETRIES) + [("log_prob", 200), ("training", 200)]
    ), destroys


@pytest.mark.parametrize(
    "refused, needle",
    [
        ("actor_rollout_ref.actor.policy_loss.loss_mode=gspo", "actor_rollout_ref.actor.policy_loss.loss_mode='gspo'"),
        (
            "algorithm.rollout_correction.rollout_is=token",  # async mode's correction: unweighted on that engine
            "algorithm.rollout_correction.rollout_is='token': Arctic-Platform main returns no rollout log-probs",
        ),
    ],
)
def test_from_config_refuses_before_any_initialize_on_a_server_without_a_profile(
    compose_arctic, proxied, tiny_model_dir, refused, needle, caplog
):
    """Arctic-Platform main answers /health with {"status": "OK"}: the driver takes it for that profile and refuses
    the setting in one line before creating any job; the non-default placement settings are logged in one line."""
    from arctic_platform.integrations.verl.adapter import ArcticConfigError, ArcticRemoteBackend

    cfg = compose_arctic(
        [
            f"actor_rollout_ref.model.path={tiny_model_dir}",
            f"trainer.default_local_dir={proxied.work / 'ckpt'}",
            "remote_backend.arctic.backend.type=onprem",
            f"remote_backend.arctic.backend.url={proxied.url}",
            "remote_backend.async_rollout.enable=true",
            # placement: logged, not refused (trainer.n_gpus_per_node=1 moves rollout.n_gpus_per_node with it: not
            # a user's setting, so not listed)
            "actor_rollout_ref.actor.fsdp_config.forward_prefetch=true",
            refused,
        ]
    )
    proxied.rewrite = lambda call, body: {"status": "OK"} if call.path == "/health" else body
    n = len(proxied.calls)
    try:
        with caplog.at_level(logging.WARNING), pytest.raises(ArcticConfigError) as err:
            ArcticRemoteBackend.from_config(cfg)
    finally:
        proxied.rewrite = None
    calls = [c.path for c in proxied.calls[n:]]
    assert "/health" in calls and "/initialize" not in calls, calls
    message = str(err.value)
    assert "1 setting(s) cannot be honoured by Arctic-Platform main" in message and needle in message, message
    placement = [r.getMessage() for r in caplog.records if "no effect with a remote backend" in r.getMessage()]
    assert placement == [
        "arctic backend: no effect with a remote backend (verl's own engine placement / kernels): "
        "actor_rollout_ref.actor.fsdp_config.forward_prefetch=True"
    ], placement
