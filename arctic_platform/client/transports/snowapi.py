# Copyright 2026 The arctic-verl Authors
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
# SPDX-License-Identifier: Apache-2.0
"""SnowAPI, the wire of the Cortex transport: its ``cortex-training`` endpoint over httpx, retried with tenacity.

SnowAPI (``DSS-Server-API-Specification.md`` of Arctic-Platform; ``../shared/docs/cortex-snowapi.md`` here) is
asynchronous: one create (``POST {prefix}``) makes a job with typed sub-jobs, ``GET {prefix}/{job}`` reports its
state, and every data-plane call answers a ``request_id`` that is polled (``GET {prefix}/{job}/requests/{id}``) to
its result. :class:`SnowApi` speaks it; the Cortex transport (:mod:`.cortex`) maps each row of the endpoint table
(:data:`arctic_platform.endpoints.ENDPOINTS`) to a :data:`CORTEX_ROUTES` route, a no-op (:data:`CORTEX_NOOPS`: Cortex
sub-jobs are always awake) or an "unavailable on cortex" error.

Behaviour, rule by rule (the specification's section in brackets):

* URLs: ``{base_url | https://host}/api/v2/databases/{database}/schemas/{schema}/{endpoint}`` [2.1]; every URL uses
  the parent job id, sub-jobs are routed by the ``/operation`` body [7].
* Auth: with ``host``, ``Authorization: Bearer <PAT>`` and ``X-Snowflake-Authorization-Token-Type:
  PROGRAMMATIC_ACCESS_TOKEN`` on every call [2.2]; none with ``base_url``. The PAT lives only in the httpx client's
  headers: never in a repr, a log line or an error.
* Retries [3.5]: HTTP 404, 409, 429, 500, 502, 503, 504 and failures to connect are retried (``max_retries`` times,
  exponential backoff with jitter from 0.5 s up to 10 s; the sleep is injectable). A failure *after* the request was
  sent (a dropped connection, a read timeout) is retried only where sending it again cannot apply it twice: polls
  and job reads, ``generate``, ``reset-prefix-cache``, ``weight-sync`` (it copies the same weights again), and
  ``forward-backward``, whose chunk group id makes the service run it at most once [9.3]. ``step`` and ``save``
  raise instead, saying the call may have been applied. Create is retried only when the request provably never
  landed (a connect error), so no second job is made [3.5].
* ``forward-backward`` always travels in a DSSST1 chunk envelope [9.3]: its group id (uuid4) is the idempotency key,
  a frame over ``max_chunk_bytes`` (60 MiB) is cut into several chunks posted in order, a
  ``chunk_group_restart_required`` replays the whole group once with the same chunks and group id, and
  ``chunk_group_conflict`` / ``chunk_group_missing_chunks`` raise. A chunk-group error is never retried chunk by
  chunk. ``generate`` is a plain frame unless it is over the cap (then chunked, and replayed the same way: it changes
  no state).
* Polling [3.4, 6.8, 9.4, 9.5]: backoff 0.5 s x 1.25 up to 6 s; a ``next_cursor`` is followed at once; results come
  inline (JSON), as one base64 DSSST1 frame, or as ``result_chunk`` events whose sha256 is checked before the frame
  is reassembled. Failed and cancelled requests raise with the service's ``error``.
* Job states [3.2]: ``running`` is ready; ``failed``, ``cancelled``, ``terminated`` (and the legacy ``done``) are
  terminal and raise with the service's ``reason`` and the sub-jobs' states; enum spellings (``JOB_STATE_RUNNING``)
  are normalised. Request states [3.3] likewise.
* ``/operation`` replies without a ``request_id`` are the result (``reset-prefix-cache`` is inline) [7].
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import random
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from ...protocol import JOB_TYPES, TERMINAL_STATES, normalize_state
from ..config import CortexConfig
from ..errors import ArcticRLError, ArcticRLJobError, ArcticRLUnavailableError

logger = logging.getLogger("arctic_platform.client")

__all__ = [
    "CORTEX_NOOPS",
    "CORTEX_ROUTES",
    "CortexRoute",
    "SnowApi",
    "ChunkGroupError",
    "cortex_unavailable",
    "sub_job_role",
]

OCTET = "application/octet-stream"
TRANSIENT_STATUSES = frozenset({404, 409, 429, 500, 502, 503, 504})
"""HTTP statuses the specification retries [3.5] (404 and 409 appear while the service restarts)."""
CANCEL_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
"""A cancel's 404 / 409 mean the job is gone or already terminal [5.5]: nothing to retry."""
RESTART_REQUIRED = "chunk_group_restart_required"
CHUNK_GROUP_CODES = (RESTART_REQUIRED, "chunk_group_conflict", "chunk_group_missing_chunks")
REQUEST_DONE = ("done", "completed", "succeeded")
REQUEST_FAILED = ("failed", "cancelled")
REQUEST_IN_FLIGHT = ("pending", "running", "streaming")
POLL_INITIAL_S, POLL_FACTOR, POLL_MAX_S = 0.5, 1.25, 6.0
RETRY_INITIAL_S, RETRY_MAX_S, RETRY_JITTER_S = 0.5, 10.0, 1.0


def retry_backoff(state: RetryCallState) -> float:
    """Exponential backoff with jitter [3.5]: ``0.5 s x 2^(n-1) + U(0, 1 s)``, at most 10 s (tenacity's
    ``wait_exponential_jitter``, written out: its parameter names changed between the tenacity versions we allow)."""
    return min(RETRY_INITIAL_S * 2 ** (state.attempt_number - 1) + random.uniform(0, RETRY_JITTER_S), RETRY_MAX_S)


CREATE_JOB_TYPES = {"training": "training", "sampling": "sampling", "log_prob": "log_probability"}
"""Client job type -> SnowAPI create-time ``job_type`` [8.1]."""
SUB_JOB_SEGMENTS = {"training": "training", "sampling": "sampling", "log_prob": "log_prob"}
"""Client job type -> the type segment of a sub-job id ``{job}:{segment}:{index}`` [1.2] (``log_prob``, although the
create-time type is ``log_probability``)."""


@dataclass(frozen=True)
class CortexRoute:
    """Where an endpoint-table row goes on SnowAPI."""

    op: str
    """Path segment after ``/{job_id}/``."""
    body: Literal["octet", "json"]
    idempotent: bool
    """May be sent again after a failure once it was sent (see the module docstring)."""
    envelope: bool = False
    """Always in a chunk envelope (forward-backward: the group id is its idempotency key)."""


CORTEX_ROUTES: dict[str, CortexRoute] = {
    "forward_backward": CortexRoute("forward-backward", "octet", True, envelope=True),
    "generate": CortexRoute("generate", "octet", True),
    "step": CortexRoute("step", "json", False),
    "save": CortexRoute("save", "json", False),
    "sync_weights": CortexRoute("operation", "json", True),
    "reset_prefix_cache": CortexRoute("operation", "json", True),
}
"""Endpoint-table rows (:data:`arctic_platform.endpoints.ENDPOINTS`) that SnowAPI serves, by row name."""
CORTEX_NOOPS = (
    "sleep_training",
    "wake_training",
    "sleep_inference",
    "wake_inference",
    "sleep_log_prob",
    "wake_log_prob",
)
"""Rows that are no-ops on Cortex: its sub-jobs are always awake (nothing to offload or reload)."""


def cortex_unavailable(name: str, path: str, why: str = "") -> ArcticRLUnavailableError:
    """The error of a call SnowAPI has no route for (``name``: the endpoint row)."""
    reason = f"{name} is not available on cortex: SnowAPI has no {path}" + (f" ({why})" if why else "")
    return ArcticRLUnavailableError(None, reason + "; use backend type 'local' or 'onprem' for it", path)


class ChunkGroupError(ArcticRLError):
    """A SnowAPI chunk-group error (``code`` one of :data:`CHUNK_GROUP_CODES`); never retried chunk by chunk."""

    def __init__(self, status: int | None, reason: str, endpoint: str, code: str = ""):
        self.code = code
        super().__init__(status, reason, endpoint)

    def __reduce__(self):
        return (type(self), (self.status, self.reason, self.endpoint, self.code))


class _Retry(Exception):
    """An attempt that failed in a way the policy retries; ``error`` is raised when no retry is left."""

    def __init__(self, error: ArcticRLError):
        super().__init__(error.reason)
        self.error = error


def sub_job_role(job_type: Any) -> str | None:
    """Client job type of a SnowAPI sub-job ``job_type`` (``training``, ``JOB_TYPE_SAMPLING``, ``log_probability``,
    ``log_prob``), else None."""
    t = str(job_type or "").strip().lower().removeprefix("job_type_")
    for role, create in CREATE_JOB_TYPES.items():
        if t in (create, SUB_JOB_SEGMENTS[role]):
            return role
    return None


def _error_dicts(value: Any, depth: int = 0):
    """Every dict in an error body, also inside JSON carried in strings (a gateway wraps the service's body)."""
    if depth > 8:
        return
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _error_dicts(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            yield from _error_dicts(v, depth + 1)
    elif isinstance(value, str):
        dec = json.JSONDecoder()
        for i, ch in enumerate(value):
            if ch in "[{":
                try:
                    inner, _ = dec.raw_decode(value[i:])
                except ValueError:
                    continue
                yield from _error_dicts(inner, depth + 1)
                return


def chunk_group_code(body: Any) -> str | None:
    """The chunk-group error code in an error body (plain or wrapped), else None."""
    for d in _error_dicts(body):
        code = d.get("code")
        if code in CHUNK_GROUP_CODES:
            return code
        if d.get("chunk_group_id") and str(d.get("message") or "") == "request chunk group is missing chunks":
            return "chunk_group_missing_chunks"
    return None


def _reason(resp) -> tuple[str, Any]:
    """One line from an error reply (``{"message", "code"}``, ``{"detail": ...}`` or text) and the parsed body."""
    rid = resp.headers.get("x-snowflake-request-id")
    suffix = f" [x-snowflake-request-id {rid}]" if rid else ""
    try:
        body = resp.json()
    except ValueError:
        return (resp.text.strip()[:2000] or f"HTTP {resp.status_code}") + suffix, None
    if isinstance(body, dict):
        if "message" in body:
            code = f" (code {body['code']})" if body.get("code") not in (None, "") else ""
            return f"{body['message']}{code}{suffix}", body
        if "detail" in body:
            d = body["detail"]
            return (d if isinstance(d, str) else json.dumps(d)[:2000]) + suffix, body
    return json.dumps(body)[:2000] + suffix, body


def _to_python(obj: Any) -> Any:
    """Tensors as lists (a generate result decoded from DSSST1 carries ``token_ids`` as tensors)."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.tolist()
    if isinstance(obj, dict):
        return {k: _to_python(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_to_python(v) for v in obj]
    return obj


class SnowApi:
    """One httpx client bound to a SnowAPI prefix (see the module docstring for the rules).

    Args:
        cfg: the backend settings.
        request_timeout: read timeout of every HTTP call, and the bound on polling one request to its end.
        connect_timeout: connect timeout of every HTTP call.
        job_ready_timeout: the bound on waiting for a job to be ``running``.
        sleep: the coroutine every wait uses (retry backoff, poll and job-state intervals); tests pass one that does
            not sleep.
        clock: the monotonic clock deadlines read; tests pass one their ``sleep`` advances.
    """

    def __init__(
        self,
        cfg: CortexConfig,
        *,
        request_timeout: float,
        connect_timeout: float,
        job_ready_timeout: float,
        sleep: Callable[[float], Awaitable[Any]] | None = None,
        clock: Callable[[], float] | None = None,
    ):
        import httpx

        self.cfg = cfg
        self.prefix = cfg.api_prefix()
        self.request_timeout = request_timeout
        self.job_ready_timeout = job_ready_timeout
        self.max_retries = cfg.max_retries
        self.max_chunk_bytes = cfg.max_chunk_bytes
        self._sleep = sleep or asyncio.sleep
        self._clock = clock or time.monotonic
        headers = {}
        if not cfg.base_url:
            pat = cfg.resolve_pat()
            if not pat:
                raise ArcticRLError(
                    None,
                    f"cortex with host needs a programmatic access token: set the {cfg.pat_env_var} environment "
                    "variable (or CortexConfig.pat)",
                    "start",
                )
            headers = {
                "Authorization": f"Bearer {pat}",
                "X-Snowflake-Authorization-Token-Type": "PROGRAMMATIC_ACCESS_TOKEN",
            }
        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(request_timeout, connect=connect_timeout),
            verify=ssl.create_default_context(cafile=cfg.ca_file) if cfg.ca_file else True,
            trust_env=False,
        )

    def __repr__(self) -> str:
        return f"SnowApi(prefix={self.prefix!r})"

    async def aclose(self) -> None:
        await self._client.aclose()

    # ---------------------------------------------------------------- HTTP + retries
    async def _send(
        self,
        method: str,
        url: str,
        what: str,
        *,
        json_body: Any = None,
        content: bytes | None = None,
        params: dict | None = None,
        idempotent: bool,
        statuses: frozenset[int] = TRANSIENT_STATUSES,
        chunk_errors: bool = False,
    ):
        """One SnowAPI call with the retry policy; the 2xx response. ``what`` names the call in errors and logs.

        Raises:
            ChunkGroupError: ``chunk_errors`` and the reply is a chunk-group error (not retried).
            ArcticRLError: the service's status and reason, or status None for a transport failure.
        """
        import httpx

        kwargs: dict[str, Any] = {"params": params}
        if content is not None:
            kwargs["content"] = content
            kwargs["headers"] = {"Content-Type": OCTET}
        elif json_body is not None:
            kwargs["content"] = json.dumps(json_body).encode()
            kwargs["headers"] = {"Content-Type": "application/json"}

        async def attempt():
            try:
                resp = await self._client.request(method, url, **kwargs)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as e:
                # never reached the service: safe to send again, whatever the call
                raise _Retry(ArcticRLError(None, f"cannot connect to cortex ({type(e).__name__}: {e})", what)) from None
            except httpx.TransportError as e:
                if idempotent:
                    raise _Retry(ArcticRLError(None, f"connection failed ({type(e).__name__}: {e})", what)) from None
                raise ArcticRLError(
                    None,
                    f"connection failed after the request was sent ({type(e).__name__}: {e}); it may have been "
                    "applied, so it is not sent again",
                    what,
                ) from None
            if resp.status_code < 400:
                return resp
            reason, body = _reason(resp)
            if chunk_errors:
                code = chunk_group_code(body)
                if code is not None:
                    raise ChunkGroupError(resp.status_code, f"{code}: {reason}", what, code)
            err = ArcticRLError(resp.status_code, reason, what)
            if resp.status_code in statuses:
                raise _Retry(err)
            raise err

        def log_retry(state: RetryCallState) -> None:
            why = state.outcome.exception().error
            n, delay = state.attempt_number, state.next_action.sleep
            logger.warning(
                "cortex %s: %s; retry %d/%d in %.1fs", what, f"{why.status or 'no response'} {why.reason}"[:300], n,
                self.max_retries, delay,
            )  # fmt: skip

        retrying = AsyncRetrying(
            retry=retry_if_exception_type(_Retry),
            stop=stop_after_attempt(self.max_retries + 1),
            wait=retry_backoff,
            sleep=self._sleep,
            before_sleep=log_retry,
            reraise=True,
        )
        try:
            return await retrying(attempt)
        except _Retry as e:
            raise e.error from None

    @staticmethod
    def _json(resp, what: str) -> Any:
        try:
            return resp.json()
        except ValueError:
            raise ArcticRLError(resp.status_code, f"the reply is not JSON: {resp.text[:200]!r}", what) from None

    # ---------------------------------------------------------------- jobs
    async def create_job(self, sub_job_configs: list[dict]) -> str:
        """``POST {prefix}`` (retried only on connect errors: an ambiguous failure must not make a second job)."""
        resp = await self._send(
            "POST", self.prefix, "create", json_body={"sub_job_configs": sub_job_configs},
            idempotent=False, statuses=frozenset(),
        )  # fmt: skip
        reply = self._json(resp, "create")
        if not isinstance(reply, dict) or not reply.get("job_id"):
            raise ArcticRLError(resp.status_code, f"the create reply has no job_id: {reply!r}"[:500], "create")
        return str(reply["job_id"])

    async def get_job(self, job_id: str) -> dict:
        """``GET {prefix}/{job}`` (flattened when the service nests it under ``job``)."""
        what = f"/{job_id}"
        job = self._json(await self._send("GET", f"{self.prefix}/{job_id}", what, idempotent=True), what)
        if isinstance(job, dict) and isinstance(job.get("job"), dict):
            job = job["job"]
        if not isinstance(job, dict):
            raise ArcticRLError(None, f"the job reply is not an object: {job!r}"[:500], what)
        return job

    async def wait_running(self, job_id: str) -> dict:
        """Poll the job until ``running``; a terminal state raises with the service's reason and sub-job states.

        Raises:
            ArcticRLJobError: terminal (``failed``, ``cancelled``, ``terminated``, ``done``), or not running after
                ``job_ready_timeout``.
        """
        deadline = self._clock() + self.job_ready_timeout
        delay = POLL_INITIAL_S
        while True:
            job = await self.get_job(job_id)
            st = normalize_state(job.get("status"))
            if st == "running":
                return job
            if st in TERMINAL_STATES:
                raise ArcticRLJobError(
                    None,
                    f"cortex job {job_id} is {st}: reason={job.get('reason') or '(no reason)'} "
                    f"sub_jobs=[{self.sub_job_states(job)}]",
                    f"/{job_id}",
                    job_id,
                    st,
                )
            if self._clock() > deadline:
                raise ArcticRLJobError(
                    None, f"cortex job {job_id} still {st or 'unknown'} after job_ready_timeout="
                    f"{self.job_ready_timeout:.0f}s (sub_jobs=[{self.sub_job_states(job)}])",
                    f"/{job_id}", job_id, st,
                )  # fmt: skip
            await self._sleep(delay)
            delay = min(delay * POLL_FACTOR, POLL_MAX_S)

    @staticmethod
    def sub_job_states(job: dict) -> str:
        return ",".join(
            f"{sub_job_role(s.get('job_type')) or s.get('job_type')}={normalize_state(s.get('status')) or 'unknown'}"
            for s in job.get("sub_jobs") or []
            if isinstance(s, dict)
        )

    @staticmethod
    def sub_job_ids(job_id: str, job: dict) -> dict[str, str]:
        """Client job type -> sub-job id from a job reply; one the reply does not list is ``{job}:{segment}:0``."""
        ids = {}
        for s in job.get("sub_jobs") or []:
            role = sub_job_role(s.get("job_type")) if isinstance(s, dict) else None
            if role is not None and s.get("sub_job_id") and role not in ids:
                ids[role] = str(s["sub_job_id"])
        for role in JOB_TYPES:
            ids.setdefault(role, f"{job_id}:{SUB_JOB_SEGMENTS[role]}:0")
        return ids

    async def cancel(self, job_id: str) -> str | None:
        """``POST {prefix}/{job}:cancel``, best effort; an error line when the job may still be running, else None
        (404 and 409 mean it is gone or already terminal)."""
        what = f"/{job_id}:cancel"
        try:
            await self._send(
                "POST", f"{self.prefix}/{job_id}:cancel", what, idempotent=True, statuses=CANCEL_RETRY_STATUSES
            )
        except ArcticRLError as e:
            if e.status in (404, 409):
                return None
            return f"cortex job {job_id} may still be running: {e}"
        return None

    # ---------------------------------------------------------------- data plane
    async def call(self, route: CortexRoute, job_id: str, body: Any) -> Any:
        """Submit ``body`` on ``route`` of job ``job_id`` and return the result (polled, or the inline reply)."""
        what = f"/{route.op}"
        url = f"{self.prefix}/{job_id}/{route.op}"
        if route.body == "octet":
            reply = await self._submit_octet(url, what, route, body)
        else:
            body = {k: v for k, v in body.items() if v is not None}
            reply = self._json(await self._send("POST", url, what, json_body=body, idempotent=route.idempotent), what)
        if not isinstance(reply, dict) or not reply.get("request_id"):
            if route.body == "octet":
                raise ArcticRLError(None, f"the final reply has no request_id: {reply!r}"[:500], what)
            return reply  # an inline operation result [7]
        result = await self.poll(job_id, str(reply["request_id"]), what)
        return _to_python(result) if route.op == "generate" else result

    async def _submit_octet(self, url: str, what: str, route: CortexRoute, tree: Any) -> Any:
        """Post the DSSST1 frame (chunked when over the cap, always for an envelope route); the final reply."""
        from ... import wire

        chunks = await asyncio.to_thread(
            wire.encode_request_chunks, tree, operation=route.op, max_bytes=self.max_chunk_bytes,
            force_chunk=route.envelope,
        )  # fmt: skip
        chunked = len(chunks) > 1 or route.envelope
        replays, i, reply = 0, 0, None
        while i < len(chunks):
            try:
                resp = await self._send(
                    "POST", url, what, content=chunks[i], idempotent=route.idempotent, chunk_errors=chunked
                )
            except ChunkGroupError as e:
                if e.code == RESTART_REQUIRED and replays == 0:
                    # the service lost the group (a restart): replay it from chunk 0, same chunks, same group id
                    logger.warning("cortex %s: %s; replaying the chunk group from chunk 0", what, e.reason[:200])
                    replays, i = 1, 0
                    continue
                raise
            reply = resp
            i += 1
        return self._json(reply, what)

    async def poll(self, job_id: str, request_id: str, what: str) -> Any:
        """Poll a request to its end and decode its result (inline, base64 DSSST1, or ``result_chunk`` events)."""
        url = f"{self.prefix}/{job_id}/requests/{request_id}"
        deadline = self._clock() + self.request_timeout
        delay = POLL_INITIAL_S
        cursor: str | None = None
        chunks: dict[int, bytes] = {}
        unknown_logged = False
        while True:
            params = {"cursor": cursor} if cursor else None
            st = self._json(await self._send("GET", url, what, params=params, idempotent=True), what)
            if not isinstance(st, dict):
                raise ArcticRLError(None, f"request {request_id}: the poll reply is not an object", what)
            for ev in st.get("events") or []:
                if isinstance(ev, dict) and ev.get("type") == "result_chunk":
                    self._add_result_chunk(chunks, ev, request_id, what)
            if st.get("next_cursor"):
                cursor = str(st["next_cursor"])  # more result chunks queued: fetch them now
                continue
            state = normalize_state(st.get("status"))
            if state in REQUEST_DONE:
                return self._decode_result(chunks, st.get("result"), request_id, what)
            if state in REQUEST_FAILED:
                err = st.get("error") or "(no error given)"
                raise ArcticRLError(None, f"cortex request {request_id} ended {state}: {err}", what)
            if state not in REQUEST_IN_FLIGHT and not unknown_logged:
                logger.warning("cortex %s: request %s reports state %r; still waiting", what, request_id, state)
                unknown_logged = True
            if self._clock() > deadline:
                limit = f"request_timeout={self.request_timeout:.0f}s"
                raise ArcticRLError(None, f"cortex request {request_id} still {state} after {limit}", what)
            await self._sleep(delay)
            delay = min(delay * POLL_FACTOR, POLL_MAX_S)

    @staticmethod
    def _add_result_chunk(chunks: dict[int, bytes], ev: dict, request_id: str, what: str) -> None:
        from ... import wire

        try:
            payload = base64.b64decode(ev["payload_b64"], validate=True)
        except (KeyError, ValueError, TypeError):
            raise ArcticRLError(
                None, f"request {request_id}: a result_chunk event has no valid payload_b64", what
            ) from None
        want = ev.get("payload_sha256")
        if not want or hashlib.sha256(payload).hexdigest() != str(want).lower():
            raise ArcticRLError(
                None, f"request {request_id}: result_chunk payload_sha256 mismatch (or missing); refusing it", what
            )
        desc = wire.read_byte_chunk_metadata(payload)
        idx = int(desc["chunk_idx"]) if desc is not None else 0
        chunks[idx] = payload  # the same chunk twice (a page fetched again) is kept once

    @staticmethod
    def _decode_result(chunks: dict[int, bytes], result: Any, request_id: str, what: str) -> Any:
        from ... import wire

        try:
            if chunks:
                return wire.decode_result_chunks([chunks[i] for i in sorted(chunks)])
            if isinstance(result, dict) and result.get("wire_format") == wire.FORMAT:
                return wire.decode(base64.b64decode(result["payload_b64"]))
        except (wire.WireError, KeyError, ValueError) as e:
            raise ArcticRLError(None, f"request {request_id}: its result does not decode ({e})", what) from None
        return result if result is not None else {}
