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
"""Exceptions of the Arctic RL client. All derive from :class:`ArcticRLError` and pickle cleanly (Ray-safe)."""

from __future__ import annotations

__all__ = ["ArcticRLError", "ArcticRLJobError", "ArcticRLUnavailableError"]


class ArcticRLError(RuntimeError):
    """A failed Arctic RL call.

    Attributes:
        status: the HTTP status, or None when no response came (connection failure, timeout, client-side check).
        reason: the server's one-line ``detail`` (or the client's explanation).
        endpoint: the path called, e.g. ``/forward-backward``.
    """

    def __init__(self, status: int | None, reason: str, endpoint: str):
        self.status = status
        self.reason = reason
        self.endpoint = endpoint
        super().__init__(f"{endpoint} failed ({status if status is not None else 'no response'}): {reason}")

    def __reduce__(self):
        return (type(self), (self.status, self.reason, self.endpoint))


class ArcticRLJobError(ArcticRLError):
    """A job reached a terminal state (failed / terminated / done / cancelled) or never became running."""

    def __init__(self, status: int | None, reason: str, endpoint: str, job_id=None, job_status: str | None = None):
        self.job_id = job_id
        self.job_status = job_status
        super().__init__(status, reason, endpoint)

    def __reduce__(self):
        return (type(self), (self.status, self.reason, self.endpoint, self.job_id, self.job_status))


class ArcticRLUnavailableError(ArcticRLError, NotImplementedError):
    """The requested operation does not exist on this backend (e.g. ``forward`` on Snowflake Cortex)."""
