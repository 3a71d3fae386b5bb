# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""arctic_platform.server.loss against verl 0.9.1's own actor loss (``verl.workers.utils.losses.ppo_loss``).

The server calls verl's functions (``get_policy_loss_fn``, ``agg_loss``, ``kl_penalty``) on padded ``[b, R']``
micro-batch tensors; verl's engine calls ``ppo_loss`` on nested rows. These tests hold the composition to verl bit
for bit (loss, gradient with respect to the log-probs, every metric) for every registered ``loss_mode``, every
``loss_agg_mode``, the KL and entropy terms and IS weights; they also check the config reader, the refusals, verl's
metric reduction over micro-batches, and the micro-batch cuts against verl's ``prepare_micro_batches``.
"""

from __future__ import annotations

import json
import zlib

import pytest
import torch

import verl.trainer.ppo.core_algos as core_algos
import verl.utils.tensordict_utils as tu
from arctic_platform.protocol import AGG_MODES, LOSS_MODES
from arctic_platform.server import loss as L
from verl.workers.utils.losses import ppo_loss

PLENS = [3, 1, 5, 2, 4, 2]
RLENS = [4, 6, 1, 6, 3, 5]  # the micro-batch is padded to its longest response (6)


def _rows(seed):
    g = torch.Generator().manual_seed(seed)
    b, w = len(RLENS), max(RLENS)
    mask = torch.zeros(b, w, dtype=torch.bool)
    for i, n in enumerate(RLENS):
        mask[i, :n] = True
    mask[3, 2] = False  # a token inside a response that does not count
    lp = -torch.rand(b, w, generator=g) * 3
    old = lp + torch.randn(b, w, generator=g) * 0.6
    old[2, 0] = lp[2, 0] - 30.0  # the -20/20 clamp
    adv = torch.randn(b, 1, generator=g).expand(b, w).clone()
    adv[0] = -adv[0].abs()  # negative advantages: the dual clip
    ref = lp + torch.randn(b, w, generator=g) * 0.3
    ent = torch.rand(b, w, generator=g) * 5
    isw = torch.rand(b, w, generator=g) * 2
    zero = ~mask & (torch.arange(w) >= torch.tensor(RLENS)[:, None])  # padding: what to_padded_tensor writes there
    for t, pad in ((lp, 0.0), (old, 0.0), (adv, 0.0), (ref, 0.0), (ent, 0.0), (isw, 0.0)):
        t[zero] = pad
    return dict(mask=mask, lp=lp, old=old, adv=adv, ref=ref, ent=ent, isw=isw)


def _nested(rows_2d, lengths):
    return torch.nested.nested_tensor([r[:n] for r, n in zip(rows_2d, lengths, strict=True)], layout=torch.jagged)


def _verl(actor_kw, d, *, isw, with_ref, bnt, gbs):
    """verl's ppo_loss on the same rows in its own layout: nested full-sequence log-probs (slot j predicts j+1)."""
    from tensordict import TensorDict

    from verl.workers.config import ActorConfig

    cfg = ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, **actor_kw)
    lp = d["lp"].clone().requires_grad_(True)
    seq, vals, ent_vals = [], [], []
    for i, (pl, rl) in enumerate(zip(PLENS, RLENS, strict=True)):
        seq.append(pl + rl)
        vals += [torch.zeros(pl - 1), lp[i, :rl], torch.zeros(1)]
        ent_vals += [torch.zeros(pl - 1), d["ent"][i, :rl], torch.zeros(1)]
    offsets = torch.tensor([0, *torch.tensor(seq).cumsum(0).tolist()])
    out = {
        "log_probs": torch.nested.nested_tensor_from_jagged(torch.cat(vals), offsets),
        "entropy": torch.nested.nested_tensor_from_jagged(torch.cat(ent_vals), offsets),
    }
    fields = {
        "prompts": _nested(torch.ones(len(PLENS), max(PLENS), dtype=torch.long), PLENS),
        "responses": _nested(torch.ones(len(RLENS), max(RLENS), dtype=torch.long), RLENS),
        "response_mask": _nested(d["mask"].long(), RLENS),
        "old_log_probs": _nested(d["old"], RLENS),
        "advantages": _nested(d["adv"], RLENS),
    }
    if isw:
        fields["rollout_is_weights"] = _nested(d["isw"], RLENS)
    if with_ref:
        fields["ref_log_prob"] = _nested(d["ref"], RLENS)
    data = TensorDict(fields, batch_size=[len(RLENS)])
    tu.assign_non_tensor(data, dp_size=1, batch_num_tokens=bnt, global_batch_size=gbs)
    loss, metrics = ppo_loss(cfg, out, data)
    loss.backward()
    return loss.detach(), lp.grad, metrics


def _ours(actor_kw, d, *, isw, with_ref, bnt, gbs):
    cfg = L.actor_config_from_meta(json.loads(json.dumps(actor_kw)))  # what arrives in meta.actor_config
    lp = d["lp"].clone().requires_grad_(True)
    loss, metrics = L.actor_loss(
        cfg,
        log_prob=lp,
        entropy=d["ent"],
        old_log_prob=d["old"],
        advantages=d["adv"],
        response_mask=d["mask"],
        ref_log_prob=d["ref"] if with_ref else None,
        rollout_is_weights=d["isw"] if isw else None,
        batch_num_tokens=bnt,
        global_batch_size=gbs,
    )
    loss.backward()
    return loss.detach(), lp.grad, metrics


def _policy_extra(mode):
    return {"dro_beta": 0.1} if mode == "dro" else {}


def _metric_values(m):
    return {k: (v.values if hasattr(v, "values") else [v]) for k, v in m.items()}


@pytest.mark.parametrize("agg", AGG_MODES)
@pytest.mark.parametrize("mode", LOSS_MODES)
def test_actor_loss_is_verls_ppo_loss_bitwise(mode, agg):
    seed = zlib.crc32(f"{mode}/{agg}".encode()) % 1000  # stable across processes
    d = _rows(seed)
    actor = dict(
        loss_agg_mode=agg, clip_ratio_low=0.2, clip_ratio_high=0.28, entropy_coeff=0.01, use_kl_loss=True,
        kl_loss_coef=0.05, kl_loss_type="k3+", policy_loss={"loss_mode": mode, **_policy_extra(mode)},
    )  # fmt: skip
    if mode == "bypass_mode":
        actor["policy_loss"]["rollout_correction"] = {"rollout_is": "token", "loss_type": "reinforce"}
    kw = dict(isw=True, with_ref=True, bnt=int(d["mask"].sum()) + 7, gbs=len(RLENS) + 2)  # a mini-batch's globals
    torch.manual_seed(0)  # clip_cov samples the tokens it clips
    v_loss, v_grad, v_m = _verl({**actor, "policy_loss": _policy_config(actor["policy_loss"])}, d, **kw)
    torch.manual_seed(0)
    o_loss, o_grad, o_m = _ours(actor, d, **kw)
    assert torch.equal(o_loss, v_loss), (o_loss, v_loss)
    assert torch.equal(o_grad, v_grad)
    assert _metric_values(o_m) == _metric_values(v_m)
    assert {"actor/pg_loss", "actor/entropy_loss", "kl_loss", "kl_coef"} <= set(o_m)


def _policy_config(pl: dict):
    from verl.trainer.config import RolloutCorrectionConfig
    from verl.workers.config import PolicyLossConfig

    pl = dict(pl)
    rc = RolloutCorrectionConfig(**pl.pop("rollout_correction", {}))
    return PolicyLossConfig(**pl, rollout_correction=rc)


@pytest.mark.parametrize("agg", AGG_MODES)
def test_without_global_denominators_or_extra_terms(agg):
    d = _rows(7)
    actor = {"loss_agg_mode": agg, "clip_ratio": 0.15, "clip_ratio_low": None, "clip_ratio_c": 1.5}
    kw = dict(isw=False, with_ref=False, bnt=int(d["mask"].sum()), gbs=len(RLENS))
    v_loss, v_grad, v_m = _verl(actor, d, **kw)
    o_loss, o_grad, o_m = _ours({**actor, "entropy_coeff": 0.0}, d, **kw)
    # ppo_loss always adds entropy when the model output has it (here: x 0.0); ours skips a None entropy: same value
    assert torch.equal(o_grad, v_grad) and float(o_loss) == pytest.approx(float(v_loss), rel=1e-7)
    assert "kl_loss" not in o_m


def test_registry_and_protocol_agree():
    assert sorted(core_algos.POLICY_LOSS_REGISTRY) == sorted(LOSS_MODES)


def test_config_from_a_real_verl_actor_block(compose_actor_block):
    block = compose_actor_block(
        [
            "actor_rollout_ref.actor.policy_loss.loss_mode=kl_cov",
            "actor_rollout_ref.actor.policy_loss.kl_cov_ratio=0.01",
            "actor_rollout_ref.actor.clip_ratio_high=0.28",
            "actor_rollout_ref.actor.loss_scale_factor=null",
        ]
    )
    cfg = L.actor_config_from_meta(block)
    assert cfg.policy_loss.loss_mode == "kl_cov" and cfg.policy_loss.kl_cov_ratio == 0.01
    assert cfg.clip_ratio_high == 0.28 and cfg.loss_scale_factor is None and cfg.loss_agg_mode == "token-mean"
    override = L.actor_config_from_meta(block, {"loss_mode": "gspo"})  # meta.policy_loss_config wins
    assert override.policy_loss.loss_mode == "gspo"


@pytest.fixture(scope="module")
def compose_actor_block():
    """verl's own actor block (ppo_trainer composed by Hydra), JSON-safe as the worker sends it."""
    from pathlib import Path

    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    import verl.trainer.main_ppo as main_ppo

    def _compose(overrides):
        with initialize_config_dir(config_dir=str(Path(main_ppo.__file__).parent / "config"), version_base=None):
            cfg = compose("ppo_trainer", overrides=overrides)
        return json.loads(json.dumps(OmegaConf.to_container(cfg.actor_rollout_ref.actor, resolve=True)))

    return _compose


@pytest.mark.parametrize(
    "actor, match",
    [
        ({"policy_loss": {"loss_mode": "nope"}}, "not registered in verl"),
        ({"clip_ratio_c": 1.0}, "clip_ratio_c"),
        ({"policy_loss": {"loss_mode": "dro"}}, "dro_beta"),
        ({"use_kl_loss": True, "kl_loss_type": "full"}, "kl_loss_type 'full'"),
        ({"loss_agg_mode": "seq-sum"}, "loss_agg_mode"),
        ({"clip_ratio": "0.2"}, "actor_config.clip_ratio must be a finite number"),
        ({"use_kl_loss": 1}, "use_kl_loss must be true or false"),
        ({"loss_scale_factor": 0}, "loss_scale_factor must be > 0"),
        ({"calculate_sum_pi_squared": True}, "calculate_sum_pi_squared"),
        ({"qat": {"enable": True}}, "qat.enable"),
        ({"policy_loss": ["vanilla"]}, "actor_config.policy_loss must be an object"),
    ],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_unsupported_settings_are_refused_naming_the_key(actor, match):
    with pytest.raises(L.LossConfigError, match=match):
        L.actor_config_from_meta(actor)


def test_validation_keeps_the_random_state():
    torch.manual_seed(3)
    want = torch.rand(3)
    torch.manual_seed(3)
    L.actor_config_from_meta({"policy_loss": {"loss_mode": "clip_cov"}})  # its dry run draws random numbers
    assert torch.equal(torch.rand(3), want)


def test_metric_reduction_is_verls():
    from verl.utils.metric import AggregationType, Metric
    from verl.utils.py_functional import append_to_dict

    micro = [
        ({"actor/pg_clipfrac": Metric(AggregationType.MEAN, 0.25), "actor/pg_loss": Metric(AggregationType.SUM, 1.5)}),
        ({"actor/pg_clipfrac": Metric(AggregationType.MEAN, 0.75), "actor/pg_loss": Metric(AggregationType.SUM, -0.5)}),
    ]
    acc, verl_metrics = L.MetricAccumulator(), {}
    for i, m in enumerate(micro):
        acc.add(torch.tensor(float(i + 1)), {**m, "kl_coef": 0.1})
        append_to_dict(verl_metrics, m)
    got = acc.result()
    for k, v in verl_metrics.items():  # TrainingWorker.train_mini_batch: Metric.aggregate_dp over the dp ranks
        assert got[k] == pytest.approx(float(Metric.aggregate_dp([v])), rel=0, abs=0), k
    assert got["actor/pg_clipfrac"] == 0.5 and got["actor/pg_loss"] == 1.0  # mean / sum over micro-batches
    assert got["loss"] == 3.0 and got["kl_coef"] == 0.1


@pytest.mark.parametrize("budget", [None, 9, 12, 25])
def test_micro_batch_rows_are_verls(budget):
    from tensordict import TensorDict

    from verl.workers.engine.utils import prepare_micro_batches

    lens = torch.tensor([5, 9, 2, 7, 3, 8, 4, 1])
    ids = torch.nested.nested_tensor([torch.arange(int(n)) + 10 * i for i, n in enumerate(lens)], layout=torch.jagged)
    td = TensorDict({"input_ids": ids, "row": torch.arange(8)}, batch_size=[8])
    if budget is None:
        mb = L.MicroBatching(micro_batch_size=2)
        tu.assign_non_tensor(td, use_dynamic_bsz=False, micro_batch_size_per_gpu=2)
    else:
        mb = L.MicroBatching(use_dynamic_bsz=True, max_token_len=budget)
        tu.assign_non_tensor(td, use_dynamic_bsz=True, max_token_len_per_gpu=budget)
    micro, _ = prepare_micro_batches(data=td, dp_group=None)
    assert L.micro_batch_rows(lens, mb) == [m["row"].tolist() for m in micro]
    if budget is not None:
        assert all(int(lens[rows].sum()) <= budget for rows in L.micro_batch_rows(lens, mb))


def test_micro_batching_from_meta():
    ac = {"ppo_micro_batch_size_per_gpu": 4, "use_dynamic_bsz": False, "ppo_max_token_len_per_gpu": 100}
    assert L.micro_batching_from_meta({"actor_config": ac}) == L.MicroBatching(micro_batch_size=4)
    dyn = {**ac, "use_dynamic_bsz": True, "fsdp_config": {"ulysses_sequence_parallel_size": 2}}
    assert L.micro_batching_from_meta({"actor_config": dyn}) == L.MicroBatching(use_dynamic_bsz=True, max_token_len=200)
    forward = {"use_dynamic_bsz": True, "max_token_len_per_gpu": 64}
    assert L.micro_batching_from_meta(forward) == L.MicroBatching(use_dynamic_bsz=True, max_token_len=64)
    assert L.micro_batching_from_meta({}, 3) == L.MicroBatching(micro_batch_size=3)
    with pytest.raises(L.LossConfigError, match="ppo_max_token_len_per_gpu"):
        L.micro_batching_from_meta({"actor_config": {"use_dynamic_bsz": True, "ppo_max_token_len_per_gpu": 0}})
    with pytest.raises(L.LossConfigError, match="more than the dynamic-batching budget"):
        L.micro_batch_rows(torch.tensor([3, 30]), L.MicroBatching(use_dynamic_bsz=True, max_token_len=20))
