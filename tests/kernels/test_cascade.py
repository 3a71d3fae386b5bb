# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Forest cascade attention on a CUDA GPU at the real shape (Qwen3-8B: Hq 32, Hkv 8, D 128, block 16).

Tolerance: FlashAttention's rule (error vs fp64 <= 2x plain torch at the same dtype), see
conftest.assert_attention_close. fp32 inputs use IEEE fp32 dots in the kernel (no TF32), so the rule holds there too.
"""

import pytest
import torch

pytest.importorskip("triton")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (CPU coverage: test_cascade_on_cpu.py)"),
]

from arctic_platform.kernels.cascade import build_forest_metadata, forest_cascade_attention  # noqa: E402

REAL = dict(Hkv=8, qpk=4, D=128, bs=16)
DTYPES = [pytest.param(torch.bfloat16, id="bf16"), pytest.param(torch.float16, id="fp16"),
          pytest.param(torch.float32, id="fp32")]  # fmt: skip
CASES = {
    "grpo-8x4": ((8, 8, 8, 8), 256, {"suffix_max": 128}),
    "uneven": ((8, 1, 5, 3), 160, {"suffix_max": 200}),
    "empty-prefix": ((4, 4), 0, {"suffix_max": 64}),
    "unaligned-prefix": ((3, 6), 100, {"suffix_max": 40}),
    "big-group": ((32,), 512, {"suffix_max": 64}),
}


@pytest.mark.parametrize("kern", [{}, {"num_splits": 1, "block_n": 32}, {"num_splits": 5, "block_n": 64}],
                         ids=["default", "s1-bn32", "s5-bn64"])  # fmt: skip
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(CASES))
def test_kernel_matches_reference_on_gpu(fca, name, dtype, kern):
    sizes, plen, case_kw = CASES[name]
    case = fca.build_case(sizes, plen, dtype=dtype, device="cuda", seed=1, **REAL, **case_kw)
    out, lse = forest_cascade_attention(case.q, case.k, case.v, **case.kw, return_lse=True, **kern)
    fca.assert_close(out, lse, case)  # rule and reason: conftest.assert_attention_close


def test_metadata_roundtrip_on_gpu(fca):
    """build_forest_metadata on CUDA tensors, kernel on the packed batch, outputs back in the caller's order."""
    g = torch.Generator().manual_seed(0)
    G, n, P, bs = 6, 4, 70, 16
    B = G * n
    rows, seq_lens, gids = [], [], []
    page = iter(torch.randperm(2000, generator=g).tolist())
    for gi in range(G):
        shared = [next(page) for _ in range(P // bs)]
        for _ in range(n):
            total = P + int(torch.randint(1, 90, (1,), generator=g))
            rows.append(shared + [next(page) for _ in range(-(-total // bs) - len(shared))])
            seq_lens.append(total)
            gids.append(gi)
    nb = max(map(len, rows))
    bt = torch.zeros(B, nb, dtype=torch.int32)
    for r, row in enumerate(rows):
        bt[r, : len(row)] = torch.tensor(row)
    shuffle = torch.randperm(B, generator=g)
    bt, seq_lens, gids = bt[shuffle].cuda(), torch.tensor(seq_lens)[shuffle].cuda(), torch.tensor(gids)[shuffle].cuda()
    k = torch.randn(2000, bs, 8, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(2000, bs, 8, 128, device="cuda", dtype=torch.bfloat16)
    q = torch.randn(B, 32, 128, device="cuda", dtype=torch.bfloat16)
    meta = build_forest_metadata(bt, seq_lens, gids, bs)
    assert meta.prefix_lens.tolist() == [64] * G
    packed, lse_p = forest_cascade_attention(q[meta.perm], k, v, **meta.attention_kwargs(), return_lse=True)
    out, lse = torch.empty_like(packed), torch.empty_like(lse_p)
    out[meta.perm], lse[meta.perm] = packed, lse_p
    plain_kw = fca.plain_decode_kwargs(bt, seq_lens)
    case = type("Case", (), dict(q=q, k=k, v=v, kw=plain_kw))
    fca.assert_close(out, lse, case, what="forest metadata vs plain paged decode")
