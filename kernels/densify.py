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
"""densify: a batch of nested-jagged RL rows -> the dense, padded layout of the Arctic wire.

Input: ``torch.nested`` tensors with ``layout=torch.jagged`` (NJT), B rows each: integer ``prompts`` and
``responses`` token ids, plus response-aligned ``fields`` (one value per response token: ``old_log_probs``,
``advantages``, ``response_mask``, ...). P and R are the *configured* maxima, never the batch maxima, so shapes stay
static across steps.

Output (a dict of dense tensors, all on the input device):

============================  =========  ===============  ==========================================================
key                           shape      dtype            layout
============================  =========  ===============  ==========================================================
``input_ids``                 [B, P+R]   int64            prompt left-padded into [0, P), response right-padded into
                                                          [P, P+R); pad = ``pad_token_id``
``attention_mask``            [B, P+R]   int64            1 on real tokens, 0 on pads
``position_ids``              [B, P+R]   int64            ``clip(cumsum(attention_mask, -1) - 1, min=0)``: left pads
                                                          0, then 0..lp+lr-1, right pads repeat lp+lr-1, empty row 0
``prompts`` / ``responses``   [B, P/R]   int64            contiguous copies of the two halves of ``input_ids``
each field                    [B, R]     field dtype      right-padded with that field's pad value
============================  =========  ===============  ==========================================================

Field pads default to 0, except ``rollout_is_weights`` which pads with 1.0 (a neutral weight); ``field_pads``
overrides per field. Pads may be negative or NaN (float fields); integer and bool fields need a representable pad.

Three paths, bit-identical results:

* :func:`densify_reference`: a per-row loop, the readable specification (tests only).
* :func:`densify_vectorized`: torch, no Python loop over rows (scatter of the N real tokens with ``index_copy_``;
  the CPU path of :func:`densify`).
* :func:`densify_triton`: one Triton launch writing every output (up to 8 fields per launch; more fields take
  one extra launch per 8). The CUDA path of :func:`densify`; runs on CPU tensors under ``TRITON_INTERPRET=1``.

Validation (shared by all paths, before any copy): rows longer than P or R raise ``ValueError`` naming the row
(never truncate: ``torch.nested.to_padded_tensor`` silently keeps the head of an over-long row); a field whose row
lengths differ from the responses' raises ``ValueError`` naming the field. NJTs with holes (``nt.lengths()`` not
None, e.g. from ``torch.nested.narrow``) are honoured: row b is ``values[offsets[b] : offsets[b] + lengths[b]]``.

Limits: 2-D NJTs only (ragged dim 1, one value per token); token ids of any integer dtype are widened to int64.

Credits: the contract follows verl's padded RL batch (``verl/utils/model.py`` position convention); the kernel
layout follows the Triton tutorials and Liger-Kernel (reference beside the kernel).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ._utils import HAS_TRITON, bits_dtype, check_triton_device, require_triton, tl, triton

__all__ = ["densify", "densify_reference", "densify_vectorized", "densify_triton", "DEFAULT_FIELD_PADS"]

#: Pad values that differ from 0 by default.
DEFAULT_FIELD_PADS: dict[str, float] = {"rollout_is_weights": 1.0}

_RESERVED = ("input_ids", "attention_mask", "position_ids", "prompts", "responses")


# ---------------------------------------------------------------------------------------------------------------
# Validation shared by every path
# ---------------------------------------------------------------------------------------------------------------
@dataclass
class _Jagged:
    """One NJT read through its public accessors: row b is ``values[starts[b] : starts[b] + lengths[b]]``."""

    values: torch.Tensor  # 1-D
    starts: torch.Tensor  # int64 [B]
    lengths: torch.Tensor  # int64 [B]
    offsets: torch.Tensor  # int64 [B+1]
    holes: bool

    def compact(self) -> torch.Tensor:
        """The rows' values back to back (a slice when there are no holes, else one gather)."""
        if not self.holes:
            return self.values[int(self.offsets[0]) : int(self.offsets[-1])]
        n = int(self.lengths.sum())
        excl = torch.cumsum(self.lengths, 0) - self.lengths
        src = torch.repeat_interleave(self.starts - excl, self.lengths, output_size=n)
        src += torch.arange(n, device=src.device)
        return self.values[src]


@dataclass
class _Batch:
    prompts: _Jagged
    responses: _Jagged
    fields: dict[str, _Jagged]
    pads: dict[str, bool | int | float]
    P: int
    R: int
    pad_token_id: int

    @property
    def B(self) -> int:
        return self.responses.starts.numel()

    @property
    def device(self) -> torch.device:
        return self.responses.values.device


def _jagged(nt, what: str) -> _Jagged:
    if not (isinstance(nt, torch.Tensor) and nt.is_nested and nt.layout == torch.jagged):
        raise TypeError(f"{what} must be a nested tensor with layout=torch.jagged, got {type(nt).__name__}")
    if nt.dim() != 2 or nt._ragged_idx != 1:
        raise ValueError(
            f"{what} must be a 2-D jagged tensor [B, j] (one value per token), got shape {tuple(nt.shape)}"
        )
    values = nt.values()
    offsets = nt.offsets().to(torch.int64)
    lengths = nt.lengths()
    holes = lengths is not None
    lengths = lengths.to(torch.int64) if holes else offsets[1:] - offsets[:-1]
    return _Jagged(values, offsets[:-1], lengths, offsets, holes)


def _check_pad(name: str, value, dtype: torch.dtype):
    if isinstance(value, torch.Tensor):
        value = value.item()
    if not isinstance(value, (bool, int, float)):
        raise TypeError(f"pad for field {name!r} must be a number, got {type(value).__name__}")
    if dtype == torch.bool:
        if value not in (0, 1):
            raise ValueError(f"pad for bool field {name!r} must be 0/1/False/True, got {value!r}")
        return bool(value)
    if dtype.is_floating_point:
        return float(value)
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ValueError(f"pad {value!r} for integer field {name!r} ({dtype}) is not an integer")
    info = torch.iinfo(dtype)
    if not info.min <= int(value) <= info.max:
        raise ValueError(f"pad {value!r} for field {name!r} does not fit {dtype}")
    return int(value)


def _check_lengths(p: _Jagged, r: _Jagged, fields: dict[str, _Jagged], P: int, R: int) -> None:
    """Over-length rows and field/response length mismatches, with one host sync for the whole batch."""
    flags = [(p.lengths > P).any(), (r.lengths > R).any()]
    flags += [(j.lengths != r.lengths).any() for j in fields.values()]
    bad = torch.stack(flags).tolist()  # the one sync; acceptable before the copy (docs/kernels.md §1.3)
    for (what, flag, j, limit), over in zip(
        (("prompt", "max_prompt_len", p, P), ("response", "max_response_len", r, R)), bad[:2], strict=True
    ):
        if over:
            row = int(torch.nonzero(j.lengths > limit)[0, 0])
            raise ValueError(f"row {row}: {what} length {int(j.lengths[row])} > {flag} {limit}")
    for name, mismatch in zip(fields, bad[2:], strict=True):
        if mismatch:
            raise ValueError(f"field {name!r}: row lengths differ from the responses' (fields are response-aligned)")


def _prepare(prompts, responses, *, max_prompt_len, max_response_len, pad_token_id, fields, field_pads) -> _Batch:
    for flag, v in (("max_prompt_len", max_prompt_len), ("max_response_len", max_response_len)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"{flag} must be a non-negative int, got {v!r}")
    if isinstance(pad_token_id, bool) or not isinstance(pad_token_id, int):
        raise TypeError(f"pad_token_id must be an int, got {pad_token_id!r}")
    p = _jagged(prompts, "prompts")
    r = _jagged(responses, "responses")
    for what, j in (("prompts", p), ("responses", r)):
        if j.values.dtype.is_floating_point or j.values.dtype.is_complex or j.values.dtype == torch.bool:
            raise TypeError(f"{what} must hold integer token ids, got {j.values.dtype}")
    if p.starts.numel() != r.starts.numel():
        raise ValueError(f"prompts has {p.starts.numel()} rows but responses has {r.starts.numel()}")
    if p.values.device != r.values.device:
        raise ValueError(f"prompts on {p.values.device} but responses on {r.values.device}")
    fields = dict(fields or {})
    field_pads = dict(field_pads or {})
    unknown = sorted(set(field_pads) - set(fields))
    if unknown:
        raise ValueError(f"field_pads names fields that are not in fields: {unknown}")
    fj, pads = {}, {}
    for name, nt in fields.items():
        if name in _RESERVED:
            raise ValueError(f"field name {name!r} collides with an output key {_RESERVED}")
        j = _jagged(nt, f"field {name!r}")
        if j.values.device != r.values.device:
            raise ValueError(f"field {name!r} on {j.values.device} but responses on {r.values.device}")
        if j.starts.numel() != r.starts.numel():
            raise ValueError(f"field {name!r} has {j.starts.numel()} rows but responses has {r.starts.numel()}")
        fj[name] = j
        pads[name] = _check_pad(name, field_pads.get(name, DEFAULT_FIELD_PADS.get(name, 0)), j.values.dtype)
    _check_lengths(p, r, fj, max_prompt_len, max_response_len)
    return _Batch(p, r, fj, pads, max_prompt_len, max_response_len, pad_token_id)


# ---------------------------------------------------------------------------------------------------------------
# Reference: one row at a time (the specification)
# ---------------------------------------------------------------------------------------------------------------
def densify_reference(
    prompts, responses, *, max_prompt_len, max_response_len, pad_token_id, fields=None, field_pads=None
) -> dict[str, torch.Tensor]:
    """Per-row loop over the batch; the readable specification the other paths must equal bit for bit.

    Args:
        prompts: NJT [B, j] of integer token ids.
        responses: NJT [B, j] of integer token ids.
        max_prompt_len: P, the configured prompt width.
        max_response_len: R, the configured response width.
        pad_token_id: token id written into padded slots of ``input_ids``, ``prompts`` and ``responses``.
        fields: name -> response-aligned NJT (same row lengths as ``responses``).
        field_pads: name -> pad value (default 0; ``rollout_is_weights`` 1.0).

    Returns:
        ``input_ids``, ``attention_mask``, ``position_ids`` [B, P+R]; ``prompts`` [B, P]; ``responses`` [B, R];
        one [B, R] tensor per field.

    Raises:
        ValueError: a row longer than P or R, a field whose lengths differ from the responses', bad pads.
        TypeError: inputs that are not 2-D jagged nested tensors.
    """
    b = _prepare(
        prompts,
        responses,
        max_prompt_len=max_prompt_len,
        max_response_len=max_response_len,
        pad_token_id=pad_token_id,
        fields=fields,
        field_pads=field_pads,
    )
    B, P, R, dev = b.B, b.P, b.R, b.device
    input_ids = torch.full((B, P + R), pad_token_id, dtype=torch.int64, device=dev)
    attention_mask = torch.zeros((B, P + R), dtype=torch.int64, device=dev)
    outs = {n: torch.full((B, R), b.pads[n], dtype=j.values.dtype, device=dev) for n, j in b.fields.items()}
    for i in range(B):
        ps, pl = int(b.prompts.starts[i]), int(b.prompts.lengths[i])
        rs, rl = int(b.responses.starts[i]), int(b.responses.lengths[i])
        input_ids[i, P - pl : P] = b.prompts.values[ps : ps + pl]
        input_ids[i, P : P + rl] = b.responses.values[rs : rs + rl]
        attention_mask[i, P - pl : P + rl] = 1
        for n, j in b.fields.items():
            fs = int(j.starts[i])
            outs[n][i, :rl] = j.values[fs : fs + rl]
    position_ids = (torch.cumsum(attention_mask, dim=-1) - 1).clamp(min=0)
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": position_ids,
        "prompts": input_ids[:, :P].contiguous(),
        "responses": input_ids[:, P:].contiguous(),
        **outs,
    }


# ---------------------------------------------------------------------------------------------------------------
# Vectorized torch path (CPU): scatter the N real tokens, no Python loop over rows
# ---------------------------------------------------------------------------------------------------------------
def _scatter_index(lengths: torch.Tensor, row_base: torch.Tensor, n: int, slots: int) -> torch.Tensor:
    """Flat destination of every real token: ``row_base[b] + k`` for token k of row b, as int64 [n].

    Built as ``repeat_interleave(row_base - excl_cumsum(len), len) + arange(n)``. Every intermediate lies in
    (-n, slots), so the math runs in int32 when ``max(n, slots) < 2**31`` (cheaper on CPU) and is widened once at
    the end because ``index_copy_`` takes int64 indices.
    """
    dt = torch.int32 if max(n, slots) < 2**31 else torch.int64
    shift = (row_base - (torch.cumsum(lengths, 0) - lengths)).to(dt)
    idx = torch.repeat_interleave(shift, lengths, output_size=n)
    idx += torch.arange(n, dtype=dt, device=idx.device)
    return idx.to(torch.int64)


def densify_vectorized(
    prompts, responses, *, max_prompt_len, max_response_len, pad_token_id, fields=None, field_pads=None
) -> dict[str, torch.Tensor]:
    """:func:`densify` in torch without a per-row loop (the CPU path). Same arguments, results and errors."""
    b = _prepare(
        prompts,
        responses,
        max_prompt_len=max_prompt_len,
        max_response_len=max_response_len,
        pad_token_id=pad_token_id,
        fields=fields,
        field_pads=field_pads,
    )
    return _vectorized(b)


def _vectorized(b: _Batch) -> dict[str, torch.Tensor]:
    B, P, R, dev = b.B, b.P, b.R, b.device
    W = P + R
    lp, lr = b.prompts.lengths, b.responses.lengths
    n_p, n_r = int(lp.sum()), int(lr.sum())
    rows = torch.arange(B, device=dev, dtype=torch.int64)
    # Destinations: prompt token k of row b -> b*P + (P - lp[b]) + k; response token k -> b*R + k.
    dst_p = _scatter_index(lp, rows * P + (P - lp), n_p, B * P)
    dst_r = _scatter_index(lr, rows * R, n_r, B * R)
    ids_p = torch.full((B * P,), b.pad_token_id, dtype=torch.int64, device=dev)
    ids_p.index_copy_(0, dst_p, b.prompts.compact().to(torch.int64))
    ids_r = torch.full((B * R,), b.pad_token_id, dtype=torch.int64, device=dev)
    ids_r.index_copy_(0, dst_r, b.responses.compact().to(torch.int64))
    ids_p, ids_r = ids_p.view(B, P), ids_r.view(B, R)
    input_ids = torch.cat([ids_p, ids_r], dim=1)
    # Mask: one comparison per slot, written straight into the int64 output.
    attention_mask = torch.empty((B, W), dtype=torch.int64, device=dev)
    torch.ge(torch.arange(P, device=dev), (P - lp)[:, None], out=attention_mask[:, :P])
    torch.lt(torch.arange(R, device=dev), lr[:, None], out=attention_mask[:, P:])
    # Positions, closed form of clip(cumsum(mask) - 1, 0): t = j - (P - lp) clamped to [0, max(lp + lr - 1, 0)].
    position_ids = torch.sub(torch.arange(W, device=dev), (P - lp)[:, None]).clamp_(min=0)
    torch.minimum(position_ids, (lp + lr - 1).clamp(min=0)[:, None], out=position_ids)
    outs = {}
    for name, j in b.fields.items():
        out = torch.full((B * R,), b.pads[name], dtype=j.values.dtype, device=dev)
        out.index_copy_(0, dst_r, j.compact())
        outs[name] = out.view(B, R)
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": position_ids,
        "prompts": ids_p,
        "responses": ids_r,
        **outs,
    }


# ---------------------------------------------------------------------------------------------------------------
# Triton path: one launch writes every output
# ---------------------------------------------------------------------------------------------------------------
MAX_FIELDS_PER_LAUNCH = 8

if HAS_TRITON:

    @triton.jit
    def _densify_field(in_ptr, out_ptr, pad, start_ptr, b, rk, r_valid, r_cols, R):
        # Fields are handed over as same-width integers: a pure bit copy, exact for NaN pads and any dtype.
        # ``pad`` is the pad's bit pattern as a runtime integer scalar (never constexpr: no recompiles per value).
        start = tl.load(start_ptr + b)
        v = tl.load(in_ptr + start + rk, mask=r_valid, other=0)
        v = tl.where(r_valid, v, pad)
        tl.store(out_ptr + b.to(tl.int64) * R + rk, v, mask=r_cols)

    @triton.jit(do_not_specialize=["pad_token_id"] + [f"f{i}_pad" for i in range(8)])
    def _densify_fwd_kernel(
        p_vals_ptr, p_starts_ptr, p_lens_ptr,
        r_vals_ptr, r_starts_ptr, r_lens_ptr,
        ids_ptr, mask_ptr, pos_ptr, prompts_ptr, responses_ptr,
        pad_token_id, P, R,
        f0_in, f0_out, f0_pad, f0_start, f1_in, f1_out, f1_pad, f1_start,
        f2_in, f2_out, f2_pad, f2_start, f3_in, f3_out, f3_pad, f3_start,
        f4_in, f4_out, f4_pad, f4_start, f5_in, f5_out, f5_pad, f5_start,
        f6_in, f6_out, f6_pad, f6_start, f7_in, f7_out, f7_pad, f7_start,
        NF: tl.constexpr, DO_IDS: tl.constexpr, BLOCK: tl.constexpr,
    ):  # fmt: skip
        # Program (b, c) owns columns [c*BLOCK, (c+1)*BLOCK) of row b in the [B, P+R] layout.
        b = tl.program_id(0)
        c = tl.program_id(1)
        W = P + R
        j = c * BLOCK + tl.arange(0, BLOCK)
        in_row = j < W
        lp = tl.load(p_lens_ptr + b)
        lr = tl.load(r_lens_ptr + b)
        rk = j - P  # response column
        r_cols = in_row & (j >= P)
        r_valid = r_cols & (rk < lr)
        if DO_IDS:
            pk = j - (P - lp)  # prompt token index (negative on left pads)
            p_valid = in_row & (j < P) & (pk >= 0)
            ps = tl.load(p_starts_ptr + b)
            rs = tl.load(r_starts_ptr + b)
            tok_p = tl.load(p_vals_ptr + ps + pk, mask=p_valid, other=0).to(tl.int64)
            tok_r = tl.load(r_vals_ptr + rs + rk, mask=r_valid, other=0).to(tl.int64)
            pad = tl.zeros_like(tok_p) + pad_token_id
            tok = tl.where(p_valid, tok_p, tl.where(r_valid, tok_r, pad))
            row = b.to(tl.int64) * W  # int64 row base: B*(P+R) can pass 2**31
            tl.store(ids_ptr + row + j, tok, mask=in_row)
            tl.store(mask_ptr + row + j, (p_valid | r_valid).to(tl.int64), mask=in_row)
            pos = tl.minimum(tl.maximum(pk, 0), tl.maximum(lp + lr - 1, 0))
            tl.store(pos_ptr + row + j, pos.to(tl.int64), mask=in_row)
            tl.store(prompts_ptr + b.to(tl.int64) * P + j, tok, mask=in_row & (j < P))
            tl.store(responses_ptr + b.to(tl.int64) * R + rk, tok, mask=r_cols)
        if (c + 1) * BLOCK > P:  # blocks entirely inside [0, P) have no field work
            if NF > 0:
                _densify_field(f0_in, f0_out, f0_pad, f0_start, b, rk, r_valid, r_cols, R)
            if NF > 1:
                _densify_field(f1_in, f1_out, f1_pad, f1_start, b, rk, r_valid, r_cols, R)
            if NF > 2:
                _densify_field(f2_in, f2_out, f2_pad, f2_start, b, rk, r_valid, r_cols, R)
            if NF > 3:
                _densify_field(f3_in, f3_out, f3_pad, f3_start, b, rk, r_valid, r_cols, R)
            if NF > 4:
                _densify_field(f4_in, f4_out, f4_pad, f4_start, b, rk, r_valid, r_cols, R)
            if NF > 5:
                _densify_field(f5_in, f5_out, f5_pad, f5_start, b, rk, r_valid, r_cols, R)
            if NF > 6:
                _densify_field(f6_in, f6_out, f6_pad, f6_start, b, rk, r_valid, r_cols, R)
            if NF > 7:
                _densify_field(f7_in, f7_out, f7_pad, f7_start, b, rk, r_valid, r_cols, R)


def densify_triton(
    prompts,
    responses,
    *,
    max_prompt_len,
    max_response_len,
    pad_token_id,
    fields=None,
    field_pads=None,
    block: int = 512,
) -> dict[str, torch.Tensor]:
    """:func:`densify` as one Triton launch (CUDA tensors, or CPU tensors under ``TRITON_INTERPRET=1``).

    Same arguments, results and errors as :func:`densify`; ``block`` is the column tile (a power of two).
    Grid (B, cdiv(P+R, block)); fields beyond the first 8 take one more launch per 8.
    """
    require_triton("densify_triton")
    b = _prepare(
        prompts,
        responses,
        max_prompt_len=max_prompt_len,
        max_response_len=max_response_len,
        pad_token_id=pad_token_id,
        fields=fields,
        field_pads=field_pads,
    )
    check_triton_device(_densify_fwd_kernel, b.responses.values, what="densify_triton")
    if block < 16 or block & (block - 1):
        raise ValueError(f"block must be a power of two >= 16, got {block}")
    return _triton_launch(b, block)


def _triton_launch(b: _Batch, block: int) -> dict[str, torch.Tensor]:
    """Allocate the outputs and launch (no validation: ``b`` comes from ``_prepare``). Timed alone by the bench."""
    B, P, R, dev = b.B, b.P, b.R, b.device
    W = P + R
    input_ids = torch.empty((B, W), dtype=torch.int64, device=dev)
    attention_mask = torch.empty((B, W), dtype=torch.int64, device=dev)
    position_ids = torch.empty((B, W), dtype=torch.int64, device=dev)
    prompts_out = torch.empty((B, P), dtype=torch.int64, device=dev)
    responses_out = torch.empty((B, R), dtype=torch.int64, device=dev)
    outs = {n: torch.empty((B, R), dtype=j.values.dtype, device=dev) for n, j in b.fields.items()}
    if B == 0 or W == 0:
        for n, o in outs.items():
            o.fill_(b.pads[n])
        return _result(input_ids, attention_mask, position_ids, prompts_out, responses_out, outs)
    slots = []
    for name, j in b.fields.items():
        bits = bits_dtype(j.values.dtype)
        pad = torch.tensor(b.pads[name], dtype=j.values.dtype).view(bits).item()  # host-side bit pattern
        vals = j.values.contiguous().view(bits)
        slots.append((vals, outs[name].view(bits), pad, j.starts.contiguous()))
    p_vals, r_vals = b.prompts.values.contiguous(), b.responses.values.contiguous()
    p_starts, p_lens = b.prompts.starts.contiguous(), b.prompts.lengths.contiguous()
    r_starts, r_lens = b.responses.starts.contiguous(), b.responses.lengths.contiguous()
    grid = (B, triton.cdiv(W, block))
    first = True
    while first or slots:
        chunk, slots = slots[:MAX_FIELDS_PER_LAUNCH], slots[MAX_FIELDS_PER_LAUNCH:]
        nf = len(chunk)
        dummy = (r_starts, r_starts, 0, r_starts)
        args = [a for s in chunk + [dummy] * (MAX_FIELDS_PER_LAUNCH - nf) for a in s]
        _densify_fwd_kernel[grid](
            p_vals, p_starts, p_lens, r_vals, r_starts, r_lens,
            input_ids, attention_mask, position_ids, prompts_out, responses_out,
            b.pad_token_id, P, R, *args,
            NF=nf, DO_IDS=first, BLOCK=block, num_warps=4,
        )  # fmt: skip
        first = False
    return _result(input_ids, attention_mask, position_ids, prompts_out, responses_out, outs)


def _result(input_ids, attention_mask, position_ids, prompts_out, responses_out, outs) -> dict[str, torch.Tensor]:
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": position_ids,
        "prompts": prompts_out,
        "responses": responses_out,
        **outs,
    }


# ---------------------------------------------------------------------------------------------------------------
# Public entry point
# ---------------------------------------------------------------------------------------------------------------
def densify(
    prompts, responses, *, max_prompt_len, max_response_len, pad_token_id, fields=None, field_pads=None
) -> dict[str, torch.Tensor]:
    """Jagged RL batch -> dense Arctic-wire layout; Triton on CUDA tensors, vectorized torch elsewhere.

    Args:
        prompts: NJT [B, j] (``layout=torch.jagged``) of integer token ids.
        responses: NJT [B, j] of integer token ids, same B and device.
        max_prompt_len: P, the configured prompt width (not the batch maximum).
        max_response_len: R, the configured response width.
        pad_token_id: token id for padded slots of ``input_ids``, ``prompts`` and ``responses``.
        fields: name -> NJT with the responses' row lengths (float, int or bool values).
        field_pads: name -> pad value; default 0, ``rollout_is_weights`` 1.0. NaN and negatives are allowed.

    Returns:
        dict with ``input_ids``, ``attention_mask``, ``position_ids`` [B, P+R] int64, ``prompts`` [B, P] and
        ``responses`` [B, R] int64, and one [B, R] tensor per field in that field's dtype.

    Raises:
        ValueError: a row longer than P or R (naming the row and lengths), a field whose row lengths differ from
            the responses' (naming the field), pads a field's dtype cannot hold, a field named like an output.
        TypeError: inputs that are not 2-D jagged nested tensors, or non-integer token ids.
    """
    kwargs = dict(
        max_prompt_len=max_prompt_len,
        max_response_len=max_response_len,
        pad_token_id=pad_token_id,
        fields=fields,
        field_pads=field_pads,
    )
    if HAS_TRITON and isinstance(responses, torch.Tensor) and responses.is_cuda:
        return densify_triton(prompts, responses, **kwargs)
    return densify_vectorized(prompts, responses, **kwargs)
