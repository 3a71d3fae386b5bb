# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The H200 launcher with ARCTIC_BACKEND=local uses the whole node (its plan: integrations/verl/node_plan.py) and
refuses job sizes that do not fit it, before anything starts."""

import os
import subprocess
import sys

CLI = os.path.join(os.path.dirname(sys.executable), "arctic-verl")


def launcher_path() -> str:
    return subprocess.run([CLI, "launcher", "gsm8k-h200"], capture_output=True, text=True, check=True).stdout.strip()


def test_local_backend_refuses_jobs_that_do_not_fit_the_node(tiny_model_dir, tmp_path):
    env = {**os.environ, "MODEL_PATH": str(tiny_model_dir), "DATA_DIR": str(tmp_path), "EXTRA_ENV_CHECK": "0",
           "TRAIN_GPUS": "4", "SAMPLING_GPUS": "4", "LOG_PROB_GPUS": "1",
           "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"}  # fmt: skip
    env.pop("ARCTIC_BACKEND", None)
    r = subprocess.run(["bash", launcher_path(), "--dry-run"], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "node_plan: TRAIN_GPUS=4 + SAMPLING_GPUS=4 + LOG_PROB_GPUS=1 = 9 GPUs, but the node has 8 (GPUS)" in r.stderr


def test_launcher_help_says_how_local_splits_the_node():
    text = open(launcher_path()).read()
    assert "training and reference cuda:0-3, sampling cuda:4-7 (4 replicas)" in text
    assert "4 training, 3 sampling, 1 reference" in text
    assert "python3 -m arctic_platform.integrations.verl.node_plan" in text  # the split is computed, not a comment
