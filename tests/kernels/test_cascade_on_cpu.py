# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Forest cascade attention on CPU: the Triton kernel (interpreted) vs the torch reference, invariances, metadata,
and the LSE merge (the vLLM enablement rule is tested with the integration: test_vllm_config_on_cpu.py).

Interpreter budget: each kernel case keeps sum(programs x KV tiles) well under ~200 (docs/kernels.md §5).
"""

import math

import pytest
import torch

from arctic_platform.kernels.cascade import (
    build_forest_metadata,
    forest_cascade_attention,
    forest_cascade_attention_reference,
    merge_attn_states,
)

DTYPES = [pytest.param(torch.float32, id="fp32"), pytest.param(torch.bfloat16, id="bf16")]

# (sizes, prefix_len, case kwargs, kernel kwargs)
CASES = {
    "uneven": ((4, 1, 3), 48, {}, {"block_n": 16, "num_splits": 1}),
    "uneven-split3": ((4, 1, 3), 48, {}, {"block_n": 32, "num_splits": 3}),
    "singletons-qpk3": ((1, 1, 1), 32, {"qpk": 3, "suffix_max": 24}, {"block_n": 16, "num_splits": 2}),
    "empty-prefix": ((3, 2), 0, {"suffix_lens": [0, 17, 40, 5, 33]}, {"block_n": 16, "num_splits": 2}),
    "unaligned-prefix-bs32": ((2, 3), 40, {"bs": 32}, {"block_n": 16, "num_splits": 1}),
    "suffix-crossing-pages": ((3,), 16, {"suffix_lens": [17, 33, 47]}, {"block_n": 16, "num_splits": 1}),
    "multi-tile-group": ((12,), 32, {"suffix_max": 16}, {"block_n": 32, "num_splits": 1, "m_max": 16}),
    "mqa-d128": ((2, 3), 32, {"Hkv": 1, "D": 128, "suffix_max": 20}, {"block_n": 32, "num_splits": 1}),
    "empty-splits": ((2,), 16, {"suffix_max": 10}, {"block_n": 16, "num_splits": 4}),
    "mixed-prefix-lens": ((2, 2, 1), None, {"prefix_lens": [0, 45, 16]}, {"block_n": 16, "num_splits": 2}),
}


def on(device, kw):
    """The kernel arguments moved to the Triton device (CPU under the interpreter, CUDA on a GPU host)."""
    return {k: v.to(device) for k, v in kw.items()}


def run_case(fca, name, dtype, device, seed=0):
    sizes, plen, case_kw, kern_kw = CASES[name]
    case = fca.build_case(sizes, plen, dtype=dtype, seed=seed, device=device, **case_kw)
    out, lse = forest_cascade_attention(case.q, case.k, case.v, **case.kw, return_lse=True, **kern_kw)
    return case, out, lse, kern_kw


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(CASES))
def test_kernel_matches_reference(fca, triton_device, name, dtype):
    case, out, lse, _ = run_case(fca, name, dtype, triton_device)
    assert out.dtype == dtype and out.shape == case.q.shape and lse.dtype == torch.float32
    fca.assert_close(out, lse, case)  # tolerance rule and its reason: conftest.assert_attention_close


def test_reference_matches_plain_torch(fca):
    """The reference itself against plain fp64 attention on gathered keys (the spec checked once, independently)."""
    case = fca.build_case((3, 1, 2), 40, dtype=torch.float64, seed=3)
    ref, ref_lse = forest_cascade_attention_reference(case.q, case.k, case.v, **case.kw, return_lse=True)
    pt, pt_lse = fca.plain_attention(case.q, case.k, case.v, case.kw)
    # fp64 on both sides: only summation-order rounding differs (~1e-15); 1e-12 leaves margin, a bug is >= 1e-3.
    assert (ref - pt).abs().max() <= 1e-12
    assert (ref_lse - pt_lse).abs().max() <= 1e-12


def test_empty_requests_give_zero_and_neg_inf(fca, triton_device):
    """No prefix and no suffix: output exactly 0 and LSE -inf (never NaN), in the kernel and the reference."""
    case = fca.build_case((2, 1), 0, suffix_lens=[0, 9, 0], device=triton_device)
    for split in (1, 2):
        out, lse = forest_cascade_attention(case.q, case.k, case.v, **case.kw, return_lse=True, block_n=16,
                                            num_splits=split)  # fmt: skip
        assert torch.equal(out[[0, 2]], torch.zeros_like(out[[0, 2]]))
        assert torch.isneginf(lse[[0, 2]]).all() and torch.isfinite(lse[1]).all()
        assert not out.isnan().any()
    ref, ref_lse = forest_cascade_attention_reference(case.q, case.k, case.v, **case.kw, return_lse=True)
    assert torch.equal(ref[[0, 2]], torch.zeros_like(ref[[0, 2]])) and torch.isneginf(ref_lse[[0, 2]]).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_singleton_groups_with_empty_prefix_equal_plain_paged_decode(fca, triton_device, dtype):
    """Invariance (i): every request its own group, prefix 0 == plain paged decode over the block tables."""
    g = torch.Generator().manual_seed(11)
    B, bs, Hkv, qpk, D = 5, 16, 2, 4, 64
    seq_lens = torch.randint(1, 60, (B,), generator=g)
    nb = int((seq_lens + bs - 1).div(bs, rounding_mode="floor").max())
    pages = torch.randperm(B * nb + 3, generator=g)[: B * nb].view(B, nb).int()
    k = torch.randn(B * nb + 3, bs, Hkv, D, generator=g).to(dtype)
    v = torch.randn(B * nb + 3, bs, Hkv, D, generator=g).to(dtype)
    q = torch.randn(B, Hkv * qpk, D, generator=g).to(dtype)
    kw = fca.plain_decode_kwargs(pages, seq_lens)
    dev = triton_device
    out, lse = forest_cascade_attention(
        q.to(dev), k.to(dev), v.to(dev), **on(dev, kw), return_lse=True, block_n=32, num_splits=2
    )
    out, lse = out.cpu(), lse.cpu()
    # Plain paged decode, written independently of the forest arguments: one block-table row per request.
    ref = torch.empty(B, Hkv * qpk, D, dtype=torch.float64)
    for r in range(B):
        t = torch.arange(int(seq_lens[r]))
        kk = k[pages[r, t // bs].long(), t % bs].double().repeat_interleave(qpk, 1)
        vv = v[pages[r, t // bs].long(), t % bs].double().repeat_interleave(qpk, 1)
        s = torch.einsum("hd,lhd->hl", q[r].double(), kk) / math.sqrt(D)
        ref[r] = torch.einsum("hl,lhd->hd", s.softmax(-1), vv)
    case = type("Case", (), dict(q=q, k=k, v=v, kw=kw))
    err, _ = fca.assert_close(out, lse, case)  # rule and reason: conftest.assert_attention_close
    assert (out.double() - ref).abs().max().item() <= err + 1e-12  # same truth, computed without forest metadata


@pytest.mark.parametrize("dtype", DTYPES)
def test_moving_a_block_from_prefix_to_suffix_changes_nothing(fca, triton_device, dtype):
    """Invariance (ii): the last prefix block moved to the front of every member's suffix gives the same result."""
    case = fca.build_case((3, 2), 48, dtype=dtype, seed=5, suffix_max=30)
    bs = case.bs
    moved = dict(case.kw)
    pbt, sbt = case.kw["prefix_block_tables"], case.kw["suffix_block_tables"]
    group_of = torch.repeat_interleave(torch.arange(2), torch.tensor(case.sizes))
    last = pbt[:, 2]  # third (last) prefix block of each group
    moved["prefix_lens"] = case.kw["prefix_lens"] - bs
    moved["prefix_block_tables"] = pbt.clone().index_fill_(1, torch.tensor([2]), 0)
    moved["suffix_block_tables"] = torch.cat([last[group_of][:, None], sbt], dim=1)
    moved["suffix_lens"] = case.kw["suffix_lens"] + bs
    kern = dict(block_n=16, num_splits=2)
    dev = triton_device
    q, k, v = case.q.to(dev), case.k.to(dev), case.v.to(dev)
    a, lse_a = (t.cpu() for t in forest_cascade_attention(q, k, v, **on(dev, case.kw), return_lse=True, **kern))
    b, lse_b = (t.cpu() for t in forest_cascade_attention(q, k, v, **on(dev, moved), return_lse=True, **kern))
    ref_a = forest_cascade_attention_reference(case.q.double(), case.k.double(), case.v.double(), **case.kw)
    ref_b = forest_cascade_attention_reference(case.q.double(), case.k.double(), case.v.double(), **moved)
    # fp64 references: only summation order differs (~1e-15).
    assert (ref_a - ref_b).abs().max() <= 1e-12
    err_a, err_pt = fca.assert_close(a, lse_a, case)
    moved_case = type("Case", (), dict(q=case.q, k=case.k, v=case.v, kw=moved))
    err_b, _ = fca.assert_close(b, lse_b, moved_case)
    # Both within the rounding budget of the truth, so within twice that budget of each other.
    assert (a.double() - b.double()).abs().max().item() <= err_a + err_b + 1e-12


def test_permuting_groups_permutes_outputs(fca, triton_device):
    """Invariance (iii): same groups in another order -> the same rows, bit for bit (programs are independent)."""
    case = fca.build_case((3, 1, 2), 32, seed=8, suffix_max=30)
    kern = dict(block_n=16, num_splits=2)
    dev = triton_device
    q, k, v = case.q.to(dev), case.k.to(dev), case.v.to(dev)
    out, lse = (t.cpu() for t in forest_cascade_attention(q, k, v, **on(dev, case.kw), return_lse=True, **kern))
    order = [2, 0, 1]
    gs = case.kw["group_starts"].tolist()
    rows = torch.tensor([r for g in order for r in range(gs[g], gs[g + 1])])
    new_starts = [0]
    for g in order:
        new_starts.append(new_starts[-1] + case.sizes[g])
    kw = dict(
        group_starts=torch.tensor(new_starts, dtype=torch.int32),
        prefix_block_tables=case.kw["prefix_block_tables"][order],
        prefix_lens=case.kw["prefix_lens"][order],
        suffix_block_tables=case.kw["suffix_block_tables"][rows],
        suffix_lens=case.kw["suffix_lens"][rows],
    )
    out2, lse2 = (
        t.cpu() for t in forest_cascade_attention(q[rows.to(dev)], k, v, **on(dev, kw), return_lse=True, **kern)
    )
    assert torch.equal(out2, out[rows]) and torch.equal(lse2, lse[rows])


def _grpo_batch(g, bs=16, Hkv=2, D=64, qpk=4):
    """A paged GRPO batch in shuffled order: full prompt blocks shared by a group's members, the rest private."""
    prompts = [37, 16, 50, 40]  # group 3 is a singleton; group 1's prompt fills exactly one block
    members = [3, 2, 2, 1]
    rows, gids, seq_lens = [], [], []
    next_page = iter(torch.randperm(200, generator=g).tolist())
    for gi, (plen, n) in enumerate(zip(prompts, members, strict=True)):
        shared = [next(next_page) for _ in range(plen // bs)]
        for _ in range(n):
            total = plen + int(torch.randint(1, 30, (1,), generator=g))
            own = [next(next_page) for _ in range(-(-total // bs) - len(shared))]
            rows.append(shared + own)
            gids.append(gi * 7 + 3)  # arbitrary labels
            seq_lens.append(total)
    # Group 2: one member diverges after the first shared block (no prefix caching for its second block).
    i = gids.index(2 * 7 + 3)
    rows[i][1] = next(next_page)
    nb = max(len(r) for r in rows) + 1
    bt = torch.zeros((len(rows), nb), dtype=torch.int32)
    for r, row in enumerate(rows):
        bt[r, : len(row)] = torch.tensor(row)
    shuffle = torch.randperm(len(rows), generator=g)
    k = torch.randn(200, bs, Hkv, D, generator=g)
    v = torch.randn(200, bs, Hkv, D, generator=g)
    q = torch.randn(len(rows), Hkv * qpk, D, generator=g)
    return bt[shuffle], torch.tensor(seq_lens)[shuffle], torch.tensor(gids)[shuffle], q, k, v


def test_build_forest_metadata_shares_only_common_full_blocks():
    g = torch.Generator().manual_seed(2)
    bt, seq_lens, gids, _, _, _ = _grpo_batch(g)
    meta = build_forest_metadata(bt, seq_lens, gids, 16)
    assert meta.group_starts.tolist() == [0, 3, 5, 7, 8]
    assert gids[meta.perm].tolist() == sorted(gids.tolist())  # groups contiguous, in label order
    # 37-token prompt: 2 full shared blocks; 16: 1; 50 with a diverging member: 1; singleton: all its full blocks.
    single = int(seq_lens[meta.perm][7])
    assert meta.prefix_lens.tolist() == [32, 16, 16, (single // 16) * 16]
    gidx = torch.repeat_interleave(torch.arange(4), meta.group_starts.diff().long())
    assert torch.equal(meta.suffix_lens.long(), seq_lens[meta.perm] - meta.prefix_lens.long()[gidx])
    for r in range(8):  # every packed row = its group's prefix blocks followed by its suffix blocks
        pb = int(meta.prefix_lens[gidx[r]]) // 16
        full = bt[meta.perm[r]]
        assert torch.equal(meta.prefix_block_tables[gidx[r], :pb], full[:pb])
        n_suffix = -(-int(meta.suffix_lens[r]) // 16)
        assert torch.equal(meta.suffix_block_tables[r, :n_suffix], full[pb : pb + n_suffix])


@pytest.mark.parametrize("dtype", DTYPES)
def test_kernel_on_built_metadata_equals_plain_decode(fca, triton_device, dtype):
    g = torch.Generator().manual_seed(4)
    bt, seq_lens, gids, q, k, v = _grpo_batch(g)
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    meta = build_forest_metadata(bt, seq_lens, gids, 16)
    dev = triton_device
    packed, lse_p = forest_cascade_attention(
        q[meta.perm].to(dev), k.to(dev), v.to(dev), **on(dev, meta.attention_kwargs()), return_lse=True,
        block_n=32, num_splits=2,
    )  # fmt: skip
    packed, lse_p = packed.cpu(), lse_p.cpu()
    out = torch.empty_like(packed)
    out[meta.perm] = packed
    # The same batch as plain paged decode: singleton groups, prefix 0, the original block tables as suffixes.
    plain_kw = fca.plain_decode_kwargs(bt, seq_lens)
    lse = torch.empty_like(lse_p)
    lse[meta.perm] = lse_p
    case = type("Case", (), dict(q=q, k=k, v=v, kw=plain_kw))
    fca.assert_close(out, lse, case, what="forest metadata vs plain paged decode")


def _attend(q, k, v):
    """fp64 attention of q [H, D] over keys [L, H, D]; (o, lse), with o = 0 and lse = -inf when L == 0."""
    s = torch.einsum("hd,lhd->hl", q, k)
    if k.shape[0] == 0:
        return torch.zeros(q.shape, dtype=q.dtype), torch.full(q.shape[:1], -math.inf, dtype=q.dtype)
    return torch.einsum("hl,lhd->hd", s.softmax(-1), v), torch.logsumexp(s, -1)


@pytest.mark.parametrize("split", [0, 7, 20, 25], ids=["a-empty", "mid", "mid2", "b-empty"])
def test_merge_attn_states_matches_logsumexp(split):
    g = torch.Generator().manual_seed(split)
    H, D, L = 4, 16, 25
    q = torch.randn(H, D, generator=g, dtype=torch.float64)
    k = torch.randn(L, H, D, generator=g, dtype=torch.float64)
    v = torch.randn(L, H, D, generator=g, dtype=torch.float64)
    o_a, lse_a = _attend(q, k[:split], v[:split])
    o_b, lse_b = _attend(q, k[split:], v[split:])
    o, lse = merge_attn_states(o_a, lse_a, o_b, lse_b)
    o_full, lse_full = _attend(q, k, v)
    s = torch.einsum("hd,lhd->hl", q, k)
    # fp64 throughout: only rounding of exp/log and the sums differs (~1e-15); 1e-12 leaves margin.
    assert (lse - torch.logsumexp(s, -1)).abs().max() <= 1e-12
    assert (o - o_full).abs().max() <= 1e-12 and (lse - lse_full).abs().max() <= 1e-12
    if split in (0, 25):  # one side empty: the other side comes back unchanged, bit for bit
        assert torch.equal(o, o_b if split == 0 else o_a)


def test_merge_attn_states_both_empty_and_dtypes():
    o_a = torch.randn(3, 8, dtype=torch.bfloat16)
    o_b = torch.randn(3, 8, dtype=torch.bfloat16)
    neg = torch.full((3,), -math.inf)
    o, lse = merge_attn_states(o_a, neg, o_b, torch.tensor([-math.inf, 0.5, -math.inf]))
    assert o.dtype == torch.bfloat16 and lse.dtype == torch.float32
    assert torch.equal(o[[0, 2]], torch.zeros(2, 8, dtype=torch.bfloat16)) and torch.isneginf(lse[[0, 2]]).all()
    assert torch.equal(o[1], o_b[1]) and lse[1].item() == 0.5
    assert not o.isnan().any()
    with pytest.raises(ValueError, match="shapes"):
        merge_attn_states(o_a, neg, o_b[:2], neg[:2])


def test_kernel_argument_checks(fca, triton_device):
    dev = triton_device
    case = fca.build_case((2,), 16, suffix_max=8, device=dev)
    kw = case.kw
    with pytest.raises(ValueError, match="BLOCK_N >= 16"):
        forest_cascade_attention(case.q, case.k, case.v, **kw, block_n=8)
    small = fca.build_case((2,), 16, suffix_max=8, D=8, device=dev)
    with pytest.raises(ValueError, match="D >= 16"):
        forest_cascade_attention(small.q, small.k, small.v, **small.kw)
    odd = fca.build_case((2,), 16, suffix_max=8, D=48, device=dev)
    with pytest.raises(ValueError, match="power of two"):
        forest_cascade_attention(odd.q, odd.k, odd.v, **odd.kw)
    bad = dict(kw, group_starts=torch.tensor([0, 1], dtype=torch.int32, device=dev))
    with pytest.raises(ValueError, match="group_starts"):
        forest_cascade_attention(case.q, case.k, case.v, **bad)
    with pytest.raises(ValueError, match="group_starts"):
        forest_cascade_attention_reference(case.q, case.k, case.v, **bad)
    too_long = dict(kw, prefix_lens=torch.tensor([10_000], dtype=torch.int32, device=dev))
    with pytest.raises(ValueError, match="prefix_lens must lie"):
        forest_cascade_attention(case.q, case.k, case.v, **too_long)
    with pytest.raises(TypeError, match="float32, bfloat16 and float16"):
        forest_cascade_attention(case.q.double(), case.k.double(), case.v.double(), **kw)
    with pytest.raises(ValueError, match="multiple of Hkv"):
        forest_cascade_attention_reference(case.q[:, :7], case.k, case.v, **kw)
