# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The full `arctic-verl smoke` (real `python -m verl.trainer.main_ppo`, V1 GRPO, remote_backend=arctic, embedded
server on CPU, vLLM sampling) with the training job sharded over two gloo ranks
(``remote_backend.arctic.training_gpus=2``: the server's FSDP2 engine, one process per rank): it must learn as the
one-rank smoke does (the launcher's own learning check, and the same assertions as
``test_smoke_on_cpu.py::test_full_smoke_learns``).
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SMOKE = shutil.which("arctic-verl", path=os.path.dirname(sys.executable))


@pytest.mark.slow
def test_full_smoke_learns_with_training_sharded_over_two_ranks(tmp_path):
    out = tmp_path / "smoke"
    r = subprocess.run(
        [SMOKE, "smoke", "--out", str(out), "--sampling-engine", "vllm", "remote_backend.arctic.training_gpus=2"],
        capture_output=True, text=True, timeout=1500, cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    server_log = (out / "arctic_server.log").read_text()
    assert "(training): sharded over 2 ranks on cpu x2 (engine ShardedTrainingEngine)" in server_log
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    n = len(rows)
    assert [row["step"] for row in rows] == list(range(1, n + 1)) and n >= 10
    rewards = [row["reward_mean"] for row in rows]
    assert sum(rewards[-5:]) / 5 - sum(rewards[:5]) / 5 >= 0.3
    assert [row["policy_version"] for row in rows] == list(range(n))
    final = [line for line in r.stdout.splitlines() if line.startswith(f"smoke: {n} steps, reward ")]
    assert final and f"policy_version {n}," in final[0]
    assert Path(out / "reward.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
