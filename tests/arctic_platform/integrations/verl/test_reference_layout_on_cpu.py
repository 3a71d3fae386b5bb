# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The plugin speaks the layout Arctic-Platform's real training engine accepts, measured against recorded frames.

``../shared/fixtures/arctic-platform/engine/`` holds what the reference's own verl adapter sent for one GRPO mini-batch
(``batch.json``) and the job bodies it created; the reference's real DeepSpeed engine trained on those frames. Here:

* the plugin's three ``/initialize`` bodies for the same verl settings equal the adapter's (every key the reference
  reads; ours add only ``num_devices`` and ``extensions``, which the reference ignores);
* the plugin's real forwarder, re-attached to a real embedded server through a recording proxy, sends frames whose
  batch tensors equal the adapter's exactly (keys, shapes, dtypes, values) and whose meta carries every key the
  adapter sends with the same value; the one documented difference: ``/forward`` asks for ``apply_temperature``
  (verl applies the temperature when it recomputes old log-probs; the reference adapter does not);
* the embedded server takes the recorded frames and bodies themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from pathlib import Path

import httpx
import pytest
import torch

FIXTURES = Path(__file__).resolve().parents[4] / ".." / "shared" / "fixtures" / "arctic-platform" / "engine"

pytestmark = pytest.mark.skipif(
    not FIXTURES.is_dir(), reason=f"recorded frames not found: {FIXTURES.resolve()} (the ../shared folder)"
)


def _case() -> dict:
    return json.loads((FIXTURES / "batch.json").read_text())


@contextlib.contextmanager
def _records(logger_name: str):
    """The log records ``logger_name`` emits inside the block (a module-scoped fixture cannot use caplog)."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    log = logging.getLogger(logger_name)
    log.addHandler(handler)
    try:
        yield records
    finally:
        log.removeHandler(handler)


def _frame(name: str) -> dict:
    from arctic_platform import wire

    return wire.decode((FIXTURES / f"{name}.dssst1").read_bytes())


def _overrides(case: dict, model: Path, ckpt: Path, extra=()) -> list[str]:
    v = case["verl"]
    return [
        "remote_backend=arctic",
        "actor_rollout_ref.rollout.name=arctic",
        "algorithm.adv_estimator=grpo",
        f"data.train_batch_size={v['data.train_batch_size']}",
        f"data.max_prompt_length={case['P']}",
        f"data.max_response_length={case['R']}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={v['actor.ppo_mini_batch_size']}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={v['actor.ppo_micro_batch_size_per_gpu']}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={v['actor.ppo_micro_batch_size_per_gpu']}",
        f"actor_rollout_ref.rollout.n={case['rollout_n']}",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        f"actor_rollout_ref.actor.optim.lr={v['actor.optim.lr']}",
        f"actor_rollout_ref.actor.optim.weight_decay={v['actor.optim.weight_decay']}",
        f"actor_rollout_ref.actor.optim.clip_grad={v['actor.optim.clip_grad']}",
        f"+actor_rollout_ref.model.override_config.attn_implementation={v['model.override_config.attn_implementation']}",
        f"actor_rollout_ref.model.enable_gradient_checkpointing={v['model.enable_gradient_checkpointing']}",
        f"remote_backend.arctic.train.deepspeed.zero_optimization.stage={v['remote_backend.train.deepspeed.zero_optimization.stage']}",
        # the reference adapter's rollout settings (tools/reference-engine/ref_adapter.py)
        "actor_rollout_ref.rollout.max_num_seqs=16",
        "actor_rollout_ref.rollout.enforce_eager=true",
        "actor_rollout_ref.rollout.enable_chunked_prefill=false",
        "trainer.n_gpus_per_node=1",
        "trainer.nnodes=1",
        "trainer.save_freq=-1",
        "trainer.resume_mode=disable",
        "trainer.total_training_steps=10",
        f"actor_rollout_ref.model.path={model}",
        f"trainer.default_local_dir={ckpt}",
        *extra,
    ]


def _compose(overrides):
    from arctic_platform.integrations.verl.compose_check import compose_config

    return compose_config(overrides)


ZORRO = Path(__file__).parents[2] / "conformance" / "zorro_frames"
"""What the reference adapter sends with ZoRRo training on (recorded from its code: the folder's README.md)."""
# (a script of theirs that sets one of their keys gets their defaults for the others, ZeRO 0 among them: the
# recording's stage 3 is written in their spelling too)
THEIR_ZORRO = {
    "": ["remote_backend.train.zorro_train.enable=true", "remote_backend.train.deepspeed.zero_optimization.stage=3"],
    "_memory": [
        "remote_backend.train.deepspeed.zero_optimization.stage=3",
        "remote_backend.train.zorro_train.enable=true",
        "remote_backend.train.logits.optimization=memory",
        "remote_backend.train.logits.compute_from_fp32_inputs=true",
    ],
}
"""The recorded variants' knobs, spelled as Arctic-Platform's own scripts spell them (translated at start-up)."""
ZORRO_CALLS = (("update_T1", 1.0, "update"), ("update_T0.7", 0.7, "update"), ("forward_T1", 1.0, "policy"),
               ("forward_ref_T1", 1.0, "ref"))  # fmt: skip


def test_job_bodies_match_the_reference_adapters(tiny_model, tmp_path):
    onprem = ["remote_backend.arctic.backend.type=onprem", "remote_backend.arctic.backend.url=http://x"]
    cfg = _compose(_overrides(_case(), tiny_model, tmp_path / "ckpt", onprem))
    _same_bodies(cfg, json.loads((FIXTURES / "initialize_bodies.json").read_text()), tiny_model, tmp_path)


@pytest.mark.parametrize("variant", sorted(THEIR_ZORRO))
def test_zorro_job_bodies_match_the_reference_adapters(variant, tiny_model, tmp_path):
    """ZoRRo training (their keys, as their scripts write them): the training and log_prob jobs' ds_worker_config
    carries the ZoRRo keys with the reference adapter's values, in its order."""
    from arctic_platform.backend_profile import ARCTIC_PLATFORM_MAIN
    from arctic_platform.integrations.verl.adapter import check_config

    onprem = ["remote_backend.arctic.backend.type=onprem", "remote_backend.arctic.backend.url=http://x"]
    cfg = _compose(_overrides(_case(), tiny_model, tmp_path / "ckpt", [*onprem, *THEIR_ZORRO[variant]]))
    check_config(cfg, ARCTIC_PLATFORM_MAIN)  # main_ppo's start-up check: translates their keys, refuses nothing
    want = json.loads((ZORRO / f"initialize_bodies{variant}.json").read_text())
    assert want["training"]["ds_worker_config"]["zorro_train_enable"] is True  # the recording is ZoRRo's
    _same_bodies(cfg, want, tiny_model, tmp_path)
    for jt in ("training", "log_prob"):
        assert list(_bodies(cfg)[jt]["ds_worker_config"]) == list(want[jt]["ds_worker_config"]), jt  # the order


def _bodies(cfg) -> dict:
    from arctic_platform.backend_profile import ARCTIC_PLATFORM_MAIN
    from arctic_platform.client import AsyncArcticRLClient
    from arctic_platform.integrations.verl.adapter import build_client_config, validate_arctic_config

    client = AsyncArcticRLClient(build_client_config(cfg, validate_arctic_config(cfg)))
    client.backend_profile = ARCTIC_PLATFORM_MAIN  # as /health of a reference server gives (nothing is sent here)
    return {jt: client.job_body(jt) for jt in ("training", "log_prob", "sampling")}


def _same_bodies(cfg, want: dict, tiny_model, tmp_path) -> None:
    bodies = _bodies(cfg)
    for jt in ("training", "log_prob", "sampling"):
        ours = bodies[jt]
        ref = want[jt]
        assert set(ours) - set(ref) <= {"num_devices", "extensions"}, jt
        for key, value in ref.items():
            if key == "model_name":
                assert ours[key] == str(tiny_model)
            elif key == "checkpoint_path":
                assert ours[key] == str(tmp_path / "ckpt")
            elif key == "arctic_inference_config":
                # the reference sends its all-disabled rollout block; we send none (it would still switch
                # ArcticInference's environment on in the reference server, docs/arctic-rl-protocol.md §9)
                assert ours.get(key) is None and not value["zorro_inference"]["enable"]
            else:
                assert ours.get(key) == value, (jt, key, ours.get(key), value)


def _worker(cfg, handle):
    from arctic_platform.integrations.verl.v1.worker import ArcticV1ActorRolloutRefWorker

    for k, v in {"WORLD_SIZE": "1", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29613"}.items():
        os.environ.setdefault(k, v)  # verl's Worker reads them (a Ray worker group sets them)
    w = ArcticV1ActorRolloutRefWorker(config=cfg.actor_rollout_ref, role="actor_rollout_ref", main_config=cfg,
                                      backend_handle=handle)  # fmt: skip
    w.init_model()
    return w


def _v1_batch(case: dict, temperature: float, update: bool):
    """``batch.json``'s rows as verl's V1 trainer hands them to the forwarder (nested-jagged TensorDict)."""
    from verl.utils import tensordict_utils as tu

    from .batches import nested

    rows = case["rows"]
    seqs = [p + r for p, r in zip(rows["prompts"], rows["responses"], strict=True)]
    from tensordict import TensorDict

    td = TensorDict(
        {
            "prompts": nested(rows["prompts"], torch.int64),
            "responses": nested(rows["responses"], torch.int64),
            "input_ids": nested(seqs, torch.int64),
            "position_ids": nested([list(range(len(s))) for s in seqs], torch.int64),
            "response_mask": nested(rows["response_mask"], torch.int64),
            "old_log_probs": nested(rows["old_log_probs"], torch.float32),
            "advantages": nested(rows["advantages"], torch.float32),
        },
        batch_size=[len(seqs)],
    )
    extra = {"temperature": temperature, "calculate_entropy": not update}
    if update:
        extra.update(mini_batch_size=len(seqs), global_batch_size=len(seqs), epochs=1, seed=1,
                     dataloader_kwargs={"shuffle": False})  # fmt: skip
    for k, v in extra.items():
        tu.assign_non_tensor_data(td, k, v)
    return td


# the ActorConfig keys the reference adapter sends (tools/reference-engine/ref_adapter.py actor_config())
REF_ACTOR_KEYS = ("clip_ratio", "clip_ratio_low", "clip_ratio_high", "clip_ratio_c", "loss_agg_mode", "entropy_coeff",
                  "use_kl_loss", "kl_loss_coef", "kl_loss_type", "calculate_entropy", "ppo_epochs")  # fmt: skip


def _same_frame(ours: dict, ref: dict, *, forward: bool) -> None:
    assert list(ours["batch"]) == list(ref["batch"]), (list(ours["batch"]), list(ref["batch"]))
    for key, t in ref["batch"].items():
        assert ours["batch"][key].dtype == t.dtype and torch.equal(ours["batch"][key], t), key
    for key, value in ref["meta"].items():
        got = ours["meta"].get(key, "<missing>")
        if key == "actor_config":
            for k in REF_ACTOR_KEYS:
                assert got[k] == value[k], k
        elif isinstance(value, torch.Tensor) or isinstance(got, torch.Tensor):
            assert int(got) == int(value), key
        elif key == "policy_loss_config":  # ours is verl's whole block; the reference's harness sent loss_mode only
            assert {k: got.get(k) for k in value} == value
        else:
            assert got == value, (key, got, value)
    if forward:  # the one documented difference (docs/arctic-rl-protocol.md §6.2 item 4)
        assert ours["processing"]["post"] == ["apply_temperature", *ref["processing"]["post"]]
        assert ours["processing"]["loss_fn"] is ref["processing"]["loss_fn"] is None
    else:
        assert ours["processing"] == ref["processing"]


@pytest.fixture(scope="module")
def recorded_run(tiny_model_dir, tmp_path_factory, serve_server, proxy_cls):
    """The plugin's driver path + forwarder against a real embedded server behind a recording proxy."""
    from arctic_platform import wire
    from arctic_platform.integrations.verl.adapter import ArcticRemoteBackend

    work = tmp_path_factory.mktemp("reference_layout")
    case = _case()
    with serve_server(work, "--model", str(tiny_model_dir)) as srv, proxy_cls(srv.url) as proxy:
        onprem = ["remote_backend.arctic.backend.type=onprem", f"remote_backend.arctic.backend.url={proxy.url}"]
        cfg = _compose(_overrides(case, tiny_model_dir, work / "ckpt", onprem))
        backend = ArcticRemoteBackend.from_config(cfg)
        try:
            worker = _worker(cfg, backend.reconnect_handle())
            sent: dict[str, dict] = {}

            async def run():
                for name, temp in (("update_T1", 1.0), ("update_T0.7", 0.7)):
                    n = len(proxy.calls)
                    out = await worker.update_actor(_v1_batch(case, temp, update=True))
                    [fb] = [c for c in proxy.calls[n:] if c.path == "/forward-backward"]
                    assert fb.status == 200, fb.reply
                    sent[name] = {"frame": wire.decode(fb.body), "metrics": out}
                for name, temp, ref in (("forward_T1", 1.0, False), ("forward_T0.7", 0.7, False),
                                        ("forward_ref_T1", 1.0, True)):  # fmt: skip
                    n = len(proxy.calls)
                    td = _v1_batch(case, temp, update=False)
                    await (worker.compute_ref_log_prob(td) if ref else worker.compute_log_prob(td))
                    [fw] = [c for c in proxy.calls[n:] if c.path == "/forward"]
                    assert fw.status == 200, fw.reply
                    sent[name] = {"frame": wire.decode(fw.body)}
                await worker.backend.aclose()
                # the same jobs, taken for Arctic-Platform main's (no IS weights): a batch with IS weights (which the
                # start-up check refuses to produce) logs one error naming the way out, and the weights still travel
                # in batch, left-padded with 1.0, for the backend to answer (Arctic-Platform main: a 500)
                from arctic_platform.backend_profile import ARCTIC_PLATFORM_MAIN

                from .batches import nested

                handle = {**backend.reconnect_handle(), "profile": ARCTIC_PLATFORM_MAIN.model_dump(mode="json")}
                ap_worker = _worker(cfg, handle)
                td = _v1_batch(case, 1.0, update=True)
                td["rollout_is_weights"] = nested(case["rollout_is_weights"], torch.float32)
                n = len(proxy.calls)
                with _records("arctic_platform.integrations.verl.v1.worker") as records:
                    await ap_worker.update_actor(td)
                [fb] = [c for c in proxy.calls[n:] if c.path == "/forward-backward"]
                sent["is_weights_on_arctic_platform_main"] = {
                    "frame": wire.decode(fb.body),
                    "errors": [r.getMessage() for r in records if r.levelno >= logging.ERROR],
                }
                await ap_worker.backend.aclose()
                # ZoRRo training on (their keys, translated by main_ppo's check against Arctic-Platform main's
                # profile): the frames the forwarder sends; the embedded server has no ZoRRo path and answers 422,
                # which is what the start-up check refuses on its profile, so only the request is compared here
                from arctic_platform.integrations.verl.adapter import check_config

                for variant, knobs in THEIR_ZORRO.items():
                    zcfg = _compose(_overrides(case, tiny_model_dir, work / "ckpt", [*onprem, *knobs]))
                    check_config(zcfg, ARCTIC_PLATFORM_MAIN)
                    z_worker = _worker(zcfg, handle)
                    for name, temp, kind in ZORRO_CALLS:
                        n = len(proxy.calls)
                        td = _v1_batch(case, temp, update=kind == "update")
                        call = {"update": z_worker.update_actor, "policy": z_worker.compute_log_prob,
                                "ref": z_worker.compute_ref_log_prob}[kind]  # fmt: skip
                        with contextlib.suppress(Exception):
                            await call(td)
                        path = "/forward-backward" if kind == "update" else "/forward"
                        [req] = [c for c in proxy.calls[n:] if c.path == path]
                        assert req.status == 422 and "zorro" in str(req.reply).lower(), (req.status, req.reply)
                        sent[f"zorro:{name}{variant}"] = {"frame": wire.decode(req.body)}
                    await z_worker.backend.aclose()

            asyncio.run(run())
            inits = {c.json()["job_type"]: c.json() for c in proxy.calls_to("/initialize")}
            yield {"sent": sent, "inits": inits, "server": srv, "backend": backend}
        finally:
            backend.destroy()


@pytest.mark.parametrize("name", ["update_T1", "update_T0.7", "forward_T1", "forward_T0.7", "forward_ref_T1"])
def test_plugin_frames_match_the_reference_adapters(recorded_run, name):
    _same_frame(recorded_run["sent"][name]["frame"], _frame(name), forward=name.startswith("forward"))


@pytest.mark.parametrize("name", [f"{c[0]}{v}" for v in sorted(THEIR_ZORRO) for c in ZORRO_CALLS])
def test_zorro_frames_match_the_reference_adapters(recorded_run, name):
    """ZoRRo training on: the same batch tensors and meta as the reference adapter's ZoRRo frames."""
    from arctic_platform import wire

    ref = wire.decode((ZORRO / f"{name}.dssst1").read_bytes())
    assert ref["meta"]["zorro_train_enable"] is True
    _same_frame(recorded_run["sent"][f"zorro:{name}"]["frame"], ref, forward=name.startswith("forward"))


def test_zorro_log_probs_come_back_response_aligned_and_are_shifted_to_predict_next():
    """Arctic-Platform's ZoRRo path answers response-aligned log-probs; the forwarder shifts the flat values left by
    one (the last slot 0), as Arctic-Platform's V1 worker does: [[1,2,3,4],[5,6]] -> [[2,3,4,5],[6,0]]."""
    from arctic_platform.integrations.verl.v1.worker import response_aligned_to_predict_next

    got = response_aligned_to_predict_next(torch.tensor([1.0, 2, 3, 4, 5, 6]))
    assert torch.equal(got, torch.tensor([2.0, 3, 4, 5, 6, 0]))
    assert response_aligned_to_predict_next(torch.zeros(0)).numel() == 0


def test_is_weights_for_a_backend_that_applies_none_are_named_and_still_sent(recorded_run):
    got = recorded_run["sent"]["is_weights_on_arctic_platform_main"]
    [error] = [e for e in got["errors"] if "rollout_is_weights" in e]
    assert "Arctic-Platform main does not apply IS weights" in error, error
    assert "algorithm.rollout_correction.rollout_is=null" in error, error
    w = got["frame"]["batch"]["rollout_is_weights"]
    P = got["frame"]["batch"]["prompts"].shape[1]
    assert list(w.shape) == list(got["frame"]["batch"]["input_ids"].shape) and bool((w[:, :P] == 1.0).all())


def test_plugin_sent_the_reference_bodies_it_built(recorded_run):
    inits = recorded_run["inits"]
    assert set(inits) == {"training", "sampling", "log_prob"}
    assert inits["training"]["ds_worker_config"]["attn_implementation"] == "eager"
    assert inits["training"]["ds_config"]["zero_optimization"]["stage"] == 3
    assert inits["log_prob"]["log_prob_config"]["train_micro_batch_size_per_gpu"] == 2
    assert "ds_config" in inits["log_prob"]  # without it a reference server puts the job on vLLM (no /forward)


def test_embedded_server_takes_the_recorded_frames(tiny_model_dir, tmp_path, serve_server):
    """The adapter's own bodies and frames, as recorded from the reference, on the embedded server."""
    from arctic_platform import wire

    bodies = json.loads((FIXTURES / "initialize_bodies.json").read_text())
    with serve_server(tmp_path, "--model", str(tiny_model_dir)) as srv:
        ids = {}
        for jt in ("sampling", "log_prob", "training"):
            body = json.loads(json.dumps(bodies[jt]).replace("<model_path>", str(tiny_model_dir)).replace(
                "<checkpoint_path>", str(tmp_path / "ckpt")))  # fmt: skip
            r = httpx.post(f"{srv.url}/initialize", json=body, timeout=60)
            assert r.status_code == 200, (jt, r.text)
            ids[jt] = r.json()["job_id"]
        for jid in ids.values():
            for _ in range(600):
                info = httpx.get(f"{srv.url}/job/{jid}", timeout=10).json()
                if info["status"] != "PENDING":
                    break
                asyncio.run(asyncio.sleep(0.1))
            assert info["status"] == "RUNNING", info

        def post(path, name, job):
            return httpx.post(f"{srv.url}{path}", params={"job_id": ids[job]}, timeout=120,
                              content=(FIXTURES / f"{name}.dssst1").read_bytes(),
                              headers={"Content-Type": "application/octet-stream"})  # fmt: skip

        for name in ("update_T1", "update_T0.7"):
            r = post("/forward-backward", name, "training")
            assert r.status_code == 200, r.text
            reply = wire.decode(r.content)
            assert set(reply["metrics"]) >= set(json.loads((FIXTURES / "engine_results.json").read_text())[
                f"{name}.dssst1"]["metrics"])  # fmt: skip
            assert httpx.post(f"{srv.url}/step", params={"job_id": ids["training"]}, json={}).status_code == 200
        logprobs = {}
        for name, job in (("forward_T1", "training"), ("forward_T0.7", "training"), ("forward_ref_T1", "log_prob")):
            r = post("/forward", name, job)
            assert r.status_code == 200, r.text
            logprobs[name] = wire.decode(r.content)["batch"]["logprobs"]
            assert list(logprobs[name].shape) == [4, 14]
        # the adapter's /forward frames name no apply_temperature: like Arctic-Platform's engine, the embedded server
        # then answers T = 1 log-probs for its T = 0.7 frame; the same frame asking for the step divides by 0.7
        assert torch.equal(logprobs["forward_T0.7"], logprobs["forward_T1"])
        tree = _frame("forward_T0.7")
        tree["processing"] = {**tree["processing"], "post": ["apply_temperature", *tree["processing"]["post"]]}
        r = httpx.post(f"{srv.url}/forward", params={"job_id": ids["training"]}, timeout=120, content=wire.encode(tree),
                       headers={"Content-Type": "application/octet-stream"})  # fmt: skip
        assert r.status_code == 200, r.text
        hot = wire.decode(r.content)["batch"]["logprobs"]
        real = tree["batch"]["attention_mask"].bool() & tree["batch"]["attention_mask"].roll(-1, 1).bool()
        real[:, -1] = False
        assert not torch.allclose(hot[real], logprobs["forward_T1"][real])
        # the reference's IS-weights frame carries per-row weights in meta (where they are not split with the rows)
        r = post("/forward-backward", "update_T1_is_weights", "training")
        assert r.status_code == 422 and "meta.rollout_is_weights" in r.json()["detail"], r.text
        # a [b, P+R] mask padded on the wrong side (the response in the first columns) is refused, not shifted by P
        tree = _frame("update_T1")
        P = tree["batch"]["prompts"].shape[1]
        for key in ("response_mask", "loss_mask"):
            tree["batch"][key] = tree["batch"][key].roll(-P, dims=1)
        r = httpx.post(f"{srv.url}/forward-backward", params={"job_id": ids["training"]}, timeout=120,
                       content=wire.encode(tree), headers={"Content-Type": "application/octet-stream"})  # fmt: skip
        assert r.status_code == 422 and "batch.response_mask is [4, 14] but not left-padded" in r.text, r.text


def test_the_reference_log_probs_reach_the_kl_loss(recorded_run, tiny_model_dir, tmp_path):
    """``use_kl_loss`` with ``low_var_kl``: the forwarder sends verl's ``ref_log_prob`` and the update's KL follows it.
    With the reference equal to the current policy's log-probs the KL is 0 (what the corpus step sees at step 1);
    with the reference 0.1 below them everywhere it is ``exp(-0.1) + 0.1 - 1`` per token, as verl's formula says."""
    import math

    from verl.utils import tensordict_utils as tu

    from .batches import nested

    case = _case()
    onprem = [
        "remote_backend.arctic.backend.type=onprem",
        f"remote_backend.arctic.backend.url={recorded_run['server'].url}",
    ]
    kl = ["actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.actor.kl_loss_type=low_var_kl"]
    cfg = _compose(_overrides(case, tiny_model_dir, tmp_path / "ckpt", [*onprem, *kl]))
    worker = _worker(cfg, recorded_run["backend"].reconnect_handle())
    rows = case["rows"]
    plens = [len(p) for p in rows["prompts"]]
    rlens = [len(r) for r in rows["responses"]]

    async def update_with_reference(shift: float) -> float:
        lp = (await worker.compute_log_prob(_v1_batch(case, 1.0, update=False)))["log_probs"].unbind()
        # predict-next: response token k of a row is scored at slot prompt_len + k - 1
        ref = [row[p - 1 : p - 1 + r] - shift for row, p, r in zip(lp, plens, rlens, strict=True)]
        td = _v1_batch(case, 1.0, update=True)
        td["ref_log_prob"] = nested([x.tolist() for x in ref], torch.float32)
        out = await worker.update_actor(td)
        kl_loss = tu.get(out, "metrics")["kl_loss"]  # verl's worker metric (the trainer prefixes actor/)
        return float(kl_loss[0] if isinstance(kl_loss, list) else kl_loss)

    async def run():
        try:
            return await update_with_reference(0.0), await update_with_reference(0.1)
        finally:
            await worker.backend.aclose()

    same, below = asyncio.run(run())
    assert abs(same) < 1e-5, same  # the reference is the policy: no KL
    assert below == pytest.approx(math.exp(-0.1) + 0.1 - 1, rel=1e-3), below  # 0.0048374: the reference reached it
