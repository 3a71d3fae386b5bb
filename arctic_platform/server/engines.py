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
"""torch + transformers engines of the embedded Arctic RL server: training, sampling and forward-only.

Every engine owns its own ``AutoModelForCausalLM`` (CPU float32 by default, CUDA bfloat16 when present):

* :class:`TrainingEngine` (job ``training``): ``forward_backward`` (verl policy loss, gradients accumulate),
  ``step`` (grad clipping + AdamW + warmup/constant/cosine schedule), ``forward``, checkpoints (safetensors + JSON).
* :class:`SamplingEngine` (job ``sampling``): batched KV-cache decoding of token-id prompts with per-request seeds;
  its weights change only through :meth:`SamplingEngine.load_weights_from` (``/weight-sync``).
* :class:`ForwardEngine` (job ``log_prob``): forward-only log-probs with the initial weights.

Engines are not thread-safe; the job registry serialises calls with one lock per job. Log-prob conventions (all
paths, protocol §5.1 and §6.2 item 4): logits are divided by the temperature given (``temperature <= 0`` means 1.0,
as greedy sampling reports log-probs at T = 1); ``logprobs[:, i] = log P(input_ids[:, i + 1])`` on real tokens,
0 elsewhere (the last column, padding, and the slot before the first real token).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..protocol import ALLOWED_LOSS_FNS, ALLOWED_POST, RESPONSE_FIELDS
from . import loss as L

logger = logging.getLogger("arctic_platform.server")

__all__ = [
    "EngineSettings",
    "ForwardEngine",
    "GenerateItem",
    "RequestError",
    "SamplingEngine",
    "TrainingEngine",
    "TrainingSettings",
]


class RequestError(ValueError):
    """A client mistake found inside an engine call; ``status`` is the HTTP code (422 schema, 409 state, 400)."""

    def __init__(self, reason: str, status: int = 422):
        super().__init__(reason)
        self.status = status
        self.reason = reason


# ------------------------------------------------------------------------------------------------
# settings
# ------------------------------------------------------------------------------------------------


@dataclass
class EngineSettings:
    """What every engine needs to load its model."""

    model_path: str
    device: str = "cpu"
    dtype: str = "float32"
    max_seq_len: int = 8192
    attn_implementation: str = "sdpa"
    seed: int = 42


@dataclass
class TrainingSettings:
    """Optimizer and schedule (``JobConfig.training_config``)."""

    lr: float = 1e-6
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.01
    eps: float = 1e-8
    grad_clip: float | None = 1.0
    lr_scheduler_type: str = "constant"
    warmup_steps: int = 0
    total_steps: int | None = None
    min_lr_ratio: float = 0.0
    micro_batch_size: int | None = None


_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_dtype(name: str) -> torch.dtype:
    if name not in _DTYPES:
        raise RequestError(f"dtype {name!r} is not one of {sorted(_DTYPES)}", 400)
    return _DTYPES[name]


_LOAD_LOCK = threading.Lock()


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


def _param_items(model) -> list[tuple[str, torch.nn.Parameter]]:
    """Named parameters, each tensor once (tied embeddings are listed under their first name)."""
    return list(model.named_parameters())


def weight_norm(model) -> tuple[float, int]:
    """sqrt(Σ p²) in float64 over unique parameters, and their element count."""
    total = torch.zeros((), dtype=torch.float64)
    n = 0
    with torch.no_grad():
        for _, p in _param_items(model):
            total += p.detach().to("cpu", torch.float64).square().sum()
            n += p.numel()
    return math.sqrt(total.item()), n


# ------------------------------------------------------------------------------------------------
# shared forward pass
# ------------------------------------------------------------------------------------------------


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """(cumsum(mask) - 1).clamp(min=0) * mask (protocol §4, ``drop_position_ids``)."""
    m = attention_mask.long()
    return (m.cumsum(-1) - 1).clamp(min=0) * m


def _temperature(t: Any) -> float:
    if t is None:
        return 1.0
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
        raise RequestError(f"meta.temperature must be a finite number, got {t!r}")
    if t < 0:
        raise RequestError(f"meta.temperature must be >= 0, got {t}")
    return 1.0 if t == 0 else float(t)


def token_logprobs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log_softmax(logits)[label] for ``logits [..., V]`` (float32)."""
    return torch.log_softmax(logits, dim=-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """H = logsumexp(z) - Σ softmax(z)·z (verl's formula)."""
    pd = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - torch.sum(pd * logits, dim=-1)


def model_logits(model, input_ids, attention_mask, position_ids, temperature: float) -> torch.Tensor:
    """float32 logits / temperature, ``[B, L, V]``."""
    out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False)
    logits = out.logits.float()
    return logits / temperature if temperature != 1.0 else logits


# ------------------------------------------------------------------------------------------------
# batch schema (protocol §4 dense layout)
# ------------------------------------------------------------------------------------------------


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
    """A validated §4 batch on the engine's device."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    prompt_len: int
    response_len: int
    resp: dict[str, torch.Tensor] = field(default_factory=dict)


def parse_dense_batch(batch: Any, meta: dict, *, vocab_size: int, max_seq_len: int, need_response: bool) -> DenseBatch:
    """Validate ``batch`` against the §4 layout; response-aligned fields come back as ``[b, R]``.

    Response-aligned fields are accepted as ``[b, R]`` or left-padded ``[b, P+R]`` (the protocol's wire form, which
    is canonical); P is the width of ``batch.prompts`` or ``meta.max_prompt_len``.

    Raises:
        RequestError: 422 naming the field.
    """
    if not isinstance(batch, dict):
        raise RequestError("batch must be a dict of tensors")
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
    return DenseBatch(ids, mask, pos, prompt_len, resp_len, resp)


def _num(meta: dict, key: str, *, minimum: float = 0.0):
    v = meta.get(key)
    if v is None:
        return None
    if isinstance(v, torch.Tensor) and v.numel() == 1:
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > minimum:
        raise RequestError(f"meta.{key} must be a number > {minimum}, got {v!r}")
    return v


# ------------------------------------------------------------------------------------------------
# engines
# ------------------------------------------------------------------------------------------------


class _ModelEngine:
    kind = "base"

    def __init__(self, settings: EngineSettings, *, train: bool):
        self.settings = settings
        self.model = load_model(settings, train=train)
        self.vocab_size = int(self.model.get_input_embeddings().weight.shape[0])
        self.device = torch.device(settings.device)

    def close(self) -> None:
        self.model = None

    def _to(self, t: torch.Tensor) -> torch.Tensor:
        return t.to(self.device, non_blocking=False)

    def forward(self, batch: dict, meta: dict, processing: dict | None = None) -> dict:
        """Predict-next log-probs ``[B, L]`` (and entropy) at ``meta.temperature``; see the module docstring."""
        meta = meta or {}
        _check_processing(processing, forward_only=True)
        temperature = _temperature(meta.get("temperature"))
        want_entropy = bool(meta.get("calculate_entropy", False))
        db = parse_dense_batch(
            batch, meta, vocab_size=self.vocab_size, max_seq_len=self.settings.max_seq_len, need_response=False
        )
        mbs = meta.get("micro_batch_size") or len(db.input_ids)
        lps, ents = [], []
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                for s in range(0, len(db.input_ids), int(mbs)):
                    sl = slice(s, s + int(mbs))
                    ids, mask = self._to(db.input_ids[sl]), self._to(db.attention_mask[sl])
                    logits = model_logits(self.model, ids, mask, self._to(db.position_ids[sl]), temperature)
                    labels = torch.roll(ids, shifts=-1, dims=1)
                    valid = (mask.bool() & torch.roll(mask.bool(), shifts=-1, dims=1)).clone()
                    valid[:, -1] = False
                    lp = torch.where(valid, token_logprobs(logits, labels), 0.0)
                    lps.append(lp.cpu())
                    if want_entropy:
                        ents.append(torch.where(valid, entropy_from_logits(logits), 0.0).cpu())
        finally:
            self.model.train(was_training)
        out = {"logprobs": torch.cat(lps).float()}
        if want_entropy:
            out["entropy"] = torch.cat(ents).float()
        return {"batch": out, "metrics": {}}

    def weight_norm(self) -> tuple[float, int]:
        return weight_norm(self.model)

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
        actual token and the ``top_k`` best; position 0 is None). Nothing is generated."""
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
        with torch.inference_mode():
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
                out.append(
                    {
                        "text": "",
                        "token_ids": [],
                        "finish_reason": "length",
                        "prompt_len": len(ids),
                        "generation_len": 0,
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


_ALLOWED_POST = set(ALLOWED_POST)
_ALLOWED_LOSS_FNS = set(ALLOWED_LOSS_FNS)


def _check_processing(processing: dict | None, *, forward_only: bool) -> None:
    """Names resolve only from a fixed allow-list (protocol §4); temperature is applied on every path regardless."""
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


class ForwardEngine(_ModelEngine):
    """Forward-only engine (job ``log_prob``): reference log-probs with the initial weights."""

    kind = "log_prob"

    def __init__(self, settings: EngineSettings):
        super().__init__(settings, train=False)
        self._tokenizer = None

    def tokenizer(self):
        """The model folder's tokenizer (``/log-probs`` with text prompts)."""
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            try:
                self._tokenizer = AutoTokenizer.from_pretrained(self.settings.model_path)
            except Exception as e:  # noqa: BLE001
                raise RequestError(f"the model folder has no usable tokenizer for text prompts ({e})", 422) from None
        return self._tokenizer

    def load_weights_from(self, source_model) -> None:
        _copy_weights(source_model, self.model)


def _copy_weights(src, dst) -> None:
    dst_params = dict(dst.named_parameters())
    src_items = _param_items(src)
    if set(n for n, _ in src_items) != set(dst_params):
        raise RequestError("source and target models have different parameter names; cannot sync weights", 409)
    with torch.no_grad():
        for name, p in src_items:
            q = dst_params[name]
            if q.shape != p.shape:
                raise RequestError(f"weight {name}: shape {list(p.shape)} != target {list(q.shape)}", 409)
            q.copy_(p.detach().to(q.device, q.dtype))


def _lr_lambda_factory(ts: TrainingSettings):
    warmup = int(ts.warmup_steps or 0)
    kind = ts.lr_scheduler_type
    total = ts.total_steps
    min_ratio = float(ts.min_lr_ratio or 0.0)

    def lr_lambda(step: int) -> float:
        if kind == "cosine":
            # verl.utils.torch_functional.get_cosine_schedule_with_warmup (init_lr_ratio 0, zero-indexed steps)
            if step < warmup:
                return float(step) / float(max(1, warmup))
            progress = float(step - warmup) / float(max(1, (total or 1) - warmup))
            x = math.cos(math.pi * 0.5 * 2.0 * progress)
            return max(min_ratio, x * (1 - min_ratio) * 0.5 + (1 + min_ratio) * 0.5)
        # constant with warmup: verl.utils.torch_functional.get_constant_schedule_with_warmup
        if step < warmup:
            return float(step) / float(max(1.0, warmup))
        return 1.0

    return lr_lambda


class TrainingEngine(_ModelEngine):
    """Policy engine (job ``training``)."""

    kind = "training"

    def __init__(self, settings: EngineSettings, training: TrainingSettings):
        super().__init__(settings, train=True)
        self.training = training
        self.param_names = [n for n, p in _param_items(self.model) if p.requires_grad]
        params = dict(self.model.named_parameters())
        self.params = [params[n] for n in self.param_names]
        self.optimizer = torch.optim.AdamW(
            self.params,
            lr=training.lr,
            betas=tuple(training.betas),
            eps=training.eps,
            weight_decay=training.weight_decay,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, _lr_lambda_factory(training))
        self.global_steps = 0
        self.policy_version = 0
        self.pending_backward = 0
        self.model.zero_grad(set_to_none=True)

    # ---- loss ----
    def forward_backward(self, batch: dict, meta: dict, processing: dict | None = None) -> dict:
        """verl policy loss on one mini-batch; gradients accumulate until :meth:`step`."""
        meta = meta or {}
        _check_processing(processing, forward_only=False)
        try:
            cfg = L.LossConfig.from_actor_config(meta.get("actor_config"), meta.get("policy_loss_config"))
        except L.LossConfigError as e:
            raise RequestError(str(e)) from None
        temperature = _temperature(meta.get("temperature"))
        db = parse_dense_batch(
            batch, meta, vocab_size=self.vocab_size, max_seq_len=self.settings.max_seq_len, need_response=True
        )
        if cfg.use_kl_loss and "ref_log_prob" not in db.resp:
            raise RequestError("batch.ref_log_prob is missing (actor_config.use_kl_loss=True needs it)")
        want_entropy = bool(meta.get("calculate_entropy", False)) or cfg.entropy_coeff != 0.0
        P, R = db.prompt_len, db.response_len
        mask = db.resp["response_mask"]
        # Global denominators (protocol §4 meta): given for the whole mini-batch, else this call's own.
        bnt = _num(meta, "batch_num_tokens")
        gbs = _num(meta, "global_batch_size")
        micro = meta.get("micro_batch_size") or self.training.micro_batch_size or len(db.input_ids)
        if isinstance(micro, bool) or not isinstance(micro, int) or micro < 1:
            raise RequestError(f"meta.micro_batch_size must be a positive int, got {micro!r}")
        if P == 0:
            raise RequestError("prompt length 0: the first response token has no predicting position")
        n = len(db.input_ids)
        single = micro >= n
        if not single:  # splitting must not change the loss: fix the denominators from the whole call
            if bnt is None:
                bnt = mask.sum().item()
            if gbs is None:
                gbs = (mask.sum(-1) > 0).sum().item()
        totals: dict[str, Any] = {}
        self.model.train()
        for s in range(0, n, micro):
            sl = slice(s, s + micro)
            ids = self._to(db.input_ids[sl])
            logits = model_logits(
                self.model, ids, self._to(db.attention_mask[sl]), self._to(db.position_ids[sl]), temperature
            )
            # response token k sits at column P + k and is predicted by column P + k - 1
            resp_logits = logits[:, P - 1 : P + R - 1]
            labels = ids[:, P : P + R]
            log_prob = token_logprobs(resp_logits, labels)
            entropy = entropy_from_logits(resp_logits) if want_entropy else None
            r = {k: self._to(v[sl]) for k, v in db.resp.items()}
            loss, parts = L.ppo_loss(
                log_prob,
                r["old_log_probs"],
                r["advantages"],
                r["response_mask"],
                cfg,
                entropy=entropy,
                ref_log_prob=r.get("ref_log_prob"),
                rollout_is_weights=r.get("rollout_is_weights"),
                batch_num_tokens=bnt,
                global_batch_size=gbs,
            )
            loss.backward()
            parts["loss"] = loss.detach()
            parts["count"] = r["response_mask"].sum().detach()
            for k, v in parts.items():
                totals[k] = totals.get(k, 0) + v.to("cpu", torch.float64) if not single else v
        self.pending_backward += 1
        metrics = self._metrics(totals, single, cfg)
        return {"metrics": metrics, "avg_loss": metrics["loss"]}

    @staticmethod
    def _metrics(t: dict, single: bool, cfg: L.LossConfig) -> dict[str, float]:
        if single:
            m = {
                "actor/pg_clipfrac": t["pg_clipfrac"].item(),
                "actor/ppo_kl": t["ppo_kl"].item(),
                "actor/pg_clipfrac_lower": t["pg_clipfrac_lower"].item(),
            }
        else:  # token means over the whole call (equal to verl's per-mini-batch metric with one micro-batch)
            denom = t["count"] + 1e-8
            m = {
                "actor/pg_clipfrac": (t["clipfrac_sum"] / denom).item(),
                "actor/ppo_kl": (t["ppo_kl_sum"] / denom).item(),
                "actor/pg_clipfrac_lower": (t["clipfrac_lower_sum"] / denom).item(),
            }
        m["actor/pg_loss"] = float(t["pg_loss"])
        if "entropy_loss" in t:
            m["actor/entropy_loss"] = float(t["entropy_loss"])
        if "kl_loss" in t:
            m["actor/kl_loss"] = float(t["kl_loss"])
            m["actor/kl_coef"] = float(cfg.kl_loss_coef)
        m["loss"] = float(t["loss"])
        return m

    def step(self, learning_rate: float | None = None) -> dict:
        """Clip gradients, take one AdamW step (skipped when the norm is not finite), advance the schedule."""
        max_norm = self.training.grad_clip if self.training.grad_clip and self.training.grad_clip > 0 else math.inf
        grads_present = any(p.grad is not None for p in self.params)
        if grads_present:  # parameters without a gradient are skipped by AdamW, as in torch and verl
            grad_norm = torch.nn.utils.clip_grad_norm_(self.params, max_norm=max_norm)
        else:
            grad_norm = torch.zeros(())
        if learning_rate is not None:
            for g in self.optimizer.param_groups:
                g["lr"] = float(learning_rate)
        used_lr = self.optimizer.param_groups[0]["lr"]
        finite = bool(torch.isfinite(grad_norm))
        if grads_present and finite:
            self.optimizer.step()
        elif not finite:
            logger.warning("grad_norm is not finite (%s); skipping the optimizer step", grad_norm.item())
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.global_steps += 1
        self.pending_backward = 0
        return {
            "metrics": {"grad_norm": float(grad_norm), "last_lr": float(used_lr)},
            "global_steps": self.global_steps,
            "skipped": not (grads_present and finite),
        }

    # ---- checkpoints ----
    def save(self, root: Path, step: int | None, save_total_limit: int | None, export_hf: bool = False) -> dict:
        """Save as the reference does (docs/arctic-rl-protocol.md §5): with ``step``, into ``root/checkpoint-<step>/``
        (atomically) and ``root/latest`` = the step; without, into ``root`` itself. ``save_total_limit`` prunes the
        oldest ``checkpoint-*`` children of ``root`` either way. ``global_step`` is the engine's optimizer step count.
        """
        from safetensors.torch import save_file

        root.mkdir(parents=True, exist_ok=True)
        name = f"checkpoint-{int(step)}" if step is not None else "checkpoint"
        target = root / name if step is not None else root
        tmp = root / f".{name}.tmp-{os.getpid()}-{time.monotonic_ns()}"
        tmp.mkdir()
        try:
            save_file(
                {n: p.detach().to("cpu").contiguous() for n, p in _param_items(self.model)},
                str(tmp / "model.safetensors"),
            )
            opt_tensors: dict[str, torch.Tensor] = {}
            sd = self.optimizer.state_dict()
            for idx, st in sd["state"].items():
                pname = self.param_names[idx]
                for k, v in st.items():
                    if not isinstance(v, torch.Tensor):
                        raise RuntimeError(f"optimizer state {pname}.{k} is not a tensor")
                    opt_tensors[f"{pname}::{k}"] = v.detach().to("cpu").contiguous()
            opt_tensors["__rng__::cpu"] = torch.get_rng_state()
            save_file(opt_tensors, str(tmp / "optimizer.safetensors"))
            state = {
                "format": "arctic-rl-checkpoint-v1",
                "global_steps": self.global_steps,
                "policy_version": self.policy_version,
                "param_names": self.param_names,
                "param_groups": sd["param_groups"],
                "scheduler": {k: v for k, v in self.scheduler.state_dict().items() if k != "lr_lambdas"},
                "training": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(self.training).items()},
            }
            (tmp / "trainer_state.json").write_text(json.dumps(state, indent=1, sort_keys=True))
            hf_path = None
            if export_hf:
                self.model.save_pretrained(tmp / "hf")
                hf_path = str(target / "hf")
            if step is not None:
                if target.exists():
                    shutil.rmtree(target)
                os.replace(tmp, target)
            else:  # into root itself, file by file (root also holds checkpoint-* children)
                if (root / "hf").exists() and (tmp / "hf").exists():
                    shutil.rmtree(root / "hf")
                for f in sorted(tmp.iterdir(), key=lambda x: x.name == "trainer_state.json"):
                    os.replace(f, root / f.name)  # trainer_state.json last: it marks the checkpoint complete
                tmp.rmdir()
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if step is not None:
            latest_tmp = root / f".latest.tmp-{os.getpid()}"
            latest_tmp.write_text(f"{int(step)}\n")  # the reference writes the step number
            os.replace(latest_tmp, root / "latest")
        if save_total_limit is not None and save_total_limit > 0:
            ckpts = sorted(
                (int(m.group(1)), p)
                for p in root.iterdir()
                if p.is_dir() and (m := re.fullmatch(r"checkpoint-(\d+)", p.name))
            )
            for _, p in ckpts[: max(0, len(ckpts) - save_total_limit)]:
                if p != target:
                    shutil.rmtree(p, ignore_errors=True)
        return {"path": str(target), "hf_path": hf_path, "global_step": self.global_steps}

    def load(self, target: Path) -> dict:
        """Restore model, optimizer, scheduler, step counters and RNG from a checkpoint folder."""
        from safetensors.torch import load_file

        state = json.loads((target / "trainer_state.json").read_text())
        if state.get("format") != "arctic-rl-checkpoint-v1":
            raise RequestError(f"{target} is not an arctic-rl checkpoint", 400)
        if state["param_names"] != self.param_names:
            raise RequestError(f"{target}: parameter names differ from this job's model", 409)
        weights = load_file(str(target / "model.safetensors"))
        params = dict(_param_items(self.model))
        if set(weights) != set(params):
            raise RequestError(f"{target}: model.safetensors names differ from this job's model", 409)
        with torch.no_grad():
            for n, p in params.items():
                if weights[n].shape != p.shape:
                    raise RequestError(f"{target}: weight {n} has shape {list(weights[n].shape)}", 409)
                p.copy_(weights[n].to(p.device, p.dtype))
        opt = load_file(str(target / "optimizer.safetensors"))
        rng = opt.pop("__rng__::cpu", None)
        per_param: dict[int, dict[str, torch.Tensor]] = {}
        index = {n: i for i, n in enumerate(self.param_names)}
        for key, v in opt.items():
            pname, _, k = key.rpartition("::")
            per_param.setdefault(index[pname], {})[k] = v.to(self.device) if k != "step" else v
        self.optimizer.load_state_dict({"state": per_param, "param_groups": state["param_groups"]})
        sched = self.scheduler.state_dict()
        sched.update(state["scheduler"])
        self.scheduler.load_state_dict(sched)
        if rng is not None:
            torch.set_rng_state(rng)
        self.global_steps = int(state["global_steps"])
        self.policy_version = int(state["policy_version"])
        self.model.zero_grad(set_to_none=True)
        self.pending_backward = 0
        return {"path": str(target), "global_step": self.global_steps, "policy_version": self.policy_version}


# ------------------------------------------------------------------------------------------------
# sampling
# ------------------------------------------------------------------------------------------------


@dataclass
class GenerateItem:
    """One prompt of a /generate request, with its resolved sampling parameters."""

    prompt: list[int]
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int = 16
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    logprobs: int | None = None
    seed: int | None = None
    text: str | None = None


class SamplingEngine(_ModelEngine):
    """Generation engine (job ``sampling``) with its own copy of the weights."""

    kind = "sampling"

    def __init__(self, settings: EngineSettings, *, max_batch_rows: int = 64):
        super().__init__(settings, train=False)
        self.policy_version = 0
        self.state = "ready"  # ready | sleeping | weights_ready
        self.max_batch_rows = max_batch_rows
        self.abort = threading.Event()
        self._rng = torch.Generator().manual_seed(int(settings.seed))
        cfg = self.model.config
        eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        if eos is None:
            eos = getattr(cfg, "eos_token_id", None)
        self.eos_ids: tuple[int, ...] = (
            tuple(eos) if isinstance(eos, (list, tuple)) else ((eos,) if eos is not None else ())
        )
        pad = getattr(cfg, "pad_token_id", None)
        self.pad_id = int(pad) if pad is not None else (self.eos_ids[0] if self.eos_ids else 0)
        self._tokenizer = None

    def tokenizer(self):
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.settings.model_path)
        return self._tokenizer

    def _text_tokenizer(self):
        """The tokenizer for ``text`` in results, or None when the model folder has none (text is then null)."""
        if self._tokenizer is None and not getattr(self, "_no_tokenizer", False):
            try:
                self.tokenizer()
            except Exception:  # noqa: BLE001 - a model folder without a tokenizer still serves token ids
                logger.warning("no tokenizer in %s: generate results carry text=null", self.settings.model_path)
                self._no_tokenizer = True
        return self._tokenizer

    def load_weights_from(self, source_model) -> None:
        _copy_weights(source_model, self.model)

    # ---- sleep / wake (docs/arctic-rl-protocol.md §5) ----
    def sleep(self, level: int) -> dict:
        if level not in (1, 2):
            raise RequestError(f"sleep level must be 1 or 2, got {level}")
        if self.device.type == "cuda":
            self.model.to("cpu")
            torch.cuda.empty_cache()
        self.state = "sleeping"
        return {"state": self.state, "level": level}

    def wake(self, tags: list[str] | None) -> dict:
        tags = None if tags is None else list(tags)
        if tags is not None and any(t not in ("weights", "kv_cache") for t in tags):
            raise RequestError(f"wake tags must be 'weights' and/or 'kv_cache', got {tags}")
        wake_weights = tags is None or "weights" in tags
        wake_kv = tags is None or "kv_cache" in tags
        if wake_kv and not wake_weights and self.state == "sleeping":
            raise RequestError("cannot wake kv_cache before weights (wake ['weights'] first)", 409)
        if wake_weights and self.device.type == "cuda":
            self.model.to(self.device)
        if wake_weights and wake_kv:
            self.state = "ready"
        elif wake_weights:
            self.state = "weights_ready" if self.state == "sleeping" else self.state
        elif wake_kv:
            self.state = "ready"
        return {"state": self.state}

    # ---- generation ----
    def generate(self, items: list[GenerateItem]) -> tuple[list[dict], int]:
        """Decode ``items`` as one left-padded batch with a KV cache.

        Returns:
            ``(results, policy_version)``: one result dict per item.
        """
        if self.state != "ready":
            raise RequestError(f"the sampling engine is {self.state}; call /wake-inference first", 409)
        version = self.policy_version
        out: list[dict] = []
        for s in range(0, len(items), self.max_batch_rows):
            out.extend(self._generate_batch(items[s : s + self.max_batch_rows], version))
        return out, version

    @torch.inference_mode()
    def _generate_batch(self, items: list[GenerateItem], version: int) -> list[dict]:
        B = len(items)
        dev = self.device
        lens = [len(it.prompt) for it in items]
        width = max(lens)
        ids = torch.full((B, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((B, width), dtype=torch.long)
        for i, it in enumerate(items):
            ids[i, width - lens[i] :] = torch.tensor(it.prompt, dtype=torch.long)
            mask[i, width - lens[i] :] = 1
        ids, mask = ids.to(dev), mask.to(dev)
        pos = position_ids_from_mask(mask)
        gens = [torch.Generator().manual_seed(it.seed) if it.seed is not None else None for it in items]
        for i, g in enumerate(gens):
            if g is None and items[i].temperature > 0:
                seed = int(torch.randint(0, 2**62, (1,), generator=self._rng))
                gens[i] = torch.Generator().manual_seed(seed)
        temps = torch.tensor([it.temperature if it.temperature > 0 else 1.0 for it in items], dtype=torch.float32)
        greedy = [it.temperature <= 0 for it in items]
        top_k = [it.top_k if 0 < it.top_k < self.vocab_size else 0 for it in items]
        top_p = torch.tensor([it.top_p for it in items], dtype=torch.float32)
        stops = [set(it.stop_token_ids) | (set() if it.ignore_eos else set(self.eos_ids)) for it in items]
        tokens: list[list[int]] = [[] for _ in items]
        lps: list[list[float]] = [[] for _ in items]
        tops: list[list[dict[str, float]]] = [[] for _ in items]
        reason: list[str | None] = [None] * B
        for i, it in enumerate(items):
            if it.max_tokens <= 0:
                reason[i] = "length"
        steps = max(it.max_tokens for it in items)
        past = None
        next_pos = pos[:, -1] + 1
        cur_ids, cur_pos = ids, pos
        for _ in range(steps):
            if all(r is not None for r in reason):
                break
            if self.abort.is_set():
                reason = [r or "abort" for r in reason]
                break
            o = self.model(
                input_ids=cur_ids, attention_mask=mask, position_ids=cur_pos, past_key_values=past, use_cache=True
            )
            past = o.past_key_values
            logits = o.logits[:, -1, :].float().cpu()
            chosen, chosen_lp, top = self._sample(logits, temps, greedy, top_k, top_p, gens, items, reason)
            for i in range(B):
                if reason[i] is not None:
                    continue
                tok = chosen[i]
                tokens[i].append(tok)
                if items[i].logprobs is not None:
                    lps[i].append(chosen_lp[i])
                    tops[i].append(top[i])
                if tok in stops[i]:
                    reason[i] = "stop"
                elif len(tokens[i]) >= items[i].max_tokens:
                    reason[i] = "length"
            feed = torch.tensor([t[-1] if t else self.pad_id for t in tokens], dtype=torch.long, device=dev)
            cur_ids = feed[:, None]
            cur_pos = next_pos[:, None]
            next_pos = next_pos + 1
            mask = torch.cat([mask, torch.ones((B, 1), dtype=mask.dtype, device=dev)], dim=1)
        results = []
        for i, it in enumerate(items):
            tok = self._text_tokenizer()
            r = {
                "text": tok.decode(tokens[i]) if tok is not None else None,
                "token_ids": tokens[i],
                "finish_reason": reason[i] or "length",
                "prompt_len": lens[i],
                "generation_len": len(tokens[i]),
                "prefix_cache_len": 0,
                # ArcticInference shape: one {str(token_id): {logprob, rank}} per generated position
                "logprobs": tops[i] if it.logprobs is not None else None,
                "policy_version": version,  # extension
            }
            results.append(r)
        return results

    def _sample(self, logits, temps, greedy, top_k, top_p, gens, items, reason):
        """Row-wise sampling; every step of a row depends only on that row (batch composition never matters)."""
        scaled = logits / temps[:, None]
        logp = torch.log_softmax(scaled, dim=-1)
        filt = scaled.clone()
        if any(top_k):
            for i, k in enumerate(top_k):
                if k:
                    kth = torch.topk(scaled[i], k).values[-1]
                    filt[i][scaled[i] < kth] = -math.inf
        if bool((top_p < 1.0).any()):
            sorted_vals, sorted_idx = torch.sort(filt, dim=-1, descending=True)
            cum = torch.softmax(sorted_vals, dim=-1).cumsum(dim=-1)
            remove = (cum - torch.softmax(sorted_vals, dim=-1)) > top_p[:, None]  # keeps the first token always
            remove = torch.zeros_like(remove).scatter(1, sorted_idx, remove)
            filt = filt.masked_fill(remove & (top_p[:, None] < 1.0), -math.inf)
        probs = torch.softmax(filt, dim=-1)
        chosen, chosen_lp, top = [], [], []
        for i in range(len(items)):
            if reason[i] is not None:
                chosen.append(self.pad_id)
                chosen_lp.append(0.0)
                top.append({})
                continue
            if greedy[i]:
                tok = int(torch.argmax(logits[i]))
            else:
                tok = int(torch.multinomial(probs[i], 1, generator=gens[i]))
            chosen.append(tok)
            chosen_lp.append(float(logp[i, tok]))
            if items[i].logprobs is None:
                top.append({})
                continue
            entry: dict[str, dict] = {}
            k = items[i].logprobs or 0
            if k > 0:
                v, ix = torch.topk(logp[i], min(k, logp.shape[-1]))
                for rank, (a, b) in enumerate(zip(ix.tolist(), v.tolist(), strict=True), start=1):
                    entry[str(int(a))] = {"logprob": float(b), "rank": rank}
            if str(tok) not in entry:
                entry[str(tok)] = {"logprob": chosen_lp[-1], "rank": int((logp[i] > logp[i, tok]).sum()) + 1}
            top.append(entry)
        return chosen, chosen_lp, top
