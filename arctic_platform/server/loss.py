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
"""The actor loss of the embedded server, computed by verl's own functions (docs/arctic-rl-protocol.md §6).

The server ships in the same wheel as verl, so it does not keep a copy of verl's math: the policy loss is
``verl.trainer.ppo.core_algos.get_policy_loss_fn(loss_mode)`` (every mode in ``POLICY_LOSS_REGISTRY``), the entropy
and KL terms are ``agg_loss`` / ``kl_penalty``, and the config those functions read is verl's own ``ActorConfig`` /
``PolicyLossConfig`` / ``RolloutCorrectionConfig``, built from ``meta.actor_config`` and ``meta.policy_loss_config``
(the worker's actor block; keys the loss does not read are ignored). :func:`actor_loss` is the composition
``verl.workers.utils.losses.ppo_loss`` performs, on the padded ``[b, R']`` tensors of one micro-batch (R' = the
longest response of the micro-batch, exactly the width ``ppo_loss`` pads its nested tensors to, so
``loss_scale_factor: null`` follows verl's per-micro-batch rule). :class:`MetricAccumulator` reduces per-micro-batch
metrics as verl's engine does (``Metric`` MEAN / SUM per key), so metric names and meanings are verl's.

verl is imported on first use (:func:`verl_loss_api`), not at server start: a sampling-only server never pays for it.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import torch

from ..protocol import AGG_MODES, KL_TYPES, LOSS_MODES

__all__ = [
    "AGG_MODES",
    "KL_TYPES",
    "LOSS_MODES",
    "LossConfigError",
    "MetricAccumulator",
    "MicroBatching",
    "actor_config_from_meta",
    "actor_loss",
    "micro_batching_from_meta",
    "verl_loss_api",
]


class LossConfigError(ValueError):
    """A loss setting the server cannot honour, or an invalid value; the message names the key (the server: 422)."""


@functools.lru_cache(maxsize=1)
def verl_loss_api():
    """verl's loss functions and config classes (imported once, lazily)."""
    from verl.trainer.config import RolloutCorrectionConfig
    from verl.trainer.ppo import core_algos
    from verl.utils.metric import AggregationType, Metric
    from verl.workers.config import ActorConfig, PolicyLossConfig

    return _Api(core_algos, ActorConfig, PolicyLossConfig, RolloutCorrectionConfig, Metric, AggregationType)


@dataclass(frozen=True)
class _Api:
    core_algos: Any
    ActorConfig: Any
    PolicyLossConfig: Any
    RolloutCorrectionConfig: Any
    Metric: Any
    AggregationType: Any


# ActorConfig fields the loss functions (and ppo_loss) read, with their JSON kinds.
_ACTOR_NUMBERS = ("clip_ratio", "clip_ratio_c", "entropy_coeff", "kl_loss_coef", "tau_pos", "tau_neg")
_ACTOR_OPTIONAL_NUMBERS = ("clip_ratio_low", "clip_ratio_high", "loss_scale_factor")
_ACTOR_STRINGS = ("loss_agg_mode", "kl_loss_type")
_ACTOR_BOOLS = ("use_kl_loss", "calculate_entropy")
_POLICY_NUMBERS = ("clip_cov_ratio", "clip_cov_lb", "clip_cov_ub", "kl_cov_ratio", "ppo_kl_coef")
_POLICY_OPTIONAL_NUMBERS = ("dro_beta",)


def _number(where: str, v: Any, *, optional: bool = False) -> float | None:
    if v is None and optional:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise LossConfigError(f"{where} must be a finite number, got {v!r}")
    return float(v)


def _dict(where: str, v: Any) -> dict:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise LossConfigError(f"{where} must be an object, got {type(v).__name__}")
    return v


def actor_config_from_meta(actor_config: dict | None, policy_loss_config: dict | None = None):
    """verl's ``ActorConfig`` for the loss, from ``meta.actor_config`` (+ ``meta.policy_loss_config``, which wins).

    Only the keys verl's loss functions read are taken; every other key of the actor block is ignored. The config
    is then exercised once on a one-token batch through verl's own functions, so anything verl would reject at the
    first update (an unknown ``loss_mode``, ``clip_ratio_c <= 1``, ``dro`` without ``dro_beta``, an unknown
    ``kl_loss_type``) is refused now, with verl's reason.

    Raises:
        LossConfigError: naming the key.
    """
    api = verl_loss_api()
    ac = _dict("meta.actor_config", actor_config)
    pl = {
        **_dict("actor_config.policy_loss", ac.get("policy_loss")),
        **_dict("meta.policy_loss_config", policy_loss_config),
    }
    if ac.get("calculate_sum_pi_squared"):
        raise LossConfigError(
            "actor_config.calculate_sum_pi_squared=true: the embedded server does not compute Σπ² (optimal-token "
            "baseline); use another advantage estimator"
        )
    qat = ac.get("qat")
    if isinstance(qat, dict) and qat.get("enable"):
        raise LossConfigError("actor_config.qat.enable=true: quantization-aware training is not implemented here")
    kw: dict[str, Any] = {}
    for k in _ACTOR_NUMBERS:
        if ac.get(k) is not None:
            kw[k] = _number(f"actor_config.{k}", ac[k])
    for k in _ACTOR_OPTIONAL_NUMBERS:
        if k in ac:
            kw[k] = _number(f"actor_config.{k}", ac[k], optional=True)
    if kw.get("loss_scale_factor") is not None:
        if not kw["loss_scale_factor"] > 0:
            raise LossConfigError(f"actor_config.loss_scale_factor must be > 0, got {ac['loss_scale_factor']!r}")
    for k in _ACTOR_STRINGS:
        if ac.get(k) is not None:
            if not isinstance(ac[k], str):
                raise LossConfigError(f"actor_config.{k} must be a string, got {ac[k]!r}")
            kw[k] = ac[k]
    for k in _ACTOR_BOOLS:
        if ac.get(k) is not None:
            if not isinstance(ac[k], bool):
                raise LossConfigError(f"actor_config.{k} must be true or false, got {ac[k]!r}")
            kw[k] = ac[k]
    if kw.get("loss_agg_mode", "token-mean") not in AGG_MODES:
        raise LossConfigError(f"actor_config.loss_agg_mode {kw['loss_agg_mode']!r} is not one of {list(AGG_MODES)}")
    plkw: dict[str, Any] = {}
    mode = pl.get("loss_mode", "vanilla")
    if not isinstance(mode, str):
        raise LossConfigError(f"policy_loss.loss_mode must be a string, got {mode!r}")
    plkw["loss_mode"] = mode
    for k in _POLICY_NUMBERS:
        if pl.get(k) is not None:
            plkw[k] = _number(f"policy_loss.{k}", pl[k])
    for k in _POLICY_OPTIONAL_NUMBERS:
        if k in pl:
            plkw[k] = _number(f"policy_loss.{k}", pl[k], optional=True)
    rc = _dict("policy_loss.rollout_correction", pl.get("rollout_correction"))
    rc_fields = set(api.RolloutCorrectionConfig.__dataclass_fields__)
    try:
        plkw["rollout_correction"] = api.RolloutCorrectionConfig(**{k: v for k, v in rc.items() if k in rc_fields})
        policy = api.PolicyLossConfig(**plkw)
        cfg = api.ActorConfig(
            strategy=str(ac.get("strategy") or "fsdp"),
            rollout_n=ac["rollout_n"] if isinstance(ac.get("rollout_n"), int) else 1,  # not read by the loss
            use_dynamic_bsz=True,  # micro-batching is read by micro_batching_from_meta, not by the loss
            policy_loss=policy,
            **kw,
        )
    except (TypeError, ValueError, AssertionError) as e:
        raise LossConfigError(f"meta.actor_config: verl rejects it: {e}") from None
    _dry_run(cfg)
    return cfg


def _dry_run(cfg) -> None:
    """Run the configured loss once on a one-token batch (RNG state kept: clip_cov draws random numbers)."""
    api = verl_loss_api()
    mode = cfg.policy_loss.loss_mode
    if mode not in api.core_algos.POLICY_LOSS_REGISTRY:
        raise LossConfigError(
            f"policy_loss.loss_mode {mode!r} is not registered in verl "
            f"(registered: {sorted(api.core_algos.POLICY_LOSS_REGISTRY)})"
        )
    one = torch.zeros(1, 1)
    with torch.random.fork_rng(devices=[]):
        try:
            actor_loss(
                cfg,
                log_prob=one - 0.5,
                entropy=one + 1.0,
                old_log_prob=one - 0.6,
                advantages=one + 1.0,
                response_mask=torch.ones(1, 1, dtype=torch.bool),
                ref_log_prob=one - 0.4 if cfg.use_kl_loss else None,
                rollout_is_weights=None,
                batch_num_tokens=1,
                global_batch_size=1,
            )
        except NotImplementedError:
            raise LossConfigError(
                f"actor_config.kl_loss_type {cfg.kl_loss_type!r} is not implemented by verl's kl_penalty "
                f"(known: {list(KL_TYPES)})"
            ) from None
        except (AssertionError, ValueError, TypeError, KeyError, AttributeError) as e:
            raise LossConfigError(f"policy_loss.loss_mode {mode!r}: verl rejects this actor config: {e}") from None


def actor_loss(
    cfg,
    *,
    log_prob: torch.Tensor,
    entropy: torch.Tensor | None,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    ref_log_prob: torch.Tensor | None,
    rollout_is_weights: torch.Tensor | None,
    batch_num_tokens: float,
    global_batch_size: float,
    dp_size: int = 1,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """One micro-batch's actor loss, as ``verl.workers.utils.losses.ppo_loss`` composes it.

    pg = ``get_policy_loss_fn(loss_mode)(...)`` with ``config.global_batch_info`` set to the mini-batch's global
    denominators; loss = pg − ``entropy_coeff``·agg(H) (when entropy is given) + ``kl_loss_coef``·agg(KL) (when
    ``use_kl_loss``).

    Args:
        cfg: verl ``ActorConfig`` (:func:`actor_config_from_meta`).
        log_prob: ℓ ``[b, R']`` carrying the graph; every other tensor is ``[b, R']`` too.
        batch_num_tokens, global_batch_size: T and N of the whole mini-batch.

    Returns:
        ``(loss, metrics)``: metrics as verl's ``ppo_loss`` returns them (``Metric`` objects and plain numbers).
    """
    api = verl_loss_api()
    ca, Metric, Agg = api.core_algos, api.Metric, api.AggregationType
    cfg.global_batch_info["dp_size"] = dp_size
    cfg.global_batch_info["batch_num_tokens"] = batch_num_tokens
    cfg.global_batch_info["global_batch_size"] = global_batch_size
    cfg.global_batch_info["loss_scale_factor"] = cfg.loss_scale_factor
    # ppo_loss: global batch info is always set here, so pg / entropy / kl losses are summed over micro-batches
    summed = Agg.SUM
    mask = response_mask.to(bool)
    policy_loss_fn = ca.get_policy_loss_fn(cfg.policy_loss.get("loss_mode", "vanilla"))
    pg_loss, pg_metrics = policy_loss_fn(
        old_log_prob=old_log_prob,
        log_prob=log_prob,
        advantages=advantages,
        response_mask=mask,
        loss_agg_mode=cfg.loss_agg_mode,
        config=cfg,
        rollout_is_weights=rollout_is_weights,
    )
    metrics: dict[str, Any] = dict(Metric.from_dict(pg_metrics, aggregation=Agg.MEAN))
    metrics["actor/pg_loss"] = Metric(value=pg_loss, aggregation=summed)
    policy_loss = pg_loss
    if entropy is not None:
        entropy_loss = ca.agg_loss(
            loss_mat=entropy, loss_mask=mask, loss_agg_mode=cfg.loss_agg_mode, **cfg.global_batch_info
        )
        policy_loss = policy_loss - cfg.entropy_coeff * entropy_loss
        metrics["actor/entropy_loss"] = Metric(value=entropy_loss, aggregation=summed)
    if cfg.use_kl_loss:
        if ref_log_prob is None:
            raise LossConfigError("actor_config.use_kl_loss=true needs batch.ref_log_prob")
        kld = ca.kl_penalty(logprob=log_prob, ref_logprob=ref_log_prob, kl_penalty=cfg.kl_loss_type)
        kl_loss = ca.agg_loss(loss_mat=kld, loss_mask=mask, loss_agg_mode=cfg.loss_agg_mode, **cfg.global_batch_info)
        policy_loss = policy_loss + kl_loss * cfg.kl_loss_coef
        metrics["kl_loss"] = Metric(value=kl_loss, aggregation=summed)
        metrics["kl_coef"] = cfg.kl_loss_coef
    return policy_loss, metrics


class MetricAccumulator:
    """Per-micro-batch metrics reduced as verl's engine reduces them for one mini-batch.

    verl appends each micro-batch's ``Metric`` into one ``Metric`` per key and aggregates it (MEAN: the mean over
    micro-batches; SUM: the sum); plain numbers (``kl_coef``) become a list the trainer averages; ``loss`` is the
    sum of the micro-batch losses (``TrainingWorker._postprocess_output``).
    """

    def __init__(self):
        self._metrics: dict[str, Any] = {}
        self._loss = 0.0

    def add(self, loss: torch.Tensor, metrics: dict[str, Any]) -> None:
        Metric = verl_loss_api().Metric
        self._loss += float(loss.detach().item())
        for k, v in metrics.items():
            if isinstance(v, Metric):
                self._metrics.setdefault(k, v.init_list()).append(v)
            else:
                self._metrics.setdefault(k, []).append(float(v))

    def result(self) -> dict[str, float]:
        Metric = verl_loss_api().Metric
        out = {
            k: float(v.aggregate()) if isinstance(v, Metric) else float(sum(v) / len(v))
            for k, v in self._metrics.items()
        }
        out["loss"] = self._loss
        return out

    def state(self) -> dict[str, Any]:
        """What :meth:`merge_dp` reads: the loss sum and the per-micro-batch values (picklable)."""
        return {"loss": self._loss, "metrics": self._metrics}

    @staticmethod
    def merge_dp(states: list[dict[str, Any]]) -> dict[str, float]:
        """One mini-batch's metrics from the :meth:`state` of every data-parallel rank, as verl's training worker
        reduces them (``TrainingWorker._postprocess_output``): ``loss`` is the mean over ranks of each rank's loss
        sum (each rank's loss carries verl's ×dp_size, so the mean is the global loss); a ``Metric`` is
        ``Metric.aggregate_dp`` over the ranks (the mean over ranks per micro-batch, then its aggregation); a plain
        number is the mean of all. Ranks whose micro-batch counts differ (rows that do not split evenly) have their
        values pooled: MEAN over all values, SUM as the sum over all values divided by the rank count."""
        Metric, Agg = verl_loss_api().Metric, verl_loss_api().AggregationType
        n = len(states)
        out: dict[str, float] = {}
        keys = dict.fromkeys(k for s in states for k in s["metrics"])
        for k in keys:
            vals = [s["metrics"][k] for s in states if k in s["metrics"]]
            if isinstance(vals[0], Metric):
                if len(vals) == n and len({len(v.values) for v in vals}) == 1:
                    out[k] = float(Metric.aggregate_dp(vals))
                else:
                    pooled = [x for v in vals for x in v.values]
                    agg = vals[0].aggregation
                    if agg == Agg.SUM:
                        out[k] = float(sum(pooled) / n)
                    else:
                        m = Metric(aggregation=agg)
                        m.extend(pooled)
                        out[k] = float(m.aggregate())
            else:
                pooled = [x for v in vals for x in v]
                out[k] = float(sum(pooled) / len(pooled))
        out["loss"] = float(sum(s["loss"] for s in states) / n)
        return out


@dataclass(frozen=True)
class MicroBatching:
    """How one forward-backward call is cut (verl's engine: fixed rows, or a token budget per micro-batch)."""

    use_dynamic_bsz: bool = False
    micro_batch_size: int | None = None
    """Rows per micro-batch (None: the whole call)."""
    max_token_len: int | None = None
    """Token budget of a micro-batch with dynamic batching (``ppo_max_token_len_per_gpu`` × sp size)."""


def _positive_int(where: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise LossConfigError(f"{where} must be a positive int, got {v!r}")
    return v


def micro_batching_from_meta(meta: dict, default_micro_batch_size: int | None = None) -> MicroBatching:
    """The micro-batching of a ``/forward-backward`` (``meta.actor_config``) or ``/forward`` (``meta``) call.

    ``/forward-backward`` reads the actor block as verl's engine does: ``use_dynamic_bsz`` with
    ``ppo_max_token_len_per_gpu`` (× ``ulysses_sequence_parallel_size``), else ``ppo_micro_batch_size_per_gpu``
    (or the deprecated ``ppo_micro_batch_size``). Without an actor block, and for ``/forward``, the meta keys
    ``use_dynamic_bsz`` + ``max_token_len_per_gpu`` or ``micro_batch_size`` (extension) apply, then the job's
    ``ds_config.train_micro_batch_size_per_gpu``.

    Raises:
        LossConfigError: naming the key.
    """
    ac = meta.get("actor_config")
    ac = ac if isinstance(ac, dict) else {}
    if ac.get("use_dynamic_bsz") is not None or ac.get("ppo_micro_batch_size_per_gpu") is not None:
        if ac.get("use_dynamic_bsz"):
            sp = ac.get("ulysses_sequence_parallel_size") or (ac.get("fsdp_config") or {}).get(
                "ulysses_sequence_parallel_size"
            )
            sp = _positive_int("actor_config.ulysses_sequence_parallel_size", sp or 1)
            budget = _positive_int("actor_config.ppo_max_token_len_per_gpu", ac.get("ppo_max_token_len_per_gpu"))
            return MicroBatching(use_dynamic_bsz=True, max_token_len=budget * sp)
        mbs = ac.get("ppo_micro_batch_size_per_gpu")
        if mbs is None:
            mbs = ac.get("ppo_micro_batch_size")
        if mbs is not None:
            return MicroBatching(micro_batch_size=_positive_int("actor_config.ppo_micro_batch_size_per_gpu", mbs))
    if meta.get("use_dynamic_bsz"):
        return MicroBatching(
            use_dynamic_bsz=True,
            max_token_len=_positive_int("meta.max_token_len_per_gpu", meta.get("max_token_len_per_gpu")),
        )
    mbs = meta.get("micro_batch_size")
    if mbs is not None:
        return MicroBatching(micro_batch_size=_positive_int("meta.micro_batch_size", mbs))
    return MicroBatching(micro_batch_size=default_micro_batch_size)


def micro_batch_rows(seq_lens: torch.Tensor, mb: MicroBatching, min_count: int | None = None) -> list[list[int]]:
    """Row indices of each micro-batch, as verl's ``prepare_micro_batches`` cuts them.

    Fixed size: consecutive chunks of ``micro_batch_size`` rows (verl's ``chunk_tensordict``). verl asserts that they
    divide the mini-batch; the verl plugin refuses a config where they would not at start-up, so a smaller last chunk
    comes only from the rows the plugin leaves out (verl's synthetic padding rows, which carry no loss). Dynamic:
    ``verl.utils.seqlen_balancing.rearrange_micro_batches`` on the rows' real lengths with the token budget (its
    balanced partition and order).

    ``min_count``: at least this many micro-batches (a data-parallel rank runs as many as the rank with the most,
    as verl's ``same_micro_num_in_dp`` makes them): a token budget partitions into that many (verl's
    ``min_num_micro_batch``), fixed-size micro-batches are followed by empty ones.

    Raises:
        LossConfigError: a row longer than the token budget.
    """
    n = len(seq_lens)
    if not mb.use_dynamic_bsz:
        size = mb.micro_batch_size or n
        parts = [list(range(s, min(s + size, n))) for s in range(0, n, size)]
        return parts + [[] for _ in range(max(0, (min_count or 0) - len(parts)))]
    from tensordict import TensorDict

    from verl.utils.seqlen_balancing import rearrange_micro_batches

    longest = int(seq_lens.max())
    if longest > mb.max_token_len:
        raise LossConfigError(
            f"a row has {longest} tokens, more than the dynamic-batching budget max_token_len_per_gpu "
            f"{mb.max_token_len}"
        )
    lens = seq_lens.long().clamp(min=1)
    offsets = torch.zeros(n + 1, dtype=torch.long)
    offsets[1:] = lens.cumsum(0)
    ids = torch.nested.nested_tensor_from_jagged(torch.zeros(int(offsets[-1]), dtype=torch.long), offsets)
    _, parts = rearrange_micro_batches(
        TensorDict({"input_ids": ids}, batch_size=[n]), max_token_len=mb.max_token_len, min_num_micro_batch=min_count
    )
    parts = [list(p) for p in parts]
    return parts + [[] for _ in range(max(0, (min_count or 0) - len(parts)))]
