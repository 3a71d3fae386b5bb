# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Three GRPO training steps through stock verl's actor update and through the arctic backend: same loss per
mini-batch, same LR per step, same weights after the three steps.

**verl side.** verl 0.9.1 has no ``dp_actor`` any more; its actor update is the V1 engine worker
(``TrainingWorker.train_mini_batch`` -> ``BaseEngine.train_batch`` -> ``FSDPEngine.forward_backward_batch`` ->
``FSDPEngineWithLMHead.forward_step``). That engine cannot run on a CPU host: ``EngineRegistry`` registers it for
``cuda`` / ``npu`` only, and verl's platform layer falls back to CUDA on a machine without an accelerator
(``get_device_name() == "cuda"``), so every ``.to(get_device_id())`` fails. :func:`verl_update` therefore runs that
update loop on a plain HF module, step for step, calling verl's own function at every step that has one:
``tu.make_iterator`` (mini-batches), ``prepare_micro_batches`` (micro-batches, fixed or by token budget),
``build_optimizer`` + ``get_cosine_schedule_with_warmup`` (optimizer and LR schedule), the forward of
``forward_step`` without remove-padding (``build_attention_mask_from_nested``, ``logprobs_from_logits``,
``entropy_from_logits`` on the nested rows), ``verl.workers.utils.losses.ppo_loss`` (the loss, with the
``batch_num_tokens`` / ``dp_size`` the engine assigns), clipping and the ``update_lr_scheduler`` rule of
``train_mini_batch`` (one tick, on the last mini-batch), and verl's ``Metric`` reduction. The glue between them is
transcribed from those methods.

**arctic side.** The real forwarder worker (``ArcticV1ActorRolloutRefWorker``, in process) drives the real client
against a real embedded server over HTTP, whose jobs the plugin's own adapter created. Between cases the training
job is reset from a checkpoint taken before the first step.

Both sides run in float64: then the only differences are the two layouts' summation orders (~1e-16 relative) and
Adam's ``eps`` (1e-8) swamps any gradient that is float noise, so a tolerance of 1e-7 relative per tensor holds at
any thread count (in float32, noise-sized gradients of structurally-zero entries flip the sign of Adam's step).
"""

from __future__ import annotations

import asyncio
import copy

import pytest
import torch
from omegaconf import OmegaConf, open_dict

import verl.utils.tensordict_utils as tu

from .batches import nested

P, R = 16, 8  # data.max_prompt_length / max_response_length of the conftest config
ROWS, MINI, MICRO, STEPS = 8, 4, 2, 3  # 2 mini-batches of 2 micro-batches per training step, 3 steps
LR = 0.02
# (loss_mode, loss_agg_mode, extra actor settings): vanilla and gspo, one agg mode of each family; the dynamic case
# cuts micro-batches by a token budget, which with loss_scale_factor=null also moves -norm's divisor
CASES = {
    "vanilla-token-mean": ("vanilla", "token-mean", {}),
    "vanilla-token-sum-entropy": ("vanilla", "token-sum", {"entropy_coeff": 0.01}),
    "vanilla-seq-mean-token-sum-norm": ("vanilla", "seq-mean-token-sum-norm", {}),
    "gspo-seq-mean-token-mean": ("gspo", "seq-mean-token-mean", {"clip_ratio_low": 3e-4, "clip_ratio_high": 4e-4}),
    "vanilla-seq-mean-token-sum-dynamic": (
        "vanilla",
        "seq-mean-token-sum-norm",
        {"use_dynamic_bsz": True, "ppo_max_token_len_per_gpu": 40},
    ),
}


def _fixed_batch():
    """8 rows (4 prompts x n=2) of varied prompt (1..16) and response (1..8) lengths, one masked response token."""
    g = torch.Generator().manual_seed(20)
    plens = [16, 3, 9, 1, 12, 5, 7, 14]
    rlens = [8, 2, 5, 8, 1, 6, 3, 7]
    prompts = [torch.randint(5, 250, (n,), generator=g).tolist() for n in plens]
    responses = [torch.randint(5, 250, (n,), generator=g).tolist() for n in rlens]
    masks = [[1] * n for n in rlens]
    masks[0][2] = 0  # a token inside a response that does not count (e.g. a tool output)
    # GRPO-like: one advantage per row, of both signs; values exactly representable in float32, so the worker's
    # float32 batch and verl's float64 batch carry the same numbers
    adv = (torch.randn(ROWS, generator=g) + torch.tensor([0.5, -0.5] * (ROWS // 2))).float()
    old = [(-5.6 + 0.4 * torch.randn(n, generator=g)).float().tolist() for n in rlens]
    return {
        "prompts": prompts,
        "responses": responses,
        "response_mask": masks,
        "advantages": [[float(adv[i])] * n for i, n in enumerate(rlens)],
        "old_log_probs": old,
    }


def _v1_tensordict(b, *, calculate_entropy, dtype):
    """The batch as verl's V1 trainer hands it to update_actor (nested rows + the trainer's extra_info)."""
    from tensordict import TensorDict

    ids = [p + r for p, r in zip(b["prompts"], b["responses"], strict=True)]
    td = TensorDict(
        {
            "prompts": nested(b["prompts"], torch.int64),
            "responses": nested(b["responses"], torch.int64),
            "input_ids": nested(ids, torch.int64),
            "position_ids": nested([list(range(len(x))) for x in ids], torch.int64),
            "response_mask": nested(b["response_mask"], torch.int64),
            "loss_mask": nested(b["response_mask"], torch.int64),
            "advantages": nested(b["advantages"], dtype),
            "old_log_probs": nested(b["old_log_probs"], dtype),
        },
        batch_size=[ROWS],
    )
    tu.assign_non_tensor(
        td,
        calculate_entropy=calculate_entropy,
        global_batch_size=MINI,
        mini_batch_size=MINI,
        epochs=1,
        seed=42,
        dataloader_kwargs={"shuffle": False},
        temperature=1.0,
    )
    return td


def _forward(model, mb, temperature, calculate_entropy):
    """``FSDPEngineWithLMHead.prepare_model_inputs`` / ``prepare_model_outputs`` without remove-padding (NO_PADDING)."""
    from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits
    from verl.workers.utils.padding import build_attention_mask_from_nested

    input_ids, position_ids = mb["input_ids"], mb["position_ids"]
    bs = mb.batch_size[0]
    seq = input_ids.offsets().diff()
    width = int(seq.max())
    rolled = torch.roll(input_ids.values(), shifts=-1, dims=0)
    ids = torch.nested.to_padded_tensor(input_ids, padding=0, output_size=(bs, width))
    pos = torch.nested.to_padded_tensor(position_ids, padding=0, output_size=(bs, width))
    mask = build_attention_mask_from_nested(input_ids=input_ids, max_seq_len=width)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False).logits
    if temperature != 1.0:
        logits = logits / temperature
    cu = input_ids.offsets()
    starts = torch.zeros_like(seq)
    out = {}
    if calculate_entropy:
        ent = torch.nested.narrow(entropy_from_logits(logits), 1, starts, seq, layout=torch.jagged)
        out["entropy"] = torch.nested.nested_tensor_from_jagged(torch.cat(list(ent.unbind())), cu)
    rows = torch.nested.narrow(logits, 1, starts, seq, layout=torch.jagged)
    lp = logprobs_from_logits(logits=torch.cat(list(rows.unbind())), labels=rolled)
    out["log_probs"] = torch.nested.nested_tensor_from_jagged(lp, cu)
    return out


def verl_update(model, optimizer, scheduler, data, actor_cfg, *, engine, clip_grad):
    """One ``update_actor`` of verl's V1 actor on ``model`` (see the module docstring); per-mini-batch metrics."""
    from verl.utils.metric import Metric
    from verl.utils.py_functional import append_to_dict
    from verl.workers.engine.utils import prepare_micro_batches
    from verl.workers.utils.losses import ppo_loss

    mini_batch_size = tu.pop(data, "mini_batch_size")
    epochs, seed = tu.pop(data, "epochs"), tu.pop(data, "seed")
    dataloader = tu.make_iterator(
        data,
        mini_batch_size=mini_batch_size,
        epochs=epochs,
        seed=seed,
        dataloader_kwargs=tu.pop(data, "dataloader_kwargs"),
    )
    total = len(data) // mini_batch_size * epochs
    results = []
    for batch_idx, mini in enumerate(dataloader):
        tu.assign_non_tensor(mini, update_lr_scheduler=batch_idx == total - 1, use_remove_padding=False, **engine)
        # BaseEngine.train_batch: zero_grad, forward_backward_batch, optimizer_step
        optimizer.zero_grad()
        tu.assign_non_tensor(mini, batch_num_tokens=mini["loss_mask"].sum().item(), dp_size=1)
        micro_batches, _ = prepare_micro_batches(data=mini, dp_group=None, same_micro_num_in_dp=True)
        metrics, losses = {}, []
        for mb in micro_batches:
            out = _forward(model, mb, tu.get(mb, "temperature"), tu.get(mb, "calculate_entropy"))
            loss, m = ppo_loss(actor_cfg, out, mb)
            loss.backward()
            losses.append(loss.detach().item())
            append_to_dict(metrics, m)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=clip_grad)
        if torch.isfinite(grad_norm):
            optimizer.step()
        # TrainingWorker.train_batch: the LR tick; _postprocess_output / train_mini_batch: the metric reduction
        row = {
            k: Metric.aggregate_dp([v]) if isinstance(v, Metric) else float(sum(v) / len(v)) for k, v in metrics.items()
        }
        row.update(loss=sum(losses), grad_norm=grad_norm.item())
        if tu.get(mini, "update_lr_scheduler"):
            scheduler.step()
            row["lr"] = scheduler.get_last_lr()[0]
        results.append(row)
    return results


@pytest.fixture(scope="module")
def parity_cfg(compose_arctic, tiny_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("parity")
    cfg = compose_arctic(
        [
            f"actor_rollout_ref.model.path={tiny_model}",
            f"trainer.default_local_dir={out / 'ckpt'}",
            f"remote_backend.arctic.backend.log_file={out / 'server.log'}",
            "remote_backend.arctic.dtype=float64",
            "remote_backend.arctic.device=cpu",
            "remote_backend.arctic.log_prob_gpus=0",
            "data.train_batch_size=4",
            "actor_rollout_ref.actor.ppo_mini_batch_size=2",
            f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={MICRO}",
            f"actor_rollout_ref.actor.optim.lr={LR}",
            # verl's cosine with a warmup ratio and no trainer.total_training_steps: the horizon comes later
            "actor_rollout_ref.actor.optim.lr_scheduler_type=cosine",
            "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=0.5",
            "actor_rollout_ref.actor.optim.min_lr_ratio=0.1",
            "actor_rollout_ref.actor.optim.zero_indexed_step=false",
            "actor_rollout_ref.actor.optim.weight_decay=0.01",
        ]
    )
    return cfg, out


@pytest.fixture(scope="module")
def parity_backend(parity_cfg):
    from arctic_platform.integrations.verl.adapter import ArcticRemoteBackend

    cfg, out = parity_cfg
    from arctic_platform.client import ArcticRLClient

    backend = ArcticRemoteBackend.from_config(cfg)
    client = ArcticRLClient.from_handle(backend.reconnect_handle()).start()  # re-attached: creates nothing
    init = client.save(path=str(out / "init"), step=0)["path"]
    yield backend, client, init
    client.close()
    backend.destroy()


def _worker(cfg, backend, monkeypatch, overrides: dict):
    """The real forwarder in this process, with verl's injected horizon (as after PPOTrainer._create_dataloader)."""
    from arctic_platform.integrations.verl.v1.worker import ArcticV1ActorRolloutRefWorker

    for k, v in {"WORLD_SIZE": "1", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}.items():
        monkeypatch.setenv(k, v)
    cfg = copy.deepcopy(cfg)
    with open_dict(cfg):
        cfg.actor_rollout_ref.actor.optim.total_training_steps = STEPS
        for k, v in overrides.items():
            OmegaConf.update(cfg, f"actor_rollout_ref.actor.{k}", v, force_add=True)
    worker = ArcticV1ActorRolloutRefWorker(
        cfg.actor_rollout_ref, "actor_rollout", main_config=cfg, backend_handle=backend.reconnect_handle()
    )
    worker.init_model()
    return worker, cfg


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_three_steps_match_verls_actor(parity_cfg, parity_backend, tiny_model, monkeypatch, case):
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from verl.utils.config import omega_conf_to_dataclass
    from verl.utils.torch_functional import get_cosine_schedule_with_warmup
    from verl.workers.config.optimizer import FSDPOptimizerConfig, build_optimizer

    cfg, out = parity_cfg
    backend, client, init = parity_backend
    loss_mode, agg, extra = CASES[case]
    overrides = {"policy_loss.loss_mode": loss_mode, "loss_agg_mode": agg, **extra}
    client.load_checkpoint(path=init)  # fresh weights, optimizer state and schedule for every case
    worker, wcfg = _worker(cfg, backend, monkeypatch, overrides)
    calculate_entropy = float(extra.get("entropy_coeff", 0.0)) != 0.0
    batch = _fixed_batch()

    async def arctic_steps():
        metrics = []
        for _ in range(STEPS):
            td = _v1_tensordict(batch, calculate_entropy=calculate_entropy, dtype=torch.float32)
            metrics.append(tu.get(await worker.update_actor(td), "metrics"))
        await worker.destroy()
        return metrics

    arctic = asyncio.run(arctic_steps())  # one event loop: the worker keeps one client per loop
    after = load_file(f"{client.save(path=str(out / case), step=STEPS)['path']}/model.safetensors")

    # stock verl on the same initial weights, in float64
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float64)
    model.train()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    actor = wcfg.actor_rollout_ref.actor
    actor_cfg = omega_conf_to_dataclass(actor)
    optim_cfg = omega_conf_to_dataclass(actor.optim, dataclass_type=FSDPOptimizerConfig)
    optimizer = build_optimizer(model.parameters(), optim_cfg)
    scheduler = get_cosine_schedule_with_warmup(
        optimizer,
        num_warmup_steps=int(optim_cfg.lr_warmup_steps_ratio * STEPS),
        num_training_steps=STEPS,
        min_lr_ratio=optim_cfg.min_lr_ratio,
        num_cycles=optim_cfg.num_cycles,
        zero_indexed_step=optim_cfg.zero_indexed_step,
    )
    engine = dict(
        use_dynamic_bsz=bool(actor.use_dynamic_bsz),
        max_token_len_per_gpu=int(actor.ppo_max_token_len_per_gpu),
        micro_batch_size_per_gpu=int(actor.ppo_micro_batch_size_per_gpu),
    )
    verl = []
    for _ in range(STEPS):
        td = _v1_tensordict(batch, calculate_entropy=calculate_entropy, dtype=torch.float64)
        verl.append(
            verl_update(model, optimizer, scheduler, td, actor_cfg, engine=engine, clip_grad=optim_cfg.clip_grad)
        )

    for step, (a, v) in enumerate(zip(arctic, verl, strict=True)):
        # float64 both sides; the layouts differ ([left-padded prompt | response] vs packed rows), so the sums run in
        # another order: ~1e-16 relative per operation, 1e-10 leaves room for three steps of it
        want_loss = [row["loss"] for row in v]
        got_loss = [float(x) for x in a["loss"]]
        assert got_loss == pytest.approx(want_loss, rel=1e-10, abs=1e-12), (step, got_loss, want_loss)
        got_pg = [float(x) for x in a["pg_loss"]]
        assert got_pg == pytest.approx([row["actor/pg_loss"] for row in v], rel=1e-10, abs=1e-12), step
        # the LR: verl's own schedule function on both sides, ticked once per training step -> identical floats
        assert [float(x) for x in a["lr"]] == [v[-1]["lr"]], step
    moved = 0
    for name, p in model.named_parameters():
        dv = p.detach() - before[name]
        da = after[name] - before[name]
        scale = float(dv.norm())
        moved += scale > 0
        # per-tensor relative error of the update: float64 noise only (Adam's eps keeps noise-sized gradients small)
        assert float((da - dv).norm()) <= 1e-7 * scale + 1e-15, name
    assert moved >= len(before) // 2  # the three steps really trained (not an all-clipped no-op)


def test_save_contents_hf_model_exports_the_hf_model(parity_cfg, parity_backend, monkeypatch, tmp_path):
    from transformers import AutoModelForCausalLM

    cfg, _ = parity_cfg
    backend, _, _ = parity_backend
    worker, _ = _worker(cfg, backend, monkeypatch, {"checkpoint.save_contents": ["model", "optimizer", "hf_model"]})

    async def save():
        try:
            return await worker.save_checkpoint(str(tmp_path / "global_step_1" / "actor"), global_step=1)
        finally:
            await worker.destroy()

    reply = asyncio.run(save())
    assert reply["hf_path"] and AutoModelForCausalLM.from_pretrained(reply["hf_path"]) is not None


@pytest.mark.parametrize("enable", [True, False])
def test_profile_steps_hooks_write_the_backends_trace(parity_cfg, parity_backend, monkeypatch, tmp_path, enable):
    """verl profiles the actor on a profiled step only with actor.profiler.enable; so does the forwarder."""
    cfg, _ = parity_cfg
    backend, _, _ = parity_backend
    cfg = copy.deepcopy(cfg)
    with open_dict(cfg):
        cfg.global_profiler.save_path = str(tmp_path / "profile")
        cfg.actor_rollout_ref.actor.profiler.enable = enable
    worker, _ = _worker(cfg, backend, monkeypatch, {})

    async def profiled_step():
        try:
            await worker.start_profile(role="train", profile_step=2)  # what verl's trainer calls on a profiled step
            await worker.update_actor(_v1_tensordict(_fixed_batch(), calculate_entropy=False, dtype=torch.float32))
            await worker.stop_profile(run_command=True)
        finally:
            await worker.destroy()

    asyncio.run(profiled_step())
    trace = tmp_path / "profile" / "arctic_training_step_2.json"
    assert trace.is_file() == enable
    if enable:
        assert "aten::" in trace.read_text()
