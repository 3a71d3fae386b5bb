# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""A tiny case of every Triton kernel, for ``compute-sanitizer --tool memcheck`` (gpu_check.sh's sanitizer step).

Forest cascade attention (eager, planned with an empty tail of tiles and padded groups, split reduce) at head dims
128 and 256, and densify with a holey-free jagged batch of uneven rows, each compared with its torch reference so
an out-of-bounds read that happens to return plausible data still has to produce the right numbers. Runs on CUDA,
or on CPU under TRITON_INTERPRET=1 (the dry mode: only proves the script). Exit status 1 on a wrong result.

    compute-sanitizer --tool memcheck --error-exitcode 3 python benchmarks/kernels/sanitize_case.py
"""

from __future__ import annotations

import sys

import torch

from arctic_platform.kernels import cascade as C
from arctic_platform.kernels.densify import densify_reference, densify_triton


def fca_case(D: int, dev: str) -> float:
    g = torch.Generator().manual_seed(D)
    bs, Hkv, qpk, sizes, plen = 16, 2, 4, (3, 1, 2), 32
    B, G = sum(sizes), len(sizes)
    nblocks = G * 2 + B * 2
    k = torch.randn(nblocks, bs, Hkv, D, generator=g).to(dev)
    v = torch.randn(nblocks, bs, Hkv, D, generator=g).to(dev)
    q = torch.randn(B, Hkv * qpk, D, generator=g).to(dev)
    pages = torch.randperm(nblocks, generator=g).to(torch.int32)
    kw = dict(
        group_starts=torch.tensor([0, 3, 4, 6], dtype=torch.int32, device=dev),
        prefix_block_tables=pages[: G * 2].view(G, 2).to(dev),
        prefix_lens=torch.full((G,), plen, dtype=torch.int32, device=dev),
        suffix_block_tables=pages[G * 2 :].view(B, 2).to(dev),
        suffix_lens=torch.tensor([1, 17, 32, 0, 9, 20], dtype=torch.int32, device=dev),
    )
    ref = C.forest_cascade_attention_reference(q.double(), k.double(), v.double(), **kw)
    err = (C.forest_cascade_attention(q, k, v, **kw, num_splits=2, block_n=16).double() - ref).abs().max().item()
    plan = C.make_fca_plan(max_batch=8, max_groups=4, num_heads=Hkv * qpk, num_kv_heads=Hkv, head_dim=D,
                           block_size=bs, dtype=q.dtype, device=dev, num_splits=3, block_n=16)  # fmt: skip
    gs = torch.tensor([0, 3, 4, 6, 6], dtype=torch.int32, device=dev)  # one padding group
    pad = dict(kw)
    pad.pop("group_starts")
    pad["prefix_lens"] = torch.cat([kw["prefix_lens"], kw["prefix_lens"].new_zeros(1)])
    pad["prefix_block_tables"] = torch.cat([kw["prefix_block_tables"], kw["prefix_block_tables"][:1] * 0])
    C.fca_plan_update(plan, gs)
    out, _ = C.forest_cascade_attention_planned(q, k, v, plan, **pad)
    return max(err, (out.double() - ref).abs().max().item())


def densify_case(dev: str) -> bool:
    g = torch.Generator().manual_seed(0)
    lp, lr = torch.tensor([0, 5, 16, 3]), torch.tensor([7, 0, 32, 1])

    def nt(vals, lens):
        off = torch.zeros(len(lens) + 1, dtype=torch.int64)
        off[1:] = lens.cumsum(0)
        return torch.nested.nested_tensor_from_jagged(vals.to(dev), off.to(dev))

    prompts = nt(torch.randint(0, 1000, (int(lp.sum()),), generator=g), lp)
    responses = nt(torch.randint(0, 1000, (int(lr.sum()),), generator=g), lr)
    fields = {"advantages": nt(torch.randn(int(lr.sum()), generator=g), lr)}
    kw = dict(max_prompt_len=16, max_response_len=32, pad_token_id=0, fields=fields)
    got = densify_triton(prompts, responses, **kw, block=16)
    want = densify_reference(prompts, responses, **kw)
    return all(torch.equal(got[n].cpu(), want[n].cpu()) for n in want)


def main() -> int:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    errs = {D: fca_case(D, dev) for D in (128, 256)}
    dens = densify_case(dev)
    if dev == "cuda":
        torch.cuda.synchronize()
    ok = all(e < 1e-4 for e in errs.values()) and dens  # fp32 inputs: IEEE dots, a few ulps (~1e-7) when correct
    print(f"sanitize_case on {dev}: fca max err {errs}, densify equal {dens} -> {'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
