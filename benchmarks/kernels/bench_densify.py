# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""densify benchmark: two things compared in one run, the ratio printed, CSV + PNG written.

CPU (default): the vectorized torch path vs a per-row Python loop (the approach it replaces: split the packed
values by row once, then one slice copy per row and output) at B=1024, P=512, R=1024 with 4 fp32 fields and random
lengths. Target: >= 10x. ``densify_reference`` (the loop plus validation) is timed too, for context.

CUDA (``--device cuda``): the Triton kernel vs the vectorized torch path on the same GPU: the launch alone under
``do_bench_cudagraph`` (``triton_kernel_cudagraph``), with output allocation, and with validation, with achieved
GB/s of the ideal bytes (kernels.md §1.6: 83.9 MB with all rows full -> 17.5 us at 4.8 TB/s; here computed from the real
lengths) and the roofline time.

``--dry``: tiny shapes, a few repetitions, any device (CI runs it on CPU under TRITON_INTERPRET=1 to prove the
script works; its numbers mean nothing).

CPU timings are wall clock (median and min of 25 runs) and very sensitive to other jobs on the host: torch's
intra-op threads stall when a core is taken, so run it on an idle machine, and compare with OMP_NUM_THREADS=1.
Each call allocates ~100 MB of fresh outputs; whether glibc hands back recycled or fresh (page-faulting) memory
makes single runs bimodal. ``MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1000000000`` gives the
steady state without page faults (it speeds up the loop as much as the vectorized path).

    python benchmarks/kernels/bench_densify.py [--device cpu|cuda] [--dry] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
from _bench_utils import H200_HBM_BYTES_PER_S, bar_png, kernel_stats, results_dir, time_cpu, write_csv

from arctic_platform.kernels.densify import (  # kernel-only timing (private on purpose)
    _prepare,
    _triton_launch,
    densify_reference,
    densify_triton,
    densify_vectorized,
)

FIELDS = ("old_log_probs", "advantages", "ref_log_prob", "rollout_is_weights")


def make_batch(B: int, P: int, R: int, device: str, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    lp = torch.randint(0, P + 1, (B,), generator=g)
    lr = torch.randint(0, R + 1, (B,), generator=g)

    def nt(values, lens):
        offsets = torch.zeros(B + 1, dtype=torch.int64)
        offsets[1:] = torch.cumsum(lens, 0)
        return torch.nested.nested_tensor_from_jagged(values.to(device), offsets.to(device))

    n_p, n_r = int(lp.sum()), int(lr.sum())
    prompts = nt(torch.randint(0, 150_000, (n_p,), generator=g), lp)
    responses = nt(torch.randint(0, 150_000, (n_r,), generator=g), lr)
    fields = {f: nt(torch.randn(n_r, generator=g), lr) for f in FIELDS}
    return prompts, responses, fields, n_p, n_r


def per_row_loop(prompts, responses, *, max_prompt_len, max_response_len, pad_token_id, fields, field_pads=None):
    """The approach densify replaces: split once, then a Python loop over rows with slice copies."""
    P, R = max_prompt_len, max_response_len
    lp = prompts.offsets().diff().tolist()
    lr = responses.offsets().diff().tolist()
    B = len(lr)
    input_ids = torch.full((B, P + R), pad_token_id, dtype=torch.int64)
    mask = torch.zeros((B, P + R), dtype=torch.int64)
    p_rows = prompts.values().split(lp)
    r_rows = responses.values().split(lr)
    pads = {"rollout_is_weights": 1.0, **(field_pads or {})}
    outs = {k: torch.full((B, R), pads.get(k, 0.0), dtype=v.dtype) for k, v in fields.items()}
    f_rows = {k: v.values().split(lr) for k, v in fields.items()}
    for b in range(B):
        a, c = lp[b], lr[b]
        input_ids[b, P - a : P] = p_rows[b]
        input_ids[b, P : P + c] = r_rows[b]
        mask[b, P - a : P + c] = 1
        for k in outs:
            outs[k][b, :c] = f_rows[k][b]
    position_ids = (mask.cumsum(-1) - 1).clamp_(min=0)
    return {"input_ids": input_ids, "attention_mask": mask, "position_ids": position_ids,
            "prompts": input_ids[:, :P].contiguous(), "responses": input_ids[:, P:].contiguous(), **outs}  # fmt: skip


def ideal_bytes(out: dict, n_p: int, n_r: int) -> int:
    """Bytes a perfect kernel must move: read the real tokens and field values, write every output once."""
    read = n_p * 8 + n_r * 8 + n_r * 4 * len(FIELDS)
    write = sum(t.numel() * t.element_size() for t in out.values())
    return read + write


MISMATCHES: list[str] = []


def check_equal(a: dict, b: dict, what: str = "") -> None:
    """Record (never raise) outputs that differ, so the timings are still written; main exits 1 then."""
    for k in b:
        if not torch.equal(a[k].cpu(), b[k].cpu()):
            MISMATCHES.append(f"{what}:{k}")
            print(f"bench_densify: {what} {k} differs from the reference")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dry", action="store_true", help="tiny shapes (CI smoke; numbers meaningless)")
    ap.add_argument("--out", default=None, help="results folder (default benchmarks/results/<device>/)")
    args = ap.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench_densify: --device cuda but no CUDA device is visible")
    B, P, R = (16, 16, 32) if args.dry else (1024, 512, 1024)
    reps = 2 if args.dry else 25
    prompts, responses, fields, n_p, n_r = make_batch(B, P, R, args.device)
    kw = dict(max_prompt_len=P, max_response_len=R, pad_token_id=0, fields=fields)
    rows = []
    if args.device == "cpu":
        providers = {"per_row_loop": per_row_loop, "vectorized": densify_vectorized}
        if args.dry:
            providers["triton_interpreted"] = lambda *a, **k: densify_triton(*a, block=16, **k)
        else:
            providers["densify_reference"] = densify_reference
        ref = per_row_loop(prompts, responses, **kw)
        for name, fn in providers.items():
            check_equal(fn(prompts, responses, **kw), ref, name)
            t = time_cpu(lambda fn=fn: fn(prompts, responses, **kw), warmup=1 if args.dry else 3, reps=reps)
            rows.append({"provider": name, "B": B, "P": P, "R": R, "fields": len(FIELDS),
                         "threads": torch.get_num_threads(), **{k: round(v, 4) for k, v in t.items()}})  # fmt: skip
        base = next(r for r in rows if r["provider"] == "per_row_loop")
        vec = next(r for r in rows if r["provider"] == "vectorized")
        ratio = base["median_ms"] / vec["median_ms"]
        ratio_min = base["min_ms"] / vec["min_ms"]
        for r in rows:
            r["speedup_vs_loop_median"] = round(base["median_ms"] / r["median_ms"], 3)
        load = open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"
        for r in rows:
            r["loadavg_1m_after"] = load  # a busy host (other jobs) distorts multi-threaded torch ops the most
        ref_row = next((r for r in rows if r["provider"] == "densify_reference"), None)
        ref_txt = (f"; reference loop {ref_row['median_ms']:.2f} ms -> {ref_row['median_ms'] / vec['median_ms']:.1f}x"
                   if ref_row else "")  # fmt: skip
        summary = (f"densify CPU B={B} P={P} R={R} {len(FIELDS)} fields, {torch.get_num_threads()} threads, "
                   f"load {load}: "
                   f"per-row loop {base['median_ms']:.2f} ms, vectorized {vec['median_ms']:.2f} ms (median) -> "
                   f"{ratio:.1f}x (min-of-runs {ratio_min:.1f}x){ref_txt}; target >= 10x")  # fmt: skip
        ylabel = "median ms"
        values = [r["median_ms"] for r in rows]
    else:
        from triton.testing import do_bench, do_bench_cudagraph

        ref = densify_vectorized(prompts, responses, **kw)
        out = densify_triton(prompts, responses, **kw)
        check_equal(out, ref, "triton")
        nbytes = ideal_bytes(out, n_p, n_r)
        roof_us = nbytes / H200_HBM_BYTES_PER_S * 1e6
        prepared = _prepare(prompts, responses, **kw, field_pads=None)
        providers = {
            "vectorized_torch": lambda: densify_vectorized(prompts, responses, **kw),
            "triton": lambda: densify_triton(prompts, responses, **kw),  # validation (one host sync) + launch
            "triton_kernel_only": lambda: _triton_launch(prepared, 512),  # output allocation + launch
            # the launch alone: captured in a CUDA graph (outputs come from the graph's pool), replayed
            "triton_kernel_cudagraph": lambda: _triton_launch(prepared, 512),
        }
        for name, fn in providers.items():
            if name.endswith("_cudagraph"):
                # rep 5 ms: the graph holds ~rep / 25 us launches, each allocating ~100 MB of outputs from the
                # graph's pool; even without reuse inside the capture that stays ~20 GB on a 141 GB card
                ms = do_bench_cudagraph(fn, rep=5, return_mode="median")
            else:
                ms = do_bench(fn, warmup=25, rep=100, return_mode="median")
            rows.append({"provider": name, "B": B, "P": P, "R": R, "fields": len(FIELDS), "median_ms": round(ms, 5),
                         "ideal_bytes": nbytes, "GB_per_s": round(nbytes / (ms * 1e-3) / 1e9, 1),
                         "pct_of_4.8TBps": round(100 * nbytes / (ms * 1e-3) / H200_HBM_BYTES_PER_S, 1),
                         "roofline_us": round(roof_us, 2)})  # fmt: skip
        vec, tri, kern_alloc, kern = rows
        summary = (f"densify CUDA B={B} P={P} R={R}, {nbytes / 1e6:.1f} MB ideal (roofline {roof_us:.1f} us): "
                   f"triton kernel (CUDA graph) {kern['median_ms'] * 1e3:.1f} us ({kern['GB_per_s']} GB/s, "
                   f"{kern['pct_of_4.8TBps']}% of 4.8 TB/s); with output allocation "
                   f"{kern_alloc['median_ms'] * 1e3:.1f} us; densify_triton incl. validation "
                   f"{tri['median_ms'] * 1e3:.1f} us; vectorized torch {vec['median_ms'] * 1e3:.1f} us -> "
                   f"{vec['median_ms'] / tri['median_ms']:.1f}x")  # fmt: skip
        ylabel = "median ms (do_bench)"
        values = [r["median_ms"] for r in rows]
    folder = results_dir(args.device, args.out)
    write_csv(folder / "densify.csv", rows)
    from arctic_platform.kernels import densify as D

    if hasattr(D, "_densify_fwd_kernel"):
        stats = kernel_stats(D._densify_fwd_kernel, "_densify_fwd_kernel")
        write_csv(folder / "densify_kernels.csv", stats)
        for r in stats:
            print(f"kernel {r['kernel']} variant {r['variant']}: n_regs {r['n_regs']} n_spills {r['n_spills']}")
    bar_png(folder / "densify.png", [r["provider"] for r in rows], values, ylabel=ylabel, title=summary)
    print(summary)
    if MISMATCHES:
        print(f"bench_densify: FAILED, outputs differ: {MISMATCHES}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
