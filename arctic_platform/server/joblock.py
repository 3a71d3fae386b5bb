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
"""A job's lock (:class:`JobLock`), which every engine call takes (:mod:`.engine_calls`)."""

from __future__ import annotations

import threading
import time

__all__ = ["JobLock"]


class JobLock:
    """A job's lock: exclusive (:meth:`acquire` / :meth:`release`, as ``threading.Lock``) or shared
    (:meth:`acquire_shared` / :meth:`release_shared`, held by concurrent generate calls). An exclusive caller that
    waits blocks new shared ones, so a weight sync waits for the generate calls in flight but not for those that arrive
    after it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._writers_waiting = 0

    def _wait(self, busy, timeout: float | None) -> bool:
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        while busy():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            self._cond.wait(left)
        return True

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        with self._cond:
            self._writers_waiting += 1
            try:
                if not self._wait(lambda: self._exclusive or self._shared > 0, timeout if blocking else 0):
                    return False
                self._exclusive = True
                return True
            finally:
                self._writers_waiting -= 1
                self._cond.notify_all()  # shared callers held back by this wait may go on

    def release(self) -> None:
        with self._cond:
            if not self._exclusive:
                raise RuntimeError("release of a job lock that is not held")
            self._exclusive = False
            self._cond.notify_all()

    def acquire_shared(self, timeout: float = -1) -> bool:
        with self._cond:
            if not self._wait(lambda: self._exclusive or self._writers_waiting > 0, timeout):
                return False
            self._shared += 1
            return True

    def release_shared(self) -> None:
        with self._cond:
            if self._shared <= 0:
                raise RuntimeError("release of a shared job lock that is not held")
            self._shared -= 1
            self._cond.notify_all()

    def locked(self) -> bool:
        with self._cond:
            return self._exclusive or self._shared > 0
