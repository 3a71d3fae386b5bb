# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The verl plugin on Snowflake Cortex (``backend.type=cortex``), against the fake SnowAPI (a fake: the service is
unreachable here; tests/arctic_platform/client/fake_snowapi.py):

* the start-up check: old log-probs exist only from the rollout (bypass mode) or as the current policy's (one
  mini-batch of one epoch), so the rest is refused; the entropy bonus and rollout correction without bypass too;
* start-up without /health or device info (the profile is fixed, the create body from ``CortexConfig.from_env()``);
* the forwarder (verl's real worker class, in this process): ``compute_log_prob`` gives zeros without calling the
  service, ``update_actor`` sends the forward-backward contract with the prompt length and the actor's loss settings,
  old log-probs only in bypass mode, and reads step and forward-backward replies that carry no ``metrics``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from arctic_platform.integrations.verl.options import arctic_options

from .batches import nested, v1_batch

P, R = 16, 8  # data.max_prompt_length / max_response_length of the arctic test config
CORTEX = [
    "remote_backend.arctic.backend.type=cortex",
    "remote_backend.arctic.log_prob_gpus=0",
    "actor_rollout_ref.actor.use_kl_loss=false",
    "actor_rollout_ref.actor.entropy_coeff=0",
]
BYPASS = ["actor_rollout_ref.rollout.calculate_log_probs=true", "++algorithm.rollout_correction.bypass_mode=true"]


def _fake_mod():
    path = Path(__file__).parents[2] / "client" / "fake_snowapi.py"
    name = "arctic_test_fake_snowapi"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def _refusals(cfg) -> list[str]:
    from arctic_platform.backend_profile import CORTEX as PROFILE
    from arctic_platform.integrations.verl.adapter import settings_refusals

    return settings_refusals(cfg, arctic_options(cfg), PROFILE)


def test_cortex_refuses_what_needs_old_log_probs_unless_they_come_from_the_rollout(compose_arctic):
    base = compose_arctic(CORTEX)
    assert _refusals(base) == []
    for extra, words in (
        (
            ["data.train_batch_size=4"],
            "ppo_mini_batch_size=2, data.train_batch_size=4 (several optimizer steps a training step): Snowflake "
            "Cortex has no /forward",
        ),
        (["actor_rollout_ref.actor.ppo_epochs=2"], "ppo_epochs=2: Snowflake Cortex has no /forward"),
        (["actor_rollout_ref.actor.entropy_coeff=0.01"], "entropy_coeff=0.01: Snowflake Cortex estimates entropy"),
        (
            ["++algorithm.rollout_correction.rollout_rs=token_k1"],
            "rollout_rs='token_k1': Snowflake Cortex cannot recompute",
        ),
        (["actor_rollout_ref.actor.use_kl_loss=true"], "use_kl_loss=True: Snowflake Cortex has no /forward"),
    ):
        got = _refusals(compose_arctic([*CORTEX, *extra]))
        assert any(words in r for r in got), (extra, got)
        assert all("Snowflake Cortex" in r for r in got)
    # old log-probs from the rollout: several mini-batches and epochs are exact again
    ok = compose_arctic([*CORTEX, *BYPASS, "data.train_batch_size=4", "actor_rollout_ref.actor.ppo_epochs=2"])
    assert _refusals(ok) == []


def test_calculate_log_probs_without_bypass_notes_what_verl_compares(compose_arctic):
    from arctic_platform.backend_profile import CORTEX as PROFILE
    from arctic_platform.integrations.verl.adapter import settings_notes

    cfg = compose_arctic([*CORTEX, "actor_rollout_ref.rollout.calculate_log_probs=true"])
    notes = settings_notes(cfg, arctic_options(cfg), PROFILE)
    assert any("old log-probs are zeros the update never reads" in n for n in notes), notes


@pytest.fixture
def cortex_env(monkeypatch):
    """A fake SnowAPI (canned results, a job that is running at once) and the ARCTIC_CORTEX_* environment that
    points ``CortexConfig.from_env()`` at it."""
    with _fake_mod().FakeSnowAPI(job_script=("running",), polls_in_flight=0) as fake:
        monkeypatch.setenv("ARCTIC_CORTEX_BASE_URL", fake.url)
        monkeypatch.setenv("ARCTIC_CORTEX_DATABASE", "DB")
        monkeypatch.setenv("ARCTIC_CORTEX_SCHEMA", "SCH")
        for k, v in {"WORLD_SIZE": "1", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}.items():
            monkeypatch.setenv(k, v)  # verl's Worker reads them: the forwarder runs in this process here
        yield fake


def _forwarder(compose_arctic, tiny_model, tmp_path, extra=()):
    from arctic_platform.integrations.verl.adapter import ArcticRemoteBackend
    from arctic_platform.integrations.verl.v1.worker import ArcticV1ActorRolloutRefWorker

    cfg = compose_arctic(
        [*CORTEX, *extra, f"actor_rollout_ref.model.path={tiny_model}", f"trainer.default_local_dir={tmp_path}"]
    )
    backend = ArcticRemoteBackend.from_config(cfg)
    w = ArcticV1ActorRolloutRefWorker(
        cfg.actor_rollout_ref, "actor_rollout_ref", main_config=cfg, backend_handle=backend.reconnect_handle()
    )
    w.init_model()
    return backend, w


def _update_td(prompts, responses):
    return v1_batch(
        prompts,
        responses,
        extra={"advantages": nested([[1.0] * len(r) for r in responses], torch.float32)},
        non_tensor={
            "temperature": 0.7, "calculate_entropy": False, "mini_batch_size": 2, "global_batch_size": 2,
            "epochs": 1, "seed": 1, "dataloader_kwargs": {"shuffle": False},
        },
    )  # fmt: skip


def test_cortex_start_up_log_probs_and_update(cortex_env, compose_arctic, tiny_model, tmp_path):
    fake = cortex_env
    backend, w = _forwarder(compose_arctic, tiny_model, tmp_path)
    try:
        routes = {e.route for e in fake.exchanges}
        assert routes == {"create", "get_job"}  # no /health, no device probe: the profile is fixed
        assert backend.profile.name == "Snowflake Cortex" and backend.num_gpus() == 2
        body = fake.calls("create")[0].json()["sub_job_configs"]
        assert [s["job_type"] for s in body] == ["sampling", "training"]
        assert body[1]["training_config"]["train_batch_size"] == 4  # ppo_mini_batch_size x rollout.n
        assert body[1]["training_config"]["optimizer"]["lr"] == 0.01

        prompts, responses = [[5, 6, 7], list(range(20, 36))], [[8, 9], list(range(40, 48))]
        lp = asyncio.run(w.compute_log_prob(v1_batch(prompts, responses, non_tensor={"calculate_entropy": True})))
        assert [x.abs().sum().item() for x in lp["log_probs"].unbind()] == [0.0, 0.0]
        assert [len(x) for x in lp["entropy"].unbind()] == [5, 24]
        n = len(fake.exchanges)
        assert {e.route for e in fake.exchanges[n - 1 :]} <= {"get_job"}  # zeros: no forward was sent

        out = asyncio.run(w.update_actor(_update_td(prompts, responses)))
        metrics = out["metrics"]
        (op, frame), = [(op, b) for op, b in fake.backend.calls if op == "forward-backward"]  # fmt: skip
        ctx, cfg = frame["context"], frame["processing"]["config"]
        assert (ctx["prompt_length"], ctx["response_length"], ctx["temperature"]) == (P, R, 0.7)
        assert "old_log_probs_shifted" not in ctx  # the zeros are not sent: the backend uses the current policy's
        assert (cfg["eps_clip"], cfg["eps_clip_higher"], cfg["c_clip"]) == (0.2, 0.2, 3.0)
        assert (cfg["global_batch_size"], cfg["batch_num_tokens"], cfg["dp_size"]) == (2, 10, 1)
        assert frame["processing"]["loss_fn"] == "grpo"
        # row 0's first response token (column P) is predicted at column P-1: the shifted loss mask starts there
        assert ctx["loss_mask"][0, P - 2 : P + 2].tolist() == [0.0, 1.0, 1.0, 0.0]
        (step,) = fake.calls("step")
        assert step.json() == {"learning_rate": 0.01}
        (fb,) = [r.result for r in fake.requests.values() if r.op == "forward-backward"]
        assert metrics["loss"] == [fb["avg_loss"]]  # no metrics in the reply: the loss is its avg_loss
        assert metrics["lr"] == [0.01] and "grad_norm" not in metrics  # Cortex's step reports no grad norm

        asyncio.run(w.update_weights(global_steps=1))
        ws = fake.calls("operation")[-1].json()
        assert ws["operation_type"] == "weight-sync" and "policy_version" not in ws["payload"]
        assert w.policy_version == 1
    finally:
        backend.destroy()
    assert len(fake.calls("cancel")) == 1


def test_bypass_mode_sends_the_rollouts_old_log_probs(cortex_env, compose_arctic, tiny_model, tmp_path):
    fake = cortex_env
    backend, w = _forwarder(compose_arctic, tiny_model, tmp_path, extra=BYPASS)
    try:
        prompts, responses = [[5, 6, 7], [9, 10]], [[8, 9], [11, 12, 13]]
        td = _update_td(prompts, responses)
        old = [r.clone() for r in td["old_log_probs"].unbind()]
        asyncio.run(w.update_actor(td))
        frame = next(b for op, b in fake.backend.calls if op == "forward-backward")
        shifted = frame["context"]["old_log_probs_shifted"]
        for row, lp in enumerate(old):
            torch.testing.assert_close(shifted[row, P - 1 : P - 1 + len(lp)], lp)
    finally:
        backend.destroy()


def test_the_probe_runs_on_cortex(cortex_env, arctic_overrides, tiny_model, tmp_path):
    """``arctic-verl probe`` with backend.type=cortex: no GET /health (SnowAPI has none; the profile is fixed), then
    the capability check, the three-job start, the forwarder's calls and the teardown, against the fake SnowAPI."""
    from arctic_platform.integrations.verl.probe import probe

    fake = cortex_env
    out: list[str] = []
    overrides = [*arctic_overrides, *CORTEX, f"actor_rollout_ref.model.path={tiny_model}"]
    overrides.append(f"trainer.default_local_dir={tmp_path}")
    rc = probe(overrides, out=out.append)
    text = "\n".join(out)
    assert rc == 0, text
    assert "ok   connect (Cortex has no /health: its fixed profile)" in text and "profile: Snowflake Cortex" in text
    assert "capability check: 0 refusal(s) by Snowflake Cortex" in text
    assert "ok   update_actor: POST /forward-backward + POST /step" in text
    assert "ok   update_weights: weight sync training -> sampling" in text and "probe: OK" in text
    assert "health" not in {e.route for e in fake.exchanges}
    assert len(fake.calls("cancel")) == 1  # the probe's teardown
