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
"""The one table of Arctic RL endpoints (docs/arctic-rl-protocol.md): path, job types, body kind, idempotency.

Torch-free. The client sends every call through a row of :data:`ENDPOINTS` (its on-prem transport uses the row's
method, path, body kind and idempotency; its Cortex transport maps the row to a SnowAPI route,
:mod:`arctic_platform.client.transports.cortex`), the server registers its routes at the rows' paths and looks their
jobs up with the rows' job types, and the tests check that the three agree.

Rows are keyed by the client operation. ``/operation`` carries several operations (``operation_type``), one row
each; the server's dedicated routes for the same work (``/weight-sync``, ``/reset-prefix-cache``) have rows of their
own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ENDPOINTS", "Endpoint", "OPERATION_TYPES", "endpoint"]

BodyKind = Literal["none", "json", "frame"]


@dataclass(frozen=True)
class Endpoint:
    """One call of the Arctic RL protocol."""

    name: str
    """The client operation (``AsyncArcticRLClient`` method), e.g. ``forward_backward``."""
    method: Literal["GET", "POST"]
    path: str
    """On-prem path; ``{job_id}`` is a path parameter (``/job/{job_id}``)."""
    job_types: tuple[str, ...]
    """Job types the ``job_id`` query parameter may name (the server's lookup); empty: no ``job_id`` query."""
    body: BodyKind
    """Request body: none, JSON, or a DSSST1 frame (``application/octet-stream``)."""
    idempotent: bool
    """Safe to send again after a failure that happened once the request was sent (a reply lost or timed out)."""
    key: str | None = None
    """A body field that makes a non-idempotent call idempotent when it is set (``save``'s ``step``: a repeated save
    rewrites the same checkpoint; ``weight_sync``'s ``policy_version``: a repeated sync sets the same version)."""
    operation_type: str | None = None
    """For ``/operation`` rows: the ``operation_type`` of the envelope."""


def _rows(*rows: Endpoint) -> dict[str, Endpoint]:
    table = {r.name: r for r in rows}
    assert len(table) == len(rows), "duplicate endpoint names"
    return table


ENDPOINTS: dict[str, Endpoint] = _rows(
    # ---- jobs ----
    Endpoint("health", "GET", "/health", (), "none", True),
    Endpoint("status", "GET", "/status", (), "none", True),
    Endpoint("job_info", "GET", "/job/{job_id}", (), "none", True),
    Endpoint("initialize", "POST", "/initialize", (), "json", False),
    Endpoint("destroy", "POST", "/destroy", ("training", "sampling", "log_prob"), "json", True),
    # ---- training ----
    Endpoint("forward_backward", "POST", "/forward-backward", ("training",), "frame", False),
    Endpoint("forward", "POST", "/forward", ("training", "log_prob"), "frame", True),
    Endpoint("step", "POST", "/step", ("training",), "json", False),
    Endpoint("profile", "POST", "/profile", ("training",), "json", False),
    Endpoint("save", "POST", "/save", ("training",), "json", False, key="step"),
    Endpoint("load_checkpoint", "POST", "/load-checkpoint", ("training",), "json", True),
    Endpoint("sleep_training", "POST", "/sleep-training", ("training",), "json", False),
    Endpoint("wake_training", "POST", "/wake-training", ("training",), "json", True),
    Endpoint("empty_training_cache", "POST", "/empty-training-cache", ("training",), "none", True),
    Endpoint("sleep_log_prob", "POST", "/sleep-log-prob", ("log_prob",), "none", True),
    Endpoint("wake_log_prob", "POST", "/wake-log-prob", ("log_prob",), "none", True),
    # ---- sampling ----
    Endpoint("generate", "POST", "/generate", ("sampling",), "frame", True),
    Endpoint("log_probs", "POST", "/log-probs", ("log_prob",), "json", True),
    Endpoint("sleep_inference", "POST", "/sleep-inference", ("sampling",), "json", True),
    Endpoint("wake_inference", "POST", "/wake-inference", ("sampling",), "json", True),
    Endpoint("reset_prefix_cache_route", "POST", "/reset-prefix-cache", ("sampling",), "json", True),
    # ---- cross-job ----
    Endpoint("weight_sync_route", "POST", "/weight-sync", ("training",), "json", False, key="policy_version"),
    Endpoint("weight_norm", "POST", "/weight-norm", (), "json", True),
    # ---- /operation (the reference unified client's envelope) ----
    Endpoint(
        "sync_weights", "POST", "/operation", ("training",), "json", False,
        key="policy_version", operation_type="weight-sync",
    ),
    Endpoint(
        "reset_prefix_cache", "POST", "/operation", ("sampling",), "json", True, operation_type="reset-prefix-cache"
    ),
    Endpoint(
        "sleep_inference_op", "POST", "/operation", ("sampling",), "json", True, operation_type="sleep-inference"
    ),
    Endpoint("wake_inference_op", "POST", "/operation", ("sampling",), "json", True, operation_type="wake-inference"),
)  # fmt: skip
"""Every endpoint, by client operation."""

OPERATION_TYPES: tuple[str, ...] = tuple(r.operation_type for r in ENDPOINTS.values() if r.operation_type)
"""The ``operation_type`` values ``/operation`` accepts."""


def endpoint(name: str) -> Endpoint:
    """The row of ``name`` (KeyError naming the known rows otherwise)."""
    try:
        return ENDPOINTS[name]
    except KeyError:
        raise KeyError(f"no endpoint {name!r} (known: {sorted(ENDPOINTS)})") from None
