# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The remote_backend Hydra group, the choice hook and the main() guard (patches 0004-0006).

Covers the behaviours of upstream PR #7102's tests/remote_backend/test_hydra_choice_hook_on_cpu.py (no choice,
choice, choice + explicit colocate_async) on the installed wheel's config, plus arctic-verl's fixes.
"""

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

import verl.trainer.main_ppo as main_ppo


def _fake_hydra(monkeypatch, choices):
    runtime = SimpleNamespace(choices=choices)
    monkeypatch.setattr(main_ppo, "HydraConfig", SimpleNamespace(get=lambda: SimpleNamespace(runtime=runtime)))


def test_default_compose_has_no_backend(compose):
    cfg = compose(return_hydra_config=True)
    assert "remote_backend" not in cfg
    assert cfg.hydra.runtime.choices["remote_backend"] is None
    assert cfg.trainer.remote_backend is None
    assert cfg.trainer.v1.trainer_mode == "sync"


def test_plain_trainer_remote_backend_override_composes(compose):
    cfg = compose(["trainer.remote_backend=foo"])  # needed a '+' prefix with PR #7102's yaml alone
    assert cfg.trainer.remote_backend == "foo"


def test_choice_without_any_plugin_group_fails(verl_config_dir):
    """With no plugin contributing a remote_backend group (entry points off), the choice cannot compose."""
    code = (
        "from hydra import compose, initialize_config_dir\n"
        f"with initialize_config_dir(config_dir={verl_config_dir!r}, version_base=None):\n"
        "    compose('ppo_trainer', overrides=['remote_backend=dummy'])\n"
    )
    env = {**os.environ, "VERL_USE_EXTERNAL_PLUGINS": "none"}
    r = subprocess.run([sys.executable, "-c", "import verl\n" + code], capture_output=True, text=True, env=env)
    assert r.returncode != 0 and "Could not override 'remote_backend'" in r.stderr


def test_unknown_choice_is_caught_by_the_registry(compose, monkeypatch):
    """The group is optional, so an unknown option composes to nothing; the registry then names the problem."""
    from verl.remote_backend import RemoteBackendRegistry

    cfg = compose(["remote_backend=surely_not_installed"], return_hydra_config=True)
    assert "remote_backend" not in cfg
    assert cfg.hydra.runtime.choices["remote_backend"] == "surely_not_installed"
    with pytest.raises(KeyError, match="Unknown remote backend 'surely_not_installed'"):
        RemoteBackendRegistry.get("surely_not_installed")


def test_choice_loads_plugin_group(compose, plugin_conf_dir):
    cfg = compose([f"hydra.searchpath=[file://{plugin_conf_dir}]", "remote_backend=dummy"], return_hydra_config=True)
    assert cfg.hydra.runtime.choices["remote_backend"] == "dummy"
    assert cfg.remote_backend.name == "dummy" and cfg.remote_backend.dummy.lr == 0.5


def test_hook_without_choice_leaves_config_unchanged(compose, monkeypatch):
    cfg = compose()
    _fake_hydra(monkeypatch, {"remote_backend": None})
    before = OmegaConf.to_yaml(cfg)
    main_ppo._resolve_remote_backend_from_hydra_choice(cfg)
    assert cfg.trainer.v1.trainer_mode == "sync"
    assert cfg.trainer.get("remote_backend") in (None, "")
    assert OmegaConf.to_yaml(cfg) == before


def test_hook_without_hydra_is_a_noop(compose, monkeypatch):
    cfg = compose()

    def _raise():
        raise ValueError("HydraConfig was not set")

    monkeypatch.setattr(main_ppo, "HydraConfig", SimpleNamespace(get=_raise))
    main_ppo._resolve_remote_backend_from_hydra_choice(cfg)
    assert cfg.trainer.v1.trainer_mode == "sync"


def test_hook_with_choice_sets_name_and_mode(compose, monkeypatch):
    cfg = compose()
    _fake_hydra(monkeypatch, {"remote_backend": "dummy"})
    main_ppo._resolve_remote_backend_from_hydra_choice(cfg)
    assert cfg.trainer.remote_backend == "dummy"
    assert cfg.trainer.v1.trainer_mode == "remote_backend"


def test_hook_explicit_name_wins(compose, monkeypatch):
    cfg = compose(["trainer.remote_backend=explicit"])
    _fake_hydra(monkeypatch, {"remote_backend": "dummy"})
    main_ppo._resolve_remote_backend_from_hydra_choice(cfg)
    assert cfg.trainer.remote_backend == "explicit"


def test_hook_keeps_explicit_async_mode_and_warns(compose, monkeypatch, caplog):
    cfg = compose(["trainer.v1.trainer_mode=colocate_async"])
    _fake_hydra(monkeypatch, {"remote_backend": "dummy"})
    with caplog.at_level("WARNING", logger=main_ppo.logger.name):
        main_ppo._resolve_remote_backend_from_hydra_choice(cfg)
    assert cfg.trainer.remote_backend == "dummy"
    assert cfg.trainer.v1.trainer_mode == "colocate_async"
    assert any("remote_backend choice 'dummy' ignored:" in r.getMessage() for r in caplog.records)


def _run_main(args, run_dir, timeout=240, env=None):
    """main_ppo with its Hydra run directory (and cwd) under ``run_dir``, never an ``outputs/`` in the caller's cwd."""
    env = {**os.environ, "HYDRA_FULL_ERROR": "1", "VERL_USE_EXTERNAL_PLUGINS": "none", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "verl.trainer.main_ppo", f"hydra.run.dir={run_dir / 'hydra'}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=run_dir,
    )


@pytest.mark.parametrize(
    "extra, line",
    [
        pytest.param(
            ["trainer.remote_backend=dummy"],
            "trainer.v1.trainer_mode=sync: remote_backend=dummy runs with trainer.v1.trainer_mode=remote_backend only",
            id="name-without-choice",
        ),
        pytest.param(
            ["remote_backend=dummy", "trainer.v1.trainer_mode=colocate_async"],
            "trainer.v1.trainer_mode=colocate_async: remote_backend=dummy runs with trainer.v1.trainer_mode="
            "remote_backend only (the stock colocate_async trainer would train on verl's own GPU workers",
            id="choice-with-async-mode",
        ),
        pytest.param(
            ["remote_backend=dummy", "trainer.use_v1=false"],
            "trainer.use_v1=False: remote_backend=dummy runs on verl's V1 trainer only",
            id="choice-with-v0",
        ),
    ],
)
def test_main_rejects_a_backend_the_stock_trainer_would_ignore(extra, line, plugin_conf_dir, tmp_path):
    """check_remote_backend_config, before Ray: one line naming the setting, the trainer and the way out."""
    r = _run_main([f"hydra.searchpath=[file://{plugin_conf_dir}]", *extra], tmp_path)
    assert r.returncode != 0
    assert (tmp_path / "hydra" / ".hydra" / "overrides.yaml").exists() and not (tmp_path / "outputs").exists()
    assert line in r.stderr, r.stderr[-3000:]
    assert "ray init kwargs" not in r.stdout  # failed before Ray started


CHECKING_PLUGIN = """
from verl.remote_backend import RemoteBackend, RemoteBackendRegistry


@RemoteBackendRegistry.register("dummy")
class Refusing(RemoteBackend):
    @classmethod
    def check_config(cls, main_config):
        raise ValueError(f"dummy check_config refuses lr={main_config.remote_backend.dummy.lr}")

    @classmethod
    def from_config(cls, main_config, *, handle=None):
        raise AssertionError("from_config must not run: check_config refused")

    reconnect_handle = destroy = update_weights = save_checkpoint = requires_single_forwarder = None
"""


def test_main_runs_the_backends_check_before_ray(plugin_conf_dir, tmp_path):
    """main_ppo calls the registered backend's check_config (0006) after the choice hook and before ray.init."""
    (tmp_path / "refusing_plugin.py").write_text(CHECKING_PLUGIN)
    env = {"PYTHONPATH": str(tmp_path), "VERL_USE_EXTERNAL_MODULES": "refusing_plugin"}
    args = [f"hydra.searchpath=[file://{plugin_conf_dir}]", "remote_backend=dummy", "algorithm.adv_estimator=grpo"]
    r = _run_main(args, tmp_path, env=env)
    assert r.returncode != 0
    assert "dummy check_config refuses lr=0.5" in r.stderr, r.stderr[-3000:]
    assert "ray init kwargs" not in r.stdout  # refused before Ray started
