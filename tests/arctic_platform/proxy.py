# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""A recording, fault-injecting HTTP/1.1 proxy on 127.0.0.1 in front of a real Arctic RL server (test helper).

Every request reaches the real server unless a rule answers it instead: with a status (as a failing server would)
or by dropping the connection before any reply (what a client sees as a read error). Replies can be rewritten
(e.g. a ``/step`` reply in Arctic-Platform's per-rank shape). Every exchange is recorded, request bodies included,
so a test can decode the frames the plugin really sent. The proxy binds port 0 itself and reports its URL.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Optional
from urllib.parse import urlsplit


@dataclass
class Call:
    n: int
    """1-based index among all requests."""
    method: str
    path: str
    """Without the query."""
    query: str
    body: bytes
    status: Optional[int] = None
    reply: bytes = b""
    injected: str = ""

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class Answer:
    """A reply the proxy gives instead of forwarding (``status`` None: drop the connection)."""

    status: Optional[int]
    body: Any = field(default_factory=lambda: {"detail": "injected by the test proxy"})


Rule = Callable[[Call, list], Optional[Answer]]
Rewrite = Callable[[Call, dict], dict]


class Proxy:
    def __init__(self, upstream: str, rule: Optional[Rule] = None, rewrite: Optional[Rewrite] = None):
        self.upstream = upstream.rstrip("/")
        self.rule, self.rewrite = rule, rewrite
        self.calls: list[Call] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.url = ""

    def __enter__(self) -> Proxy:
        self._thread.start()
        assert self._ready.wait(30), "proxy did not start"
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def calls_to(self, path: str) -> list[Call]:
        return [c for c in self.calls if c.path == path]

    # ---- the server loop ----
    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())

    async def _main(self) -> None:
        import httpx

        self._stop = asyncio.Event()
        self._client = httpx.AsyncClient(base_url=self.upstream, timeout=600, trust_env=False)
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        self._ready.set()
        async with server:
            await self._stop.wait()
        await self._client.aclose()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                parts = urlsplit(target)
                call = Call(len(self.calls) + 1, method, parts.path, parts.query, body)
                self.calls.append(call)
                answer = self.rule(call, self.calls) if self.rule else None
                if answer is not None and answer.status is None:
                    call.injected = "dropped"
                    return  # close without a reply: the client sees the connection fail mid-request
                if answer is not None:
                    status, ctype = answer.status, "application/json"
                    reply = json.dumps(answer.body).encode()
                    call.injected = f"HTTP {status}"
                else:
                    fwd = {k: v for k, v in headers.items() if k in ("content-type", "authorization")}
                    r = await self._client.request(method, target, content=body, headers=fwd)
                    status, ctype, reply = r.status_code, r.headers.get("content-type", ""), r.content
                    if self.rewrite and ctype.startswith("application/json"):
                        reply = json.dumps(self.rewrite(call, json.loads(reply))).encode()
                call.status, call.reply = status, reply
                writer.write(
                    f"HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\ncontent-length: {len(reply)}\r\n\r\n".encode()
                    + reply
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
