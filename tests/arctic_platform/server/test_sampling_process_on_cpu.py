# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The sampling job's engine in its own process (``--sampling-process``), on a real server on 127.0.0.1.

* The job reports the child's pid; the child generates exactly what the in-process engine generates (same seed).
* A weight sync reaches the child: ``/weight-norm`` reports equal training and sampling norms after it, the results
  carry the synced policy version, and the sampled sequence changes.
* Sleep / wake are forwarded (a sleeping engine refuses /generate with 409).
* ``/destroy`` ends the child; a job's ``extensions.sampling_process: false`` keeps the engine in the server.
"""

from __future__ import annotations

import os

import httpx
import pytest

from arctic_platform import wire

from .conftest import process_alive, wait_process_dead
from .jobwait import wait_running

OCTET = {"Content-Type": "application/octet-stream"}
P = 4  # the prompt columns of the conftest's train_batch
PROMPT = [1, 294, 201, 297]
SP = {"temperature": 1.0, "max_tokens": 8, "seed": 5, "ignore_eos": True}


@pytest.fixture(scope="module")
def server(tiny_model_dir, tmp_path_factory, serve_server):
    work = tmp_path_factory.mktemp("sproc")
    with serve_server(work, "--model", str(tiny_model_dir), "--max-seq-len", "64", "--sampling-process") as s:
        s.work = work
        yield s


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.url, timeout=120) as c:
        yield c


def _start(http, body: dict) -> dict:
    r = http.post("/initialize", json=body)
    assert r.status_code == 200, r.text
    return wait_running(http, r.json()["job_id"], timeout=300)


def _generate(http, jid: int) -> dict:
    r = http.post("/generate", params={"job_id": jid}, json={"prompts": [PROMPT], "sampling_params": SP})
    assert r.status_code == 200, r.text
    return r.json()


def _train_step(http, jid: int, batch: dict) -> None:
    meta = {"actor_config": {"loss_agg_mode": "token-mean"}, "temperature": 1.0, "max_prompt_len": P}
    tree = {"batch": batch, "meta": meta}
    r = http.post("/forward-backward", params={"job_id": jid}, content=wire.encode(tree), headers=OCTET)
    assert r.status_code == 200, r.text
    assert http.post("/step", params={"job_id": jid}, json={}).status_code == 200


def test_weight_sync_reaches_the_sampling_process_and_destroy_ends_it(http, server, train_batch):
    # the in-process engine's sequence for the same seed (extensions.sampling_process=false overrides the flag)
    local = _start(http, {"job_type": "sampling", "seed": 3, "extensions": {"sampling_process": False}})
    assert local["engine_pid"] is None
    ref_local = _generate(http, local["job_id"])["results"][0]["token_ids"]
    assert http.post("/destroy", params={"job_id": local["job_id"]}, json={"job_type": "sampling"}).status_code == 200

    samp = _start(http, {"job_type": "sampling", "seed": 3})
    pid = samp["engine_pid"]
    assert isinstance(pid, int) and pid != os.getpid() and process_alive(pid)
    train = _start(
        http,
        {
            "job_type": "training",
            "seed": 3,
            "checkpoint_path": str(server.work / "ckpt"),
            "ds_config": {"optimizer": {"type": "AdamW", "params": {"lr": 0.5}}},
        },
    )
    sid, tid = samp["job_id"], train["job_id"]
    out0 = _generate(http, sid)
    assert out0["policy_version"] == 0 and out0["results"][0]["policy_version"] == 0
    assert out0["results"][0]["token_ids"] == ref_local, "the sampling process generates what the server would"

    norms = {"training_job_id": tid, "sampling_job_id": sid}
    n0 = http.post("/weight-norm", json=norms).json()
    assert n0["training_norm"] == n0["sampling_norm"] and n0["sampling_num_params"] == n0["training_num_params"]
    _train_step(http, tid, train_batch)
    n1 = http.post("/weight-norm", json=norms).json()
    assert n1["training_norm"] != n1["sampling_norm"]  # trained, not yet synced

    r = http.post("/weight-sync", params={"job_id": tid}, json={"policy_version": 7})
    assert r.status_code == 200, r.text
    n2 = http.post("/weight-norm", json=norms).json()
    assert n2["training_norm"] == n2["sampling_norm"] == n1["training_norm"]
    assert n2["policy_version"] == 7
    out1 = _generate(http, sid)
    assert out1["policy_version"] == 7 and out1["results"][0]["policy_version"] == 7
    assert out1["results"][0]["token_ids"] != out0["results"][0]["token_ids"], "the synced weights were not used"

    assert http.post("/sleep-inference", params={"job_id": sid, "level": 1}).status_code == 200
    r = http.post("/generate", params={"job_id": sid}, json={"prompts": [PROMPT], "sampling_params": SP})
    assert r.status_code == 409 and "wake" in r.text
    assert http.post("/wake-inference", params={"job_id": sid}, json={}).status_code == 200
    assert _generate(http, sid)["results"][0]["token_ids"] == out1["results"][0]["token_ids"]

    assert http.post("/destroy", params={"job_id": sid}, json={"job_type": "sampling"}).status_code == 200
    assert wait_process_dead(pid), f"the sampling process {pid} outlived its job"
    assert http.get(f"/job/{sid}").json()["status"] == "TERMINATED"
    assert http.get("/health").json()["status"] == "OK"


def test_bad_sampling_process_extension_is_refused(http):
    r = http.post("/initialize", json={"job_type": "sampling", "extensions": {"sampling_process": "yes"}})
    assert r.status_code == 422 and "extensions.sampling_process" in r.text
