# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Arctic-Platform's own verl scripts (the ones our users run today with its plugin) on this wheel, as they are.

The corpus: the 7 launch scripts of Arctic-Platform's verl plugin (``arctic_platform_scripts.json`` next to this
file: the ``python3 -m verl.trainer.main_ppo`` argv each one runs and its environment, recorded by
``tools/verl_corpus.py --preset arctic-platform`` from main and the V1 branch). Each is rewritten to a tiny model and
data (nothing else of it changes: its ``remote_backend.*`` keys, its ``trainer.use_legacy_worker_impl``, its
parallelism) and run through what ``main_ppo`` runs before Ray starts, on the profile it targets (Arctic-Platform
main's; Snowflake Cortex for the Cortex script) and on the embedded server's: it passes, or is refused with every
refusal at once, naming the key the script wrote. Then the refusals' own fixes, applied together, make it pass, and
a sample runs through ``arctic-verl probe`` against a real embedded server.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

CORPUS = json.loads((Path(__file__).parent / "arctic_platform_scripts.json").read_text())
SCRIPTS = {s["path"].rsplit("/", 1)[-1]: s for s in CORPUS["scripts"]}
EMBEDDED, AP_MAIN, CORTEX = "the embedded arctic-verl server", "Arctic-Platform main", "Snowflake Cortex"
LENGTHS = {"data.max_prompt_length": 32, "data.max_response_length": 16}

ATTN = "actor_rollout_ref.model.override_config.attn_implementation"
LIGER = "actor_rollout_ref.model.use_liger"
ZORRO = "remote_backend.train.zorro_train.enable"
LOGITS = "remote_backend.train.logits.optimization"
FCA = "remote_backend.rollout.zorro_inference.enable"
SPEC = "remote_backend.rollout.speculative_decoding.model"
HORIZON = "trainer.total_training_steps"
WARMUP = "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio"
DYN = "actor_rollout_ref.actor.use_dynamic_bsz"
SAMPLING_GPUS, SAMPLING_TP = "remote_backend.sampling_gpus=8", "remote_backend.sampling_tp_size=4"

# script: {profile: the settings refused (the start of each line)}; the target profile first
EXPECTED: dict[str, dict[str, set[str]]] = {
    "run_gsm8k_grpo_arl_v1.sh": {AP_MAIN: set(), EMBEDDED: {ATTN, ZORRO}},
    # Cortex keeps checkpoints in its own store (no shared filesystem) and has no token budgets
    "run_gsm8k_grpo_cortex.sh": {CORTEX: {"trainer.save_freq", DYN}, EMBEDDED: {ATTN}},
    "run_gsm8k_grpo_arl.sh": {AP_MAIN: set(), EMBEDDED: {ATTN, ZORRO}},
    "run_bird_grpo_arl.sh": {AP_MAIN: set(), EMBEDDED: {ATTN, ZORRO}},
    "run_qwen3_1.7b_gsm8k_grpo_arl.sh": {AP_MAIN: {f"{HORIZON}=None"}, EMBEDDED: {LIGER, ATTN, ZORRO, LOGITS}},
    # the 32B recipes sample on 8 GPUs at TP 4: the test suite's embedded sampler is the torch loop
    # (ARCTIC_SAMPLING_ENGINE=torch, tests/conftest.py), one replica on one device, named in their keys
    "run_qwen3_32b_bird_grpo_arl_zorro_yes.sh": {
        AP_MAIN: {f"{HORIZON}=None"},
        EMBEDDED: {LIGER, ATTN, ZORRO, LOGITS, FCA, SPEC, SAMPLING_GPUS, SAMPLING_TP},
    },
    "run_qwen3_32b_longcontext_grpo_arl.sh": {
        AP_MAIN: {f"{HORIZON}=None", WARMUP},
        EMBEDDED: {LIGER, ATTN, ZORRO, LOGITS, FCA, SPEC, SAMPLING_GPUS, SAMPLING_TP},
    },
}
OUTSIDE_THE_CONFIG = {f"{HORIZON}=None": [f"{HORIZON}=4"]}
"""A refusal whose way out is a value only the user knows (the run's length): the test picks one."""


def tiny(script: dict, model: Path, data: Path, work: Path) -> list[str]:
    """The script's overrides with a tiny model, data, lengths and checkpoint folder; everything else as it is."""
    out = []
    for o in script["overrides"]:
        o = o.replace("${AP_REPO}", str(work / "Arctic-Platform")).replace("${HOME}", str(work))
        key, _, value = o.partition("=")
        bare = key.lstrip("+~")
        if bare == "actor_rollout_ref.model.path":
            value = str(model)
        elif bare in ("data.train_files", "data.val_files"):
            value = str(data)
        elif bare in LENGTHS:
            value = str(min(int(value), LENGTHS[bare]))
        elif bare == "trainer.default_local_dir":
            value = str(work / "ckpt")
        out.append(f"{key}={value}")
    return out


def _profile(name: str):
    from arctic_platform.backend_profile import ARCTIC_PLATFORM_MAIN
    from arctic_platform.backend_profile import CORTEX as CORTEX_PROFILE
    from arctic_platform.server.capabilities import server_profile

    return {EMBEDDED: server_profile, AP_MAIN: lambda: ARCTIC_PLATFORM_MAIN, CORTEX: lambda: CORTEX_PROFILE}[name]()


@pytest.fixture
def script_env(monkeypatch):
    """The script's own backend switch (``ARCTIC_BACKEND``) and, for Cortex, an address the check never dials."""

    def apply(script: dict, profile: str) -> None:
        monkeypatch.delenv("ARCTIC_BACKEND", raising=False)
        if profile == CORTEX:
            assert script["env"].get("ARCTIC_BACKEND") == "cortex"
            monkeypatch.setenv("ARCTIC_BACKEND", "cortex")
            monkeypatch.setenv("ARCTIC_CORTEX_BASE_URL", "http://127.0.0.1:9")  # a fake address: nothing is sent
            monkeypatch.setenv("CORTEX_PAT", "not-a-token")

    return apply


def _refusals(overrides: list[str], profile):
    """main_ppo's pre-Ray check of the composed script against ``profile``: ``(refusals, other lines, log)``."""
    from arctic_platform.integrations.verl.adapter import ArcticConfigError, check_config
    from arctic_platform.integrations.verl.options import compose_config
    from verl.trainer.ppo.v1.trainer_remote_backend import RemoteBackendConfigError, check_remote_backend_config

    cfg = compose_config(overrides)
    try:
        check_remote_backend_config(cfg, backend_check=lambda c: check_config(c, profile))
    except RemoteBackendConfigError as e:
        arctic = [err for err in e.errors if isinstance(err, ArcticConfigError)]
        return (arctic[0].refusals if arctic else []), [
            str(x) for x in e.errors if not isinstance(x, ArcticConfigError)
        ]
    return [], []


def test_the_corpus_is_recorded_from_arctic_platform():
    assert CORPUS["upstream"]["repository"] == "Snowflake-AI-Research/Arctic-Platform"
    assert set(CORPUS["upstream"]["branches"]) == {"main", "karthik/verl-v1-plugin"}
    assert set(SCRIPTS) == set(EXPECTED) and len(SCRIPTS) == 7
    for s in SCRIPTS.values():
        assert s["module"] == "verl.trainer.main_ppo" and "remote_backend=arctic" in s["overrides"]
        assert any(o.startswith("remote_backend.") for o in s["overrides"])  # their plugin's keys, as written


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_their_script_as_it_is_passes_or_is_refused_with_a_way_out_that_works(
    name, tiny_model_dir, tmp_path, script_env, caplog
):
    """Their keys as they are: translated (one line each, ``their key -> our key``) or refused at once, naming the
    key the script wrote; the fixes of all refusals together make the script pass."""
    from arctic_platform.integrations.verl import compose_check

    script = SCRIPTS[name]
    data = tmp_path / "data.parquet"
    _write_data(data)
    overrides = tiny(script, tiny_model_dir, data, tmp_path)
    for profile, want in EXPECTED[name].items():
        script_env(script, profile)
        prof = _profile(profile)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="arctic_platform.integrations.verl.adapter"):
            refusals, others = _refusals(overrides, prof)
        assert not others, others
        got = {next((w for w in want if r.startswith(w)), str(r)) for r in refusals}
        assert got == want, (name, profile, [str(r) for r in refusals])
        for r in refusals:
            assert "remote_backend.arctic." not in r.setting or r.setting.split("=")[0] not in _their_paths(script), r
            assert r.fix or _outside(r), f"no way out to apply: {r}"
        # every key of theirs the script wrote is translated, one line each, or refused by name
        log = caplog.text
        for key in _their_paths(script):
            assert f"{key}=" in log and " -> " in log or any(r.setting.startswith(key) for r in refusals), key
        fixed = [*overrides, *(f for r in refusals for f in (r.fix or _outside(r)))]
        compose_check.check(fixed, profile=prof)  # passes: main_ppo's check, verl's validate_config, the client


def _outside(refusal) -> list[str]:
    return next((fix for start, fix in OUTSIDE_THE_CONFIG.items() if refusal.setting.startswith(start)), [])


def _their_paths(script: dict) -> list[str]:
    return [
        o.split("=", 1)[0].lstrip("+")
        for o in script["overrides"]
        if o.startswith("remote_backend.") and not o.startswith("remote_backend.arctic.")
    ]


def _write_data(path: Path) -> None:
    import pandas as pd

    rows = {"prompt": [[{"role": "user", "content": "1 2 3"}]], "data_source": ["t"], "reward_model": [{"x": 1}]}
    pd.DataFrame(rows).to_parquet(path)


# ------------------------------------------------------------------------------------------------ their keys


def _check(overrides: list[str], tiny_model_dir: Path, profile: str = EMBEDDED):
    base = [
        "remote_backend=arctic",
        "actor_rollout_ref.rollout.name=arctic",
        "algorithm.adv_estimator=grpo",
        f"actor_rollout_ref.model.path={tiny_model_dir}",
        "trainer.n_gpus_per_node=1",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    ]
    from arctic_platform.integrations.verl.options import compose_config

    cfg = compose_config([*base, *overrides])
    refusals, _ = _refusals([*base, *overrides], _profile(profile))
    return cfg, refusals


def test_a_misspelled_or_unknown_key_of_theirs_is_refused_naming_it(tiny_model_dir):
    _, refusals = _check(["+remote_backend.colocat=true", "+remote_backend.train.zorro.enable=true"], tiny_model_dir)
    lines = {r.setting.split("=")[0]: r for r in refusals if r.setting.startswith("remote_backend")}
    assert set(lines) == {"remote_backend.colocat", "remote_backend.train.zorro"}, refusals
    assert "did you mean remote_backend.colocate?" in lines["remote_backend.colocat"]
    assert lines["remote_backend.colocat"].fix == ("~remote_backend.colocat",)


def test_their_defaults_are_stated_where_the_script_relies_on_them(tiny_model_dir, caplog):
    from arctic_platform.integrations.verl.adapter import check_config
    from arctic_platform.integrations.verl.options import compose_config

    cfg = compose_config(
        ["remote_backend=arctic", f"actor_rollout_ref.model.path={tiny_model_dir}", "remote_backend.training_gpus=2"]
    )
    from arctic_platform.integrations.verl.platform_keys import translate

    t = translate(cfg)
    assert not t.refusals, t.refusals
    text = "\n".join(t.lines)
    assert "remote_backend.training_gpus=2 -> remote_backend.arctic.training_gpus=2" in text
    for theirs, ours in (
        ("remote_backend.colocate not set: Arctic-Platform's verl plugin's default true", "arctic.colocate=true"),
        ("zero_optimization.stage not set: Arctic-Platform's verl plugin's default 0", "zero_optimization.stage=0"),
        ("remote_backend.train.determinism.seed not set", "remote_backend.arctic.seed=42"),
        ("remote_backend.sampling_tp_size not set", "tensor_model_parallel_size=1"),
    ):
        assert any(theirs in line and ours in line for line in t.lines), (theirs, text)
    assert cfg.remote_backend.arctic.colocate is True and cfg.remote_backend.arctic.training_gpus == 2
    assert cfg.actor_rollout_ref.rollout.tensor_model_parallel_size == 1
    assert not translate(cfg).refusals and cfg.remote_backend.arctic.training_gpus == 2  # idempotent
    # without a key of theirs nothing changes (ours: colocate off, stage 3)
    plain = compose_config(["remote_backend=arctic", f"actor_rollout_ref.model.path={tiny_model_dir}"])
    assert translate(plain).lines == [] and plain.remote_backend.arctic.colocate is False
    # on Arctic-Platform main their ZeRO 0 is refused with the way out in their spelling
    with pytest.raises(ValueError) as e:
        check_config(cfg, _profile(AP_MAIN))
    [r] = [r for r in e.value.refusals if "stage" in r.setting]
    assert r.setting == "remote_backend.train.deepspeed.zero_optimization.stage=0", r
    assert r.fix == ("remote_backend.train.deepspeed.zero_optimization.stage=3",)


def test_hydras_plus_form_of_their_keys_is_translated_too(tiny_model_dir):
    """``+remote_backend.colocate=True`` (what Hydra's message told users to write) means the same as without ``+``."""
    from arctic_platform.integrations.verl.platform_keys import translate

    cfg, _ = _check(["+remote_backend.colocate=true", "+remote_backend.training_gpus=2"], tiny_model_dir)
    t = translate(cfg)
    assert (
        not t.refusals and cfg.remote_backend.arctic.colocate is True and cfg.remote_backend.arctic.training_gpus == 2
    )


@pytest.mark.parametrize("profile", [EMBEDDED, CORTEX])
def test_zorro_training_is_refused_at_start_up_where_the_backend_has_none(profile, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("ARCTIC_CORTEX_BASE_URL", "http://127.0.0.1:9")  # a fake address: nothing is sent
    monkeypatch.setenv("CORTEX_PAT", "not-a-token")
    extra = ["remote_backend.arctic.backend.type=cortex"] if profile == CORTEX else []
    _, refusals = _check(["remote_backend.train.zorro_train.enable=true", *extra], tiny_model_dir, profile)
    [r] = [r for r in refusals if "zorro" in r.setting]
    assert r.setting == "remote_backend.train.zorro_train.enable=True" and "no ZoRRo training path" in r, r
    assert r.fix == ("remote_backend.train.zorro_train.enable=false",)


def test_two_spellings_that_disagree_are_refused(tiny_model_dir):
    _, refusals = _check(["remote_backend.training_gpus=2", "remote_backend.arctic.training_gpus=3"], tiny_model_dir)
    [r] = [r for r in refusals if "training_gpus" in r.setting]
    assert r.setting == "remote_backend.training_gpus=2, remote_backend.arctic.training_gpus=3", r
    assert "disagree" in r


def test_comms_protocol_http_is_refused_with_the_exact_way_out(tiny_model_dir):
    _, refusals = _check(["remote_backend.comms.protocol=http"], tiny_model_dir)
    [r] = [r for r in refusals if r.setting.startswith("remote_backend.comms.protocol")]
    assert "python -m arctic_platform.common.http_server --port 7000" in r.way_out
    assert "remote_backend.arctic.backend.type=onprem remote_backend.arctic.backend.url=http://localhost:7000" in r
    assert r.fix == ("remote_backend.comms.protocol=ray",)
    _, refusals = _check(["remote_backend.comms.protocol=ray"], tiny_model_dir)
    assert not [r for r in refusals if "protocol" in r.setting], refusals
    # with a server URL, http is that server
    url = ["remote_backend.arctic.backend.type=onprem", "remote_backend.arctic.backend.url=http://127.0.0.1:9"]
    cfg, _ = _check(["remote_backend.comms.protocol=http", *url], tiny_model_dir, AP_MAIN)
    from arctic_platform.integrations.verl.platform_keys import translate

    assert not translate(cfg).refusals


@pytest.mark.parametrize("value, refused", [("disable", False), ("enable", True), ("auto", True)])
def test_the_verl_forks_legacy_worker_switch(value, refused, tiny_model_dir):
    """``trainer.use_legacy_worker_impl`` composes in an arctic run; ``disable`` (what verl 0.9.1 does) is accepted,
    anything else refused with ``disable`` as the way out."""
    cfg, refusals = _check([f"trainer.use_legacy_worker_impl={value}"], tiny_model_dir)
    assert cfg.trainer.use_legacy_worker_impl == value
    mine = [r for r in refusals if r.setting.startswith("trainer.use_legacy_worker_impl")]
    assert bool(mine) is refused, refusals
    if refused:
        assert mine[0].backend == "verl 0.9.1" and mine[0].fix == ("trainer.use_legacy_worker_impl=disable",)


# ------------------------------------------------------------------------------------------------ the probe

PROBED = ("run_gsm8k_grpo_arl_v1.sh", "run_qwen3_1.7b_gsm8k_grpo_arl.sh")
"""The V1 example (ZoRRo, colocated, CUDA IPC) and the 1.7B recipe (ZoRRo, logits=memory, Liger, dynamic batch)."""


@pytest.mark.parametrize("name", PROBED)
def test_their_script_with_the_ways_out_runs_through_the_probe(name, probe_server, tiny_model_dir, script_env):
    """The script as it is plus the embedded profile's fixes: one update, log-probs, a generate, a weight sync."""
    from .probing import probe_ok

    script_env(SCRIPTS[name], EMBEDDED)
    data = probe_server.work / "data.parquet"
    _write_data(data)
    overrides = tiny(SCRIPTS[name], tiny_model_dir, data, probe_server.work)
    refusals, _ = _refusals(overrides, _profile(EMBEDDED))
    # a running server, not one the plugin starts: comms.protocol's own way out (remove it)
    probe_ok(probe_server, [*overrides, *(f for r in refusals for f in r.fix), "remote_backend.comms.protocol=null"])
