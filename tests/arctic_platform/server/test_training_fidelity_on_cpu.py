# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The training engine honours verl's actor settings (issue 20's table, one test per row).

In process on the tiny model: micro-batching (fixed rows and token budget, update and log-prob paths), gradient
checkpointing, float32 master weights under a lower-precision autocast, LoRA (adapter-only training, merged weight
sync, adapter checkpoints), verl's LR schedule (one tick per training step, warmup as a ratio of a horizon that arrives
late, every option), ``loss_scale_factor: null``, the HF export, the profiler, and the job-level refusals.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import verl.utils.torch_functional as verl_F
from arctic_platform.protocol import JobConfig
from arctic_platform.schedule import TrainingSettings
from arctic_platform.server import engines as E
from arctic_platform.server.jobs import training_settings
from arctic_platform.server.routes.bodies import parse_model

P, R = 6, 5


def _settings(model_dir, dtype="float32", **kw):
    return E.EngineSettings(model_path=str(model_dir), device="cpu", dtype=dtype, max_seq_len=64, **kw)


def _body(**kw) -> JobConfig:
    """A ``JobConfig`` as ``/initialize`` reads it: a section it refuses is a RequestError (422) naming the key."""
    return parse_model(JobConfig, kw)


def _batch(seed=0, b=6):
    """Protocol §4 layout, rows of different prompt (2..6) and response (1..5) lengths."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.zeros(b, P + R, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i in range(b):
        pl, rl = 2 + i % (P - 1), 1 + (i * 3) % R
        ids[i, P - pl : P] = torch.randint(3, 300, (pl,), generator=g)
        ids[i, P : P + rl] = torch.randint(3, 300, (rl,), generator=g)
        mask[i, P - pl : P + rl] = 1
    resp = mask[:, P:].clone()
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "prompts": ids[:, :P].clone(),
        "responses": ids[:, P:].clone(),
        "response_mask": resp,
        "advantages": (torch.randn(b, 1, generator=g).expand(b, R) * resp).contiguous(),
        "old_log_probs": -5.7 + 0.3 * torch.randn(b, R, generator=g) * resp,
    }


def _grads(engine):
    return {n: p.grad.clone() for n, p in engine.model.named_parameters() if p.grad is not None}


# ---- row: ppo_micro_batch_size_per_gpu / use_dynamic_bsz / ppo_max_token_len_per_gpu ----


@pytest.mark.parametrize(
    "micro",
    [
        {"ppo_micro_batch_size_per_gpu": 2},
        {"use_dynamic_bsz": True, "ppo_max_token_len_per_gpu": 12},
    ],
    ids=["fixed-2-rows", "token-budget-12"],
)
def test_update_micro_batches_keep_the_loss_and_gradient(tiny_model_dir, micro):
    b = _batch(1)
    base = {"loss_agg_mode": "seq-mean-token-mean", "ppo_micro_batch_size_per_gpu": 6}
    one = E.TrainingEngine(_settings(tiny_model_dir), TrainingSettings())
    whole = one.forward_backward(b, {"actor_config": base})
    many = E.TrainingEngine(_settings(tiny_model_dir), TrainingSettings())
    split = many.forward_backward(b, {"actor_config": {**base, **micro}})
    assert whole["micro_batches"] == 1 and split["micro_batches"] >= 3
    for k in ("loss", "actor/pg_loss"):  # the global denominators make the parts add up: float32 ulps apart
        assert split["metrics"][k] == pytest.approx(whole["metrics"][k], rel=1e-6, abs=1e-7), k
    g1, g2 = _grads(one), _grads(many)
    for n in g1:
        torch.testing.assert_close(g2[n], g1[n], rtol=1e-5, atol=1e-7, msg=n)


def test_a_row_over_the_token_budget_is_refused(tiny_model_dir):
    eng = E.TrainingEngine(_settings(tiny_model_dir), TrainingSettings())
    ac = {"use_dynamic_bsz": True, "ppo_max_token_len_per_gpu": 4}
    with pytest.raises(E.RequestError, match="more than the dynamic-batching budget"):
        eng.forward_backward(_batch(), {"actor_config": ac})


@pytest.mark.parametrize(
    "meta", [{"micro_batch_size": 2}, {"use_dynamic_bsz": True, "max_token_len_per_gpu": 14}], ids=["fixed", "budget"]
)
def test_log_prob_micro_batches_give_the_same_log_probs_in_row_order(tiny_model_dir, meta):
    eng = E.ForwardEngine(_settings(tiny_model_dir))
    b = {k: v for k, v in _batch(2).items() if k in ("input_ids", "attention_mask", "prompts")}
    whole = eng.forward(b, {"calculate_entropy": True})["batch"]
    split = eng.forward(b, {"calculate_entropy": True, **meta})["batch"]
    # each row is computed on its own either way; only the batch shape of the matmuls differs
    torch.testing.assert_close(split["logprobs"], whole["logprobs"], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(split["entropy"], whole["entropy"], rtol=1e-5, atol=1e-6)


# ---- row: model.enable_gradient_checkpointing ----


def test_gradient_checkpointing_is_on_and_changes_no_gradient(tiny_model_dir):
    cfg = JobConfig(model_name=str(tiny_model_dir), ds_worker_config={"enable_gradient_checkpointing": True})
    ts = training_settings(cfg)
    assert ts.gradient_checkpointing
    on = E.TrainingEngine(_settings(tiny_model_dir), ts)
    off = E.TrainingEngine(_settings(tiny_model_dir), TrainingSettings())
    assert on.model.is_gradient_checkpointing and not off.model.is_gradient_checkpointing
    b, meta = _batch(3), {"actor_config": {"entropy_coeff": 0.01}}
    a, c = on.forward_backward(b, meta)["metrics"], off.forward_backward(b, meta)["metrics"]
    assert a["loss"] == c["loss"]  # the same forward, recomputed: bit for bit
    g_on, g_off = _grads(on), _grads(off)
    for n in g_off:
        torch.testing.assert_close(g_on[n], g_off[n], rtol=1e-6, atol=1e-9, msg=n)


# ---- row: precision (fp32 master weights, lower-precision autocast) ----


def test_master_weights_stay_float32_under_a_bfloat16_job(tiny_model_dir):
    eng = E.TrainingEngine(_settings(tiny_model_dir, dtype="bfloat16"), TrainingSettings(lr=1e-6, grad_clip=None))
    assert {p.dtype for p in eng.model.parameters()} == {torch.float32}
    assert eng.compute_dtype == torch.bfloat16 and eng.param_dtype == torch.float32
    before = {n: p.detach().clone() for n, p in eng.model.named_parameters()}
    eng.forward_backward(_batch(4), {"actor_config": {}})
    eng.step()
    changed = lost_in_bf16 = 0
    for n, p in eng.model.named_parameters():
        delta = p.detach() - before[n]
        changed += int((delta != 0).sum())
        # what bf16 parameters would have kept of this step: most lr=1e-6 updates round away
        lost_in_bf16 += int(((before[n] + delta).bfloat16() == before[n].bfloat16()).logical_and(delta != 0).sum())
    assert changed > 0 and lost_in_bf16 > changed // 2  # the fp32 master keeps updates bf16 storage would lose
    logits_dtype = []
    handle = eng.model.lm_head.register_forward_hook(lambda m, i, o: logits_dtype.append(o.dtype))
    eng.forward({k: v for k, v in _batch().items() if k in ("input_ids", "attention_mask")}, {})
    handle.remove()
    assert logits_dtype == [torch.bfloat16]  # computed under autocast


def test_float32_job_runs_without_autocast_and_float16_training_is_refused(tiny_model_dir):
    eng = E.TrainingEngine(_settings(tiny_model_dir), TrainingSettings())
    assert eng.param_dtype == eng.compute_dtype == torch.float32
    with pytest.raises(E.RequestError, match="float16 training needs loss scaling"):
        E.TrainingEngine(_settings(tiny_model_dir, dtype="float16"), TrainingSettings())


# ---- row: LoRA ----


@pytest.fixture
def lora_engine(tiny_model_dir):
    cfg = JobConfig(model_name=str(tiny_model_dir), extensions={"lora": {"rank": 4, "alpha": 8}})
    return E.TrainingEngine(_settings(tiny_model_dir), training_settings(cfg))


def test_lora_trains_only_the_adapter_and_syncs_merged_weights(tiny_model_dir, lora_engine):
    from peft.tuners.lora import LoraLayer

    eng = lora_engine
    assert eng.param_names and all("lora_" in n for n in eng.param_names)
    base_before = {n: p.detach().clone() for n, p in eng.model.named_parameters() if "lora_" not in n}
    for _ in range(2):
        eng.forward_backward(_batch(5), {"actor_config": {"clip_ratio_high": 10.0}})
        eng.step()
    assert all(torch.equal(p, base_before[n]) for n, p in eng.model.named_parameters() if "lora_" not in n)
    merged = dict(eng.weights_for_sync().named_parameters())
    layer = eng.model.base_model.model.model.layers[0].self_attn.q_proj
    assert isinstance(layer, LoraLayer)
    w = layer.base_layer.weight + layer.get_delta_weight("default")
    assert float(layer.get_delta_weight("default").detach().abs().max()) > 0  # the adapter moved
    torch.testing.assert_close(merged["model.layers.0.self_attn.q_proj.weight"], w.detach(), rtol=0, atol=0)
    # the sampler (unchanged code path) serves exactly the merged model
    sampler = E.SamplingEngine(_settings(tiny_model_dir), max_batch_rows=4)
    sampler.load_weights_from(eng.weights_for_sync())
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        got = sampler.model(input_ids=ids).logits
        want = eng.model(input_ids=ids).logits
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert E.weight_norm(eng.weights_for_sync())[1] == E.weight_norm(sampler.model)[1]


def test_lora_checkpoint_holds_the_adapter_and_resumes(tiny_model_dir, lora_engine, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    eng = lora_engine
    eng.forward_backward(_batch(6), {"actor_config": {}})
    eng.step()
    out = eng.save(tmp_path / "ckpt", step=1, save_total_limit=None, export_hf=True)
    target = tmp_path / "ckpt" / "checkpoint-1"
    adapter = json.loads((target / "lora_adapter" / "adapter_config.json").read_text())
    assert adapter["r"] == 4 and adapter["lora_alpha"] == 8
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    peft_model = PeftModel.from_pretrained(base, target / "lora_adapter")
    hf = AutoModelForCausalLM.from_pretrained(out["hf_path"])  # the HF export: the merged model
    ids = torch.tensor([[4, 9, 12, 30, 31]])
    with torch.no_grad():
        want = eng.model(input_ids=ids).logits
        torch.testing.assert_close(peft_model(input_ids=ids).logits, want, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(hf(input_ids=ids).logits, want, rtol=1e-5, atol=1e-6)
    fresh = E.TrainingEngine(_settings(tiny_model_dir), eng.training)
    fresh.load(target)
    for (n, p), (_, q) in zip(eng.model.named_parameters(), fresh.model.named_parameters(), strict=True):
        assert torch.equal(p, q), n


def test_lora_settings_are_checked():
    with pytest.raises(E.RequestError, match="extensions.lora.rank"):
        training_settings(_body(model_name="m", extensions={"lora": {"rank": -1}}))
    with pytest.raises(E.RequestError, match="extensions.lora.dropout is not read"):
        training_settings(_body(model_name="m", extensions={"lora": {"rank": 4, "dropout": 0.1}}))
    assert training_settings(JobConfig(model_name="m", extensions={"lora": {"rank": 0}})).lora is None


# ---- rows: LR scheduler tick, warmup ratio without total_training_steps, num_cycles / zero_indexed_step / min_lr ----


def _verl_lrs(n, *, kind, warmup, total, **kw):
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    if kind == "cosine":
        sched = verl_F.get_cosine_schedule_with_warmup(opt, warmup, total, **kw)
    else:
        sched = verl_F.get_constant_schedule_with_warmup(opt, warmup)
    out = []
    for _ in range(n):
        out.append(opt.param_groups[0]["lr"])
        sched.step()
    return out


@pytest.mark.parametrize(
    "schedule, verl_kw",
    [
        (
            {"lr_scheduler_type": "cosine", "lr_warmup_steps_ratio": 0.25, "num_cycles": 1.5, "min_lr_ratio": 0.2},
            dict(kind="cosine", warmup=2, total=8, num_cycles=1.5, min_lr_ratio=0.2),
        ),
        (
            {"lr_scheduler_type": "cosine", "lr_warmup_steps": 3, "zero_indexed_step": False},
            dict(kind="cosine", warmup=3, total=8, zero_indexed_step=False),
        ),
        ({"warmup_style": "constant", "lr_warmup_steps_ratio": 0.5}, dict(kind="constant", warmup=4, total=8)),
    ],
    ids=["cosine-ratio-cycles-floor", "cosine-one-indexed", "constant-ratio"],
)
def test_one_tick_per_training_step_with_a_late_horizon(tiny_model_dir, schedule, verl_kw):
    cfg = JobConfig(
        model_name=str(tiny_model_dir),
        ds_config={"optimizer": {"params": {"lr": 1.0}}},
        extensions={"lr_schedule": schedule},
    )
    eng = E.TrainingEngine(_settings(tiny_model_dir), training_settings(cfg))
    assert eng.scheduler is None  # the horizon is not known yet (verl counts its dataloader after the job exists)
    with pytest.raises(E.RequestError, match="needs its horizon"):
        eng.step()
    used, reported = [], []
    for _ in range(8):  # 8 training steps of 2 mini-batches each: the schedule moves once per training step
        for last in (False, True):
            out = eng.step(lr_scheduler_step=last, total_training_steps=8)["metrics"]
            used.append(out["last_lr"])
        reported.append(out["lr"])
    want = _verl_lrs(9, **verl_kw)
    assert used == [lr for lr in want[:8] for _ in range(2)]  # identical floats: verl's own function
    assert reported == want[1:9]  # verl reports the rate after the step's tick
    with pytest.raises(E.RequestError, match="contradicts the job's schedule horizon"):
        eng.step(total_training_steps=9)


def test_the_late_schedule_survives_a_checkpoint(tiny_model_dir, tmp_path):
    schedule = {"lr_scheduler_type": "cosine", "lr_warmup_steps_ratio": 0.5}
    cfg = JobConfig(model_name=str(tiny_model_dir), extensions={"lr_schedule": schedule})
    ts = training_settings(cfg)
    a = E.TrainingEngine(_settings(tiny_model_dir), ts)
    early = a.save(tmp_path / "early", step=0, save_total_limit=None)["path"]
    for _ in range(3):
        a.step(total_training_steps=6)
    later = a.save(tmp_path / "later", step=3, save_total_limit=None)["path"]
    nxt = a.step()["metrics"]["last_lr"]
    b = E.TrainingEngine(_settings(tiny_model_dir), training_settings(cfg))
    b.load(Path(later))
    assert b.step()["metrics"]["last_lr"] == nxt  # resumed mid-schedule without a new horizon
    b.load(Path(early))  # before the horizon arrived: the next /step must bring it again
    assert b.scheduler is None


def test_lr_schedule_refusals():
    bad = [
        ({"lr_scheduler_type": "linear"}, "lr_scheduler_type 'linear'"),
        ({"num_cyles": 1}, "extensions.lr_schedule.num_cyles is not read"),
        ({"lr_warmup_steps_ratio": 2}, "lr_warmup_steps_ratio must be in"),
        ({"warmup_style": "cosine", "lr_scheduler_type": "constant"}, "contradicts"),
    ]
    for schedule, match in bad:
        with pytest.raises(E.RequestError, match=match):
            training_settings(_body(model_name="m", extensions={"lr_schedule": schedule}))


# ---- row: loss_scale_factor: null ----


def test_loss_scale_factor_null_is_verls_per_micro_batch_rule(tiny_model_dir):
    """``seq-mean-token-sum-norm`` divides by K; null K is the micro-batch's longest response (verl pads each
    micro-batch's nested rows to that), not the configured maximum R."""
    b = _batch(7)
    lens = b["attention_mask"][:, P:].sum(-1)  # 1, 4, 2, 5, 3, 1 -> micro-batches of 2 rows: widths 4, 5, 3
    widths = [int(lens[i : i + 2].max()) for i in range(0, 6, 2)]
    assert widths != [R, R, R]
    ac = {"loss_agg_mode": "seq-mean-token-sum-norm", "ppo_micro_batch_size_per_gpu": 2}
    null = E.TrainingEngine(_settings(tiny_model_dir), TrainingSettings()).forward_backward(
        b, {"actor_config": {**ac, "loss_scale_factor": None}}
    )["metrics"]
    parts = []
    for i, w in enumerate(widths):  # each micro-batch alone, with the whole call's denominators and K = its width
        sl = slice(2 * i, 2 * i + 2)
        meta = {"actor_config": {**ac, "loss_scale_factor": w}, "global_batch_size": 6}
        sub = {k: v[sl] for k, v in b.items()}
        parts.append(E.TrainingEngine(_settings(tiny_model_dir), TrainingSettings()).forward_backward(sub, meta))
    assert null["actor/pg_loss"] == pytest.approx(sum(p["metrics"]["actor/pg_loss"] for p in parts), rel=1e-6)


# ---- row: trainer.profile_steps (the server side; the worker hooks are in the plugin tests) ----


def test_profiler_writes_a_chrome_trace_of_the_update(tiny_model_dir, tmp_path):
    eng = E.TrainingEngine(_settings(tiny_model_dir), TrainingSettings())
    with pytest.raises(E.RequestError, match="not running"):
        eng.profile("stop", tmp_path)
    eng.profile("start", tmp_path)
    with pytest.raises(E.RequestError, match="already running"):
        eng.profile("start", tmp_path)
    eng.forward_backward(_batch(), {"actor_config": {}})
    out = eng.profile("stop", tmp_path, "step_3")
    trace = json.loads((tmp_path / "step_3.json").read_text())
    names = {e.get("name", "") for e in trace["traceEvents"]}
    assert out["trace"] == str(tmp_path / "step_3.json") and any(n.startswith("aten::") for n in names)


# ---- row: checkpoint.save_contents [hf_model] (server side) ----


def test_hf_export_is_a_loadable_model_with_the_trained_weights(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    eng = E.TrainingEngine(_settings(tiny_model_dir), TrainingSettings(lr=1e-2))
    eng.forward_backward(_batch(), {"actor_config": {}})
    eng.step()
    out = eng.save(tmp_path, step=1, save_total_limit=None, export_hf=True)
    hf = AutoModelForCausalLM.from_pretrained(out["hf_path"])
    AutoTokenizer.from_pretrained(out["hf_path"])  # the tokenizer is exported beside it
    for (n, p), (_, q) in zip(eng.model.named_parameters(), hf.named_parameters(), strict=True):
        assert torch.equal(p.detach(), q.detach()), n


# ---- issue 42 item 2: compute on real tokens, whatever the frame's padding ----


def _padded(b: dict, p2: int, r2: int) -> dict:
    """``b`` (P x R) padded to the maxima ``p2`` x ``r2`` (prompts on the left, responses on the right), as a frame
    dense-padded to verl's config maxima arrives."""

    def grow(t, left, right):
        return torch.nn.functional.pad(t, (left, right))

    left, right = p2 - P, r2 - R
    out = {k: grow(b[k], left, right) for k in ("input_ids", "attention_mask")}
    out["prompts"] = grow(b["prompts"], left, 0)
    for k in ("responses", "response_mask", "advantages", "old_log_probs"):
        out[k] = grow(b[k], 0, right)
    return out


def test_padding_to_the_config_maxima_changes_neither_loss_nor_gradient_and_only_real_columns_are_computed(
    tiny_model_dir,
):
    """The same rows framed at their own maxima (P=6, R=5) and at verl's config maxima (P=48, R=40): the same loss,
    gradients and log-probs, and every forward sees the micro-batch's real columns only (the padding is trimmed)."""
    b = _batch(3)
    big = _padded(b, 48, 40)
    meta = {"actor_config": {"ppo_micro_batch_size_per_gpu": 3, "loss_agg_mode": "token-mean"}}
    results = {}
    for name, frame in (("own", b), ("padded", big)):
        settings = E.EngineSettings(model_path=str(tiny_model_dir), device="cpu", dtype="float64", max_seq_len=128)
        eng = E.TrainingEngine(settings, TrainingSettings())
        widths: list[int] = []

        def seen(_module, _args, kwargs, widths=widths):
            widths.append(int(kwargs["input_ids"].shape[1]))

        hook = eng.model.register_forward_pre_hook(seen, with_kwargs=True)
        out = eng.forward_backward(frame, meta)
        fwd = eng.forward(frame, {"calculate_entropy": True})["batch"]
        hook.remove()
        results[name] = (out["metrics"]["loss"], _grads(eng), fwd, widths)
    (loss_a, grads_a, fwd_a, widths_a), (loss_b, grads_b, fwd_b, widths_b) = results["own"], results["padded"]
    assert loss_a == pytest.approx(loss_b, rel=1e-12, abs=1e-14)
    assert grads_a.keys() == grads_b.keys() and grads_a
    for n in grads_a:
        torch.testing.assert_close(grads_a[n], grads_b[n], rtol=1e-10, atol=1e-13, msg=n)
    assert widths_a == widths_b and max(widths_b) <= P + R, widths_b  # the padding never reaches the model
    real = big["attention_mask"].bool()
    for key in ("logprobs", "entropy"):
        assert list(fwd_b[key].shape) == list(big["input_ids"].shape)  # the reply keeps the frame's layout
        torch.testing.assert_close(fwd_b[key][:, 48 - P : 48 + R], fwd_a[key], rtol=1e-10, atol=1e-12)
        assert not fwd_b[key][~real].any()  # padding columns stay 0
