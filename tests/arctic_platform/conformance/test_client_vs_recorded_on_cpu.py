# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Our client against the reference server's recorded replies: it must parse every reply shape in the transcript.

The "server" here is a small FastAPI app on 127.0.0.1 that answers each ``(method, path)`` with the next reply the
reference server gave to that path in the recorded session (``../shared/fixtures/arctic-platform/transcript/``),
with the recorded status and body (JSON, text or DSSST1 frame). It is not our server and not a mock of it: it replays
the reference's own answers. ``/health``, which the reference client polls but the transcript does not record, answers
the reference's ``{"status": "OK"}`` (no capabilities: so our client must send text prompts, as to a real server).

Then our client runs the session the transcript recorded (job creation, waits, every data-plane call, teardown) and
every reply is checked to have been parsed. A bare text 500 (what the reference answers a frame it cannot read) and
a JSON 4xx reach the user with the server's own words, and the next call on the same client still works.
"""

import collections
import json
import threading
import time
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[3] / ".." / "shared" / "fixtures" / "arctic-platform"
TRANSCRIPT = FIXTURES / "transcript"

pytestmark = pytest.mark.skipif(
    not (TRANSCRIPT / "transcript.jsonl").is_file(),
    reason=f"reference fixtures not found: {FIXTURES.resolve()} (the ../shared folder next to the repository)",
)


class RecordedServer:
    """FastAPI app replaying one phase of the transcript; serves on 127.0.0.1 in a thread (port picked by the OS)."""

    def __init__(self, entries: list[dict]):
        import uvicorn
        from fastapi import FastAPI, Request
        from fastapi.responses import JSONResponse, PlainTextResponse, Response

        self.queues: dict[tuple[str, str], collections.deque] = collections.defaultdict(collections.deque)
        for e in entries:
            path = "/job/{id}" if e["path"].startswith("/job/") else e["path"]
            self.queues[(e["method"], path)].append(e)
        self.served: list[int] = []
        self.requests: list[tuple[str, str, bytes]] = []
        self.inject: collections.deque = collections.deque()  # (path, response) answered before the recording
        app = FastAPI()

        @app.api_route("/{full:path}", methods=["GET", "POST"])
        async def replay(request: Request, full: str):
            path = "/" + full
            body = await request.body()
            self.requests.append((request.method, path, body))
            if self.inject and self.inject[0][0] == path:
                return self.inject.popleft()[1]
            if path == "/health":
                return JSONResponse({"status": "OK"})
            key = (request.method, "/job/{id}" if path.startswith("/job/") else path)
            q = self.queues.get(key)
            if not q:
                return JSONResponse({"detail": f"no recorded reply left for {key}"}, status_code=599)
            e = q.popleft()
            self.served.append(e["n"])
            if "response_frame" in e:
                data = (TRANSCRIPT / e["response_frame"]).read_bytes()
                return Response(data, status_code=e["status"], media_type="application/octet-stream")
            if "response_text" in e:
                return PlainTextResponse(e["response_text"], status_code=e["status"])
            return JSONResponse(e.get("response_json"), status_code=e["status"])

        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 30
        while not (self.server.started and self.server.servers):
            assert self.thread.is_alive() and time.monotonic() < deadline, "the recorded server did not start"
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=30)

    def left(self) -> list[int]:
        return sorted(e["n"] for q in self.queues.values() for e in q)


def _phase(name: str) -> list[dict]:
    lines = (TRANSCRIPT / "transcript.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, filter(str.strip, lines)) if e["phase"] == name]


def _config(model, url, **kw):
    from arctic_platform.client import ArcticRLClientConfig, OnPremConfig

    base = dict(
        model_name=str(model),
        request_timeout=60,
        job_ready_timeout=60,
        max_retries=0,
        training={"checkpoint_path": "/data/ckpt/ckpt"},
        backend=OnPremConfig(url=url),
    )
    base.update(kw)
    return ArcticRLClientConfig(**base)


def _two_token_prompt(tok) -> list[int]:
    """Two ids that survive decode + re-tokenize (the recorded generate reply says prompt_len 2)."""
    for a in range(3, len(tok)):
        for b in range(3, 60):
            ids = [a, b]
            if tok.encode(tok.decode(ids), add_special_tokens=False) == ids:
                return ids
    raise AssertionError("no round-tripping two-token prompt in the tiny vocabulary")


def test_negative_case_no_checkpoint_path(tiny_model_dir):
    """Phase 0: the training job is refused with 400; the user sees the server's words; created jobs are destroyed."""
    from arctic_platform.client import ArcticRLClient, ArcticRLError

    with RecordedServer(_phase("0-no-checkpoint_path")) as srv:
        client = ArcticRLClient(_config(tiny_model_dir, srv.url))
        with pytest.raises(ArcticRLError) as ei:
            client.start()
        assert ei.value.status == 400 and ei.value.reason == "checkpoint_path is required for training jobs"
        client.close()
    destroyed = [json.loads(b) for m, p, b in srv.requests if p == "/destroy"]
    assert sorted(d["job_type"] for d in destroyed) == ["log_prob", "sampling"]  # the partial jobs are cleaned up
    assert sorted(srv.served) == [1, 2, 3, 4, 5]  # the three /status polls after it are the reference client's own


def test_full_session_parses_every_recorded_reply(tiny_model_dir):
    import torch

    from arctic_platform.client import ArcticRLClient, ArcticRLError
    from arctic_platform.client.client import sampled_logprobs

    with RecordedServer(_phase("A-construct")) as srv:
        client = ArcticRLClient(_config(tiny_model_dir, srv.url))
        client.start()  # /initialize x3 (recorded running: true), then /job/{id} until RUNNING
        assert (client.sampling_job_id, client.log_prob_job_id, client.training_job_id) == (4, 5, 6)
        assert client.capabilities == ()  # a reference server advertises nothing: prompts travel as text
        prompt = _two_token_prompt(client._client.tokenizer())
        (g,) = client.generate([prompt], {"max_tokens": 4, "temperature": 1.0})
        assert g["token_ids"] == [5, 6] and g["text"] == "ab" and sampled_logprobs(g) is None
        assert client.retokenize_stats == {"prompts": 1, "mismatches": 0}
        batch = {"input_ids": torch.ones(2, 8, dtype=torch.long), "attention_mask": torch.ones(2, 8, dtype=torch.long)}
        fwd = client.forward(batch, {"temperature": 1.0})
        assert fwd["batch"]["logprobs"].shape == (2, 8) and fwd["batch"]["entropy"].dtype == torch.float32
        with pytest.raises(ArcticRLError) as ei:  # a JSON 4xx: the server's own words
            client.forward(batch, {"temperature": 1.0}, ref=True)
        assert ei.value.status == 400 and ei.value.reason == "Job 5 (log_prob) has no DeepSpeed workers"
        fb = client.forward_backward(batch, {})
        assert fb["avg_loss"] == 0.25 and fb["metrics"]["actor/pg_loss"] == 0.25
        st = client.step()
        assert st["metrics"] == {"last_lr": 1e-05, "grad_norm": 0.5}
        client.step(learning_rate=1e-4)
        assert client.wake_inference(["weights"])["sampling"][0]["tags"] == ["weights"]
        assert client.sync_weights()["status"] == "ok"  # sent as /operation weight-sync, as the reference client
        client.wake_inference(["kv_cache"])
        assert client.reset_prefix_cache()["sampling"] == [True]
        assert client.save()["global_step"] == 2
        saved = client.save(step=1, save_total_limit=2)
        assert saved["path"].endswith("checkpoint-1") and saved["global_step"] == 2 and saved["hf_path"] is None
        assert client.load_checkpoint()["global_step"] == 2
        assert client.load_checkpoint(step=1)["path"].endswith("checkpoint-1")
        assert client.sleep_inference(level=1)["sampling"][0]["level"] == 1
        client.wake_inference(None)
        client.wake_inference(["weights"])
        client.wake_inference(["kv_cache"])
        client.reset_prefix_cache()
        assert client.sleep_training("all")["workers"] == [{"offloaded": True}]
        assert client.wake_training()["workers"] == [{"reloaded": True}]
        (lp,) = client.log_probs(["hi"], [" there"])
        assert lp["token_ids"] == [5, 6]
        # a bare text 500 (the reference's answer to a frame it cannot read): the user sees the server's text ...
        from fastapi.responses import PlainTextResponse

        srv.inject.append(("/forward-backward", PlainTextResponse("Internal Server Error", status_code=500)))
        with pytest.raises(ArcticRLError) as ei:
            client.forward_backward(batch, {})
        assert ei.value.status == 500 and ei.value.reason == "Internal Server Error"
        # ... and the connection is not poisoned: the next call on the same client is parsed normally
        assert client.job_info(4)["status"] == "RUNNING"
        client.close()  # destroys the three jobs it created
        assert srv.left() == [41, 42, 43]  # only the reference client's post-teardown /status polls are unused
    posted = {p: json.loads(b) for m, p, b in srv.requests if p == "/operation" and b"weight-sync" in b}
    assert posted["/operation"]["payload"] == {"source_sub_job_id": 6, "target_sub_job_ids": [4]}
    sent = [json.loads(b) for m, p, b in srv.requests if p == "/initialize"]
    from arctic_platform.protocol import JobConfig

    assert all(set(body) <= set(JobConfig.model_fields) for body in sent)  # only JobConfig names (+ extensions)
    assert sent[2]["ds_config"]["optimizer"]["type"] == "AdamW"


@pytest.mark.asyncio
async def test_async_cycle(tiny_model_dir):
    """Phase C: the async client constructs against the recorded replies and tears down."""
    from arctic_platform.client import AsyncArcticRLClient

    with RecordedServer(_phase("C-async-cycle")) as srv:
        c = AsyncArcticRLClient(_config(tiny_model_dir, srv.url))
        await c.start()
        assert (c.sampling_job_id, c.log_prob_job_id, c.training_job_id) == (7, 8, 9)
        await c.close()
        assert srv.left() == [53, 54, 55]
