# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The embedded server's torch engines on CUDA, checked against the same engines on CPU in float32.

On the tiny Qwen2 model (arctic_platform.fixtures.make_tiny_model): training forward-backward + optimizer step (the
one-device engine, and the sharded engine at world size 1: FSDP2 with verl's bf16 mixed precision over NCCL, its
rank in its own process), greedy generation, a weight sync training -> sampling and the log_prob engine, each job on
the device the server's
placement gives it (arctic_platform.server.placement: cuda:0 / cuda:1 / cuda:2 when there are enough GPUs, else
shared). The device under test runs in bfloat16 (the CUDA default); the reference is CPU float32.

Tolerance ("within bf16 tolerance"): error of the device vs the fp32 reference <= 2 x the error of the same
engine run on CPU in bfloat16 (the bf16 yardstick, as in FlashAttention's rule) + 4 bf16 ulps of the value's scale.
Greedy generation (after the step and the sync): the log-prob of the first generated token must match the
reference's within that tolerance (later tokens may legitimately differ after a bf16 near-tie), and every row must
reach max_tokens.

``--dry``: the device under test is the CPU itself (CPU bf16 vs CPU fp32): proves the script on any machine.
Writes engines_check.csv to --out; exit status 1 when any row fails (every row is still written).

    python benchmarks/server/engines_check.py [--dry] [--out DIR]
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
from pathlib import Path

import torch

from arctic_platform.server import engines as E
from arctic_platform.server.engines.fsdp_engine import ShardedTrainingEngine
from arctic_platform.server.placement import describe, place_jobs

P, R, ROWS = 8, 6, 4
BF16_ULP = 2.0**-8


def dense_batch(seed=0, vocab=300):
    """Protocol §4 layout: prompts left-padded to P, responses right-padded to R, GRPO-like advantages."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.zeros(ROWS, P + R, dtype=torch.long)
    mask = torch.zeros(ROWS, P + R, dtype=torch.long)
    for i in range(ROWS):
        pl, rl = 3 + i % (P - 2), 2 + (i * 2) % (R - 1)
        ids[i, P - pl : P] = torch.randint(3, vocab, (pl,), generator=g)
        ids[i, P : P + rl] = torch.randint(3, vocab, (rl,), generator=g)
        mask[i, P - pl : P + rl] = 1
    resp_mask = mask[:, P:].clone()
    adv = torch.randn(ROWS, 1, generator=g).expand(ROWS, R) * resp_mask
    return {"input_ids": ids, "attention_mask": mask, "prompts": ids[:, :P].clone(), "responses": ids[:, P:].clone(),
            "response_mask": resp_mask, "advantages": adv.contiguous()}  # fmt: skip


def token_logprobs(result: dict) -> list[float]:
    """The sampled token's log-prob per position (results carry the reference's ``{str(id): {logprob, rank}}``)."""
    return [e[str(t)]["logprob"] for e, t in zip(result["logprobs"], result["token_ids"], strict=True)]


def run_engines(
    model_dir: str, devices: dict[str, str], dtype: str, other_device: str, inject: bool, sharded: bool = False
) -> dict:
    """One full pass: forward-backward + step, logprobs after the step, generation, sync, log_prob engine; with
    ``sharded``, the same update on the sharded engine too (``sharded_*``)."""

    def settings(dev):
        return E.EngineSettings(model_path=model_dir, device=dev, dtype=dtype, max_seq_len=64, seed=1)

    batch = dense_batch()
    meta = {"temperature": 1.0, "actor_config": {}}
    valid = batch["response_mask"].bool()
    out: dict = {}
    ref_engine = E.ForwardEngine(settings(devices["log_prob"]))
    out["ref_logprobs"] = ref_engine.forward(batch, meta)["batch"]["logprobs"][:, P - 1 : P + R - 1][valid]
    trainer = E.TrainingEngine(settings(devices["training"]), E.TrainingSettings(lr=1e-2, grad_clip=1.0))
    old = trainer.forward(batch, meta)["batch"]["logprobs"][:, P - 1 : P + R - 1]
    fb = trainer.forward_backward(dict(batch, old_log_probs=old), meta)
    out["loss"] = torch.tensor(fb["metrics"]["loss"] + (1.0 if inject else 0.0))
    out["grad_norm"] = torch.tensor(trainer.step()["metrics"]["grad_norm"])
    out["logprobs_after_step"] = trainer.forward(batch, meta)["batch"]["logprobs"][:, P - 1 : P + R - 1][valid]
    if sharded:  # the sharded engine (kind fsdp) at world size 1 on the training device: same batch, same start
        eng = ShardedTrainingEngine(
            settings(devices["training"]), E.TrainingSettings(lr=1e-2, grad_clip=1.0), [devices["training"]]
        )
        try:
            out["sharded_loss"] = torch.tensor(eng.forward_backward(dict(batch, old_log_probs=old), meta)["avg_loss"])
            out["sharded_grad_norm"] = torch.tensor(eng.step()["metrics"]["grad_norm"])
            after = eng.forward(batch, meta)["batch"]["logprobs"]
            out["sharded_logprobs_after_step"] = after[:, P - 1 : P + R - 1][valid]
        finally:
            eng.close()
    sampler = E.SamplingEngine(settings(devices["sampling"]), max_batch_rows=8)
    sampler.load_weights_from(trainer.model)  # weight sync, across devices when placed apart
    # the trainer keeps float32 master weights (the job dtype is its autocast dtype); the sync casts them to the
    # sampler's dtype, so the sampler must hold exactly the cast weights
    sampler_dtype = next(sampler.model.parameters()).dtype
    cast_norm = sum(
        p.detach().to(sampler_dtype).to("cpu", torch.float64).square().sum() for p in trainer.model.parameters()
    )
    out["sync_weight_norm_diff"] = torch.tensor(abs(E.weight_norm(sampler.model)[0] - float(cast_norm) ** 0.5))
    synced = E.ForwardEngine(settings(other_device))
    synced.load_weights_from(sampler.model)
    out["synced_logprobs"] = synced.forward(batch, meta)["batch"]["logprobs"][:, P - 1 : P + R - 1][valid]
    prompts = [batch["input_ids"][i, P - 3 - i : P].tolist() for i in range(ROWS)]
    items = [E.GenerateItem(prompt=p, temperature=0.0, max_tokens=R, ignore_eos=True, logprobs=0) for p in prompts]
    results, _ = sampler.generate(items)
    out["generated"] = [(p, r["token_ids"], token_logprobs(r)) for p, r in zip(prompts, results, strict=True)]
    # seeded sampling (top-p / top-k, the CPU-side sampler fed from the device's logits): it must run and finish
    seeded = [E.GenerateItem(prompt=p, temperature=1.0, top_p=0.9, top_k=50, max_tokens=R, ignore_eos=True,
                             seed=7 + i) for i, p in enumerate(prompts)]  # fmt: skip
    sampled, _ = sampler.generate(seeded)
    out["sampled_lengths"] = [len(r["token_ids"]) for r in sampled]
    for e in (ref_engine, trainer, sampler, synced):
        e.close()
    return out


def max_err(a, b) -> float:
    a, b = torch.as_tensor(a).double().cpu(), torch.as_tensor(b).double().cpu()
    return float((a - b).abs().max()) if a.numel() else 0.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry", action="store_true", help="device under test = CPU (CPU bf16 vs CPU fp32)")
    ap.add_argument("--out", default=None, help="folder for engines_check.csv (default: current folder)")
    args = ap.parse_args(argv)
    if not args.dry and not torch.cuda.is_available():
        print("engines_check: no CUDA device visible (use --dry on CPU)", file=sys.stderr)
        return 1
    from arctic_platform.fixtures import make_tiny_model

    torch.manual_seed(0)
    inject = os.environ.get("ARCTIC_GPU_CHECK_FAIL", "") == "engines"
    count = 0 if args.dry else torch.cuda.device_count()
    jobs = {"training": 1, "sampling": 1, "log_prob": 1}
    placement = place_jobs(jobs, device="cpu" if args.dry else "cuda", device_count=count)
    devices = {j: d[0] for j, d in placement.items()}
    other = f"cuda:{min(3, count - 1)}" if count else "cpu"
    print(f"engines_check: placement {describe(placement)}, synced copy on {other} ({count} GPU(s))")
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = str(make_tiny_model(Path(tmp) / "model", seed=0))
        ref = run_engines(model_dir, {j: "cpu" for j in jobs}, "float32", "cpu", False)
        yard = run_engines(model_dir, {j: "cpu" for j in jobs}, "bfloat16", "cpu", False)
        dut = run_engines(model_dir, devices, "bfloat16", other, inject, sharded=True)
    rows = []

    def row(name, got, want, yardstick, scale=None):
        err, err_yard = max_err(got, want), max_err(yardstick, want)
        scale = float(torch.as_tensor(want).abs().max()) if scale is None else scale
        tol = 2 * err_yard + 4 * BF16_ULP * max(1.0, scale)
        rows.append({"check": name, "max_err": f"{err:.4g}", "cpu_bf16_err": f"{err_yard:.4g}", "tol": f"{tol:.4g}",
                     "ok": err <= tol})  # fmt: skip
        print(f"engines_check {name:<24} err {err:.4g} (cpu bf16 {err_yard:.4g}, tol {tol:.4g}) -> "
              f"{'ok' if err <= tol else 'FAIL'}")  # fmt: skip

    for key in ("ref_logprobs", "loss", "grad_norm", "logprobs_after_step", "synced_logprobs"):
        row(key, dut[key], ref[key], yard[key])
    # the sharded engine runs in the device pass only (its rank is a process of its own, slow to start on CPU): it is
    # held to the one-device engine's fp32 reference and bf16 yardstick (FSDP's bf16 parameters are not autocast's
    # arithmetic, but the same precision)
    for key in ("loss", "grad_norm", "logprobs_after_step"):
        row(f"sharded_{key}", dut[f"sharded_{key}"], ref[key], yard[key])
    # the sync copies the cast master weights as they are: the norms must agree to rounding of the norm itself
    row("sync_weight_norm_diff", dut["sync_weight_norm_diff"], 0.0, 0.0, scale=0.0)
    # generation after the step and the sync: the first greedy token's log-prob vs the fp32 reference
    gen_gap = max(
        abs(a - b) for (_, _, la), (_, _, lb) in zip(dut["generated"], ref["generated"], strict=True) for a, b in
        zip(la[:1], lb[:1], strict=True)
    )  # first generated token: same prompt, same weights up to bf16 -> comparable log-probs  # fmt: skip
    yard_gap = max(
        abs(a - b) for (_, _, la), (_, _, lb) in zip(yard["generated"], ref["generated"], strict=True) for a, b in
        zip(la[:1], lb[:1], strict=True)
    )  # fmt: skip
    tol = 2 * yard_gap + 4 * BF16_ULP * 8
    rows.append({"check": "generate_first_token_logprob", "max_err": f"{gen_gap:.4g}",
                 "cpu_bf16_err": f"{yard_gap:.4g}", "tol": f"{tol:.4g}", "ok": gen_gap <= tol})  # fmt: skip
    print(f"engines_check generate_first_token_lp err {gen_gap:.4g} (tol {tol:.4g}) -> "
          f"{'ok' if gen_gap <= tol else 'FAIL'}")  # fmt: skip
    lens_ok = all(len(t) == R for _, t, _ in dut["generated"]) and dut["sampled_lengths"] == [R] * ROWS
    rows.append({"check": "generate_lengths", "max_err": "", "cpu_bf16_err": "", "tol": "", "ok": lens_ok})
    folder = Path(args.out or ".")
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "engines_check.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["check", "max_err", "cpu_bf16_err", "tol", "ok"])
        w.writeheader()
        w.writerows(rows)
    failed = [r["check"] for r in rows if not r["ok"]]
    print(f"engines_check: {len(rows) - len(failed)}/{len(rows)} ok on {describe(placement)}" +
          (f"; FAILED {failed}" if failed else ""))  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
