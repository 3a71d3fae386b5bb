# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""verl's rollout TP and the job sizes against the sampler and GPUs the backend has (integrations/verl/node.py):
refused in one line naming the setting, the backend and the way out where the sampler cannot honour them, honoured
where it can; main_ppo refuses before Ray starts."""

import os
import subprocess
import sys

import pytest

from arctic_platform.integrations.verl.adapter import arctic_options
from arctic_platform.integrations.verl.node import TP_KEY, SamplerView, node_refusals

EMBEDDED = "the embedded arctic-verl server"
TORCH = SamplerView(EMBEDDED, "torch")
VLLM_CPU = SamplerView(EMBEDDED, "vllm")
VLLM_NODE = SamplerView(EMBEDDED, "vllm", cuda=True, device_count=8)
REMOTE = SamplerView("the Arctic RL server at http://x", None)
SAMPLING = "remote_backend.arctic.sampling_gpus"


@pytest.fixture(scope="module")
def refusals(compose_arctic):
    def run(overrides, view):
        cfg = compose_arctic(overrides)
        out = node_refusals(cfg, arctic_options(cfg), view)
        for line in out:  # the house form: one line, the backend, a way out
            assert "\n" not in line and view.backend in line and "; set " in line, line
        return out

    return run


def test_rollout_tp_is_refused_where_the_sampler_cannot_honour_it(refusals):
    verl_default_tp = f"{TP_KEY}=2"  # verl's own default (rollout.yaml), which most of its scripts keep
    [torch] = refusals([verl_default_tp], TORCH)
    assert torch.startswith(f"{TP_KEY}=2: {EMBEDDED}'s torch sampling loop runs on one device")
    assert f"set {TP_KEY}=1, or install vLLM" in torch and torch.fix == (f"{TP_KEY}=1",)
    [vllm] = refusals([verl_default_tp], VLLM_CPU)  # sampling_gpus=1 cannot hold a replica of 2
    assert vllm.startswith(f"{TP_KEY}=2 with {SAMPLING}=1: {EMBEDDED} runs sampling_gpus / tensor_model_parallel_size")
    assert vllm.endswith(f"set {SAMPLING}=2 or {TP_KEY} to one of [1]")
    [three] = refusals([f"{TP_KEY}=2", f"{SAMPLING}=3"], VLLM_NODE)
    assert f"set {SAMPLING}=2 or {TP_KEY} to one of [1, 3]" in three
    # honoured: a vLLM sampler whose sampling GPUs TP divides (CPU workers or GPUs), or a server sizing its own
    assert refusals([f"{TP_KEY}=2", f"{SAMPLING}=2"], VLLM_CPU) == []
    assert refusals([f"{TP_KEY}=2", f"{SAMPLING}=4", "remote_backend.arctic.training_gpus=3"], VLLM_NODE) == []
    assert refusals([verl_default_tp], REMOTE) == []


def test_replicas_parallel_sizes_and_job_sizes(refusals):
    [replicas] = refusals([f"{SAMPLING}=2"], TORCH)
    assert replicas.startswith(f"{SAMPLING}=2: {EMBEDDED}'s torch sampling loop runs one replica")
    [dp] = refusals(["actor_rollout_ref.rollout.data_parallel_size=2"], VLLM_CPU)
    assert dp.startswith("actor_rollout_ref.rollout.data_parallel_size=2: ")
    assert dp.fix == ("actor_rollout_ref.rollout.data_parallel_size=1",)
    # verl asserts expert_parallel_size == TP x DP once it is above 1 (verl's veomni MoE script: DP 8, EP 8): the way
    # out keeps that true
    [moe] = refusals(
        ["actor_rollout_ref.rollout.data_parallel_size=8", "actor_rollout_ref.rollout.expert_parallel_size=8",
         f"{TP_KEY}=1"], VLLM_CPU,
    )  # fmt: skip
    assert moe.fix == (
        "actor_rollout_ref.rollout.data_parallel_size=1",
        "actor_rollout_ref.rollout.expert_parallel_size=1",
    )
    assert "and actor_rollout_ref.rollout.expert_parallel_size=1 (verl wants TP x DP)" in moe
    [sizes] = refusals(
        ["remote_backend.arctic.training_gpus=4", f"{SAMPLING}=4", "remote_backend.arctic.log_prob_gpus=1"], VLLM_NODE
    )
    assert "training_gpus=4 + remote_backend.arctic.sampling_gpus=4 + remote_backend.arctic.log_prob_gpus=1" in sizes
    assert sizes.endswith(
        "has 8 GPU(s); set them to add up to at most 8 (this node's default split: remote_backend.arctic."
        "training_gpus=4 remote_backend.arctic.sampling_gpus=3 remote_backend.arctic.log_prob_gpus=1)"
    )
    assert refusals(["trainer.n_gpus_per_node=8", f"{TP_KEY}=2"], REMOTE) == []  # a remote server sizes its own


def test_the_local_sampler_is_checked_only_against_the_embedded_servers_profile(compose_arctic):
    """A local-backend config checked against another profile (``compose_check --profile arctic-platform-main``, or
    an onprem server that did not answer) is checked as that server would run it: it sizes its own engines, so this
    node's sampler does not refuse verl's rollout TP there."""
    from arctic_platform.backend_profile import ARCTIC_PLATFORM_MAIN
    from arctic_platform.integrations.verl.adapter import settings_refusals
    from arctic_platform.server.capabilities import server_profile

    cfg = compose_arctic([f"{TP_KEY}=2"])
    embedded = [r for r in settings_refusals(cfg, arctic_options(cfg), server_profile()) if TP_KEY in r.setting]
    assert len(embedded) == 1 and embedded[0].backend.startswith(EMBEDDED), embedded
    ap_main = settings_refusals(cfg, arctic_options(cfg), ARCTIC_PLATFORM_MAIN)
    assert [r for r in ap_main if TP_KEY in r.setting] == [], [str(r) for r in ap_main]


def test_main_ppo_refuses_the_rollout_tp_before_ray_starts(arctic_overrides, tiny_model, tmp_path):
    """verl's default rollout TP (2) on the torch sampling loop: main_ppo stops before ray.init with one line."""
    overrides = [o for o in arctic_overrides if not o.startswith(TP_KEY)]  # verl's default TP
    args = [
        *overrides,
        f"actor_rollout_ref.model.path={tiny_model}",
        "remote_backend.arctic.backend.sampling_engine=torch",
        f"hydra.run.dir={tmp_path / 'hydra'}",
    ]
    env = {**os.environ, "HYDRA_FULL_ERROR": "1"}
    r = subprocess.run([sys.executable, "-m", "verl.trainer.main_ppo", *args], capture_output=True, text=True,
                       timeout=300, env=env, cwd=tmp_path)  # fmt: skip
    assert r.returncode != 0
    assert "ray init kwargs" not in r.stdout  # before Ray
    lines = [line for line in r.stderr.splitlines() if TP_KEY in line]
    assert lines and lines[-1].strip() == (
        f"- {TP_KEY}=2: {EMBEDDED}'s torch sampling loop runs on one device (no tensor parallelism); set {TP_KEY}=1, "
        "or install vLLM (pip install 'verl[cpu]') and leave remote_backend.arctic.backend.sampling_engine at auto"
    ), r.stderr[-3000:]


def test_the_launchers_plan_of_an_h200_node():
    """node_plan on Qwen3-8B's and Qwen3-14B's architectures (their configs' counts, as model_facts reads them on the
    meta device): the default split, the memory per GPU it prints (the sharded state with the gradients sharded too,
    two layers' gradients in flight before their reduce-scatter, two gathered layers), job sizes that leave too
    little per GPU, and a model whose layers alone fill a GPU."""
    from arctic_platform.integrations.verl.node_plan import GIB, H200_GIB, ModelFacts, PlanError, make_plan

    qwen3_8b = ModelFacts("Qwen3ForCausalLM", 8_190_735_360, 192_946_432, layers=36, kv_heads=8, head_dim=128)
    # the default: the reference sharded on the training GPUs (its bf16 shard counted there), 4 sampling GPUs
    shared = make_plan(qwen3_8b, gpus=8, gpu_bytes=H200_GIB * GIB, tp=1, utilization=0.5, seq_len=1536)
    assert shared.counts == {"training": 4, "sampling": 4, "log_prob": 4} and shared.log_prob_devices == "training"
    assert shared.devices["log_prob"] == shared.devices["training"] == ("cuda:0", "cuda:1", "cuda:2", "cuda:3")
    assert round(shared.log_prob_weights / GIB, 1) == 3.8 and round(shared.training_static / GIB, 1) == 36.5
    text = "\n".join(shared.lines(qwen3_8b, "H200", 1536, 0.5))
    assert "+ the reference's bf16 shard 3.8 GiB = 36.5 GiB per GPU" in text
    assert "log_prob  4 GPU(s) cuda:0-3 (the training GPUs: FSDP2 forward-only, sharded)" in text
    # given sizes with a reference GPU of its own keep it; the other way round is refused, naming the fix
    given = make_plan(qwen3_8b, gpus=8, gpu_bytes=H200_GIB * GIB, counts={"training": 4, "sampling": 3, "log_prob": 1})
    assert given.log_prob_devices == "own" and given.devices["log_prob"] == ("cuda:7",)
    with pytest.raises(PlanError, match="LOG_PROB_GPUS=1 with the reference on the training GPUs: it needs TRAIN"):
        make_plan(qwen3_8b, gpus=8, gpu_bytes=H200_GIB * GIB, reference_devices="training",
                  counts={"training": 4, "sampling": 3, "log_prob": 1})  # fmt: skip
    plan = make_plan(
        qwen3_8b, gpus=8, gpu_bytes=H200_GIB * GIB, tp=1, utilization=0.5, seq_len=1536, reference_devices="own"
    )
    assert plan.counts == {"training": 4, "sampling": 3, "log_prob": 1}
    assert round(plan.training_state / GIB, 1) == 30.5 and round(plan.sampling_weights / GIB, 1) == 15.3
    # gradients reduce-scattered on every micro-batch: only two layers' fp32 gradients are unsharded at a time (main
    # 7bf4344 kept the whole model's, 30.5 GiB on every training GPU, until the last micro-batch)
    assert round(plan.training_inflight / GIB, 1) == 1.4
    assert round(plan.training_static / GIB, 1) == 32.7  # + 2 gathered bf16 layers (0.7 GiB)
    assert "fp32 gradients of 2 layers in flight 1.4 GiB" in "\n".join(plan.lines(qwen3_8b, "H200", 1536, 0.5))
    assert plan.kv_tokens == int(plan.kv_cache // (2 * 36 * 8 * 128 * 2))  # K and V, bf16, per layer and KV head
    tp2 = make_plan(qwen3_8b, gpus=8, gpu_bytes=H200_GIB * GIB, tp=2)
    assert tp2.counts["sampling"] % 2 == 0 and tp2.counts["training"] + tp2.counts["sampling"] == 8
    # Qwen3-14B (hidden 5120, 40 layers, MLP 17408, 8 KV heads, untied 151,936 vocabulary) on one node: 4 training
    # GPUs at 58.7 GiB each (7bf4344 needed 16 training GPUs: its unsharded gradients were 55 GiB per GPU)
    layer = 5120 * 5120 * 2 + 5120 * 1024 * 2 + 3 * 5120 * 17408 + 2 * 5120 + 2 * 128
    qwen3_14b = ModelFacts("Qwen3ForCausalLM", 40 * layer + 151936 * 5120 * 2 + 5120, layer, 40, 8, 128)
    plan = make_plan(qwen3_14b, gpus=8, gpu_bytes=H200_GIB * GIB, reference_devices="own")
    assert plan.counts == {"training": 4, "sampling": 3, "log_prob": 1}
    assert round(plan.training_static / GIB, 1) == 58.7 and round(plan.sampling_weights / GIB, 1) == 27.5
    with pytest.raises(PlanError, match="give training at least 4 GPU"):
        make_plan(qwen3_14b, gpus=32, gpu_bytes=H200_GIB * GIB, counts={"training": 2, "sampling": 8, "log_prob": 1})
    huge = ModelFacts("Huge", 70_000_000_000, 8_000_000_000, layers=8, kv_heads=8, head_dim=128)
    with pytest.raises(PlanError, match=r"decoder layers' unsharded fp32 gradients \(59.6 GiB.*no number of training"):
        make_plan(huge, gpus=32, gpu_bytes=H200_GIB * GIB)


def test_the_reference_on_the_training_gpus_is_refused_where_it_cannot_be_honoured(refusals):
    """remote_backend.arctic.log_prob_devices=training: a remote server places its own jobs, and the reference then
    needs as many GPUs as training; both refused at start-up with the fix; honoured on the embedded server."""
    key, lp = "remote_backend.arctic.log_prob_devices", "remote_backend.arctic.log_prob_gpus"
    on = [f"{key}=training", "remote_backend.arctic.training_gpus=4", f"{SAMPLING}=4"]
    assert refusals([*on, f"{lp}=4"], VLLM_NODE) == []
    [count] = refusals([*on, f"{lp}=1"], VLLM_NODE)
    assert count.startswith(f"{key}=training, {lp}=1: {EMBEDDED} runs the reference sharded on the training job's 4")
    assert count.fix == (f"{lp}=4",)
    [remote] = refusals([*on, f"{lp}=4", "remote_backend.arctic.backend.type=onprem",
                         "remote_backend.arctic.backend.url=http://x"], REMOTE)  # fmt: skip
    assert remote.startswith(f"{key}=training: the Arctic RL server at http://x places its own jobs")
    assert remote.fix == (f"{key}=own",)
