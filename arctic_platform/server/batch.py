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
"""Batch schema of the training / forward calls (docs/arctic-rl-protocol.md §5 dense layout) and the processing
allow-lists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ..protocol import ALLOWED_LOSS_FNS, ALLOWED_POST, RESPONSE_FIELDS
from .errors import RequestError


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """(cumsum(mask) - 1).clamp(min=0) * mask (docs/arctic-rl-protocol.md §5, ``drop_position_ids``)."""
    m = attention_mask.long()
    return (m.cumsum(-1) - 1).clamp(min=0) * m


def _need(batch: dict, key: str) -> torch.Tensor:
    if key not in batch:
        raise RequestError(f"batch.{key} is missing")
    t = batch[key]
    if not isinstance(t, torch.Tensor):
        raise RequestError(f"batch.{key} must be a tensor, got {type(t).__name__}")
    return t


def _int_2d(batch: dict, key: str, shape=None) -> torch.Tensor:
    t = _need(batch, key)
    if t.dtype.is_floating_point or t.dtype == torch.bool or t.dim() != 2:
        raise RequestError(f"batch.{key} must be a 2-D integer tensor, got {t.dtype} {list(t.shape)}")
    if shape is not None and tuple(t.shape) != tuple(shape):
        raise RequestError(f"batch.{key} has shape {list(t.shape)}, expected {list(shape)} (same as input_ids)")
    return t.long()


@dataclass
class DenseBatch:
    """A validated batch (docs/arctic-rl-protocol.md §5) on the engine's device."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    prompt_len: int
    response_len: int
    resp: dict[str, torch.Tensor] = field(default_factory=dict)


def select_rows(db: DenseBatch, rows: list[int]) -> DenseBatch:
    """The rows ``rows`` of ``db`` (new tensors)."""
    idx = torch.tensor(rows, dtype=torch.long)
    return DenseBatch(
        db.input_ids[idx],
        db.attention_mask[idx],
        db.position_ids[idx],
        db.prompt_len,
        db.response_len,
        {k: v[idx] for k, v in db.resp.items()},
    )


def parse_dense_batch(batch: Any, meta: dict, *, vocab_size: int, max_seq_len: int, need_response: bool) -> DenseBatch:
    """Validate ``batch`` against the dense layout (docs/arctic-rl-protocol.md §5); response fields return ``[b, R]``.

    Response-aligned fields are accepted as ``[b, R]`` or left-padded ``[b, P+R]`` (the protocol's wire form, which
    is canonical); P is the width of ``batch.prompts`` or ``meta.max_prompt_len``.

    Raises:
        RequestError: 422 naming the field.
    """
    if not isinstance(batch, dict):
        raise RequestError("batch must be a dict of tensors")
    check_reference_meta(meta)
    ids = _int_2d(batch, "input_ids")
    b, seq = ids.shape
    if b == 0 or seq == 0:
        raise RequestError(f"batch.input_ids is empty ({list(ids.shape)})")
    if seq > max_seq_len:
        raise RequestError(f"sequence length {seq} exceeds the job's max_seq_len {max_seq_len}")
    mask = _need(batch, "attention_mask")
    if mask.dim() != 2 or tuple(mask.shape) != (b, seq):
        raise RequestError(
            f"batch.attention_mask has shape {list(mask.shape)}, expected {[b, seq]} (same as input_ids)"
        )
    mask = mask.long()
    if bool(((mask != 0) & (mask != 1)).any()):
        raise RequestError("batch.attention_mask must hold only 0 and 1")
    if int(ids.min()) < 0 or int(ids.max()) >= vocab_size:
        raise RequestError(f"batch.input_ids holds ids outside [0, {vocab_size}) (the model's vocabulary)")
    pos = _int_2d(batch, "position_ids", (b, seq)) if batch.get("position_ids") is not None else None
    if pos is None:
        pos = position_ids_from_mask(mask)
    prompt_len = None
    if batch.get("prompts") is not None:
        prompts = _need(batch, "prompts")
        if prompts.dim() != 2 or prompts.shape[0] != b:
            raise RequestError(f"batch.prompts has shape {list(prompts.shape)}, expected [{b}, P]")
        prompt_len = prompts.shape[1]
    mp = meta.get("max_prompt_len")
    if mp is not None:
        if isinstance(mp, bool) or not isinstance(mp, int) or mp < 0:
            raise RequestError(f"meta.max_prompt_len must be a non-negative int, got {mp!r}")
        if prompt_len is not None and mp != prompt_len:
            raise RequestError(f"meta.max_prompt_len {mp} != batch.prompts width {prompt_len}")
        prompt_len = mp
    resp: dict[str, torch.Tensor] = {}
    if prompt_len is None:
        if need_response:
            raise RequestError("the prompt length is unknown: send batch.prompts [b, P] or meta.max_prompt_len")
        return DenseBatch(ids, mask, pos, 0, seq)
    if prompt_len > seq:
        raise RequestError(f"prompt length {prompt_len} exceeds the sequence length {seq}")
    resp_len = seq - prompt_len
    mr = meta.get("max_response_len")
    if mr is not None and mr != resp_len:
        raise RequestError(
            f"meta.max_response_len {mr} != input_ids width {seq} - prompt length {prompt_len} "
            "(pad to the config maxima)"
        )
    if need_response and resp_len == 0:
        raise RequestError("no response columns: input_ids width equals the prompt length")
    if batch.get("responses") is not None:
        r = _need(batch, "responses")
        if r.dim() != 2 or tuple(r.shape) != (b, resp_len):
            raise RequestError(f"batch.responses has shape {list(r.shape)}, expected {[b, resp_len]}")
    for key in RESPONSE_FIELDS:
        if batch.get(key) is None:
            continue
        t = _need(batch, key)
        if t.dim() != 2 or t.shape[0] != b or t.shape[1] not in (resp_len, seq):
            raise RequestError(
                f"batch.{key} has shape {list(t.shape)}, expected [{b}, {resp_len}] or left-padded [{b}, {seq}]"
            )
        if t.shape[1] == seq and seq != resp_len:
            if key in ("response_mask", "loss_mask") and bool(t[:, :prompt_len].any()):
                raise RequestError(
                    f"batch.{key} is [{b}, {seq}] but not left-padded: its first {prompt_len} (prompt) columns must "
                    "be 0 (response fields [b, P+R] carry P pad columns first, the reference layout)"
                )
            t = t[:, prompt_len:]
        if key in ("response_mask", "loss_mask"):
            t = t.bool() if t.dtype == torch.bool else (t != 0)
        else:
            if not t.dtype.is_floating_point:
                raise RequestError(f"batch.{key} must be a floating-point tensor, got {t.dtype}")
            t = t.float()
        resp[key] = t
    if need_response:
        for key in ("response_mask", "old_log_probs", "advantages"):
            if key not in resp:
                raise RequestError(f"batch.{key} is missing")
    if "loss_mask" in resp and "response_mask" in resp and not torch.equal(resp["loss_mask"], resp["response_mask"]):
        raise RequestError("batch.loss_mask differs from batch.response_mask (the reference layout sends a copy)")
    return DenseBatch(ids, mask, pos, prompt_len, resp_len, resp)


LOGITS_OPTIMIZATIONS = ("none", "compute")
"""``meta.logits_optimization`` values that give the same numbers here (full logits either way); Arctic-Platform's
``memory`` mode exists only on its ZoRRo path."""


def check_reference_meta(meta: dict) -> None:
    """The Arctic-Platform meta keys this server reads: honoured, or refused with a 422 naming them.

    ``load_balancer``, ``zorro_train_max_rollouts``, ``max_token_len_per_gpu`` and ``logits_*`` size or place the
    reference's work (one rank here); ``zorro_train_enable`` must be false; ``rollout_is_weights`` may only be None
    (IS weights travel in ``batch``, response-aligned, docs/arctic-rl-protocol.md §4).
    """
    if meta.get("zorro_train_enable"):
        raise RequestError("meta.zorro_train_enable=true: this server has no ZoRRo training path", 422)
    lo = meta.get("logits_optimization")
    if lo is not None and lo not in LOGITS_OPTIMIZATIONS:
        raise RequestError(f"meta.logits_optimization={lo!r}: supported are {list(LOGITS_OPTIMIZATIONS)}", 422)
    if meta.get("rollout_is_weights") is not None:
        raise RequestError(
            "meta.rollout_is_weights: send IS weights in batch.rollout_is_weights (response-aligned, [b, R] or "
            "left-padded [b, P+R]); per-row data in meta is not split with the rows",
            422,
        )


def meta_number(meta: dict, key: str, *, minimum: float = 0.0):
    """``meta[key]`` as a number > ``minimum`` (a one-element tensor is read as its value); None when absent.

    Raises:
        RequestError: 422 naming ``meta.<key>``.
    """
    v = meta.get(key)
    if v is None:
        return None
    if isinstance(v, torch.Tensor) and v.numel() == 1:
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > minimum:
        raise RequestError(f"meta.{key} must be a number > {minimum}, got {v!r}")
    return v


_ALLOWED_POST = set(ALLOWED_POST)
_ALLOWED_LOSS_FNS = set(ALLOWED_LOSS_FNS)


def check_processing(processing: dict | None, *, forward_only: bool) -> None:
    """Names resolve only from a fixed allow-list (docs/arctic-rl-protocol.md §5); ``apply_temperature`` in ``post``
    decides whether ``meta.temperature`` divides the logits (``model_engine.logits_temperature``)."""
    if processing is None:
        return
    if not isinstance(processing, dict):
        raise RequestError("processing must be a dict")
    post = processing.get("post") or []
    if not isinstance(post, (list, tuple)) or any(p not in _ALLOWED_POST for p in post):
        raise RequestError(f"processing.post {post!r}: allowed steps are {sorted(_ALLOWED_POST)}")
    fn = processing.get("loss_fn")
    if fn not in _ALLOWED_LOSS_FNS:
        raise RequestError(f"processing.loss_fn {fn!r}: allowed are {sorted(x for x in _ALLOWED_LOSS_FNS if x)}")
    if forward_only and fn is not None:
        raise RequestError(f"processing.loss_fn {fn!r} on a forward-only call; send it to /forward-backward")
