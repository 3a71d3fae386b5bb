# Copyright 2026 The arctic-verl Authors
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
# SPDX-License-Identifier: Apache-2.0
"""Forest cascade attention: paged decode attention where groups of requests share a KV prefix.

GRPO decodes G prompts x n samples; the n samples of a prompt share the prompt's KV pages, yet plain paged decode
reads those pages once per sample. Here each group's shared prefix is read once per (group, kv-head): the group's
n x (Hq/Hkv) query rows are stacked into the M dimension of one ``tl.dot`` (tensor cores on the GPU), then each
member's own suffix pages are added with the same online softmax (Kernel A of docs/kernels.md §4.3).

Supported:

* decode (one query token per request), q [B, Hq, D]; requests sorted so each group is contiguous
  (``group_starts`` [G+1]); GQA/MQA (Hq a multiple of Hkv); D a power of two >= 16 (64, 128, 256);
* vLLM's paged layout: ``k_cache``/``v_cache`` [num_blocks, block_size, Hkv, D] (any strides);
* prefix and suffix are independent token lists of one block table each: token t of a prefix is slot ``t % bs`` of
  block ``prefix_block_tables[g, t // bs]`` (same for suffixes), so prefixes need not be block-aligned, and empty
  prefixes or suffixes are fine (fp32 online softmax in base 2, -inf safe: a request with no keys gets 0, LSE -inf);
* split-KV (``num_splits``) with a small reduce kernel, so G x Hkv programs can fill the GPU;
* groups larger than ``m_max // QPK`` members run as several tiles, each re-reading the shared prefix;
* fp32, bf16 and fp16 inputs. On the GPU half inputs use half ``tl.dot`` with fp32 accumulation (p is cast to the
  input dtype before p @ V, as FlashAttention does); fp32 inputs use IEEE fp32 dots (no TF32). Under the Triton
  interpreter every load is upcast to fp32 (bf16 arithmetic is wrong there) and dots run in fp32.

Limits: no speculative decode (q_len > 1), no ALiBi / sliding window / soft-cap / sinks. The eager
:func:`forest_cascade_attention` validates and plans on the host (a few syncs per call). The capturable path
(docs/kernels.md §4.5) is :func:`make_fca_plan` (fixed-size buffers, once) + :func:`fca_plan_update` (device-side
tile plan, once per step) + :func:`forest_cascade_attention_planned` (per layer: fixed grid sized for the maximum,
empty tiles do nothing, no allocation, no host sync; value checks only with ``debug=True``). Group sizes and split
counts are runtime values, so batches of different shapes reuse one compiled kernel per M bucket.

Also here: :func:`build_forest_metadata` (plain paged batch + group ids -> the arguments above, sharing only full
blocks) and :func:`merge_attn_states` (natural-log LSE merge, -inf safe). The rule for enabling ArcticInference's
FCA in vLLM engine kwargs lives with the integration that uses it: ``arctic_platform.integrations.verl.vllm_config``.

Credits: ArcticInference ``flash_attn_forest_cascade.py`` (forest grouping), Hydragen and FlashInfer cascade
inference (prefix/suffix split + LSE merge), Flash-Decoding (split-KV), the Triton fused-attention tutorial.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch

from ._utils import (
    HAS_TRITON,
    check_min_dot_size,
    check_triton_device,
    dot_dtype,
    is_interpreted,
    next_power_of_2,
    require_triton,
    tl,
    triton,
)

__all__ = [
    "FcaLaunchConfig",
    "FcaPlan",
    "ForestMetadata",
    "build_forest_metadata",
    "fca_launch_config",
    "fca_plan_update",
    "forest_cascade_attention",
    "forest_cascade_attention_planned",
    "forest_cascade_attention_reference",
    "make_fca_plan",
    "merge_attn_states",
]

LOG2E = 1.4426950408889634


# ---------------------------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ForestMetadata:
    """Forest layout of a paged decode batch (output of :func:`build_forest_metadata`).

    Packed order: requests sorted by group. ``q_packed = q[perm]``; ``out[perm] = out_packed``.
    """

    perm: torch.Tensor
    """[B] int64: packed row i is original request ``perm[i]``."""
    group_starts: torch.Tensor
    """[G+1] int32: group g is packed rows ``group_starts[g]`` .. ``group_starts[g+1] - 1``."""
    prefix_block_tables: torch.Tensor
    """[G, max_blocks] int32: the shared prefix blocks of each group (columns past its prefix are 0)."""
    prefix_lens: torch.Tensor
    """[G] int32: shared prefix tokens (a multiple of block_size)."""
    suffix_block_tables: torch.Tensor
    """[B, max_blocks] int32, packed order: each request's row shifted left by its group's prefix block count."""
    suffix_lens: torch.Tensor
    """[B] int32, packed order: seq_len - group prefix tokens."""

    def attention_kwargs(self) -> dict[str, torch.Tensor]:
        """The keyword arguments of :func:`forest_cascade_attention` (everything but q, caches and scale)."""
        return {
            "group_starts": self.group_starts,
            "prefix_block_tables": self.prefix_block_tables,
            "prefix_lens": self.prefix_lens,
            "suffix_block_tables": self.suffix_block_tables,
            "suffix_lens": self.suffix_lens,
        }


@dataclass
class _Checked:
    B: int
    Hq: int
    Hkv: int
    D: int
    block_size: int
    group_starts: list[int]
    scale: float


def _check_inputs(
    q, k_cache, v_cache, group_starts, prefix_block_tables, prefix_lens, suffix_block_tables, suffix_lens, scale
) -> _Checked:
    """Shape, dtype and value checks shared by the reference and the kernel (one host sync)."""
    if q.dim() != 3:
        raise ValueError(f"q must be [B, Hq, D], got shape {tuple(q.shape)}")
    if k_cache.dim() != 4 or k_cache.shape != v_cache.shape:
        raise ValueError(
            f"k_cache and v_cache must both be [num_blocks, block_size, Hkv, D], got {tuple(k_cache.shape)} "
            f"and {tuple(v_cache.shape)}"
        )
    B, Hq, D = q.shape
    _, bs, Hkv, Dk = k_cache.shape
    if Dk != D:
        raise ValueError(f"head_dim of q ({D}) and of the caches ({Dk}) differ")
    if Hq % Hkv:
        raise ValueError(f"Hq={Hq} is not a multiple of Hkv={Hkv}")
    if not (q.dtype == k_cache.dtype == v_cache.dtype):
        raise TypeError(f"q, k_cache, v_cache dtypes differ: {q.dtype}, {k_cache.dtype}, {v_cache.dtype}")
    if not q.dtype.is_floating_point:
        raise TypeError(f"attention inputs must be floating point, got {q.dtype}")
    gs = group_starts.reshape(-1).tolist()
    G = len(gs) - 1
    if G < 0 or gs[0] != 0 or gs[-1] != B or any(a > b for a, b in itertools.pairwise(gs)):
        raise ValueError(f"group_starts must rise from 0 to B={B}, got {gs[:8]}{'...' if len(gs) > 8 else ''}")
    if prefix_block_tables.dim() != 2 or prefix_block_tables.shape[0] != G or prefix_lens.shape != (G,):
        raise ValueError(
            f"prefix_block_tables must be [G={G}, n] and prefix_lens [G], got {tuple(prefix_block_tables.shape)} "
            f"and {tuple(prefix_lens.shape)}"
        )
    if suffix_block_tables.dim() != 2 or suffix_block_tables.shape[0] != B or suffix_lens.shape != (B,):
        raise ValueError(
            f"suffix_block_tables must be [B={B}, n] and suffix_lens [B], got {tuple(suffix_block_tables.shape)} "
            f"and {tuple(suffix_lens.shape)}"
        )
    for name, lens, table in (
        ("prefix", prefix_lens, prefix_block_tables),
        ("suffix", suffix_lens, suffix_block_tables),
    ):
        if lens.numel():
            lo, hi = int(lens.min()), int(lens.max())
            if lo < 0 or hi > table.shape[1] * bs:
                raise ValueError(f"{name}_lens must lie in [0, {table.shape[1]} blocks x {bs}], got min {lo} max {hi}")
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    return _Checked(B, Hq, Hkv, D, bs, gs, scale)


# ---------------------------------------------------------------------------------------------------------------
# Reference (pure torch; the specification)
# ---------------------------------------------------------------------------------------------------------------
def _gather_tokens(cache: torch.Tensor, table_row: torch.Tensor, n: int) -> torch.Tensor:
    """Tokens [0, n) of one block-table row -> [n, Hkv, D]."""
    bs = cache.shape[1]
    t = torch.arange(n, device=cache.device)
    return cache[table_row[t // bs].long(), t % bs]


def forest_cascade_attention_reference(
    q,
    k_cache,
    v_cache,
    *,
    group_starts,
    prefix_block_tables,
    prefix_lens,
    suffix_block_tables,
    suffix_lens,
    scale=None,
    return_lse: bool = False,
):
    """Per-request gather of prefix + suffix keys, then softmax attention in fp32 (fp64 for fp64 inputs).

    Request r of group g attends to the group's prefix tokens followed by its own suffix tokens; q head h reads
    kv head ``h // (Hq // Hkv)``.

    Args:
        q: [B, Hq, D] queries, packed so each group is contiguous.
        k_cache, v_cache: [num_blocks, block_size, Hkv, D] paged caches.
        group_starts: [G+1] row offsets of the groups (0 .. B).
        prefix_block_tables: [G, n] block ids of each group's shared prefix.
        prefix_lens: [G] prefix tokens per group (0 allowed, any value up to n * block_size).
        suffix_block_tables: [B, m] block ids of each request's own tokens.
        suffix_lens: [B] suffix tokens per request (0 allowed).
        scale: softmax scale, default ``1 / sqrt(D)``.
        return_lse: also return the natural-log LSE [B, Hq] (fp32; -inf for a request with no keys).

    Returns:
        out [B, Hq, D] in q's dtype (0 for a request with no keys), and the LSE when ``return_lse``.
    """
    c = _check_inputs(
        q, k_cache, v_cache, group_starts, prefix_block_tables, prefix_lens, suffix_block_tables, suffix_lens, scale
    )
    cdt = torch.float64 if q.dtype == torch.float64 else torch.float32
    qpk = c.Hq // c.Hkv
    out = torch.zeros((c.B, c.Hq, c.D), dtype=cdt, device=q.device)
    lse = torch.full((c.B, c.Hq), -math.inf, dtype=cdt, device=q.device)
    for g in range(len(c.group_starts) - 1):
        plen = int(prefix_lens[g])
        pk = _gather_tokens(k_cache, prefix_block_tables[g], plen)
        pv = _gather_tokens(v_cache, prefix_block_tables[g], plen)
        for r in range(c.group_starts[g], c.group_starts[g + 1]):
            slen = int(suffix_lens[r])
            k = torch.cat([pk, _gather_tokens(k_cache, suffix_block_tables[r], slen)]).to(cdt)
            v = torch.cat([pv, _gather_tokens(v_cache, suffix_block_tables[r], slen)]).to(cdt)
            if k.shape[0] == 0:
                continue
            k = k.repeat_interleave(qpk, dim=1)  # [L, Hq, D]
            v = v.repeat_interleave(qpk, dim=1)
            s = torch.einsum("hd,lhd->hl", q[r].to(cdt), k) * c.scale
            lse[r] = torch.logsumexp(s, dim=-1)
            out[r] = torch.einsum("hl,lhd->hd", torch.softmax(s, dim=-1), v)
    out = out.to(q.dtype)
    return (out, lse.to(torch.float32 if cdt == torch.float32 else cdt)) if return_lse else out


def merge_attn_states(o_a, lse_a, o_b, lse_b):
    """Merge two partial attention results over disjoint key sets (natural-log LSE), -inf safe.

    ``o = (e^lse_a * o_a + e^lse_b * o_b) / (e^lse_a + e^lse_b)``, ``lse = log(e^lse_a + e^lse_b)``, computed in
    fp32 (fp64 for fp64 inputs) around the larger LSE. A side with LSE -inf contributes nothing; both -inf gives
    o = 0 and lse = -inf, never NaN. LSEs must be natural-log and -inf for empty rows (FA2 reports +inf there:
    normalize first).

    Args:
        o_a, o_b: [..., D] partial outputs.
        lse_a, lse_b: [...] their log-sum-exp.

    Returns:
        (o, lse): o in o_a's dtype, lse in fp32 (fp64 for fp64 inputs).
    """
    if o_a.shape != o_b.shape or lse_a.shape != lse_b.shape or o_a.shape[:-1] != lse_a.shape:
        raise ValueError(
            f"shapes must be o [..., D] and lse [...]: got {tuple(o_a.shape)}, {tuple(lse_a.shape)}, "
            f"{tuple(o_b.shape)}, {tuple(lse_b.shape)}"
        )
    cdt = torch.float64 if torch.float64 in (o_a.dtype, lse_a.dtype) else torch.float32
    la, lb = lse_a.to(cdt), lse_b.to(cdt)
    m = torch.maximum(la, lb)
    m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    wa, wb = torch.exp(la - m), torch.exp(lb - m)
    denom = wa + wb
    safe = torch.where(denom > 0, denom, torch.ones_like(denom))
    o = (wa[..., None] * o_a.to(cdt) + wb[..., None] * o_b.to(cdt)) / safe[..., None]
    return o.to(o_a.dtype), m + torch.log(denom)


# ---------------------------------------------------------------------------------------------------------------
# Metadata from a plain paged batch
# ---------------------------------------------------------------------------------------------------------------
def build_forest_metadata(block_tables, seq_lens, group_ids, block_size) -> ForestMetadata:
    """Forest layout of a paged decode batch: sort by group, share each group's common *full* blocks.

    A group's prefix is the longest run of leading block-table columns that hold the same block id in every
    member's row and that is a full block for every member (column < seq_len // block_size). Everything else (the
    partial tail block and the current token) stays in each member's suffix. Identical block ids mean identical
    memory, so the split is exact whatever the ids are. Runs on the tensors' device; vectorized (no loop over rows).

    Args:
        block_tables: [B, max_blocks] int block ids per request (vLLM's block table).
        seq_lens: [B] tokens per request, including the current one.
        group_ids: [B] group label per request (e.g. the GRPO prompt uid index); any integers.
        block_size: tokens per block.

    Returns:
        :class:`ForestMetadata`; gather queries with ``q[meta.perm]`` and scatter outputs back with
        ``out[meta.perm] = out_packed``.
    """
    if block_tables.dim() != 2:
        raise ValueError(f"block_tables must be [B, max_blocks], got {tuple(block_tables.shape)}")
    B, nb = block_tables.shape
    if seq_lens.shape != (B,) or group_ids.shape != (B,):
        raise ValueError(
            f"seq_lens and group_ids must be [B={B}], got {tuple(seq_lens.shape)}, {tuple(group_ids.shape)}"
        )
    if int(block_size) <= 0:
        raise ValueError(f"block_size must be positive, got {block_size}")
    if B and int(seq_lens.max()) > nb * block_size:
        raise ValueError(f"a seq_len exceeds the block table capacity {nb} x {block_size}")
    dev = block_tables.device
    perm = torch.argsort(group_ids, stable=True)
    _, counts = torch.unique_consecutive(group_ids[perm], return_counts=True)
    G = counts.numel()
    group_starts = torch.zeros(G + 1, dtype=torch.int64, device=dev)
    group_starts[1:] = torch.cumsum(counts, 0)
    gidx = torch.repeat_interleave(torch.arange(G, device=dev), counts)
    bt = block_tables[perm].long()
    sl = seq_lens[perm].long()
    first = group_starts[:-1][gidx]
    cols = torch.arange(nb, device=dev)
    same = (bt == bt[first]) & (cols[None, :] < (sl // block_size)[:, None])
    run = torch.cumprod(same.to(torch.int64), dim=1).sum(dim=1)  # leading shared full blocks, per row
    pblocks = torch.full((G,), nb, dtype=torch.int64, device=dev).scatter_reduce(0, gidx, run, reduce="amin")
    prefix_bt = torch.where(cols[None, :] < pblocks[:, None], bt[group_starts[:-1]], 0)
    shift = pblocks[gidx]
    src = cols[None, :] + shift[:, None]
    suffix_bt = torch.where(src < nb, torch.gather(bt, 1, src.clamp(max=max(nb - 1, 0))), 0)
    return ForestMetadata(
        perm=perm,
        group_starts=group_starts.to(torch.int32),
        prefix_block_tables=prefix_bt.to(torch.int32),
        prefix_lens=(pblocks * block_size).to(torch.int32),
        suffix_block_tables=suffix_bt.to(torch.int32),
        suffix_lens=(sl - shift * block_size).to(torch.int32),
    )


# ---------------------------------------------------------------------------------------------------------------
# Triton kernels
# ---------------------------------------------------------------------------------------------------------------
if HAS_TRITON:

    @triton.jit
    def _fca_online_update(m_i, l_i, acc, s, v, DOT_DTYPE: tl.constexpr, FP32_IEEE: tl.constexpr):
        # -inf-safe online softmax in base 2: rows with no live column so far keep m=-inf, l=0, acc=0.
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_use)
        p = tl.exp2(s - m_use[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        if FP32_IEEE:
            pv = tl.dot(p.to(DOT_DTYPE), v.to(DOT_DTYPE), input_precision="ieee")
        else:
            pv = tl.dot(p.to(DOT_DTYPE), v.to(DOT_DTYPE))
        acc = acc * alpha[:, None] + pv
        return m_new, l_i, acc

    @triton.jit
    def _fca_attend_tokens(
        q, m_i, l_i, acc, row_live, k_ptr, v_ptr, bt_ptr, k_head_off, v_head_off, n_start, n_end,
        stride_kb, stride_kt, stride_kd, stride_vb, stride_vt, stride_vd, qk_scale,
        D: tl.constexpr, BS: tl.constexpr, BLOCK_N: tl.constexpr,
        DOT_DTYPE: tl.constexpr, FP32_IEEE: tl.constexpr,
    ):  # fmt: skip
        # Tokens [n_start, n_end) of one block-table row: token t is slot t % BS of block bt[t // BS].
        offs_d = tl.arange(0, D)
        for n0 in range(n_start, n_end, BLOCK_N):
            tok = n0 + tl.arange(0, BLOCK_N)
            live = tok < n_end
            blk = tl.load(bt_ptr + tok // BS, mask=live, other=0).to(tl.int64)
            slot = tok % BS
            k_off = blk * stride_kb + slot * stride_kt + k_head_off
            v_off = blk * stride_vb + slot * stride_vt + v_head_off
            # [BLOCK_N, D] tiles: each token's head_dim row is contiguous in vLLM's layout (coalesced loads).
            k = tl.load(k_ptr + k_off[:, None] + offs_d[None, :] * stride_kd, mask=live[:, None], other=0.0)
            v = tl.load(v_ptr + v_off[:, None] + offs_d[None, :] * stride_vd, mask=live[:, None], other=0.0)
            kt = tl.trans(k.to(tl.float32).to(DOT_DTYPE))  # upcast first: bf16 arithmetic is wrong in the interpreter
            v = v.to(tl.float32)
            if FP32_IEEE:
                s = tl.dot(q, kt, input_precision="ieee")
            else:
                s = tl.dot(q, kt)
            s = tl.where(row_live[:, None] & live[None, :], s * qk_scale, float("-inf"))
            m_i, l_i, acc = _fca_online_update(m_i, l_i, acc, s, v, DOT_DTYPE, FP32_IEEE)
        return m_i, l_i, acc

    # Runtime integers Triton would otherwise specialize (== 1, multiple of 16) and that change from batch to batch:
    # the split count and every stride that depends on it or on a block-table width. Keeping them unspecialized
    # means one compiled kernel per (dtype, head shape, M bucket, FINAL), not one per batch (docs/kernels.md §4.5).
    _FCA_RUNTIME_INTS = (
        "num_splits", "stride_pbt", "stride_sbt", "stride_ob", "stride_oh", "stride_os", "stride_lb", "stride_lh",
        "stride_ls",
    )  # fmt: skip

    @triton.jit(do_not_specialize=_FCA_RUNTIME_INTS)
    def _fca_fwd_kernel(
        q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr,
        tile_group_ptr, tile_start_ptr, tile_size_ptr,
        pbt_ptr, plen_ptr, sbt_ptr, slen_ptr,
        stride_qb, stride_qh, stride_qd,
        stride_kb, stride_kt, stride_kh, stride_kd,
        stride_vb, stride_vt, stride_vh, stride_vd,
        stride_pbt, stride_sbt,
        stride_ob, stride_oh, stride_os, stride_od,
        stride_lb, stride_lh, stride_ls,
        qk_scale, num_splits,
        QPK: tl.constexpr, M: tl.constexpr, D: tl.constexpr, BS: tl.constexpr, BLOCK_N: tl.constexpr,
        DOT_DTYPE: tl.constexpr, FP32_IEEE: tl.constexpr, FINAL: tl.constexpr,
    ):  # fmt: skip
        # Program (t, h, s): the M = members x QPK query rows of tile t (part of one group) for kv-head h, KV split s.
        # A tile of 0 members (the unused tail of a fixed-size plan) reads no keys and stores nothing.
        t = tl.program_id(0)
        h = tl.program_id(1)
        split = tl.program_id(2)
        g = tl.load(tile_group_ptr + t)
        req0 = tl.load(tile_start_ptr + t)
        n_mem = tl.load(tile_size_ptr + t)

        rows = tl.arange(0, M)
        member = rows // QPK
        head = h * QPK + rows % QPK
        row_ok = member < n_mem
        req = (req0 + member).to(tl.int64)
        offs_d = tl.arange(0, D)
        q = tl.load(
            q_ptr + req[:, None] * stride_qb + head[:, None] * stride_qh + offs_d[None, :] * stride_qd,
            mask=row_ok[:, None],
            other=0.0,
        )
        q = q.to(tl.float32).to(DOT_DTYPE)

        m_i = tl.full([M], float("-inf"), tl.float32)
        l_i = tl.zeros([M], tl.float32)
        acc = tl.zeros([M, D], tl.float32)
        k_head_off = h.to(tl.int64) * stride_kh
        v_head_off = h.to(tl.int64) * stride_vh
        # Prefix: read once for every member of the tile; this split's share is a BLOCK_N-aligned chunk.
        plen = tl.load(plen_ptr + g, mask=n_mem > 0, other=0)
        chunk = tl.cdiv(tl.cdiv(plen, num_splits), BLOCK_N) * BLOCK_N
        p_start = split * chunk
        p_end = tl.minimum(p_start + chunk, plen)
        m_i, l_i, acc = _fca_attend_tokens(
            q, m_i, l_i, acc, row_ok, k_ptr, v_ptr, pbt_ptr + g.to(tl.int64) * stride_pbt, k_head_off, v_head_off,
            p_start, p_end, stride_kb, stride_kt, stride_kd, stride_vb, stride_vt, stride_vd, qk_scale,
            D, BS, BLOCK_N, DOT_DTYPE, FP32_IEEE,
        )  # fmt: skip
        # Suffixes: member i's own tokens update only member i's rows.
        for i in range(0, n_mem):
            r = (req0 + i).to(tl.int64)
            slen = tl.load(slen_ptr + r)
            chunk_s = tl.cdiv(tl.cdiv(slen, num_splits), BLOCK_N) * BLOCK_N
            s_start = split * chunk_s
            s_end = tl.minimum(s_start + chunk_s, slen)
            m_i, l_i, acc = _fca_attend_tokens(
                q, m_i, l_i, acc, member == i, k_ptr, v_ptr, sbt_ptr + r * stride_sbt, k_head_off, v_head_off,
                s_start, s_end, stride_kb, stride_kt, stride_kd, stride_vb, stride_vt, stride_vd, qk_scale,
                D, BS, BLOCK_N, DOT_DTYPE, FP32_IEEE,
            )  # fmt: skip

        has = l_i > 0.0
        o = acc / tl.where(has, l_i, 1.0)[:, None]
        lse2 = tl.where(has, m_i + tl.log2(tl.where(has, l_i, 1.0)), float("-inf"))
        o_off = req[:, None] * stride_ob + head[:, None] * stride_oh + split * stride_os + offs_d[None, :] * stride_od
        l_off = req * stride_lb + head * stride_lh + split * stride_ls
        if FINAL:  # no split: final output in the input dtype, natural-log LSE
            tl.store(o_ptr + o_off, o.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])
            tl.store(lse_ptr + l_off, lse2 * 0.6931471805599453, mask=row_ok)
        else:  # fp32 partials, base-2 LSE
            tl.store(o_ptr + o_off, o, mask=row_ok[:, None])
            tl.store(lse_ptr + l_off, lse2, mask=row_ok)

    @triton.jit(do_not_specialize=("num_splits", "stride_pob", "stride_poh", "stride_plb", "stride_plh"))
    def _fca_reduce_kernel(
        po_ptr, plse_ptr, o_ptr, lse_ptr,
        stride_pob, stride_poh, stride_pos, stride_pod,
        stride_plb, stride_plh, stride_pls,
        stride_ob, stride_oh, stride_od,
        stride_lb, stride_lh, num_splits,
        D: tl.constexpr, SPLITS_P2: tl.constexpr,
    ):  # fmt: skip
        # Program (b, hq): merge the num_splits partials of one (request, q-head); SPLITS_P2 is a power-of-two bucket.
        b = tl.program_id(0).to(tl.int64)
        hq = tl.program_id(1)
        sp = tl.arange(0, SPLITS_P2)
        offs_d = tl.arange(0, D)
        live = sp < num_splits
        lse2 = tl.load(plse_ptr + b * stride_plb + hq * stride_plh + sp * stride_pls, mask=live, other=float("-inf"))
        o = tl.load(
            po_ptr + b * stride_pob + hq * stride_poh + sp[:, None] * stride_pos + offs_d[None, :] * stride_pod,
            mask=live[:, None],
            other=0.0,
        )
        mx = tl.max(lse2, 0)
        mx_use = tl.where(mx == float("-inf"), 0.0, mx)
        w = tl.exp2(lse2 - mx_use)
        denom = tl.sum(w, 0)
        out = tl.sum(w[:, None] * o, 0) / tl.where(denom > 0.0, denom, 1.0)
        tl.store(o_ptr + b * stride_ob + hq * stride_oh + offs_d * stride_od, out.to(o_ptr.dtype.element_ty))
        lse = tl.where(denom > 0.0, mx_use + tl.log2(tl.where(denom > 0.0, denom, 1.0)), float("-inf"))
        tl.store(lse_ptr + b * stride_lb + hq * stride_lh, lse * 0.6931471805599453)


def _plan_tiles(group_starts: list[int], members_per_tile: int, device) -> tuple[torch.Tensor, ...]:
    """Split each group into tiles of at most ``members_per_tile`` requests (each tile re-reads the prefix)."""
    tg, ts, tn = [], [], []
    for g, (a, b) in enumerate(itertools.pairwise(group_starts)):
        for start in range(a, b, members_per_tile):
            tg.append(g)
            ts.append(start)
            tn.append(min(members_per_tile, b - start))
    as_t = lambda x: torch.tensor(x, dtype=torch.int32, device=device)  # noqa: E731
    return as_t(tg), as_t(ts), as_t(tn)


def default_num_splits(n_programs: int, device: torch.device) -> int:
    """Split-KV factor so that programs x splits is ~2 waves of the GPU's SMs (1 on CPU), capped at 16."""
    if device.type != "cuda" or n_programs <= 0:
        return 1
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return max(1, min(16, -(-2 * sms // n_programs)))


@dataclass(frozen=True)
class FcaLaunchConfig:
    """Everything of a launch that is a compile-time constant (constexprs and num_warps), plus the tile size.

    Two launches with equal configs (and equal dtypes) reuse one compiled kernel: group sizes and split counts are
    runtime values. ``M`` is a power-of-two bucket, so at most log2(m_max / 16) + 1 variants exist per head shape.
    """

    QPK: int
    M: int
    D: int
    BS: int
    BLOCK_N: int
    num_warps: int

    @property
    def members_per_tile(self) -> int:
        return self.M // self.QPK


def fca_launch_config(
    *, num_heads: int, num_kv_heads: int, head_dim: int, block_size: int, max_group_size: int, interpreted: bool,
    block_n: int | None = None, m_max: int = 64,
) -> FcaLaunchConfig:  # fmt: skip
    """The constexprs of :func:`forest_cascade_attention` for a batch whose largest group has ``max_group_size``.

    Raises:
        ValueError: D or block_n not a power of two, or a ``tl.dot`` dimension below 16.
    """
    if head_dim & (head_dim - 1):
        raise ValueError(f"head_dim must be a power of two, got {head_dim}")
    if num_heads % num_kv_heads:
        raise ValueError(f"Hq={num_heads} is not a multiple of Hkv={num_kv_heads}")
    qpk = num_heads // num_kv_heads
    block_n = block_n or (32 if interpreted or head_dim > 128 else 64)
    if block_n & (block_n - 1):
        raise ValueError(f"block_n must be a power of two, got {block_n}")
    members = max(1, min(max_group_size, max(1, m_max // qpk)))
    M = max(16, next_power_of_2(members * qpk))
    check_min_dot_size(M=M, D=head_dim, BLOCK_N=block_n)
    # fp32 accumulator [M, D]: 64 x 128 fits 4 warps; 64 x 256 (head dim 256) or M = 128 needs 8 (docs §4.3).
    num_warps = 4 if M * head_dim <= 64 * 128 else 8
    return FcaLaunchConfig(QPK=qpk, M=M, D=head_dim, BS=block_size, BLOCK_N=block_n, num_warps=num_warps)


def _launch_fca(
    cfg: FcaLaunchConfig, q, k_cache, v_cache, tiles, pbt, plen, sbt, slen, out, lse, part_o, part_lse, scale,
    splits: int, grid_tiles: int,
) -> None:  # fmt: skip
    """Launch the forward kernel (and the reduce when ``splits > 1``): no allocation, no host sync.

    ``out`` [B, Hq, D] and ``lse`` [B, Hq] receive the result; ``part_o`` [B, Hq, >= splits, D] and ``part_lse``
    [B, Hq, >= splits] (fp32) are the split workspace (ignored when ``splits == 1``).
    """
    final = splits == 1
    if final:
        o_buf, l_buf = out, lse
        o_strides = (out.stride(0), out.stride(1), 0, out.stride(2))
        l_strides = (lse.stride(0), lse.stride(1), 0)
    else:
        o_buf, l_buf = part_o, part_lse
        o_strides, l_strides = part_o.stride(), part_lse.stride()
    tile_group, tile_start, tile_size = tiles
    _fca_fwd_kernel[(grid_tiles, k_cache.shape[2], splits)](
        q, k_cache, v_cache, o_buf, l_buf,
        tile_group, tile_start, tile_size,
        pbt, plen, sbt, slen,
        *q.stride(), *k_cache.stride(), *v_cache.stride(),
        pbt.stride(0), sbt.stride(0),
        *o_strides, *l_strides,
        scale * LOG2E, splits,
        QPK=cfg.QPK, M=cfg.M, D=cfg.D, BS=cfg.BS, BLOCK_N=cfg.BLOCK_N,
        DOT_DTYPE=dot_dtype(_fca_fwd_kernel, q.dtype),
        FP32_IEEE=(q.dtype == torch.float32 and not is_interpreted(_fca_fwd_kernel)),
        FINAL=final, num_warps=cfg.num_warps,
    )  # fmt: skip
    if not final:
        _fca_reduce_kernel[(q.shape[0], q.shape[1])](
            part_o, part_lse, out, lse,
            *part_o.stride(), *part_lse.stride(), *out.stride(), *lse.stride(), splits,
            D=cfg.D, SPLITS_P2=next_power_of_2(part_o.shape[2]), num_warps=4,
        )  # fmt: skip


def forest_cascade_attention(
    q,
    k_cache,
    v_cache,
    *,
    group_starts,
    prefix_block_tables,
    prefix_lens,
    suffix_block_tables,
    suffix_lens,
    scale=None,
    return_lse: bool = False,
    num_splits: int | None = None,
    block_n: int | None = None,
    m_max: int = 64,
):
    """Forest cascade decode attention (Triton): each group's shared prefix is read once per kv-head.

    Arguments and results as in :func:`forest_cascade_attention_reference`, plus tuning knobs:

    Args:
        num_splits: KV splits per (tile, kv-head) program; default fills ~2 waves of SMs on the GPU, 1 on CPU.
        block_n: keys per tile (power of two >= 16); default 64 on the GPU (32 for head dim 256), 32 under the
            interpreter.
        m_max: most stacked query rows per program (members x Hq/Hkv); larger groups run as several tiles.

    This eager entry point validates everything and plans on the host (a few syncs, ~tens of us of Python); for
    CUDA graphs and kernel-only timing use :func:`make_fca_plan` + :func:`forest_cascade_attention_planned`.

    Raises:
        ValueError: bad shapes or values, D not a power of two, or a ``tl.dot`` dimension below 16 (the GPU
            minimum, checked here so CPU runs cannot pass shapes the device rejects).
        RuntimeError: CPU tensors without ``TRITON_INTERPRET=1``.
    """
    require_triton("forest_cascade_attention")
    c = _check_inputs(
        q, k_cache, v_cache, group_starts, prefix_block_tables, prefix_lens, suffix_block_tables, suffix_lens, scale
    )
    check_triton_device(
        _fca_fwd_kernel, q, k_cache, v_cache, prefix_block_tables, prefix_lens, suffix_block_tables, suffix_lens,
        what="forest_cascade_attention",
    )  # fmt: skip
    interpreted = is_interpreted(_fca_fwd_kernel)
    if q.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError(f"forest_cascade_attention supports float32, bfloat16 and float16, got {q.dtype}")
    sizes = [b - a for a, b in itertools.pairwise(c.group_starts)]
    cfg = fca_launch_config(
        num_heads=c.Hq, num_kv_heads=c.Hkv, head_dim=c.D, block_size=c.block_size,
        max_group_size=max(sizes, default=1), interpreted=interpreted, block_n=block_n, m_max=m_max,
    )  # fmt: skip
    # The interpreter (triton 3.9) converts fp32 -> bf16 by truncation, the GPU rounds to nearest even: under the
    # interpreter the kernel writes fp32 and torch rounds, so CPU tests see the GPU's numerics.
    round_in_torch = interpreted and q.dtype == torch.bfloat16
    out = torch.empty(q.shape, dtype=torch.float32 if round_in_torch else q.dtype, device=q.device)
    lse = torch.empty((c.B, c.Hq), dtype=torch.float32, device=q.device)
    if c.B == 0:
        out = out.to(q.dtype)
        return (out, lse) if return_lse else out
    tiles = _plan_tiles(c.group_starts, cfg.members_per_tile, q.device)
    T = tiles[0].numel()
    splits = num_splits or default_num_splits(T * c.Hkv, q.device)
    if splits < 1:
        raise ValueError(f"num_splits must be >= 1, got {splits}")
    part_o = part_lse = None
    if splits > 1:
        part_o = torch.empty((c.B, c.Hq, splits, c.D), dtype=torch.float32, device=q.device)
        part_lse = torch.empty((c.B, c.Hq, splits), dtype=torch.float32, device=q.device)
    _launch_fca(
        cfg, q, k_cache, v_cache, tiles,
        prefix_block_tables.to(torch.int32).contiguous(), prefix_lens.to(torch.int32).contiguous(),
        suffix_block_tables.to(torch.int32).contiguous(), suffix_lens.to(torch.int32).contiguous(),
        out, lse, part_o, part_lse, c.scale, splits, T,
    )  # fmt: skip
    if round_in_torch:
        out = out.to(q.dtype)
    return (out, lse) if return_lse else out


# ---------------------------------------------------------------------------------------------------------------
# CUDA-graph capturable entry point: plan and buffers prepared ahead, fixed-size grid, no host sync
# ---------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FcaPlan:
    """Fixed-size tile plan and output/workspace buffers of :func:`forest_cascade_attention_planned`.

    Made once (:func:`make_fca_plan`) for the largest batch; refilled in place each decode step from the device
    ``group_starts`` (:func:`fca_plan_update`, a few fixed-shape torch ops, no host sync) and shared by every layer
    of that step. All tensors keep their addresses for the plan's lifetime, so a captured CUDA graph stays valid.
    """

    config: FcaLaunchConfig
    max_batch: int
    max_groups: int
    max_tiles: int
    num_heads: int
    num_kv_heads: int
    num_splits: int
    dtype: torch.dtype
    device: torch.device
    tile_group: torch.Tensor
    """[max_tiles] int32: group of each tile (a valid group index even for empty tiles)."""
    tile_start: torch.Tensor
    """[max_tiles] int32: first packed request of each tile."""
    tile_size: torch.Tensor
    """[max_tiles] int32: members of each tile; 0 for the unused tail (those programs do nothing)."""
    out: torch.Tensor
    """[max_batch, Hq, D] in ``dtype``: the output. Rows outside every group carry no meaning: with one split they
    are left as they were; with splits they receive the merge of whatever partials those rows last held."""
    lse: torch.Tensor
    """[max_batch, Hq] fp32 natural-log LSE."""
    part_o: torch.Tensor | None
    """[max_batch, Hq, num_splits, D] fp32 split partials (None when ``num_splits == 1``)."""
    part_lse: torch.Tensor | None
    stage: torch.Tensor | None
    """fp32 copy of ``out`` the kernel writes under the interpreter for bf16 (torch then rounds to nearest even)."""
    tile_ids: torch.Tensor
    """[max_tiles] int64 arange, preallocated for the plan update."""

    @property
    def tiles(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.tile_group, self.tile_start, self.tile_size


def make_fca_plan(
    *, max_batch: int, max_groups: int, num_heads: int, num_kv_heads: int, head_dim: int, block_size: int,
    dtype: torch.dtype, device, num_splits: int | None = None, block_n: int | None = None, m_max: int = 64,
    max_group_size: int | None = None,
) -> FcaPlan:  # fmt: skip
    """Allocate a fixed-size plan for batches of at most ``max_batch`` requests in at most ``max_groups`` groups.

    The tile count never exceeds ``max_groups + max_batch // members_per_tile`` (each group adds at most one
    partial tile), so the grid covers every valid batch. ``max_group_size`` (default ``max_batch``) only picks the
    M bucket: M = members x Hq/Hkv rounded up to a power of two, capped by ``m_max``.

    Raises:
        ValueError: non-positive sizes, D or block_n not a power of two, or a ``tl.dot`` dimension below 16.
    """
    require_triton("make_fca_plan")
    if max_batch < 1 or max_groups < 1 or max_groups > max_batch:
        raise ValueError(f"need 1 <= max_groups <= max_batch, got max_groups={max_groups} max_batch={max_batch}")
    if dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError(f"forest_cascade_attention supports float32, bfloat16 and float16, got {dtype}")
    device = torch.empty(0, device=device).device  # "cuda" -> "cuda:N": compared with tensors' devices later
    interpreted = is_interpreted(_fca_fwd_kernel)
    cfg = fca_launch_config(
        num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim, block_size=block_size,
        max_group_size=max_group_size or max_batch, interpreted=interpreted, block_n=block_n, m_max=m_max,
    )  # fmt: skip
    max_tiles = min(max_batch, max_groups + max_batch // cfg.members_per_tile)
    est_tiles = max_groups * -(-(max_batch // max_groups) // cfg.members_per_tile)  # even groups
    splits = num_splits or default_num_splits(est_tiles * num_kv_heads, device)
    if splits < 1:
        raise ValueError(f"num_splits must be >= 1, got {splits}")
    i32 = dict(dtype=torch.int32, device=device)
    f32 = dict(dtype=torch.float32, device=device)
    part_o = part_lse = None
    if splits > 1:  # initialised (not empty): rows outside every group then merge to 0 / -inf, never garbage
        part_o = torch.zeros((max_batch, num_heads, splits, head_dim), **f32)
        part_lse = torch.full((max_batch, num_heads, splits), -math.inf, **f32)
    stage = torch.zeros((max_batch, num_heads, head_dim), **f32) if interpreted and dtype == torch.bfloat16 else None
    return FcaPlan(
        config=cfg, max_batch=max_batch, max_groups=max_groups, max_tiles=max_tiles, num_heads=num_heads,
        num_kv_heads=num_kv_heads, num_splits=splits, dtype=dtype, device=device,
        tile_group=torch.zeros(max_tiles, **i32), tile_start=torch.zeros(max_tiles, **i32),
        tile_size=torch.zeros(max_tiles, **i32),
        out=torch.zeros((max_batch, num_heads, head_dim), dtype=dtype, device=device),
        lse=torch.full((max_batch, num_heads), -math.inf, **f32), part_o=part_o, part_lse=part_lse, stage=stage,
        tile_ids=torch.arange(max_tiles, dtype=torch.int64, device=device),
    )  # fmt: skip


def _check_group_starts_values(plan: FcaPlan, group_starts: torch.Tensor, batch: int) -> None:
    """Debug-mode value checks of ``group_starts`` (host sync)."""
    gs = group_starts.reshape(-1).tolist()
    if gs[0] != 0 or gs[-1] > batch or any(a > b for a, b in itertools.pairwise(gs)):
        raise ValueError(f"group_starts must rise from 0 to at most B={batch}, got {gs[:8]}{'...' * (len(gs) > 8)}")


def fca_plan_update(plan: FcaPlan, group_starts: torch.Tensor, *, debug: bool = False) -> None:
    """Refill ``plan``'s tiles in place from the device ``group_starts`` [G+1] (G <= max_groups); no host sync.

    Groups may be padded with empty ones (repeat the last offset) so that G stays fixed across steps; rows past
    ``group_starts[-1]`` belong to no group (their outputs carry no meaning, see :attr:`FcaPlan.out`).
    ``debug=True`` checks the values (host sync).

    Raises:
        ValueError: a shape that does not fit the plan; in debug mode, offsets that do not rise from 0.
    """
    if group_starts.dim() != 1 or not 2 <= group_starts.numel() <= plan.max_groups + 1:
        raise ValueError(
            f"group_starts must be [G+1] with 1 <= G <= max_groups={plan.max_groups}, got {tuple(group_starts.shape)}"
        )
    if group_starts.device != plan.device:
        raise ValueError(f"group_starts is on {group_starts.device}, the plan on {plan.device}")
    if debug:
        _check_group_starts_values(plan, group_starts, plan.max_batch)
    mpt = plan.config.members_per_tile
    gs = group_starts.to(torch.int64)
    ntiles = torch.div(gs[1:] - gs[:-1] + (mpt - 1), mpt, rounding_mode="floor")  # [G]
    last = torch.cumsum(ntiles, 0)  # inclusive: tiles of groups 0..g
    g = torch.searchsorted(last, plan.tile_ids, right=True)  # [T]: G for tiles past the last group
    live = g < ntiles.numel()
    g = g.clamp(max=ntiles.numel() - 1)
    start = gs[g] + (plan.tile_ids - (last[g] - ntiles[g])) * mpt
    size = torch.clamp(torch.minimum(gs[g + 1] - start, torch.full_like(start, mpt)), min=0)
    plan.tile_group.copy_(g)
    plan.tile_start.copy_(torch.where(live, start, 0))
    plan.tile_size.copy_(torch.where(live, size, 0))


def forest_cascade_attention_planned(
    q, k_cache, v_cache, plan: FcaPlan, *, prefix_block_tables, prefix_lens, suffix_block_tables, suffix_lens,
    scale=None, debug: bool = False, group_starts=None,
):  # fmt: skip
    """:func:`forest_cascade_attention` on a prepared plan: fixed grid, no allocation, no host sync; capturable.

    Call :func:`fca_plan_update` first (once per decode step; every layer reuses the plan). Metadata tensors should
    already be int32 and contiguous (otherwise a copy is made, which is still capturable but not free).

    Args:
        q: [B, Hq, D], B <= plan.max_batch (use B = max_batch and padding groups inside a CUDA graph).
        plan: from :func:`make_fca_plan`; must match q's heads, head dim, dtype and device.
        debug: also validate values (lengths within the tables, group offsets; host syncs). ``group_starts``
            (optional) is then checked too.

    Returns:
        (out, lse): views of ``plan.out[:B]`` and ``plan.lse[:B]``, overwritten by the next call.

    Raises:
        ValueError / TypeError: shapes, dtypes or devices that do not match the plan; bad values in debug mode.
    """
    cfg = plan.config
    if q.dim() != 3 or k_cache.dim() != 4 or k_cache.shape != v_cache.shape:
        raise ValueError(f"q must be [B, Hq, D] and the caches equal [blocks, bs, Hkv, D], got {tuple(q.shape)}, "
                         f"{tuple(k_cache.shape)}, {tuple(v_cache.shape)}")  # fmt: skip
    B, Hq, D = q.shape
    if (Hq, D, q.dtype, q.device) != (plan.num_heads, cfg.D, plan.dtype, plan.device) or B > plan.max_batch:
        raise ValueError(
            f"q {tuple(q.shape)} {q.dtype} on {q.device} does not fit the plan (B <= {plan.max_batch}, Hq "
            f"{plan.num_heads}, D {cfg.D}, {plan.dtype} on {plan.device})"
        )
    if tuple(k_cache.shape[1:]) != (cfg.BS, plan.num_kv_heads, D) or k_cache.dtype != q.dtype:
        raise ValueError(f"caches {tuple(k_cache.shape)} {k_cache.dtype} do not fit the plan (block {cfg.BS}, Hkv "
                         f"{plan.num_kv_heads}, D {D}, {plan.dtype})")  # fmt: skip
    if prefix_lens.dim() != 1 or prefix_block_tables.shape[0] != prefix_lens.shape[0]:
        raise ValueError("prefix_block_tables must be [G, n] and prefix_lens [G]")
    if suffix_block_tables.shape[0] < B or suffix_lens.shape[0] < B:
        raise ValueError(f"suffix_block_tables and suffix_lens need >= B={B} rows")
    if debug:
        check_triton_device(_fca_fwd_kernel, q, k_cache, v_cache, prefix_block_tables, suffix_block_tables,
                            what="forest_cascade_attention_planned")  # fmt: skip
        if group_starts is not None:
            _check_group_starts_values(plan, group_starts, B)
        for name, lens, table in (("prefix", prefix_lens, prefix_block_tables),
                                  ("suffix", suffix_lens[:B], suffix_block_tables)):  # fmt: skip
            if lens.numel() and (int(lens.min()) < 0 or int(lens.max()) > table.shape[1] * cfg.BS):
                raise ValueError(f"{name}_lens must lie in [0, {table.shape[1]} blocks x {cfg.BS}]")
        live = plan.tile_size > 0
        if group_starts is not None and int(plan.tile_size.sum()) != int(group_starts[-1] - group_starts[0]):
            raise ValueError("the plan does not cover group_starts: call fca_plan_update(plan, group_starts) first")
        if bool(live.any()) and int(plan.tile_group[live].max()) >= prefix_lens.shape[0]:
            raise ValueError("the plan names more groups than prefix_lens has rows: call fca_plan_update first")
        if bool(live.any()) and int((plan.tile_start + plan.tile_size)[live].max()) > B:
            raise ValueError(f"the plan covers rows past B={B}: call fca_plan_update with this batch's offsets")
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    out = plan.stage if plan.stage is not None else plan.out
    _launch_fca(
        cfg, q, k_cache, v_cache, plan.tiles,
        prefix_block_tables.to(torch.int32).contiguous(), prefix_lens.to(torch.int32).contiguous(),
        suffix_block_tables.to(torch.int32).contiguous(), suffix_lens.to(torch.int32).contiguous(),
        out[:B], plan.lse[:B],
        plan.part_o[:B] if plan.part_o is not None else None,
        plan.part_lse[:B] if plan.part_lse is not None else None,
        scale, plan.num_splits, plan.max_tiles,
    )  # fmt: skip
    if plan.stage is not None:
        plan.out[:B].copy_(plan.stage[:B])
    return plan.out[:B], plan.lse[:B]
