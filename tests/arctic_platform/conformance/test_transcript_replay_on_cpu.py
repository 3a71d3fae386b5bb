# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Every request of the recorded reference session, replayed against OUR real server: same status, same shapes.

The transcript (``../shared/fixtures/arctic-platform/transcript/``, recorded from the reference client against the
reference server) is replayed in order on a real embedded server on 127.0.0.1. Job ids, the model and the checkpoint
root are mapped to this run's; request bodies are otherwise sent byte for byte (frames as recorded). For each call:

* the status code is the recorded one (call 17, ``/forward`` on the log_prob job, may also answer 200: the reference
  failed it only because its log_prob job ran on vLLM; the README says so);
* the response has the recorded shape: every recorded key is present with a value of the same kind (numbers may
  differ; tensors keep dtype and shape), except the documented differences in ``ALLOWED`` below; extra keys in our
  replies are extensions.

Like the reference client, the replay waits for each new job to report ``RUNNING`` (our ``/initialize`` may return
while the job is ``PENDING``) before sending the next call.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
import torch

FIXTURES = Path(__file__).resolve().parents[3] / ".." / "shared" / "fixtures" / "arctic-platform"
TRANSCRIPT = FIXTURES / "transcript"

# (path, dotted key): why our reply may differ there from the recorded one.
ALLOWED = {
    ("/forward", "avg_loss"): "no loss is computed on a forward-only call: ours is null",
    ("/forward", "metrics"): "free-form metric names",
    ("/forward-backward", "metrics"): "free-form metric names (ours has more)",
    ("/sleep-inference", "log_prob"): "present only when the reference's log_prob job is a vLLM pool",
    ("/wake-inference", "log_prob"): "present only when the reference's log_prob job is a vLLM pool",
    ("/operation", "log_prob"): "present only when the reference's log_prob job is a vLLM pool",
    ("/status", "jobs"): "ours keeps terminated / failed records visible (with a reason); the reference drops them",
}


def _entries():
    if not (TRANSCRIPT / "transcript.jsonl").is_file():
        return []
    return [json.loads(line) for line in (TRANSCRIPT / "transcript.jsonl").read_text().splitlines() if line.strip()]


pytestmark = pytest.mark.skipif(
    not (TRANSCRIPT / "transcript.jsonl").is_file(),
    reason=f"reference fixtures not found: {FIXTURES.resolve()} (the ../shared folder next to the repository)",
)


def _kind(v):
    if isinstance(v, bool) or v is None:
        return type(v).__name__
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, torch.Tensor):
        return f"tensor[{v.dtype}, {list(v.shape)}]"
    return type(v).__name__


def _same_shape(path: str, recorded, ours, where: str = "") -> list[str]:
    """Differences between a recorded reply and ours: missing keys and kinds that differ (numbers may differ)."""
    if (path, where) in ALLOWED:
        return []
    if isinstance(recorded, dict):
        if not isinstance(ours, dict):
            return [f"{where or '<root>'}: recorded a dict, ours is {_kind(ours)}"]
        out = []
        for k, v in recorded.items():
            key = f"{where}.{k}" if where else str(k)
            if (path, key) in ALLOWED:
                continue
            if k not in ours:
                out.append(f"{key}: missing in our reply")
            else:
                out += _same_shape(path, v, ours[k], key)
        return out
    if isinstance(recorded, list):
        if not isinstance(ours, list):
            return [f"{where}: recorded a list, ours is {_kind(ours)}"]
        if recorded and ours:
            return _same_shape(path, recorded[0], ours[0], f"{where}[0]")
        return [] if bool(recorded) == bool(ours) else [f"{where}: recorded {len(recorded)} items, ours {len(ours)}"]
    if isinstance(recorded, torch.Tensor):
        ok = isinstance(ours, torch.Tensor) and ours.dtype == recorded.dtype and ours.shape == recorded.shape
        return [] if ok else [f"{where}: recorded {_kind(recorded)}, ours {_kind(ours)}"]
    if recorded is None:
        return []  # null in the reference's reply: any value (or null) in ours
    return [] if _kind(recorded) == _kind(ours) else [f"{where}: recorded {_kind(recorded)}, ours {_kind(ours)}"]


@pytest.fixture(scope="module")
def server(tiny_model_dir, tmp_path_factory, serve_server):
    work = tmp_path_factory.mktemp("replay")
    args = ("--model", str(tiny_model_dir), "--max-seq-len", "64")
    with serve_server(work, *args) as s:
        s.work = work
        yield s


def _decode_frame(content: bytes):
    from arctic_platform import wire

    return wire.decode(content)


class _Undecodable:
    """A recorded frame our wire could not decode (reported as a failure, the replay goes on)."""

    def __init__(self, error):
        self.error = error


def _decode_recorded(name: str):
    try:
        return _decode_frame((TRANSCRIPT / name).read_bytes())
    except Exception as e:  # reported with the call number
        return _Undecodable(e)


def test_replay_every_recorded_call(server, tiny_model_dir):
    entries = _entries()
    assert len(entries) == 55
    ids: dict[int, int] = {}  # recorded job id -> ours
    ckpt = str(server.work / "ckpt")
    failures = []

    def mapped(v):
        return ids.get(v, v) if isinstance(v, int) and not isinstance(v, bool) else v

    with httpx.Client(base_url=server.url, timeout=120) as http:
        for e in entries:
            n, method, path = e["n"], e["method"], e["path"]
            params = {k: mapped(v) for k, v in (e.get("params") or {}).items()}
            if path.startswith("/job/"):
                path = f"/job/{mapped(int(path.rsplit('/', 1)[1]))}"
            kw: dict = {"params": params}
            if "request_json" in e:
                body = e["request_json"]
                if path == "/initialize":
                    body = dict(body, model_name=str(tiny_model_dir))
                    if body.get("checkpoint_path"):
                        body["checkpoint_path"] = ckpt
                if path == "/operation":
                    p = dict(body.get("payload") or {})
                    if "source_sub_job_id" in p:
                        p["source_sub_job_id"] = mapped(p["source_sub_job_id"])
                    if "target_sub_job_ids" in p:
                        p["target_sub_job_ids"] = [mapped(x) for x in p["target_sub_job_ids"]]
                    body = dict(body, payload=p)
                    if "sub_job_id" in body:
                        body["sub_job_id"] = mapped(body["sub_job_id"])
                kw["content"] = json.dumps(body).encode()
                kw["headers"] = {"Content-Type": "application/json"}
            elif "request_frame" in e:
                kw["content"] = (TRANSCRIPT / e["request_frame"]).read_bytes()
                kw["headers"] = {"Content-Type": "application/octet-stream"}
            r = http.request(method, path, **kw)
            expected = {e["status"], 200} if n == 17 else {e["status"]}
            if r.status_code not in expected:
                failures.append(f"call {n} {method} {path}: status {r.status_code} (recorded {e['status']}): {r.text}")
                continue
            if r.status_code >= 400:
                detail = r.json().get("detail")
                if not (isinstance(detail, str) and detail):
                    failures.append(f"call {n}: error without a one-line detail: {r.text}")
                continue
            octet = r.headers.get("content-type", "").startswith("application/octet-stream")
            ours = _decode_frame(r.content) if octet else r.json()
            if "response_frame" in e:
                if not octet:
                    failures.append(f"call {n} {path}: recorded a frame, ours is {r.headers.get('content-type')}")
                    continue
                recorded = _decode_recorded(e["response_frame"])
            else:
                recorded = e.get("response_json")
            if n == 17 and r.status_code == 200:
                recorded = _decode_recorded("016.response.dssst1")  # the same call as 16, on the log_prob job
            if isinstance(recorded, _Undecodable):
                failures.append(f"call {n} {path}: cannot decode the recorded reply frame: {recorded.error}")
                continue
            failures += [f"call {n} {method} {path}: {d}" for d in _same_shape(e["path"], recorded, ours)]
            if path == "/initialize":
                ids[recorded["job_id"]] = ours["job_id"]
                deadline = time.monotonic() + 120
                while http.get(f"/job/{ours['job_id']}").json()["status"] == "PENDING":
                    assert time.monotonic() < deadline, f"job {ours['job_id']} still PENDING"
                    time.sleep(0.05)
            if path.startswith("/job/") and recorded.get("status") == "RUNNING" and ours.get("status") != "RUNNING":
                failures.append(f"call {n}: status {ours.get('status')!r}, the reference client waits for 'RUNNING'")
    assert not failures, "\n".join(failures)
