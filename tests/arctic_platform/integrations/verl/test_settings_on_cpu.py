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


def test_every_actor_rollout_ref_setting_of_every_engine_is_classified(engine_cfgs):
    """The composed config of each model_engine verl 0.9.1 ships: every leaf under actor_rollout_ref is covered."""
    assert set(engine_cfgs) == {"dp", "megatron", "torchtitan", "veomni"}
    for engine, cfg in engine_cfgs.items():
        tree = OmegaConf.to_container(cfg.actor_rollout_ref, resolve=False)
        leaves = [p for p in _leaves(tree, "actor_rollout_ref") if not p.endswith("._target_")]
        assert len(leaves) > 300, engine  # verl 0.9.1's composed actor_rollout_ref
        missing = [p for p in leaves if covering(p) is None]
        assert not missing, f"{engine}: verl settings no entry of SETTINGS covers: {missing}"
    roles = {s.role for s in SETTINGS}
    assert roles == {"verl", "backend", "placement", "refused"}


@pytest.mark.parametrize(
    "added, role",
    [
        ("+actor_rollout_ref.rollout.engine_kwargs.vllm.max_num_batched_tokens=8192", "backend"),
        ("+actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend=flashinfer", "verl"),
        ("+actor_rollout_ref.model.override_config.attn_implementation=sdpa", "backend"),
        ("+actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=bf16", "backend"),
        ("+actor_rollout_ref.actor.optim.override_optimizer_config.amsgrad=true", "refused"),
        # verl 0.9.0's actor and ref trees have it (0.9.1 moved it into Megatron's engine config)
        ("+actor_rollout_ref.actor.router_replay.mode=R3", "refused"),
        ("+actor_rollout_ref.ref.router_replay.mode=R2", "refused"),
    ],
)
def test_keys_added_with_plus_are_classified(compose, added, role):
    path = added.lstrip("+").split("=", 1)[0]
    compose([added])  # verl's config takes it
    assert covering(path).role == role


def test_a_key_no_entry_covers_is_refused_not_ignored(compose):
    refusals = _refusals(compose, ["+actor_rollout_ref.model.not_a_verl_key=1"], EMBEDDED)
    assert refusals == [
        "actor_rollout_ref.model.not_a_verl_key=1: the embedded arctic-verl server does not know this setting "
        "(verl 0.9.1's config has no such key, so nothing reads it); remove it"
    ]
    assert refusals[0].fix == ("~actor_rollout_ref.model.not_a_verl_key",)


def test_defaults_are_honoured_by_both_profiles(compose):
    assert _refusals(compose, [], EMBEDDED) == []
    assert _refusals(compose, [], ARCTIC_PLATFORM_MAIN) == []


@pytest.mark.parametrize(
    "override, needle",
    [
        ("actor_rollout_ref.actor.policy_loss.loss_mode=gspo", "loss_mode='gspo'"),
        ("actor_rollout_ref.actor.clip_ratio_high=0.28", "= (0.2, 0.2, 3.0) and ignores the config"),
        ("actor_rollout_ref.actor.clip_ratio_c=10.0", "= (0.2, 0.2, 3.0) and ignores the config"),
        ("actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean", "aggregate micro-batches, not sequences"),
        ("actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm", "aggregate micro-batches, not sequences"),
        ("actor_rollout_ref.actor.loss_agg_mode=token-sum", "does not implement it"),
        ("algorithm.rollout_correction.rollout_is=token", "silently unweighted"),
        ("algorithm.rollout_correction.bypass_mode=true", "returns no rollout log-probs from its sampler"),
        ("actor_rollout_ref.model.lora_rank=8", "has no LoRA"),
        ("actor_rollout_ref.actor.use_dynamic_bsz=true", "no token-budget micro-batches"),
        ("remote_backend.arctic.train.deepspeed.zero_optimization.stage=0", "with stages [1, 2, 3] only"),
        ("remote_backend.arctic.log_prob.zero_stage=1", "log_prob engine (no optimizer)"),
        ("actor_rollout_ref.actor.optim.lr_warmup_steps=2", "ticks its scheduler on every /step"),
    ],
)
def test_arctic_platform_main_refuses_what_it_would_mishandle(compose, override, needle):
    refusals = _refusals(compose, [override], ARCTIC_PLATFORM_MAIN)
    assert len(refusals) == 1 and needle in refusals[0], refusals
    setting = override.split("=", 1)[0]
    assert setting in refusals[0] and "Arctic-Platform main" in refusals[0]  # names the setting and the backend
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
    assert any(
        "the embedded arctic-verl server over cortex has no LoRA" in r for r in _refusals(compose, cortex, EMBEDDED)
    )
    megatron = _refusals(compose, ["actor_rollout_ref.model.lora.rank=8"], EMBEDDED)
    assert len(megatron) == 1 and "set actor_rollout_ref.model.lora_rank" in megatron[0]
    assert "no Liger" in _refusals(compose, ["actor_rollout_ref.model.use_liger=true"], EMBEDDED)[0]
    assert _refusals(compose, ["actor_rollout_ref.model.use_liger=true"], ARCTIC_PLATFORM_MAIN) == []
    attn = "+actor_rollout_ref.model.override_config.attn_implementation=flash_attention_2"
    [r] = _refusals(compose, [attn], EMBEDDED)
    assert "can train with ['eager', 'sdpa'] on its devices" in r, r  # this CPU: no flash attention, no GPU
    assert r.fix == ("actor_rollout_ref.model.override_config.attn_implementation=sdpa",)  # trains here
    # flex attention loads on CPU but has no backward there: refused at start-up, not at the first update
    flex = "+actor_rollout_ref.model.override_config.attn_implementation=flex_attention"
    [r] = _refusals(compose, [flex], EMBEDDED)
    assert r.fix == ("actor_rollout_ref.model.override_config.attn_implementation=sdpa",), r


def test_profile_steps_on_a_backend_without_a_profiler_is_a_note(compose):
    profiled = ["global_profiler.steps=[2]", "global_profiler.tool=torch"]
    cfg = compose([*profiled, "actor_rollout_ref.actor.profiler.enable=true"])
    notes = [n for n in settings_notes(cfg, arctic_options(cfg), ARCTIC_PLATFORM_MAIN) if "profil" in n]
    assert len(notes) == 1 and notes[0].startswith("global_profiler.steps: Arctic-Platform main has no profiler")
    # the embedded server traces the training job; its sampler has no profiler (verl's rollout profiler follows
    # actor.profiler.enable)
    assert settings_notes(cfg, arctic_options(cfg), EMBEDDED) == [
        "actor_rollout_ref.rollout.profiler.enable=True: the embedded arctic-verl server has no profiler on its "
        "sampling job, so generation is not traced (the training job is, with actor.profiler)"
    ]
    cfg = compose(profiled)  # verl profiles the actor only with actor.profiler.enable: nothing to say
    assert not [n for n in settings_notes(cfg, arctic_options(cfg), ARCTIC_PLATFORM_MAIN) if "profil" in n]


@pytest.mark.parametrize("attn, noted", [("eager", True), ("sdpa", True), ("flash_attention_2", False)])
def test_attention_that_mixes_packed_rows_is_a_note_on_arctic_platform_main(compose, attn, noted):
    """Arctic-Platform main packs a micro-batch into one row: without flash attention a sequence attends to the ones
    packed before it. A note (the only way to run that engine on CPU), never on the embedded server (padded rows)."""
    cfg = compose([f"+actor_rollout_ref.model.override_config.attn_implementation={attn}"])
    notes = [n for n in settings_notes(cfg, arctic_options(cfg), ARCTIC_PLATFORM_MAIN) if "packs each" in n]
    assert len(notes) == int(noted), notes
    if noted:
        assert notes[0].startswith(f"actor_rollout_ref.model.override_config.attn_implementation='{attn}': Arctic")
        assert "attends to the ones packed before it" in notes[0]
    assert not [n for n in settings_notes(cfg, arctic_options(cfg), EMBEDDED) if "packs each" in n]


def test_cosine_without_a_horizon(compose):
    cosine = ["actor_rollout_ref.actor.optim.lr_scheduler_type=cosine", "trainer.total_training_steps=null"]
    assert _refusals(compose, cosine, EMBEDDED) == []  # verl's horizon reaches it with the first /step
    refused = _refusals(compose, cosine, ARCTIC_PLATFORM_MAIN)
    assert any("the cosine would have no horizon; set trainer.total_training_steps" in r for r in refused), refused


def test_rollout_log_probs_are_a_note_not_a_refusal(compose):
    cfg = compose(["actor_rollout_ref.rollout.calculate_log_probs=true"])
    notes = settings_notes(cfg, arctic_options(cfg), ARCTIC_PLATFORM_MAIN)
    assert len(notes) == 1 and "not requested" in notes[0]
    assert settings_notes(cfg, arctic_options(cfg), EMBEDDED) == []


MP = "+actor_rollout_ref.actor.fsdp_config.mixed_precision"


@pytest.mark.parametrize(
    "overrides, embedded, ap_main",
    [
        # verl's FSDP defaults: fp32 master weights, bf16 compute, fp32 reduce / buffers (said explicitly)
        ([f"{MP}.param_dtype=bf16", f"{MP}.reduce_dtype=fp32", f"{MP}.buffer_dtype=fp32"], None, None),
        (["actor_rollout_ref.actor.fsdp_config.model_dtype=bf16"], "keeps float32 master weights", "master"),
        (["actor_rollout_ref.ref.fsdp_config.model_dtype=bf16"], "does not round them", "does not round them"),
        ([f"{MP}.param_dtype=fp32"], "set remote_backend.arctic.dtype=float32", "computes in ['bfloat16'] only"),
        ([f"{MP}.param_dtype=fp32", "remote_backend.arctic.dtype=float32"], None, "computes in ['bfloat16'] only"),
        ([f"{MP}.param_dtype=fp16", "remote_backend.arctic.dtype=float16"], "needs loss scaling", "needs loss"),
        ([f"{MP}.reduce_dtype=bf16"], "gradients and buffers in float32", "gradients and buffers"),
        (["+actor_rollout_ref.ref.fsdp_config.mixed_precision.buffer_dtype=bf16"], "in float32", "in float32"),
        (["actor_rollout_ref.rollout.dtype=float32"], "set remote_backend.arctic.dtype=float32", "['bfloat16'] only"),
        (["actor_rollout_ref.rollout.dtype=float32", "remote_backend.arctic.dtype=float32"], None, "only"),
        # not read by verl 0.9.1's FSDP engine (only its Megatron engine reads the engine dtype): no effect
        (["actor_rollout_ref.actor.fsdp_config.dtype=float16"], None, None),
    ],
)
def test_precision_is_honoured_only_where_the_backend_computes_the_same(compose, overrides, embedded, ap_main):
    for profile, needle in ((EMBEDDED, embedded), (ARCTIC_PLATFORM_MAIN, ap_main)):
        refusals = _refusals(compose, overrides, profile)
        if needle is None:
            assert refusals == [], (profile.name, refusals)
        else:
            assert len(refusals) == 1 and needle in refusals[0], (profile.name, refusals)
            setting = overrides[0].lstrip("+").split("=", 1)[0]
            assert setting in refusals[0] and profile.name in refusals[0]


@pytest.mark.parametrize(
    "override",
    [
        "actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size=2",  # verl 0.9.1's key
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2",  # deprecated (verl copies it over)
        "actor_rollout_ref.ref.fsdp_config.ulysses_sequence_parallel_size=2",
    ],
)
def test_sequence_parallelism_is_refused_on_both_backends(compose, override):
    for profile in (EMBEDDED, ARCTIC_PLATFORM_MAIN):
        refusals = _refusals(compose, [override], profile)
        # one line: the ref's key interpolates the deprecated actor key and is not refused twice
        assert len(refusals) == 1, refusals
        assert refusals[0].startswith(override) and profile.name in refusals[0] and "set it to 1" in refusals[0]


ONE_STEP = ["actor_rollout_ref.actor.ppo_mini_batch_size=4"]  # one optimizer step per training step
COSINE = ["actor_rollout_ref.actor.optim.lr_scheduler_type=cosine"]


@pytest.mark.parametrize(
    "overrides, refused",
    [
        ([*COSINE, "actor_rollout_ref.actor.optim.num_cycles=1.0"], "actor_rollout_ref.actor.optim.num_cycles=1.0"),
        (
            [*COSINE, "actor_rollout_ref.actor.optim.zero_indexed_step=false"],
            "actor_rollout_ref.actor.optim.zero_indexed_step=False",
        ),
        ([*COSINE, "actor_rollout_ref.actor.optim.min_lr_ratio=0.1"], None),  # WarmupCosineLR's cos_min_ratio
        (["actor_rollout_ref.actor.optim.num_cycles=1.0"], None),  # verl reads it for cosine only
        (
            ["actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=0.1", "trainer.total_training_steps=null"],
            "trainer.total_training_steps=None with actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=0.1",
        ),
        (["actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=0.1"], None),  # a horizon: warmup = ratio x steps
    ],
)
def test_schedule_options_arctic_platform_main_cannot_express(compose, overrides, refused):
    refusals = _refusals(compose, [*ONE_STEP, *overrides], ARCTIC_PLATFORM_MAIN)
    if refused is None:
        assert refusals == []
    else:
        assert len(refusals) == 1 and refusals[0].startswith(refused) and "; set " in refusals[0], refusals
    assert _refusals(compose, [*ONE_STEP, *overrides], EMBEDDED) == []  # verl's own schedule, every option


def test_uneven_micro_batches_are_refused_as_verl_asserts(compose):
    # a mini-batch of 2 prompts x n=2 = 4 rows cannot be cut into micro-batches of 3
    for profile in (EMBEDDED, ARCTIC_PLATFORM_MAIN):
        refusals = _refusals(compose, ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3"], profile)
        assert len(refusals) == 1 and "would train an uneven last micro-batch" in refusals[0], refusals
        assert refusals[0].startswith("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3")
        assert "set ppo_micro_batch_size_per_gpu to a divisor of 4" in refusals[0]
    two_gpus = ["remote_backend.arctic.training_gpus=2"]
    assert _refusals(compose, two_gpus, EMBEDDED) == []  # 2 rows per GPU, micro-batches of 2
    assert (
        "of 2 rows per GPU"
        in _refusals(
            compose, [*two_gpus, "data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=3"], EMBEDDED
        )[0]
    )


def test_deprecated_global_micro_batch_size_is_divided_over_the_training_gpus(compose, monkeypatch):
    from arctic_platform.integrations.verl.adapter import batch_sizing, build_client_config
    from arctic_platform.integrations.verl.v1.worker import ArcticV1ActorRolloutRefWorker

    deprecated = [
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=null",
        "actor_rollout_ref.actor.ppo_micro_batch_size=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=null",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size=4",
        "remote_backend.arctic.training_gpus=2",
    ]
    cfg = compose(deprecated)
    assert _refusals(compose, deprecated, EMBEDDED) == []
    assert batch_sizing(cfg, arctic_options(cfg))["micro_batch_size"] == 2  # per GPU = 4 // 2
    ds = build_client_config(cfg, arctic_options(cfg)).training_ds_config()
    assert (ds["train_micro_batch_size_per_gpu"], ds["gradient_accumulation_steps"]) == (2, 1)
    # what the forwarder sends: meta.actor_config of /forward-backward and meta.micro_batch_size of /forward, both
    # per GPU (the server reads them as such); no backend is contacted to build either
    for k, v in {"WORLD_SIZE": "1", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}.items():
        monkeypatch.setenv(k, v)
    worker = ArcticV1ActorRolloutRefWorker(cfg.actor_rollout_ref, "actor_rollout", main_config=cfg, backend_handle={})
    actor_config, _ = worker._actor_config()
    assert actor_config["ppo_micro_batch_size_per_gpu"] == 2
    assert worker._forward_micro_batching(ref=False) == {"micro_batch_size": 2}


def test_log_prob_micro_batching_keys_are_backend_settings(compose):
    for block in ("rollout", "ref"):
        for key in ("log_prob_micro_batch_size", "log_prob_micro_batch_size_per_gpu", "log_prob_use_dynamic_bsz",
                    "log_prob_max_token_len_per_gpu"):  # fmt: skip
            assert covering(f"actor_rollout_ref.{block}.{key}").role == "backend", (block, key)
    cfg = compose(["actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true"])

    def dynamic_notes(profile):
        return [n for n in settings_notes(cfg, arctic_options(cfg), profile) if "log_prob_use_dynamic_bsz" in n]

    notes = dynamic_notes(ARCTIC_PLATFORM_MAIN)
    assert len(notes) == 1 and notes[0].startswith("actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True: Arctic")
    assert dynamic_notes(EMBEDDED) == []  # token budgets, as verl cuts them


WAY_OUT = ("; set ", "; use ", "; unset", "; leave", "; turn", "; remove", "; pick", " instead", ", or ")


@pytest.fixture(scope="module")
def engine_cfgs():
    from arctic_platform.integrations.verl.settings.render import compose_engines

    return compose_engines()


def test_every_refusal_names_the_setting_the_backend_and_a_way_out(engine_cfgs):
    """Walks every checked setting with the table's non-default example, on both profiles and over cortex: one form,
    ``<setting>=<value>: <backend> <why>; <way out>``, and the way out's overrides make that line go away."""
    from arctic_platform.integrations.verl.settings.render import example_context, example_refusals

    seen = set()
    for setting in SETTINGS:
        if setting.check is None:
            continue
        for profile in (EMBEDDED, ARCTIC_PLATFORM_MAIN):
            for cortex in (False, True):
                example = example_context(setting, engine_cfgs, profile, cortex=cortex)
                assert example is not None, f"{setting.pattern}: a checked setting needs an example in EXAMPLES"
                for msg in example_refusals(setting, example[0]):
                    seen.add(setting.pattern)
                    where = (setting.pattern, profile.name, cortex, msg)
                    assert msg.startswith(msg.setting + ": " + msg.backend + " "), where
                    assert setting.pattern.removesuffix(".*").rsplit(".", 1)[-1] in msg.setting + msg.why, where
                    assert msg.backend in (profile.name, f"{profile.name} over cortex", "verl 0.9.1") or (
                        msg.backend.startswith("verl's V1 trainer")
                    ), where
                    assert any(w in msg for w in WAY_OUT), where
    checked = {s.pattern for s in SETTINGS if s.check is not None}
    # checks of capabilities both profiles have (every verl KL estimator, HF export, sleep/wake): they guard a
    # narrower backend, so no example is refused today; the model path's check needs a model on disk (its own test)
    guards = {
        "actor_rollout_ref.actor.kl_loss_type",
        "actor_rollout_ref.actor.checkpoint.save_contents",
        "actor_rollout_ref.rollout.free_cache_engine",
        "actor_rollout_ref.model.path",
    }
    assert checked - seen == guards, sorted(checked - seen)


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
    # the server is named as not reached, and which profile the other lines assumed
    assert "3 setting(s) cannot be honoured by Arctic-Platform main" in err
    assert "profile from http://127.0.0.1:9 not reached" in err and "Arctic-Platform main's profile assumed" in err
    assert "remote_backend.arctic.backend.url='http://127.0.0.1:9': the Arctic RL server did not answer /health" in err
    assert "clip_ratio_high" in err and "loss_agg_mode='token-sum'" in err


def test_compose_check_lists_non_default_placement_in_one_line(capsys):
    from arctic_platform.integrations.verl import compose_check

    rc = compose_check.main(
        [
            *BASE,
            "actor_rollout_ref.actor.fsdp_config.forward_prefetch=true",
            "actor_rollout_ref.actor.fsdp_config.dtype=float16",
            "actor_rollout_ref.actor.fsdp_config.model_dtype=fp32",  # a backend setting at its default: not listed
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    lines = [ln for ln in out.splitlines() if "no effect with a remote backend" in ln]
    assert len(lines) == 1, lines
    assert "fsdp_config.forward_prefetch=True" in lines[0] and "fsdp_config.dtype='float16'" in lines[0]
    assert "model_dtype" not in lines[0]


def test_docs_settings_table_is_current(repo_root, capsys):
    from arctic_platform.integrations.verl import settings

    assert settings.main([]) == 0
    table = capsys.readouterr().out.strip()
    doc = (repo_root / "docs" / "settings.md").read_text()
    current = doc.split("<!-- settings-table:begin -->\n", 1)[1].split("\n<!-- settings-table:end -->", 1)[0]
    assert current.strip() == table, "docs/settings.md is stale: python -m arctic_platform.integrations.verl.settings"
    assert table.count("\n") + 1 == len(settings.SETTINGS) + 2  # header + rule + one row per setting
