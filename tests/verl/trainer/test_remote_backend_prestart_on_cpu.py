# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Patch 0019: main_ppo calls the backend's ``prestart`` after its start-up check and before Ray starts."""

import os
import subprocess
import sys

from omegaconf import OmegaConf

PRESTARTING_PLUGIN = """
import json, os, sys
from verl.remote_backend import RemoteBackend, RemoteBackendRegistry

MARKER = os.environ["PRESTART_MARKER"]


@RemoteBackendRegistry.register("dummy")
class Prestarting(RemoteBackend):
    @classmethod
    def check_config(cls, main_config):
        with open(MARKER, "a") as f:
            f.write("check\\n")

    @classmethod
    def prestart(cls, main_config):
        ray = sys.modules.get("ray")
        with open(MARKER, "a") as f:
            f.write(json.dumps({"ray_initialized": bool(ray is not None and ray.is_initialized()),
                                "lr": main_config.remote_backend.dummy.lr}) + "\\n")
        raise ValueError("dummy prestart stops the run here")

    @classmethod
    def from_config(cls, main_config, *, handle=None):
        raise AssertionError("from_config must not run: prestart stopped the run")

    reconnect_handle = destroy = update_weights = save_checkpoint = requires_single_forwarder = None
"""


def test_main_calls_prestart_after_the_check_and_before_ray(plugin_conf_dir, tmp_path):
    (tmp_path / "prestarting_plugin.py").write_text(PRESTARTING_PLUGIN)
    marker = tmp_path / "marker"
    env = {
        **os.environ,
        "HYDRA_FULL_ERROR": "1",
        "VERL_USE_EXTERNAL_PLUGINS": "none",
        "PYTHONPATH": str(tmp_path),
        "VERL_USE_EXTERNAL_MODULES": "prestarting_plugin",
        "PRESTART_MARKER": str(marker),
    }
    args = [
        f"hydra.searchpath=[file://{plugin_conf_dir}]",
        "remote_backend=dummy",
        "algorithm.adv_estimator=grpo",
        "actor_rollout_ref.rollout.n=2",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1",
    ]  # verl's own validate_config passes, so main reaches the backend's prestart
    r = subprocess.run(
        [sys.executable, "-m", "verl.trainer.main_ppo", f"hydra.run.dir={tmp_path / 'hydra'}", *args],
        capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode != 0
    assert "dummy prestart stops the run here" in r.stderr, r.stderr[-3000:]
    assert "ray init kwargs" not in r.stdout  # stopped before Ray started
    lines = marker.read_text().splitlines()
    assert lines[0] == "check"  # the start-up check first
    assert lines[1:] == ['{"ray_initialized": false, "lr": 0.5}']  # then prestart, once, with the run's config


def test_the_default_prestart_starts_nothing():
    from verl.remote_backend import RemoteBackend

    class Plain(RemoteBackend):
        @classmethod
        def from_config(cls, main_config, *, handle=None):
            raise AssertionError

        reconnect_handle = destroy = update_weights = save_checkpoint = requires_single_forwarder = None

    assert Plain.prestart(OmegaConf.create({})) is None
