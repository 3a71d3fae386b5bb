# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The capturable forest cascade attention on a CUDA GPU: capture plan update + attention in one CUDA graph, replay
it on batches of different group structure (metadata refilled in place), and check that neither the group sizes nor
the split count make Triton compile again. CPU coverage of the same launch: test_cascade_planned_on_cpu.py."""

import pytest
import torch

pytest.importorskip("triton")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (CPU coverage: *_planned_on_cpu.py)"),
]

from arctic_platform.kernels import cascade as C  # noqa: E402

MAX_B, MAX_G, HKV, QPK, BS = 32, 8, 8, 4, 16
BATCHES = [((8, 8, 8, 8), 256), ((16, 1, 5, 3, 7), 160), ((1,) * 8, 64), ((32,), 512)]


def compiled_variants(kernel) -> int:
    """Compiled specializations of a @triton.jit kernel on this device (triton 3.x keeps them per device)."""
    caches = getattr(kernel, "device_caches", None)
    if caches is not None:
        return sum(len(v[0]) for v in caches.values())
    cache = getattr(kernel, "cache", None)
    if cache is not None:
        return sum(len(v) for v in cache.values())
    pytest.skip("this triton keeps no inspectable kernel cache")


def padded(case, dev):
    """The case's metadata padded to fixed shapes (MAX_G groups, MAX_B rows, fixed table widths)."""
    kw = case.kw
    G, B = kw["prefix_lens"].numel(), case.q.shape[0]
    starts = kw["group_starts"].tolist() + [B] * (MAX_G - G)
    pbt = torch.zeros((MAX_G, 40), dtype=torch.int32, device=dev)
    pbt[:G, : kw["prefix_block_tables"].shape[1]] = kw["prefix_block_tables"]
    sbt = torch.zeros((MAX_B, 24), dtype=torch.int32, device=dev)
    sbt[:B, : kw["suffix_block_tables"].shape[1]] = kw["suffix_block_tables"]
    plen = torch.zeros(MAX_G, dtype=torch.int32, device=dev)
    plen[:G] = kw["prefix_lens"]
    slen = torch.zeros(MAX_B, dtype=torch.int32, device=dev)
    slen[:B] = kw["suffix_lens"]
    return torch.tensor(starts, dtype=torch.int32, device=dev), pbt, plen, sbt, slen


@pytest.mark.parametrize("D", [128, 256])
@pytest.mark.parametrize("splits", [1, 3])
def test_cuda_graph_replay_matches_reference_across_batches(fca, D, splits):
    dev = "cuda"
    plan = C.make_fca_plan(max_batch=MAX_B, max_groups=MAX_G, num_heads=HKV * QPK, num_kv_heads=HKV, head_dim=D,
                           block_size=BS, dtype=torch.bfloat16, device=dev, num_splits=splits)  # fmt: skip
    cases = [fca.build_case(s, p, suffix_max=200, Hkv=HKV, qpk=QPK, D=D, bs=BS, dtype=torch.bfloat16, device=dev,
                            seed=i) for i, (s, p) in enumerate(BATCHES)]  # fmt: skip
    blocks = max(c.k.shape[0] for c in cases)
    k = torch.zeros((blocks, BS, HKV, D), dtype=torch.bfloat16, device=dev)
    v = torch.zeros_like(k)
    q = torch.zeros((MAX_B, HKV * QPK, D), dtype=torch.bfloat16, device=dev)
    static = [t.clone() for t in padded(cases[0], dev)]

    def step():
        C.fca_plan_update(plan, static[0])
        return C.forest_cascade_attention_planned(q, k, v, plan, prefix_block_tables=static[1],
                                                  prefix_lens=static[2], suffix_block_tables=static[3],
                                                  suffix_lens=static[4])  # fmt: skip

    def load(case):
        k.zero_(), v.zero_(), q.zero_()
        k[: case.k.shape[0]], v[: case.v.shape[0]] = case.k, case.v
        q[: case.q.shape[0]] = case.q
        for dst, src in zip(static, padded(case, dev), strict=True):
            dst.copy_(src)

    load(cases[0])
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()  # warm-up: compile outside the capture
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = step()
    variants = compiled_variants(C._fca_fwd_kernel)
    for case in cases:
        load(case)
        graph.replay()
        torch.cuda.synchronize()
        B = case.q.shape[0]
        fca.assert_close(out[:B].clone(), lse[:B].clone(), case, what=f"graph replay {case.sizes} D={D}")
        # eager planned calls with these shapes compile nothing new either
        step()
    assert compiled_variants(C._fca_fwd_kernel) == variants


def test_eager_path_compiles_once_per_m_bucket(fca):
    """Different batches (group sizes 5..8 share the M=32 bucket, split counts 1-vs-many aside) reuse the kernel."""
    for i, (sizes, splits) in enumerate((((8, 8), 2), ((5, 7, 6), 3), ((6,), 5), ((8, 5), 7))):
        case = fca.build_case(sizes, 64, suffix_max=50, Hkv=HKV, qpk=QPK, D=128, bs=BS, dtype=torch.bfloat16,
                              device="cuda", seed=i)  # fmt: skip
        out, lse = C.forest_cascade_attention(case.q, case.k, case.v, **case.kw, return_lse=True, num_splits=splits)
        fca.assert_close(out, lse, case)
        if i == 0:
            variants = compiled_variants(C._fca_fwd_kernel)
    assert compiled_variants(C._fca_fwd_kernel) == variants
