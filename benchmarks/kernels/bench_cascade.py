# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Forest cascade attention benchmark (GPU): correctness at the real shape, then do_bench against two baselines.

Real shape: Qwen3-8B attention (Hq 32, Hkv 8, D 128), bf16, paged KV with block 16. Cases (docs/kernels.md §6.3):
ex1 = G 16 x n 8, prefix 1024, suffix 512; ex2 = G 64 x n 16, prefix 2048, suffix 256. Providers:

* ``fca_kernel``: the kernel alone: :func:`forest_cascade_attention_planned` with the plan, metadata and outputs
  prepared ahead (forward + split reduce launches only), timed as a CUDA graph (``do_bench_cudagraph``);
* ``fca_eager``: the eager :func:`forest_cascade_attention` (validation, host tile plan, allocation; ``do_bench``),
  so ``wrapper_us`` = fca_eager - fca_kernel is the host wrapper's cost, reported separately;
* ``fca_noshare_kernel`` / ``fca_noshare_eager``: the same with every request its own group (prefix 0, full block
  table as suffix): the paged-decode baseline on the same kernel;
* ``sdpa_gathered``: ``torch.nn.functional.scaled_dot_product_attention`` on K/V gathered into contiguous
  [B, Hkv, L, D] beforehand (the gather is not timed), as a CUDA graph;
* ``fca_kernel_s<k>``: ``fca_kernel`` with a forced split count, to show the split-KV effect.

Correctness rows (``cascade_check.csv``): eager and planned paths, grouped and no-share, bf16 and fp32, plus a CUDA
graph replay on the GPU. Every row is written even when some fail; the exit status is 1 then. Compiled-kernel
registers and spills go to ``cascade_kernels.csv``.

GB/s = ideal bytes / time, where ideal bytes are the KV bytes that provider must read at least once: shared for
``fca`` (G x (P + n x S) tokens), unshared for the others (B x (P + S) tokens); 4 KiB per token per layer in bf16.
Compared with the H200's 4.8 TB/s. The 50 MB L2 can flatter the no-share baselines (members of a group running
concurrently re-read the same pages from L2), which is why absolute GB/s is reported and not only the ratio.

``--dry``: tiny shapes on CPU under TRITON_INTERPRET=1 (CI smoke; times meaningless). Without ``--dry`` a CUDA
device is required and its absence is an error.

    python benchmarks/kernels/bench_cascade.py [--dry] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys

import torch
from _bench_utils import (
    H200_HBM_BYTES_PER_S,
    bar_png,
    inject_failure,
    kernel_stats,
    results_dir,
    time_cpu,
    write_csv,
)

from arctic_platform.kernels import cascade as C
from arctic_platform.kernels.cascade import forest_cascade_attention, forest_cascade_attention_reference

REAL = dict(Hq=32, Hkv=8, D=128, bs=16)
DRY = dict(Hq=8, Hkv=2, D=32, bs=16)
SHAPES = {"ex1": dict(G=16, n=8, P=1024, S=512), "ex2": dict(G=64, n=16, P=2048, S=256)}
DRY_SHAPES = {"dry": dict(G=2, n=3, P=32, S=20)}
CHECK = dict(G=4, n=8, P=1024, S=512)  # correctness at the real head shape, small enough for the reference loop
DRY_CHECK = dict(G=3, n=2, P=48, S=24)


def build(G, n, P, S, *, Hq, Hkv, D, bs, dtype, device, seed=0):
    """GRPO batch on randomly permuted pages: each group's prefix pages shared, each member's suffix pages own.

    P is rounded down to whole blocks for the shared part (only full blocks are shared); the rest of the prompt
    lands in each member's suffix, so every request sees exactly P + S tokens.
    """
    g = torch.Generator(device="cpu").manual_seed(seed)
    B = G * n
    pb = P // bs
    s_tokens = S + (P - pb * bs)
    sb = -(-s_tokens // bs)
    nblocks = G * pb + B * sb
    pages = torch.randperm(nblocks, generator=g).to(torch.int32)
    pbt = pages[: G * pb].view(G, pb) if pb else torch.zeros((G, 1), dtype=torch.int32)
    sbt = pages[G * pb :].view(B, sb)
    k = torch.randn(nblocks, bs, Hkv, D, device=device, dtype=dtype)
    v = torch.randn(nblocks, bs, Hkv, D, device=device, dtype=dtype)
    q = torch.randn(B, Hq, D, device=device, dtype=dtype)
    group_of = torch.arange(B) // n
    full_bt = torch.cat([pbt[group_of][:, :pb], sbt], dim=1)  # the plain per-request block table
    forest = dict(
        group_starts=(torch.arange(G + 1, dtype=torch.int32) * n).to(device),
        prefix_block_tables=pbt.to(device),
        prefix_lens=torch.full((G,), pb * bs, dtype=torch.int32, device=device),
        suffix_block_tables=sbt.to(device),
        suffix_lens=torch.full((B,), s_tokens, dtype=torch.int32, device=device),
    )
    noshare = dict(
        group_starts=torch.arange(B + 1, dtype=torch.int32, device=device),
        prefix_block_tables=torch.zeros((B, 1), dtype=torch.int32, device=device),
        prefix_lens=torch.zeros(B, dtype=torch.int32, device=device),
        suffix_block_tables=full_bt.to(device),
        suffix_lens=torch.full((B,), P + S, dtype=torch.int32, device=device),
    )
    return q, k, v, forest, noshare, full_bt.to(device)


def gather_kv(cache, full_bt, L):
    """[num_blocks, bs, Hkv, D] + [B, nb] -> [B, Hkv, L, D] contiguous (tokens 0..L-1 of every request)."""
    bs = cache.shape[1]
    t = torch.arange(L, device=cache.device)
    blocks = full_bt[:, t // bs].long()  # [B, L]
    return cache[blocks, t % bs].permute(0, 2, 1, 3).contiguous()


def sdpa(q, kg, vg):
    return torch.nn.functional.scaled_dot_product_attention(q[:, :, None, :], kg, vg, enable_gqa=True)[:, :, 0]


def plain_same_dtype(q, kg, vg):
    """Plain torch at the input dtype (matmuls and softmax in that dtype): the '2x torch error' yardstick."""
    rep = q.shape[1] // kg.shape[1]
    kk, vv = kg.repeat_interleave(rep, 1), vg.repeat_interleave(rep, 1)
    s = torch.einsum("bhd,bhld->bhl", q, kk) * q.shape[-1] ** -0.5
    return torch.einsum("bhl,bhld->bhd", torch.softmax(s, -1), vv)


def planned(q, k, v, kw, *, splits=None, block_n=None):
    """A prepared plan for ``kw`` (plan updated once, ahead) and the kernel-only call on it."""
    G = kw["prefix_lens"].numel()
    B, Hq, D = q.shape
    largest = int(kw["group_starts"].diff().max())  # ahead of time: the M bucket the eager path would pick too
    plan = C.make_fca_plan(max_batch=B, max_groups=G, num_heads=Hq, num_kv_heads=k.shape[2], head_dim=D,
                           block_size=k.shape[1], dtype=q.dtype, device=q.device, num_splits=splits,
                           block_n=block_n, max_group_size=largest)  # fmt: skip
    C.fca_plan_update(plan, kw["group_starts"])
    meta = {n: kw[n].to(torch.int32).contiguous() for n in ("prefix_block_tables", "prefix_lens",
                                                              "suffix_block_tables", "suffix_lens")}  # fmt: skip

    def call():
        return C.forest_cascade_attention_planned(q, k, v, plan, **meta)

    return plan, call


def graph_of(call):
    """``call`` captured in a CUDA graph (warm-up on a side stream first); returns (graph, outputs)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        call()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        outs = call()
    return g, outs


def check(shape, heads, dtype, device) -> list[dict]:
    """Kernel paths vs an fp64 reference; FlashAttention's 2x-plain-torch rule + 4 fp32 ulps."""
    q, k, v, forest, noshare, full_bt = build(**shape, **heads, dtype=dtype, device=device, seed=1)
    L = shape["P"] + shape["S"]
    ref = forest_cascade_attention_reference(q.double(), k.double(), v.double(), **forest)
    kg, vg = gather_kv(k, full_bt, L), gather_kv(v, full_bt, L)
    err_pt = (plain_same_dtype(q, kg, vg).double() - ref).abs().max().item()
    floor = 4 * torch.finfo(torch.float32).eps * max(ref.abs().max().item(), 1.0)
    runs = []
    for name, kw in (("fca", forest), ("fca_noshare", noshare)):
        for splits in (None, 1, 3):
            runs.append((f"{name}/eager/splits={splits or 'auto'}",
                         lambda kw=kw, s=splits: forest_cascade_attention(q, k, v, **kw, num_splits=s)))  # fmt: skip
        for splits in (1, 3):
            runs.append(
                (f"{name}/planned/splits={splits}", lambda kw=kw, s=splits: planned(q, k, v, kw, splits=s)[1]()[0])
            )
    if device == "cuda":

        def replay(kw=forest):
            _, call = planned(q, k, v, kw)
            g, (out, _) = graph_of(call)
            out.zero_()
            g.replay()
            return out

        runs.append(("fca/cuda_graph_replay", replay))
    rows = []
    for cname, fn in runs:
        try:
            out = fn()
            if inject_failure("cascade") and cname.startswith("fca/eager/splits=auto"):
                out = out + 1.0  # ARCTIC_GPU_CHECK_FAIL=cascade: prove a wrong result fails the step
            err = (out.double() - ref).abs().max().item()
            note = ""
        except Exception as e:  # a crash is a failed row, and the other rows still run
            err, note = float("nan"), f"{type(e).__name__}: {e}"[:300]
        ok = err <= 2 * err_pt + floor
        rows.append({"check": cname, "dtype": str(dtype).split(".")[-1], **shape, **heads, "max_err": f"{err:.3g}",
                     "plain_torch_err": f"{err_pt:.3g}", "ok": ok, "note": note})  # fmt: skip
        print(f"check {cname:<34} {rows[-1]['dtype']:<9} err {err:.3g} vs 2 x plain {err_pt:.3g}"
              f" -> {'ok' if ok else 'FAIL ' + note}")  # fmt: skip
    return rows


def kv_bytes_per_token(heads, dtype) -> int:
    return 2 * heads["Hkv"] * heads["D"] * torch.empty((), dtype=dtype).element_size()


def bench_shape(sname, shape, heads, dtype, device, bench_kernel, bench_eager) -> tuple[list[dict], str]:
    """Time every provider on one GRPO shape; rows for the CSV and a one-line summary."""
    q, k, v, forest, noshare, full_bt = build(**shape, **heads, dtype=dtype, device=device)
    G, n, P, S = shape["G"], shape["n"], shape["P"], shape["S"]
    B = G * n
    kvb = kv_bytes_per_token(heads, dtype)
    shared_bytes = G * (P + n * S) * kvb
    unshared_bytes = B * (P + S) * kvb
    kg, vg = gather_kv(k, full_bt, P + S), gather_kv(v, full_bt, P + S)
    _, fca_call = planned(q, k, v, forest)
    _, noshare_call = planned(q, k, v, noshare)
    providers = {
        "fca_kernel": (bench_kernel, fca_call, shared_bytes),
        "fca_eager": (bench_eager, lambda: forest_cascade_attention(q, k, v, **forest), shared_bytes),
        "fca_noshare_kernel": (bench_kernel, noshare_call, unshared_bytes),
        "fca_noshare_eager": (bench_eager, lambda: forest_cascade_attention(q, k, v, **noshare), unshared_bytes),
        "sdpa_gathered": (bench_kernel, lambda: sdpa(q, kg, vg), unshared_bytes),
    }
    for s in (1, 2, 4, 8):
        providers[f"fca_kernel_s{s}"] = (bench_kernel, planned(q, k, v, forest, splits=s)[1], shared_bytes)
    rows, times = [], {}
    for name, (bench, fn, nbytes) in providers.items():
        try:
            ms = bench(fn)
            note = ""
        except Exception as e:  # one provider failing must not lose the others' figures
            ms, note = float("nan"), f"{type(e).__name__}: {e}"[:300]
            print(f"bench_cascade: {sname}/{name} FAILED: {note}")
        times[name] = ms
        rows.append({"shape": sname, **shape, **heads, "dtype": str(dtype).split(".")[-1], "provider": name,
                     "timer": "do_bench_cudagraph" if bench is bench_kernel and device == "cuda" else
                     ("do_bench" if device == "cuda" else "cpu wall (dry)"),
                     "time_us": round(ms * 1e3, 2), "ideal_bytes": nbytes,
                     "GB_per_s": round(nbytes / (ms * 1e-3) / 1e9, 1),
                     "pct_of_4.8TBps": round(100 * nbytes / (ms * 1e-3) / H200_HBM_BYTES_PER_S, 1),
                     "roofline_us": round(nbytes / H200_HBM_BYTES_PER_S * 1e6, 1), "note": note})  # fmt: skip
    for r in rows:
        r["speedup_vs_noshare_kernel"] = round(times["fca_noshare_kernel"] / times[r["provider"]], 2)
        r["speedup_vs_sdpa"] = round(times["sdpa_gathered"] / times[r["provider"]], 2)
    wrapper_us = round((times["fca_eager"] - times["fca_kernel"]) * 1e3, 1)
    for r in rows:
        r["wrapper_us"] = wrapper_us if r["provider"] == "fca_eager" else ""
    bound = n * (P + S) / (P + n * S)
    f = rows[0]
    line = (
        f"{sname} (G={G}, n={n}, P={P}, S={S}): fca kernel {f['time_us']} us = {f['GB_per_s']} GB/s "
        f"({f['pct_of_4.8TBps']}% of 4.8 TB/s, roofline {f['roofline_us']} us); vs no-share kernel "
        f"{f['speedup_vs_noshare_kernel']}x, vs SDPA {f['speedup_vs_sdpa']}x (KV-bytes bound {bound:.2f}x); "
        f"eager wrapper +{wrapper_us} us"
    )
    return rows, line


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry", action="store_true", help="tiny shapes on CPU under TRITON_INTERPRET=1")
    ap.add_argument("--out", default=None, help="results folder (default benchmarks/results/<device>/)")
    args = ap.parse_args(argv)
    if args.dry:
        device, heads, shapes, check_shape = "cpu", DRY, DRY_SHAPES, DRY_CHECK
    else:
        if not torch.cuda.is_available():
            print("bench_cascade: no CUDA device visible (use --dry for the CPU smoke)", file=sys.stderr)
            return 1
        device, heads, shapes, check_shape = "cuda", REAL, SHAPES, CHECK
    dtype = torch.bfloat16
    folder = results_dir(device, args.out)

    checks = check(check_shape, heads, dtype, device)
    checks += check(check_shape, heads, torch.float32, device)
    write_csv(folder / "cascade_check.csv", checks)
    failed = [r["check"] + "/" + r["dtype"] for r in checks if not r["ok"]]

    if args.dry:
        bench_kernel = bench_eager = lambda fn: time_cpu(fn, warmup=0, reps=1)["median_ms"]  # noqa: E731
    else:
        from triton.testing import do_bench, do_bench_cudagraph

        bench_kernel = lambda fn: do_bench_cudagraph(fn, rep=50, return_mode="median")  # noqa: E731
        bench_eager = lambda fn: do_bench(fn, warmup=25, rep=100, return_mode="median")  # noqa: E731
    rows, summary = [], []
    for sname, shape in shapes.items():
        shape_rows, line = bench_shape(sname, shape, heads, dtype, device, bench_kernel, bench_eager)
        rows += shape_rows
        summary.append(line)
        if device == "cuda":
            torch.cuda.empty_cache()
    write_csv(folder / "cascade.csv", rows)
    bar_png(folder / "cascade.png", [f"{r['shape']}/{r['provider']}" for r in rows], [r["time_us"] for r in rows],
            ylabel="time per layer (us)", title="\n".join(summary))  # fmt: skip
    stats = kernel_stats(C._fca_fwd_kernel, "_fca_fwd_kernel") + kernel_stats(
        C._fca_reduce_kernel, "_fca_reduce_kernel"
    )
    write_csv(folder / "cascade_kernels.csv", stats)
    for r in stats:
        print(f"kernel {r['kernel']} variant {r['variant']}: n_regs {r['n_regs']} n_spills {r['n_spills']}")
    for line in summary:
        print(line)
    bad_bench = [f"{r['shape']}/{r['provider']}" for r in rows if r["note"]]
    if failed or bad_bench:
        print(f"bench_cascade: FAILED checks {failed} providers {bad_bench} (see cascade_check.csv / cascade.csv)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
