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
"""Generation engine (job ``sampling``): batched KV-cache decoding of token-id prompts with per-request seeds; its
weights change only through :meth:`SamplingEngine.load_weights_from` (``/weight-sync``).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..batch import position_ids_from_mask
from ..errors import RequestError
from ..logs import logger
from .base import EngineSpec, GenerateItem, SamplingInterface, WeightSource
from .model_engine import EngineSettings, ModelEngine, copy_weights


class TorchSampler:
    """What the torch sampling loop checks of a job and is built from, in the server (kind ``torch``) or in its own
    process (kind ``torch-process``)."""

    @classmethod
    def check(cls, cfg, limits, settings, devices) -> None:
        check_torch_sampler(cfg, limits, devices)

    @classmethod
    def from_spec(cls, spec: EngineSpec):
        return cls(spec.settings, max_batch_rows=max(1, torch_engine_rows(spec.vllm_config, spec.max_batch_rows)))


class SamplingEngine(TorchSampler, ModelEngine, SamplingInterface):
    """Generation engine (job ``sampling``, kind ``torch``) with its own copy of the weights."""

    kind = "sampling"
    engine_name = "torch"

    def __init__(self, settings: EngineSettings, *, max_batch_rows: int = 64):
        super().__init__(settings, train=False)
        self._init_sampler()
        self.max_batch_rows = max_batch_rows
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

    def load_weights_from(self, source: WeightSource) -> None:
        copy_weights(source, self.model)

    def engine_config(self) -> dict[str, Any]:
        """What of the job's ``vllm_config`` this engine runs with (``/job/{id}``'s ``engine_config``):
        ``max_num_seqs`` (rows decoded together) and ``max_model_len`` (the job's ``max_seq_len``)."""
        return {"max_num_seqs": int(self.max_batch_rows), "max_model_len": int(self.settings.max_seq_len)}

    # ---- sleep / wake: the memory part (the state machine is SamplingInterface's) ----
    def _release(self, level: int) -> bool:
        """The weights go to CPU (a CPU engine keeps them; only the state changes)."""
        if self.device.type == "cuda":
            self.model.to("cpu")
            torch.cuda.empty_cache()
            return True
        return False

    def _restore(self, tags: list[str] | None, wake_weights: bool) -> None:
        """The weights back to the engine's device."""
        if wake_weights and self.device.type == "cuda":
            self.model.to(self.device)

    # ---- generation ----
    def generate(self, items: list[GenerateItem]) -> tuple[list[dict], int]:
        """Decode ``items`` as one left-padded batch with a KV cache.

        Returns:
            ``(results, policy_version)``: one result dict per item.
        """
        self.require_ready()
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
        ids_rows = [list(it.prompt) for it in items]  # prompt tokens, for the repetition penalty
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
            logits = _apply_penalties(logits, items, ids_rows, tokens)
            for i, it in enumerate(items):  # min_tokens: no stop id may end the row before it has that many
                if reason[i] is None and len(tokens[i]) < it.min_tokens and stops[i]:
                    logits[i, torch.tensor(sorted(stops[i]), dtype=torch.long)] = -math.inf
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
        """Row-wise sampling; every step of a row depends only on that row (batch composition never matters).

        The order is vLLM's sampler's: (penalties, applied by the caller) -> temperature -> min-p -> top-k -> top-p.
        The log-probs reported are vLLM's ``processed_logprobs``: log-softmax of the logits the token was sampled from
        (after all of the above; a greedy row: after the penalties, at T = 1).
        """
        scaled = logits / temps[:, None]
        filt = scaled.clone()
        min_p = torch.tensor([it.min_p for it in items], dtype=torch.float32)
        if bool((min_p > 0).any()):
            probs = torch.softmax(scaled, dim=-1)
            drop = probs < probs.amax(dim=-1, keepdim=True) * min_p[:, None]
            filt = filt.masked_fill(drop & torch.tensor(greedy).logical_not()[:, None], -math.inf)
        if any(top_k):
            for i, k in enumerate(top_k):
                if k and not greedy[i]:
                    kth = torch.topk(filt[i], k).values[-1]
                    filt[i][filt[i] < kth] = -math.inf
        if bool((top_p < 1.0).any()):
            sorted_vals, sorted_idx = torch.sort(filt, dim=-1, descending=True)
            cum = torch.softmax(sorted_vals, dim=-1).cumsum(dim=-1)
            remove = (cum - torch.softmax(sorted_vals, dim=-1)) > top_p[:, None]  # keeps the first token always
            remove = torch.zeros_like(remove).scatter(1, sorted_idx, remove)
            keep_all = (top_p[:, None] >= 1.0) | torch.tensor(greedy)[:, None]
            filt = filt.masked_fill(remove & ~keep_all, -math.inf)
        logp_sampled = torch.log_softmax(filt, dim=-1)
        logp_greedy = torch.log_softmax(logits, dim=-1)
        probs = torch.softmax(filt, dim=-1)
        chosen, chosen_lp, top = [], [], []
        for i in range(len(items)):
            if reason[i] is not None:
                chosen.append(self.pad_id)
                chosen_lp.append(0.0)
                top.append({})
                continue
            logp = logp_greedy if greedy[i] else logp_sampled
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


def _apply_penalties(logits: torch.Tensor, items: list[GenerateItem], prompts: list[list[int]], outputs):
    """vLLM's penalties on raw logits ``[B, V]`` (a new tensor when any applies): repetition (prompt and output
    tokens), then frequency and presence (output tokens only)."""
    if not any(
        it.repetition_penalty != 1.0 or it.frequency_penalty != 0.0 or it.presence_penalty != 0.0 for it in items
    ):
        return logits
    logits = logits.clone()
    V = logits.shape[-1]
    for i, it in enumerate(items):
        out_counts = torch.bincount(torch.tensor(outputs[i], dtype=torch.long), minlength=V)[:V].to(logits.dtype)
        if it.repetition_penalty != 1.0:
            seen = out_counts > 0
            seen[torch.tensor(prompts[i], dtype=torch.long)] = True
            row = logits[i]
            scaled = torch.where(row > 0, row / it.repetition_penalty, row * it.repetition_penalty)
            logits[i] = torch.where(seen, scaled, row)
        if it.frequency_penalty != 0.0:
            logits[i] -= it.frequency_penalty * out_counts
        if it.presence_penalty != 0.0:
            logits[i] -= it.presence_penalty * (out_counts > 0).to(logits.dtype)
    return logits


# What the torch engine does with each vllm_config key (anything else is refused, naming the key): the rule is
# "honoured with parity or refused at start-up" (docs/arctic-rl-server.md, "Sampling engines").
TORCH_VLLM_CONFIG = {
    "max_num_seqs": "honoured: rows decoded together",
    "max_model_len": "honoured: the job's max_seq_len",
    "tensor_parallel_size": "1 only (the torch loop runs one replica on one device)",
    "enforce_eager": "the torch loop always runs eagerly (true or false: no graphs are captured)",
    "gpu_memory_utilization": "no effect: the torch loop preallocates no KV cache (its cache grows with the batch)",
    "enable_chunked_prefill": "no effect on results: the torch loop prefills each batch in one pass",
    "enable_prefix_caching": "false only: the torch loop has no prefix cache (use --sampling-engine vllm)",
}


def torch_engine_rows(vllm_config: dict | None, default_rows: int) -> int:
    """Check ``vllm_config`` for the torch engine (:data:`TORCH_VLLM_CONFIG`); returns its rows per decode batch.

    Raises:
        RequestError: 422 naming a key the torch engine cannot honour.
    """
    cfg = dict(vllm_config or {})
    unknown = sorted(k for k in cfg if k not in TORCH_VLLM_CONFIG)
    if unknown:
        raise RequestError(
            f"vllm_config keys {unknown} are not supported by the torch sampling engine (it honours "
            f"{sorted(TORCH_VLLM_CONFIG)}); use --sampling-engine vllm",
            422,
        )
    tp = cfg.get("tensor_parallel_size")
    if tp is not None and int(tp) != 1:
        raise RequestError(f"vllm_config.tensor_parallel_size={tp}: the torch sampling engine runs on one device", 422)
    if cfg.get("enable_prefix_caching"):
        raise RequestError("vllm_config.enable_prefix_caching=true: the torch sampling engine has no prefix cache", 422)
    rows = cfg.get("max_num_seqs", default_rows)
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise RequestError(f"vllm_config.max_num_seqs must be a positive int, got {rows!r}", 422)
    for k in ("gpu_memory_utilization", "enable_chunked_prefill", "enforce_eager"):
        if k in cfg:
            logger.info("sampling (torch engine): vllm_config.%s=%r: %s", k, cfg[k], TORCH_VLLM_CONFIG[k])
    return rows


def check_torch_sampler(cfg, limits, devices: tuple[str, ...]) -> None:
    """What the torch sampling loop (in the server or in its own process) refuses of a job: more than one device (400
    naming the flag and the way out) and ``vllm_config`` rows it cannot honour (:func:`torch_engine_rows`); FCA or
    speculative decoding asked in ``arctic_inference_config`` is logged as not done (it has neither)."""
    from ...protocol import gpus_flag

    if len(devices) > 1:
        flag = gpus_flag(cfg.job_type)
        raise RequestError(
            f"the {cfg.job_type} job asks for {len(devices)} devices ({flag} {len(devices)}): the torch sampling loop "
            f"runs one replica on one device; start the server with {flag} 1 or use the vLLM sampling engine "
            "(--sampling-engine vllm)",
            400,
        )
    torch_engine_rows(cfg.vllm_config, limits.max_batch_rows)
    aic = cfg.arctic_inference_config or {}
    if isinstance(aic, dict) and (
        (aic.get("zorro_inference") or {}).get("enable") or (aic.get("speculative_decoding") or {}).get("model")
    ):
        logger.warning(
            "sampling job: arctic_inference_config asks for FCA / speculative decoding; the CPU torch engine has "
            "neither and ignores it"
        )
