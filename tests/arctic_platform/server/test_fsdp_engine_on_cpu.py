# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The sharded engines (kind ``fsdp``: FSDP2 over gloo ranks on CPU) against the one-device engines.

Two ranks must give what one process gives: the same loss per mini-batch, grad norm, learning rate and weights
after three GRPO steps with micro-batches (fixed rows with an uneven row split, and a token budget), for the vanilla
loss and GSPO, in float64 and in float32 (FSDP2 reduces float64 with SUM-then-divide and float32 with gloo's AVG:
both paths), with LoRA (merged weights) and gradient checkpointing; a checkpoint written at two ranks resumes at
one and back; the log_prob engine at two ranks scores as at one. A rank that dies fails the job with a reason at
once.

Tolerances (per tensor: ``max|a - b| / max|b|``): the two runs do the same arithmetic in another order (each rank
sums its own micro-batches, gradients are reduced across ranks, and the thread count of each process changes how
matmuls block their sums), so they differ by rounding only. float64: observed <= 2e-15; asserted 1e-10. float32:
observed <= 8e-6 for weights and <= 1e-6 for loss and grad norm; asserted 1e-4 and 1e-5. The optimizer's ``eps`` is
1e-4 so that AdamW's update is linear in a gradient smaller than that (with the default 1e-8 a gradient at the
rounding floor is amplified by lr / eps = 1e6 into the weights); no thread count or summation order comes near the
margins, while a sharding mistake (a row lost or counted twice, gradients summed instead of averaged, a wrong
denominator) moves these values by 1e-2 or more.
"""

from __future__ import annotations

import os
import re
import signal
import time

import pytest
import torch
from safetensors.torch import load_file

import verl.utils.fsdp_utils  # noqa: F401  (the FSDP engine reads verl's FSDP helpers: a broken import fails here)
from arctic_platform.protocol import JobConfig, JobStatus
from arctic_platform.schedule import TrainingSettings
from arctic_platform.server.engine_calls import call_locked
from arctic_platform.server.engines.fsdp_engine import ShardedForwardEngine, ShardedTrainingEngine, split_rows
from arctic_platform.server.engines.logprob_engine import ForwardEngine
from arctic_platform.server.engines.model_engine import EngineSettings
from arctic_platform.server.engines.shared import stream_buckets
from arctic_platform.server.engines.training_engine import TrainingEngine
from arctic_platform.server.errors import EngineFailed, RequestError
from arctic_platform.server.jobs import Job

P, R = 6, 5
TWO = ["cpu", "cpu"]
TOL = {"float64": (1e-10, 1e-10), "float32": (1e-5, 1e-4)}
"""dtype -> (loss / grad norm, weights): see the module docstring."""

VANILLA = {"actor_config": {"ppo_micro_batch_size_per_gpu": 2}}
GSPO = {
    "actor_config": {
        "use_dynamic_bsz": True,
        "ppo_max_token_len_per_gpu": 12,
        "loss_agg_mode": "seq-mean-token-mean",
        "policy_loss": {"loss_mode": "gspo"},
    }
}


def _batch(seed: int, b: int = 6) -> dict:
    """GRPO rows (protocol §4 layout) of different prompt and response lengths."""
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


def _settings(model_dir, dtype: str) -> EngineSettings:
    return EngineSettings(model_path=str(model_dir), device="cpu", dtype=dtype, max_seq_len=64)


def _training(lora=None, gradient_checkpointing=False) -> TrainingSettings:
    return TrainingSettings(lr=1e-2, grad_clip=1.0, eps=1e-4, lora=lora, gradient_checkpointing=gradient_checkpointing)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def _steps(one, two, meta: dict, seeds: list[int], tol: float) -> None:
    """One GRPO step per seed on both engines: equal loss, grad norm and learning rate (the 2nd batch has 5 rows,
    so the ranks get 3 and 2 rows and the shorter one runs an empty micro-batch)."""
    for k, seed in enumerate(seeds):
        b = _batch(seed, b=5 if k == 1 else 6)
        a, c = one.forward_backward(b, meta), two.forward_backward(b, meta)
        assert abs(a["avg_loss"] - c["avg_loss"]) <= tol * abs(a["avg_loss"]), (seed, a["avg_loss"], c["avg_loss"])
        sa, sc = one.step(), two.step()
        ga, gc = sa["metrics"]["grad_norm"], sc["metrics"]["grad_norm"]
        assert abs(ga - gc) <= tol * ga, (seed, ga, gc)
        assert sa["metrics"]["lr"] == sc["metrics"]["lr"] and sa["metrics"]["last_lr"] == sc["metrics"]["last_lr"]
        assert sa["global_steps"] == sc["global_steps"] and sa["skipped"] == sc["skipped"] is False


def _assert_weights(one, two, tol: float) -> dict[str, float]:
    """Every synced weight equal within ``tol`` per tensor; returns the worst relative difference per class."""
    ref = {n: t.detach() for n, t in one.weights_for_sync().named_parameters()}
    got = {n: t.detach() for n, t in two.weights_for_sync().named_parameters()}
    assert set(got) == set(ref)
    worst: dict[str, float] = {}
    for n, t in got.items():
        d = _rel(t, ref[n])
        assert d <= tol, (n, d)
        cls = "norm" if "norm" in n else ("bias" if n.endswith("bias") else "weight")
        worst[cls] = max(worst.get(cls, 0.0), d)
    return worst


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_two_ranks_train_as_one_and_checkpoints_move_between_them(tiny_model_dir, tmp_path, dtype):
    scalar_tol, weight_tol = TOL[dtype]
    s = _settings(tiny_model_dir, dtype)
    two = ShardedTrainingEngine(s, _training(), TWO, threads=1)
    try:
        one = TrainingEngine(s, _training())
        assert two.describe()["world_size"] == 2 and two.param_dtype == one.param_dtype
        _steps(one, two, VANILLA, [1, 2, 3], scalar_tol)
        # /forward on the training weights (rows split over the ranks, reassembled in order), then training goes on
        # (as verl computes old log-probs before each update)
        b = _batch(7)
        fa = one.forward(b, {"calculate_entropy": True, "micro_batch_size": 2})["batch"]
        fb = two.forward(b, {"calculate_entropy": True, "micro_batch_size": 2})["batch"]
        assert _rel(fb["logprobs"], fa["logprobs"]) <= scalar_tol and _rel(fb["entropy"], fa["entropy"]) <= scalar_tol
        _steps(one, two, GSPO, [4, 5, 6], scalar_tol)
        print(f"{dtype} worst relative difference per tensor class:", _assert_weights(one, two, weight_tol))

        # written at 2 ranks, resumed at 1: the same weights, optimizer state and schedule position
        saved = two.save(tmp_path / "two", 6, None, export_hf=True)
        assert saved["global_step"] == 6 and (tmp_path / "two/checkpoint-6/hf/config.json").is_file()
        resumed = TrainingEngine(s, _training())
        assert resumed.load(tmp_path / "two/checkpoint-6")["global_step"] == 6
        _assert_weights(one, resumed, weight_tol)
        # and back: written at 1, resumed at 2; the next step matches the one-rank run that never stopped
        one.save(tmp_path / "one", 6, None)
        two.load(tmp_path / "one/checkpoint-6")
        _steps(resumed, two, VANILLA, [8], scalar_tol)
        exported = TrainingEngine(_settings(tmp_path / "two/checkpoint-6/hf", dtype), _training())
        assert exported.weight_norm()[0] == pytest.approx(one.weight_norm()[0], rel=weight_tol)
    finally:
        two.close()


def test_two_ranks_train_lora_as_one(tiny_model_dir, tmp_path):
    lora = {"rank": 4, "alpha": 8, "target_modules": "all-linear"}
    scalar_tol, weight_tol = TOL["float32"]
    s = _settings(tiny_model_dir, "float32")
    # with gradient checkpointing, as verl's LoRA examples run (applied before sharding, as verl does)
    two = ShardedTrainingEngine(s, _training(lora, gradient_checkpointing=True), TWO, threads=1)
    try:
        one = TrainingEngine(s, _training(lora, gradient_checkpointing=True))
        assert two.param_names == one.param_names and all("lora_" in n for n in two.param_names)
        _steps(one, two, VANILLA, [11, 12, 13], scalar_tol)
        worst = _assert_weights(one, two, weight_tol)  # merged: base + B @ A * scaling
        print("float32 + LoRA worst relative difference per tensor class:", worst)
        two.save(tmp_path, 3, None)
        assert (tmp_path / "checkpoint-3/lora_adapter/adapter_config.json").is_file()
        resumed = TrainingEngine(s, _training(lora))
        resumed.load(tmp_path / "checkpoint-3")
        _assert_weights(one, resumed, weight_tol)
    finally:
        two.close()


def test_a_sync_streams_buckets_the_ranks_write_in_the_targets_dtype(tiny_model_dir, tmp_path):
    """The ranks plan the sync's buckets in the target's dtype and write each one themselves (cast before the
    gather): one file at a time in the target's folder, each tensor exactly the fp32 master weight cast to bf16; a plan
    the target does not match is refused before any bucket is written."""
    two = ShardedTrainingEngine(_settings(tiny_model_dir, "float32"), _training(), TWO, threads=1)
    try:
        two.forward_backward(_batch(31), VANILLA)
        two.step()
        src = two.weights_for_sync()
        master = dict(src.named_parameters())  # the same stream, in the ranks' own dtype
        assert master.keys() == two.param_shapes.keys() and all(t.dtype == torch.float32 for t in master.values())
        cap = 40_000
        plan = src.bucket_plan(torch.bfloat16, cap)
        assert len(plan) > 2 and sorted(n for b in plan for n, *_ in b) == sorted(master)
        for b in plan:
            assert all(nb == master[n].numel() * 2 for n, _, nb in b)
            assert sum(nb for *_, nb in b) <= cap or len(b) == 1
        want = {n: list(t.shape) for n, t in master.items()}
        folder = tmp_path / "sync"
        folder.mkdir()
        got: dict[str, torch.Tensor] = {}
        for path, shapes in stream_buckets(src, str(folder), bucket_bytes=cap, dtype=torch.bfloat16, want=want):
            assert os.listdir(folder) == [os.path.basename(path)]  # one bucket on disk at a time
            part = load_file(path)
            assert {n: list(t.shape) for n, t in part.items()} == shapes
            got.update(part)
        assert os.listdir(folder) == [] and got.keys() == master.keys()
        for n, t in got.items():
            assert t.dtype == torch.bfloat16 and torch.equal(t, master[n].to(torch.bfloat16)), n
        bad = {**want, "lm_head.extra": [3]}
        with pytest.raises(RequestError, match=r"unexpected \[\]|missing \['lm_head.extra'\]") as e:
            next(stream_buckets(src, str(folder), bucket_bytes=cap, dtype=torch.bfloat16, want=bad))
        assert e.value.status == 409 and os.listdir(folder) == []
    finally:
        two.close()


def test_two_rank_log_prob_engine_scores_and_syncs_as_one(tiny_model_dir):
    s = _settings(tiny_model_dir, "float64")
    two = ShardedForwardEngine(s, TWO, threads=1)
    try:
        one = ForwardEngine(s)
        trainer = TrainingEngine(s, _training())
        trainer.forward_backward(_batch(21), VANILLA)
        trainer.step()
        for eng in (one, two):
            eng.load_weights_from(trainer.weights_for_sync())
        assert two.weight_norm() == pytest.approx(trainer.weight_norm(), rel=1e-12)
        b = _batch(22, b=5)
        meta = {"calculate_entropy": True, "use_dynamic_bsz": True, "max_token_len_per_gpu": 16}
        fa, fb = one.forward(b, meta)["batch"], two.forward(b, meta)["batch"]
        assert _rel(fb["logprobs"], fa["logprobs"]) <= 1e-10 and _rel(fb["entropy"], fa["entropy"]) <= 1e-10
        prompts, completions = [[5, 6, 7], [9, 10]], [[11, 12], [13]]
        ta = one.log_probs_text(one.tokenizer(), prompts, completions, top_k=2)
        tb = two.log_probs_text(two.tokenizer(), prompts, completions, top_k=2)
        assert [r["prompt_token_ids"] for r in tb] == [r["prompt_token_ids"] for r in ta]
        for ra, rb in zip(ta, tb, strict=True):
            for pa, pb in zip(ra["prompt_logprobs"][1:], rb["prompt_logprobs"][1:], strict=True):
                assert pa.keys() == pb.keys()
                assert all(abs(pa[k]["logprob"] - pb[k]["logprob"]) <= 1e-10 for k in pa)
    finally:
        two.close()


def test_a_dead_rank_fails_the_job_at_once_with_its_reason(tiny_model_dir):
    """A rank killed from outside fails the job's next call at once, naming the rank and its exit."""
    two = ShardedTrainingEngine(_settings(tiny_model_dir, "float32"), _training(), TWO, threads=1)
    try:
        # a rank killed from outside: the next call fails at once with the reason (never hangs), which fails the job
        job = Job(1, "training", str(tiny_model_dir), JobConfig(job_type="training"), engine=two)
        job.set(JobStatus.RUNNING)
        victim = two.pids[1]
        os.kill(victim, signal.SIGKILL)
        t0 = time.monotonic()
        why = rf"rank 1 \(pid {victim}, cpu\) died with exit code -9"
        with pytest.raises(RequestError, match=f"job 1 failed: {why}") as e:
            call_locked(job, lambda: two.forward_backward(_batch(14), VANILLA), 30)
        assert e.value.status == 500 and time.monotonic() - t0 < 30
        assert job.status == JobStatus.FAILED and re.match(f"engine failed: {why}", job.reason)
        with pytest.raises(EngineFailed, match="rank 1"):  # the engine stays failed
            two.step()
        assert not any(_alive(p) for p in two.pids)
    finally:
        two.close()


def test_split_rows_gives_every_rank_the_same_number_of_micro_batches():
    from arctic_platform.server.batch import parse_dense_batch
    from arctic_platform.server.loss import MicroBatching

    db = parse_dense_batch(_batch(0, b=5), {}, vocab_size=320, max_seq_len=64, need_response=True)
    shards = split_rows(db, MicroBatching(micro_batch_size=2), 2)
    assert [s.input_ids.shape[0] for s, _ in shards] == [3, 2]
    assert [p for _, p in shards] == [[[0, 1], [2]], [[0, 1], []]]
    assert torch.equal(shards[1][0].input_ids, db.input_ids[3:])
    # more ranks than rows: the rank without rows runs the others' number of empty micro-batches on row 0
    shards = split_rows(db, MicroBatching(micro_batch_size=4), 8)
    assert [len(p) for _, p in shards] == [1] * 8 and [p for _, p in shards[5:]] == [[[]]] * 3
    budget = split_rows(db, MicroBatching(use_dynamic_bsz=True, max_token_len=12), 2)
    assert len({len(p) for _, p in budget}) == 1
    assert sorted(i for _, p in budget[:1] for part in p for i in part) == [0, 1, 2]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:  # gone and reaped
        return False
    return True


def test_ranks_keep_the_servers_devices_while_a_replica_build_sets_its_own(tiny_model_dir):
    """A vLLM replica's build sets its GPUs in the server's environment (vLLM gives its processes no other); FSDP
    ranks another job starts meanwhile keep the server's own CUDA_VISIBLE_DEVICES."""
    from arctic_platform.server.engines.shared import SERVER_ENV, replica_environ

    with replica_environ({"CUDA_VISIBLE_DEVICES": "7,6"}):
        two = ShardedForwardEngine(_settings(tiny_model_dir, "float32"), TWO, threads=1)
    try:
        assert two.describe()["ranks_cuda_visible_devices"] == [SERVER_ENV.get("CUDA_VISIBLE_DEVICES")] * 2
    finally:
        two.close()
