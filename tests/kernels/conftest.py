# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Kernel tests: run the Triton paths under the interpreter on CPU-only hosts.

Triton (3.x) decides between compiler and interpreter when a ``@triton.jit`` function is *defined*, i.e. when
``arctic_platform.kernels.densify`` / ``.cascade`` is first imported in a process. ``monkeypatch.setenv`` inside a
test is too late once another test in the same xdist worker has imported the module, so this conftest (imported
before any test module of this folder) sets ``TRITON_INTERPRET=1`` at import time. Cheap: no torch import here.
On a CUDA host it is left unset, so the GPU tests compile real kernels and the ``_on_cpu`` Triton cases run their
Triton path on the GPU instead; an explicit ``TRITON_INTERPRET`` in the environment always wins.
"""

import os

import pytest


def _cuda_host() -> bool:
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")


if not _cuda_host():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def triton_device() -> str:
    """Device for the Triton path: "cpu" under the interpreter, else "cuda"; skips when neither is possible."""
    pytest.importorskip("triton")
    from arctic_platform.kernels._utils import interpret_env

    if interpret_env():
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    pytest.skip("Triton path needs CUDA or TRITON_INTERPRET=1")


# ---------------------------------------------------------------------------------------------------------------
# Forest cascade attention cases, shared by test_cascade_on_cpu.py and test_cascade.py (torch imported lazily)
# ---------------------------------------------------------------------------------------------------------------
POISON_K, POISON_V = 30.0, 1.0e4  # written into every cache slot no request may read: a masking bug cannot hide


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def build_fca_case(sizes, prefix_len, *, suffix_lens=None, suffix_max=40, Hkv=2, qpk=4, D=64, bs=16,
                   dtype=None, seed=0, device="cpu", prefix_lens=None):  # fmt: skip
    """A forest batch on randomly permuted physical pages; unused slots poisoned. Returns a SimpleNamespace.

    ``sizes``: members per group. ``prefix_len``: tokens of every group's prefix (or ``prefix_lens`` per group).
    """
    import types

    import torch

    dtype = dtype or torch.float32
    g = torch.Generator().manual_seed(seed)
    B, G = sum(sizes), len(sizes)
    plens = list(prefix_lens) if prefix_lens is not None else [prefix_len] * G
    slens = (
        list(suffix_lens) if suffix_lens is not None else torch.randint(0, suffix_max + 1, (B,), generator=g).tolist()
    )
    pblocks = [_cdiv(p, bs) for p in plens]
    sblocks = [_cdiv(s, bs) for s in slens]
    nblocks = sum(pblocks) + sum(sblocks) + 2  # two spare pages nobody references
    k = torch.full((nblocks, bs, Hkv, D), POISON_K)
    v = torch.full((nblocks, bs, Hkv, D), POISON_V)
    pages = iter(torch.randperm(nblocks, generator=g).tolist())
    pbt = torch.zeros((G, max(pblocks + [0]) + 1), dtype=torch.int32)  # one extra unused column
    sbt = torch.zeros((B, max(sblocks + [0]) + 1), dtype=torch.int32)

    def fill(table_row, n_tokens, n_blocks):
        for j in range(n_blocks):
            page = next(pages)
            table_row[j] = page
            used = min(bs, n_tokens - j * bs)
            k[page, :used] = torch.randn(used, Hkv, D, generator=g)
            v[page, :used] = torch.randn(used, Hkv, D, generator=g)

    for gi in range(G):
        fill(pbt[gi], plens[gi], pblocks[gi])
    for r in range(B):
        fill(sbt[r], slens[r], sblocks[r])
    starts = [0]
    for s in sizes:
        starts.append(starts[-1] + s)
    q = torch.randn(B, Hkv * qpk, D, generator=g)
    kw = dict(
        group_starts=torch.tensor(starts, dtype=torch.int32, device=device),
        prefix_block_tables=pbt.to(device),
        prefix_lens=torch.tensor(plens, dtype=torch.int32, device=device),
        suffix_block_tables=sbt.to(device),
        suffix_lens=torch.tensor(slens, dtype=torch.int32, device=device),
    )
    return types.SimpleNamespace(
        q=q.to(dtype).to(device), k=k.to(dtype).to(device), v=v.to(dtype).to(device), kw=kw, sizes=list(sizes),
        prefix_lens=plens, suffix_lens=slens, bs=bs,
    )  # fmt: skip


def plain_decode_kwargs(block_tables, seq_lens):
    """Forest arguments for plain paged decode: every request its own group, an empty prefix, its block-table row
    as the suffix (on the block tables' device)."""
    import torch

    B, dev = block_tables.shape[0], block_tables.device
    return dict(
        group_starts=torch.arange(B + 1, dtype=torch.int32, device=dev),
        prefix_block_tables=torch.zeros((B, 1), dtype=torch.int32, device=dev),
        prefix_lens=torch.zeros(B, dtype=torch.int32, device=dev),
        suffix_block_tables=block_tables,
        suffix_lens=seq_lens.int(),
    )


def plain_attention(q, k_cache, v_cache, kw, scale=None):
    """Plain torch at q's dtype (no upcast): per request gather prefix + suffix keys, softmax, weighted sum.

    The "error of plain torch at the same dtype" of the FlashAttention tolerance rule. Returns (out, lse).
    """
    import torch

    B, Hq, D = q.shape
    bs, Hkv = k_cache.shape[1], k_cache.shape[2]
    scale = D**-0.5 if scale is None else scale
    out = torch.zeros_like(q)
    lse = torch.full((B, Hq), float("-inf"), dtype=q.dtype, device=q.device)
    gs = kw["group_starts"].tolist()

    def gather(cache, row, n):
        t = torch.arange(n, device=cache.device)
        return cache[row[t // bs].long(), t % bs]

    for gi in range(len(gs) - 1):
        pn = int(kw["prefix_lens"][gi])
        for r in range(gs[gi], gs[gi + 1]):
            sn = int(kw["suffix_lens"][r])
            kk = torch.cat(
                [gather(k_cache, kw["prefix_block_tables"][gi], pn), gather(k_cache, kw["suffix_block_tables"][r], sn)]
            )
            vv = torch.cat(
                [gather(v_cache, kw["prefix_block_tables"][gi], pn), gather(v_cache, kw["suffix_block_tables"][r], sn)]
            )
            if kk.shape[0] == 0:
                continue
            kk, vv = kk.repeat_interleave(Hq // Hkv, 1), vv.repeat_interleave(Hq // Hkv, 1)
            s = torch.einsum("hd,lhd->hl", q[r], kk) * scale
            lse[r] = torch.logsumexp(s, -1)
            out[r] = torch.einsum("hl,lhd->hd", torch.softmax(s, -1), vv)
    return out, lse


def assert_attention_close(out, lse, case, scale=None, what="kernel"):
    """FlashAttention's rule: error vs an fp64 reference <= 2x the error of plain torch at the input dtype.

    Floor: 4 fp32 ulps of the output scale. The kernel always computes in fp32, so for fp32 inputs both errors are
    a few ulps (~1e-7) and their ratio is rounding noise (0.95x-2.2x over seeds, measured); the floor absorbs that
    noise and is >= 1e3 times below what a real bug (a wrong mask, scale, page or merge) produces here, because
    unused cache slots hold poison values. For bf16 inputs the floor is ~1e4 times below the bf16 error, so the
    rule is effectively the plain 2x bound.
    """
    import torch

    from arctic_platform.kernels.cascade import forest_cascade_attention_reference

    ref, ref_lse = forest_cascade_attention_reference(
        case.q.double(), case.k.double(), case.v.double(), **case.kw, scale=scale, return_lse=True
    )
    pt, pt_lse = plain_attention(case.q, case.k, case.v, case.kw, scale=scale)
    eps32 = torch.finfo(torch.float32).eps
    err = (out.double() - ref).abs().max().item()
    err_pt = (pt.double() - ref).abs().max().item()
    floor = 4 * eps32 * max(ref.abs().max().item(), 1.0)
    assert err <= 2 * err_pt + floor, f"{what}: out error {err:.3g} > 2 x plain torch {err_pt:.3g} + {floor:.2g}"
    if lse is not None:
        assert torch.equal(torch.isneginf(lse), torch.isneginf(ref_lse)), "LSE -inf pattern differs (empty requests)"
        fin = torch.isfinite(ref_lse)
        lerr = (lse.double() - ref_lse)[fin].abs().max().item() if fin.any() else 0.0
        lerr_pt = (pt_lse.double() - ref_lse)[fin].abs().max().item() if fin.any() else 0.0
        lfloor = 4 * eps32 * max(ref_lse[fin].abs().max().item() if fin.any() else 1.0, 1.0)
        # Same rule for the LSE; natural log on both sides.
        assert lerr <= 2 * lerr_pt + lfloor, (
            f"{what}: LSE error {lerr:.3g} > 2 x plain torch {lerr_pt:.3g} + {lfloor:.2g}"
        )
    return err, err_pt


@pytest.fixture(scope="session")
def fca():
    """The case builder and checks above, for tests (conftest functions are not importable by test modules)."""
    import types

    return types.SimpleNamespace(
        build_case=build_fca_case,
        plain_decode_kwargs=plain_decode_kwargs,
        plain_attention=plain_attention,
        assert_close=assert_attention_close,
    )
