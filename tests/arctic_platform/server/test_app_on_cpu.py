# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The HTTP surface of a real server (subprocess on 127.0.0.1, port 0 reported through a port file).

Round trips for every endpoint, then malformed, oversized, pickle, wrong-type and unknown-job requests: each gets a
4xx with a one-line ``detail`` and the server keeps serving (checked with /health after each).
"""

from __future__ import annotations

import asyncio
import pickle
import time

import httpx
import pytest
import torch

from arctic_platform import wire

OCTET = {"Content-Type": "application/octet-stream"}
P, R = 4, 4  # the prompt / response columns of the conftest's train_batch
MAX_BODY = 2_000_000


@pytest.fixture(scope="module")
def server(tiny_model_dir, tmp_path_factory, serve_server):
    work = tmp_path_factory.mktemp("app")
    args = ("--model", str(tiny_model_dir), "--max-seq-len", "64", "--max-body-bytes", str(MAX_BODY))
    with serve_server(work, *args) as s:
        s.work = work
        s.model_dir = str(tiny_model_dir)
        yield s


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


def _wait_running(http, job_id, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        info = http.get(f"/job/{job_id}").json()
        if info["status"] != "PENDING":
            return info
        assert time.monotonic() < deadline
        time.sleep(0.05)


@pytest.fixture(scope="module")
def jobs(http, server):
    ids = {}
    for jt in ("sampling", "log_prob", "training"):
        body = {"job_type": jt, "checkpoint_path": str(server.work / "ckpt"), "seed": 3}
        if jt == "training":
            body["ds_config"] = {"optimizer": {"type": "AdamW", "params": {"lr": 0.01}}, "gradient_clipping": 1.0}
        r = http.post("/initialize", json=body)
        assert r.status_code == 200, r.text
        assert r.json()["job_type"] == jt
        ids[jt] = r.json()["job_id"]
    for jid in ids.values():
        assert _wait_running(http, jid)["status"] == "RUNNING"
    return ids


def _healthy(http):
    h = http.get("/health").json()
    assert h["status"] == "OK" and "token_ids" in h["capabilities"]


def _post_frame(http, path, job_id, tree):
    return http.post(path, params={"job_id": job_id}, content=wire.encode(tree), headers=OCTET)


META = {"actor_config": {"loss_agg_mode": "token-mean"}, "temperature": 1.0, "max_prompt_len": P}


# ------------------------------------------------------------------------------------------------
# round trips
# ------------------------------------------------------------------------------------------------


def test_health_status_job(http, jobs):
    _healthy(http)
    st = http.get("/status").json()
    assert {st["training_gpus"], st["sampling_gpus"], st["log_prob_gpus"]} == {1}
    assert {int(k): v["job_type"] for k, v in st["jobs"].items() if v["status"] == "RUNNING"} == {
        v: k for k, v in jobs.items()
    }
    info = http.get(f"/job/{jobs['training']}").json()
    assert info["status"] == "RUNNING" and info["reason"] == "" and info["checkpoint_path"].endswith("arctic_rl_job_3")


def test_forward_training_and_log_prob_jobs(http, jobs, train_batch):
    for jt in ("training", "log_prob"):
        r = _post_frame(http, "/forward", jobs[jt], {"batch": train_batch, "meta": {"calculate_entropy": True}})
        assert r.status_code == 200 and r.headers["content-type"] == "application/octet-stream"
        out = wire.decode(r.content)
        assert out["job_id"] == jobs[jt]
        assert out["batch"]["logprobs"].shape == (2, P + R) and out["batch"]["entropy"].shape == (2, P + R)


def test_forward_backward_step_and_weight_sync(http, jobs, train_batch):
    r = _post_frame(http, "/forward-backward", jobs["training"], {"batch": train_batch, "meta": META})
    assert r.status_code == 200, r.text
    out = wire.decode(r.content)
    assert set(out["metrics"]) == {
        "actor/pg_loss",
        "actor/pg_clipfrac",
        "actor/ppo_kl",
        "actor/pg_clipfrac_lower",
        "loss",
    }
    assert out["avg_loss"] == out["metrics"]["loss"]
    st = http.post("/step", params={"job_id": jobs["training"]}, json={}).json()
    assert set(st["metrics"]) == {"grad_norm", "last_lr", "lr"} and st["metrics"]["last_lr"] == 0.01
    assert isinstance(st["metrics"]["grad_norm"], float) and st["global_steps"] >= 1
    norms = http.post("/weight-norm", json={"training_job_id": jobs["training"], "sampling_job_id": jobs["sampling"]})
    assert norms.json()["training_norm"] != norms.json()["sampling_norm"]  # trained, not yet synced
    ws = http.post("/weight-sync", params={"job_id": jobs["training"]}, json={"target_sub_job_ids": [jobs["sampling"]]})
    assert ws.status_code == 200 and ws.json()["status"] == "ok"
    v = ws.json()["policy_version"]
    n = http.post(
        "/weight-norm", json={"training_job_id": jobs["training"], "sampling_job_id": jobs["sampling"]}
    ).json()
    assert n["training_norm"] == n["sampling_norm"] and n["training_num_params"] == 94_784
    assert n["policy_version"] == v
    # an explicit version is set as given (idempotent)
    ws = http.post("/weight-sync", params={"job_id": jobs["training"]}, json={"policy_version": 41})
    assert ws.json()["policy_version"] == 41
    assert http.get(f"/job/{jobs['sampling']}").json()["policy_version"] == 41
    # /operation carries the same sync (the unified client's shape)
    op = {"operation_type": "weight-sync", "payload": {"target_sub_job_ids": [jobs["sampling"]], "policy_version": 42}}
    assert http.post("/operation", params={"job_id": jobs["training"]}, json=op).json()["policy_version"] == 42


def test_generate_octet_and_json(http, jobs, server):
    tree = {"prompts": [[5, 6, 7], [8]], "sampling_params": {"max_tokens": 3, "seed": 1, "logprobs": 0}}
    r = _post_frame(http, "/generate", jobs["sampling"], tree)
    assert r.status_code == 200, r.text
    res = wire.decode(r.content)["results"]
    j = http.post("/generate", params={"job_id": jobs["sampling"]}, json=tree).json()["results"]
    assert [x["token_ids"] for x in res] == [x["token_ids"] for x in j]  # same seed -> same tokens
    for x, p in zip(res, tree["prompts"], strict=True):
        assert x["prompt_len"] == len(p) and len(x["logprobs"]) == x["generation_len"] <= 3
        # ArcticInference shape: one {str(token_id): {logprob, rank}} per generated token, holding the sampled one
        for tok, entry in zip(x["token_ids"], x["logprobs"], strict=True):
            assert entry[str(tok)]["logprob"] <= 0 and entry[str(tok)]["rank"] >= 1
        assert isinstance(x["text"], str) and x["prefix_cache_len"] == 0
        assert x["finish_reason"] in ("stop", "length") and isinstance(x["policy_version"], int)
    as_bool = dict(tree, sampling_params=dict(tree["sampling_params"], logprobs=True))  # verl's calculate_log_probs
    got = http.post("/generate", params={"job_id": jobs["sampling"]}, json=as_bool).json()["results"]
    assert [x["logprobs"] for x in got] == [x["logprobs"] for x in res]
    as_bool["sampling_params"]["logprobs"] = False
    got = http.post("/generate", params={"job_id": jobs["sampling"]}, json=as_bool).json()["results"]
    assert all(x["logprobs"] is None for x in got)
    # text prompts (the reference's GenerateRequest.prompts: list[str]) give the same samples as their ids
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(server.model_dir)
    texts = [tok.decode(p) for p in tree["prompts"]]
    assert [tok.encode(t, add_special_tokens=False) for t in texts] == tree["prompts"]
    as_text = wire.decode(_post_frame(http, "/generate", jobs["sampling"], dict(tree, prompts=texts)).content)
    assert [x["token_ids"] for x in as_text["results"]] == [x["token_ids"] for x in res]


def test_concurrent_generate_requests_are_batched(server, http, jobs):
    async def run():
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as c:
            reqs = [
                c.post(
                    "/generate",
                    params={"job_id": jobs["sampling"]},
                    json={"prompts": [[5 + i, 6, 7]], "sampling_params": {"max_tokens": 16, "seed": i}},
                )
                for i in range(12)
            ]
            return await asyncio.gather(*reqs)

    before = http.get(f"/job/{jobs['sampling']}").json()
    replies = asyncio.run(run())
    assert all(r.status_code == 200 for r in replies)
    after = http.get(f"/job/{jobs['sampling']}").json()
    n_req = after["generate_requests"] - before["generate_requests"]
    n_batch = after["generate_batches"] - before["generate_batches"]
    assert n_req == 12 and n_batch < 12, (n_req, n_batch)  # concurrent callers shared decode batches
    alone = [
        http.post(
            "/generate",
            params={"job_id": jobs["sampling"]},
            json={"prompts": [[5 + i, 6, 7]], "sampling_params": {"max_tokens": 16, "seed": i}},
        ).json()["results"][0]["token_ids"]
        for i in (0, 7)
    ]
    assert alone == [replies[i].json()["results"][0]["token_ids"] for i in (0, 7)]  # batching never changes samples


def test_sleep_wake_reset(http, jobs):
    sid = jobs["sampling"]
    gen = {"prompts": [[5]], "sampling_params": {"max_tokens": 1}}
    assert (
        http.post("/sleep-inference", params={"job_id": sid, "level": 1}).json()["sampling"][0]["state"] == "sleeping"
    )
    r = http.post("/generate", params={"job_id": sid}, json=gen)
    assert r.status_code == 409 and "sleeping" in r.json()["detail"]
    r = http.post("/wake-inference", params={"job_id": sid}, json=["kv_cache"])
    assert r.status_code == 409
    assert (
        http.post("/wake-inference", params={"job_id": sid}, json={"tags": ["weights"]}).json()["sampling"][0]["state"]
        == "weights_ready"
    )
    assert http.post("/generate", params={"job_id": sid}, json=gen).status_code == 409
    assert (
        http.post("/wake-inference", params={"job_id": sid}, json=["kv_cache"]).json()["sampling"][0]["state"]
        == "ready"
    )
    assert http.post("/sleep-inference", params={"job_id": sid}, json={"level": 2}).status_code == 200
    assert http.post("/wake-inference", params={"job_id": sid}, json=None).json()["sampling"][0]["state"] == "ready"
    assert http.post("/reset-prefix-cache", params={"job_id": sid}, json={"drain": True}).status_code == 200
    assert http.post("/generate", params={"job_id": sid}, json=gen).status_code == 200


def test_save_and_load_checkpoint(http, jobs, server):
    tid = jobs["training"]
    steps = http.get(f"/job/{tid}").json()["global_steps"]
    # as the reference: global_step is the engine's optimizer step count, not the requested step; latest = the step
    s = http.post("/save", params={"job_id": tid}, json={"step": 5, "save_total_limit": 2}).json()
    assert s["global_step"] == steps and s["path"].endswith("arctic_rl_job_3/checkpoint-5")
    assert (server.work / "ckpt" / "arctic_rl_job_3" / "latest").read_text().strip() == "5"
    custom = server.work / "custom"
    s2 = http.post("/save", params={"job_id": tid}, json={"path": str(custom)}).json()  # no step: into path itself
    assert s2["path"] == str(custom) and (custom / "trainer_state.json").is_file()
    assert not (custom / "latest").exists()
    hf = http.post("/save", params={"job_id": tid}, json={"path": str(server.work / "hf"), "export_hf": True}).json()
    assert hf["hf_path"] and (server.work / "hf" / "hf" / "config.json").is_file()
    ld = http.post("/load-checkpoint", params={"job_id": tid}, json={"path": str(custom)}).json()
    assert ld["path"] == s2["path"]
    ld = http.post("/load-checkpoint", params={"job_id": tid}, json={}).json()  # follows the job dir's latest
    assert ld["path"] == s["path"] and ld["global_step"] == steps
    r = http.post("/load-checkpoint", params={"job_id": tid}, json={"step": 12345})
    assert r.status_code == 404 and "no checkpoint" in r.json()["detail"]


def test_training_and_log_prob_sleep_wake_cache(http, jobs, train_batch):
    tid, lid = jobs["training"], jobs["log_prob"]
    out = http.post("/sleep-training", params={"job_id": tid}, json={"mode": "all"}).json()
    assert out["job_id"] == tid and out["workers"][0]["offloaded"] is True
    r = _post_frame(http, "/forward", tid, {"batch": train_batch, "meta": {}})
    assert r.status_code == 409 and "offloaded" in r.json()["detail"]  # asleep: refused, not silently served
    assert http.post("/step", params={"job_id": tid}, json={}).status_code == 409
    assert http.post("/wake-training", params={"job_id": tid}, json={}).json()["workers"][0]["reloaded"] is True
    assert _post_frame(http, "/forward", tid, {"batch": train_batch, "meta": {}}).status_code == 200
    _refused(http, http.post("/sleep-training", params={"job_id": tid, "mode": "bogus"}), 422, "mode")
    assert http.post("/empty-training-cache", params={"job_id": tid}).json()["workers"][0]["emptied"] is True
    assert http.post("/sleep-log-prob", params={"job_id": lid}).json()["workers"][0]["offloaded"] is True
    r = http.post("/log-probs", params={"job_id": lid}, json={"prompts": ["ab"], "completions": ["cd"]})
    assert r.status_code == 409
    assert http.post("/wake-log-prob", params={"job_id": lid}).json()["workers"][0]["reloaded"] is True
    _refused(http, http.post("/sleep-log-prob", params={"job_id": tid}), 400, "log_prob job")


def test_log_probs_text_and_ids_agree_with_forward(http, jobs, server):
    from transformers import AutoTokenizer

    lid = jobs["log_prob"]
    tok = AutoTokenizer.from_pretrained(server.model_dir)
    ids = tok.encode("ab cd", add_special_tokens=False)
    r = http.post("/log-probs", params={"job_id": lid}, json={"prompts": ["ab cd"], "top_k": 2})
    assert r.status_code == 200 and r.headers["content-type"] == "application/octet-stream"
    (res,) = wire.decode(r.content)["results"]
    assert res["prompt_token_ids"] == ids and res["prompt_logprobs"][0] is None
    by_ids = wire.decode(http.post("/log-probs", params={"job_id": lid}, json={"prompts": [ids]}).content)
    lp_text = [e[str(t)]["logprob"] for e, t in zip(res["prompt_logprobs"][1:], ids[1:], strict=True)]
    lp_ids = [e[str(t)]["logprob"] for e, t in zip(by_ids["results"][0]["prompt_logprobs"][1:], ids[1:], strict=True)]
    assert lp_text == lp_ids
    assert all(len(e) >= 2 for e in res["prompt_logprobs"][1:])  # top_k=2 entries (plus the actual token)
    n = len(ids)
    batch = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, n, dtype=torch.long)}
    fwd = wire.decode(_post_frame(http, "/forward", lid, {"batch": batch, "meta": {}}).content)["batch"]["logprobs"]
    assert torch.allclose(torch.tensor(lp_ids), fwd[0, : n - 1], atol=1e-5)
    _refused(http, http.post("/log-probs", params={"job_id": lid}, json={"prompts": ["a"], "completions": []}), 422, "")


# ------------------------------------------------------------------------------------------------
# refusals: 4xx with a one-line reason, server still healthy
# ------------------------------------------------------------------------------------------------


def _refused(http, r, status, match):
    assert r.status_code == status, (r.status_code, r.text)
    detail = r.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail and match in detail, detail
    _healthy(http)


def test_pickle_and_zip_payloads_are_refused(http, jobs):
    evil = pickle.dumps({"batch": {}, "meta": {}})
    _refused(
        http, http.post("/forward", params={"job_id": jobs["training"]}, content=evil, headers=OCTET), 400, "pickle"
    )
    zipish = b"PK\x03\x04" + b"\0" * 60
    _refused(
        http, http.post("/forward", params={"job_id": jobs["training"]}, content=zipish, headers=OCTET), 400, "zip"
    )
    # a pickle labelled as JSON is not JSON either
    _refused(
        http,
        http.post(
            "/step", params={"job_id": jobs["training"]}, content=evil, headers={"Content-Type": "application/json"}
        ),
        400,
        "malformed JSON",
    )


def test_malformed_bodies(http, jobs):
    tid = jobs["training"]
    _refused(
        http,
        http.post("/forward", params={"job_id": tid}, content=b"\x10\x00\x00\x00\x00\x00\x00\x00{", headers=OCTET),
        400,
        "malformed frame",
    )
    _refused(http, http.post("/forward", params={"job_id": tid}, json={"batch": {}}), 415, "application/octet-stream")
    _refused(
        http,
        http.post("/initialize", content=b"{nope", headers={"Content-Type": "application/json"}),
        400,
        "malformed JSON",
    )
    _refused(http, http.post("/initialize", json=[1, 2]), 422, "must be an object")
    _refused(http, http.post("/step", params={"job_id": tid}, json={"learning_rate": "fast"}), 422, "learning_rate")
    _refused(http, _post_frame(http, "/forward", tid, [1, 2]), 422, "must hold a dict")
    _refused(http, http.post("/destroy", params={"job_id": tid}, json={}), 422, "job_type")


def test_wrong_type_unknown_job_missing_id(http, jobs, train_batch):
    _refused(
        http,
        _post_frame(http, "/forward-backward", jobs["sampling"], {"batch": train_batch, "meta": META}),
        400,
        "sampling job",
    )
    _refused(http, http.post("/step", params={"job_id": jobs["log_prob"]}, json={}), 400, "log_prob job")
    _refused(http, _post_frame(http, "/forward", 999, {"batch": train_batch, "meta": {}}), 404, "unknown job id 999")
    _refused(http, http.get("/job/999"), 404, "unknown job id")
    _refused(http, http.post("/step", json={}), 422, "job_id")
    _refused(http, http.post("/step", params={"job_id": "abc"}, json={}), 422, "job_id")
    _refused(
        http,
        http.post("/destroy", params={"job_id": jobs["training"]}, json={"job_type": "sampling"}),
        400,
        "not sampling",
    )
    # job_type is a Literal: an unknown one is the server's 400 naming the types, on both bodies that carry it
    for path in ("/initialize", "/destroy"):
        r = http.post(path, params={"job_id": jobs["training"]}, json={"job_type": "critic"})
        _refused(http, r, 400, "unknown job_type (one of ('training', 'sampling', 'log_prob'))")


def test_schema_and_loss_config_errors(http, jobs, train_batch):
    tid = jobs["training"]
    b = train_batch
    bad = dict(b, advantages=torch.zeros(2, R + 1))
    _refused(
        http,
        _post_frame(http, "/forward-backward", tid, {"batch": bad, "meta": META}),
        422,
        "batch.advantages has shape",
    )
    bad = dict(b, attention_mask=b["attention_mask"][:1])
    _refused(http, _post_frame(http, "/forward", tid, {"batch": bad, "meta": {}}), 422, "batch.attention_mask")
    meta = dict(META, actor_config={"policy_loss": {"loss_mode": "grpo++"}})  # not in verl's registry
    _refused(http, _post_frame(http, "/forward-backward", tid, {"batch": b, "meta": meta}), 422, "loss_mode 'grpo++'")
    meta = dict(META, actor_config={"policy_loss": {"loss_mode": "dro"}})  # verl's own check, before any update
    _refused(http, _post_frame(http, "/forward-backward", tid, {"batch": b, "meta": meta}), 422, "dro_beta")
    meta = dict(META, actor_config={"loss_agg_mode": "mean"})
    _refused(http, _post_frame(http, "/forward-backward", tid, {"batch": b, "meta": meta}), 422, "loss_agg_mode 'mean'")
    meta = dict(META, actor_config={"use_kl_loss": True, "kl_loss_type": "full"})
    _refused(
        http,
        _post_frame(http, "/forward-backward", tid, {"batch": dict(b, ref_log_prob=b["old_log_probs"]), "meta": meta}),
        422,
        "full",
    )
    meta = dict(META, actor_config={"use_kl_loss": True})
    _refused(
        http, _post_frame(http, "/forward-backward", tid, {"batch": b, "meta": meta}), 422, "ref_log_prob is missing"
    )
    proc = {"post": ["import os"], "loss_fn": "verl_grpo"}
    _refused(
        http,
        _post_frame(http, "/forward-backward", tid, {"batch": b, "meta": META, "processing": proc}),
        422,
        "allowed steps",
    )
    proc = {"post": [], "loss_fn": "os.system"}
    _refused(
        http,
        _post_frame(http, "/forward-backward", tid, {"batch": b, "meta": META, "processing": proc}),
        422,
        "loss_fn",
    )


def test_generate_refusals(http, jobs):
    sid = jobs["sampling"]
    _refused(
        http,
        http.post("/generate", params={"job_id": sid}, json={"prompts": [list(range(3, 70))]}),
        400,
        "max_seq_len 64",
    )
    _refused(
        http, http.post("/generate", params={"job_id": sid}, json={"prompts": [[1, 999]]}), 422, "outside [0, 320)"
    )
    _refused(http, http.post("/generate", params={"job_id": sid}, json={"prompts": []}), 422, "non-empty")
    _refused(http, http.post("/generate", params={"job_id": sid}, json={"prompts": [[]]}), 422, "empty")
    sp = {"temperature": -1}
    _refused(
        http,
        http.post("/generate", params={"job_id": sid}, json={"prompts": [[5]], "sampling_params": sp}),
        422,
        "temperature",
    )
    body = {"prompts": [[5]], "sampling_params": {"bad_words": ["x"]}, "strict": True}  # not implemented by the engines
    _refused(http, http.post("/generate", params={"job_id": sid}, json=body), 422, "bad_words")
    body["strict"] = False  # non-strict: unsupported extras are ignored
    assert http.post("/generate", params={"job_id": sid}, json=body).status_code == 200
    body = {"prompts": [[5]], "sampling_params": {"stop": ["\n"], "repetition_penalty": 1.0}, "strict": True}
    _refused(http, http.post("/generate", params={"job_id": sid}, json=body), 422, "['stop']")
    body["sampling_params"] = {"stop": [], "detokenize": False, "repetition_penalty": 1.0}  # neutral values pass
    assert http.post("/generate", params={"job_id": sid}, json=body).status_code == 200


def test_oversized_bodies_get_413(http, jobs):
    big = b"\0" * (MAX_BODY + 1)
    _refused(
        http,
        http.post("/forward", params={"job_id": jobs["training"]}, content=big, headers=OCTET),
        413,
        "exceeds the server limit",
    )

    def chunks():  # no Content-Length: counted while reading
        for _ in range(5):
            yield b"\0" * (MAX_BODY // 2)

    _refused(
        http,
        http.post("/forward", params={"job_id": jobs["training"]}, content=chunks(), headers=OCTET),
        413,
        "exceeds the server limit",
    )


def test_legacy_paths_answer_410(http):
    _refused(http, http.post("/fwd-bwd"), 410, "/forward-backward")
    _refused(http, http.post("/sync-weights"), 410, "/weight-sync")


def test_initialize_conflicts_failures_and_retry(http, jobs, server, tiny_model_dir):
    r = http.post("/initialize", json={"job_type": "sampling"})
    _refused(http, r, 409, "already RUNNING")
    _refused(
        http, http.post("/initialize", json={"job_type": "training", "model_name": "/no/such"}), 400, "config.json"
    )
    bad_ds = {"job_type": "training", "checkpoint_path": "/tmp/x", "ds_config": {"optimizer": {"type": "Lion"}}}
    _refused(http, http.post("/initialize", json=bad_ds), 422, "ds_config.optimizer.type")
    bad_ds["ds_config"] = {"fp16_master_weights_and_grads": True}
    _refused(http, http.post("/initialize", json=bad_ds), 422, "ds_config.fp16_master_weights_and_grads")
    _refused(http, http.post("/initialize", json={"job_type": "sampling", "device": "cpu"}), 422, "extensions.device")
    typo = {"job_type": "sampling", "extensions": {"sampling_engin": "torch"}}  # never silently lost
    _refused(http, http.post("/initialize", json=typo), 422, "extensions.sampling_engin is not read")
    # destroy the sampling job; a build that fails in the background leaves a failed record with a reason
    sid = jobs["sampling"]
    assert http.post("/destroy", params={"job_id": sid}, json={"job_type": "sampling"}).json()["status"] == "TERMINATED"
    assert http.get(f"/job/{sid}").json()["reason"] == "destroyed by a client"
    _refused(http, http.post("/generate", params={"job_id": sid}, json={"prompts": [[5]]}), 409, "TERMINATED")
    import shutil

    broken = server.work / "broken-model"
    shutil.copytree(tiny_model_dir, broken)
    (broken / "model.safetensors").write_bytes(b"garbage")
    r = http.post("/initialize", json={"job_type": "sampling", "model_name": str(broken)})
    info = _wait_running(http, r.json()["job_id"])
    assert info["status"] == "FAILED" and info["reason"].startswith("initialization failed")
    r = http.post("/initialize", json={"job_type": "sampling"})  # corrected retry, same server
    new = _wait_running(http, r.json()["job_id"])
    assert new["status"] == "RUNNING"
    jobs["sampling"] = new["job_id"]
    assert http.post("/destroy", params={"job_id": 999}, json={"job_type": "sampling"}).status_code == 404


def test_the_job_lock_lets_generate_calls_share_it_and_an_exclusive_call_wait_for_them():
    """JobLock: shared holders (concurrent generate calls) coexist; an exclusive caller (a weight sync) waits for
    all of them, and while it waits no new shared holder gets in (it is not starved); timeouts answer False."""
    import threading

    from arctic_platform.server.joblock import JobLock

    lock = JobLock()
    assert lock.acquire_shared(timeout=1) and lock.acquire_shared(timeout=1)  # two generate calls at once
    assert not lock.acquire(timeout=0.05)  # a weight sync waits for them
    got = threading.Event()

    def exclusive():
        assert lock.acquire(timeout=30)
        got.set()

    t = threading.Thread(target=exclusive)
    t.start()
    deadline = time.monotonic() + 30
    while lock._writers_waiting == 0:  # the exclusive caller is waiting now
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not lock.acquire_shared(timeout=0.05)  # a new generate call is held back behind the waiting sync
    lock.release_shared()
    assert not got.is_set()  # one generate call is still in flight
    lock.release_shared()
    t.join(30)
    assert got.is_set() and lock.locked()
    assert not lock.acquire_shared(timeout=0.05)
    lock.release()
    assert lock.acquire_shared(timeout=1) and lock.locked()
    lock.release_shared()
    assert not lock.locked()
    with pytest.raises(RuntimeError, match="not held"):
        lock.release()


def test_concurrent_generate_calls_count_their_wall_time_once():
    """A job's compute_s (the plugin's actor/backend_compute_s) is the time any of its calls ran: a generate call
    that runs entirely inside another adds nothing (a sum of the two would exceed the wall time)."""
    import threading

    from arctic_platform.server.engine_calls import call_shared
    from arctic_platform.server.jobs import Job, JobStatus

    job = Job(1, "sampling", "tiny", config=None, status=JobStatus.RUNNING, engine=object())

    def outer():
        inner = threading.Thread(target=call_shared, args=(job, lambda: time.sleep(0.2), 30))
        inner.start()
        inner.join(30)

    t0 = time.perf_counter()
    call_shared(job, outer, 30)
    wall = time.perf_counter() - t0
    assert 0.2 <= job.compute_s <= wall
