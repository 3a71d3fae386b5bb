# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""arctic_platform.server.engines in process on the tiny model: log-prob alignment and temperature, loss and gradient
parity with verl, micro-batching, optimisation, bit-exact checkpoint resume, generation and weight sync."""

from __future__ import annotations

import pytest
import torch

import verl.trainer.ppo.core_algos as core_algos
import verl.utils.torch_functional as verl_F
from arctic_platform.server import engines as E
from verl.workers.config import ActorConfig

P, R = 6, 5


def _settings(model_dir, **kw):
    return E.EngineSettings(model_path=str(model_dir), device="cpu", dtype="float32", max_seq_len=64, **kw)


def _dense_batch(seed=0, b=4, vocab=300):
    """Protocol §4 layout: prompts left-padded to P, responses right-padded to R."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.zeros(b, P + R, dtype=torch.long)
    mask = torch.zeros(b, P + R, dtype=torch.long)
    for i in range(b):
        pl, rl = 2 + i % (P - 1), 1 + (i * 2) % R
        ids[i, P - pl : P] = torch.randint(3, vocab, (pl,), generator=g)
        ids[i, P : P + rl] = torch.randint(3, vocab, (rl,), generator=g)
        mask[i, P - pl : P + rl] = 1
    resp_mask = mask[:, P:].clone()
    adv = torch.randn(b, 1, generator=g).expand(b, R) * resp_mask
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "prompts": ids[:, :P].clone(),
        "responses": ids[:, P:].clone(),
        "response_mask": resp_mask,
        "advantages": adv.contiguous(),
    }


def _reference_logprobs(model, batch, temperature):
    """Independent reference: HF forward + verl's own logprobs_from_logits / entropy_from_logits."""
    mask = batch["attention_mask"]
    pos = (mask.cumsum(-1) - 1).clamp(min=0) * mask
    logits = model(input_ids=batch["input_ids"], attention_mask=mask, position_ids=pos).logits.float() / temperature
    resp_logits = logits[:, P - 1 : P + R - 1]
    lp = verl_F.logprobs_from_logits(resp_logits, batch["input_ids"][:, P:])
    return lp, verl_F.entropy_from_logits(resp_logits)


@pytest.fixture
def trainer(tiny_model_dir):
    return E.TrainingEngine(_settings(tiny_model_dir), E.TrainingSettings(lr=1e-2, grad_clip=1.0))


def test_forward_is_predict_next_at_the_temperature(tiny_model_dir, trainer):
    from transformers import AutoModelForCausalLM

    ref = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    batch = _dense_batch()
    for t in (1.0, 0.6, 1.7):
        out = trainer.forward(batch, {"temperature": t, "calculate_entropy": True})["batch"]
        assert out["logprobs"].shape == (4, P + R) and out["logprobs"].dtype == torch.float32
        with torch.no_grad():
            lp_ref, ent_ref = _reference_logprobs(ref, batch, t)
        m = batch["response_mask"].bool()
        # slot P+k-1 predicts response token k; float32 log_softmax vs verl's logsumexp path: a few ulps
        torch.testing.assert_close(out["logprobs"][:, P - 1 : P + R - 1][m], lp_ref[m], rtol=0, atol=2e-6)
        torch.testing.assert_close(out["entropy"][:, P - 1 : P + R - 1][m], ent_ref[m], rtol=0, atol=2e-5)
        # padding, the last column and the slot before each row's first real token are 0
        valid = batch["attention_mask"].bool() & torch.roll(batch["attention_mask"].bool(), -1, 1)
        valid[:, -1] = False
        assert torch.all(out["logprobs"][~valid] == 0)
    t0 = trainer.forward(batch, {"temperature": 0})["batch"]["logprobs"]
    t1 = trainer.forward(batch, {"temperature": 1.0})["batch"]["logprobs"]
    assert torch.equal(t0, t1)  # temperature 0 (greedy) reports log-probs at T = 1


def test_old_logprobs_from_forward_give_ratio_one_at_any_temperature(trainer):
    batch = _dense_batch(1)
    for t in (0.7, 1.3):
        lp = trainer.forward(batch, {"temperature": t})["batch"]["logprobs"]
        b = dict(batch, old_log_probs=lp[:, P - 1 : P + R - 1])
        m = trainer.forward_backward(b, {"temperature": t, "actor_config": {}})["metrics"]
        # /forward and /forward-backward compute log-probs identically, so pi/pi_old is exactly 1
        assert m["actor/ppo_kl"] == 0.0 and m["actor/pg_clipfrac"] == 0.0
        trainer.model.zero_grad(set_to_none=True)


@pytest.mark.parametrize(
    "agg", ["token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
)
def test_forward_backward_matches_verl_loss_and_gradients(tiny_model_dir, trainer, agg):
    from transformers import AutoModelForCausalLM

    batch = _dense_batch(2)
    g = torch.Generator().manual_seed(5)
    old = -torch.rand(4, R, generator=g) * 6
    ref_lp = old + torch.randn(4, R, generator=g) * 0.1
    isw = (torch.rand(4, R, generator=g) + 0.5) * batch["response_mask"] + (1 - batch["response_mask"])
    T = 0.8
    actor = dict(
        clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=3.0, loss_agg_mode=agg,
        entropy_coeff=0.01, use_kl_loss=True, kl_loss_coef=0.05, kl_loss_type="low_var_kl",
    )  # fmt: skip
    bnt, gbs = int(batch["response_mask"].sum()) + 3, 6  # the mini-batch's global denominators
    # the wire form: response-aligned fields left-padded with P zeros to [b, P+R] (IS weights padded with 1.0)
    pad = lambda x, v=0.0: torch.cat([torch.full((4, P), v), x.float()], dim=1)  # noqa: E731
    sent = dict(batch, old_log_probs=pad(old), ref_log_prob=pad(ref_lp), rollout_is_weights=pad(isw, 1.0))
    sent["response_mask"] = pad(batch["response_mask"]).long()
    sent["advantages"] = pad(batch["advantages"])
    meta = {"actor_config": actor, "temperature": T, "batch_num_tokens": bnt, "global_batch_size": gbs}
    out = trainer.forward_backward(sent, meta)

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    lp, ent = _reference_logprobs(model, batch, T)
    cfg = ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, **actor)
    cfg.global_batch_info.update(dp_size=1, batch_num_tokens=bnt, global_batch_size=gbs, loss_scale_factor=None)
    mask = batch["response_mask"].bool()
    pg, pgm = core_algos.compute_policy_loss_vanilla(
        old_log_prob=old, log_prob=lp, advantages=batch["advantages"], response_mask=mask,
        loss_agg_mode=agg, config=cfg, rollout_is_weights=isw,
    )  # fmt: skip
    ent_loss = core_algos.agg_loss(ent, mask, agg, **cfg.global_batch_info)
    kl_loss = core_algos.agg_loss(core_algos.kl_penalty(lp, ref_lp, "low_var_kl"), mask, agg, **cfg.global_batch_info)
    total = pg - 0.01 * ent_loss + kl_loss * 0.05
    total.backward()

    m = out["metrics"]
    # the reference log-probs come from verl's logsumexp path, ours from log_softmax: float32 ulps apart
    tol = dict(rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(torch.tensor(m["loss"]), total.detach(), **tol)
    torch.testing.assert_close(torch.tensor(m["actor/pg_loss"]), pg.detach(), **tol)
    torch.testing.assert_close(torch.tensor(m["actor/entropy_loss"]), ent_loss.detach(), **tol)
    torch.testing.assert_close(torch.tensor(m["kl_loss"]), kl_loss.detach(), **tol)
    for k in ("actor/pg_clipfrac", "actor/ppo_kl", "actor/pg_clipfrac_lower"):
        torch.testing.assert_close(torch.tensor(m[k]), torch.tensor(pgm[k]), **tol)
    assert m["kl_coef"] == 0.05 and out["avg_loss"] == m["loss"]
    ours = dict(trainer.model.named_parameters())
    for name, p in model.named_parameters():
        # gradients through 2 layers in float32 from ulp-different log-probs: the rounding noise of an entry scales
        # with the magnitudes summed into it, i.e. with the tensor's scale, not the entry's own (near-zero entries
        # are noise). Measured: max |diff| <= 1.2e-6 x max |grad| for every parameter, any thread count; bound 2e-5.
        scale = float(p.grad.abs().max())
        torch.testing.assert_close(ours[name].grad, p.grad, rtol=0, atol=2e-5 * scale, msg=name)


def test_micro_batches_do_not_change_loss_or_gradient(tiny_model_dir):
    batch = _dense_batch(3)
    old = -torch.rand(4, R, generator=torch.Generator().manual_seed(1)) * 6
    b = dict(batch, old_log_probs=old)
    meta = {"actor_config": {"loss_agg_mode": "seq-mean-token-mean"}, "temperature": 1.0}
    a = E.TrainingEngine(_settings(tiny_model_dir), E.TrainingSettings())
    whole = a.forward_backward(b, meta)["metrics"]
    c = E.TrainingEngine(_settings(tiny_model_dir), E.TrainingSettings(micro_batch_size=3))
    out = c.forward_backward(b, meta)
    split = out["metrics"]
    assert out["micro_batches"] == 2
    for k in ("loss", "actor/pg_loss"):  # globally normalised parts, summed: a few float32 ulps apart
        assert split[k] == pytest.approx(whole[k], rel=1e-6, abs=1e-7), k
    for (n, p), (_, q) in zip(a.model.named_parameters(), c.model.named_parameters(), strict=True):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-5, atol=1e-8, msg=n)
    # verl's meaning of the MEAN metrics: the mean over micro-batches of each micro-batch's own token mean
    denominators = {"batch_num_tokens": int(batch["response_mask"].sum()), "global_batch_size": 4}
    parts = [
        E.TrainingEngine(_settings(tiny_model_dir), E.TrainingSettings()).forward_backward(
            {k: v[sl] for k, v in b.items()}, {**meta, **denominators}
        )["metrics"]
        for sl in (slice(0, 3), slice(3, 4))
    ]
    for k in ("actor/pg_clipfrac", "actor/ppo_kl"):
        assert split[k] == pytest.approx((parts[0][k] + parts[1][k]) / 2, rel=1e-6), k
    assert split["loss"] == pytest.approx(parts[0]["loss"] + parts[1]["loss"], rel=1e-6)


def _train_batch():
    batch = _dense_batch(4)
    b = dict(batch, old_log_probs=torch.full((4, R), -5.7))
    b["advantages"] = torch.ones(4, R) * batch["response_mask"]
    return b


def test_a_few_steps_on_a_fixed_batch_lower_the_loss(trainer):
    b = _train_batch()
    # clip_ratio_high large enough that no token is clipped in 5 steps: with the fixture's head_dim-32 layout the
    # ratio passes 11 at step 5 (every token clipped, gradient 0), so 10.0 no longer left a gradient to check
    meta = {"actor_config": {"clip_ratio_high": 1000.0}, "temperature": 1.0}
    losses = []
    for _ in range(5):
        losses.append(trainer.forward_backward(b, meta)["metrics"]["loss"])
        st = trainer.step()
        assert st["metrics"]["grad_norm"] > 0 and not st["skipped"]
    assert all(x > y for x, y in zip(losses, losses[1:], strict=False)), losses
    assert trainer.global_steps == 5


def test_schedules_follow_verl(tiny_model_dir):
    ts = E.TrainingSettings(lr=1.0, lr_scheduler_type="cosine", warmup_steps=2, total_steps=6, min_lr_ratio=0.1)
    eng = E.TrainingEngine(_settings(tiny_model_dir), ts)
    lrs = [eng.step()["metrics"]["last_lr"] for _ in range(7)]
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = verl_F.get_cosine_schedule_with_warmup(opt, 2, 6, min_lr_ratio=0.1)
    want = []
    for _ in range(7):
        want.append(opt.param_groups[0]["lr"])
        sched.step()
    assert lrs == pytest.approx(want, rel=1e-12, abs=0)
    eng2 = E.TrainingEngine(_settings(tiny_model_dir), E.TrainingSettings(lr=1.0, warmup_steps=3))
    assert [eng2.step()["metrics"]["last_lr"] for _ in range(5)] == pytest.approx([0, 1 / 3, 2 / 3, 1, 1])
    assert eng2.step(learning_rate=0.25)["metrics"]["last_lr"] == 0.25


def test_save_load_resumes_bit_exactly(tiny_model_dir, tmp_path):
    ts = E.TrainingSettings(lr=1e-2, lr_scheduler_type="cosine", warmup_steps=1, total_steps=10, min_lr_ratio=0.1)
    b = _train_batch()
    meta = {"actor_config": {"clip_ratio_high": 10.0, "entropy_coeff": 0.01}, "temperature": 0.9}
    a = E.TrainingEngine(_settings(tiny_model_dir), ts)
    for _ in range(2):
        a.forward_backward(b, meta)
        a.step()
    a.policy_version = 7
    saved = a.save(tmp_path / "ckpt", step=9, save_total_limit=None)
    # global_step is the optimizer step count (2), not the requested step; latest holds the step number
    assert saved["global_step"] == 2 and (tmp_path / "ckpt" / "latest").read_text().strip() == "9"
    root = a.save(tmp_path / "root", step=None, save_total_limit=None)  # no step: into the root itself
    assert root["path"] == str(tmp_path / "root") and (tmp_path / "root" / "trainer_state.json").is_file()
    m3 = a.forward_backward(b, meta)["metrics"]
    s3 = a.step()
    w3 = {n: p.detach().clone() for n, p in a.model.named_parameters()}

    fresh = E.TrainingEngine(_settings(tiny_model_dir), ts)
    info = fresh.load(tmp_path / "ckpt" / "checkpoint-9")
    assert (info["global_step"], info["policy_version"]) == (2, 7)
    assert fresh.forward_backward(b, meta)["metrics"] == m3  # bit-exact: same weights, moments, step, schedule
    assert fresh.step() == s3
    for n, p in fresh.model.named_parameters():
        assert torch.equal(p, w3[n]), n


def test_save_total_limit_prunes_oldest(trainer, tmp_path):
    for step in (1, 2, 3, 4):
        trainer.save(tmp_path, step=step, save_total_limit=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-3", "checkpoint-4", "latest"]


def test_save_total_limit_prunes_this_jobs_saves_in_verls_step_folders(trainer, tmp_path):
    """verl saves step n under ``global_step_<n>/actor`` (max_actor_ckpt_to_keep -> save_total_limit): the server
    prunes the job's older saves there too, their ``latest`` and emptied folder with them, and nothing else."""
    (tmp_path / "global_step_1").mkdir()
    (tmp_path / "global_step_1" / "data.pt").write_bytes(b"verl's own")  # verl's file next to the backend's folder
    for step in (1, 2, 3):
        trainer.save(tmp_path / f"global_step_{step}" / "actor", step=step, save_total_limit=2)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "global_step_1",
        "global_step_1/data.pt",
        "global_step_2",
        "global_step_2/actor",
        "global_step_2/actor/checkpoint-2",
        *(f"global_step_2/actor/checkpoint-2/{f}" for f in ("model.safetensors", "optimizer.safetensors")),
        "global_step_2/actor/checkpoint-2/trainer_state.json",
        "global_step_2/actor/latest",
        "global_step_3",
        "global_step_3/actor",
        "global_step_3/actor/checkpoint-3",
        *(f"global_step_3/actor/checkpoint-3/{f}" for f in ("model.safetensors", "optimizer.safetensors")),
        "global_step_3/actor/checkpoint-3/trainer_state.json",
        "global_step_3/actor/latest",
    ]
    trainer.save(tmp_path / "global_step_4" / "actor", step=4, save_total_limit=None)  # no limit: nothing pruned
    assert (tmp_path / "global_step_2" / "actor" / "checkpoint-2").is_dir()


# ------------------------------------------------------------------------------------------------
# sampling
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def sampler(tiny_model_dir):
    return E.SamplingEngine(_settings(tiny_model_dir, seed=1), max_batch_rows=8)


PROMPTS = [[1, 294, 201, 297, 291], [5, 6, 7], [40, 41, 42, 43, 44, 45, 46], [9]]


def _items(prompts, **kw):
    return [E.GenerateItem(prompt=p, **kw) for p in prompts]


def test_greedy_matches_hf_generate(tiny_model_dir, sampler):
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    res, version = sampler.generate(_items(PROMPTS, temperature=0.0, max_tokens=6, ignore_eos=True))
    assert version == 0
    for p, r in zip(PROMPTS, res, strict=True):
        want = hf.generate(torch.tensor([p]), do_sample=False, max_new_tokens=6, min_new_tokens=6, pad_token_id=0)
        assert r["token_ids"] == want[0, len(p) :].tolist()
        assert (r["finish_reason"], r["prompt_len"], r["generation_len"]) == ("length", len(p), 6)


def test_seeded_sampling_is_deterministic_and_batch_invariant(sampler):
    kw = dict(temperature=0.9, top_p=0.95, top_k=50, max_tokens=8, logprobs=0, ignore_eos=True)
    alone = [sampler.generate(_items([p], seed=11 + i, **kw))[0][0] for i, p in enumerate(PROMPTS)]
    batched, _ = sampler.generate([E.GenerateItem(prompt=p, seed=11 + i, **kw) for i, p in enumerate(PROMPTS)])
    again, _ = sampler.generate([E.GenerateItem(prompt=p, seed=11 + i, **kw) for i, p in enumerate(PROMPTS)])
    assert [r["token_ids"] for r in batched] == [r["token_ids"] for r in again] == [r["token_ids"] for r in alone]
    other, _ = sampler.generate(_items(PROMPTS[:1], seed=999, **kw))
    assert other[0]["token_ids"] != alone[0]["token_ids"]


def test_generate_logprobs_match_forward_at_the_temperature(tiny_model_dir, sampler, trainer):
    for t in (0.7, 1.0, 1.5):
        res, _ = sampler.generate(_items(PROMPTS, temperature=t, max_tokens=5, seed=3, logprobs=0, ignore_eos=True))
        for p, r in zip(PROMPTS, res, strict=True):
            ids = torch.tensor([p + r["token_ids"]])
            lp = trainer.forward({"input_ids": ids, "attention_mask": torch.ones_like(ids)}, {"temperature": t})
            got = lp["batch"]["logprobs"][0, len(p) - 1 : -1]
            # KV-cache decode vs one full forward: same math, float32 summation order differs slightly
            sampled = [e[str(t)]["logprob"] for e, t in zip(r["logprobs"], r["token_ids"], strict=True)]
            torch.testing.assert_close(torch.tensor(sampled), got, rtol=0, atol=1e-5)


def test_stop_tokens_max_tokens_and_top_logprobs(sampler):
    first = sampler.generate(_items(PROMPTS[:1], temperature=0.0, max_tokens=4, ignore_eos=True))[0][0]["token_ids"]
    k = next(i for i, t in enumerate(first) if t not in first[:i] and i > 0) if len(set(first)) > 1 else 0
    r = sampler.generate(_items(PROMPTS[:1], temperature=0.0, max_tokens=4, stop_token_ids=(first[k],)))[0][0]
    assert r["token_ids"] == first[: k + 1] and r["finish_reason"] == "stop"  # the stop token is kept, as in vLLM
    r = sampler.generate(_items(PROMPTS[:1], temperature=0.0, max_tokens=0))[0][0]
    assert r["token_ids"] == [] and r["finish_reason"] == "length"
    r = sampler.generate(_items(PROMPTS[:1], temperature=1.0, max_tokens=3, seed=1, logprobs=3, ignore_eos=True))[0][0]
    assert len(r["logprobs"]) == 3 and r["finish_reason"] == "length"
    for entry, tok in zip(r["logprobs"], r["token_ids"], strict=True):  # top-3, plus the sampled token if not in it
        assert len(entry) in (3, 4) and str(tok) in entry
        assert sorted(e["rank"] for e in entry.values())[:3] == [1, 2, 3]
    assert sampler.generate(_items(PROMPTS[:1], max_tokens=2))[0][0]["logprobs"] is None


def test_eos_stops_generation_unless_ignored(sampler):
    assert sampler.eos_ids == (2,)  # <|im_end|>, read from the model's generation_config
    first = sampler.generate(_items(PROMPTS[:1], temperature=0.0, max_tokens=3, ignore_eos=True))[0][0]["token_ids"]
    sampler.eos_ids = (first[0],)  # pretend the greedy first token is eos: generation must stop right there
    r = sampler.generate(_items(PROMPTS[:1], temperature=0.0, max_tokens=3))[0][0]
    assert (r["token_ids"], r["finish_reason"]) == (first[:1], "stop")
    r = sampler.generate(_items(PROMPTS[:1], temperature=0.0, max_tokens=3, ignore_eos=True))[0][0]
    assert (r["token_ids"], r["finish_reason"]) == (first, "length")


def test_weight_sync_changes_outputs_only_after_sync(trainer, sampler):
    kw = dict(temperature=1.0, max_tokens=4, seed=5, logprobs=0, ignore_eos=True)
    before = sampler.generate(_items(PROMPTS, **kw))[0]
    b = _train_batch()
    for _ in range(3):
        trainer.forward_backward(b, {"actor_config": {"clip_ratio_high": 10.0}})
        trainer.step()
    assert sampler.generate(_items(PROMPTS, **kw))[0] == before  # training alone never touches the sampler
    sampler.load_weights_from(trainer.model)
    after = sampler.generate(_items(PROMPTS, **kw))[0]
    assert [r["logprobs"] for r in after] != [r["logprobs"] for r in before]
    assert E.weight_norm(sampler.model) == E.weight_norm(trainer.model)


def test_sleep_wake_state_machine(sampler):
    sampler.sleep(1)
    with pytest.raises(E.RequestError, match="sleeping") as ei:
        sampler.generate(_items(PROMPTS[:1], max_tokens=1))
    assert ei.value.status == 409
    with pytest.raises(E.RequestError, match="kv_cache before weights"):
        sampler.wake(["kv_cache"])
    assert sampler.wake(["weights"])["state"] == "weights_ready"
    assert sampler.wake(["kv_cache"])["state"] == "ready"
    sampler.sleep(2)
    assert sampler.wake(None)["state"] == "ready"
    assert sampler.generate(_items(PROMPTS[:1], max_tokens=1))[0][0]["generation_len"] == 1


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda b: b.pop("advantages"), "batch.advantages is missing"),
        (lambda b: b.update(attention_mask=b["attention_mask"][:, 1:]), "attention_mask has shape"),
        (lambda b: b.update(old_log_probs=torch.zeros(4, R + 1)), "old_log_probs has shape"),
        (lambda b: b.update(old_log_probs=torch.zeros(4, R, dtype=torch.long)), "floating-point"),
        (lambda b: b.update(input_ids=b["input_ids"].float()), "2-D integer"),
        (lambda b: b.update(input_ids=b["input_ids"] + 1000), "outside"),
        (lambda b: b.pop("prompts"), "prompt length is unknown"),
    ],
    ids=["missing", "mask-shape", "resp-shape", "resp-dtype", "ids-dtype", "ids-range", "no-prompt-len"],
)
def test_schema_errors_name_the_field(trainer, mutate, match):
    b = dict(_train_batch())
    mutate(b)
    with pytest.raises(E.RequestError, match=match) as ei:
        trainer.forward_backward(b, {"actor_config": {}})
    assert ei.value.status == 422
    assert all(p.grad is None for p in trainer.model.parameters())  # nothing half-applied
