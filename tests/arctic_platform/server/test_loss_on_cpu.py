# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""arctic_platform.server.loss against verl 0.9.1's own functions (``verl.trainer.ppo.core_algos``).

The server's loss is written from the protocol document, not by calling verl; these tests hold it to verl bit for
bit: same loss value, same metrics, same gradient with respect to the log-probs (and entropy), for every
``loss_agg_mode``, clip setting, KL estimator and with / without rollout IS weights and global denominators.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import zlib

import pytest
import torch

from arctic_platform.server import loss as L

core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")
ActorConfig = pytest.importorskip("verl.workers.config").ActorConfig

AGG_MODES = ["token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
CLIPS = {
    "sym-0.2": dict(clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.2, clip_ratio_c=3.0),
    "asym-dapo": dict(clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=3.0),
    "low-none": dict(clip_ratio=0.15, clip_ratio_low=None, clip_ratio_high=0.3, clip_ratio_c=1.5),
    "tight-dual": dict(clip_ratio=0.1, clip_ratio_low=0.05, clip_ratio_high=0.1, clip_ratio_c=1.2),
}
KL_TYPES = ["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "k1+", "k3+", "low_var_kl+", "abs+", "k2+", "mse+"]


def _batch(seed: int, b: int = 6, r: int = 9):
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(b, r, generator=g) > 0.3
    mask[0] = False  # a fully masked row: excluded from the seq-mean denominators
    mask[1, :4] = True
    log_prob = -torch.rand(b, r, generator=g) * 3
    # wide spread of ratios so the clip, the dual clip and the -20/20 clamp all engage
    old = log_prob + torch.randn(b, r, generator=g) * 0.6
    old[2, 0] = log_prob[2, 0] - 30.0
    adv = torch.randn(b, r, generator=g)
    ref = log_prob + torch.randn(b, r, generator=g) * 0.3
    ent = torch.rand(b, r, generator=g) * 5
    isw = torch.rand(b, r, generator=g) * 2
    return dict(mask=mask, log_prob=log_prob, old=old, adv=adv, ref=ref, ent=ent, isw=isw)


def _verl_config(loss_agg_mode, clip, *, bnt=None, gbs=None, lsf=None, **extra):
    cfg = ActorConfig(
        strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, loss_agg_mode=loss_agg_mode, **clip, **extra
    )
    # what verl.workers.utils.losses.ppo_loss sets before calling the policy loss (dp_size 1: one server rank)
    cfg.global_batch_info.update(dp_size=1, batch_num_tokens=bnt, global_batch_size=gbs, loss_scale_factor=lsf)
    return cfg


def _ours(loss_agg_mode, clip, **extra):
    return L.LossConfig(loss_agg_mode=loss_agg_mode, **clip, **extra)


@pytest.mark.parametrize("denoms", ["local", "global"])
@pytest.mark.parametrize("use_isw", [False, True], ids=["no-isw", "isw"])
@pytest.mark.parametrize("clip", list(CLIPS), ids=list(CLIPS))
@pytest.mark.parametrize("agg", AGG_MODES)
def test_policy_loss_matches_verl_bitwise(agg, clip, use_isw, denoms):
    d = _batch(zlib.crc32(f"{agg}/{clip}/{use_isw}/{denoms}".encode()) % 1000)  # stable across processes
    # global denominators as the plugin sends them for a whole mini-batch (larger than this call's own)
    bnt, gbs = (None, None) if denoms == "local" else (int(d["mask"].sum()) + 11, d["mask"].shape[0] + 3)
    isw = d["isw"] if use_isw else None

    lp_v = d["log_prob"].clone().requires_grad_(True)
    v_loss, v_metrics = core_algos.compute_policy_loss_vanilla(
        old_log_prob=d["old"],
        log_prob=lp_v,
        advantages=d["adv"],
        response_mask=d["mask"],
        loss_agg_mode=agg,
        config=_verl_config(agg, CLIPS[clip], bnt=bnt, gbs=gbs),
        rollout_is_weights=isw,
    )
    v_loss.backward()

    lp_o = d["log_prob"].clone().requires_grad_(True)
    o_loss, stats = L.policy_loss_vanilla(
        d["old"],
        lp_o,
        d["adv"],
        d["mask"],
        _ours(agg, CLIPS[clip]),
        rollout_is_weights=isw,
        batch_num_tokens=bnt,
        global_batch_size=gbs,
    )
    o_loss.backward()

    # exact: the same float32 operations in the same order
    assert torch.equal(o_loss.detach(), v_loss.detach()), (o_loss.item(), v_loss.item())
    assert torch.equal(lp_o.grad, lp_v.grad)
    assert stats["pg_clipfrac"].item() == v_metrics["actor/pg_clipfrac"]
    assert stats["ppo_kl"].item() == v_metrics["actor/ppo_kl"]
    assert stats["pg_clipfrac_lower"].item() == v_metrics["actor/pg_clipfrac_lower"]


@pytest.mark.parametrize("kl_type", KL_TYPES)
def test_kl_estimators_match_verl_bitwise(kl_type):
    d = _batch(7)
    x_v = d["log_prob"].clone().requires_grad_(True)
    v = core_algos.kl_penalty(x_v, d["ref"], kl_type)
    v.sum().backward()
    x_o = d["log_prob"].clone().requires_grad_(True)
    o = L.kl_estimate(x_o, d["ref"], kl_type)
    o.sum().backward()
    assert torch.equal(o.detach(), v.detach())
    assert torch.equal(x_o.grad, x_v.grad)  # '+' variants: k2's gradient with the named estimator's value


def _verl_ppo_loss(d, cfg, *, with_entropy):
    """verl.workers.utils.losses.ppo_loss, minus the nested-tensor plumbing, on verl's own functions."""
    lp = d["log_prob"].clone().requires_grad_(True)
    ent = d["ent"].clone().requires_grad_(True) if with_entropy else None
    pg_loss, pg_metrics = core_algos.compute_policy_loss_vanilla(
        old_log_prob=d["old"],
        log_prob=lp,
        advantages=d["adv"],
        response_mask=d["mask"],
        loss_agg_mode=cfg.loss_agg_mode,
        config=cfg,
        rollout_is_weights=d["isw"],
    )
    metrics = dict(pg_metrics, **{"actor/pg_loss": pg_loss.item()})
    policy_loss = pg_loss
    if ent is not None:
        entropy_loss = core_algos.agg_loss(ent, d["mask"], cfg.loss_agg_mode, **cfg.global_batch_info)
        policy_loss = policy_loss - cfg.entropy_coeff * entropy_loss
        metrics["actor/entropy_loss"] = entropy_loss.item()
    if cfg.use_kl_loss:
        kld = core_algos.kl_penalty(logprob=lp, ref_logprob=d["ref"], kl_penalty=cfg.kl_loss_type)
        kl_loss = core_algos.agg_loss(kld, d["mask"], cfg.loss_agg_mode, **cfg.global_batch_info)
        policy_loss = policy_loss + kl_loss * cfg.kl_loss_coef
        metrics["actor/kl_loss"] = kl_loss.item()
    policy_loss.backward()
    return policy_loss.detach(), metrics, lp.grad, None if ent is None else ent.grad


@pytest.mark.parametrize(
    "agg, kl_type, entropy_coeff, lsf",
    list(itertools.product(AGG_MODES, ["low_var_kl", "k3+", "k1"], [0.0, 0.01], [None]))
    + [("seq-mean-token-sum-norm", "k2", 0.01, 4.0)],
)
def test_full_actor_loss_matches_verl(agg, kl_type, entropy_coeff, lsf):
    d = _batch(3)
    bnt, gbs = int(d["mask"].sum()), 8
    common = dict(entropy_coeff=entropy_coeff, use_kl_loss=True, kl_loss_coef=0.05, kl_loss_type=kl_type)
    vcfg = _verl_config(agg, CLIPS["asym-dapo"], bnt=bnt, gbs=gbs, lsf=lsf, loss_scale_factor=lsf, **common)
    v_loss, v_metrics, v_glp, v_gent = _verl_ppo_loss(d, vcfg, with_entropy=True)

    lp = d["log_prob"].clone().requires_grad_(True)
    ent = d["ent"].clone().requires_grad_(True)
    cfg = _ours(agg, CLIPS["asym-dapo"], loss_scale_factor=lsf, **common)
    o_loss, parts = L.ppo_loss(
        lp,
        d["old"],
        d["adv"],
        d["mask"],
        cfg,
        entropy=ent,
        ref_log_prob=d["ref"],
        rollout_is_weights=d["isw"],
        batch_num_tokens=bnt,
        global_batch_size=gbs,
    )
    o_loss.backward()
    assert torch.equal(o_loss.detach(), v_loss)
    assert torch.equal(lp.grad, v_glp)
    assert torch.equal(ent.grad, v_gent)
    assert parts["pg_loss"].item() == v_metrics["actor/pg_loss"]
    assert parts["entropy_loss"].item() == v_metrics["actor/entropy_loss"]
    assert parts["kl_loss"].item() == v_metrics["actor/kl_loss"]


@pytest.mark.parametrize("agg", AGG_MODES)
def test_micro_batch_split_sums_to_the_whole(agg):
    """With global denominators, splitting rows into micro-batches and summing gives the whole-batch loss."""
    d = _batch(11, b=8)
    cfg = _ours(agg, CLIPS["sym-0.2"])
    bnt, gbs = int(d["mask"].sum()), int((d["mask"].sum(-1) > 0).sum())
    kw = dict(batch_num_tokens=bnt, global_batch_size=gbs, rollout_is_weights=d["isw"])
    whole, _ = L.policy_loss_vanilla(d["old"], d["log_prob"], d["adv"], d["mask"], cfg, **kw)
    parts = []
    for s in range(0, 8, 3):
        sl = slice(s, s + 3)
        kw_s = dict(kw, rollout_is_weights=d["isw"][sl])
        p, _ = L.policy_loss_vanilla(d["old"][sl], d["log_prob"][sl], d["adv"][sl], d["mask"][sl], cfg, **kw_s)
        parts.append(p)
    # float32 sums in a different order: equal to a few ulps of the loss magnitude
    torch.testing.assert_close(torch.stack(parts).sum(), whole, rtol=1e-6, atol=1e-7)


def test_from_actor_config_reads_a_real_verl_actor_config():
    vcfg = ActorConfig(
        strategy="fsdp",
        rollout_n=4,
        ppo_micro_batch_size_per_gpu=2,
        clip_ratio_low=0.1,
        clip_ratio_high=0.3,
        clip_ratio_c=2.0,
        loss_agg_mode="seq-mean-token-mean",
        entropy_coeff=0.01,
        use_kl_loss=True,
        kl_loss_coef=0.02,
        kl_loss_type="k3+",
    )
    # the plugin sends vars(ActorConfig) after a JSON round trip; values JSON cannot hold become None
    sent = json.loads(json.dumps(dataclasses.asdict(vcfg), default=lambda o: None))
    cfg = L.LossConfig.from_actor_config(sent)
    assert (cfg.eps_low, cfg.eps_high, cfg.clip_ratio_c) == (0.1, 0.3, 2.0)
    assert (cfg.loss_agg_mode, cfg.entropy_coeff, cfg.use_kl_loss) == ("seq-mean-token-mean", 0.01, True)
    assert (cfg.kl_loss_coef, cfg.kl_loss_type, cfg.loss_mode, cfg.loss_scale_factor) == (0.02, "k3+", "vanilla", None)


@pytest.mark.parametrize(
    "actor_config, match",
    [
        ({"policy_loss": {"loss_mode": "gspo"}}, "loss_mode 'gspo' is not implemented"),
        ({"loss_agg_mode": "seq-mean"}, "loss_agg_mode 'seq-mean'"),
        ({"use_kl_loss": True, "kl_loss_type": "full"}, "'full' needs whole-vocabulary"),
        ({"use_kl_loss": True, "kl_loss_type": "k9"}, "kl_loss_type 'k9'"),
        ({"clip_ratio_c": 1.0}, "clip_ratio_c must be > 1.0"),
        ({"clip_ratio": "0.2"}, "must be a number"),
        ({"use_kl_loss": "yes"}, "must be a bool"),
    ],
    ids=["loss-mode", "agg-mode", "kl-full", "kl-unknown", "dual-clip-c", "clip-type", "kl-flag-type"],
)
def test_unsupported_settings_fail_loudly(actor_config, match):
    with pytest.raises(L.LossConfigError, match=match):
        L.LossConfig.from_actor_config(actor_config)
