# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""ArcticV1ActorRolloutRefWorker end to end: real Ray worker group (CPU pool), real embedded server, real client.

The expected log-probs are computed here with transformers on the same tiny checkpoint, independently of the
server's dense layout, so a misaligned densify or cut-back shows up as a mismatch.
"""

import pytest
import torch

from arctic_platform.integrations.verl.compat import SYNTHETIC_PADDING_PROMPT_LEN
from arctic_platform.integrations.verl.v1.worker import (
    _full_sequence_from_dense,
    _select_rows,
    synthetic_padding_rows,
)

from .batches import nested, v1_batch

P, R = 16, 8  # data.max_prompt_length / max_response_length of arctic_cfg


def _reference_log_probs(model_dir, input_ids, temperature=1.0):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
    out = []
    with torch.no_grad():
        for ids in input_ids:
            logits = model(torch.tensor([ids])).logits[0].float() / temperature
            logp = torch.log_softmax(logits, -1)
            nxt = torch.tensor(ids[1:])
            out.append(logp[torch.arange(len(ids) - 1), nxt])  # slot i = log P(token i+1)
    return out


def _rows(lengths, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(5, 250, (n,), generator=g).tolist() for n in lengths]


def test_padding_rows_and_layout_helpers():
    eos = 3
    pad = SYNTHETIC_PADDING_PROMPT_LEN  # the installed upstream's synthetic padding prompt length (127 in 0.9.1)
    prompts = [[eos] * pad, [5, 6], [eos] * pad]
    responses = [[eos], [7], [eos, eos]]
    td = v1_batch(prompts, responses)
    td["response_mask"] = nested([[0], [1], [0, 0]], torch.int64)
    assert synthetic_padding_rows(td, eos).tolist() == [True, False, False]
    sel = _select_rows(td["prompts"], torch.tensor([1, 2]))
    assert [r.tolist() for r in sel.unbind()] == [[5, 6], [eos] * pad]
    dense = torch.arange(2 * (4 + 3)).reshape(2, 7)  # P=4, R=3
    flat = _full_sequence_from_dense(dense, torch.tensor([2, 0]), torch.tensor([4, 1]), 4)
    assert flat.tolist() == [2, 3, 4, 5, 11]  # row 0 starts at column P-2, row 1 at column P


@pytest.mark.parametrize("temperature", [1.0, 0.7], ids=["T1", "T0.7"])
def test_compute_log_prob_alignment(forwarder, tiny_model, temperature):
    # rows of prompt length 1 and exactly P, response length 1 and exactly R
    prompts = _rows([1, P, 5], seed=1)
    responses = _rows([R, 1, 3], seed=2)
    td = v1_batch(prompts, responses, non_tensor={"temperature": temperature, "calculate_entropy": True})
    out = forwarder.compute_log_prob(td)
    expected = _reference_log_probs(tiny_model, [p + r for p, r in zip(prompts, responses, strict=True)], temperature)
    got = list(out["log_probs"].unbind())
    assert [len(x) for x in got] == [len(p) + len(r) for p, r in zip(prompts, responses, strict=True)]
    for g, e in zip(got, expected, strict=True):
        # float32 on both sides; the server batches rows with padding, so allow summation-order noise only
        torch.testing.assert_close(g[:-1], e, rtol=0, atol=2e-5)
    assert torch.all(torch.stack([x.mean() for x in out["entropy"].unbind()]) > 0)


def test_compute_ref_log_prob_returns_only_log_probs(forwarder, tiny_model):
    prompts, responses = _rows([4, 6], seed=3), _rows([2, 5], seed=4)
    td = v1_batch(prompts, responses, non_tensor={"temperature": 1.0, "calculate_entropy": False})
    out = forwarder.compute_ref_log_prob(td)
    assert set(out.keys()) == {"log_probs"}
    expected = _reference_log_probs(tiny_model, [p + r for p, r in zip(prompts, responses, strict=True)])
    for g, e in zip(out["log_probs"].unbind(), expected, strict=True):
        torch.testing.assert_close(g[:-1], e, rtol=0, atol=2e-5)


def test_over_length_row_is_refused_with_its_index(forwarder):
    prompts = _rows([3, P + 1], seed=5)
    responses = _rows([2, 2], seed=6)
    td = v1_batch(prompts, responses, non_tensor={"temperature": 1.0, "calculate_entropy": True})
    with pytest.raises(Exception) as exc:
        forwarder.compute_log_prob(td)
    assert "row 1" in str(exc.value) and str(P + 1) in str(exc.value)


def test_update_actor_changes_sampler_only_after_update_weights(forwarder, arctic_backend):
    from arctic_platform.client import ArcticRLClient

    client = ArcticRLClient.from_handle(arctic_backend.reconnect_handle()).start()
    try:
        norms0 = client.weight_norm()
        assert norms0["training_norm"] == pytest.approx(norms0["sampling_norm"], rel=0, abs=1e-9)
        prompt = _rows([6], seed=7)[0]
        before = client.generate([prompt], {"temperature": 0.0, "max_tokens": 6, "logprobs": 0})[0]

        prompts, responses = _rows([5, 7], seed=8), _rows([8, 4], seed=9)
        td = v1_batch(
            prompts,
            responses,
            extra={"advantages": nested([[1.0] * 8, [-1.0] * 4], torch.float32)},
            non_tensor={
                "temperature": 1.0,
                "calculate_entropy": False,
                "mini_batch_size": 2,
                "global_batch_size": 2,
                "epochs": 1,
                "seed": 1,
                "dataloader_kwargs": {"shuffle": False},
            },
        )
        out = forwarder.update_actor(td)
        metrics = out["metrics"]
        for key in ("pg_loss", "pg_clipfrac", "ppo_kl", "pg_clipfrac_lower", "grad_norm", "lr", "mfu"):
            assert key in metrics, key
        mid = client.weight_norm()
        assert mid["training_norm"] != mid["sampling_norm"]  # trained, not yet synced
        after_update = client.generate([prompt], {"temperature": 0.0, "max_tokens": 6, "logprobs": 0})[0]
        assert after_update["token_ids"] == before["token_ids"]
        assert after_update["logprobs"] == before["logprobs"]

        import ray

        ray.get(forwarder.update_weights(global_steps=5))
        synced = client.weight_norm()
        assert synced["training_norm"] == pytest.approx(synced["sampling_norm"], rel=0, abs=1e-9)
        after_sync = client.generate([prompt], {"temperature": 0.0, "max_tokens": 6, "logprobs": 0})[0]
        assert after_sync["policy_version"] == 5
        assert after_sync["logprobs"] != before["logprobs"]
    finally:
        client.close()
