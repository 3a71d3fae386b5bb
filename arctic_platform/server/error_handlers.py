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
"""Every error the app answers is ``{"detail": "<one-line reason>"}`` with its status (docs/arctic-rl-server.md)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from .. import wire
from ..protocol import first_error
from ..reasons import one_line
from .errors import RequestError
from .logs import logger

__all__ = ["error_reply", "install_error_handlers"]


def error_reply(status: int, reason: str) -> JSONResponse:
    """The reply of every refusal: ``{"detail": reason}`` with ``status``."""
    return JSONResponse({"detail": reason}, status_code=status)


def _first_error(e: RequestValidationError) -> tuple[str, dict]:
    first = e.errors()[0] if e.errors() else {}
    return ".".join(str(x) for x in first.get("loc", ())), first


def install_error_handlers(app: FastAPI) -> None:
    """Map every error onto ``{"detail": "<one-line reason>"}`` with its status: a :class:`RequestError` its own,
    a malformed frame 400, a schema error 422 naming the key path (a refusal: its own status,
    :func:`~arctic_platform.protocol.first_error`), anything else 500."""

    @app.exception_handler(RequestError)
    async def _request_error(_r, e: RequestError):
        return error_reply(e.status, e.reason)

    @app.exception_handler(wire.WireError)
    async def _wire_error(_r, e: wire.WireError):
        return error_reply(400, f"malformed frame: {e}")

    @app.exception_handler(ValidationError)
    async def _validation(_r, e: ValidationError):
        _, reason, status = first_error(e)
        return error_reply(status, reason)

    @app.exception_handler(RequestValidationError)
    async def _req_validation(_r, e: RequestValidationError):
        loc, first = _first_error(e)
        return error_reply(422, f"{loc}: {first.get('msg', 'invalid request')}")

    @app.exception_handler(Exception)
    async def _bug(_r, e: Exception):
        logger.exception("unhandled error")
        return error_reply(500, f"internal server error: {one_line(e)}")
