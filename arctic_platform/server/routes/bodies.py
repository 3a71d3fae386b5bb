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
"""Request bodies and replies: JSON bodies read into the pydantic models of :mod:`arctic_platform.protocol`, wire
frames (:mod:`arctic_platform.wire`) decoded in a thread within the body limits, and frame replies.

The decoder is chosen by Content-Type only: ``application/json`` or ``application/octet-stream`` (415 otherwise).
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from fastapi import Request
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError

from ... import wire
from ...protocol import first_error
from ..engine_calls import in_thread
from ..errors import RequestError
from ..settings import ServerSettings

__all__ = ["OCTET", "content_type", "frame_reply", "parse_model", "read_frame", "read_json"]

OCTET = wire.CONTENT_TYPE
M = TypeVar("M", bound=BaseModel)


def content_type(request: Request) -> str:
    """The request's media type, lower case, without parameters (``""`` when absent)."""
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()


async def read_json(request: Request, *, required: bool = False) -> Any:
    """The JSON body; None for an empty one (422 when ``required``), 415 for another content type, 400 malformed."""
    body = await request.body()
    if not body:
        if required:
            raise RequestError("a JSON body is required", 422)
        return None
    ct = content_type(request)
    if ct != "application/json":
        raise RequestError(f"this endpoint takes application/json, got {ct or 'no content type'!r}", 415)
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RequestError(f"malformed JSON body ({e})", 400) from None


def parse_model(model: type[M], data: Any) -> M:
    """``data`` (a JSON object; None means ``{}``) as ``model``. An error is a :class:`RequestError` naming the key
    path (:func:`~arctic_platform.protocol.first_error`): 422, or a refusal's own status (an unknown job type: 400)."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise RequestError(f"the JSON body must be an object, got {type(data).__name__}", 422)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        _, reason, status = first_error(e)
        raise RequestError(reason, status) from None


async def read_frame(request: Request, settings: ServerSettings) -> dict:
    """The request's wire frame, decoded in a thread within the body limits; a dict ``{batch, meta, processing}``."""
    ct = content_type(request)
    if ct != OCTET:
        raise RequestError(f"this endpoint takes {OCTET} (an arctic wire frame), got {ct or 'no content type'!r}", 415)
    body = await request.body()
    tree = await in_thread(
        lambda: wire.decode(body, max_header_bytes=settings.max_header_bytes, max_body_bytes=settings.max_body_bytes)
    )
    if not isinstance(tree, dict):
        raise RequestError("the frame must hold a dict {batch, meta, processing}", 422)
    return tree


def frame_reply(obj: Any) -> Response:
    """A data-plane reply: ``obj`` as a wire frame."""
    return Response(content=wire.encode(obj), media_type=OCTET)
