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
"""The HTTP session of the on-prem and local transports: :class:`HttpSession`, httpx with a connect and a read
timeout on every call. Retry policy:

* a connection that was never established (connect error / connect timeout / pool timeout) is retried for every
  call, since the server never saw the request;
* a failure after the request was sent (read/write timeout, dropped connection) and 502/503/504 are retried only for
  calls marked idempotent;
* 4xx is never retried. Backoff 0.5 s x 2^attempt, at most ``max_retries`` retries (tenacity runs the loop).
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt, wait_exponential

from ..errors import ArcticRLError

logger = logging.getLogger("arctic_platform.client")

OCTET = "application/octet-stream"
_RETRY_STATUS = (502, 503, 504)


def read_token(env_var: str | None) -> str | None:
    """The token held by ``env_var`` (None when no variable is named)."""
    if not env_var:
        return None
    value = os.environ.get(env_var)
    if not value:
        raise ArcticRLError(None, f"token_env_var names {env_var}, but that environment variable is empty", "start")
    return value


class HttpSession:
    """One httpx.AsyncClient bound to a base URL; the token (if any) is a header, never in repr or logs."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None,
        connect_timeout: float,
        request_timeout: float,
        max_retries: int,
    ):
        import httpx

        self.url = url.rstrip("/")
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.max_retries = max_retries
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.AsyncClient(
            base_url=self.url,
            headers=headers,
            timeout=httpx.Timeout(request_timeout, connect=connect_timeout),
            trust_env=False,
        )

    def __repr__(self) -> str:
        return f"HttpSession(url={self.url!r})"

    async def aclose(self) -> None:
        await self._client.aclose()

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict | None = None,
        json_body: Any = None,
        frame: bytes | None = None,
        idempotent: bool = False,
        timeout: float | None = None,
        max_retries: int | None = None,
        retry_status: tuple[int, ...] = _RETRY_STATUS,
    ) -> Any:
        """Send one call and decode the reply by its Content-Type (frame or JSON).

        ``retry_status``: the HTTP statuses retried for an idempotent call (default 502/503/504).

        Raises:
            ArcticRLError: the server's status and reason, or status None for transport failures.
        """
        import httpx

        from ... import wire

        kwargs: dict[str, Any] = {"params": {k: v for k, v in (params or {}).items() if v is not None}}
        if frame is not None:
            kwargs["content"] = frame
            kwargs["headers"] = {"Content-Type": OCTET}
        elif json_body is not None:
            kwargs["content"] = json.dumps(json_body).encode()
            kwargs["headers"] = {"Content-Type": "application/json"}
        if timeout is not None:
            kwargs["timeout"] = httpx.Timeout(timeout, connect=self.connect_timeout)
        retries = self.max_retries if max_retries is None else max_retries

        async def attempt() -> Any:
            try:
                resp = await self._client.request(method, path, **kwargs)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as e:
                # never reached the server: safe to retry any call
                err = ArcticRLError(None, f"cannot connect to {self.url} ({type(e).__name__}: {e})", path)
                raise _Retryable(err, type(e).__name__) from None
            except httpx.TimeoutException as e:
                t = timeout or self.request_timeout
                err = ArcticRLError(None, f"no reply within {t:.0f}s ({type(e).__name__})", path)
                if not idempotent:
                    raise err from None
                raise _Retryable(err, type(e).__name__) from None
            except httpx.TransportError as e:
                err = ArcticRLError(None, f"connection to {self.url} failed ({type(e).__name__}: {e})", path)
                if not idempotent:
                    raise err from None
                raise _Retryable(err, type(e).__name__) from None
            if resp.status_code < 400:
                ct = resp.headers.get("content-type", "").split(";", 1)[0].strip().lower()
                if ct == OCTET:
                    return wire.decode(resp.content)
                if ct == "application/json":
                    return resp.json()
                return resp.text
            reason = _reason(resp)
            err = ArcticRLError(resp.status_code, reason, path)
            if resp.status_code in retry_status and idempotent:
                raise _Retryable(err, f"HTTP {resp.status_code}: {reason}")
            raise err

        def log_retry(state: RetryCallState) -> None:
            why = state.outcome.exception().reason
            n, delay = state.attempt_number, state.next_action.sleep
            logger.warning("%s %s: %s; retry %d/%d in %.1fs", method, path, why, n, retries, delay)

        retrying = AsyncRetrying(
            retry=retry_if_exception_type(_Retryable),
            stop=stop_after_attempt(retries + 1),
            wait=wait_exponential(multiplier=0.5),  # 0.5 s, 1 s, 2 s, ...
            before_sleep=log_retry,
            reraise=True,
        )
        try:
            return await retrying(attempt)
        except _Retryable as e:
            raise e.error from None


class _Retryable(Exception):
    """An attempt that failed in a way the policy retries: ``error`` is raised when no retry is left, ``reason`` is
    what the retry's log line names."""

    def __init__(self, error: ArcticRLError, reason: str):
        super().__init__(reason)
        self.error, self.reason = error, reason


def _reason(resp) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text.strip()[:2000] or f"HTTP {resp.status_code}"
    if isinstance(body, dict) and "detail" in body:
        d = body["detail"]
        return d if isinstance(d, str) else json.dumps(d)[:2000]
    return json.dumps(body)[:2000]
