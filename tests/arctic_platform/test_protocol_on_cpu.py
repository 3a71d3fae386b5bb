# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""arctic_platform.protocol: torch-free, one vocabulary, the ds_config builder and reader agree."""

import subprocess
import sys

import pytest
from pydantic import ValidationError

from arctic_platform.ds_config import DsConfigError, build_ds_config, read_ds_config
from arctic_platform.protocol import (
    AGG_MODES,
    JOB_TYPES,
    KL_TYPES,
    TERMINAL_STATES,
    DestroyRequest,
    JobConfig,
    JobStatus,
    first_error,
    normalize_state,
)


def test_importing_the_protocol_loads_no_torch():
    code = "import sys, arctic_platform.protocol, arctic_platform.ds_config; assert 'torch' not in sys.modules, 'torch'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd="/")


def test_client_needs_neither_torch_nor_verl_and_the_server_imports_verl_only_for_training():
    client = "import sys, arctic_platform.client; assert not {'torch', 'verl'} & set(sys.modules), 'heavy import'"
    subprocess.run([sys.executable, "-c", client], check=True, cwd="/")
    # verl (+6.6 s, +240 MiB: benchmarks/server/bench_verl_import.py) is imported by the training engine's loss and
    # schedule, not at server start
    server = "import sys, arctic_platform.server.app; assert 'verl' not in sys.modules, 'verl imported at start'"
    subprocess.run([sys.executable, "-c", server], check=True, cwd="/")


def test_states_and_vocabularies_are_shared():
    from arctic_platform.backend_profile import ARCTIC_PLATFORM_MAIN
    from arctic_platform.server import loss
    from arctic_platform.server.capabilities import server_profile

    assert normalize_state(JobStatus.RUNNING) == "running" and normalize_state("JOB_STATE_FAILED") == "failed"
    assert normalize_state(JobStatus.TERMINATED) in TERMINAL_STATES
    assert loss.AGG_MODES is AGG_MODES and loss.KL_TYPES is KL_TYPES
    assert server_profile().kl_types == KL_TYPES == ARCTIC_PLATFORM_MAIN.kl_types
    assert server_profile().agg_modes == AGG_MODES


@pytest.mark.parametrize("sched", ["constant", "cosine"])
def test_ds_config_round_trip(sched):
    """The one schedule spec -> the DeepSpeed scheduler a reference server gets -> what this server reads back."""
    from arctic_platform.protocol import LrSchedule, OptimizerSpec

    opt = OptimizerSpec(lr=3e-4, betas=(0.8, 0.95), eps=1e-7, weight_decay=0.0, grad_clip=2.0)
    schedule = LrSchedule(lr_scheduler_type=sched, lr_warmup_steps=5)
    if sched == "cosine":
        schedule = LrSchedule(
            lr_scheduler_type="cosine", lr_warmup_steps=5, total_training_steps=25, min_lr_ratio=0.1, init_lr_ratio=0.2
        )
    got = read_ds_config(build_ds_config(opt, schedule, ticks_per_step=2, micro_batch_size=2))
    assert {k: got[k] for k in ("lr", "betas", "eps", "weight_decay", "grad_clip", "micro_batch_size")} == {
        "lr": 3e-4,
        "betas": (0.8, 0.95),
        "eps": 1e-7,
        "weight_decay": 0.0,
        "grad_clip": 2.0,
        "micro_batch_size": 2,
    }
    # warmup and horizon in optimizer steps: 2 per tick
    assert (got["lr_scheduler_type"], got["warmup_steps"]) == (sched, 10)
    if sched == "cosine":
        assert (got["total_steps"], got["min_lr_ratio"], got["init_lr_ratio"]) == (50, 0.1, 0.2)


@pytest.mark.parametrize(
    "schedule, horizon, warmup",
    [
        ({"lr_warmup_steps": 3}, None, 3),
        ({"lr_warmup_steps": -1, "lr_warmup_steps_ratio": 0.25}, 10, 2),  # verl truncates: int(0.25 * 10)
        ({"lr_warmup_steps": 0, "lr_warmup_steps_ratio": 0.25}, None, 0),  # no horizon yet
        ({"lr_warmup_steps_ratio": 0.5, "total_training_steps": 7}, None, 3),
    ],
)
def test_the_one_warmup_rule(schedule, horizon, warmup):
    from arctic_platform.protocol import LrSchedule

    assert LrSchedule(**schedule).warmup(horizon) == warmup


def test_a_schedule_without_its_horizon_gives_no_deepspeed_scheduler():
    from arctic_platform.ds_config import ds_scheduler
    from arctic_platform.protocol import LrSchedule

    assert ds_scheduler(LrSchedule(lr_scheduler_type="cosine"), 1e-3) is None
    assert ds_scheduler(LrSchedule(lr_warmup_steps_ratio=0.1), 1e-3) is None
    assert ds_scheduler(LrSchedule(), 1e-3) is None  # a constant rate: nothing to schedule
    assert ds_scheduler(LrSchedule(lr_warmup_steps=2), 1e-3, 3)["params"]["warmup_num_steps"] == 6


@pytest.mark.parametrize(
    "ds, key",
    [
        ({"optimizer": {"type": "SGD"}}, "optimizer.type"),
        ({"optimizer": {"type": "Adam", "params": {"adam_w_mode": False}}}, "optimizer.params.adam_w_mode"),
        ({"scheduler": {"type": "OneCycle", "params": {"warmup_type": "linear"}}}, "scheduler.type"),
        (
            {"scheduler": {"type": "WarmupLR", "params": {"warmup_type": "linear", "warmup_min_lr": 1e-6}}},
            "scheduler.params.warmup_min_lr",
        ),  # fmt: skip
        ({"gradient_clipping": -1}, "gradient_clipping"),
        ({"activation_checkpointing": {}}, "activation_checkpointing"),
    ],
)
def test_ds_config_refusals_name_the_key(ds, key):
    with pytest.raises(DsConfigError) as ei:
        read_ds_config(ds)
    assert ei.value.key == key and f"ds_config.{key}" in str(ei.value)


def test_training_config_is_read_as_the_reference_reads_it():
    from arctic_platform.ds_config import DsConfigError, read_training_config

    tc = {
        "optimizer": {"lr": 2e-5, "beta1": 0.8, "beta2": 0.95, "gradient_clipping": 0.5},
        "lr_scheduler": {"type": "cosine", "warmup_ratio": 0.1, "min_lr_ratio": 0.2},
        "training_horizon": 40,
        "gradient_accumulation_steps": 2,
    }
    got = read_training_config(tc)
    assert got == {
        "lr": 2e-5,
        "betas": (0.8, 0.95),
        "eps": 1e-8,
        "weight_decay": 0.0,  # the reference's default with training_config
        "grad_clip": 0.5,
        "lr_scheduler_type": "cosine",
        "warmup_steps": 4,
        "warmup_steps_ratio": 0.0,
        "total_steps": 40,
        "min_lr_ratio": 0.2,
        "num_cycles": 0.5,
        "zero_indexed_step": True,
        "init_lr_ratio": 0.0,
    }
    # no horizon: the reference keeps a constant rate
    assert "lr_scheduler_type" not in read_training_config({"lr_scheduler": {"type": "cosine"}})
    for bad, key in (
        ({"lr": 1}, "training_config.lr"),
        ({"optimizer": {"amsgrad": True}}, "training_config.optimizer.amsgrad"),
        ({"lr_scheduler": {"type": "linear"}, "training_horizon": 3}, "training_config.lr_scheduler.type"),
        ({"optimizer": {"lr": -1}}, "training_config.optimizer.lr"),
    ):
        with pytest.raises(DsConfigError, match=key.replace(".", r"\.")):
            read_training_config(bad)


_COSINE_KEY_ON_WARMUP_LR = {"type": "WarmupLR", "params": {"warmup_type": "linear", "total_num_steps": 9}}


@pytest.mark.parametrize(
    "body, path, status",
    [
        ({"ds_config": {"optimizer": {"params": {"foo": 1}}}}, "ds_config.optimizer.params.foo", 422),
        ({"ds_config": {"scheduler": _COSINE_KEY_ON_WARMUP_LR}}, "ds_config.scheduler.params.total_num_steps", 422),
        ({"job_type": "log_prob", "log_prob_config": {"bf16": {"enabled": 2}}}, "log_prob_config.bf16.enabled", 422),
        ({"training_config": {"lr_scheduler": {"warmup": 1}}}, "training_config.lr_scheduler.warmup", 422),
        ({"ds_worker_config": {"bar": True}}, "ds_worker_config.bar", 422),
        ({"extensions": {"baz": 1}}, "extensions.baz", 422),
        ({"extensions": {"lr_schedule": {"zero_indexed_step": 1}}}, "extensions.lr_schedule.zero_indexed_step", 422),
        ({"extensions": {"lora": {"rank": 2.5}}}, "extensions.lora.rank", 422),
        ({"job_type": "critic"}, "job_type", 400),
    ],
    ids=["ds-param", "param-of-other-scheduler", "log-prob-config", "training-config", "worker", "extension",
         "lr-schedule", "lora", "job-type"],
)  # fmt: skip
def test_job_config_sections_refuse_a_key_by_its_full_path(body, path, status):
    with pytest.raises(ValidationError) as ei:
        JobConfig.model_validate(body)
    got_path, reason, got_status = first_error(ei.value)
    assert (got_path, got_status) == (path, status) and reason.split()[0].rstrip(":") == path, reason


def test_job_type_is_a_literal_refused_with_the_types():
    assert DestroyRequest.model_validate({"job_type": "log_prob"}).job_type == "log_prob"
    for model in (JobConfig, DestroyRequest):
        with pytest.raises(ValidationError) as ei:
            model.model_validate({"job_type": "critic"})
        _, reason, status = first_error(ei.value)
        assert status == 400 and "unknown job_type" in reason and all(repr(t) in reason for t in JOB_TYPES), reason


def test_client_bodies_read_into_the_typed_sections_without_loss(tmp_path):
    """Every key the client sends is a typed field: dumping the parsed body gives the body back."""
    from arctic_platform.client import ArcticRLClientConfig

    lr_schedule = {"lr_scheduler_type": "cosine", "lr_warmup_steps": 2, "total_training_steps": 10,
                   "min_lr_ratio": 0.0, "num_cycles": 0.5, "zero_indexed_step": False}  # fmt: skip
    c = ArcticRLClientConfig(
        model_name="m",
        training={
            "checkpoint_path": str(tmp_path),
            "micro_batch_size": 2,
            "train_batch_size": 4,
            "deepspeed": {"zero_optimization": {"stage": 3}, "log_level": "INFO"},
            "ds_worker_config": {
                "attn_implementation": "eager",
                "use_liger": False,
                "enable_gradient_checkpointing": True,
            },
            "lr_schedule": lr_schedule,
            "lora": {"rank": 4, "alpha": 8, "target_modules": ["q_proj"], "exclude_modules": None},
        },
        sampling={"arctic_inference_config": {"zorro_inference": {"enable": False}}},
    )
    for job_type in JOB_TYPES:
        body = c.job_config(job_type)
        cfg = JobConfig.model_validate(body)
        assert cfg.model_dump(mode="json", exclude_unset=True) == body, job_type
    cfg = JobConfig.model_validate(c.job_config("training"))
    assert cfg.ds_worker_config.enable_gradient_checkpointing is True and cfg.extensions.lora.rank == 4
    assert cfg.ds_config.scheduler.type == "WarmupCosineLR" and cfg.ds_config.scheduler.params.total_num_steps == 10
