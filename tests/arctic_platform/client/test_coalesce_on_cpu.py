# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""``GenerateCoalescer`` against a real server on 127.0.0.1: concurrent one-prompt calls become multi-prompt
/generate requests, each caller gets exactly its own result, params never mix, a refused prompt fails only its own
caller, a caller that gives up does not cancel its neighbours; plus the rollout server's settings."""

from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio
from omegaconf import OmegaConf

from arctic_platform.client import ArcticRLClientConfig, ArcticRLError, AsyncArcticRLClient, OnPremConfig
from arctic_platform.client.coalesce import GenerateCoalescer

SP = {"max_tokens": 4, "seed": 3, "temperature": 1.0, "ignore_eos": True}
PROMPTS = [[5 + i, 6, 7 + 2 * i] for i in range(10)]


@pytest_asyncio.fixture
async def client(onprem_server, tiny_model_dir):
    cfg = ArcticRLClientConfig(
        model_name=str(tiny_model_dir),
        training_gpus=0,
        log_prob_gpus=0,
        max_retries=0,
        request_timeout=60,
        backend=OnPremConfig(url=onprem_server.url),
    )
    async with AsyncArcticRLClient(cfg) as c:
        yield c


def _recording(c: AsyncArcticRLClient, sent: list):
    """The real client's generate, recording what each request carried."""

    async def send(prompts, params):
        sent.append(([list(p) for p in prompts], dict(params)))
        return await c.generate(prompts, params)

    return send


@pytest.mark.asyncio
async def test_concurrent_calls_become_one_request_and_results_match_single_calls(client):
    alone = [(await client.generate([p], SP))[0] for p in PROMPTS]  # one request per prompt, per-request seed
    sent: list = []
    co = GenerateCoalescer(_recording(client, sent), max_prompts=64, window_s=0.5)
    together = await asyncio.gather(*(co.generate_one(p, SP) for p in PROMPTS))
    assert [s[0] for s in sent] == [PROMPTS]  # one /generate with all ten prompts, in call order
    assert (co.requests, co.prompts) == (1, 10)
    assert [r["token_ids"] for r in together] == [r["token_ids"] for r in alone]
    assert [r["prompt_len"] for r in together] == [len(p) for p in PROMPTS]
    assert all(isinstance(r["policy_version"], int) for r in together)


@pytest.mark.asyncio
async def test_max_prompts_splits_and_params_never_mix(client):
    sent: list = []
    co = GenerateCoalescer(_recording(client, sent), max_prompts=4, window_s=0.5)
    greedy = {**SP, "temperature": 0.0}
    calls = [co.generate_one(p, SP if i % 3 else greedy) for i, p in enumerate(PROMPTS)]
    results = await asyncio.gather(*calls)
    by_params = {}
    for prompts, params in sent:
        assert len(prompts) <= 4
        by_params.setdefault(params["temperature"], []).extend(map(tuple, prompts))
    assert sorted(by_params[0.0]) == sorted(tuple(PROMPTS[i]) for i in (0, 3, 6, 9))
    assert sorted(by_params[1.0]) == sorted(tuple(p) for i, p in enumerate(PROMPTS) if i % 3)
    assert sorted(len(p) for p, _ in sent) == [2, 4, 4]  # 6 sampled -> 4 + 2 (window), 4 greedy -> 4; none mixed
    assert [r["prompt_len"] for r in results] == [len(p) for p in PROMPTS]


@pytest.mark.asyncio
async def test_a_refused_prompt_fails_only_its_caller(client):
    sent: list = []
    co = GenerateCoalescer(_recording(client, sent), max_prompts=64, window_s=0.5)
    bad = [1, 10_000]  # outside the tiny vocabulary: the server answers 422
    calls = [co.generate_one(p, SP) for p in PROMPTS[:3]] + [co.generate_one(bad, SP)]
    out = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(r, dict) and len(r["token_ids"]) == 4 for r in out[:3])
    assert isinstance(out[3], ArcticRLError) and out[3].status == 422 and "outside [0, 320)" in out[3].reason
    assert len(sent[0][0]) == 4 and sorted(len(p) for p, _ in sent[1:]) == [1, 1, 1, 1]  # one try, then one by one


@pytest.mark.asyncio
async def test_a_caller_that_gives_up_does_not_cancel_its_neighbours(client):
    co = GenerateCoalescer(_recording(client, []), max_prompts=64, window_s=0.2)
    impatient = asyncio.ensure_future(co.generate_one(PROMPTS[0], SP))
    patient = asyncio.ensure_future(co.generate_one(PROMPTS[1], SP))
    await asyncio.sleep(0)  # both are queued in the same bucket
    impatient.cancel()
    result = await patient
    assert len(result["token_ids"]) == 4 and impatient.cancelled()


@pytest.mark.asyncio
async def test_max_prompts_one_is_one_request_per_call(client):
    sent: list = []
    co = GenerateCoalescer(_recording(client, sent), max_prompts=1, window_s=0.5)
    await asyncio.gather(*(co.generate_one(p, SP) for p in PROMPTS[:3]))
    assert sorted(s[0] for s in sent) == sorted([p] for p in PROMPTS[:3])


def test_bad_coalescer_arguments_are_refused():
    with pytest.raises(ValueError, match="max_prompts must be >= 1"):
        GenerateCoalescer(None, max_prompts=0, window_s=0.1)
    with pytest.raises(ValueError, match="window_s must be >= 0"):
        GenerateCoalescer(None, max_prompts=2, window_s=-1)


@pytest.mark.parametrize(
    "backend, sampling, expected",
    [
        ({"type": "local"}, {}, (64, 0.025)),
        ({"type": "onprem", "url": "http://x"}, {}, (1, 0.025)),
        ({"type": "onprem", "url": "http://x"}, {"max_prompts_per_request": 16, "coalesce_window_ms": 20}, (16, 0.02)),
    ],
)
def test_rollout_server_settings(backend, sampling, expected):
    from arctic_platform.integrations.verl.adapter import arctic_options, coalesce_settings

    cfg = OmegaConf.create({"remote_backend": {"arctic": {"backend": backend, "sampling": sampling}}})
    assert coalesce_settings(arctic_options(cfg)) == expected


@pytest.mark.parametrize(
    "sampling, line",
    [
        ({"max_prompts_per_request": 0}, "sampling.max_prompts_per_request=0: the arctic backend needs greater than"),
        ({"coalesce_window_ms": -1}, "sampling.coalesce_window_ms=-1: the arctic backend needs greater than or equal"),
    ],
)
def test_bad_rollout_server_settings_name_the_keys(sampling, line):
    from arctic_platform.integrations.verl.adapter import ArcticConfigError, arctic_options

    cfg = OmegaConf.create({"remote_backend": {"arctic": {"sampling": sampling}}})
    with pytest.raises(ArcticConfigError, match=line):
        arctic_options(cfg)
