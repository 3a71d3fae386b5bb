# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The H200 launcher with ARCTIC_BACKEND=local asks the embedded server for one device per job, and refuses a
multi-GPU job with the same hint the server gives (arctic_platform.server.placement.ONE_DEVICE)."""

import os
import subprocess
import sys

import pytest

from arctic_platform.server.placement import ONE_DEVICE

CLI = os.path.join(os.path.dirname(sys.executable), "arctic-verl")


def launcher_path() -> str:
    return subprocess.run([CLI, "launcher", "gsm8k-h200"], capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.parametrize("var", ["TRAIN_GPUS", "SAMPLING_GPUS", "LOG_PROB_GPUS"])
def test_local_backend_refuses_a_multi_gpu_job(var, tmp_path):
    env = {**os.environ, "MODEL_PATH": str(tmp_path), "DATA_DIR": str(tmp_path), "EXTRA_ENV_CHECK": "0", var: "4"}
    env.pop("ARCTIC_BACKEND", None)
    r = subprocess.run(["bash", launcher_path(), "--dry-run"], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2
    assert f"{var}=4 with ARCTIC_BACKEND=local" in r.stderr and ONE_DEVICE in r.stderr


def test_launcher_help_says_what_local_and_onprem_give():
    text = open(launcher_path()).read()
    assert "training cuda:0, sampling cuda:1" in text and "4 training, 3 sampling, 1 reference" in text
    assert 'TRAIN_GPUS="${TRAIN_GPUS:-1}"' in text  # local default: one GPU per job
