# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Peak RSS of one ``/forward-backward`` mini-batch on CPU: the whole mini-batch in one pass vs verl's micro-batches.

A mini-batch of 64 rows x 512 tokens (256 prompt + 256 response, all real) goes through the training engine's
``forward_backward`` once with ``ppo_micro_batch_size_per_gpu=64`` (one pass) and once with 4 (16 micro-batches),
each in its own process (peak RSS is per process and never goes down). The model is a small random Qwen2 with a
4096-token vocabulary, so the logits of a pass dominate. Prints the ratio and writes
``benchmarks/results/server/micro_batch_memory.csv``. The loss must agree (it is the same mini-batch).

    python benchmarks/server/bench_micro_batch_memory.py [--rows 64] [--prompt 256] [--response 256] [--micro 4]

Run it from outside the repository root's import path (``cd /tmp``) so the installed wheel is used.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_csv  # noqa: E402


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def child(args) -> None:
    import torch

    from arctic_platform.server import engines as E

    torch.set_num_threads(args.threads)
    settings = E.EngineSettings(model_path=args.model, device="cpu", dtype="float32", max_seq_len=4096)
    eng = E.TrainingEngine(settings, E.TrainingSettings())
    g = torch.Generator().manual_seed(0)
    b, p, r = args.rows, args.prompt, args.response
    ids = torch.randint(3, 4000, (b, p + r), generator=g)
    ones = torch.ones(b, p + r, dtype=torch.long)
    batch = {
        "input_ids": ids,
        "attention_mask": ones,
        "prompts": ids[:, :p],
        "responses": ids[:, p:],
        "response_mask": ones[:, p:],
        "old_log_probs": torch.full((b, r), -8.3),
        "advantages": torch.randn(b, 1, generator=g).expand(b, r).contiguous(),
    }
    baseline = _rss_mb()
    t0 = time.perf_counter()
    out = eng.forward_backward(batch, {"actor_config": {"ppo_micro_batch_size_per_gpu": args.micro_batch}})
    seconds = time.perf_counter() - t0
    print(
        json.dumps(
            {
                "micro_batch_size": args.micro_batch,
                "micro_batches": out["micro_batches"],
                "baseline_rss_mb": round(baseline, 1),
                "peak_rss_mb": round(_rss_mb(), 1),
                "seconds": round(seconds, 2),
                "loss": out["metrics"]["loss"],
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--prompt", type=int, default=256)
    ap.add_argument("--response", type=int, default=256)
    ap.add_argument("--micro", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--micro-batch", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    from arctic_platform.fixtures import make_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        model = make_tiny_model(
            Path(tmp) / "model", vocab_size=4096, hidden_size=128, num_layers=4, intermediate_size=512, seed=0
        )
        rows = []
        for mbs in (args.rows, args.micro):  # one pass, then verl's micro-batches
            cmd = [sys.executable, __file__, "--child", "--model", str(model), "--micro-batch", str(mbs)]
            cmd += ["--rows", str(args.rows), "--prompt", str(args.prompt), "--response", str(args.response)]
            cmd += ["--threads", str(args.threads)]
            res = subprocess.run(cmd, check=True, capture_output=True, text=True)
            row = json.loads(res.stdout.strip().splitlines()[-1])
            row.update(rows=args.rows, tokens_per_row=args.prompt + args.response, threads=args.threads)
            rows.append(row)
            print(row)
    one, micro = rows
    ratio = (one["peak_rss_mb"] - one["baseline_rss_mb"]) / max(1e-9, micro["peak_rss_mb"] - micro["baseline_rss_mb"])
    for r in rows:
        r["extra_over_baseline_ratio_vs_micro"] = round(ratio, 2)
    path = write_csv("micro_batch_memory", rows)
    rel = abs(one["loss"] - micro["loss"]) / max(1e-12, abs(one["loss"]))
    print(
        f"peak RSS: one pass {one['peak_rss_mb']:.0f} MiB, micro-batches of {args.micro} "
        f"{micro['peak_rss_mb']:.0f} MiB "
        f"(x{one['peak_rss_mb'] / micro['peak_rss_mb']:.2f} total; x{ratio:.2f} above the loaded-model baseline); "
        f"loss relative difference {rel:.1e}; {path}"
    )


if __name__ == "__main__":
    main()
