# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Fixtures for the arctic verl plugin: a tiny model, verl's real config with remote_backend=arctic, a real
embedded Arctic RL server started by the plugin's own adapter, and a real CPU-only Ray worker group."""

from pathlib import Path

import pytest

ARCTIC = [
    "remote_backend=arctic",
    "actor_rollout_ref.rollout.name=arctic",
    "algorithm.adv_estimator=grpo",
    "data.train_batch_size=2",
    "data.max_prompt_length=16",
    "data.max_response_length=8",
    "actor_rollout_ref.actor.ppo_mini_batch_size=2",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.rollout.n=2",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    "actor_rollout_ref.actor.optim.lr=0.01",
    "trainer.n_gpus_per_node=1",
    "trainer.nnodes=1",
    "trainer.save_freq=-1",
    "trainer.resume_mode=disable",
]


@pytest.fixture(scope="session")
def arctic_overrides() -> list[str]:
    """The Hydra overrides every arctic test config starts from."""
    return list(ARCTIC)


@pytest.fixture(scope="session")
def tiny_model(tiny_model_dir) -> Path:
    return tiny_model_dir


@pytest.fixture(scope="session")
def compose_arctic():
    """verl's ppo_trainer composed with remote_backend=arctic (no hydra.searchpath: the plugin registers it)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    import verl  # noqa: F401  (entry point: registers the arctic backend and its Hydra config path)
    import verl.trainer.main_ppo as main_ppo

    config_dir = str(Path(main_ppo.__file__).parent / "config")

    def _compose(overrides=(), hook=True):
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            cfg = compose("ppo_trainer", overrides=[*ARCTIC, *overrides], return_hydra_config=True)
            if hook:
                HydraConfig.instance().set_config(cfg)
                main_ppo._resolve_remote_backend_from_hydra_choice(cfg)
            with open_dict(cfg):
                del cfg["hydra"]
        return cfg

    return _compose


@pytest.fixture(scope="module")
def arctic_cfg(compose_arctic, tiny_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("arctic_run")
    return compose_arctic(
        [
            f"actor_rollout_ref.model.path={tiny_model}",
            f"trainer.default_local_dir={out / 'ckpt'}",
            f"remote_backend.arctic.backend.log_file={out / 'server.log'}",
        ]
    )


@pytest.fixture(scope="module")
def arctic_backend(arctic_cfg):
    """The plugin's own driver-side backend: starts the embedded server and creates the three jobs."""
    from arctic_platform.integrations.verl.adapter import ArcticRemoteBackend

    backend = ArcticRemoteBackend.from_config(arctic_cfg)
    yield backend
    backend.destroy()


@pytest.fixture(scope="module")
def forwarder(ray_cpu, arctic_cfg, arctic_backend):
    """The forwarder worker group exactly as PPOTrainerRemoteBackend builds it (CPU-only pool, one worker)."""
    from arctic_platform.integrations.verl.register import _load_worker
    from verl.single_controller.ray import RayClassWithInitArgs, RayWorkerGroup, ResourcePoolManager

    mgr = ResourcePoolManager(resource_pool_spec={"global_pool": [1]}, mapping={})
    mgr.set_pool_use_gpu("global_pool", False)
    mgr.create_resource_pool()
    cls = RayClassWithInitArgs(
        cls=ray_cpu.remote(_load_worker()),
        config=arctic_cfg.actor_rollout_ref,
        role="actor_rollout_ref",
        distillation_config=arctic_cfg.get("distillation"),
        main_config=arctic_cfg,
        backend_handle=arctic_backend.reconnect_handle(),
    )
    wg = RayWorkerGroup(resource_pool=mgr.resource_pool_dict["global_pool"], ray_cls_with_init=cls)
    wg.init_model()
    return wg


@pytest.fixture(scope="module")
def probe_server(tiny_model_dir, tmp_path_factory, serve_server):
    """One embedded server for a module's probes (its torch sampler: the probe's generate needs no vLLM start)."""
    work = tmp_path_factory.mktemp("probe")
    with serve_server(work, "--model", str(tiny_model_dir), "--sampling-engine", "torch") as srv:
        srv.work = work
        yield srv
