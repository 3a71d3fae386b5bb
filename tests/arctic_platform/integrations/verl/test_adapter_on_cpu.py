# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The arctic adapter's config mapping and its fail-loud start-up guards (no server needed: they fire first)."""

import pytest

from arctic_platform.integrations.verl.adapter import (
    ArcticConfigError,
    arctic_options,
    build_client_config,
    check_config,
    validate_arctic_config,
)
from arctic_platform.protocol import JobConfig
from verl.trainer.ppo.v1 import PPOTrainerRemoteBackend


@pytest.mark.parametrize(
    "overrides, setting",
    [
        pytest.param(
            ["remote_backend.arctic.backend.type=cortex", "actor_rollout_ref.actor.use_kl_loss=true"],
            "actor_rollout_ref.actor.use_kl_loss",
            id="no-forward-kl-loss",
        ),
        pytest.param(
            ["remote_backend.arctic.backend.type=cortex", "algorithm.use_kl_in_reward=true"],
            "algorithm.use_kl_in_reward",
            id="no-forward-kl-in-reward",
        ),
        pytest.param(
            ["remote_backend.arctic.backend.type=cortex", "actor_rollout_ref.actor.ppo_epochs=2"],
            "actor_rollout_ref.actor.ppo_epochs=2: Snowflake Cortex has no /forward",
            id="no-forward-epochs",
        ),
        pytest.param(
            ["remote_backend.arctic.backend.type=cortex", "trainer.save_freq=5"],
            "shared_filesystem is false",
            id="save-without-shared-disk",
        ),
        pytest.param(
            ["remote_backend.arctic.log_prob_gpus=0", "actor_rollout_ref.actor.use_kl_loss=true"],
            "remote_backend.arctic.log_prob_gpus=0",
            id="kl-without-reference-job",
        ),
        pytest.param(
            ["remote_backend.arctic.backend.type=ray"],
            "backend.type='ray': the arctic backend needs 'local', 'onprem' or 'cortex'",
            id="ray",
        ),
        pytest.param(
            ["remote_backend.arctic.backend.type=onprem"],
            "needs the server's address, remote_backend.arctic.backend.url",
            id="url",
        ),
        pytest.param(["actor_rollout_ref.rollout.name=vllm"], "actor_rollout_ref.rollout.name=arctic", id="rollout"),
        pytest.param(
            ["actor_rollout_ref.actor.policy_loss.loss_mode=nope"], "policy_loss.loss_mode='nope'", id="loss-mode"
        ),
        pytest.param(  # the embedded server (local) learns the horizon from /step; another server cannot
            [
                "remote_backend.arctic.backend.type=onprem",
                "remote_backend.arctic.backend.url=http://127.0.0.1:9",
                "actor_rollout_ref.actor.optim.lr_scheduler_type=cosine",
            ],
            "the cosine would have no horizon; set trainer.total_training_steps",
            id="cosine",
        ),
        pytest.param(
            ["actor_rollout_ref.model.lora_rank=0", "actor_rollout_ref.model.lora.rank=8"],
            "lora_rank",
            id="megatron-lora",
        ),
        pytest.param(
            ["actor_rollout_ref.model.lora_rank=8", "actor_rollout_ref.model.lora_adapter_path=/x"],
            "lora_adapter_path",
            id="lora-adapter-path",
        ),
    ],
)
def test_fail_loud_guards_name_the_setting(compose_arctic, overrides, setting):
    """The start-up checks before any job: the options, then the settings against the backend's static profile
    (what compose_check runs; from_config checks the live /health profile the same way)."""
    cfg = compose_arctic(overrides)
    with pytest.raises(ArcticConfigError) as exc:
        check_config(cfg)
    assert setting in str(exc.value)


@pytest.mark.parametrize(
    "overrides, message",
    [
        pytest.param(["algorithm.adv_estimator=gae"], "PPOTrainerRemoteBackend runs no critic", id="gae"),
        pytest.param(
            ["actor_rollout_ref.rollout.tensor_model_parallel_size=2"],
            r"tensor_model_parallel_size=2: the embedded arctic-verl server's torch sampling loop runs on one device",
            id="rollout-tp-on-the-torch-loop",
        ),
    ],
)
def test_trainer_rejects_before_any_server_starts(compose_arctic, overrides, message, tiny_model):
    cfg = compose_arctic([f"actor_rollout_ref.model.path={tiny_model}", *overrides])
    with pytest.raises(ValueError, match=message):
        PPOTrainerRemoteBackend(cfg)


def test_client_config_mapping(compose_arctic, tiny_model, tmp_path):
    cfg = compose_arctic(
        [
            f"actor_rollout_ref.model.path={tiny_model}",
            "actor_rollout_ref.actor.optim.lr=0.003",
            "actor_rollout_ref.actor.optim.weight_decay=0.1",
            "actor_rollout_ref.actor.optim.clip_grad=0.5",
            "actor_rollout_ref.actor.optim.lr_warmup_steps=2",
            "actor_rollout_ref.actor.optim.lr_scheduler_type=cosine",
            "actor_rollout_ref.actor.ppo_epochs=2",
            "data.train_batch_size=4",  # 2 mini-batches of 2 x 2 epochs = 4 optimizer steps per training step
            "trainer.total_training_steps=10",
            "actor_rollout_ref.rollout.seed=7",
            f"trainer.default_local_dir={tmp_path}/ckpt",
        ]
    )
    c = build_client_config(cfg, validate_arctic_config(cfg))
    assert c.model_name == str(tiny_model)
    assert c.max_seq_len == 16 + 8
    assert c.seed == 7
    assert c.training.optimizer.lr == 0.003 and c.training.optimizer.weight_decay == 0.1
    assert c.training.optimizer.grad_clip == 0.5
    # verl's schedule, typed, in verl's units (training steps; one tick per update_actor) ...
    assert c.training.lr_schedule.model_dump(exclude_defaults=True) == {
        "lr_scheduler_type": "cosine",
        "lr_warmup_steps": 2,
        "lr_warmup_steps_ratio": 0.0,
        "total_training_steps": 10,
        "min_lr_ratio": 0.0,
        "num_cycles": 0.5,
    }
    assert c.job_config("training")["extensions"]["lr_schedule"] == c.training.lr_schedule.model_dump(
        exclude_defaults=True
    )
    # ... and derived from it for a DeepSpeed server that ticks per optimizer step: 4 per training step
    assert c.training.optimizer_steps_per_tick == 4
    params = c.training_ds_config()["scheduler"]["params"]
    assert (params["warmup_num_steps"], params["total_num_steps"]) == (2 * 4, 10 * 4)
    assert c.training.lora is None
    assert c.training.checkpoint_path == f"{tmp_path}/ckpt"
    assert c.backend.type == "local"
    assert c.sampling.arctic_inference_config is None


def test_zorro_inference_reaches_vllm_config_and_arctic_inference_config(compose_arctic, tiny_model):
    cfg = compose_arctic(
        [f"actor_rollout_ref.model.path={tiny_model}", "remote_backend.arctic.rollout.zorro_inference.enable=true"]
    )
    c = build_client_config(cfg, validate_arctic_config(cfg))
    assert c.sampling.arctic_inference_config == {
        "zorro_inference": {"enable": True},
        "speculative_decoding": {"model": ""},
    }
    # ... and the /initialize body carries them where a reference server reads them: vllm_config (vLLM engine args,
    # through ArcticInference's ModelConfig) and arctic_inference_config (-> use_fca)
    body = c.job_config("sampling")
    assert body["vllm_config"]["compilation_config"]["cudagraph_mode"] == "PIECEWISE"
    assert body["vllm_config"]["forest_cascade_attn_configs"] == "{}"
    assert body["arctic_inference_config"]["zorro_inference"] == {"enable": True}
    assert set(body) <= set(JobConfig.model_fields)


def test_zorro_with_explicit_full_graph_mode_is_refused(compose_arctic, tiny_model):
    cfg = compose_arctic(
        [
            f"actor_rollout_ref.model.path={tiny_model}",
            "remote_backend.arctic.rollout.zorro_inference.enable=true",
            "+remote_backend.arctic.sampling.engine_kwargs.compilation_config.cudagraph_mode=FULL_AND_PIECEWISE",
        ]
    )
    with pytest.raises(ValueError, match="FULL_AND_PIECEWISE"):
        build_client_config(cfg, validate_arctic_config(cfg))


def test_options_default_without_the_group(compose_arctic):
    from omegaconf import open_dict

    cfg = compose_arctic(hook=True)
    with open_dict(cfg):
        del cfg["remote_backend"]
    assert arctic_options(cfg).backend.type == "local"


def test_lora_and_late_horizon_mapping(compose_arctic, tiny_model):
    cfg = compose_arctic(
        [
            f"actor_rollout_ref.model.path={tiny_model}",
            "actor_rollout_ref.model.lora_rank=8",
            "actor_rollout_ref.model.lora_alpha=32",
            "actor_rollout_ref.model.target_modules=[q_proj,v_proj]",
            "actor_rollout_ref.actor.optim.lr_scheduler_type=cosine",
            "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=0.1",
        ]
    )
    c = build_client_config(cfg, validate_arctic_config(cfg))
    body = c.job_config("training")
    assert body["extensions"]["lora"] == {
        "rank": 8,
        "alpha": 32,
        "target_modules": ["q_proj", "v_proj"],
        "exclude_modules": None,
        "target_parameters": None,
    }
    # no trainer.total_training_steps: the horizon is unknown until verl counted its dataloader
    assert body["extensions"]["lr_schedule"].get("total_training_steps") is None
    assert "scheduler" not in body["ds_config"]  # a DeepSpeed server could not express it; the extension can


@pytest.mark.parametrize(
    "device, backend, sent",
    [
        ("cpu", [], False),
        ("cuda", [], True),
        (
            "auto",
            ["remote_backend.arctic.backend.type=onprem", "remote_backend.arctic.backend.url=http://127.0.0.1:9"],
            True,
        ),
    ],
    ids=["cpu", "cuda", "remote-auto"],
)
def test_chunked_prefill_is_not_sent_to_a_cpu_sampler(compose_arctic, tiny_model, caplog, device, backend, sent):
    """verl's rollout.enable_chunked_prefill (default true) would make the embedded server's CPU vLLM engine refuse
    the job (vLLM 0.31's CPU worker dies on a split seeded prefill): the plugin leaves it out for a sampler it knows
    runs on CPU, says so in the log, and still sends the user's explicit engine_kwargs (which the server refuses)."""
    base = [f"actor_rollout_ref.model.path={tiny_model}", f"remote_backend.arctic.device={device}", *backend]
    cfg = compose_arctic(base)
    assert cfg.actor_rollout_ref.rollout.enable_chunked_prefill is True  # verl's default
    with caplog.at_level("INFO", logger="arctic_platform.integrations.verl.adapter"):
        body = build_client_config(cfg, validate_arctic_config(cfg)).job_config("sampling")
    assert ("enable_chunked_prefill" in body["vllm_config"]) is sent
    assert ("rollout.enable_chunked_prefill is not sent to a CPU sampler" in caplog.text) is not sent
    explicit = compose_arctic([*base, "+remote_backend.arctic.sampling.engine_kwargs.enable_chunked_prefill=true"])
    body = build_client_config(explicit, validate_arctic_config(explicit)).job_config("sampling")
    assert body["vllm_config"]["enable_chunked_prefill"] is True


def test_sampler_on_cpu_follows_the_servers_auto_rule():
    import torch

    from arctic_platform.integrations.verl.adapter import sampler_on_cpu

    assert sampler_on_cpu("cpu", local=True) and sampler_on_cpu("cpu", local=False)
    assert not sampler_on_cpu("cuda", local=True) and not sampler_on_cpu("cuda:1", local=True)
    assert not sampler_on_cpu("auto", local=False)  # a remote server's auto is its own choice
    assert sampler_on_cpu("auto", local=True) is (not torch.cuda.is_available())
