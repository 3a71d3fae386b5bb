# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The Cortex transport against the fake SnowAPI (a fake: Snowflake Cortex is unreachable here): job states and
reasons, the create retried only when it never landed, the retry matrix and its backoff, chunk envelopes, replay and
chunk-group errors, a lost reply that does not run an update twice, the three result forms and cursor paging, inline
operation replies, cancel on close, PAT headers over TLS and the PAT kept out of everything else.

Waits use a virtual clock (the ``clock`` fixture): no test sleeps for real.
"""

from __future__ import annotations

import json
import logging
import ssl

import pytest
import torch

from arctic_platform import wire
from arctic_platform.client import ArcticRLClientConfig, ArcticRLError, AsyncArcticRLClient, CortexConfig
from arctic_platform.client.errors import ArcticRLJobError
from arctic_platform.client.transports.snowapi import ChunkGroupError, SnowApi

pytestmark = pytest.mark.asyncio


def _config(fake, *, backend: dict | None = None, **kw) -> ArcticRLClientConfig:
    base = dict(
        model_name="Qwen/Qwen3-0.6B",
        max_seq_len=64,
        seed=7,
        training_gpus=1,
        sampling_gpus=1,
        log_prob_gpus=0,
        request_timeout=30,
        job_ready_timeout=600,
        training={"optimizer": {"lr": 1e-3}, "train_batch_size": 4},
        backend={"type": "cortex", "base_url": fake.url, "database": "DB", "schema": "SCH", **(backend or {})},
    )
    base.update(kw)
    return ArcticRLClientConfig(**base)


async def _client(fake, clock, **kw) -> AsyncArcticRLClient:
    c = AsyncArcticRLClient(_config(fake, **kw), sleep=clock.sleep)
    await c.connect()
    c._transport.api._clock = clock  # deadlines read the virtual clock too
    return c


def _batch(b: int = 2, P: int = 4, R: int = 3, *, old: bool = False, width: int = 0) -> tuple[dict, dict]:
    """A verl-shaped update batch (left-padded response fields) and its meta."""
    S = P + R
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, 300, (b, S + width), generator=g)[:, :S]
    mask = torch.ones(b, S, dtype=torch.long)
    resp = torch.zeros(b, S)
    resp[:, P:] = 1
    batch = {
        "input_ids": ids,
        "attention_mask": mask,
        "prompts": ids[:, :P],
        "responses": ids[:, P:],
        "response_mask": resp,
        "advantages": torch.randn(b, S, generator=g) * resp,
    }
    if old:
        batch["old_log_probs"] = -torch.rand(b, S, generator=g) * resp
    meta = {"temperature": 0.7, "global_batch_size": b, "batch_num_tokens": int(resp.sum()), "actor_config": {}}
    return batch, meta


# ------------------------------------------------------------------------------------------------ job lifecycle


@pytest.mark.parametrize("enum_spellings", [False, True])
async def test_create_waits_for_running_captures_sub_jobs_and_cancels_on_close(fake_mod, clock, enum_spellings):
    with fake_mod.FakeSnowAPI(enum_spellings=enum_spellings) as fake:
        c = await _client(fake, clock)
        await c.start()
        (job_id,) = fake.jobs
        assert c.training_job_id == f"{job_id}:training:0" and c.sampling_job_id == f"{job_id}:sampling:0"
        assert c.log_prob_job_id is None
        gets = [e for e in fake.calls("get_job")]
        assert len(gets) == 4  # pending, placing, initializing, running
        body = fake.calls("create")[0].json()
        assert [s["job_type"] for s in body["sub_job_configs"]] == ["sampling", "training"]
        info = await c.job_info(c.training_job_id)
        assert info["job_type"] == "training" and info["status"].lower().endswith("running")
        assert await c.close() == []
        assert [e.path for e in fake.calls("cancel")] == [f"/{job_id}:cancel"]
        assert fake.jobs[job_id].status == "cancelled"


@pytest.mark.parametrize("state", ["failed", "cancelled", "terminated", "done"])
async def test_a_terminal_job_raises_with_the_reason_and_sub_job_states(fake_mod, clock, state):
    with fake_mod.FakeSnowAPI(job_script=("pending", "placing", state), reason="no capacity in the account") as fake:
        c = await _client(fake, clock)
        with pytest.raises(ArcticRLJobError) as ei:
            await c.start()
        e = ei.value
        assert e.job_status == state and "reason=no capacity in the account" in e.reason
        assert f"training={state}" in e.reason and f"sampling={state}" in e.reason
        assert len(fake.calls("get_job")) == 3  # terminated is terminal too: no wait for the timeout
        if state in ("failed", "terminated"):
            assert fake.calls("cancel")[0].status == 409  # cancelled on the way out; a terminal job answers 409


async def test_a_job_that_never_runs_times_out(fake_mod, clock):
    with fake_mod.FakeSnowAPI(job_script=("pending", "placing")) as fake:
        c = await _client(fake, clock, job_ready_timeout=60)
        with pytest.raises(ArcticRLJobError, match="still placing after job_ready_timeout=60s"):
            await c.start()
        # backoff 0.5 s x 1.25, capped at 6 s
        assert clock.sleeps[:3] == [0.5, 0.625, 0.78125] and max(clock.sleeps) == 6.0


# ------------------------------------------------------------------------------------------------ create


async def test_create_is_retried_when_the_connection_was_refused(fake, clock):
    fake.refuse_connections()
    clock.hooks.append(fake.accept_connections)
    c = await _client(fake, clock)
    await c.start()
    assert len(fake.jobs) == 1 and len(fake.calls("create")) == 1
    await c.close()


@pytest.mark.parametrize(
    ("action", "status", "message"),
    [
        ("drop_after_body", None, "it may have been applied"),  # landed, reply lost: a second create would be a job
        ("drop_before_body", None, "it may have been applied"),  # the client cannot tell it from the case above
        ("status", 503, "injected"),  # the specification's create predicate: connect errors only
    ],
)
async def test_create_is_not_retried_once_it_may_have_landed(fake, clock, action, status, message):
    fake.add_fault("create", action, status=503)
    c = await _client(fake, clock)
    with pytest.raises(ArcticRLError) as ei:
        await c.start()
    assert ei.value.status == status and message in str(ei.value)
    assert len(fake.calls("create")) == 1
    assert len(fake.jobs) == (1 if action == "drop_after_body" else 0)


# ------------------------------------------------------------------------------------------------ retries


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504, 404, 409])
async def test_transient_statuses_are_retried_with_backoff(fake, clock, status):
    c = await _client(fake, clock)
    await c.start()
    fake.add_fault("step", "status", status=status, times=2)
    clock.sleeps.clear()
    out = await c.step()
    assert out["global_steps"] == 1
    steps = fake.calls("step")
    assert [e.status for e in steps] == [status, status, 200]
    assert [op for op, _ in fake.executions].count("step") == 1
    backoff = clock.sleeps[:2]  # exponential with up to 1 s of jitter: 0.5 s then 1 s
    assert 0.5 <= backoff[0] <= 1.5 and 1.0 <= backoff[1] <= 2.0, backoff
    await c.close()


async def test_other_statuses_are_not_retried_and_a_retry_gives_up_after_max_retries(fake, clock):
    c = await _client(fake, clock, backend={"max_retries": 3})
    await c.start()
    fake.add_fault("step", "status", status=400, body={"detail": [{"loc": ["body"], "msg": "bad", "type": "x"}]})
    with pytest.raises(ArcticRLError) as ei:
        await c.step()
    assert (
        ei.value.status == 400
        and '"msg": "bad"' in ei.value.reason
        and "x-snowflake-request-id fake-" in ei.value.reason
    )
    assert len(fake.calls("step")) == 1
    fake.add_fault("step", "status", status=503, times=10, body={"message": "GS restarting", "code": "503"})
    with pytest.raises(ArcticRLError) as ei:
        await c.step()
    assert ei.value.status == 503 and "GS restarting (code 503)" in ei.value.reason
    assert len(fake.calls("step")) == 1 + 4  # the first try and max_retries=3 retries
    await c.close()


async def test_a_step_whose_reply_was_lost_is_not_sent_again(fake, clock):
    c = await _client(fake, clock)
    await c.start()
    fake.add_fault("step", "drop_after_body")
    with pytest.raises(ArcticRLError, match="it may have been applied") as ei:
        await c.step()
    assert ei.value.status is None
    assert len(fake.calls("step")) == 1 and [op for op, _ in fake.executions].count("step") == 1
    await c.close()


async def test_idempotent_calls_are_retried_after_a_dropped_connection(fake, clock):
    c = await _client(fake, clock)
    await c.start()
    fake.add_fault("poll", "drop_after_body")
    fake.add_fault("generate", "drop_before_body")
    fake.add_fault("operation", "drop_after_body")  # the weight-sync: it copies the same weights again
    out = await c.generate([[1, 2, 3]], {"max_tokens": 2})
    assert out[0]["token_ids"] == [10, 11]
    await c.sync_weights()
    assert [op for op, _ in fake.executions].count("generate") == 1
    await c.close()


# ------------------------------------------------------------------------------------------------ forward-backward


def _posted_chunks(fake) -> list[dict]:
    return [wire.read_byte_chunk_metadata(e.body) for e in fake.calls("forward-backward")]


async def test_forward_backward_always_travels_in_a_chunk_envelope(fake, clock):
    c = await _client(fake, clock)
    await c.start()
    batch, meta = _batch()
    out = await c.forward_backward(batch, meta)
    assert set(out) >= {"avg_loss", "metrics", "post_process_outputs"}
    (desc,) = _posted_chunks(fake)
    assert desc["kind"] == "request" and desc["total_chunks"] == 1 and desc["operation"] == "forward-backward"
    assert len(desc["chunk_group_id"]) == 36
    assert fake.executions == [("forward-backward", desc["chunk_group_id"])]
    frame = wire.decode_byte_chunks([fake.calls("forward-backward")[0].body])
    assert wire.read_metadata(frame)["response_options"] == {"format": "dssst1", "delivery": "chunked"}
    await c.close()


async def test_a_lost_forward_backward_reply_does_not_run_the_update_twice(fake, clock):
    c = await _client(fake, clock)
    await c.start()
    fake.add_fault("forward-backward", "drop_after_body")
    out = await c.forward_backward(*_batch())
    posts = fake.calls("forward-backward")
    assert [p.injected for p in posts] == ["dropped after the body", ""]
    assert posts[0].body == posts[1].body  # the same chunk, the same group id
    assert len(fake.executions) == 1 and len(fake.backend.calls) == 1
    rid1, rid2 = json.loads(posts[0].reply)["request_id"], posts[1].reply_json()["request_id"]
    assert rid1 != rid2 and fake.requests[rid2].same_as == rid1  # a new request id, the same execution
    assert out["avg_loss"] > 0
    await c.close()


async def test_a_large_frame_goes_in_several_chunks_and_a_lost_group_is_replayed_once(fake, clock):
    c = await _client(fake, clock, backend={"max_chunk_bytes": 16384})
    await c.start()
    batch, meta = _batch(b=16, P=64, R=64)
    fake.add_fault("forward-backward", "restart_group", chunk=2)
    await c.forward_backward(batch, meta)
    descs = _posted_chunks(fake)
    total = descs[0]["total_chunks"]
    assert total > 3
    assert [d["chunk_idx"] for d in descs] == [0, 1, 2, *range(total)]  # chunk 2 restarted the group from 0
    assert len({d["chunk_group_id"] for d in descs}) == 1
    assert fake.calls("forward-backward")[2].status == 409
    assert len(fake.executions) == 1
    got = fake.backend.calls[0][1]
    assert torch.equal(got["kwargs"]["input_ids"], batch["input_ids"])
    # a second lost group fails: one replay only
    fake.add_fault("forward-backward", "restart_group", chunk=1, times=2)
    with pytest.raises(ChunkGroupError) as ei:
        await c.forward_backward(batch, meta)
    assert ei.value.code == "chunk_group_restart_required" and ei.value.status == 409
    await c.close()


@pytest.mark.parametrize(
    ("body", "wrap", "code"),
    [
        ({"message": "frame hash differs", "code": "chunk_group_conflict"}, False, "chunk_group_conflict"),
        (
            {"message": "request chunk group is missing chunks", "chunk_group_id": "g"},
            False,
            "chunk_group_missing_chunks",
        ),
        ({"message": "missing", "code": "chunk_group_missing_chunks"}, True, "chunk_group_missing_chunks"),
    ],
)
async def test_chunk_group_conflict_and_missing_chunks_raise_at_once(fake, clock, body, wrap, code):
    c = await _client(fake, clock)
    await c.start()
    fake.add_fault("forward-backward", "status", status=409, body=body, wrap=wrap)
    with pytest.raises(ChunkGroupError) as ei:
        await c.forward_backward(*_batch())
    assert ei.value.code == code
    assert len(fake.calls("forward-backward")) == 1  # never retried chunk by chunk, never replayed
    await c.close()


async def test_the_fake_keeps_chunk_groups_at_most_once(fake, clock):
    """The fake's own rules, posted by hand: restart_required, conflict, missing chunks, and a plain frame (no
    identity) that runs twice when it is sent twice."""
    import httpx

    c = await _client(fake, clock)
    await c.start()
    url = f"{c._transport.api.prefix}/{c._transport.job_id}/forward-backward"
    h = {"Content-Type": "application/octet-stream"}
    tree = {"x": torch.arange(5000)}
    chunks = wire.encode_request_chunks(tree, operation="forward-backward", max_bytes=16384)
    gid = wire.read_byte_chunk_metadata(chunks[0])["chunk_group_id"]
    other = wire.encode_request_chunks(
        {"x": torch.arange(5001)}, operation="forward-backward", max_bytes=16384, chunk_group_id=gid
    )
    async with httpx.AsyncClient() as h2:
        r = await h2.post(url, content=chunks[1], headers=h)
        assert r.status_code == 409 and r.json()["code"] == "chunk_group_restart_required"
        assert (await h2.post(url, content=chunks[0], headers=h)).status_code == 200
        r = await h2.post(url, content=other[1], headers=h)
        assert r.status_code == 409 and r.json()["code"] == "chunk_group_conflict"
        r = await h2.post(url, content=chunks[-1], headers=h)
        assert r.status_code == 409 and r.json()["code"] == "chunk_group_missing_chunks"
        for ch in chunks[1:]:
            last = await h2.post(url, content=ch, headers=h)
        again = await h2.post(url, content=chunks[-1], headers=h)
        assert last.json()["request_id"] != again.json()["request_id"]
        plain = wire.encode(tree)
        for _ in range(2):
            assert (await h2.post(url, content=plain, headers=h)).status_code == 200
    assert [g for _, g in fake.executions].count(None) == 2 and len(fake.executions) == 3
    await c.close()


# ------------------------------------------------------------------------------------------------ polling


@pytest.mark.parametrize("form", ["inline", "base64", "chunks"])
async def test_results_inline_base64_and_paged_result_chunks(fake_mod, clock, form):
    with fake_mod.FakeSnowAPI(result_form=form, result_chunk_bytes=12000, max_events=1, polls_in_flight=2) as fake:
        c = await _client(fake, clock)
        await c.start()
        out = await c.generate([[1, 2], [3]], {"max_tokens": 3000, "logprobs": 0})
        assert [r["token_ids"] for r in out] == [list(range(10, 3010)), list(range(11, 3011))]
        assert out[0]["logprobs"] == [-0.5] * 3000
        step = await c.step(learning_rate=0.25)
        assert step["global_steps"] == 1 and step["last_lr"] == 0.25
        cursors = [e.query.get("cursor", [""])[0] for e in fake.calls("poll")]
        if form == "chunks":
            assert "1" in cursors and "2" in cursors  # several pages of one result chunk each
        else:
            assert set(cursors) == {""}
        await c.close()


async def test_a_corrupt_result_chunk_and_a_failed_request_raise(fake_mod, clock):
    with fake_mod.FakeSnowAPI(
        result_form="chunks", result_chunk_bytes=12000, request_error={"step": "CUDA OOM"}
    ) as fake:
        c = await _client(fake, clock)
        await c.start()
        fake.add_fault("poll", "corrupt_chunk")
        with pytest.raises(ArcticRLError, match="payload_sha256 mismatch"):
            await c.generate([[1, 2]], {"max_tokens": 3000})
        with pytest.raises(ArcticRLError, match="ended failed: CUDA OOM"):
            await c.step()
        await c.close()


async def test_a_request_that_never_ends_times_out(fake_mod, clock):
    with fake_mod.FakeSnowAPI(polls_in_flight=10**6) as fake:
        c = await _client(fake, clock, request_timeout=20)
        await c.start()
        with pytest.raises(ArcticRLError, match="still running after request_timeout=20s"):
            await c.step()
        await c.close()


async def test_operations_answer_inline_or_by_request(fake, clock):
    c = await _client(fake, clock)
    await c.start()
    out = await c.reset_prefix_cache()
    assert out == {"reset": True, "sub_job_id": c.sampling_job_id}
    ops = fake.calls("operation")
    assert ops[0].json()["sub_job_id"] == c.sampling_job_id and not fake.calls("poll")
    await c.sync_weights(policy_version=3)
    ws = fake.calls("operation")[1].json()
    assert ws == {
        "operation_type": "weight-sync", "sub_job_id": c.training_job_id, "sub_job_type": "training",
        "payload": {"source_sub_job_id": c.training_job_id, "target_sub_job_ids": [c.sampling_job_id]},
    }  # fmt: skip
    assert fake.calls("poll")
    await c.close()


# ------------------------------------------------------------------------------------------------ auth


async def test_pat_headers_over_tls_and_the_pat_nowhere_else(fake_mod, clock, tls_cert, monkeypatch, caplog):
    pat = "pat-SECRET-1234567890"
    cert, key = tls_cert
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    monkeypatch.setenv("MY_CORTEX_PAT", pat)
    caplog.set_level(logging.DEBUG)
    with fake_mod.FakeSnowAPI(pat=pat, tls=ctx) as fake:
        backend = {"type": "cortex", "host": f"127.0.0.1:{fake.port}", "database": "DB", "schema": "SCH",
                   "pat_env_var": "MY_CORTEX_PAT", "ca_file": str(cert)}  # fmt: skip
        c = AsyncArcticRLClient(_config(fake, backend=None).model_copy(update={"backend": CortexConfig(**backend)}),
                                sleep=clock.sleep)  # fmt: skip
        await c.start()
        assert c.url.startswith(f"https://127.0.0.1:{fake.port}/api/v2/databases/DB/schemas/SCH/cortex-training")
        fake.add_fault("step", "status", status=400, body={"message": "bad step"})
        with pytest.raises(ArcticRLError) as ei:
            await c.step()
        handle = c.reconnect_handle()
        texts = [repr(c), repr(c._transport), json.dumps(handle), str(ei.value), repr(ei.value), caplog.text]
        await c.close()
        assert all(e.headers["authorization"] == f"Bearer {pat}" for e in fake.exchanges)
        assert all(
            e.headers["x-snowflake-authorization-token-type"] == "PROGRAMMATIC_ACCESS_TOKEN" for e in fake.exchanges
        )
        for t in texts:
            assert pat not in t
        assert handle["cortex"]["pat_env_var"] == "MY_CORTEX_PAT" and "pat" not in handle["cortex"]
        # a wrong PAT is refused by the service; the error does not echo it
        monkeypatch.setenv("MY_CORTEX_PAT", "wrong-" + pat)
        bad = AsyncArcticRLClient(c.config, sleep=clock.sleep)
        with pytest.raises(ArcticRLError) as ei:
            await bad.start()
        assert ei.value.status == 401 and pat not in str(ei.value)


async def test_host_without_a_pat_fails_before_any_call(monkeypatch):
    monkeypatch.delenv("CORTEX_PAT", raising=False)
    cfg = ArcticRLClientConfig(
        model_name="m", training={"train_batch_size": 4}, log_prob_gpus=0,
        backend={"type": "cortex", "host": "acct.snowflakecomputing.com", "database": "D", "schema": "S"},
    )  # fmt: skip
    with pytest.raises(ArcticRLError, match="set the CORTEX_PAT environment variable"):
        await AsyncArcticRLClient(cfg).start()


async def test_snowapi_repr_and_prefix_without_auth(fake):
    t = SnowApi(
        CortexConfig(base_url=fake.url + "/", database="D", schema="S", endpoint="cortex-post-training"),
        request_timeout=5, connect_timeout=5, job_ready_timeout=5,
    )  # fmt: skip
    assert t.prefix == f"{fake.url}/api/v2/databases/D/schemas/S/cortex-post-training"
    assert repr(t) == f"SnowApi(prefix={t.prefix!r})" and "authorization" not in {k.lower() for k in t._client.headers}
    await t.aclose()
