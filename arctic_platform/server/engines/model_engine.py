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
"""What every engine shares: model loading, the forward pass, log-probs, sleep / wake and weight copies.

Log-prob conventions (all paths, docs/arctic-rl-protocol.md §6): logits are divided by ``meta.temperature`` when
the frame's ``processing.post`` names ``apply_temperature`` (or the frame sends no ``processing``), as Arctic-Platform's
pipeline does (``temperature <= 0`` means 1.0, as greedy sampling reports log-probs at T = 1);
``logprobs[:, i] = log P(input_ids[:, i + 1])`` on real tokens, 0 elsewhere (the last column, padding, and the slot
before the first real token).
"""

from __future__ import annotations

import contextlib
import math
import threading
from dataclasses import dataclass, replace
from typing import Any

import torch

from ..batch import DenseBatch, check_processing, parse_dense_batch, position_ids_from_mask
from ..errors import RequestError
from .base import EngineSettings, param_items, weight_norm  # noqa: F401  (this module's public names too)

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "float64": torch.float64}
"""``float64`` is for exact CPU comparisons (parity tests); the others are the usual compute dtypes."""


def resolve_dtype(name: str) -> torch.dtype:
    if name not in _DTYPES:
        raise RequestError(f"dtype {name!r} is not one of {sorted(_DTYPES)}", 400)
    return _DTYPES[name]


_LOAD_LOCK = threading.Lock()


def autocast_context(device: torch.device, compute_dtype: torch.dtype):
    """``torch.autocast`` to ``compute_dtype`` on ``device`` (a no-op for float32).

    Training jobs keep float32 master weights and compute in the job's dtype, as verl's FSDP engine does
    (``mixed_precision.param_dtype`` bf16 over float32 parameters, ``torch.autocast`` around the forward and loss).
    """
    if compute_dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=compute_dtype)


def load_model(s: EngineSettings, *, train: bool):
    """Load ``s.model_path`` as a causal LM on ``s.device`` in ``s.dtype``.

    Loads are serialised: ``from_pretrained`` initialises on the meta device through process-global patches, so two
    jobs building in parallel threads would corrupt each other.
    """
    import transformers
    from transformers import AutoModelForCausalLM

    transformers.utils.logging.disable_progress_bar()
    with _LOAD_LOCK:
        model = AutoModelForCausalLM.from_pretrained(
            s.model_path, dtype=resolve_dtype(s.dtype), attn_implementation=s.attn_implementation
        )
    model.to(s.device)
    model.train(train)
    if not train:
        model.requires_grad_(False)
    return model


def meta_temperature(t: Any) -> float:
    """``meta.temperature`` as the divisor of the logits: None or 0 mean 1.0 (greedy reports log-probs at T = 1).

    Raises:
        RequestError: 422 for a negative or non-finite value.
    """
    if t is None:
        return 1.0
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
        raise RequestError(f"meta.temperature must be a finite number, got {t!r}")
    if t < 0:
        raise RequestError(f"meta.temperature must be >= 0, got {t}")
    return 1.0 if t == 0 else float(t)


def logits_temperature(meta: dict, processing: dict | None) -> float:
    """The divisor of the logits for one frame: ``meta.temperature`` when ``processing.post`` names
    ``apply_temperature``, else 1.0, as Arctic-Platform's pipeline reads the same frame. A frame without
    ``processing`` gets this server's default (the protocol's ``FORWARD_PROCESSING`` / ``UPDATE_PROCESSING``, which
    name it). ``meta.temperature`` is validated either way.

    Raises:
        RequestError: 422 for a negative or non-finite ``meta.temperature``.
    """
    temperature = meta_temperature(meta.get("temperature"))
    if processing is not None and "apply_temperature" not in (processing.get("post") or []):
        return 1.0
    return temperature


def token_logprobs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log_softmax(logits)[label] for ``logits [..., V]`` (float32)."""
    return torch.log_softmax(logits, dim=-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """H = logsumexp(z) - Σ softmax(z)·z (verl's formula)."""
    pd = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - torch.sum(pd * logits, dim=-1)


def at_least_float32(t: torch.Tensor) -> torch.Tensor:
    """``t`` in float32, or in its own dtype when that is wider (float64 stays float64)."""
    return t if t.dtype in (torch.float32, torch.float64) else t.float()


def model_logits(
    model, input_ids, attention_mask, position_ids, temperature: float, keep_last: int = 0
) -> torch.Tensor:
    """Logits / temperature in at least float32, ``[B, L, V]``; with ``keep_last`` > 0 only the last ``keep_last``
    positions' (``[B, keep_last, V]``: the LM head and the float32 logits are computed for those alone)."""
    extra = {"logits_to_keep": keep_last} if keep_last > 0 else {}
    out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False, **extra)
    logits = at_least_float32(out.logits)
    return logits / temperature if temperature != 1.0 else logits


def real_columns(mask: torch.Tensor) -> tuple[int, int]:
    """``[lo, hi)``: the columns of a dense micro-batch (left-padded prompts, right-padded responses) where some row
    holds a real token. Columns outside are padding in every row: a row's attention never reaches them and its
    position ids come from its own mask, so computing without them gives the same numbers (verl computes each row on
    its own tokens: ``use_remove_padding``)."""
    cols = torch.nonzero(mask.bool().any(0)).flatten()
    if not len(cols):
        return 0, int(mask.shape[1])
    return int(cols[0]), int(cols[-1]) + 1


@dataclass
class ForwardPlan:
    """A validated ``/forward`` call: the batch, its micro-batches (row indices) and the log-prob settings."""

    db: DenseBatch
    parts: list[list[int]]
    temperature: float
    want_entropy: bool
    micro_batching: Any = None
    """The call's :class:`.loss.MicroBatching` (a sharded engine cuts each rank's rows with it)."""


def plan_forward(batch: dict, meta: dict, processing: dict | None, *, vocab_size: int, max_seq_len: int) -> ForwardPlan:
    """Validate a ``/forward`` call (422 / 400 naming the field) and cut it into micro-batches."""
    meta = meta or {}
    check_processing(processing, forward_only=True)
    temperature = logits_temperature(meta, processing)
    want_entropy = bool(meta.get("calculate_entropy", False))
    db = parse_dense_batch(batch, meta, vocab_size=vocab_size, max_seq_len=max_seq_len, need_response=False)
    from ..loss import LossConfigError, micro_batch_rows, micro_batching_from_meta

    try:
        mb = micro_batching_from_meta(meta)
        parts = micro_batch_rows(db.attention_mask.sum(-1), mb)
    except LossConfigError as e:
        raise RequestError(str(e)) from None
    return ForwardPlan(db, parts, temperature, want_entropy, mb)


def forward_reply(lp_all: torch.Tensor, ent_all: torch.Tensor | None) -> dict:
    """The reply body of ``/forward``."""
    out = {"logprobs": lp_all}
    if ent_all is not None:
        out["entropy"] = ent_all
    return {"batch": out, "metrics": {}}


class ModelEngine:
    """The base of the torch engines: one ``AutoModelForCausalLM``, the forward pass, sleep / wake, ``/log-probs``."""

    kind = "base"

    def __init__(self, settings: EngineSettings, *, train: bool, param_dtype: str | None = None):
        self.settings = settings
        self.model = self._load_model(settings if param_dtype is None else replace(settings, dtype=param_dtype), train)
        self.vocab_size = int(self.model.get_input_embeddings().weight.shape[0])
        self.device = torch.device(settings.device)
        self.compute_dtype = resolve_dtype(settings.dtype)
        self.param_dtype = resolve_dtype(param_dtype or settings.dtype)

    def _load_model(self, settings: EngineSettings, train: bool):
        """The engine's model (a sharded engine builds its shard here)."""
        return load_model(settings, train=train)

    def _no_grad(self):
        """The context of forward-only passes: ``inference_mode`` (a sharded engine: ``no_grad``, because FSDP reuses
        its all-gather buffers in training, and a buffer made in inference mode cannot be written outside it)."""
        return torch.inference_mode()

    def autocast(self):
        """Mixed precision around forward passes: only when parameters are stored wider than the compute dtype."""
        if self.param_dtype == self.compute_dtype:
            return contextlib.nullcontext()
        return autocast_context(self.device, self.compute_dtype)

    def close(self) -> None:
        self.model = None

    def weight_norm(self) -> tuple[float, int]:
        """:func:`weight_norm` of this engine's model."""
        return weight_norm(self.model)

    def _to(self, t: torch.Tensor) -> torch.Tensor:
        return t.to(self.device, non_blocking=False)

    def forward(self, batch: dict, meta: dict, processing: dict | None = None) -> dict:
        """Predict-next log-probs ``[B, L]`` (and entropy) at :func:`logits_temperature`; see the module docstring."""
        plan = plan_forward(batch, meta, processing, vocab_size=self.vocab_size, max_seq_len=self.settings.max_seq_len)
        lp_all, ent_all = self.forward_rows(plan.db, plan.parts, plan.temperature, plan.want_entropy)
        return forward_reply(lp_all, ent_all)

    def forward_rows(
        self, db: DenseBatch, parts: list[list[int]], temperature: float, want_entropy: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Log-probs (and entropy) ``[b, L]`` of ``db``'s rows, one forward per micro-batch of ``parts`` (row
        indices into ``db``). An empty part runs one forward on row 0 whose result is dropped: a sharded model's
        ranks must run the same number of forwards (their collectives pair up)."""
        lp_all = torch.zeros(db.input_ids.shape, dtype=torch.float32)
        ent_all = torch.zeros(db.input_ids.shape, dtype=torch.float32) if want_entropy else None
        was_training = self.model.training
        self.model.eval()
        try:
            with self._no_grad(), self.autocast():
                for rows in parts:
                    idx = torch.tensor(rows or [0], dtype=torch.long)
                    lo, hi = real_columns(db.attention_mask[idx])  # the micro-batch's real tokens only
                    ids, mask = self._to(db.input_ids[idx, lo:hi]), self._to(db.attention_mask[idx, lo:hi])
                    logits = model_logits(self.model, ids, mask, self._to(db.position_ids[idx, lo:hi]), temperature)
                    if not rows:
                        continue
                    labels = torch.roll(ids, shifts=-1, dims=1)
                    valid = (mask.bool() & torch.roll(mask.bool(), shifts=-1, dims=1)).clone()
                    valid[:, -1] = False
                    lp_all[idx, lo:hi] = torch.where(valid, token_logprobs(logits, labels), 0.0).float().cpu()
                    if want_entropy:
                        ent_all[idx, lo:hi] = torch.where(valid, entropy_from_logits(logits), 0.0).float().cpu()
        finally:
            self.model.train(was_training)
        return lp_all, ent_all

    # ---- sleep / wake of a model engine (/sleep-training, /wake-training, /sleep-log-prob, /wake-log-prob) ----
    asleep = False

    def offload(self, mode: str = "all") -> dict:
        """Move the weights (and optimizer state) to CPU. On a CPU engine nothing moves; the state is recorded."""
        if self.device.type == "cuda":
            self.model.to("cpu")
            opt = getattr(self, "optimizer", None)
            if opt is not None and mode != "lp_params":
                _optimizer_to(opt, torch.device("cpu"))
            torch.cuda.empty_cache()
        self.asleep = True
        return {"offloaded": True, "mode": mode, "device": str(self.device)}

    def reload(self) -> dict:
        if self.device.type == "cuda":
            self.model.to(self.device)
            opt = getattr(self, "optimizer", None)
            if opt is not None:
                _optimizer_to(opt, self.device)
        self.asleep = False
        return {"reloaded": True, "device": str(self.device)}

    def empty_cache(self) -> dict:
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        return {"emptied": True, "device": str(self.device)}

    def require_awake(self) -> None:
        if self.asleep:
            raise RequestError(f"the {self.kind} engine is offloaded (sleeping); wake it first", 409)

    def log_probs_text(self, tokenizer, prompts: list, completions: list | None, top_k: int = 1) -> list[dict]:
        """``/log-probs``: log-probs (T = 1) of every token of prompt + completion given the tokens before it, in the
        reference's vLLM result shape (``prompt_logprobs``: per position ``{str(id): {logprob, rank}}`` holding the
        actual token and the ``top_k`` best; position 0 is None), plus one greedy token as vLLM's ``max_tokens=1``."""
        rows: list[list[int]] = []
        plens: list[int] = []
        for i, p in enumerate(prompts):
            c = completions[i] if completions is not None else None
            pid = list(tokenizer.encode(p, add_special_tokens=False)) if isinstance(p, str) else list(p)
            cid = (
                []
                if c is None
                else (list(tokenizer.encode(c, add_special_tokens=False)) if isinstance(c, str) else list(c))
            )
            ids = pid + cid
            if len(ids) < 2:
                raise RequestError(f"prompts[{i}] (+ completion) has fewer than 2 tokens; nothing to score", 422)
            if len(ids) > self.settings.max_seq_len:
                raise RequestError(
                    f"row {i} has {len(ids)} tokens, more than max_seq_len {self.settings.max_seq_len}", 400
                )
            if min(ids) < 0 or max(ids) >= self.vocab_size:
                raise RequestError(f"row {i} holds token ids outside [0, {self.vocab_size})", 422)
            rows.append(ids)
            plens.append(len(pid))
        out = []
        with self._no_grad():
            for ids, pl in zip(rows, plens, strict=True):
                t = self._to(torch.tensor([ids], dtype=torch.long))
                logits = model_logits(
                    self.model, t, torch.ones_like(t), position_ids_from_mask(torch.ones_like(t)), 1.0
                )
                logp = torch.log_softmax(logits[0, :-1].float(), dim=-1).cpu()
                plps: list[dict | None] = [None]  # vLLM's prompt_logprobs: nothing predicts the first token
                for pos, tok in enumerate(ids[1:]):
                    row = logp[pos]
                    entry: dict[str, dict] = {}
                    if top_k > 0:
                        v, ix = torch.topk(row, min(top_k, row.numel()))
                        for rank, (a, b) in enumerate(zip(ix.tolist(), v.tolist(), strict=True), start=1):
                            entry[str(a)] = {"logprob": float(b), "rank": rank}
                    if str(tok) not in entry:
                        entry[str(tok)] = {"logprob": float(row[tok]), "rank": int((row > row[tok]).sum()) + 1}
                    plps.append(entry)
                nxt = int(logits[0, -1].argmax())  # as the reference's vLLM path: one greedy token (max_tokens=1, T=0)
                out.append(
                    {
                        "text": tokenizer.decode([nxt]),
                        "token_ids": [nxt],
                        "finish_reason": "length",
                        "prompt_len": len(ids),
                        "generation_len": 1,
                        "prefix_cache_len": 0,
                        "prompt_token_ids": ids,  # extension: the scored ids (prompt + completion)
                        "completion_start": pl,  # extension: index of the first completion token
                        "prompt_logprobs": plps,
                    }
                )
        return out


def _optimizer_to(opt, device) -> None:
    for st in opt.state.values():
        for k, v in st.items():
            if isinstance(v, torch.Tensor) and k != "step":
                st[k] = v.to(device)


def copy_weights(src, dst) -> None:
    """Copy ``src``'s parameters into ``dst`` in place (same names and shapes; 409 otherwise)."""
    from .shared import check_weight_layout

    dst_params = dict(dst.named_parameters())
    src_items = param_items(src)
    check_weight_layout({n: p.shape for n, p in src_items}, {n: q.shape for n, q in dst_params.items()})
    with torch.no_grad():
        for name, p in src_items:
            q = dst_params[name]
            q.copy_(p.detach().to(q.device, q.dtype))
