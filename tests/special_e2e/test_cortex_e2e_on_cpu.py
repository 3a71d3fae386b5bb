# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Two steps of the real ``python -m verl.trainer.main_ppo`` (V1, GRPO, remote_backend=arctic) on the **cortex**
backend, selected as a user would (``ARCTIC_BACKEND=cortex`` + ``ARCTIC_CORTEX_BASE_URL``/``_DATABASE``/``_SCHEMA``,
read by ``CortexConfig.from_env()``).

Snowflake Cortex is unreachable here, so the SnowAPI it talks to is the FAKE of
``tests/arctic_platform/client/fake_snowapi.py``, run as a process on 127.0.0.1 that fronts a real embedded Arctic RL
server (torch sampling engine): the forward-backward contract goes back into verl's loss on real weights, so the
update trains with real gradients. The fake loses the first forward-backward reply after running it and answers
the first step with a 503; results travel as result chunks. Its record (every exchange, every execution, what the
embedded engine reported) is what this test reads besides verl's own metrics.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

FAKE = Path(__file__).resolve().parents[1] / "arctic_platform" / "client" / "fake_snowapi.py"
MAX_PROMPT = 32  # smoke.main_ppo_command's data.max_prompt_length


def _wait_port(proc: subprocess.Popen, port_file: Path, log: Path, timeout: float = 120.0) -> int:
    deadline = time.monotonic() + timeout
    while not port_file.exists():
        assert proc.poll() is None, f"exited early ({proc.returncode}):\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no port within {timeout}s:\n{log.read_text()[-3000:]}"
        time.sleep(0.05)
    return int(port_file.read_text())


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def test_two_verl_steps_on_the_cortex_backend(tmp_path):
    from arctic_platform import fixtures, smoke
    from arctic_platform.integrations.verl.tasks import repeat_digit

    out = tmp_path / "cortex"
    out.mkdir()
    model = fixtures.make_tiny_model(out / "model", seed=0)
    train, val = repeat_digit.write_dataset(out / "data", n_val=4)
    procs = []
    try:
        server_log = out / "server.log"
        with open(server_log, "wb") as log:
            server = subprocess.Popen(
                [sys.executable, "-m", "arctic_platform.server", "--port", "0", "--port-file", str(out / "server.port"),
                 "--training-gpus", "1", "--sampling-gpus", "1", "--log-prob-gpus", "0", "--device", "cpu",
                 "--sampling-engine", "torch", "--max-seq-len", "40", "--exit-with-parent"],
                stdout=log, stderr=subprocess.STDOUT, cwd=out, start_new_session=True,
            )  # fmt: skip
        procs.append(server)
        url = f"http://127.0.0.1:{_wait_port(server, out / 'server.port', server_log)}"
        fake_log, record = out / "fake.log", out / "fake.jsonl"
        with open(fake_log, "wb") as log:
            fake = subprocess.Popen(
                [sys.executable, str(FAKE), "--backend-url", url, "--port-file", str(out / "fake.port"),
                 "--record", str(record), "--result-form", "chunks", "--result-chunk-bytes", "12000",
                 "--fault", "forward-backward:drop_after_body", "--fault", "step:status:503"],
                stdout=log, stderr=subprocess.STDOUT, cwd=out, start_new_session=True,
            )  # fmt: skip
        procs.append(fake)
        fake_url = f"http://127.0.0.1:{_wait_port(fake, out / 'fake.port', fake_log)}"

        args = argparse.Namespace(
            batch=4, n=4, lr=5e-3, poll_interval=0.1, num_cpus=8, seed=0, steps=2,
            overrides=["remote_backend.arctic.log_prob_gpus=0"],
        )  # fmt: skip
        metrics_file = out / "metrics.jsonl"
        env = {
            **os.environ,
            "ARCTIC_BACKEND": "cortex",
            "ARCTIC_CORTEX_BASE_URL": fake_url,
            "ARCTIC_CORTEX_DATABASE": "DB",
            "ARCTIC_CORTEX_SCHEMA": "SCH",
            "VERL_FILE_LOGGER_PATH": str(metrics_file),
            "HYDRA_FULL_ERROR": "1",
        }
        r = subprocess.run(
            smoke.main_ppo_command(out, model, train, val, args),
            capture_output=True, text=True, timeout=900, env=env, cwd=out,
        )  # fmt: skip
        assert r.returncode == 0, (r.stdout + r.stderr)[-5000:] + "\nfake:\n" + fake_log.read_text()[-3000:]
    finally:
        for p in reversed(procs):
            _stop(p)

    rows = [json.loads(line) for line in record.read_text().splitlines()]
    steps = smoke.read_steps(metrics_file)
    assert sorted(steps) == [1, 2]
    losses = [x["avg_loss"] for x in rows if x["kind"] == "backend" and x["op"] == "forward-backward"]
    for step, m in steps.items():
        # Cortex's forward-backward reply has no metrics: verl's loss is its avg_loss, its lr the client's schedule
        assert m["actor/loss"] == losses[step - 1] and m["actor/lr"] == 5e-3 and "actor/pg_loss" not in m
        assert m["actor/policy_version"] == step - 1
        assert m["training/off_policy/trajectory_staleness_worst/max"] == 0  # tags == producing version

    exchanges = [x for x in rows if x["kind"] == "exchange"]
    executions = [x for x in rows if x["kind"] == "execution"]
    backend = [x for x in rows if x["kind"] == "backend"]
    routes = [x["route"] for x in exchanges]
    assert routes.count("create") == 1 and routes.count("cancel") == 1 and "unknown" not in routes  # no /health
    # the lost forward-backward reply was sent again and did not run the update twice
    fb_posts = [x for x in exchanges if x["route"] == "forward-backward"]
    fb_runs = [x for x in executions if x["op"] == "forward-backward"]
    assert [x["injected"] for x in fb_posts] == ["dropped after the body", "", ""]
    assert len(fb_runs) == 2 and len({x["group"] for x in fb_runs}) == 2
    steps_sent = [x for x in exchanges if x["route"] == "step"]
    assert [x["status"] for x in steps_sent] == [503, 200, 200]
    assert [x["json"] for x in steps_sent] == [{"learning_rate": 5e-3}] * 3  # the schedule, as learning_rate
    assert [x["op"] for x in executions].count("step") == 2
    # the update trained on the embedded engine with verl's prompt length, temperature and the current policy's
    # old log-probs (one mini-batch, one epoch: exact), and its steps had real gradients
    fbs = [x for x in backend if x["op"] == "forward-backward"]
    assert [(x["prompt_length"], x["temperature"], x["old_from"], x["rows"]) for x in fbs] == [
        (MAX_PROMPT, 1.0, "current policy", 16)
    ] * 2
    # ratio 1: the old log-probs were the current policy's (nothing clipped, no KL)
    assert all(x["actor/pg_clipfrac"] == 0.0 and x["actor/ppo_kl"] == 0.0 for x in fbs), fbs
    grad_norms = [x["grad_norm"] for x in backend if x["op"] == "step"]
    assert len(grad_norms) == 2 and all(g > 0 for g in grad_norms)
    syncs = [x["policy_version"] for x in backend if x["op"] == "weight-sync"]
    assert syncs[-1] >= 2
