# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""A step cost model: Qwen3-8B GRPO on GSM8K on one 8xH200 node, each phase's time from FLOPs and bytes.

Three layouts side by side, in one run:

* ``stock``: stock verl 0.9.1 colocated (every phase on all 8 GPUs in turn; rollout TP 2 -> 4 vLLM replicas; the
  weight sync stays on the GPUs);
* ``arctic 7bf4344``: the embedded backend before issue #42 (4 training GPUs, 3 sampling GPUs at TP 1, 1 reference
  GPU: ``node_plan``'s split); rows computed at the frame's padding, full-vocabulary logits at every position, the
  weight sync through a whole fp32 file, generation in coalesced waves of 64 prompts that each wait for their tail,
  the reference unsharded on one GPU;
* ``arctic now``: this checkout with the launcher's default split (real tokens, logits at response positions, bf16
  buckets the training ranks write, sharded gradients, the reference sharded on the 4 training GPUs, so 4 sampling
  GPUs, and continuous sampling: the coalesced requests decode together, one wave).

Each in sync mode (phases one after another, as verl's sync trainer runs them) and, for the split layouts, async
(generation of step k+1 beside training of step k: the step is the longer of the two). Prints the table, the ratio of
each layout to stock verl and to the seed's measured ratio (Arctic-Platform 438.3 s / stock 731.4 s on its own
configuration), and writes ``benchmarks/results/e2e/step_cost_model.csv`` and ``.png``.

Generation is stepped token by token over a fixed response-length distribution (quantiles of a log-normal with the
GSM8K mean, capped at the response maximum): a decode step costs the larger of its FLOPs at ``--decode-mfu`` and its
bytes (weights / TP + the live sequences' KV cache) at ``--hbm-eff`` of HBM bandwidth; a wave lasts until its longest
sequence ends, and each step adds ``--step-overhead-ms`` of vLLM's scheduling and sampling. Training and log-prob
phases are FLOPs at ``--train-mfu``. Host copies (``/dev/shm`` files, safetensors
reads) run at ``--host-gbps``. Every constant is a flag; the defaults are stated in ``docs/cost-model.md``.

    python benchmarks/e2e/step_cost_model.py [--mean-response 280] [--host-gbps 5]
"""

from __future__ import annotations

import argparse
import csv
import math
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "results" / "e2e"

# Qwen3-8B (its config.json): 36 layers, hidden 4096, 32 query / 8 KV heads of 128, MLP 12288, vocabulary 151,936,
# untied embeddings
LAYERS, HIDDEN, Q_HEADS, KV_HEADS, HEAD_DIM, MLP, VOCAB = 36, 4096, 32, 8, 128, 12288, 151_936
EMBED = VOCAB * HIDDEN
PER_LAYER = HIDDEN * Q_HEADS * HEAD_DIM * 2 + HIDDEN * KV_HEADS * HEAD_DIM * 2 + 3 * HIDDEN * MLP
BODY = LAYERS * PER_LAYER  # the decoder layers' matmul weights
PARAMS = BODY + 2 * EMBED
KV_BYTES_PER_TOKEN = 2 * LAYERS * KV_HEADS * HEAD_DIM * 2  # K and V, bf16
BF16_BYTES = 2 * PARAMS

# H200 (the figures)
HBM_BPS = 4.8e12
PEAK_FLOPS = 990e12
NVLINK_BPS = 450e9
PCIE_BPS = 55e9

# the seed's headline (Arctic-Platform's own measurement, its own configuration)
SEED_STOCK_S, SEED_ARCTIC_S = 731.4, 438.3


@dataclass(frozen=True)
class Shape:
    prompts: int = 256
    n: int = 8
    p_max: int = 512
    r_max: int = 1024
    mean_prompt: int = 130
    mean_response: int = 280
    mini_batches: int = 4  # ppo_mini_batch_size 64 of 256 prompts

    @property
    def rows(self) -> int:
        return self.prompts * self.n


def response_lengths(shape: Shape, rows: int) -> list[int]:
    """``rows`` response lengths: quantiles of a log-normal (sigma 0.6) with the shape's mean, capped at r_max."""
    sigma = 0.6
    mu = math.log(shape.mean_response) - sigma**2 / 2
    out = []
    for i in range(rows):
        q = (i + 0.5) / rows
        z = math.sqrt(2) * _erfinv(2 * q - 1)
        out.append(max(1, min(shape.r_max, round(math.exp(mu + sigma * z)))))
    return out


def _erfinv(y: float) -> float:
    """Inverse error function (Giles' single-precision approximation, refined by two Newton steps)."""
    w = -math.log((1.0 - y) * (1.0 + y))
    if w < 5.0:
        w -= 2.5
        p = 2.81022636e-08
        for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
                  0.246640727, 1.50140941):  # fmt: skip
            p = c + p * w
    else:
        w = math.sqrt(w) - 3.0
        p = -0.000200214257
        for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
                  1.00167406, 2.83297682):  # fmt: skip
            p = c + p * w
    x = p * y
    for _ in range(2):
        x -= (math.erf(x) - y) / (2 / math.sqrt(math.pi) * math.exp(-x * x))
    return x


def decode_wave(lengths: list[int], prompt: int, tp: int, args) -> float:
    """Seconds for one replica (``tp`` GPUs) to decode ``lengths`` together (continuous batching inside vLLM): each
    step costs the larger of its FLOPs and its bytes; the wave ends with its longest sequence. Prefill included."""
    flops_per_token = 2 * (BODY + EMBED)
    prefill = len(lengths) * prompt * flops_per_token / (tp * PEAK_FLOPS * args.train_mfu)
    live_by_step = sorted(lengths)
    t, i, total = 0, 0, prefill
    n = len(live_by_step)
    while i < n:
        t += 1
        while i < n and live_by_step[i] < t:
            i += 1
        live = n - i
        if live == 0:
            break
        flops = live * flops_per_token / (tp * PEAK_FLOPS * args.decode_mfu)
        kv = live * (prompt + t / 2) * KV_BYTES_PER_TOKEN / tp  # half the responses so far, on average
        mem = (BF16_BYTES / tp + kv) / (HBM_BPS * args.hbm_eff)
        total += max(flops, mem) + args.step_overhead_ms / 1e3
    return total


def generation(shape: Shape, gpus: int, tp: int, waves: int, args) -> float:
    """The rollout: ``gpus / tp`` replicas share the rows; ``waves`` batches one after another (each waits for its
    tail)."""
    replicas = gpus // tp
    lengths = response_lengths(shape, shape.rows)
    # interleave so every wave and replica gets the same mix of lengths
    per_wave = [lengths[w::waves] for w in range(waves)]
    total = 0.0
    for wave in per_wave:
        total += max(decode_wave(wave[r::replicas], shape.mean_prompt, tp, args) for r in range(replicas))
    return total


def tokens(shape: Shape, padded: bool) -> tuple[float, float]:
    """(all positions, response positions) computed per step."""
    if padded:
        return shape.rows * (shape.p_max + shape.r_max), shape.rows * shape.r_max
    resp = sum(response_lengths(shape, shape.rows))
    return shape.rows * shape.mean_prompt + resp, resp


def forward_flops(shape: Shape, padded: bool, logits_everywhere: bool) -> float:
    allpos, resp = tokens(shape, padded)
    logit_positions = allpos if logits_everywhere else resp
    return 2 * (BODY + EMBED) * allpos + 2 * EMBED * logit_positions  # lm_head only where logits are computed


def phase_seconds(flops: float, gpus: int, args) -> float:
    return flops / (gpus * PEAK_FLOPS * args.train_mfu)


def weight_sync(kind: str, training_gpus: int, sampling_replicas: int, args) -> float:
    host = args.host_gbps * 1e9
    if kind == "stock":  # colocated: resharded on the GPUs (NCCL / CUDA IPC) into vLLM's weights (a lower bound)
        return BF16_BYTES / (NVLINK_BPS * args.hbm_eff) + BF16_BYTES / (HBM_BPS * args.hbm_eff)
    if kind == "fp32-file":  # 7bf4344: fp32 gather to rank 0's CPU, one file, re-read + cast, bf16 buckets, read x R
        fp32 = 2 * BF16_BYTES
        d2h = fp32 / (PCIE_BPS * 0.7)
        reads = sampling_replicas * BF16_BYTES / host / 2  # the replicas read at once: twice one thread's rate
        return d2h + fp32 / host + fp32 / host + BF16_BYTES / host + reads + BF16_BYTES / (PCIE_BPS * 0.7)
    # bf16 buckets the ranks write: bf16 all-gather, D2H on rank 0, one write, every replica reads at once
    gather = BF16_BYTES * (training_gpus - 1) / training_gpus / (NVLINK_BPS * args.hbm_eff)
    d2h = BF16_BYTES / (PCIE_BPS * 0.7)
    return gather + d2h + BF16_BYTES / host + sampling_replicas * BF16_BYTES / host / 2 + BF16_BYTES / (PCIE_BPS * 0.7)


def layouts(shape: Shape, args) -> dict[str, dict[str, float]]:
    # stock: 8 GPUs colocated, TP 2 (verl's example); remove-padding rows, logits at every real position; the
    # reference with param offload (its bf16 weights in again: H2D)
    real_train = 8 * (BODY + EMBED)  # fwd 2 + bwd 4 + recompute 2 (gradient checkpointing) per parameter per token
    stock = {
        "generate": generation(shape, 8, 2, 1, args),
        "old_log_prob": phase_seconds(forward_flops(shape, False, True), 8, args),
        "ref": phase_seconds(forward_flops(shape, False, True), 8, args) + BF16_BYTES / 8 / (PCIE_BPS * 0.7),
        "update_actor": phase_seconds(real_train / (2 * (BODY + EMBED)) * forward_flops(shape, False, True), 8, args),
        "weight_sync": weight_sync("stock", 8, 4, args),
        "sleep_wake": 2 * BF16_BYTES / 8 / (PCIE_BPS * 0.7),  # vLLM's weights out and back in (level 1 keeps none)
    }

    def split(padded: bool, everywhere: bool, sync_kind: str, waves: int, ref_gpus: int) -> dict[str, float]:
        fwd = forward_flops(shape, padded, everywhere)
        sampling = 8 - 4 - (1 if ref_gpus == 1 else 0)  # a reference on the training GPUs frees its GPU to sample
        return {
            "generate": generation(shape, sampling, 1, waves, args),
            "old_log_prob": phase_seconds(fwd, 4, args),
            "ref": phase_seconds(fwd, ref_gpus, args),
            "update_actor": phase_seconds(4 * fwd, 4, args),
            "weight_sync": weight_sync(sync_kind, 4, sampling, args),
            "sleep_wake": 0.0,
        }

    waves = math.ceil(shape.prompts / 64)  # the plugin coalesces 64 prompts a /generate call
    return {
        "stock": stock,
        "arctic 7bf4344": split(True, True, "fp32-file", waves, 1),
        "arctic now": split(False, False, "bf16-buckets", 1, 4),
    }


def step(phases: dict[str, float], asynchronous: bool) -> float:
    if not asynchronous:
        return sum(phases.values())
    train = sum(v for k, v in phases.items() if k != "generate")
    return max(phases["generate"], train)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mean-prompt", type=int, default=Shape.mean_prompt)
    ap.add_argument("--mean-response", type=int, default=Shape.mean_response)
    ap.add_argument("--train-mfu", type=float, default=0.4, help="bf16 dense FLOPs reached by training / prefill")
    ap.add_argument("--decode-mfu", type=float, default=0.3, help="FLOPs reached by a batched decode step")
    ap.add_argument("--hbm-eff", type=float, default=0.7, help="share of HBM / NVLink bandwidth reached")
    ap.add_argument("--host-gbps", type=float, default=5.0, help="one host thread's file write / read, GB/s")
    ap.add_argument("--step-overhead-ms", type=float, default=5.0, help="vLLM's CPU work per decode step (ms)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    shape = Shape(mean_prompt=args.mean_prompt, mean_response=args.mean_response)
    table = layouts(shape, args)
    names = list(next(iter(table.values())))
    print(
        f"Qwen3-8B ({PARAMS / 1e9:.2f}B), {shape.prompts} prompts x n={shape.n}, P<={shape.p_max} R<={shape.r_max}, "
        f"mean prompt {shape.mean_prompt} / response {shape.mean_response}; real tokens "
        f"{tokens(shape, False)[0] / 1e6:.2f}M vs padded {tokens(shape, True)[0] / 1e6:.2f}M"
    )
    print(f"{'phase (s)':<14}" + "".join(f"{k:>16}" for k in table))
    for n in names:
        print(f"{n:<14}" + "".join(f"{table[k][n]:>16.1f}" for k in table))
    rows = []
    stock_sync = step(table["stock"], False)
    for k, phases in table.items():
        for mode in ("sync", "async"):
            if k == "stock" and mode == "async":
                continue
            s = step(phases, mode == "async")
            rows.append({"layout": k, "mode": mode, **{n: round(v, 2) for n, v in phases.items()},
                         "step_s": round(s, 1), "over_stock": round(s / stock_sync, 2)})  # fmt: skip
    print(f"{'step (s)':<14}" + "".join(f"{step(table[k], False):>16.1f}" for k in table) + "   (sync)")
    print(f"{'':<14}" + "".join(f"{step(table[k], True):>16.1f}" for k in table if k != "stock") + "   (async)")
    for r in rows:
        dominant = max(names, key=lambda n: r[n])
        chain = sum(r[n] for n in names if n != "generate")
        if r["mode"] == "async":
            biggest = max((n for n in names if n != "generate"), key=lambda n: r[n])
            dominant = (
                "generate" if r["generate"] >= chain else f"the training chain ({chain:.1f} s), largest {biggest}"
            )
        if r["mode"] == "sync":
            dominant = f"{dominant} ({r[dominant]:.1f} s)"
        print(f"{r['layout']:>15} {r['mode']:<5}: step {r['step_s']:6.1f} s = x{r['over_stock']:.2f} stock; "
              f"dominant: {dominant}")  # fmt: skip
    print(f"seed (Arctic-Platform's measurement, its configuration): x{SEED_ARCTIC_S / SEED_STOCK_S:.2f} stock")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "step_cost_model.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    _plot(table, args.out / "step_cost_model.png")
    print(path)


def _plot(table: dict[str, dict[str, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    bottoms = [0.0] * len(table)
    for phase in next(iter(table.values())):
        vals = [table[k][phase] for k in table]
        ax.bar(list(table), vals, bottom=bottoms, label=phase)
        bottoms = [b + v for b, v in zip(bottoms, vals, strict=True)]
    ax.set_ylabel("seconds per step (sync mode)")
    ax.set_title("Qwen3-8B GRPO, GSM8K, one 8xH200 node: modelled phases")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
