# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""verl's own launch scripts on the arctic backend: each passes the start-up check, or is refused at start-up with
every refusal at once, one line each, naming the setting, the backend and a way out that works.

The corpus: 27 scripts of verl's ``examples/`` (and the fully-async multi-turn tool and one-step-off-policy recipes),
their overrides recorded from verl v0.9.0 (``verl_v0.9.0_examples.json`` next to this file: repository, tag, commit
and each script's argv, written by ``tools/verl_corpus.py`` running the scripts with a ``python3`` shim; verl 0.9.1 has
no tag in the mirror, v0.9.0 is the newest release the snapshot has). Each is rewritten to a tiny model and tiny data
(:func:`tiny`), run through exactly what ``main_ppo`` runs before Ray starts (``check_remote_backend_config`` with
the arctic backend's check against the embedded server's profile and against Arctic-Platform main's), compared with
:data:`EXPECTED`, then the refusals' own fixes are applied and the same check, with verl's ``validate_config`` and
the client mapping (``compose_check``), must pass. A sample of the passing scripts then runs through
``arctic-verl probe`` with the script's effective values (one update, log-probs, a generate, a weight sync).

A script whose own Hydra overrides are broken for stock verl 0.9.1 too (a key verl 0.9.1 no longer has; a key verl
never had) is reported as such (:data:`BROKEN`): the test shows stock verl failing on the script's own overrides,
then repairs them as the upstream config now spells them and goes on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CORPUS = json.loads((Path(__file__).parent / "verl_v0.9.0_examples.json").read_text())
SCRIPTS = {s["path"]: s for s in CORPUS["scripts"]}
EMBEDDED, AP_MAIN = "the embedded arctic-verl server", "Arctic-Platform main"

# ------------------------------------------------------------------------------------------------ the rewrite

LENGTHS = {
    "data.max_prompt_length": 32,
    "data.max_response_length": 16,
    "actor_rollout_ref.rollout.prompt_length": 32,
    "actor_rollout_ref.rollout.response_length": 16,
    "actor_rollout_ref.rollout.max_model_len": 48,
}
"""Tiny data: sequence lengths capped (the tiny model's context); every other value stays the script's."""

NOT_MAIN_PPO = ("rollout.", "async_training.", "data.gen_batch_size")
"""Keys of the fully-async / one-step-off-policy mains' own configs. remote_backend=arctic runs under
``verl.trainer.main_ppo``: those scripts are composed there without these, with the remote-backend trainer's own
asynchronous mode (``remote_backend.async_rollout.enable=true``) in their place and a training batch of
``async_training.require_batches`` mini-batches (those mains set ``data.train_batch_size=0``)."""


def tiny(script: dict, model: Path, data: Path, home: Path) -> list[str]:
    """The script's overrides with a tiny model, tiny data and lengths, plus ``remote_backend=arctic`` and
    ``actor_rollout_ref.rollout.name=arctic`` (what a user switching to the arctic backend adds)."""
    out = ["remote_backend=arctic"]
    for o in script["overrides"]:
        o = o.replace("${HOME}", str(home)).replace("${VERL_REPO}", str(home / "verl"))
        key, _, value = o.partition("=")
        bare = key.lstrip("+~")
        if script["module"] != "verl.trainer.main_ppo" and bare.startswith(NOT_MAIN_PPO):
            continue
        if bare in ("actor_rollout_ref.model.path", "critic.model.path"):
            value = str(model)
        elif bare in ("data.train_files", "data.val_files"):
            value = str(data)
        elif bare in LENGTHS:
            value = str(min(int(value), LENGTHS[bare]))
        elif bare == "actor_rollout_ref.rollout.name":
            value = "arctic"
        out.append(f"{key}={value}")
    if script["module"] != "verl.trainer.main_ppo":
        # the fully-async main trains require_batches mini-batches per step (its data.train_batch_size is 0)
        given = dict(o.lstrip("+").partition("=")[::2] for o in script["overrides"])
        batches = int(given.get("async_training.require_batches", 1))
        mini = int(given["actor_rollout_ref.actor.ppo_mini_batch_size"])
        out += ["remote_backend.async_rollout.enable=true", f"data.train_batch_size={batches * mini}"]
    return [*out, "actor_rollout_ref.rollout.name=arctic"]


# ------------------------------------------------------------------------------------------------ expectations


@dataclass(frozen=True)
class Broken:
    """Overrides of the script that stock verl 0.9.1 rejects too, and their repair as verl 0.9.1 spells them."""

    why: str
    drop: tuple[str, ...] = ()
    """Override keys (without ``+``) removed: verl 0.9.1 has no such setting."""
    replace: dict = field(default_factory=dict)
    """Override key -> the key verl 0.9.1 reads it at."""


BROKEN = {
    "examples/grpo_trainer/run_qwen3_30b_a3b_megatron.sh": Broken(
        "actor_rollout_ref.actor.megatron.grad_offload: verl 0.9.1's Megatron engine config has no such key (v0.9.0 "
        "had it), and +rollout.moe_tensor_parallel_size no longer exists either while rollout.expert_parallel_size=2 "
        "fails verl's RolloutConfig (it must equal TP x DP); Hydra refuses the first override",
        drop=(
            "actor_rollout_ref.actor.megatron.grad_offload",
            "actor_rollout_ref.rollout.moe_tensor_parallel_size",
            "actor_rollout_ref.rollout.expert_parallel_size",
        ),
    ),
    "examples/dppo_trainer/run_qwen3_30b_a3b_megatron.sh": Broken(
        "actor_rollout_ref.actor.megatron.grad_offload: as above",
        drop=("actor_rollout_ref.actor.megatron.grad_offload",),
    ),
    "examples/router_replay/run_qwen3_30b_a3b_megatron.sh": Broken(
        "actor_rollout_ref.actor.model_engine: not a verl setting (model_engine is a top-level choice); Hydra "
        "refuses the override",
        drop=("actor_rollout_ref.actor.megatron.grad_offload",),
        replace={"actor_rollout_ref.actor.model_engine": "model_engine"},
    ),
    "examples/tuning/lora/run_qwen3_30b_a3b_megatron.sh": Broken(
        "actor_rollout_ref.actor.megatron.grad_offload: verl 0.9.1's Megatron engine config has no such key",
        drop=("actor_rollout_ref.actor.megatron.grad_offload",),
    ),
    "examples/sapo_trainer/run_qwen3_8b_fsdp.sh": Broken(
        "+actor_rollout_ref.actor.policy_loss.tau_pos / tau_neg: verl's PolicyLossConfig has no such fields (SAPO "
        "reads actor.tau_pos / tau_neg); verl's actor dataclass rejects the block",
        replace={
            "+actor_rollout_ref.actor.policy_loss.tau_pos": "actor_rollout_ref.actor.tau_pos",
            "+actor_rollout_ref.actor.policy_loss.tau_neg": "actor_rollout_ref.actor.tau_neg",
        },
    ),
}

ONE_FORWARDER = "trainer.n_gpus_per_node"
TP, DP = "actor_rollout_ref.rollout.tensor_model_parallel_size", "actor_rollout_ref.rollout.data_parallel_size"
"""The embedded server's sampler runs ``sampling_gpus / TP`` replicas of TP devices (node.py): with its default of one
sampling device, a script's rollout TP above 1 (verl's default is 2) is refused at start-up, the way out being TP=1
(or more sampling GPUs); a rollout DP above 1 likewise (replicas come from ``sampling_gpus / TP``). Expected on the
embedded profile for every script whose effective TP / DP is above 1 (:func:`expected`); Arctic-Platform main sizes
its own engines."""
TRAINER_FIXES = {
    "algorithm.adv_estimator=gae": ["algorithm.adv_estimator=grpo", "critic.enable=false"],
}
"""The way out of each line of verl's remote-backend trainer, as its own words give it ("use a critic-free estimator
such as algorithm.adv_estimator=grpo"). The script's rollout parallelism is never rewritten here: the arctic replica
spans one forwarder, so verl's rollout-world-size line does not arise, and the backend's own TP / DP refusals
(:data:`TP`, :data:`DP`) carry their fixes."""
A = "actor_rollout_ref.actor"
DYN = f"{A}.use_dynamic_bsz"
LOSS, CLIP, AGG = f"{A}.policy_loss.loss_mode", f"{A}.clip_ratio", f"{A}.loss_agg_mode"
IS = "algorithm.rollout_correction"

EXPECTED: dict[str, dict[str, set[str]]] = {
    # script: {profile: the settings refused (the start of each refusal line)}
    "examples/grpo_trainer/run_qwen3_8b_fsdp.sh": {EMBEDDED: {ONE_FORWARDER}, AP_MAIN: {ONE_FORWARDER, DYN}},
    "examples/grpo_trainer/run_qwen3_8b_megatron.sh": {EMBEDDED: {ONE_FORWARDER}, AP_MAIN: {ONE_FORWARDER, DYN}},
    "examples/grpo_trainer/run_qwen3_30b_a3b_megatron.sh": {
        EMBEDDED: {ONE_FORWARDER},
        AP_MAIN: {ONE_FORWARDER, DYN, CLIP},
    },
    "examples/grpo_trainer/run_qwen3_30b_veomni.sh": {
        EMBEDDED: {ONE_FORWARDER, f"{A}.optim.lr_scheduler_type"},
        AP_MAIN: {ONE_FORWARDER, f"{A}.optim.lr_scheduler_type"},
    },
    "examples/grpo_trainer/run_qwen2_5_vl_7b_fsdp.sh": {
        EMBEDDED: {ONE_FORWARDER, "actor_rollout_ref.model.path", "data.train_files"},
        AP_MAIN: {ONE_FORWARDER, DYN, "actor_rollout_ref.model.path", "data.train_files"},
    },
    "examples/gspo_trainer/run_qwen3_8b_fsdp.sh": {
        EMBEDDED: {ONE_FORWARDER},
        AP_MAIN: {ONE_FORWARDER, LOSS, CLIP, AGG, DYN},
    },
    "examples/cispo_trainer/run_qwen3_8b_fsdp.sh": {
        EMBEDDED: {ONE_FORWARDER},
        AP_MAIN: {ONE_FORWARDER, LOSS, CLIP, DYN},
    },
    "examples/gmpo_trainer/run_qwen3_8b_fsdp.sh": {
        EMBEDDED: {ONE_FORWARDER},
        AP_MAIN: {ONE_FORWARDER, LOSS, CLIP, DYN},
    },
    "examples/gpg_trainer/run_qwen3_8b_fsdp.sh": {EMBEDDED: {ONE_FORWARDER}, AP_MAIN: {ONE_FORWARDER, LOSS, DYN}},
    "examples/sapo_trainer/run_qwen3_8b_fsdp.sh": {EMBEDDED: {ONE_FORWARDER}, AP_MAIN: {ONE_FORWARDER, LOSS, DYN}},
    "examples/dppo_trainer/run_qwen3_30b_a3b_megatron.sh": {
        EMBEDDED: {ONE_FORWARDER},
        AP_MAIN: {ONE_FORWARDER, LOSS, CLIP, AGG, DYN},
    },
    "examples/tuning/lora/run_qwen3_8b_fsdp.sh": {
        EMBEDDED: {ONE_FORWARDER},
        AP_MAIN: {ONE_FORWARDER, DYN, "actor_rollout_ref.model.lora_rank"},
    },
    "examples/tuning/lora/run_qwen3_8b_from_adapter_fsdp.sh": {
        EMBEDDED: {ONE_FORWARDER, "actor_rollout_ref.model.lora_adapter_path"},
        AP_MAIN: {ONE_FORWARDER, DYN, "actor_rollout_ref.model.lora_adapter_path"},
    },
    "examples/tuning/lora/run_qwen3_30b_a3b_megatron.sh": {
        EMBEDDED: {ONE_FORWARDER, "actor_rollout_ref.model.lora.rank"},
        AP_MAIN: {ONE_FORWARDER, DYN, "actor_rollout_ref.model.lora.rank"},
    },
    "examples/ppo_trainer/run_qwen3_8b_fsdp.sh": {
        EMBEDDED: {ONE_FORWARDER, "algorithm.adv_estimator=gae"},
        AP_MAIN: {ONE_FORWARDER, "algorithm.adv_estimator=gae", DYN},
    },
    "examples/otb_trainer/run_qwen3_8b_fsdp.sh": {
        EMBEDDED: {ONE_FORWARDER, "algorithm.adv_estimator", f"{A}.calculate_sum_pi_squared"},
        AP_MAIN: {ONE_FORWARDER, "algorithm.adv_estimator", f"{A}.calculate_sum_pi_squared", DYN},
    },
    "examples/reinforce_plus_plus_trainer/run_qwen3_8b_fsdp.sh": {
        EMBEDDED: {ONE_FORWARDER},
        AP_MAIN: {ONE_FORWARDER, DYN},
    },
    "examples/rloo_trainer/run_qwen3_8b_fsdp.sh": {EMBEDDED: {ONE_FORWARDER}, AP_MAIN: {ONE_FORWARDER, DYN}},
    "examples/remax_trainer/run_qwen3_8b_fsdp.sh": {
        EMBEDDED: {ONE_FORWARDER, "algorithm.adv_estimator"},
        AP_MAIN: {ONE_FORWARDER, "algorithm.adv_estimator", DYN},
    },
    "examples/gdpo_trainer/run_qwen3_8b_fsdp.sh": {
        EMBEDDED: {ONE_FORWARDER, "algorithm.adv_estimator"},
        AP_MAIN: {ONE_FORWARDER, "algorithm.adv_estimator", DYN},
    },
    "examples/prefix_grouper/run_qwen3_8b_fsdp.sh": {EMBEDDED: {ONE_FORWARDER}, AP_MAIN: {ONE_FORWARDER, DYN}},
    "examples/rollout_correction/run_qwen2_5_7b_fsdp.sh": {
        EMBEDDED: {ONE_FORWARDER},
        AP_MAIN: {ONE_FORWARDER, f"{IS}.rollout_is", f"{IS}.bypass_mode"},
    },
    "examples/rollout_correction/run_qwen2_5_7b_fsdp_multi_rs.sh": {
        EMBEDDED: {ONE_FORWARDER},
        AP_MAIN: {ONE_FORWARDER, f"{IS}.rollout_is", f"{IS}.rollout_rs", f"{IS}.bypass_mode"},
    },
    "examples/profile/run_qwen2_5_7b_torch_profile.sh": {EMBEDDED: {ONE_FORWARDER}, AP_MAIN: {ONE_FORWARDER, DYN}},
    "examples/router_replay/run_qwen3_30b_a3b_megatron.sh": {
        EMBEDDED: {ONE_FORWARDER, "actor_rollout_ref.rollout.enable_rollout_routing_replay"},
        AP_MAIN: {ONE_FORWARDER, "actor_rollout_ref.rollout.enable_rollout_routing_replay"},
    },
    "verl/experimental/fully_async_policy/shell/dapo_7b_async_retool.sh": {
        EMBEDDED: {ONE_FORWARDER, f"{A}.ulysses_sequence_parallel_size"},
        AP_MAIN: {ONE_FORWARDER, f"{A}.ulysses_sequence_parallel_size", CLIP, DYN},
    },
    "verl/experimental/one_step_off_policy/shell/grpo_0.6b_gsm8k_fsdp2_2_6.sh": {
        EMBEDDED: {ONE_FORWARDER},
        AP_MAIN: {ONE_FORWARDER},
    },
}


def expected(path: str, profile: str, cfg) -> set[str]:
    """:data:`EXPECTED`, plus the rollout-TP refusal (:data:`TP`) on the embedded profile when the composed config's
    TP (the script's, else verl's default) is above 1."""
    out = set(EXPECTED[path][profile])
    if profile == EMBEDDED:
        rollout = cfg.actor_rollout_ref.rollout
        out |= {TP} if int(rollout.tensor_model_parallel_size) > 1 else set()
        out |= {DP} if int(rollout.data_parallel_size) > 1 else set()
    return out


OUTSIDE_THE_CONFIG = {
    "actor_rollout_ref.model.path": "a text-only model",
    "data.train_files": "text-only data",
}
"""Refusals whose way out is not a value of the config (another model, other data): the test applies it itself."""

# ------------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory, tiny_model_dir):
    """A text-only and an image data file, and a model whose config.json reads images (the VLM scripts)."""
    import pandas as pd

    root = tmp_path_factory.mktemp("corpus")
    rows = {"prompt": [[{"role": "user", "content": "1 2 3"}]], "data_source": ["t"], "reward_model": [{"x": 1}]}
    text = root / "text.parquet"
    pd.DataFrame(rows).to_parquet(text)
    images = root / "images.parquet"
    pd.DataFrame({**rows, "images": [[{"bytes": b"\x89PNG"}]]}).to_parquet(images)
    vlm = root / "vlm"
    vlm.mkdir()
    cfg = json.loads((tiny_model_dir / "config.json").read_text())
    (vlm / "config.json").write_text(json.dumps({**cfg, "vision_config": {"depth": 1}}))
    return {"text": text, "images": images, "vlm": vlm, "home": root / "home"}


def _inputs(path: str, files: dict, tiny_model_dir: Path) -> tuple[Path, Path]:
    vision = "vl_" in path.rsplit("/", 1)[-1]
    return (files["vlm"] if vision else tiny_model_dir), (files["images"] if vision else files["text"])


def _repair(overrides: list[str], broken: Broken) -> list[str]:
    out = []
    for o in overrides:
        key, _, value = o.partition("=")
        if key.lstrip("+") in broken.drop:
            continue
        out.append(f"{broken.replace.get(key, key)}={value}")
    return out


def _profile(name: str):
    from arctic_platform.backend_profile import ARCTIC_PLATFORM_MAIN
    from arctic_platform.server.capabilities import server_profile

    return server_profile() if name == EMBEDDED else ARCTIC_PLATFORM_MAIN


def _refusals(cfg, profile):
    """What main_ppo's pre-Ray check says of ``cfg`` (the arctic check against ``profile``): ``(refusals,
    trainer_lines)``."""
    from arctic_platform.integrations.verl.adapter import ArcticConfigError, check_config
    from verl.trainer.ppo.v1.trainer_remote_backend import RemoteBackendConfigError, check_remote_backend_config

    try:
        check_remote_backend_config(cfg, backend_check=lambda c: check_config(c, profile))
    except RemoteBackendConfigError as e:
        arctic = [err for err in e.errors if isinstance(err, ArcticConfigError)]
        refusals = arctic[0].refusals if arctic else []
        others = [str(err) for err in e.errors if not isinstance(err, ArcticConfigError)]
        return refusals, others
    return [], []


def _passes(overrides: list[str], profile) -> None:
    """``compose_check`` (main_ppo's pre-Ray check, verl's validate_config, the client mapping) passes as it is."""
    from arctic_platform.integrations.verl import compose_check

    compose_check.check(overrides, profile=profile)


# ------------------------------------------------------------------------------------------------ the tests


def test_the_corpus_is_recorded_from_a_verl_release():
    assert CORPUS["upstream"] == {
        "repository": "verl-project/verl",
        "tag": "v0.9.0",
        "commit": "483b8a009ba3a97563edee3a19887e4862b8094a",
    }
    assert len(SCRIPTS) >= 20 and set(SCRIPTS) == set(EXPECTED)
    assert all(s["module"].startswith("verl.") and s["overrides"] for s in SCRIPTS.values())


@pytest.mark.parametrize("path", sorted(BROKEN))
def test_scripts_broken_for_stock_verl_too(path, corpus_files, tiny_model_dir):
    """The script's own overrides, without the arctic backend: stock verl 0.9.1 fails on them as well."""
    from hydra.errors import ConfigCompositionException

    from arctic_platform.integrations.verl.options import compose_config
    from arctic_platform.integrations.verl.verl_config import VerlConfigError, actor_config

    model, data = _inputs(path, corpus_files, tiny_model_dir)
    stock = [o for o in tiny(SCRIPTS[path], model, data, corpus_files["home"]) if not o.startswith("remote_backend")]
    stock = [o for o in stock if o != "actor_rollout_ref.rollout.name=arctic"]
    with pytest.raises((ConfigCompositionException, VerlConfigError)) as e:
        actor_config(compose_config(stock))  # composition, then verl's own actor dataclass
    assert BROKEN[path].why.split(":")[0].split(" / ")[0].lstrip("+").rsplit(".", 1)[-1] in str(e.value)


@pytest.mark.parametrize("path", sorted(SCRIPTS))
def test_a_verl_script_passes_or_is_refused_with_a_way_out_that_works(path, corpus_files, tiny_model_dir):
    """On the embedded server's profile and on Arctic-Platform main's: the refusals expected, all at once, one line
    each in the one form; then the refusals' own fixes, applied together, make the config pass."""
    from arctic_platform.integrations.verl.options import compose_config

    script = SCRIPTS[path]
    model, data = _inputs(path, corpus_files, tiny_model_dir)
    overrides = tiny(script, model, data, corpus_files["home"])
    if path in BROKEN:
        overrides = _repair(overrides, BROKEN[path])
    cfg = compose_config(overrides)
    for profile in (EMBEDDED, AP_MAIN):
        prof = _profile(profile)
        refusals, trainer_lines = _refusals(cfg, prof)
        lines = [*refusals, *trainer_lines]
        want = expected(path, profile, cfg)
        got = {next((e for e in want if line.startswith(e)), line) for line in lines}
        assert got == want, (path, profile, [str(r) for r in lines])
        for r in refusals:
            assert "\n" not in r and r.startswith(f"{r.setting}: {r.backend} "), r
            assert r.backend in ("the arctic backend", "verl 0.9.1") or r.backend.startswith((profile, "verl's V1")), r
            assert r.fix or r.setting.split("=")[0] in OUTSIDE_THE_CONFIG, f"no way out to apply: {r}"
        for line in trainer_lines:
            assert "\n" not in line and ": PPOTrainerRemoteBackend " in line and "; " in line, line
        # the way out works: every fix at once (and the tiny text model / data for what is outside the config)
        fixed = [*overrides, *(f for r in refusals for f in r.fix)]
        fixed += [
            f for ln in trainer_lines for start, fix in TRAINER_FIXES.items() if ln.startswith(start) for f in fix
        ]
        if {r.setting.split("=")[0] for r in refusals} & set(OUTSIDE_THE_CONFIG):
            fixed = [o for o in fixed if not o.startswith(("actor_rollout_ref.model.path=", "data.train_files="))]
            fixed += [f"actor_rollout_ref.model.path={tiny_model_dir}", f"data.train_files={corpus_files['text']}"]
        _passes(fixed, prof)


PROBED = (
    "examples/gspo_trainer/run_qwen3_8b_fsdp.sh",
    "examples/tuning/lora/run_qwen3_8b_fsdp.sh",
    "examples/grpo_trainer/run_qwen3_8b_megatron.sh",
)
"""The sample run through ``arctic-verl probe``: a loss of its own with verl's sequence aggregation and clip values
(GSPO), a LoRA adapter, and the Megatron engine's optimizer and schedule mapped onto the backend's."""


@pytest.mark.parametrize("path", PROBED)
def test_a_sample_of_the_passing_scripts_runs_through_the_probe(path, probe_server, corpus_files, tiny_model_dir):
    """The script's effective values (its own, the embedded profile's fixes, the tiny model) through the probe: one
    update, log-probs of both jobs, a generate and a weight sync against a real server."""
    from arctic_platform.integrations.verl.options import compose_config

    from .probing import probe_ok

    model, data = _inputs(path, corpus_files, tiny_model_dir)
    overrides = tiny(SCRIPTS[path], model, data, corpus_files["home"])
    prof = _profile(EMBEDDED)
    cfg = compose_config(overrides)
    refusals, _ = _refusals(cfg, prof)
    assert {r.setting.split("=")[0] for r in refusals} == expected(path, EMBEDDED, cfg), [str(r) for r in refusals]
    probe_ok(probe_server, [*overrides, *(f for r in refusals for f in r.fix)])
