# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""No leaked jobs: a start that fails half-way destroys what it created, and ``/destroy`` survives a flaky server.

A real server sits behind a recording proxy that injects the faults seen against Arctic-Platform's real engine: a 500
on the third ``/initialize`` (its training job), then a ``/destroy`` whose connection drops before any reply (the read
error that used to leave the log_prob job running, so the next start got a 409). Also: Arctic-Platform's per-rank
``/step`` replies (``merge_dict_shards`` with more than one training worker) are read as one value, and ranks that
disagree fail loudly.
"""

from __future__ import annotations

import httpx
import pytest

from arctic_platform.client import ArcticRLClientConfig, ArcticRLError, AsyncArcticRLClient
from arctic_platform.client.client import rank_agreed_metrics


def _config(model_dir, url, tmp):
    return ArcticRLClientConfig(
        model_name=str(model_dir),
        max_seq_len=64,
        request_timeout=60,
        job_ready_timeout=120,
        training={"optimizer": {"lr": 1e-2}, "checkpoint_path": str(tmp / "ckpt")},
        backend={"type": "onprem", "url": url},
    )


def _live(url) -> dict:
    jobs = httpx.get(f"{url}/status", timeout=10).json()["jobs"]
    return {j["job_type"]: j["job_id"] for j in jobs.values() if j["status"] in ("PENDING", "RUNNING")}


@pytest.mark.asyncio
async def test_a_failed_start_destroys_what_it_created_through_a_flaky_destroy(
    onprem_server, proxy_cls, tiny_model_dir, tmp_path
):
    Answer = proxy_cls.module.Answer
    assert _live(onprem_server.url) == {}

    def faults(call, calls):
        inits = [c for c in calls if c.path == "/initialize"]
        if call.path == "/initialize" and len(inits) == 3:
            return Answer(500, {"detail": "injected: the training job's DeepSpeed init failed"})
        if call.path == "/destroy" and len([c for c in calls if c.path == "/destroy"]) == 1:
            return Answer(None)  # the connection drops before any reply
        return None

    with proxy_cls(onprem_server.url, rule=faults) as proxy:
        client = AsyncArcticRLClient(_config(tiny_model_dir, proxy.url, tmp_path))
        with pytest.raises(ArcticRLError) as ei:
            await client.start()
        assert ei.value.status == 500 and "DeepSpeed init failed" in str(ei.value)
        destroys = proxy.calls_to("/destroy")
        # two jobs were created; the first destroy was dropped and retried, so both are gone
        assert [c.injected for c in destroys] == ["dropped", "", ""], [(c.json(), c.injected) for c in destroys]
        assert sorted(c.json()["job_type"] for c in destroys[1:]) == ["log_prob", "sampling"]
        assert destroys[0].query == destroys[1].query  # the same job, retried
    assert _live(onprem_server.url) == {}
    # nothing is left behind: the next start succeeds (no 409 for a leftover job)
    async with AsyncArcticRLClient(_config(tiny_model_dir, onprem_server.url, tmp_path)) as again:
        assert set(_live(onprem_server.url)) == {"training", "sampling", "log_prob"}
        assert again.training_job_id is not None
    assert _live(onprem_server.url) == {}


@pytest.mark.asyncio
async def test_per_rank_step_replies(onprem_server, proxy_cls, tiny_model_dir, tmp_path):
    import torch

    ranks = {"n": 2, "skew": 0.0}

    def per_rank(call, body):
        if call.path == "/step":  # Arctic-Platform's merge_dict_shards of two training workers
            m = body["metrics"]
            body["metrics"] = {
                "grad_norm": [m["grad_norm"]] + [m["grad_norm"] + ranks["skew"]] * (ranks["n"] - 1),
                "last_lr": [m["last_lr"]] * ranks["n"],
            }
        return body

    with proxy_cls(onprem_server.url, rewrite=per_rank) as proxy:
        async with AsyncArcticRLClient(_config(tiny_model_dir, proxy.url, tmp_path)) as client:
            batch = {
                "input_ids": torch.tensor([[5, 6, 7, 8]]),
                "attention_mask": torch.ones(1, 4, dtype=torch.long),
                "prompts": torch.tensor([[5, 6]]),
                "responses": torch.tensor([[7, 8]]),
                "response_mask": torch.ones(1, 2, dtype=torch.long),
                "old_log_probs": torch.full((1, 2), -5.0),
                "advantages": torch.ones(1, 2),
            }
            await client.forward_backward(batch, {"temperature": 1.0})
            step = await client.step()
            assert isinstance(step["metrics"]["grad_norm"], float) and step["metrics"]["grad_norm"] > 0
            assert step["metrics"]["last_lr"] == pytest.approx(1e-2)
            ranks["skew"] = 1.0  # diverged ranks
            await client.forward_backward(batch, {"temperature": 1.0})
            with pytest.raises(ArcticRLError, match="training ranks disagree on grad_norm"):
                await client.step()


def test_rank_agreed_metrics():
    assert rank_agreed_metrics({"grad_norm": [2.0, 2.0], "last_lr": [1e-3], "x": [1, 2]}, "/step") == {
        "grad_norm": 2.0,
        "last_lr": 1e-3,
        "x": [1, 2],  # not a rank-agreed metric: left as sent
    }
    assert rank_agreed_metrics({"grad_norm": 3.0}, "/step") == {"grad_norm": 3.0}
    with pytest.raises(ArcticRLError, match="disagree"):
        rank_agreed_metrics({"last_lr": [1e-3, 2e-3]}, "/step")
    with pytest.raises(ArcticRLError, match="a number per training rank"):
        rank_agreed_metrics({"grad_norm": [None]}, "/step")
