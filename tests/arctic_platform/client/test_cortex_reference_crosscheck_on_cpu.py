# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Cross-check: Arctic-Platform's own Cortex transport, unmodified, against the same fake SnowAPI (a fake: Snowflake
Cortex is unreachable here), so the fake is held to the reference's reading of the specification as well as ours.

Where the two agree (create, wait, sub-job ids from ``JOB_TYPE_*`` spellings, generate, step, a chunked
forward-backward replayed after a lost group, paged result chunks, cancel), the reference passes against the fake.
Its known deviations from the specification are asserted here, next to what our transport does in the same case:

1. a forward-backward under 60 MiB is posted as a plain frame (no chunk group id), yet sent again after a lost
   reply: the service runs the update twice (ours: always a chunk envelope; once);
2. ``terminated`` is not terminal: the reference waits out ``job_ready_timeout`` (ours: raises at once);
3. ``sync_weights()`` fails after the weight sync ran: ``reset-prefix-cache`` answers inline and the reference reads
   ``request_id`` from it (``KeyError``; on Arctic-Platform main the staged wake fails before anything is sent: its
   tag list reaches a filter for JSON objects, ``AttributeError``) (ours: succeeds);
4. ``save_checkpoint()`` sends ``export_hf``, a field the specification's save body does not have (the fake refuses
   unknown fields: 400) (ours: ``{"checkpoint_type": "resumable"}``).

The reference runs in its own interpreter (both packages are named ``arctic_platform``), from
``../shared/reference/arctic-platform`` (the reference's client package, unmodified: ``git archive`` of
karthik/verl-v1-plugin 583be50; CI has ``../shared``), or from ``ARCTIC_PLATFORM_CHECKOUT`` when set, e.g. another
branch::

    git -C <Arctic-Platform clone> archive main arctic_platform/__init__.py \\
        arctic_platform/_dependency_groups.py arctic_platform/wire.py arctic_platform/client | tar -x -C /tmp/ap-ref
    ARCTIC_PLATFORM_CHECKOUT=/tmp/ap-ref ./build.sh test -- -n 0 -s \\
        tests/arctic_platform/client/test_cortex_reference_crosscheck_on_cpu.py

(main differs in deviation 3). Its third-party needs (requests, aiohttp, tenacity, urllib3, torch, safetensors,
pydantic) are all in this project's environment. Without either, the module fails (it is not skipped).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from arctic_platform import wire
from arctic_platform.client import ArcticRLClientConfig, AsyncArcticRLClient
from arctic_platform.client.errors import ArcticRLJobError

SHARED_REFERENCE = Path(__file__).resolve().parents[4] / "shared" / "reference" / "arctic-platform"
CHECKOUT = os.environ.get("ARCTIC_PLATFORM_CHECKOUT", "") or str(SHARED_REFERENCE)
DRIVER = Path(__file__).parent / "cortex_reference_driver.py"


def _fakes(fake_mod) -> dict:
    F = fake_mod.FakeSnowAPI
    fakes = {
        "agree": F(
            enum_spellings=True,
            result_form="chunks",
            result_chunk_bytes=12000,
            max_events=1,
            polls_in_flight=0,
            job_script=("pending", "running"),
        ),  # fmt: skip
        "save": F(polls_in_flight=0, job_script=("running",)),
        "lost_reply": F(polls_in_flight=0, job_script=("running",)),
        "lost_reply_async": F(polls_in_flight=0, job_script=("running",)),
        "terminated": F(job_script=("pending", "terminated"), reason="platform teardown"),
        "sync_weights": F(polls_in_flight=0, job_script=("running",)),
        "sync_weights_async": F(polls_in_flight=0, job_script=("running",)),
    }
    fakes["agree"].add_fault("forward-backward", "restart_group", chunk=1)
    for name in ("lost_reply", "lost_reply_async"):
        fakes[name].add_fault("forward-backward", "drop_after_body")
    return fakes


@pytest.fixture(scope="module")
def reference_run(fake_mod, tmp_path_factory):
    """``(report, fakes)``: the reference driver's outcomes per scenario and the fakes it ran against."""
    transport = Path(CHECKOUT) / "arctic_platform" / "client" / "transports" / "cortex.py"
    assert transport.is_file(), f"no Arctic-Platform client package at {CHECKOUT} (see the module docstring)"
    fakes = _fakes(fake_mod)
    for f in fakes.values():
        f.__enter__()
    try:
        env = {**os.environ, "PYTHONPATH": CHECKOUT}
        r = subprocess.run(
            [sys.executable, str(DRIVER), json.dumps({k: f.url for k, f in fakes.items()})],
            capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path_factory.mktemp("reference"),
        )  # fmt: skip
        assert r.returncode == 0, r.stderr[-4000:]
        report = json.loads(r.stdout.strip().splitlines()[-1])
        print("\n" + _summary(report, fakes))  # the cross-check's output (pytest -s shows it)
        yield report, fakes
    finally:
        for f in fakes.values():
            f.__exit__(None, None, None)


def _summary(report: dict, fakes: dict) -> str:
    """One line per scenario: how the reference's call ended, what reached the fake, what the fake ran."""
    from collections import Counter

    lines = [f"reference transport: {report['reference']} (no-op ops: {report['noop_ops'] or 'none'})"]
    for name, fake in fakes.items():
        out = report[name]
        ended = f"raised {out['raised']['type']}: {out['raised']['message'][:160]}" if "raised" in out else "ok"
        routes = dict(Counter(f"{e.route}{'' if e.status in (200, None) else f'->{e.status}'}" for e in fake.exchanges))
        ran = dict(Counter(op for op, _ in fake.executions))
        lines.append(f"  {name}: {ended}\n      requests {routes}\n      executed {ran}")
    return "\n".join(lines)


def test_it_is_the_reference_that_runs(reference_run):
    report, _ = reference_run
    assert report["reference"].startswith(str(Path(CHECKOUT).resolve())) or report["reference"].startswith(CHECKOUT)


def test_the_reference_agrees_with_the_fake_on_a_healthy_service(reference_run):
    report, fakes = reference_run
    out, fake = report["agree"], fakes["agree"]
    assert "raised" not in out, out
    (job_id,) = fake.jobs
    assert out["jobs"] == [f"{job_id}:training:0", f"{job_id}:sampling:0"]  # from JOB_TYPE_* spellings
    assert [r["token_ids"] for r in out["generate"]] == [list(range(10, 2010)), list(range(11, 2011))]
    assert out["step"] == {"global_steps": 1, "last_lr": 1e-4}
    assert out["fwd_bwd"]["avg_loss"] > 0
    descs = [wire.read_byte_chunk_metadata(e.body) for e in fake.calls("forward-backward")]
    assert len(descs) > 3 and [d["chunk_idx"] for d in descs[:3]] == [0, 1, 0]  # group lost at 1: replayed from 0
    assert len({d["chunk_group_id"] for d in descs}) == 1 and fake.calls("forward-backward")[1].status == 409
    assert [op for op, _ in fake.executions].count("forward-backward") == 1
    assert any(e.query.get("cursor") for e in fake.calls("poll"))  # result chunks paged by cursor
    assert len(fake.calls("cancel")) == 1


@pytest.mark.parametrize("scenario", ["lost_reply", "lost_reply_async"])
@pytest.mark.asyncio
async def test_deviation_1_a_lost_forward_backward_reply_runs_the_update_twice(
    reference_run, fake_mod, scenario, clock
):
    report, fakes = reference_run
    fake = fakes[scenario]
    assert "raised" not in report[scenario], report[scenario]
    posts = fake.calls("forward-backward")
    assert [wire.read_byte_chunk_metadata(p.body) for p in posts] == [None, None]  # plain frames: no group id
    assert [p.injected for p in posts] == ["dropped after the body", ""]
    assert [op for op, _ in fake.executions].count("forward-backward") == 2  # the update ran twice
    # ours, against the same fault: one execution
    with fake_mod.FakeSnowAPI(polls_in_flight=0, job_script=("running",)) as ours_fake:
        ours_fake.add_fault("forward-backward", "drop_after_body")
        c = AsyncArcticRLClient(_ours_config(ours_fake.url), sleep=clock.sleep)
        await c.start()
        await c.forward_backward(*_tiny_update())
        await c.close()
        assert [op for op, _ in ours_fake.executions].count("forward-backward") == 1


@pytest.mark.asyncio
async def test_deviation_2_terminated_is_not_terminal_for_the_reference(reference_run, fake_mod, clock):
    report, fakes = reference_run
    raised = report["terminated"]["raised"]
    assert raised["type"] == "TimeoutError" and "did not become running within 4.0s" in raised["message"]
    states = [e.reply_json()["status"] for e in fakes["terminated"].calls("get_job")]
    assert states[:2] == ["pending", "terminated"] and len(states) > 2  # it kept polling a terminated job
    with fake_mod.FakeSnowAPI(job_script=("pending", "terminated"), reason="platform teardown") as ours_fake:
        c = AsyncArcticRLClient(_ours_config(ours_fake.url), sleep=clock.sleep)
        with pytest.raises(ArcticRLJobError, match="is terminated: reason=platform teardown"):
            await c.start()
        assert len(ours_fake.calls("get_job")) == 2


@pytest.mark.parametrize("scenario", ["sync_weights", "sync_weights_async"])
@pytest.mark.asyncio
async def test_deviation_3_sync_weights_fails_on_the_inline_reset_prefix_cache(
    reference_run, fake_mod, scenario, clock
):
    report, fakes = reference_run
    raised, fake = report[scenario]["raised"], fakes[scenario]
    ran = [op for op, _ in fake.executions]
    if report["noop_ops"]:  # the verl plugin branch: wakes are no-ops, the weight sync runs, then the inline reply
        assert raised["type"] == "KeyError" and "request_id" in raised["message"]
        assert ran == ["weight-sync", "reset-prefix-cache"]  # it failed after the weights were synced
    else:  # main: the staged wake fails first (its tag list reaches the JSON body filter)
        assert raised["type"] == "AttributeError" and "'list' object has no attribute 'items'" in raised["message"]
        assert ran == []
    with fake_mod.FakeSnowAPI(polls_in_flight=0, job_script=("running",)) as ours_fake:
        c = AsyncArcticRLClient(_ours_config(ours_fake.url), sleep=clock.sleep)
        await c.start()
        await c.wake_inference(["weights"])
        assert (await c.sync_weights())["status"] == "ok"
        await c.wake_inference(["kv_cache"])
        assert (await c.reset_prefix_cache())["reset"] is True
        await c.close()


def test_deviation_4_save_sends_a_field_the_specification_does_not_have(reference_run):
    report, fakes = reference_run
    raised = report["save"]["raised"]
    assert raised["type"] == "HTTPError" and "400" in raised["message"]
    (save,) = fakes["save"].calls("save")
    assert save.json() == {"checkpoint_type": "resumable", "export_hf": False}
    assert "unknown save fields ['export_hf']" in save.reply_json()["message"]


def _ours_config(url: str) -> ArcticRLClientConfig:
    return ArcticRLClientConfig(
        model_name="Qwen/Qwen3-0.6B", max_seq_len=64, log_prob_gpus=0, request_timeout=60,
        training={"optimizer": {"lr": 1e-3}, "train_batch_size": 4},
        backend={"type": "cortex", "base_url": url, "database": "DB", "schema": "SCH", "max_retries": 3},
    )  # fmt: skip


def _tiny_update():
    import torch

    ids = torch.arange(14).reshape(2, 7) + 1
    resp = torch.zeros(2, 7)
    resp[:, 4:] = 1
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "prompts": ids[:, :4], "response_mask": resp,
             "advantages": resp.clone()}  # fmt: skip
    return batch, {"temperature": 1.0}
