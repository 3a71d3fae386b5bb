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
"""The sampling job's engine in its own OS process (``--sampling-process`` / ``extensions.sampling_process``).

In one Python process the sampling and training engines of the embedded server contend for the GIL: with a small
model the work is Python-bound, so the two jobs barely overlap. :class:`ProcessSamplingEngine` runs a
:class:`.sampling_engine.SamplingEngine` in a ``spawn`` child owned by the job and forwards every call over a pipe:

* Control messages are plain dicts (``op`` + JSON-like values); tensors never travel through the pipe. A weight
  sync writes the source model's unique parameters to a safetensors file (under ``/dev/shm`` when it exists) and
  the child copies them into its model between requests, so the drain / no-torn-sequence semantics of the
  in-process engine hold: the job's lock serialises generate and sync exactly as before, and every result carries
  the policy version the child generated it with.
* ``abort`` is a ``multiprocessing`` event shared with the child (destroy stops a generate batch in flight).
* The child dies with the job: :meth:`ProcessSamplingEngine.close` asks it to exit and kills it after a grace
  period; it is a daemon process (the server's exit ends it) and it exits on its own when the pipe reaches EOF or
  its parent process changes (a crashed server).
* ``torch.set_num_threads`` in the child is the server's thread setting, so the two processes use separate cores.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import shutil
import threading
import time
from typing import Any

import torch

from ...reasons import one_line
from ..errors import RequestError
from ..logs import logger
from .base import SamplingInterface, WeightSource
from .model_engine import EngineSettings, weight_norm
from .sampling_engine import GenerateItem, SamplingEngine, TorchSampler
from .shared import (
    apply_environ,
    check_weight_layout,
    own_environ,
    source_tensors,
    sync_folder,
    watch_parent,
    weights_file,
)

__all__ = ["ProcessSamplingEngine"]

_START_TIMEOUT_S = 600.0
_CLOSE_GRACE_S = 10.0


class SamplingProcessError(RuntimeError):
    """The sampling child failed (it died, or an unexpected exception happened inside it)."""


class ProcessSamplingEngine(TorchSampler, SamplingInterface):
    """A :class:`SamplingEngine` in a ``spawn`` child process (kind ``torch-process``; the same interface)."""

    engine_name = "torch"

    def __init__(
        self,
        settings: EngineSettings,
        *,
        max_batch_rows: int = 64,
        threads: int | None = None,
        start_timeout_s: float = _START_TIMEOUT_S,
    ):
        self.settings = settings
        self.device = torch.device(settings.device)
        self.max_batch_rows = max_batch_rows
        ctx = mp.get_context("spawn")
        self._init_sampler(abort=ctx.Event())
        self._call_lock = threading.Lock()
        self._closed = False
        self._tmp = sync_folder("arctic-sampling-sync-")
        self._conn, child_conn = ctx.Pipe(duplex=True)
        threads = int(threads) if threads else torch.get_num_threads()
        self._proc = ctx.Process(
            target=_child_main,
            args=(
                child_conn,
                dataclasses.asdict(settings),
                int(max_batch_rows),
                threads,
                os.getpid(),
                self.abort,
                own_environ(),
            ),  # fmt: skip
            name="arctic-sampling-engine",
            daemon=True,
        )
        try:
            self._proc.start()
        finally:
            child_conn.close()
        try:
            info = self._call({"op": "hello"}, timeout=start_timeout_s)
        except BaseException:
            self.close()
            raise
        self.vocab_size = int(info["vocab_size"])
        self.eos_ids = tuple(info["eos_ids"])
        self.pad_id = int(info["pad_id"])
        logger.info("sampling engine process pid %d (torch threads %d)", self._proc.pid, threads)

    @property
    def pid(self) -> int | None:
        return self._proc.pid

    @property
    def model(self):
        raise AttributeError("the sampling model lives in the sampling process; use weight_norm()")

    # ---- transport ----
    def _call(self, msg: dict, timeout: float | None = None) -> Any:
        with self._call_lock:
            if self._closed:
                raise SamplingProcessError("the sampling process is closed")
            try:
                self._conn.send(msg)
            except (OSError, EOFError) as e:
                raise SamplingProcessError(f"the sampling process is gone ({e})") from None
            deadline = None if timeout is None else time.monotonic() + timeout
            while not self._conn.poll(0.5):
                if not self._proc.is_alive():
                    raise SamplingProcessError(f"the sampling process died (exit code {self._proc.exitcode})")
                if deadline is not None and time.monotonic() > deadline:
                    raise SamplingProcessError(f"the sampling process did not answer {msg['op']!r} in {timeout}s")
            try:
                reply = self._conn.recv()
            except (OSError, EOFError):
                raise SamplingProcessError(f"the sampling process died (exit code {self._proc.exitcode})") from None
        if reply.get("ok"):
            return reply.get("value")
        if reply.get("kind") == "request":
            raise RequestError(reply["error"], int(reply.get("status", 422)))
        raise SamplingProcessError(f"sampling process: {reply.get('error')}")

    # ---- engine interface ----
    def generate(self, items: list[GenerateItem]) -> tuple[list[dict], int]:
        self.require_ready()
        version = self.policy_version
        results = self._call({"op": "generate", "version": version, "items": [dataclasses.asdict(it) for it in items]})
        return results, version

    def load_weights_from(self, source: WeightSource) -> None:
        """Write ``source``'s unique parameters to a safetensors file; the child copies them in."""
        with weights_file(self._tmp, source_tensors(source)) as path:
            self._call({"op": "load_weights", "path": path})

    def weight_norm(self) -> tuple[float, int]:
        norm, n = self._call({"op": "weight_norm"})
        return float(norm), int(n)

    def sleep(self, level: int) -> dict:
        out = self._call({"op": "sleep", "level": level})
        self.state = out["state"]
        return out

    def wake(self, tags: list[str] | None) -> dict:
        out = self._call({"op": "wake", "tags": None if tags is None else list(tags)})
        self.state = out["state"]
        return out

    def engine_config(self) -> dict[str, Any]:
        """As the torch engine's: rows decoded together and the job's ``max_seq_len``."""
        return {"max_num_seqs": int(self.max_batch_rows), "max_model_len": int(self.settings.max_seq_len)}

    def close(self) -> None:
        """Stop the child (asks, then kills after a grace period) and remove the sync folder. Idempotent."""
        if self._call_lock.acquire(timeout=_CLOSE_GRACE_S):
            try:
                if not self._closed and self._proc.is_alive():
                    with _suppress_os():
                        self._conn.send({"op": "close"})
            finally:
                self._closed = True
                self._call_lock.release()
        self._closed = True
        self._proc.join(_CLOSE_GRACE_S)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(_CLOSE_GRACE_S)
        with _suppress_os():
            self._conn.close()
        shutil.rmtree(self._tmp, ignore_errors=True)


class _suppress_os:
    def __enter__(self):
        return self

    def __exit__(self, et, e, tb):
        return et is not None and issubclass(et, (OSError, EOFError, ValueError))


# ------------------------------------------------------------------------------------------------
# the child
# ------------------------------------------------------------------------------------------------


def _load_weights(eng: SamplingEngine, path: str) -> None:
    from safetensors.torch import load_file

    state = load_file(path)
    dst = dict(eng.model.named_parameters())
    check_weight_layout({n: t.shape for n, t in state.items()}, {n: q.shape for n, q in dst.items()})
    with torch.no_grad():
        for name, t in state.items():
            q = dst[name]
            q.copy_(t.to(q.device, q.dtype))


def _child_main(conn, settings: dict, max_batch_rows: int, threads: int, parent_pid: int, abort, env: dict) -> None:
    apply_environ(env)  # the server's own device list, whatever a vLLM build set process-wide meanwhile
    torch.set_num_threads(max(1, threads))
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    watch_parent(lambda: os._exit(3), parent_pid, interval_s=1.0)
    try:
        eng = SamplingEngine(EngineSettings(**settings), max_batch_rows=max_batch_rows)
    except Exception as e:  # the build failure is the job's reason
        conn.send({"ok": False, "kind": "internal", "error": one_line(e)})
        return
    eng.abort = abort
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        op = msg.get("op")
        try:
            if op == "close":
                return
            if op == "hello":
                value: Any = {"vocab_size": eng.vocab_size, "eos_ids": list(eng.eos_ids), "pad_id": eng.pad_id}
            elif op == "generate":
                eng.policy_version = int(msg["version"])
                results, _ = eng.generate([GenerateItem(**d) for d in msg["items"]])
                value = results
            elif op == "load_weights":
                _load_weights(eng, msg["path"])
                value = None
            elif op == "weight_norm":
                value = list(weight_norm(eng.model))
            elif op == "sleep":
                value = eng.sleep(msg["level"])
            elif op == "wake":
                value = eng.wake(msg["tags"])
            else:
                raise RuntimeError(f"unknown op {op!r}")
            reply = {"ok": True, "value": value}
        except RequestError as e:
            reply = {"ok": False, "kind": "request", "error": e.reason, "status": e.status}
        except Exception as e:  # reported to the parent, which raises it
            logger.exception("sampling process: %s failed", op)
            reply = {"ok": False, "kind": "internal", "error": one_line(e)}
        try:
            conn.send(reply)
        except (EOFError, OSError):
            return
