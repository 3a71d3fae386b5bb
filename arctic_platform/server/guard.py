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
"""The ASGI guard in front of the app: the bearer token on every request, and the body-size limit enforced before
any body byte reaches a handler (413 by Content-Length, or while a chunked body streams in)."""

from __future__ import annotations

import hmac
import json

from .errors import RequestError

__all__ = ["Guard"]


class Guard:
    """Checks the bearer token on every request and refuses bodies over ``max_body_bytes`` with 413."""

    def __init__(self, app, *, token: str | None, max_body_bytes: int):
        self.app, self.token, self.max_body = app, token, max_body_bytes

    @staticmethod
    async def _send_error(send, status: int, reason: str) -> None:
        body = json.dumps({"detail": reason}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        if self.token is not None:
            got = headers.get(b"authorization", b"").decode("latin-1")
            if not hmac.compare_digest(got.encode(), f"Bearer {self.token}".encode()):
                return await self._send_error(send, 401, "missing or invalid bearer token (Authorization: Bearer ...)")
        cl = headers.get(b"content-length")
        if cl is not None:
            try:
                n = int(cl)
            except ValueError:
                return await self._send_error(send, 400, "malformed Content-Length header")
            if n > self.max_body:
                return await self._send_error(
                    send, 413, f"request body of {n} bytes exceeds the server limit of {self.max_body} bytes"
                )
        seen = 0

        async def counting_receive():
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.max_body:  # a chunked body without Content-Length; the handlers answer 413
                    raise RequestError(f"request body exceeds the server limit of {self.max_body} bytes", 413)
            return msg

        await self.app(scope, counting_receive, send)
