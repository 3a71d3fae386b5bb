# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""verl's own GRPO example (``examples/grpo_trainer/run_qwen3_8b_fsdp.sh`` of verl v0.9.0, as recorded in the
corpus, ``tests/arctic_platform/integrations/verl/verl_v0.9.0_examples.json``) trains a real step on the arctic
backend: ``python -m verl.trainer.main_ppo`` with the script's own overrides, what a user switching to the arctic
backend adds (``remote_backend=arctic actor_rollout_ref.rollout.name=arctic``), the way out of every start-up
refusal as the refusals give it, and only what a 2-core CPU machine needs on top (:data:`CPU_BUDGET`: a tiny model,
tiny data and batch, one step, Ray's CPUs). The corpus test checks every script up to start-up and a sample
through the probe; this is the step a user would run next.

Every other value is the script's, so the step runs its dynamic batching (``use_dynamic_bsz`` with its token
budgets), its KL loss against the reference job (``use_kl_loss``, ``low_var_kl``), its group size (``rollout.n=5``),
its learning rate and its batch balancing.
"""

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = "examples/grpo_trainer/run_qwen3_8b_fsdp.sh"
CORPUS_TEST = Path(__file__).parents[1] / "arctic_platform" / "integrations" / "verl" / "test_verl_corpus_on_cpu.py"

CPU_BUDGET = {
    "data.train_batch_size": 4,  # the script's 1024 prompts x 5 samples would take hours on 2 cores
    "actor_rollout_ref.actor.ppo_mini_batch_size": 4,  # the script's 256: at most the batch
    "trainer.total_training_steps": 1,
    "trainer.val_before_train": "false",
    "trainer.test_freq": -1,
    "trainer.save_freq": -1,
    "trainer.logger": "[console,file]",  # the script's wandb needs an account
    "data.filter_overlong_prompts": "false",  # the tiny data has no long prompt: skip the tokenizing pass
}
"""What replaces a value of the script on this machine, and why. Model, data and sequence lengths are the corpus's
rewrite (``tiny``); the arctic refusals' ways out are applied as given."""


def _corpus():
    spec = importlib.util.spec_from_file_location("arctic_corpus_test", CORPUS_TEST)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses resolve their module by name
    spec.loader.exec_module(mod)
    return mod


def _key(override: str) -> str:
    return override.partition("=")[0].lstrip("+")


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_verls_grpo_example_trains_a_step_on_the_arctic_backend(tmp_path):
    from arctic_platform import smoke
    from arctic_platform.fixtures import make_tiny_model
    from arctic_platform.integrations.verl.options import compose_config
    from arctic_platform.server.capabilities import server_profile

    corpus = _corpus()
    model = make_tiny_model(tmp_path / "model", seed=0)
    train, val = smoke.task_module().write_dataset(tmp_path / "data", seed=0)
    script = corpus.tiny(corpus.SCRIPTS[SCRIPT], model, train, tmp_path / "home")

    # the start-up check on the embedded server's profile, and the ways out it gives
    refusals, trainer_lines = corpus._refusals(compose_config(script), server_profile())
    assert {r.setting.split("=")[0] for r in refusals} == {corpus.ONE_FORWARDER, corpus.TP}, refusals
    assert trainer_lines == []
    fixes = [f for r in refusals for f in r.fix]

    # the smoke launcher's command for this machine (Ray's CPUs, TransferQueue's units, the reward function, the
    # server's log), then the script's values over it, then the fixes, then the CPU budget
    args = argparse.Namespace(
        batch=4, n=5, lr=1e-6, poll_interval=0.1, num_cpus=8, seed=0, steps=1, overrides=[], sampling_engine="torch"
    )
    base = smoke.main_ppo_command(tmp_path, model, train, val, args)
    python, main = base[:3], base[3:]
    merged: dict[str, str] = {}
    budget = [*(f"{k}={v}" for k, v in CPU_BUDGET.items()), f"data.val_files={val}"]  # tiny() gives train for both
    for o in [*main, *script, *fixes, *budget]:
        merged.pop(_key(o), None)
        merged[_key(o)] = o
    cmd = [*python, *merged.values()]
    # every value of the script not in the budget or a fix reaches main_ppo as the script has it
    replaced = {_key(o) for o in [*fixes, *budget]}
    lost = [o for o in script if _key(o) not in replaced and o not in cmd]
    assert not lost, lost
    assert "actor_rollout_ref.actor.use_dynamic_bsz=True" in cmd and "actor_rollout_ref.rollout.n=5" in cmd

    metrics = tmp_path / "verl_metrics.jsonl"
    env = {**os.environ, "VERL_FILE_LOGGER_PATH": str(metrics), "HYDRA_FULL_ERROR": "1", "RAY_DEDUP_LOGS": "0"}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1100, env=env, cwd=tmp_path)
    assert r.returncode == 0, (r.stdout + r.stderr)[-5000:]
    steps = smoke.read_steps(metrics)
    assert sorted(steps) == [1], sorted(steps)
    m = steps[1]
    assert m["actor/grad_norm"] > 0 and "actor/pg_loss" in m
    assert "actor/kl_loss" in m  # the script's use_kl_loss: the reference job's log-probs reached the loss
    assert m["actor/policy_version"] == 0
    server_log = (tmp_path / "arctic_server.log").read_text()
    assert "sampling engine: torch" in server_log
    assert "destroy: " in server_log  # the run's end tore the backend's jobs down
