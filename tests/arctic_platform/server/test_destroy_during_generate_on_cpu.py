# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""``/destroy`` of a sampling job while a long ``/generate`` is in flight (real server on 127.0.0.1).

What the async remote-backend mode's shutdown relies on when its bounded drain runs out (docs/async.md, Shutdown),
for the in-process engine and the engine in its own process (``--sampling-process``):

* ``/destroy`` returns (bounded wait: it does not hang on the running batch) and the job record is ``TERMINATED``;
* the generate request in flight answers **200** with its partial sequences, every unfinished one with
  ``finish_reason: "abort"`` (verl's ``stop_reason: "aborted"``); the server logs how many it aborted. Before the
  fix it answered a bare ``500 Internal Server Error`` (the batcher task was cancelled under it) and the client
  retried it;
* no engine call is left running (the busy meter stops counting) and the sampling child process is gone;
* a later ``/generate`` of the destroyed job is refused with 409 naming its state.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from .conftest import process_alive, wait_process_dead

PROMPT = [1, 294, 201, 297]
ROWS, MAX_TOKENS = 256, 2000  # four engine batches of 64 rows x 2000 tokens: a minute or more of decoding on CPU
BOUND_S = 120.0  # "does not hang", not a speed claim


async def _start_sampling(c: httpx.AsyncClient) -> dict:
    r = await c.post("/initialize", json={"job_type": "sampling", "seed": 3})
    assert r.status_code == 200, r.text
    jid = r.json()["job_id"]
    deadline = time.monotonic() + 300
    while True:
        info = (await c.get(f"/job/{jid}")).json()
        if info["status"] != "PENDING":
            assert info["status"] == "RUNNING", info
            return info
        assert time.monotonic() < deadline, info
        await asyncio.sleep(0.1)


async def _sampling_busy_s(c: httpx.AsyncClient) -> float:
    return (await c.get("/status")).json()["server"]["busy"]["sampling_s"]


@pytest.mark.parametrize("sampling_process", [False, True], ids=["in_process", "sampling_process"])
@pytest.mark.asyncio
async def test_destroy_aborts_the_generate_in_flight_and_ends_the_engine(
    sampling_process, tiny_model_dir, tmp_path, serve_server
):
    args = ["--model", str(tiny_model_dir), "--max-seq-len", "2048"]
    if sampling_process:
        args.append("--sampling-process")
    with serve_server(tmp_path, *args) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=300) as c:
            info = await _start_sampling(c)
            jid, pid = info["job_id"], info["engine_pid"]
            if sampling_process:
                assert isinstance(pid, int) and process_alive(pid), info
            else:
                assert pid is None, info
            sp = {"temperature": 1.0, "max_tokens": MAX_TOKENS, "ignore_eos": True, "seed": 5}
            body = {"prompts": [PROMPT] * ROWS, "sampling_params": sp}
            gen = asyncio.create_task(c.post("/generate", params={"job_id": jid}, json=body))

            # in flight = inside the engine: the busy meter counts a sampling call only while it holds the job lock
            deadline = time.monotonic() + BOUND_S
            while await _sampling_busy_s(c) == 0:
                assert not gen.done(), f"generate ended before it was seen in the engine: {gen.result().text[:500]}"
                assert time.monotonic() < deadline, "the generate request never reached the engine"
                await asyncio.sleep(0.02)

            destroy = c.post("/destroy", params={"job_id": jid}, json={"job_type": "sampling"})
            d = await asyncio.wait_for(destroy, BOUND_S)
            assert d.status_code == 200, d.text
            assert d.json() == {"job_id": jid, "status": "TERMINATED"}
            r = await asyncio.wait_for(gen, BOUND_S)

            assert r.status_code == 200, f"the generate in flight got {r.status_code}: {r.text[:500]}"
            out = r.json()
            results = out["results"]
            assert len(results) == ROWS and out["policy_version"] == 0
            for x in results:
                assert x["generation_len"] == len(x["token_ids"])
                # a row either finished before the abort (all its tokens) or was cut off by it
                if x["finish_reason"] != "abort":
                    assert x["finish_reason"] == "length" and x["generation_len"] == MAX_TOKENS, x
                else:
                    assert x["generation_len"] < MAX_TOKENS, x
            assert results[-1]["finish_reason"] == "abort", "destroy did not cut the generation short"
            aborted = sum(x["finish_reason"] == "abort" for x in results)

            job = (await c.get(f"/job/{jid}")).json()
            assert job["status"] == "TERMINATED" and job["reason"] == "destroyed by a client", job
            # no sampling call is still running: the meter's in-progress time would grow between two snapshots
            b1 = await _sampling_busy_s(c)
            await asyncio.sleep(0.2)
            assert await _sampling_busy_s(c) == b1, "an engine call is still running after /destroy returned"
            if sampling_process:
                assert wait_process_dead(pid), f"the sampling process {pid} outlived its job"

            again = await c.post("/generate", params={"job_id": jid}, json={"prompts": [PROMPT], "sampling_params": sp})
            assert again.status_code == 409 and "TERMINATED" in again.text, again.text
            assert (await c.get("/health")).json()["status"] == "OK"
        log = server.log_text()
    assert f"generate: sampling job {jid} destroyed while generating; {aborted} of {ROWS} sequence(s) aborted" in log
    assert "CancelledError" not in log and "Exception in ASGI application" not in log, log[-3000:]
