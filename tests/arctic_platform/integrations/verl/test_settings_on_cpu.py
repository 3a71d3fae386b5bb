# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Every verl setting is classified, and each backend profile refuses exactly what it would mishandle.

The Arctic-Platform main profile is what its real engine does (../shared/fixtures/arctic-platform/engine/ and its
code): hard-coded clip constants, packed micro-batches (seq-mean modes), no IS weights, no rollout log-probs.
"""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from arctic_platform.backend_profile import ARCTIC_PLATFORM_MAIN, BackendProfile, embedded_profile, profile_from_health
from arctic_platform.integrations.verl.adapter import arctic_options, settings_refusals
from arctic_platform.integrations.verl.settings import SETTINGS, covering, settings_notes

EMBEDDED = embedded_profile(attn_implementations=("eager", "sdpa"))
# a GRPO run with two optimizer steps per training step (mini-batch 2 of 4 prompts)
BASE = [
    "remote_backend=arctic",
    "actor_rollout_ref.rollout.name=arctic",
    "algorithm.adv_estimator=grpo",
    "data.train_batch_size=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=2",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.rollout.n=2",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    "trainer.n_gpus_per_node=1",
    "trainer.nnodes=1",
    "trainer.save_freq=-1",
    "trainer.resume_mode=disable",
    "trainer.total_training_steps=10",
    "actor_rollout_ref.model.path=/nonexistent/model",
]


@pytest.fixture(scope="module")
def compose():
    from arctic_platform.integrations.verl.compose_check import compose_config

    return lambda overrides=(): compose_config([*BASE, *overrides])


def _refusals(compose, overrides, profile):
    cfg = compose(overrides)
    return settings_refusals(cfg, arctic_options(cfg), profile)


def _leaves(d, prefix):
    if isinstance(d, dict):
        for k, v in d.items():
            yield from _leaves(v, f"{prefix}.{k}")
    else:
        yield prefix


def test_every_actor_rollout_ref_setting_is_classified(compose):
    cfg = compose()
    tree = OmegaConf.to_container(cfg.actor_rollout_ref, resolve=False)
    leaves = [p for p in _leaves(tree, "actor_rollout_ref") if not p.endswith("._target_")]
    assert len(leaves) > 300  # verl 0.9.1's composed actor_rollout_ref
    missing = [p for p in leaves if covering(p) is None]
    assert not missing, f"verl settings no entry of SETTINGS covers: {missing}"
    roles = {s.role for s in SETTINGS}
    assert roles == {"verl", "backend", "placement", "refused"}


def test_defaults_are_honoured_by_both_profiles(compose):
    assert _refusals(compose, [], EMBEDDED) == []
    assert _refusals(compose, [], ARCTIC_PLATFORM_MAIN) == []


@pytest.mark.parametrize(
    "override, needle",
    [
        ("actor_rollout_ref.actor.policy_loss.loss_mode=gspo", "loss_mode='gspo'"),
        ("actor_rollout_ref.actor.clip_ratio_high=0.28", "hard-codes (0.2, 0.2, 3.0)"),
        ("actor_rollout_ref.actor.clip_ratio_c=10.0", "hard-codes (0.2, 0.2, 3.0)"),
        ("actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean", "aggregate micro-batches, not sequences"),
        ("actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm", "aggregate micro-batches, not sequences"),
        ("actor_rollout_ref.actor.loss_agg_mode=token-sum", "does not implement it"),
        ("algorithm.rollout_correction.rollout_is=token", "silently unweighted"),
        ("algorithm.rollout_correction.bypass_mode=true", "needs the rollout's log-probs"),
        ("actor_rollout_ref.model.lora_rank=8", "has no LoRA"),
        ("actor_rollout_ref.actor.use_dynamic_bsz=true", "no token-budget micro-batches"),
        ("remote_backend.arctic.train.deepspeed.zero_optimization.stage=0", "initialises with stages [1, 2, 3]"),
        ("remote_backend.arctic.log_prob.zero_stage=1", "log_prob engine has no optimizer"),
        ("actor_rollout_ref.actor.optim.lr_warmup_steps=2", "ticks its scheduler on every /step"),
    ],
)
def test_arctic_platform_main_refuses_what_it_would_mishandle(compose, override, needle):
    refusals = _refusals(compose, [override], ARCTIC_PLATFORM_MAIN)
    assert len(refusals) == 1 and needle in refusals[0], refusals
    setting = override.split("=", 1)[0]
    assert setting.split(".")[-1] in refusals[0]  # the message names the setting
    # the embedded server computes every one of these with verl's semantics
    assert _refusals(compose, [override], EMBEDDED) == []


def test_per_optimizer_step_schedule_is_accepted_when_asked_for(compose):
    warm = "actor_rollout_ref.actor.optim.lr_warmup_steps=2"
    assert _refusals(compose, [warm], ARCTIC_PLATFORM_MAIN)
    per_step = "remote_backend.arctic.train.lr_per_optimizer_step=true"
    assert not _refusals(compose, [warm, per_step], ARCTIC_PLATFORM_MAIN)
    one_step = "actor_rollout_ref.actor.ppo_mini_batch_size=4"  # one optimizer step per training step
    assert not _refusals(compose, [warm, one_step], ARCTIC_PLATFORM_MAIN)


def test_settings_refused_on_every_backend(compose):
    for override in (
        "actor_rollout_ref.actor.checkpoint.async_save=true",
        "actor_rollout_ref.rollout.quantization=fp8",
        "actor_rollout_ref.model.mtp.enable=true",
        "+actor_rollout_ref.model.override_config.hidden_dropout=0.1",
    ):
        for profile in (EMBEDDED, ARCTIC_PLATFORM_MAIN):
            refusals = _refusals(compose, [override], profile)
            assert len(refusals) == 1, (override, refusals)


def test_embedded_server_refuses_what_its_engine_lacks(compose):
    assert _refusals(compose, ["actor_rollout_ref.model.lora_rank=8"], EMBEDDED) == []
    cortex = ["remote_backend.arctic.backend.type=cortex", "actor_rollout_ref.model.lora_rank=8"]
    assert "the cortex backend has no LoRA" in _refusals(compose, cortex, EMBEDDED)[0]
    megatron = _refusals(compose, ["actor_rollout_ref.model.lora.rank=8"], EMBEDDED)
    assert len(megatron) == 1 and "set actor_rollout_ref.model.lora_rank" in megatron[0]
    assert "no Liger" in _refusals(compose, ["actor_rollout_ref.model.use_liger=true"], EMBEDDED)[0]
    assert _refusals(compose, ["actor_rollout_ref.model.use_liger=true"], ARCTIC_PLATFORM_MAIN) == []
    attn = "+actor_rollout_ref.model.override_config.attn_implementation=flash_attention_2"
    assert "can load ['eager', 'sdpa']" in _refusals(compose, [attn], EMBEDDED)[0]


def test_profile_steps_on_a_backend_without_a_profiler_is_a_note(compose):
    cfg = compose(["global_profiler.steps=[2]", "global_profiler.tool=torch"])
    notes = [n for n in settings_notes(cfg, arctic_options(cfg), ARCTIC_PLATFORM_MAIN) if "profil" in n]
    assert len(notes) == 1 and notes[0].startswith("global_profiler.steps: Arctic-Platform main has no profiler")
    assert settings_notes(cfg, arctic_options(cfg), EMBEDDED) == []


def test_cosine_without_a_horizon(compose):
    cosine = ["actor_rollout_ref.actor.optim.lr_scheduler_type=cosine", "trainer.total_training_steps=null"]
    assert _refusals(compose, cosine, EMBEDDED) == []  # verl's horizon reaches it with the first /step
    assert any("needs trainer.total_training_steps" in r for r in _refusals(compose, cosine, ARCTIC_PLATFORM_MAIN))


def test_rollout_log_probs_are_a_note_not_a_refusal(compose):
    cfg = compose(["actor_rollout_ref.rollout.calculate_log_probs=true"])
    notes = settings_notes(cfg, arctic_options(cfg), ARCTIC_PLATFORM_MAIN)
    assert len(notes) == 1 and "not requested" in notes[0]
    assert settings_notes(cfg, arctic_options(cfg), EMBEDDED) == []


def test_profile_from_health():
    assert profile_from_health({"status": "OK"}) is ARCTIC_PLATFORM_MAIN  # the reference advertises nothing
    assert profile_from_health("OK") is ARCTIC_PLATFORM_MAIN
    advertised = {**EMBEDDED.model_dump(mode="json"), "a_future_capability": True}
    got = profile_from_health({"status": "OK", "profile": advertised})
    assert isinstance(got, BackendProfile) and got == EMBEDDED


def test_compose_check_lists_every_refusal(capsys):
    from arctic_platform.integrations.verl import compose_check

    rc = compose_check.main(
        [
            *BASE,
            "remote_backend.arctic.backend.type=onprem",
            "remote_backend.arctic.backend.url=http://127.0.0.1:9",  # nothing listens: Arctic-Platform main assumed
            "actor_rollout_ref.actor.clip_ratio_high=0.28",
            "actor_rollout_ref.actor.loss_agg_mode=token-sum",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1
    assert "2 setting(s) cannot be honoured by Arctic-Platform main" in err
    assert "clip_ratio_high" in err and "loss_agg_mode='token-sum'" in err


def test_docs_settings_table_is_current(repo_root, capsys):
    from arctic_platform.integrations.verl import settings

    assert settings.main([]) == 0
    table = capsys.readouterr().out.strip()
    doc = (repo_root / "docs" / "settings.md").read_text()
    current = doc.split("<!-- settings-table:begin -->\n", 1)[1].split("\n<!-- settings-table:end -->", 1)[0]
    assert current.strip() == table, "docs/settings.md is stale: python -m arctic_platform.integrations.verl.settings"
    assert table.count("\n") + 1 == len(settings.SETTINGS) + 2  # header + rule + one row per setting
