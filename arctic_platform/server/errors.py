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
"""The error type every server layer raises for a client mistake (the app maps it onto its HTTP status)."""

from __future__ import annotations


class RequestError(ValueError):
    """A client mistake found inside an engine call; ``status`` is the HTTP code (422 schema, 409 state, 400)."""

    def __init__(self, reason: str, status: int = 422):
        super().__init__(reason)
        self.status = status
        self.reason = reason


class EngineFailed(RuntimeError):
    """A job's engine is gone (a worker process died or failed): the job fails with this reason
    (:func:`.engine_calls.call_locked`); the request gets a 500 naming it."""
