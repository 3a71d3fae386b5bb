# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""A FAKE of Snowflake Cortex's SnowAPI training endpoint, for tests: the real service is unreachable from here.

Written from Arctic-Platform's ``cortex-client/DSS-Server-API-Specification.md`` (its sections in brackets; the
project's summary is ``../shared/docs/cortex-snowapi.md``), not from any client, so it can hold our transport and the
reference's to the same reading of the specification. An HTTP/1.1 server on 127.0.0.1 (asyncio streams, optionally
TLS) serving ``/api/v2/databases/{db}/schemas/{schema}/{endpoint}``:

* PAT auth when configured [2.2] (401 otherwise); every exchange recorded (headers, body, status, reply, the fault
  injected), so tests can decode what was sent and check that no PAT leaked anywhere else;
* create [5.1] validating ``sub_job_configs`` as the typed client does [8.1-8.3]; get [5.2] walking a scripted job
  state machine (``pending -> placing -> initializing -> running`` by default; ``failed`` with a reason,
  ``terminated``, ``cancelled``; ``JOB_STATE_*`` / ``JOB_TYPE_*`` spellings on request); cancel [5.5] (idempotent
  while cancelled, 409 once failed or terminated);
* ``forward-backward`` and ``generate`` as DSSST1 octet bodies [2.3], plain or chunked [9.3]: chunk groups keyed by
  ``chunk_group_id`` and bound to ``frame_sha256``; an unknown group must start at chunk 0 (else 409
  ``chunk_group_restart_required``), a different hash / count / payload is 409 ``chunk_group_conflict``, a final
  chunk with chunks missing is 409 ``chunk_group_missing_chunks``; a repeated final chunk gets a new request id bound
  to the same execution (at most once). A plain frame has no identity: sent twice, it runs twice;
* ``step``, ``save``, ``load``, ``operation`` as JSON [6.2-6.4, 7]; ``reset-prefix-cache``, ``cancel-request`` and
  ``tail-logs`` answer inline, the others with a ``request_id``; ``forward`` is refused (not end-to-end compatible,
  [7.1]);
* request polling [6.8] with a request state machine (``pending -> running -> done``, optionally
  ``REQUEST_STATE_*``), and results inline, as one base64 DSSST1 frame [9.4], or as ``result_chunk`` events paged by
  ``next_cursor`` with their sha256 [9.5];
* injected faults (:class:`Fault`): an HTTP status (429, 5xx, ...), a connection dropped before the body is read or
  after it was read and processed, a chunk group lost at chunk k (a restart), a gateway-wrapped error body, a
  corrupted result chunk; and connections refused altogether (:meth:`FakeSnowAPI.refuse_connections`).

Model work is delegated to a backend: :class:`CannedBackend` (deterministic results, for transport tests) or
:class:`EmbeddedBackend`, which fronts a real embedded Arctic RL server through the on-prem client, turning the
forward-backward contract (:mod:`arctic_platform.client.transports.cortex_body`) back into verl's batch so the update
trains with real gradients. ``python fake_snowapi.py --backend-url URL --port-file F`` runs it as a process.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import ssl
import sys
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional
from urllib.parse import parse_qs, unquote, urlsplit

OCTET = "application/octet-stream"
MAX_BODY = 60 * 1024 * 1024
JOB_LIVE = ("pending", "placing", "initializing", "running")
CREATE_TYPES = ("training", "sampling", "log_probability")
SEGMENT = {"training": "training", "sampling": "sampling", "log_probability": "log_prob"}
INLINE_OPS = ("reset-prefix-cache", "cancel-request", "tail-logs")


@dataclass
class Exchange:
    n: int
    method: str
    path: str
    """Below the prefix (``/{job}/step``), or the full path when it is outside it."""
    query: dict
    headers: dict
    body: bytes
    route: str = ""
    """``create``, ``get_job``, ``cancel``, ``forward-backward``, ``generate``, ``step``, ``save``, ``load``,
    ``operation``, ``poll``, ``list`` (or ``unknown``)."""
    status: Optional[int] = None
    reply: bytes = b""
    injected: str = ""

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def reply_json(self) -> Any:
        return json.loads(self.reply) if self.reply else None


@dataclass
class Fault:
    """An injected failure of the ``times`` requests to ``route`` after the first ``after`` of them.

    ``action``: ``status`` (answer ``status`` with ``body``), ``drop_before_body`` (close after the headers, the body
    unread), ``drop_after_body`` (process the request, then close without a reply: the reply is lost),
    ``restart_group`` (lose the chunk group when chunk ``chunk`` arrives: the service restarted), ``corrupt_chunk``
    (a poll's result_chunk gets a wrong sha256). ``chunk``: only octet posts of that chunk index. ``wrap``: the error
    body as JSON inside a string (a gateway's wrapping).
    """

    route: str
    action: str = "status"
    status: int = 503
    body: Any = None
    times: int = 1
    after: int = 0
    chunk: Optional[int] = None
    wrap: bool = False
    seen: int = 0
    fired: int = 0


class _Reply(Exception):
    def __init__(self, status: int, body: Any):
        super().__init__(status)
        self.status, self.body = status, body


@dataclass
class Group:
    sha: str
    total: int
    size: int
    op: str
    frames: dict = field(default_factory=dict)
    """chunk_idx -> the chunk frame."""
    execution: Optional[str] = None
    """The request id of the execution the group scheduled (repeats get new ids bound to it)."""


@dataclass
class Request:
    rid: str
    op: str
    job_id: str
    task: Any = None
    polls: int = 0
    result: Any = None
    error: Optional[str] = None
    same_as: Optional[str] = None
    chunks: Optional[list] = None
    """The result as result chunks, encoded once (``chunks`` form)."""


@dataclass
class Job:
    job_id: str
    body: dict
    script: list
    reason: str = ""
    gets: int = 0
    status: str = "pending"
    cancelled: bool = False
    ready: Any = None
    """EmbeddedBackend: the task that starts the real jobs."""
    groups: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------ backends


class CannedBackend:
    """Deterministic results without a model (transport tests): step counts, a loss from the frame's hash."""

    def __init__(self):
        self.steps = 0
        self.saves = 0
        self.calls: list[tuple[str, Any]] = []
        """(op, what it got: the decoded frame tree or the JSON body)."""

    async def create(self, job: Job) -> None:
        return None

    async def cancel(self, job: Job) -> None:
        return None

    async def run(self, job: Job, op: str, body: Any) -> Any:
        import torch

        self.calls.append((op, body))
        if op == "forward-backward":
            digest = hashlib.sha256(repr(sorted(body.keys())).encode()).digest()
            return {
                "job_id": job.job_id,
                "avg_loss": 0.5 + digest[0] / 1000.0,
                "metrics": {},
                "post_process_outputs": {},
            }
        if op == "step":
            self.steps += 1
            return {"global_steps": self.steps, "last_lr": body.get("learning_rate", 1e-5)}
        if op == "save":
            self.saves += 1
            return {"checkpoint_id": f"global_step{self.steps}", "checkpoint_path": f"/stage/{job.job_id}",
                    "checkpoint_tag": f"save{self.saves}"}  # fmt: skip
        if op == "generate":
            results = []
            for i, p in enumerate(body["prompts"]):
                n = int((body.get("sampling_params") or {}).get("max_tokens", 3))
                ids = torch.arange(n, dtype=torch.long) + 10 + i
                r = {"text": f"out{i}", "token_ids": ids, "finish_reason": "length"}
                if (body.get("sampling_params") or {}).get("logprobs") is not None:
                    r["logprobs"] = [-0.5] * n
                results.append(r)
            return {"job_id": job.job_id, "results": results}
        if op == "weight-sync":
            return {"status": "ok", "source": body["payload"]["source_sub_job_id"]}
        if op == "load":
            return {"checkpoint_id": body.get("checkpoint_id")}
        if op == "reset-prefix-cache":
            return {"reset": True}
        raise _Reply(400, {"message": f"unknown operation {op}", "code": "400"})


def _unshift(shifted):
    """The inverse of the client's shift_left: column ``i + 1`` gets column ``i`` (column 0 gets 0)."""
    import torch

    full = torch.zeros_like(shifted)
    full[:, 1:] = shifted[:, :-1]
    return full


class EmbeddedBackend:
    """Fronts a real embedded Arctic RL server (through the on-prem client): the update trains for real."""

    def __init__(self, url: str):
        self.url = url
        self.clients: dict[str, Any] = {}
        self.records: list[dict] = []
        """What the embedded server answered, per call (``op``, the parts of the reply tests read)."""

    async def create(self, job: Job) -> None:
        from arctic_platform.client import ArcticRLClientConfig, AsyncArcticRLClient

        subs = {s["job_type"]: s for s in job.body["sub_job_configs"]}
        tr = subs.get("training", {}).get("training_config")
        inf = subs.get("sampling", {}).get("inference_config")
        first = next(iter(subs.values()))
        lens = [c["max_seq_len"] for c in (tr, inf) if c]
        training = {}
        if tr:
            import tempfile

            o = tr["optimizer"]
            ds = tr.get("ds_config") or {}
            training = {
                "checkpoint_path": tempfile.mkdtemp(prefix=f"fake-cortex-{job.job_id}-"),  # the service's own store
                "optimizer": {
                    **{k: o[k] for k in ("lr", "betas", "eps", "weight_decay") if k in o},
                    "grad_clip": tr.get("gradient_clipping") or None,
                },
                "train_batch_size": tr["train_batch_size"],
                "micro_batch_size": ds.get("train_micro_batch_size_per_gpu"),
                "ds_worker_config": {
                    "attn_implementation": tr.get("attn_implementation") or "sdpa",
                    "enable_gradient_checkpointing": bool(tr.get("activation_checkpointing", False)),
                },
            }
        cfg = ArcticRLClientConfig(
            model_name=first["model_name"],
            seed=first.get("seed"),
            max_seq_len=min(lens),
            device="cpu",
            training_gpus=tr["n_gpus"] if tr else 0,
            sampling_gpus=inf["n_gpus"] if inf else 0,
            log_prob_gpus=0,
            request_timeout=600,
            training=training,
            sampling={"vllm_config": (inf or {}).get("vllm_config") or {}},
            backend={"type": "onprem", "url": self.url},
        )
        client = AsyncArcticRLClient(cfg)
        await client.start()
        self.clients[job.job_id] = client

    async def cancel(self, job: Job) -> None:
        client = self.clients.pop(job.job_id, None)
        if client is not None:
            await client.close()

    async def run(self, job: Job, op: str, body: Any) -> Any:
        client = self.clients[job.job_id]
        if op == "forward-backward":
            return await self._forward_backward(job, client, body)
        if op == "step":
            out = await client.step(learning_rate=body.get("learning_rate"))
            self.records.append({"op": "step", "learning_rate": body.get("learning_rate"), **out["metrics"]})
            return {"global_steps": out["global_steps"], "last_lr": out["metrics"]["last_lr"]}  # [6.2]: no metrics
        if op == "generate":
            import torch

            results = await client.generate(body["prompts"], body.get("sampling_params") or {})
            out = []
            for r in results:  # what the specification names [6.6] (+ log-probs, which a backend may add)
                item = {"text": r["text"], "token_ids": torch.tensor(r["token_ids"], dtype=torch.long),
                        "finish_reason": r["finish_reason"]}  # fmt: skip
                if r.get("logprobs") is not None:
                    item["logprobs"] = r["logprobs"]
                out.append(item)
            return {"job_id": job.job_id, "results": out}
        if op == "weight-sync":
            out = await client.sync_weights()
            self.records.append({"op": "weight-sync", "policy_version": out.get("policy_version")})
            return {"status": "ok"}
        if op == "reset-prefix-cache":
            await client.reset_prefix_cache()
            return {"reset": True}
        raise _Reply(501, {"message": f"{op} is not available on this fake's embedded backend"})

    async def _forward_backward(self, job: Job, client, tree: dict) -> dict:
        """The grpo contract back into verl's batch for the embedded server's verl loss."""
        kw, ctx, proc = tree["kwargs"], tree["context"], tree["processing"]
        cfg = proc["config"]
        ids, P = kw["input_ids"], int(ctx["prompt_length"])
        mask = _unshift(ctx["loss_mask"])
        batch = {
            "input_ids": ids,
            "attention_mask": kw["attention_mask"],
            "prompts": ids[:, :P],
            "responses": ids[:, P:],
            "response_mask": mask,
            "loss_mask": mask,
            "advantages": _unshift(ctx["advantages"]),
        }
        if "position_ids" in kw:
            batch["position_ids"] = kw["position_ids"]
        meta = {"temperature": float(cfg["temperature"]), "max_prompt_len": P, "max_response_len": ids.shape[1] - P}
        if "old_log_probs_shifted" in ctx:
            batch["old_log_probs"] = _unshift(ctx["old_log_probs_shifted"]) * mask
            old_from = "context"
        else:  # the grpo loss's rule: the current policy's log-probs, detached
            fwd = await client.forward({k: batch[k] for k in ("input_ids", "attention_mask", "prompts")}, meta)
            batch["old_log_probs"] = _unshift(fwd["batch"]["logprobs"].float()) * mask
            old_from = "current policy"
        actor = {
            "clip_ratio_low": cfg["eps_clip"],
            "clip_ratio_high": cfg["eps_clip_higher"],
            "clip_ratio_c": cfg["c_clip"],
            "loss_agg_mode": cfg["loss_agg_mode"],
            "entropy_coeff": cfg["entropy_coeff"],
            "policy_loss": {"loss_mode": "vanilla"},
            "use_kl_loss": False,
        }
        if cfg.get("loss_scale_factor") is not None:
            actor["loss_scale_factor"] = cfg["loss_scale_factor"]
        meta.update(
            actor_config=actor, global_batch_size=cfg["global_batch_size"], batch_num_tokens=cfg["batch_num_tokens"]
        )
        out = await client.forward_backward(batch, meta)
        self.records.append(
            {"op": "forward-backward", "prompt_length": P, "old_from": old_from, "avg_loss": out["avg_loss"],
             "temperature": meta["temperature"], "rows": int(ids.shape[0]), **out["metrics"]}
        )  # fmt: skip
        return {"job_id": job.job_id, "avg_loss": out["avg_loss"], "metrics": {}, "post_process_outputs": {}}


# ------------------------------------------------------------------------------------------------ the service


class FakeSnowAPI:
    """The fake service (see the module docstring). Use as a context manager (its own thread and event loop), or
    ``await serve()`` in a loop of your own.

    Args:
        backend: :class:`CannedBackend` (default) or :class:`EmbeddedBackend`.
        pat: require this PAT (and the token-type header) on every call.
        job_script: the states successive ``GET /{job}`` see (the last one repeats); ``running`` is ready.
        reason: the job's ``reason`` (shown with ``failed``).
        result_form: ``inline``, ``base64`` or ``chunks`` (a result with tensors is never inline: base64 then).
        result_forms: per operation (``forward-backward``, ``step``, ``generate``, ...), over ``result_form``.
        result_chunk_bytes / max_events: the size of result chunks (above 8 KiB: a chunk frame's own overhead) and
            the events per poll page.
        polls_in_flight: polls that see ``pending`` / ``running`` before a request is done.
        request_error: ``{op: error}``: those requests end ``failed`` with that error.
        enum_spellings: ``JOB_STATE_*``, ``JOB_TYPE_*`` and ``REQUEST_STATE_*`` instead of short names.
        reset_prefix_cache_async: answer ``reset-prefix-cache`` with a request id (the specification says inline).
        tls: an ``ssl.SSLContext`` to serve HTTPS with.
    """

    def __init__(
        self,
        *,
        backend: Any = None,
        database: str = "DB",
        schema: str = "SCH",
        endpoint: str = "cortex-training",
        pat: Optional[str] = None,
        job_script: tuple = ("pending", "placing", "initializing", "running"),
        reason: str = "",
        result_form: str = "inline",
        result_forms: Optional[dict] = None,
        result_chunk_bytes: int = 0,
        max_events: int = 16,
        polls_in_flight: int = 1,
        request_error: Optional[dict] = None,
        enum_spellings: bool = False,
        reset_prefix_cache_async: bool = False,
        tls: Optional[ssl.SSLContext] = None,
        host: str = "127.0.0.1",
    ):
        self.backend = backend if backend is not None else CannedBackend()
        self.prefix = f"/api/v2/databases/{database}/schemas/{schema}/{endpoint}"
        self.pat = pat
        self.job_script = list(job_script)
        self.reason = reason
        self.result_form = result_form
        self.result_forms = dict(result_forms or {})
        self.result_chunk_bytes = result_chunk_bytes
        self.max_events = max_events
        self.polls_in_flight = polls_in_flight
        self.request_error = dict(request_error or {})
        self.enum_spellings = enum_spellings
        self.reset_prefix_cache_async = reset_prefix_cache_async
        self.tls = tls
        self.host = host
        self.faults: list[Fault] = []
        self.exchanges: list[Exchange] = []
        self.jobs: dict[str, Job] = {}
        self.requests: dict[str, Request] = {}
        self.executions: list[tuple[str, Optional[str]]] = []
        """(operation, chunk group id or None): one per execution of the backend."""
        self.url = ""
        self.port = 0
        self._server = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._ready = threading.Event()
        self._conns: set = set()

    # ---------------------------------------------------------------- lifecycle
    def __enter__(self) -> FakeSnowAPI:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._ready.wait(30), "the fake did not start"
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self.serve())

    async def serve(self, port: int = 0) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._server = await asyncio.start_server(self._serve, self.host, port, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]
        self.url = f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"
        self._ready.set()
        await self._stop.wait()
        if self._server is not None:
            self._server.close()
        for t in list(self._conns):  # keep-alive connections a client left open
            t.cancel()
        await asyncio.gather(*self._conns, return_exceptions=True)
        for job in list(self.jobs.values()):
            if not job.cancelled:
                await self.backend.cancel(job)

    def _sync(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    def refuse_connections(self) -> None:
        """Stop listening: new connections are refused (the client sees a connect error) until
        :meth:`accept_connections`."""

        async def close():
            self._server.close()
            await self._server.wait_closed()
            self._server = None

        self._sync(close())

    def accept_connections(self) -> None:
        async def reopen():
            self._server = await asyncio.start_server(self._serve, self.host, self.port, ssl=self.tls)

        self._sync(reopen())

    def add_fault(self, route: str, action: str = "status", **kw) -> Fault:
        f = Fault(route, action, **kw)
        self.faults.append(f)
        return f

    def calls(self, route: str) -> list[Exchange]:
        return [e for e in self.exchanges if e.route == route]

    # ---------------------------------------------------------------- HTTP
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._conns.add(task)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                parts = urlsplit(target)
                path = unquote(parts.path)
                ex = Exchange(len(self.exchanges) + 1, method, path, parse_qs(parts.query), headers, b"")
                ex.route, job_id, sub = self._route(method, path)
                if ex.path.startswith(self.prefix):
                    ex.path = ex.path[len(self.prefix) :]
                self.exchanges.append(ex)
                length = int(headers.get("content-length", "0") or 0)
                if self._fault(ex.route, "head") is not None:
                    ex.injected = "dropped before the body"
                    return
                if length > MAX_BODY:
                    status, body = 413, {"message": f"request body of {length} bytes is over 60 MiB", "code": "413"}
                    ex.body = b""
                    await self._write(writer, ex, status, body)
                    return
                ex.body = await reader.readexactly(length) if length else b""
                octet = ex.route in ("forward-backward", "generate")
                fault = self._fault(ex.route, "body", self._chunk_idx(ex.body) if octet else None)
                if fault is not None and fault.action == "status":
                    body = fault.body if fault.body is not None else {"message": "injected", "code": str(fault.status)}
                    if fault.wrap:
                        body = {"message": f"gateway error: {json.dumps(body)}", "code": str(fault.status)}
                    ex.injected = f"HTTP {fault.status}"
                    await self._write(writer, ex, fault.status, body)
                    continue
                try:
                    status, body = 200, await self._handle(ex, job_id, sub, fault)
                except _Reply as r:
                    status, body = r.status, r.body
                    if fault is not None and fault.wrap:
                        body = {"message": f"gateway error: {json.dumps(body)}", "code": str(status)}
                if fault is not None and fault.action == "drop_after_body":
                    ex.injected = "dropped after the body"
                    ex.status, ex.reply = status, json.dumps(body).encode()
                    return
                await self._write(writer, ex, status, body)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._conns.discard(task)
            writer.close()

    async def _write(self, writer, ex: Exchange, status: int, body: Any) -> None:
        reply = json.dumps(body).encode()
        ex.status, ex.reply = status, reply
        extra = f"x-snowflake-request-id: fake-{ex.n}\r\n" if status >= 400 else ""
        writer.write(
            f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n{extra}content-length: {len(reply)}\r\n\r\n"
            .encode() + reply
        )  # fmt: skip
        await writer.drain()

    def _route(self, method: str, path: str) -> tuple[str, Optional[str], str]:
        if not path.startswith(self.prefix):
            return "unknown", None, ""
        rest = path[len(self.prefix) :]
        if rest in ("", "/"):
            return ("create" if method == "POST" else "list"), None, ""
        seg = rest.lstrip("/").split("/")
        if len(seg) == 1:
            if seg[0].endswith(":cancel") and method == "POST":
                return "cancel", seg[0][: -len(":cancel")], ""
            return ("get_job" if method == "GET" else "unknown"), seg[0], ""
        if len(seg) == 3 and seg[1] == "requests" and method == "GET":
            return "poll", seg[0], seg[2]
        if len(seg) == 2 and method == "POST" and seg[1] in (
            "forward-backward", "generate", "step", "save", "load", "operation",
        ):  # fmt: skip
            return seg[1], seg[0], ""
        return "unknown", seg[0], ""

    @staticmethod
    def _chunk_idx(body: bytes) -> Optional[int]:
        from arctic_platform import wire

        try:
            desc = wire.read_byte_chunk_metadata(body)
        except Exception:
            return None
        return None if desc is None else int(desc.get("chunk_idx", -1))

    def _fault(self, route: str, stage: str, chunk: Optional[int] = None) -> Optional[Fault]:
        """The fault of this request: at ``head`` (the headers read: ``drop_before_body`` only, any chunk) or at
        ``body`` (the body read; an octet post's ``chunk`` index selects faults that name one)."""
        for f in self.faults:
            if f.route != route or f.action in ("restart_group", "corrupt_chunk"):
                continue
            if (f.action == "drop_before_body") != (stage == "head"):
                continue
            if f.chunk is not None and f.chunk != chunk:
                continue
            f.seen += 1
            if f.seen > f.after and f.fired < f.times:
                f.fired += 1
                return f
        return None

    # ---------------------------------------------------------------- handlers
    async def _handle(self, ex: Exchange, job_id: Optional[str], sub: str, fault: Optional[Fault]) -> Any:
        if self.pat is not None:
            auth = ex.headers.get("authorization")
            kind = ex.headers.get("x-snowflake-authorization-token-type")
            if auth != f"Bearer {self.pat}" or kind != "PROGRAMMATIC_ACCESS_TOKEN":
                raise _Reply(
                    401, {"message": "Unauthorized: bad or missing programmatic access token", "code": "390303"}
                )
        r = ex.route
        if r == "unknown":
            raise _Reply(404, {"message": f"no route {ex.method} {ex.path}", "code": "404"})
        if r == "create":
            return await self._create(ex)
        if r == "list":
            return {"jobs": [self._job_view(j) for j in self.jobs.values()]}
        job = self.jobs.get(job_id)
        if job is None:
            raise _Reply(404, {"message": f"job {job_id} not found", "code": "404"})
        if r == "get_job":
            return self._get_job(job)
        if r == "cancel":
            return await self._cancel(job)
        if r == "poll":
            return self._poll(job, sub, ex.query)
        if job.status != "running":
            raise _Reply(409, {"message": f"job {job.job_id} is {job.status}, not running", "code": "409"})
        if r in ("forward-backward", "generate"):
            return self._octet(job, r, ex, fault)
        return self._json_op(job, r, ex)

    def _state(self, s: str, kind: str) -> str:
        return f"{kind}_STATE_{s.upper()}" if self.enum_spellings else s

    async def _create(self, ex: Exchange) -> dict:
        try:
            body = json.loads(ex.body)
        except ValueError:
            raise _Reply(400, {"message": "the body is not JSON", "code": "400"}) from None
        subs = body.get("sub_job_configs") if isinstance(body, dict) else None
        if not isinstance(subs, list) or not subs:
            raise _Reply(400, {"message": "sub_job_configs must be a non-empty list", "code": "400"})
        for i, s in enumerate(subs):
            self._check_sub(i, s)
        job = Job(uuid.uuid4().hex[:8], body, list(self.job_script), self.reason)
        self.jobs[job.job_id] = job
        job.ready = asyncio.ensure_future(self.backend.create(job))
        return {"job_id": job.job_id}

    @staticmethod
    def _check_sub(i: int, s: Any) -> None:
        def bad(why):
            raise _Reply(400, {"detail": [{"loc": ["body", "sub_job_configs", i], "msg": why, "type": "value_error"}]})

        if not isinstance(s, dict):
            bad("must be an object")
        if s.get("job_type") not in CREATE_TYPES:
            bad(f"job_type must be one of {list(CREATE_TYPES)}, got {s.get('job_type')!r}")
        if not s.get("model_name"):
            bad("model_name must be non-empty")
        typed = [k for k in ("training_config", "inference_config") if s.get(k) is not None]
        want = "training_config" if s["job_type"] == "training" else "inference_config"
        if typed != [want]:
            bad(f"a {s['job_type']} sub-job needs exactly {want}, got {typed}")
        c = s[want]
        required = ("optimizer", "max_seq_len", "train_batch_size", "n_gpus") if want == "training_config" else (
            "max_seq_len", "n_gpus")  # fmt: skip
        for k in required:
            v = c.get(k)
            if k == "optimizer":
                if not isinstance(v, dict) or not v:
                    bad("training_config.optimizer must be a non-empty object")
            elif not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                bad(f"{want}.{k} must be an int > 0, got {v!r}")

    def _sub_jobs(self, job: Job, status: str) -> list[dict]:
        out, counts = [], {}
        for s in job.body["sub_job_configs"]:
            t = s["job_type"]
            idx = counts.get(t, 0)
            counts[t] = idx + 1
            cfg_key = "training_config" if t == "training" else "inference_config"
            out.append({
                "sub_job_id": f"{job.job_id}:{SEGMENT[t]}:{idx}",
                "job_type": f"JOB_TYPE_{t.upper()}" if self.enum_spellings else t,
                "status": self._state(status, "JOB"),
                "model_name": s["model_name"],
                cfg_key: s[cfg_key],
            })  # fmt: skip
        return out

    def _job_view(self, job: Job) -> dict:
        return {"job_id": job.job_id, "status": self._state(job.status, "JOB"), "reason": job.reason,
                "created_at": "2026-07-20T18:00:00Z", "updated_at": "2026-07-20T18:00:01Z", "image_tag": "fake",
                "sub_jobs": self._sub_jobs(job, job.status)}  # fmt: skip

    def _get_job(self, job: Job) -> dict:
        if not job.cancelled and job.status in JOB_LIVE:
            nxt = job.script[min(job.gets, len(job.script) - 1)]
            job.gets += 1
            if nxt == "running" and job.ready is not None and not job.ready.done():
                nxt = "initializing"  # the backend is still starting its engines
                job.gets -= 1
            elif job.ready is not None and job.ready.done() and job.ready.exception() is not None:
                nxt, job.reason = "failed", f"sub-job failed to start: {job.ready.exception()}"
            job.status = nxt
        return self._job_view(job)

    async def _cancel(self, job: Job) -> dict:
        if job.status in ("failed", "terminated"):
            raise _Reply(409, {"message": f"job {job.job_id} is {job.status}; nothing to cancel", "code": "409"})
        if not job.cancelled:
            job.cancelled, job.status = True, "cancelled"
            if job.ready is not None:
                await asyncio.gather(job.ready, return_exceptions=True)
            await self.backend.cancel(job)
        return {}

    # ---- data plane
    def _schedule(self, job: Job, op: str, body: Any, group: Optional[str] = None) -> str:
        rid = f"{job.job_id}:req:{uuid.uuid4().hex[:10]}"
        req = Request(rid, op, job.job_id)
        self.requests[rid] = req
        self.executions.append((op, group))

        async def work():
            if op in self.request_error:
                req.error = self.request_error[op]
                return
            try:
                req.result = await self.backend.run(job, op, body)
            except _Reply as e:
                req.error = json.dumps(e.body)
            except Exception as e:  # the backend failed: the request fails with its reason
                req.error = f"{type(e).__name__}: {e}"

        req.task = asyncio.ensure_future(work())
        return rid

    def _bind(self, job: Job, original: str) -> str:
        """A new request id resolving to the execution ``original`` (a repeated final chunk)."""
        rid = f"{job.job_id}:req:{uuid.uuid4().hex[:10]}"
        self.requests[rid] = Request(rid, self.requests[original].op, job.job_id, same_as=original)
        return rid

    def _octet(self, job: Job, op: str, ex: Exchange, fault: Optional[Fault]) -> dict:
        from arctic_platform import wire

        if ex.headers.get("content-type", "").split(";")[0].strip() != OCTET:
            raise _Reply(415, {"message": f"{op} takes {OCTET} (a DSSST1 frame)", "code": "415"})
        try:
            desc = wire.read_byte_chunk_metadata(ex.body)
        except wire.WireError as e:
            raise _Reply(400, {"message": f"not a DSSST1 frame: {e}", "code": "400"}) from None
        if desc is None:  # a plain frame: no identity, so nothing to de-duplicate
            return {"request_id": self._schedule(job, op, self._decode(ex.body), None), "job_id": job.job_id}
        gid, idx = desc.get("chunk_group_id"), int(desc["chunk_idx"])
        if not gid or desc.get("kind") != "request":
            raise _Reply(400, {"message": "a request chunk needs a chunk_group_id", "code": "400"})
        for f in self.faults:
            if f.route == op and f.action == "restart_group" and f.chunk == idx and f.fired < f.times:
                f.fired += 1
                job.groups.pop(gid, None)  # the service restarted and lost the group
                ex.injected = f"group lost at chunk {idx}"
        group = job.groups.get(gid)

        def group_error(code: str, message: str, **extra):
            raise _Reply(409, {"message": message, "code": code, "chunk_group_id": gid, **extra})

        if group is None:
            if idx != 0:
                group_error("chunk_group_restart_required", f"unknown chunk group {gid}: restart from chunk 0")
            group = job.groups[gid] = Group(desc["frame_sha256"], int(desc["total_chunks"]),
                                            int(desc["frame_size_bytes"]), op)  # fmt: skip
        if (desc["frame_sha256"], int(desc["total_chunks"]), int(desc["frame_size_bytes"])) != (
            group.sha, group.total, group.size,
        ):  # fmt: skip
            group_error("chunk_group_conflict", f"chunk group {gid} was bound to another frame")
        if idx in group.frames and group.frames[idx] != ex.body:
            group_error("chunk_group_conflict", f"chunk {idx} of group {gid} differs from the one received")
        group.frames[idx] = ex.body
        if idx != group.total - 1:
            return {"chunk_group_id": gid, "chunk_idx": idx, "received": len(group.frames)}
        missing = sorted(set(range(group.total)) - set(group.frames))
        if missing:
            group_error("chunk_group_missing_chunks", "request chunk group is missing chunks", missing=missing)
        if group.execution is not None:  # the same group again: the same execution, never a second one
            return {"request_id": self._bind(job, group.execution), "job_id": job.job_id}
        try:
            frame = wire.decode_byte_chunks([group.frames[i] for i in range(group.total)], kind="request")
        except wire.WireError as e:
            raise _Reply(400, {"message": f"chunk group {gid} does not reassemble: {e}", "code": "400"}) from None
        group.execution = self._schedule(job, op, self._decode(frame), gid)
        return {"request_id": group.execution, "job_id": job.job_id}

    @staticmethod
    def _decode(frame: bytes) -> Any:
        from arctic_platform import wire

        try:
            return wire.decode(frame)
        except wire.WireError as e:
            raise _Reply(400, {"message": f"the frame does not decode: {e}", "code": "400"}) from None

    def _json_op(self, job: Job, route: str, ex: Exchange) -> dict:
        if ex.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            raise _Reply(415, {"message": f"{route} takes application/json", "code": "415"})
        try:
            body = json.loads(ex.body) if ex.body else {}
        except ValueError:
            raise _Reply(400, {"message": "the body is not JSON", "code": "400"}) from None
        if route == "step":
            lr = body.get("learning_rate")
            if set(body) - {"learning_rate"} or (lr is not None and not isinstance(lr, (int, float))):
                raise _Reply(400, {"message": f"step takes only an optional learning_rate, got {body}", "code": "400"})
            return {"request_id": self._schedule(job, "step", body), "job_id": job.job_id}
        if route == "save":
            extra = sorted(set(body) - {"checkpoint_id", "checkpoint_type"})
            if extra:
                raise _Reply(400, {"message": f"unknown save fields {extra}", "code": "400"})
            if body.get("checkpoint_type", "resumable") not in ("resumable", "weights-only"):
                raise _Reply(400, {"message": "checkpoint_type is resumable or weights-only", "code": "400"})
            return {"request_id": self._schedule(job, "save", body), "job_id": job.job_id}
        if route == "load":
            if not body.get("checkpoint_id"):
                raise _Reply(400, {"message": "checkpoint_id is required", "code": "400"})
            return {"request_id": self._schedule(job, "load", body), "job_id": job.job_id}
        return self._operation(job, body)

    def _operation(self, job: Job, body: dict) -> dict:
        op = body.get("operation_type")
        if not op:
            raise _Reply(400, {"message": "operation_type is required", "code": "400"})
        ids = {s["sub_job_id"]: s["job_type"].lower().removeprefix("job_type_") for s in self._sub_jobs(job, "running")}
        sid, stype = body.get("sub_job_id"), body.get("sub_job_type")
        if sid is not None and sid not in ids:
            raise _Reply(400, {"message": f"sub_job_id {sid} is not a sub-job of {job.job_id}", "code": "400"})
        if sid is not None and stype is not None and ids[sid] != stype:
            raise _Reply(400, {"message": f"sub_job_id {sid} is a {ids[sid]} sub-job, not {stype}", "code": "400"})
        p = body.get("payload") or {}
        if op == "weight-sync":
            src, targets = p.get("source_sub_job_id"), p.get("target_sub_job_ids") or []
            if ids.get(src) != "training" or not targets or any(ids.get(t) != "sampling" for t in targets):
                raise _Reply(400, {"message": f"weight-sync from {src} to {targets}: not this job's training -> "
                                   "sampling sub-jobs", "code": "400"})  # fmt: skip
            extra = set(p) - {"source_sub_job_id", "target_sub_job_ids", "weight_format", "cuda_ipc", "low_memory"}
            if extra:
                raise _Reply(400, {"message": f"unknown weight-sync payload fields {sorted(extra)}", "code": "400"})
            return {"request_id": self._schedule(job, "weight-sync", body), "job_id": job.job_id}
        if op == "reset-prefix-cache":
            if self.reset_prefix_cache_async:
                return {"request_id": self._schedule(job, "reset-prefix-cache", body), "job_id": job.job_id}
            self.executions.append(("reset-prefix-cache", None))
            if isinstance(self.backend, EmbeddedBackend):
                asyncio.ensure_future(self.backend.run(job, "reset-prefix-cache", body))
            return {"reset": True, "sub_job_id": sid or f"{job.job_id}:sampling:0"}  # inline [7]
        if op in ("cancel-request", "tail-logs"):
            return {"ok": True} if op == "cancel-request" else {"entries": [], "next_cursor": "c1", "eof": True}
        if op == "forward":
            raise _Reply(
                501, {"message": "forward is not end-to-end compatible on this service (spec 7.1)", "code": "501"}
            )
        raise _Reply(400, {"message": f"unknown operation_type {op!r}", "code": "400"})

    def _poll(self, job: Job, rid: str, query: dict) -> dict:
        req = self.requests.get(rid)
        if req is None or req.job_id != job.job_id:
            raise _Reply(404, {"message": f"request {rid} not found", "code": "404"})
        base = self.requests[req.same_as] if req.same_as else req
        req.polls += 1
        view = {"request_id": rid, "created_at": "2026-07-20T18:00:00Z", "updated_at": "2026-07-20T18:00:01Z",
                "result": {}, "error": "", "events": [], "next_cursor": ""}  # fmt: skip
        if req.polls <= self.polls_in_flight or not base.task.done():
            view["status"] = self._state("pending" if req.polls == 1 else "running", "REQUEST")
            return view
        if base.error is not None:
            view.update(status=self._state("failed", "REQUEST"), error=base.error)
            return view
        view["status"] = self._state("done", "REQUEST")
        self._result_into(view, base, query)
        return view

    def _result_into(self, view: dict, req: Request, query: dict) -> None:
        from arctic_platform import wire

        result = req.result
        form = self.result_forms.get(req.op, self.result_form)
        if form == "inline" and _has_tensor(result):
            form = "base64"
        if form == "inline":
            view["result"] = result
            return
        if form == "base64":
            view["result"] = {"content_type": OCTET, "encoding": "base64", "wire_format": "DSSST1",
                              "payload_b64": base64.b64encode(wire.encode(result)).decode()}  # fmt: skip
            return
        if req.chunks is None:
            req.chunks = wire.encode_result_chunks(result, max_bytes=self.result_chunk_bytes)
        chunks = req.chunks
        start = int((query.get("cursor") or ["0"])[0] or 0)
        per = int((query.get("max_events") or [self.max_events])[0])
        page = chunks[start : start + per]
        events = []
        for c in page:
            sha = hashlib.sha256(c).hexdigest()
            for f in self.faults:
                if f.route == "poll" and f.action == "corrupt_chunk" and f.fired < f.times:
                    f.fired += 1
                    sha = "0" * 64
            events.append({"type": "result_chunk", "payload_b64": base64.b64encode(c).decode(), "payload_sha256": sha})
        view["events"] = events
        view["next_cursor"] = str(start + len(page)) if start + len(page) < len(chunks) else ""


def _has_tensor(obj: Any) -> bool:
    import torch

    if isinstance(obj, torch.Tensor):
        return True
    if isinstance(obj, dict):
        return any(_has_tensor(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(_has_tensor(v) for v in obj)
    return False


# ------------------------------------------------------------------------------------------------ as a process


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="a fake SnowAPI (cortex-training) on 127.0.0.1, for tests")
    ap.add_argument("--backend-url", required=True, help="the embedded Arctic RL server it fronts")
    ap.add_argument("--port-file", required=True, help="written with the port once listening")
    ap.add_argument("--record", help="JSON lines: every exchange and the backend's records, written at exit")
    ap.add_argument("--result-form", default="inline", choices=("inline", "base64", "chunks"))
    ap.add_argument("--result-chunk-bytes", type=int, default=0)
    ap.add_argument("--max-events", type=int, default=16)
    ap.add_argument(
        "--fault",
        action="append",
        default=[],
        help="ROUTE:ACTION[:STATUS[:AFTER]] (e.g. step:status:503, forward-backward:drop_after_body)",
    )
    args = ap.parse_args(argv)  # fmt: skip
    fake = FakeSnowAPI(
        backend=EmbeddedBackend(args.backend_url),
        result_form=args.result_form,
        result_chunk_bytes=args.result_chunk_bytes,
        max_events=args.max_events,
    )
    for spec in args.fault:
        route, action, *rest = spec.split(":")
        fake.add_fault(route, action, status=int(rest[0]) if rest else 503, after=int(rest[1]) if len(rest) > 1 else 0)

    async def run():
        import signal
        from pathlib import Path

        task = asyncio.ensure_future(fake.serve())
        while not fake.port:
            await asyncio.sleep(0.01)
        Path(args.port_file).write_text(str(fake.port))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        fake._stop.set()
        await task
        if args.record:
            with open(args.record, "w") as f:
                for e in fake.exchanges:
                    body = (
                        e.json()
                        if e.body and e.headers.get("content-type", "").startswith("application/json")
                        else None
                    )
                    f.write(json.dumps({"kind": "exchange", "route": e.route, "method": e.method, "path": e.path,
                                        "status": e.status, "injected": e.injected, "json": body,
                                        "bytes": len(e.body)}) + "\n")  # fmt: skip
                for op, group in fake.executions:
                    f.write(json.dumps({"kind": "execution", "op": op, "group": group}) + "\n")
                for r in fake.backend.records:
                    f.write(json.dumps({"kind": "backend", **r}) + "\n")

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
