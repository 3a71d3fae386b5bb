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
"""PPO / GRPO policy loss with verl's semantics (protocol §6.1), written here from the specification.

This module does not import verl; ``tests/arctic_platform/server/test_loss_on_cpu.py`` checks it against
``verl.trainer.ppo.core_algos`` (``compute_policy_loss_vanilla``, ``agg_loss``, ``kl_penalty``) and
``verl.workers.utils.losses.ppo_loss``. The operations mirror verl's order so that a whole mini-batch computed in one
piece matches verl bit for bit.

All tensors are response-aligned ``[b, R]`` rows: one row is one sequence masked to its response (protocol §6.2
item 2: never packed rows). Aggregation uses the *global* denominators sent with the mini-batch
(``batch_num_tokens`` T, ``global_batch_size`` N), so splitting rows into micro-batches and summing the parts gives
the same loss. The server is one data-parallel rank (``dp_size`` D = 1): it computes the whole mini-batch itself,
so nothing is averaged across ranks afterwards.

Supported: ``policy_loss.loss_mode`` ``vanilla``; every ``loss_agg_mode`` of verl 0.9.x (``token-mean``,
``token-sum``, ``seq-mean-token-sum``, ``seq-mean-token-mean``, ``seq-mean-token-sum-norm``); KL estimators ``kl``/
``k1``, ``abs``, ``mse``/``k2``, ``low_var_kl``/``k3`` and their ``+`` straight-through variants. Anything else is
refused with :class:`LossConfigError` (the server answers 422).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..protocol import AGG_MODES, KL_BASE_TYPES, KL_TYPES, LOSS_MODES

__all__ = [
    "AGG_MODES",
    "KL_TYPES",
    "LOSS_MODES",
    "LossConfig",
    "LossConfigError",
    "agg_loss",
    "kl_estimate",
    "masked_mean",
    "masked_sum",
    "policy_loss_vanilla",
    "ppo_loss",
]

_KL_BASE = KL_BASE_TYPES


class LossConfigError(ValueError):
    """A loss setting the server does not implement, or an invalid value; the message names the field."""


@dataclass(frozen=True)
class LossConfig:
    """The verl ``ActorConfig`` fields the loss reads (defaults are verl 0.9.1's)."""

    clip_ratio: float = 0.2
    """ε when the low/high values are None."""
    clip_ratio_low: float | None = 0.2
    """ε_low: the ratio is clipped at 1 - ε_low."""
    clip_ratio_high: float | None = 0.2
    """ε_high: the ratio is clipped at 1 + ε_high."""
    clip_ratio_c: float = 3.0
    """Dual-clip constant c (> 1): a negative-advantage token loses at most -A·c."""
    loss_agg_mode: str = "token-mean"
    """One of :data:`AGG_MODES`."""
    loss_scale_factor: float | None = None
    """K for ``seq-mean-token-sum-norm``; None means the response width R."""
    entropy_coeff: float = 0.0
    """Weight of the entropy bonus (subtracted)."""
    use_kl_loss: bool = False
    """Add ``kl_loss_coef`` × agg(KL(ℓ, ℓ_ref))."""
    kl_loss_coef: float = 0.001
    """KL weight."""
    kl_loss_type: str = "low_var_kl"
    """One of :data:`KL_TYPES`."""
    loss_mode: str = "vanilla"
    """``policy_loss.loss_mode``; only ``vanilla`` is implemented."""

    @property
    def eps_low(self) -> float:
        return self.clip_ratio_low if self.clip_ratio_low is not None else self.clip_ratio

    @property
    def eps_high(self) -> float:
        return self.clip_ratio_high if self.clip_ratio_high is not None else self.clip_ratio

    @classmethod
    def from_actor_config(cls, actor_config: dict[str, Any] | None, policy_loss_config: dict | None = None):
        """Build from ``meta.actor_config`` (``vars(ActorConfig)`` after a JSON round trip; unknown keys ignored).

        Raises:
            LossConfigError: an unknown loss_mode / agg mode / KL type, or a value of the wrong type or range.
        """
        ac = dict(actor_config or {})
        pl = ac.get("policy_loss") or {}
        if not isinstance(pl, dict):
            raise LossConfigError("actor_config.policy_loss must be a dict")
        if policy_loss_config:
            if not isinstance(policy_loss_config, dict):
                raise LossConfigError("meta.policy_loss_config must be a dict")
            pl = {**pl, **policy_loss_config}
        kw: dict[str, Any] = {}
        floats = ("clip_ratio", "clip_ratio_c", "entropy_coeff", "kl_loss_coef")
        optional_floats = ("clip_ratio_low", "clip_ratio_high", "loss_scale_factor")
        for name in floats + optional_floats:
            if name not in ac or (ac[name] is None and name in floats):
                continue
            v = ac[name]
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise LossConfigError(f"actor_config.{name} must be a number, got {v!r}")
            kw[name] = None if v is None else float(v)
        for name in ("loss_agg_mode", "kl_loss_type"):
            if ac.get(name) is not None:
                if not isinstance(ac[name], str):
                    raise LossConfigError(f"actor_config.{name} must be a string, got {ac[name]!r}")
                kw[name] = ac[name]
        if ac.get("use_kl_loss") is not None:
            if not isinstance(ac["use_kl_loss"], bool):
                raise LossConfigError(f"actor_config.use_kl_loss must be a bool, got {ac['use_kl_loss']!r}")
            kw["use_kl_loss"] = ac["use_kl_loss"]
        if pl.get("loss_mode") is not None:
            kw["loss_mode"] = pl["loss_mode"]
        cfg = cls(**kw)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        if self.loss_mode not in LOSS_MODES:
            raise LossConfigError(
                f"policy_loss.loss_mode {self.loss_mode!r} is not implemented by this server (supported: {LOSS_MODES})"
            )
        if self.loss_agg_mode not in AGG_MODES:
            raise LossConfigError(f"loss_agg_mode {self.loss_agg_mode!r} is not one of {AGG_MODES}")
        if self.use_kl_loss and self.kl_loss_type not in KL_TYPES:
            hint = (
                " ('full' needs whole-vocabulary log-probs and is not implemented)"
                if "full" in self.kl_loss_type
                else ""
            )
            raise LossConfigError(f"kl_loss_type {self.kl_loss_type!r} is not one of {KL_TYPES}{hint}")
        if not self.clip_ratio_c > 1.0:
            raise LossConfigError(f"clip_ratio_c must be > 1.0 for dual-clip PPO, got {self.clip_ratio_c}")
        if self.loss_scale_factor is not None and not self.loss_scale_factor > 0:
            raise LossConfigError(f"loss_scale_factor must be > 0, got {self.loss_scale_factor}")


def masked_sum(values: torch.Tensor, mask: torch.Tensor, axis=None) -> torch.Tensor:
    """Σ values·mask, with values outside the mask replaced by 0 first (so NaN there cannot leak in)."""
    valid = torch.where(mask.bool(), values, 0.0)
    return (valid * mask).sum(axis=axis)


def masked_mean(values: torch.Tensor, mask: torch.Tensor, axis=None) -> torch.Tensor:
    """masked_sum / (Σ mask + 1e-8)."""
    return masked_sum(values, mask, axis) / (mask.sum(axis=axis) + 1e-8)


def agg_loss(
    loss_mat: torch.Tensor,
    loss_mask: torch.Tensor,
    loss_agg_mode: str,
    *,
    batch_num_tokens: float | torch.Tensor | None = None,
    global_batch_size: float | torch.Tensor | None = None,
    loss_scale_factor: float | None = None,
) -> torch.Tensor:
    """Aggregate a ``[b, R]`` per-token loss into a scalar (one data-parallel rank; protocol §6.1 table).

    Args:
        loss_mat: per-token values.
        loss_mask: response mask (bool or 0/1).
        loss_agg_mode: one of :data:`AGG_MODES`.
        batch_num_tokens: T, valid tokens in the whole mini-batch (None: this call's Σ mask).
        global_batch_size: N, sequences in the whole mini-batch (None: this call's rows with any valid token).
        loss_scale_factor: K for ``seq-mean-token-sum-norm`` (None: ``loss_mask.shape[-1]``).

    Raises:
        LossConfigError: unknown mode.
    """
    if loss_agg_mode == "token-mean":
        if batch_num_tokens is None:
            batch_num_tokens = loss_mask.sum()
        return masked_sum(loss_mat, loss_mask) / batch_num_tokens
    if loss_agg_mode == "token-sum":
        return masked_sum(loss_mat, loss_mask)
    if loss_agg_mode in ("seq-mean-token-sum", "seq-mean-token-sum-norm"):
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1)
        seq_mask = (torch.sum(loss_mask, dim=-1) > 0).float()
        if global_batch_size is None:
            global_batch_size = seq_mask.sum()
        loss = masked_sum(seq_losses, seq_mask) / global_batch_size
        if loss_agg_mode == "seq-mean-token-sum-norm":
            loss = loss / (loss_mask.shape[-1] if loss_scale_factor is None else loss_scale_factor)
        return loss
    if loss_agg_mode == "seq-mean-token-mean":
        seq_count = torch.sum(loss_mask, dim=-1)
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1) / (seq_count + 1e-8)
        seq_mask = (seq_count > 0).float()
        if global_batch_size is None:
            global_batch_size = seq_mask.sum()
        return masked_sum(seq_losses, seq_mask) / global_batch_size
    raise LossConfigError(f"loss_agg_mode {loss_agg_mode!r} is not one of {AGG_MODES}")


def _kl_forward(logprob: torch.Tensor, ref_logprob: torch.Tensor, kind: str) -> torch.Tensor:
    if kind in ("kl", "k1"):
        return logprob - ref_logprob
    if kind == "abs":
        return (logprob - ref_logprob).abs()
    if kind in ("mse", "k2"):
        return 0.5 * (logprob - ref_logprob).square()
    if kind in ("low_var_kl", "k3"):
        d = torch.clamp(ref_logprob - logprob, min=-20, max=20)
        return torch.clamp((torch.exp(d) - d - 1).contiguous(), min=-10, max=10)
    raise LossConfigError(f"kl_loss_type {kind!r} is not one of {KL_TYPES}")


def kl_estimate(logprob: torch.Tensor, ref_logprob: torch.Tensor, kl_type: str) -> torch.Tensor:
    """Per-token KL(ℓ ‖ ℓ_ref) estimate; a ``+`` suffix keeps the forward value but takes k2's gradient."""
    base = kl_type[:-1] if kl_type.endswith("+") else kl_type
    forward = _kl_forward(logprob, ref_logprob, base)
    if not kl_type.endswith("+") or kl_type in ("mse", "k2"):
        return forward
    k2 = 0.5 * (logprob - ref_logprob).square()
    return k2 - k2.detach() + forward.detach()


def policy_loss_vanilla(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    cfg: LossConfig,
    *,
    rollout_is_weights: torch.Tensor | None = None,
    batch_num_tokens=None,
    global_batch_size=None,
    loss_scale_factor=None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Clipped (dual-clip) PPO surrogate, aggregated with ``cfg.loss_agg_mode``.

    Returns:
        ``(pg_loss, stats)`` where ``stats`` holds the *unreduced* metric parts as ``(sum, count)`` friendly tensors:
        ``clipfrac``, ``ppo_kl`` and ``clipfrac_lower`` masked means over this call (detached).
    """
    neg_kl = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(neg_kl)
    ppo_kl = masked_mean(-neg_kl, response_mask)
    pg_losses1 = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1 - cfg.eps_low, 1 + cfg.eps_high)
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_clipfrac = masked_mean(torch.gt(pg_losses2, pg_losses1).float(), response_mask)
    pg_losses3 = -advantages * cfg.clip_ratio_c
    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
    pg_clipfrac_lower = masked_mean(torch.gt(clip_pg_losses1, pg_losses3) * (advantages < 0).float(), response_mask)
    pg_losses = torch.where(advantages < 0, clip_pg_losses2, clip_pg_losses1)
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights
    pg_loss = agg_loss(
        pg_losses,
        response_mask,
        cfg.loss_agg_mode,
        batch_num_tokens=batch_num_tokens,
        global_batch_size=global_batch_size,
        loss_scale_factor=loss_scale_factor,
    )
    stats = {
        "clipfrac_sum": masked_sum(torch.gt(pg_losses2, pg_losses1).float(), response_mask).detach(),
        "clipfrac_lower_sum": masked_sum(
            torch.gt(clip_pg_losses1, pg_losses3) * (advantages < 0).float(), response_mask
        ).detach(),
        "ppo_kl_sum": masked_sum(-neg_kl, response_mask).detach(),
        "pg_clipfrac": pg_clipfrac.detach(),
        "ppo_kl": ppo_kl.detach(),
        "pg_clipfrac_lower": pg_clipfrac_lower.detach(),
    }
    return pg_loss, stats


def ppo_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    cfg: LossConfig,
    *,
    entropy: torch.Tensor | None = None,
    ref_log_prob: torch.Tensor | None = None,
    rollout_is_weights: torch.Tensor | None = None,
    batch_num_tokens=None,
    global_batch_size=None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The whole actor loss of verl's ``ppo_loss``: pg − entropy_coeff·agg(H) + kl_loss_coef·agg(KL).

    Args:
        log_prob: ℓ, new log-probs ``[b, R]`` (carries the graph).
        old_log_prob, advantages, response_mask: ``[b, R]``.
        cfg: loss settings.
        entropy: H ``[b, R]`` when computed (adds the entropy term and ``entropy_loss``).
        ref_log_prob: ℓ_ref ``[b, R]``; required when ``cfg.use_kl_loss``.
        rollout_is_weights: per-token IS weights ``[b, R]`` (pad 1.0).
        batch_num_tokens, global_batch_size: the mini-batch's global denominators (None: this call's own).

    Returns:
        ``(loss, parts)``: ``parts`` holds detached ``pg_loss``, ``entropy_loss``, ``kl_loss`` (those computed) and
        the masked-mean sums of :func:`policy_loss_vanilla`.
    """
    agg_kw = dict(batch_num_tokens=batch_num_tokens, global_batch_size=global_batch_size)
    pg_loss, parts = policy_loss_vanilla(
        old_log_prob,
        log_prob,
        advantages,
        response_mask,
        cfg,
        rollout_is_weights=rollout_is_weights,
        loss_scale_factor=cfg.loss_scale_factor,
        **agg_kw,
    )
    parts["pg_loss"] = pg_loss.detach()
    loss = pg_loss
    if entropy is not None:
        entropy_loss = agg_loss(
            entropy, response_mask, cfg.loss_agg_mode, loss_scale_factor=cfg.loss_scale_factor, **agg_kw
        )
        loss = loss - cfg.entropy_coeff * entropy_loss
        parts["entropy_loss"] = entropy_loss.detach()
    if cfg.use_kl_loss:
        if ref_log_prob is None:
            raise LossConfigError("use_kl_loss=True needs batch.ref_log_prob")
        kld = kl_estimate(log_prob, ref_log_prob, cfg.kl_loss_type)
        kl_loss = agg_loss(kld, response_mask, cfg.loss_agg_mode, loss_scale_factor=cfg.loss_scale_factor, **agg_kw)
        loss = loss + kl_loss * cfg.kl_loss_coef
        parts["kl_loss"] = kl_loss.detach()
    return loss, parts
