# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""arctic_platform.server.jobs: validation before building, transactional builds, states with reasons, slots."""

from __future__ import annotations

import shutil

import pytest
from pydantic import ValidationError

from arctic_platform.ds_config import build_ds_config
from arctic_platform.protocol import JobConfig, LrSchedule, OptimizerSpec
from arctic_platform.server.engines import RequestError
from arctic_platform.server.jobs import JobRegistry, ServerLimits
from arctic_platform.server.routes.bodies import parse_model


@pytest.fixture
def registry(tiny_model_dir):
    # the torch sampling engine: these tests are about the registry (the vLLM engine: test_sampling_conformance)
    limits = ServerLimits(default_model=str(tiny_model_dir), max_seq_len=64, engine_timeout_s=30)
    limits.sampling_engine = "torch"
    return JobRegistry(limits)


def _cfg(**kw):
    """The body as ``/initialize`` reads it: its typed sections refuse a key by path (RequestError 400 / 422)."""
    return parse_model(JobConfig, kw)


@pytest.mark.parametrize(
    "kw, status, match",
    [
        (dict(job_type="critic"), 400, "unknown job_type"),
        (dict(job_type="sampling", model_name="/nonexistent/model"), 400, "not a local Hugging Face model"),
        (dict(job_type="training"), 400, "needs checkpoint_path"),
        (dict(job_type="sampling", extensions={"device": "cuda"}), 400, "CUDA is not available"),
        (dict(job_type="sampling", extensions={"device": "tpu"}), 400, "is not 'auto'"),
        (dict(job_type="sampling", extensions={"dtype": "float8"}), 400, "dtype 'float8'"),
        (dict(job_type="training", checkpoint_path="/tmp/x", training_config={"lr": 1}), 422, "training_config"),
        (
            dict(job_type="training", checkpoint_path="/tmp/x", ds_config={"scheduler": {"type": "WarmupCosineLR"}}),
            422,
            "warmup_type",
        ),
        (
            dict(
                job_type="training",
                checkpoint_path="/tmp/x",
                ds_config={"scheduler": {"type": "WarmupCosineLR", "params": {"warmup_type": "linear"}}},
            ),
            422,
            "total_num_steps",
        ),
        (dict(job_type="training", checkpoint_path="/tmp/x", ds_config={"amp": {}}), 422, "ds_config.amp"),
        (
            dict(job_type="training", checkpoint_path="/tmp/x", ds_config={"optimizer": {"params": {"amsgrad": True}}}),
            422,
            "optimizer.params.amsgrad",
        ),
        (dict(job_type="sampling", ds_worker_config={"use_liger": True}), 422, "use_liger"),
    ],
    ids=[
        "type",
        "model",
        "ckpt",
        "cuda",
        "device",
        "dtype",
        "training-config",
        "log-warmup",
        "cosine",
        "ds-key",
        "opt-param",
        "liger",
    ],  # fmt: skip
)
def test_validation_happens_before_anything_is_built(registry, kw, status, match):
    with pytest.raises(RequestError, match=match) as ei:
        registry.create(_cfg(**kw))
    assert ei.value.status == status
    assert registry.all() == []  # no record, no id consumed by a rejected request


def test_unusable_checkpoint_path_is_a_400(registry, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(RequestError, match="not usable") as ei:
        registry.create(_cfg(job_type="training", checkpoint_path=str(blocker / "sub")))
    assert ei.value.status == 400 and registry.all() == []


def test_zero_workers_refuse_the_job_type(tiny_model_dir):
    reg = JobRegistry(ServerLimits(default_model=str(tiny_model_dir), log_prob_gpus=0))
    with pytest.raises(RequestError, match="--log-prob-gpus 0"):
        reg.create(_cfg(job_type="log_prob"))


def test_lifecycle_pending_running_terminated(registry, tmp_path):
    job = registry.create(_cfg(job_type="training", checkpoint_path=str(tmp_path)))
    assert (job.job_id, job.status, job.reason) == (1, "PENDING", "")
    with pytest.raises(RequestError) as ei:  # one live job per type, pending included
        registry.create(_cfg(job_type="training", checkpoint_path=str(tmp_path)))
    assert ei.value.status == 409
    with pytest.raises(RequestError) as ei:
        registry.require(1, "training")
    assert ei.value.status == 409 and "PENDING" in ei.value.reason
    registry.build(job)
    assert job.status == "RUNNING" and registry.require(1, "training") is job
    assert job.info()["checkpoint_path"] == str(tmp_path / "arctic_rl_job_1")
    with pytest.raises(RequestError) as ei:
        registry.require(1, "sampling")
    assert ei.value.status == 400 and "training job" in ei.value.reason
    with pytest.raises(RequestError) as ei:
        registry.get(99)
    assert ei.value.status == 404
    registry.destroy(job, "destroyed by a client")
    assert (job.status, job.reason, job.engine) == ("TERMINATED", "destroyed by a client", None)
    again = registry.create(_cfg(job_type="training", checkpoint_path=str(tmp_path)))
    assert again.job_id == 2  # ids are never reused


def test_failed_build_leaves_nothing_and_can_be_retried(registry, tiny_model_dir, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_model_dir, broken)
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    job = registry.create(_cfg(job_type="sampling", model_name=str(broken)))
    registry.build(job)
    assert job.status == "FAILED" and job.engine is None
    assert job.reason.startswith("initialization failed:") and len(job.reason.splitlines()) == 1
    fixed = registry.create(_cfg(job_type="sampling"))  # the failed record does not hold the slot
    registry.build(fixed)
    assert fixed.status == "RUNNING"
    assert [j.status for j in registry.all()] == ["FAILED", "RUNNING"]


def test_destroy_while_pending_frees_the_slot_at_once(registry):
    job = registry.create(_cfg(job_type="log_prob"))
    registry.destroy(job, "destroyed by a client")
    assert job.status == "TERMINATED" and "while initializing" in job.reason
    again = registry.create(_cfg(job_type="log_prob"))  # the slot is free before the abandoned build ends
    registry.build(job)  # the abandoned build finishes: its engine is discarded, the record stays terminated
    assert job.status == "TERMINATED" and job.engine is None
    registry.build(again)
    assert again.status == "RUNNING" and again.engine is not None


def test_ds_config_is_honoured(registry, tmp_path):
    opt = OptimizerSpec(lr=1e-3, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1, grad_clip=0.5)
    ds = build_ds_config(opt, LrSchedule(lr_warmup_steps=3))
    ds["zero_optimization"] = {"stage": 0}  # sizing / placement keys are accepted without effect
    ds["train_batch_size"] = 8
    job = registry.create(_cfg(job_type="training", checkpoint_path=str(tmp_path), ds_config=ds))
    registry.build(job)
    t = job.engine.training
    assert (t.lr, t.betas, t.eps, t.weight_decay, t.grad_clip) == (1e-3, (0.8, 0.9), 1e-6, 0.1, 0.5)
    assert (t.lr_scheduler_type, t.warmup_steps) == ("constant", 3)
    g = job.engine.optimizer.param_groups[0]
    assert (g["initial_lr"], g["betas"], g["eps"], g["weight_decay"]) == (1e-3, (0.8, 0.9), 1e-6, 0.1)


def test_old_top_level_keys_are_refused_with_their_new_place():
    with pytest.raises(ValidationError, match="extensions.device"):
        JobConfig.model_validate(dict(job_type="sampling", device="cpu"))
    with pytest.raises(ValidationError, match="vllm_config"):
        JobConfig.model_validate(dict(job_type="sampling", engine_kwargs={}))


def test_fca_request_is_ignored_with_one_warning(registry, caplog):
    aic = {"zorro_inference": {"enable": True}, "speculative_decoding": {"model": ""}}
    job = registry.create(_cfg(job_type="sampling", arctic_inference_config=aic, vllm_config={"enforce_eager": True}))
    with caplog.at_level("WARNING", logger="arctic_platform.server"):
        registry.build(job)
    assert job.status == "RUNNING"  # never fails the job
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "FCA" in warnings[0].getMessage()


def test_reference_job_bodies_are_read(registry, tmp_path):
    """What Arctic-Platform's adapter sends: training_config over ds_config, its ds_worker_config keys, a log_prob job
    with ds_config + log_prob_config; a 422 only for what the torch engine cannot do, naming it."""
    from arctic_platform.server.jobs import training_settings

    ckpt = str(tmp_path)
    ds = {
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.1}},
        "gradient_clipping": 2.0,
        "zero_optimization": {"stage": 3},
        "train_micro_batch_size_per_gpu": 2,
        "sequence_parallel_size": 1,
    }
    cfg = _cfg(job_type="training", checkpoint_path=ckpt, ds_config=ds,
               training_config={"optimizer": {"lr": 5e-4}})  # fmt: skip
    ts = training_settings(cfg)
    assert (ts.lr, ts.weight_decay, ts.grad_clip, ts.micro_batch_size) == (5e-4, 0.0, 2.0, 2)
    wc = {"attn_implementation": "eager", "use_liger": False, "enable_gradient_checkpointing": True,
          "zorro_train_enable": False}  # fmt: skip
    assert registry.create(_cfg(job_type="training", checkpoint_path=ckpt, ds_config=ds, ds_worker_config=wc))
    lp_config = {"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": 2}
    lp = registry.create(_cfg(job_type="log_prob", ds_config=ds, ds_worker_config=wc, log_prob_config=lp_config))
    assert lp.status == "PENDING"
    for kw, match in (
        (dict(job_type="sampling", ds_worker_config={"zorro_train_enable": True}), "no ZoRRo training"),
        (dict(job_type="sampling", ds_worker_config={"attn_implementation": "flash_attention_2"}), "cannot be loaded"),
        (dict(job_type="sampling", ds_worker_config={"use_autocast": True}), "ds_worker_config.use_autocast"),
        (dict(job_type="sampling", log_prob_config={}), "log_prob_config on a sampling job"),
        (dict(job_type="training", checkpoint_path=ckpt, ds_config={"sequence_parallel_size": 2}), "sequence_parallel"),
    ):
        with pytest.raises(RequestError, match=match) as ei:
            registry.create(_cfg(**kw))
        assert ei.value.status == 422


def test_full_determinism_is_honoured(registry, tmp_path):
    import torch

    job = registry.create(_cfg(job_type="log_prob", full_determinism=True, seed=3))
    try:
        registry.build(job)
        assert job.status == "RUNNING" and job.info()["full_determinism"] is True
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(False)
        registry.destroy(job, "test over")
