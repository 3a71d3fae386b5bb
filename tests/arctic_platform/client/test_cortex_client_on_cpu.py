# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The client API on Snowflake Cortex, against the fake SnowAPI (a fake: the service is unreachable here): the same
calls as on-prem (sync client), no-op wakes, calls Cortex has no route for failing at once naming cortex, the
reconnect handle, the create body built from the job configs, what has no field refused before any call, verl's LR
schedule sent as each step's learning rate, and the forward-backward contract."""

from __future__ import annotations

import pytest
import torch

from arctic_platform import wire
from arctic_platform.client import ArcticRLClient, ArcticRLClientConfig, ArcticRLError, AsyncArcticRLClient
from arctic_platform.client.errors import ArcticRLUnavailableError
from arctic_platform.client.transports.cortex_body import (
    CortexSchedule,
    forward_backward_frame,
    shift_left,
    sub_job_configs,
)


def _config(fake, **kw) -> ArcticRLClientConfig:
    base = dict(
        model_name="Qwen/Qwen3-0.6B",
        max_seq_len=64,
        log_prob_gpus=0,
        request_timeout=30,
        training={"optimizer": {"lr": 1e-3}, "train_batch_size": 4},
        backend={"type": "cortex", "base_url": fake.url, "database": "DB", "schema": "SCH"},
    )
    base.update(kw)
    return ArcticRLClientConfig(**base)


def _sync(cfg, clock) -> ArcticRLClient:
    return ArcticRLClient(cfg, _client=AsyncArcticRLClient(cfg, sleep=clock.sleep))


def _update_batch(b=2, P=4, R=3):
    S = P + R
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 300, (b, S), generator=g)
    resp = torch.zeros(b, S)
    resp[:, P:] = 1
    resp[1, S - 1] = 0  # a shorter response
    batch = {
        "input_ids": ids,
        "attention_mask": torch.ones(b, S, dtype=torch.long),
        "position_ids": torch.arange(S).expand(b, S),
        "prompts": ids[:, :P],
        "responses": ids[:, P:],
        "response_mask": resp,
        "loss_mask": resp.clone(),
        "advantages": torch.randn(b, S, generator=g) * resp,
    }
    meta = {
        "temperature": 0.6,
        "global_batch_size": 8,
        "batch_num_tokens": 40,
        "actor_config": {
            "clip_ratio": 0.2, "clip_ratio_low": 0.1, "clip_ratio_high": 0.28, "clip_ratio_c": 3.0,
            "loss_agg_mode": "seq-mean-token-sum", "entropy_coeff": 0.0, "policy_loss": {"loss_mode": "vanilla"},
        },
    }  # fmt: skip
    return batch, meta


def test_the_same_client_api_on_cortex(fake, clock):
    c = _sync(_config(fake), clock)
    c.start()
    assert c.backend_profile.name == "Snowflake Cortex" and c.capabilities == ("token_ids",)
    out = c.generate([[1, 2, 3], [4]], {"max_tokens": 2, "temperature": 1.0, "logprobs": None})
    assert [r["token_ids"] for r in out] == [[10, 11], [11, 12]]
    gen = fake.backend.calls[-1][1]
    assert gen == {
        "prompts": [[1, 2, 3], [4]],
        "sampling_params": {"max_tokens": 2, "temperature": 1.0},
        "strict": False,
    }
    fb = c.forward_backward(*_update_batch())
    assert fb["avg_loss"] > 0 and fb["metrics"] == {}
    step = c.step()
    assert step == {"global_steps": 1, "last_lr": 1e-3, "lr": 1e-3}  # flat, no metrics; lr: the schedule's next
    assert c.sync_weights(policy_version=1)["status"] == "ok"
    assert c.reset_prefix_cache()["reset"] is True
    n = len(fake.exchanges)
    for call in (c.wake_inference, c.sleep_inference, c.wake_training, c.sleep_training):
        assert call() == {}
    assert len(fake.exchanges) == n  # no-ops: nothing is sent
    for name, call in (
        ("forward", lambda: c.forward({}, {})),
        ("log_probs", lambda: c.log_probs(["x"])),
        ("load_checkpoint", lambda: c.load_checkpoint("/ckpt")),
        ("weight_norm", c.weight_norm),
        ("health", c.health),
        ("status", c.status),
        ("profile", lambda: c.profile("start")),
    ):
        with pytest.raises(ArcticRLUnavailableError, match=f"{name} is not available on cortex"):
            call()
    with pytest.raises(ArcticRLUnavailableError, match=r"save\(path, step=...\): cortex keeps checkpoints"):
        c.save("/ckpt", step=3)
    assert len(fake.exchanges) == n
    assert c.save()["checkpoint_id"] == "global_step1"
    assert fake.calls("save")[0].json() == {"checkpoint_type": "resumable"}

    handle = c.reconnect_handle()
    (job_id,) = fake.jobs
    assert handle["backend"] == "cortex" and handle["job_id"] == job_id
    assert (handle["training_job_id"], handle["sampling_job_id"]) == (f"{job_id}:training:0", f"{job_id}:sampling:0")
    again = ArcticRLClient(None, _client=AsyncArcticRLClient.from_handle(handle, sleep=clock.sleep))
    again.start()
    assert len(fake.calls("create")) == 1 and again.training_job_id == c.training_job_id
    assert again.step()["global_steps"] == 2
    assert again.close() == [] and not fake.calls("cancel")  # a re-attached client cancels nothing
    assert c.close() == [] and len(fake.calls("cancel")) == 1


def test_reattaching_checks_the_sub_job_ids(fake, clock):
    c = _sync(_config(fake), clock)
    c.start()
    handle = c.reconnect_handle()
    job_id = handle["job_id"]
    for change, error in (
        ({"sampling_job_id": "other:sampling:0"}, "cortex sub-job ids of more than one job"),
        ({"sampling_job_id": f"{job_id}:training:0"}, f"is not the sampling sub-job of cortex job {job_id}"),
    ):
        again = ArcticRLClient(None, _client=AsyncArcticRLClient.from_handle({**handle, **change}, sleep=clock.sleep))
        with pytest.raises(ArcticRLError, match=error):
            again.start()
        again.close()
    assert len(fake.calls("cancel")) == 0
    c.close()


def test_the_create_body_is_built_from_the_job_configs(fake):
    cfg = _config(
        fake,
        seed=3,
        dtype="bfloat16",
        training_gpus=2,
        sampling_gpus=1,
        training={
            "optimizer": {"lr": 2e-6, "betas": (0.9, 0.95), "eps": 1e-7, "weight_decay": 0.1, "grad_clip": 0.5},
            "train_batch_size": 8,
            "micro_batch_size": 2,
            "sequence_parallel_size": 2,
            "deepspeed": {"zero_optimization": {"stage": 3}},
            "ds_worker_config": {
                "enable_gradient_checkpointing": True,
                "use_liger": True,
                "attn_implementation": "sdpa",
            },
            "lr_schedule": {"lr_scheduler_type": "cosine", "total_training_steps": 10},
        },
        sampling={"vllm_config": {"gpu_memory_utilization": 0.8, "max_model_len": 64, "tensor_parallel_size": 1}},
    )
    sampling, training = sub_job_configs(cfg)
    assert sampling == {
        "job_type": "sampling", "model_name": "Qwen/Qwen3-0.6B", "dtype": "bfloat16", "seed": 3,
        "inference_config": {"max_seq_len": 64, "n_gpus": 1, "vllm_config": {"gpu_memory_utilization": 0.8}},
    }  # fmt: skip
    assert training == {
        "job_type": "training", "model_name": "Qwen/Qwen3-0.6B", "dtype": "bfloat16", "seed": 3,
        "training_config": {
            "max_seq_len": 64, "n_gpus": 2, "train_batch_size": 8,
            "optimizer": {"name": "AdamW", "lr": 2e-6, "betas": [0.9, 0.95], "eps": 1e-7, "weight_decay": 0.1},
            "gradient_clipping": 0.5, "activation_checkpointing": True, "attn_implementation": "sdpa",
            "model_provider": "liger", "sp_size": 2,
            "ds_config": {"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": 2, "train_batch_size": 8,
                          "gradient_accumulation_steps": 2, "sequence_parallel_size": 2},
        },
    }  # fmt: skip
    no_clip = _config(fake, training={"optimizer": {"grad_clip": None}, "train_batch_size": 4})
    assert sub_job_configs(no_clip)[-1]["training_config"]["gradient_clipping"] == 0.0


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"log_prob_gpus": 1}, "log_prob_gpus=1: Cortex has no log-prob call"),
        ({"training": {"train_batch_size": 4, "full_determinism": True}}, "full_determinism"),
        ({"training": {"train_batch_size": 4, "cuda_ipc": True}}, "cuda_ipc"),
        ({"training": {"train_batch_size": 4, "lora": {"rank": 8}}}, "training.lora"),
        ({"training": {}}, "train_batch_size is unset"),
        ({"sampling": {"arctic_inference_config": {"use_fca": True}}}, "arctic_inference_config"),
        ({"sampling_gpus": 2, "sampling": {"vllm_config": {"tensor_parallel_size": 1}}}, "tensor_parallel_size=1"),
    ],
)
def test_what_cortex_has_no_field_for_is_refused_before_any_call(fake, clock, change, words):
    c = _sync(_config(fake, **change), clock)
    with pytest.raises(ArcticRLUnavailableError, match="Snowflake Cortex cannot honour") as ei:
        c.start()
    assert words in str(ei.value)
    assert fake.exchanges == []
    c.close()


def test_a_prompt_that_leaves_no_room_for_an_output_is_refused_before_sending(fake, clock):
    """The service truncates nothing for us and the reference checks nothing: a token-id prompt as long as
    ``max_seq_len`` fails here, naming it, before any generate is sent; one token shorter goes out."""
    c = _sync(_config(fake), clock)  # max_seq_len 64
    c.start()
    with pytest.raises(ArcticRLError, match=r"prompts\[1\] has 64 tokens: max_seq_len 64 leaves no room"):
        c.generate([[1, 2], list(range(1, 65))], {"max_tokens": 1, "temperature": 1.0})
    assert fake.calls("generate") == []
    out = c.generate([list(range(1, 64))], {"max_tokens": 1, "temperature": 1.0})
    assert len(out) == 1 and len(fake.calls("generate")) == 1
    c.close()


def test_verls_lr_schedule_travels_as_each_steps_learning_rate(fake, clock):
    from verl.utils.torch_functional import get_cosine_schedule_with_warmup

    schedule = {"lr_scheduler_type": "cosine", "lr_warmup_steps": 2, "total_training_steps": None,
                "min_lr_ratio": 0.1, "num_cycles": 0.5}  # fmt: skip
    cfg = _config(fake, training={"optimizer": {"lr": 1e-3}, "train_batch_size": 4, "lr_schedule": schedule})
    c = _sync(cfg, clock)
    c.start()
    reported = []
    for _ in range(5):  # verl's training steps: two mini-batches each, the schedule ticks after the second
        c.step(lr_scheduler_step=False, total_training_steps=6)
        reported.append(c.step(lr_scheduler_step=True, total_training_steps=6)["lr"])
    sent = [e.json()["learning_rate"] for e in fake.calls("step")]
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1e-3)
    ref = get_cosine_schedule_with_warmup(opt, num_warmup_steps=2, num_training_steps=6, min_lr_ratio=0.1)
    want = []
    for _ in range(5):
        want += [ref.get_last_lr()[0]] * 2
        opt.step()
        ref.step()
    assert sent == pytest.approx(want, rel=1e-12) and len(set(sent)) == 5
    assert reported == pytest.approx(want[2::2] + [ref.get_last_lr()[0]], rel=1e-12)
    with pytest.raises(ArcticRLError, match="contradicts the schedule's horizon 6"):
        c.step(total_training_steps=7)
    c.close()


def test_a_reattached_client_goes_on_with_the_schedule_where_it_stands(fake, clock, caplog):
    """The handle carries the schedule's position: a client re-attached after two training steps sends the third
    step's rate. A handle older than the job's last steps (taken at start) sends one stale rate, then the service's
    ``global_steps`` moves its schedule back in line, with a warning naming both counts."""
    from verl.utils.torch_functional import get_cosine_schedule_with_warmup

    schedule = {"lr_scheduler_type": "cosine", "lr_warmup_steps": 1, "total_training_steps": 6}
    training = {"optimizer": {"lr": 1e-3}, "train_batch_size": 4, "lr_schedule": schedule,
                "optimizer_steps_per_tick": 2}  # fmt: skip
    c = _sync(_config(fake, training=training), clock)
    c.start()
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1e-3)
    ref = get_cosine_schedule_with_warmup(opt, num_warmup_steps=1, num_training_steps=6)
    want = []  # verl's rate of training steps 1..6
    for _ in range(6):
        want.append(ref.get_last_lr()[0])
        opt.step()
        ref.step()
    assert len(set(want)) == 6

    def training_step(client):
        client.step(lr_scheduler_step=False)
        return client.step(lr_scheduler_step=True)["lr"]

    stale = c.reconnect_handle()
    assert stale["lr_schedule_position"] == {"ticks": 0, "steps": 0, "total_steps": 6}
    assert training_step(c) == pytest.approx(want[1], rel=1e-12)
    training_step(c)
    handle = c.reconnect_handle()
    assert handle["lr_schedule_position"] == {"ticks": 2, "steps": 4, "total_steps": 6}
    again = ArcticRLClient(None, _client=AsyncArcticRLClient.from_handle(handle, sleep=clock.sleep))
    again.start()
    with caplog.at_level("WARNING", logger="arctic_platform.client"):
        assert training_step(again) == pytest.approx(want[3], rel=1e-12)
    assert not [r for r in caplog.records if "optimizer step(s)" in r.getMessage()]
    sent = [e.json()["learning_rate"] for e in fake.calls("step")]
    assert sent == pytest.approx([want[0]] * 2 + [want[1]] * 2 + [want[2]] * 2, rel=1e-12)
    again.close()

    late = ArcticRLClient(None, _client=AsyncArcticRLClient.from_handle(stale, sleep=clock.sleep))
    late.start()
    with caplog.at_level("WARNING", logger="arctic_platform.client"):
        late.step(lr_scheduler_step=False)  # the job's 7th optimizer step; this client counted its 1st
        assert late.step(lr_scheduler_step=True)["lr"] == pytest.approx(want[4], rel=1e-12)
    moved = [r.getMessage() for r in caplog.records if "optimizer step(s)" in r.getMessage()]
    assert moved == [
        "cortex: the job has taken 7 optimizer step(s), this client's LR schedule counted 1: it moves from tick 0 to "
        "tick 3 (optimizer_steps_per_tick 2); the step just taken used the rate of tick 0"
    ]
    sent = [e.json()["learning_rate"] for e in fake.calls("step")][6:]
    assert sent == pytest.approx([want[0], want[3]], rel=1e-12)  # one stale rate, then in line again
    late.close()
    c.close()


def test_a_schedule_without_its_horizon_fails_before_sending():
    cfg = ArcticRLClientConfig(
        model_name="m", log_prob_gpus=0, backend={"type": "cortex", "base_url": "http://unused"},
        training={"train_batch_size": 4, "lr_schedule": {"lr_scheduler_type": "cosine"}},
    )  # fmt: skip
    with pytest.raises(ArcticRLError, match="needs its horizon"):
        CortexSchedule(cfg).rate()


# ------------------------------------------------------------------------------------------------ the contract


def test_the_forward_backward_contract_carries_the_prompt_length_and_the_loss_settings():
    batch, meta = _update_batch()
    P, S = 4, 7
    f = forward_backward_frame(batch, meta, dp_size=2)
    assert f["args"] == [] and set(f) == {"args", "kwargs", "context", "processing"}
    assert set(f["kwargs"]) == {"input_ids", "attention_mask", "position_ids", "use_cache"}
    ctx = f["context"]
    assert (ctx["prompt_length"], ctx["response_length"], ctx["temperature"]) == (P, 3, 0.6)
    assert "old_log_probs_shifted" not in ctx  # none in the batch: the backend uses the current policy's
    # shifted: column i holds token i+1's value; response token k (column P+k) sits at column P+k-1
    for k in range(3):
        assert torch.equal(ctx["advantages"][:, P - 1 + k], batch["advantages"][:, P + k])
        assert torch.equal(ctx["loss_mask"][:, P - 1 + k], batch["response_mask"][:, P + k])
    assert ctx["loss_mask"][:, S - 1].sum() == 0 and ctx["loss_mask"][:, : P - 1].sum() == 0
    assert f["processing"] == {
        "loss_fn": "grpo", "post": ["apply_temperature"],
        "config": {"eps_clip": 0.1, "eps_clip_higher": 0.28, "c_clip": 3.0, "loss_agg_mode": "seq-mean-token-sum",
                   "entropy_coeff": 0.0, "global_batch_size": 8, "batch_num_tokens": 40, "dp_size": 2,
                   "temperature": 0.6},
    }  # fmt: skip
    # response-aligned [b, R] fields and old log-probs (the rollout's) travel the same way
    short = {**batch, "advantages": batch["advantages"][:, P:], "old_log_probs": -torch.rand(2, 3)}
    g = forward_backward_frame(short, meta, dp_size=1)
    assert torch.equal(g["context"]["advantages"], ctx["advantages"])
    assert torch.equal(g["context"]["old_log_probs_shifted"][:, P - 1 : S - 1], short["old_log_probs"])
    assert torch.equal(shift_left(torch.tensor([[1.0, 2.0, 3.0]])), torch.tensor([[2.0, 3.0, 0.0]]))
    wire.decode(wire.encode(f))  # the frame round-trips through DSSST1


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"prompts": None}, "the prompt length is unknown"),
        ({"meta": {"actor_config": {"policy_loss": {"loss_mode": "gspo"}}}}, "loss_mode='gspo'"),
        ({"meta": {"actor_config": {"use_kl_loss": True}}}, "use_kl_loss=true"),
        ({"advantages": torch.zeros(2, 5)}, "batch.advantages has 5 columns"),
    ],
)
def test_the_contract_refuses_what_it_cannot_carry(change, words):
    batch, meta = _update_batch()
    if "meta" in change:
        meta = change["meta"]
    elif change.get("prompts", 0) is None:
        batch.pop("prompts")
    else:
        batch.update(change)
    with pytest.raises(ArcticRLError, match=words.replace("(", r"\(").replace(")", r"\)")):
        forward_backward_frame(batch, meta, dp_size=1)
