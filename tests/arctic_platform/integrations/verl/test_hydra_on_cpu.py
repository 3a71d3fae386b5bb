# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""`remote_backend=arctic` composes with no hydra.searchpath and selects the remote-backend trainer."""

from omegaconf import OmegaConf

from verl.trainer.ppo.v1 import PPOTrainerRemoteBackend, get_trainer_cls


def test_compose_without_searchpath(compose_arctic):
    cfg = compose_arctic()
    assert cfg.trainer.remote_backend == "arctic"
    assert cfg.trainer.v1.trainer_mode == "remote_backend"
    assert get_trainer_cls(cfg.trainer.v1.trainer_mode) is PPOTrainerRemoteBackend
    arctic = cfg.remote_backend.arctic
    assert cfg.remote_backend.name == "arctic"
    assert arctic.backend.type == "local" and arctic.backend.url is None and arctic.backend.token_env_var is None
    assert arctic.model_path is None  # defaults to actor_rollout_ref.model.path
    assert arctic.device == "auto"
    assert set(arctic.timeouts) == {"job_ready", "request", "connect"}
    assert arctic.rollout.zorro_inference.enable is False
    assert OmegaConf.select(cfg, "remote_backend.arctic.sampling.max_tokens") is None


def test_group_options_are_overridable(compose_arctic):
    cfg = compose_arctic(
        [
            "remote_backend.arctic.backend.type=onprem",
            "remote_backend.arctic.backend.url=http://127.0.0.1:7000",
            "remote_backend.arctic.backend.token_env_var=ARCTIC_TOKEN",
            "remote_backend.arctic.rollout.zorro_inference.enable=true",
        ]
    )
    assert cfg.remote_backend.arctic.backend.url == "http://127.0.0.1:7000"
    assert cfg.remote_backend.arctic.rollout.zorro_inference.enable is True
