# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""``--log-prob-devices training``: the log_prob (reference) job runs sharded on the training job's devices, through
a real server on 127.0.0.1 (two gloo ranks per job on CPU).

* the log_prob job is placed on the training job's devices and runs the sharded engine; its reference log-probs
  equal the training job's own ``/forward`` (same weights before any step), and after a step and a weight sync into
  it they follow the trainer again;
* a log_prob count other than training's is refused when the server starts, naming the fix;
* the client refuses the placement for a remote server, and a count other than training's, when it is configured.
"""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest
import torch

from arctic_platform import wire
from arctic_platform.client.config import ArcticRLClientConfig

from .jobwait import wait_running

OCTET = {"Content-Type": "application/octet-stream"}


def _logprobs(http, job_id: int, seq: torch.Tensor, plen: int) -> torch.Tensor:
    body = {"batch": {"input_ids": seq, "attention_mask": torch.ones_like(seq), "prompts": seq[:, :plen]},
            "meta": {"temperature": 1.0, "max_prompt_len": plen}}  # fmt: skip
    r = http.post("/forward", params={"job_id": job_id}, content=wire.encode(body), headers=OCTET)
    assert r.status_code == 200, r.text
    return wire.decode(r.content)["batch"]["logprobs"]


def test_the_reference_runs_sharded_on_the_training_devices(tiny_model_dir, tmp_path, serve_server):
    args = ("--model", str(tiny_model_dir), "--max-seq-len", "64", "--sampling-gpus", "0", "--training-gpus", "2")
    args += ("--log-prob-gpus", "2", "--log-prob-devices", "training", "--sampling-engine", "torch")
    with serve_server(tmp_path, *args, timeout=120) as s, httpx.Client(base_url=s.url, timeout=600) as http:
        ids = {}
        for jt in ("log_prob", "training"):
            body = {"job_type": jt, "checkpoint_path": str(tmp_path / "ckpt"), "seed": 3}
            if jt == "training":
                body["ds_config"] = {"optimizer": {"type": "AdamW", "params": {"lr": 0.05}}}
            r = http.post("/initialize", json=body)
            assert r.status_code == 200, r.text
            ids[jt] = r.json()["job_id"]
        lp, tr = wait_running(http, ids["log_prob"]), wait_running(http, ids["training"])
        assert lp["devices"] == tr["devices"] == ["cpu", "cpu"] and lp["engine"] == tr["engine"] == "fsdp"
        seq = torch.tensor([[5, 6, 7, 8, 9, 10, 11, 12]])
        before = _logprobs(http, ids["log_prob"], seq, 4)
        assert torch.allclose(before, _logprobs(http, ids["training"], seq, 4), atol=1e-6)
        ids_t = torch.tensor([[0, 0, 5, 6, 7, 8, 9, 0], [1, 2, 3, 4, 10, 11, 0, 0]])
        mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 0, 0]])
        batch = {"input_ids": ids_t, "attention_mask": mask, "prompts": ids_t[:, :4], "responses": ids_t[:, 4:],
                 "response_mask": mask[:, 4:], "old_log_probs": torch.full((2, 4), -5.7),
                 "advantages": torch.tensor([[1.0] * 4, [-1.0] * 4])}  # fmt: skip
        meta = {"actor_config": {"loss_agg_mode": "token-mean"}, "temperature": 1.0, "max_prompt_len": 4}
        r = http.post("/forward-backward", params={"job_id": ids["training"]},
                      content=wire.encode({"batch": batch, "meta": meta}), headers=OCTET)  # fmt: skip
        assert r.status_code == 200, r.text
        assert http.post("/step", params={"job_id": ids["training"]}, json={}).status_code == 200
        trained = _logprobs(http, ids["training"], seq, 4)
        assert (trained - before).abs().max() > 1e-3  # the step moved the policy; the reference stayed
        assert torch.equal(_logprobs(http, ids["log_prob"], seq, 4), before)
        ws = http.post("/weight-sync", params={"job_id": ids["training"]},
                       json={"target_sub_job_ids": [ids["log_prob"]]})  # fmt: skip
        assert ws.status_code == 200, ws.text
        assert torch.allclose(_logprobs(http, ids["log_prob"], seq, 4), trained, atol=1e-6)


def test_a_log_prob_count_other_than_trainings_is_refused_at_start(tiny_model_dir, tmp_path):
    cmd = [sys.executable, "-m", "arctic_platform.server", "--port", "0", "--model", str(tiny_model_dir)]
    cmd += ["--training-gpus", "2", "--log-prob-gpus", "1", "--log-prob-devices", "training"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "runs the log_prob job on the training job's 2 device(s), but it asks for 1" in r.stderr
    assert "set --log-prob-gpus 2 (remote_backend.arctic.log_prob_gpus=2), or --log-prob-devices own" in r.stderr


def test_the_client_refuses_the_placement_it_cannot_ask_for():
    base = {"model_name": "m", "training_gpus": 2, "log_prob_devices": "training"}
    assert ArcticRLClientConfig(**base, log_prob_gpus=2).log_prob_devices == "training"
    with pytest.raises(ValueError, match="set log_prob_gpus=2"):
        ArcticRLClientConfig(**base, log_prob_gpus=1)
    with pytest.raises(ValueError, match="the onprem backend places its own jobs: use log_prob_devices=own"):
        ArcticRLClientConfig(**base, log_prob_gpus=2, backend={"type": "onprem", "url": "http://x"})
