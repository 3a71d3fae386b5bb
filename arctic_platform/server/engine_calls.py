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
"""How route handlers and the generate batcher call an engine: in a worker thread (never blocking the event loop)
and under the job's lock (:class:`.joblock.JobLock`: engines are not thread-safe), each wait for a lock bounded by
``engine_timeout_s``. An engine that takes generate calls concurrently (``concurrent_generate``: the vLLM engine,
whose replicas admit requests while they decode) is called for generate under the lock's shared side
(:func:`call_shared`); everything else (weight sync, sleep / wake, destroy) takes the exclusive side and so waits for
the generate calls in flight, and a waiting exclusive caller holds new generate calls back."""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING

from ..protocol import JobStatus
from .errors import EngineFailed, RequestError

if TYPE_CHECKING:
    from .jobs import Job

__all__ = ["call_locked", "call_shared", "in_thread"]


def in_thread(fn, *args) -> asyncio.Future:
    """Run ``fn(*args)`` in a daemon thread; await the returned future for its result (or its exception)."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def target():
        def deliver(ok: bool, value) -> None:
            if not fut.done():
                fut.set_result(value) if ok else fut.set_exception(value)

        try:
            res = fn(*args)
        except BaseException as e:  # delivered to the awaiting handler
            loop.call_soon_threadsafe(deliver, False, e)
        else:
            loop.call_soon_threadsafe(deliver, True, res)

    threading.Thread(target=target, daemon=True, name="arctic-engine").start()
    return fut


def _busy(job: Job, timeout: float) -> RequestError:
    return RequestError(f"job {job.job_id} stayed busy for {timeout:.0f}s (engine_timeout_s)", 503)


def _require_running(job: Job) -> None:
    if job.status != JobStatus.RUNNING or job.engine is None:
        raise RequestError(f"job {job.job_id} is {job.status}" + (f": {job.reason}" if job.reason else ""), 409)


def _metered(job: Job, fn):
    """``fn()``, its time counted as ``job``'s compute time and in the busy meter; an engine failure fails the job."""
    job.begin_compute()
    if job.meter is not None:
        job.meter.enter(job.job_type)
    try:
        return fn()
    except EngineFailed as e:
        job.set(JobStatus.FAILED, f"engine failed: {e}")
        raise RequestError(f"job {job.job_id} failed: {e}", 500) from None
    finally:
        job.end_compute()
        if job.meter is not None:
            job.meter.exit(job.job_type)


def call_locked(job: Job, fn, timeout: float, *more: Job):
    """Call ``fn()`` holding ``job``'s lock (then ``more`` locks, in order), each wait bounded by ``timeout``.

    The time inside counts as ``job``'s compute time and in the registry's busy meter.

    Raises:
        RequestError: 503 when a lock stayed busy for ``timeout``, 409 when a job is no longer running, 500 when
            the engine failed (:class:`.errors.EngineFailed`: ``job`` is marked FAILED with the reason).
    """
    held = []
    try:
        for j in (job, *more):
            if not j.lock.acquire(timeout=timeout):
                raise _busy(j, timeout)
            held.append(j)
            _require_running(j)
        return _metered(job, fn)
    finally:
        for j in reversed(held):
            j.lock.release()


def call_shared(job: Job, fn, timeout: float):
    """:func:`call_locked` on the shared side of ``job``'s lock (generate calls of a ``concurrent_generate``
    engine: several at once, never beside an exclusive call)."""
    if not job.lock.acquire_shared(timeout=timeout):
        raise _busy(job, timeout)
    try:
        _require_running(job)
        return _metered(job, fn)
    finally:
        job.lock.release_shared()
