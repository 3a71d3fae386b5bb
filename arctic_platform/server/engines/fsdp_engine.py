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
"""Training and log_prob jobs on N devices (engine kind ``fsdp``): one process per device, the model sharded with
FSDP2, driven from the server process.

The server process keeps the HTTP side and the job's interface (:class:`ShardedTrainingEngine`,
:class:`ShardedForwardEngine`); a :class:`RankGroup` of ``spawn`` children does the work, one per device
(:mod:`.fsdp_worker`: gloo on CPU, NCCL on CUDA). For each call the driver validates the request exactly as the
one-device engine does (same functions, same 4xx), then:

* **Rows split over ranks** in contiguous chunks (verl's ``data.chunk(dp_size)``), each chunk cut into micro-batches
  by the call's micro-batching (fixed rows per GPU, or verl's token-budget partition), every rank running as many
  micro-batches as the rank with the most (verl's ``same_micro_num_in_dp``; an empty one runs a row with zero loss,
  because FSDP's collectives pair up). The loss keeps the mini-batch's global denominators (``batch_num_tokens``,
  ``global_batch_size``) and verl's ``dp_size`` factor, which FSDP's gradient averaging cancels: N ranks give the
  one-rank gradient. Metrics are reduced over ranks as verl's training worker reduces them.
* **Everything else** (step, checkpoints, HF export, profiler, sleep / wake) is sent to every rank; rank 0's reply is
  the answer.
* **Weight sync** (:class:`RankWeights`, a :class:`.engines.base.BucketedWeightSource`): the ranks plan the sync's
  buckets (``--weight-sync-bucket-mb``, in the target's dtype), then gather one bucket at a time, tensor by tensor,
  cast before the all-gather (bf16 for a vLLM sampler: half the bytes of the fp32 master weights; LoRA merged on the
  gathered tensors), and rank 0 writes the bucket as one safetensors file in the target's ``/dev/shm`` folder, which
  the target loads and removes before the next. No whole-model file is written and the server process never holds
  the weights. A sharded log_prob job receives the same buckets: every rank reads the file and keeps its own slice.
* **Failure is a job failure, never a hang**: a rank that dies, or fails with an internal error, stops the call at
  once; the driver kills the other ranks (they may be waiting in a collective) and raises
  :class:`~.errors.EngineFailed` with the reason, which fails the job (:func:`.engine_calls.call_locked`). A client
  mistake that every rank reports alike stays a 4xx and the job keeps running. The ranks exit when the server
  process dies (parent watchdog).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import shutil
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from ...schedule import TrainingSettings
from ..batch import DenseBatch, select_rows
from ..errors import EngineFailed, RequestError
from ..logs import logger
from ..loss import LossConfigError, MetricAccumulator, MicroBatching, micro_batch_rows
from ..settings import ServerLimits
from .base import EngineSpec, ForwardInterface, TrainingInterface, WeightSource, load_tokenizer
from .fsdp_worker import rank_main, rank_settings, receive, send
from .model_engine import EngineSettings, forward_reply, plan_forward, resolve_dtype
from .shared import (
    bucket_bytes,
    check_sync_space,
    check_weight_layout,
    nbytes,
    own_environ,
    stream_buckets,
    sync_folder,
)
from .training_engine import plan_update, read_checkpoint_state

__all__ = ["RankGroup", "RankWeights", "ShardedForwardEngine", "ShardedTrainingEngine", "split_rows"]

_START_TIMEOUT_S = 900.0
_CLOSE_GRACE_S = 10.0
_DISAGREE_GRACE_S = 30.0
"""How long the other ranks may take to report a client mistake one rank reported, before the job fails."""
_PEER_GRACE_S = 2.0
"""How long a rank's failure waits for the ranks still working to answer or die: a peer's death reaches the living
ranks as a collective's error (gloo: "Connection reset by peer"), and the death is the reason to report."""


def split_rows(db: DenseBatch, mb: MicroBatching | None, world: int) -> list[tuple[DenseBatch, list[list[int]]]]:
    """Each rank's rows (contiguous chunks) and their micro-batches (row indices into the rank's rows), every rank
    with the same number of micro-batches (empty ones pad the shorter ranks; a rank without rows gets row 0 of
    ``db`` to run them on).

    Raises:
        RequestError: a row longer than the dynamic-batching budget.
    """
    mb = mb or MicroBatching()
    n = int(db.input_ids.shape[0])
    chunks = [c.tolist() for c in torch.arange(n).tensor_split(world)]
    seq = db.attention_mask.sum(-1)
    try:
        count = max(len(micro_batch_rows(seq[c], mb)) for c in chunks if c)
        out = []
        for c in chunks:
            if c:
                out.append((select_rows(db, c), micro_batch_rows(seq[c], mb, min_count=count)))
            else:
                out.append((select_rows(db, [0]), [[] for _ in range(count)]))
    except LossConfigError as e:
        raise RequestError(str(e)) from None
    return out


class RankGroup:
    """N ``spawn`` children, one per device, each running :func:`.fsdp_worker.rank_main` for one job."""

    def __init__(
        self,
        job_type: str,
        settings: EngineSettings,
        devices: list[str],
        *,
        training: TrainingSettings | None = None,
        threads: int | None = None,
        timeout_s: float = 1800.0,
        start_timeout_s: float = _START_TIMEOUT_S,
        full_determinism: bool = False,
    ):
        self.world = len(devices)
        self.devices = list(devices)
        self.failed: str | None = None
        self._lock = threading.Lock()
        self._closed = False
        self.folder = sync_folder("arctic-fsdp-")
        init_file = os.path.join(self.folder, "rendezvous")
        threads = int(threads) if threads else torch.get_num_threads()
        ctx = mp.get_context("spawn")
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        self.timeout_s = timeout_s
        try:
            for rank, dev in enumerate(self.devices):
                spec = self._spec(settings, dev, training, full_determinism)
                parent, child = ctx.Pipe(duplex=True)
                proc = ctx.Process(
                    target=rank_main,
                    args=(child, rank, self.world, job_type, spec, init_file, os.getpid(), threads, own_environ()),
                    name=f"arctic-{job_type}-rank{rank}",
                    daemon=True,
                )
                proc.start()
                child.close()
                self._procs.append(proc)
                self._conns.append(parent)
            hellos = self._receive(list(range(self.world)), start_timeout_s)
            self.hello = hellos[0]
            self.cuda_visible_devices = [h["cuda_visible_devices"] for h in hellos]
            """Each rank's ``CUDA_VISIBLE_DEVICES`` (the server's own, whatever another job's build set meanwhile)."""
        except BaseException:
            self.close()
            raise
        logger.info("%s job: %d ranks on %s (pids %s)", job_type, self.world, self.devices, self.pids)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def _spec(self, settings: EngineSettings, device: str, training: TrainingSettings | None, determinism: bool):
        return {
            "settings": rank_settings(settings, device),
            "training": asdict(training) if training is not None else None,
            "timeout_s": self.timeout_s,
            "full_determinism": determinism,
        }

    def call(self, msgs: list[dict | None] | dict, timeout: float | None = None) -> list[Any]:
        """Send ``msgs`` (one per rank, None = that rank sits out; a dict goes to every rank) and return the
        replies' values, in rank order, of the ranks that got one.

        Raises:
            RequestError: every rank that answered reported the same kind of client mistake (the job goes on).
            EngineFailed: a rank died or failed; the ranks are stopped.
        """
        if isinstance(msgs, dict):
            msgs = [msgs] * self.world
        with self._lock:
            if self.failed is not None:
                raise EngineFailed(self.failed)
            if self._closed:
                raise EngineFailed("the engine's rank processes are closed")
            ranks = [r for r, m in enumerate(msgs) if m is not None]
            for r in ranks:
                try:
                    send(self._conns[r], msgs[r])
                except (OSError, EOFError, BrokenPipeError) as e:
                    self._fail(self._exit_reason(r, f"rank {r} is gone ({e})"))
            return self._receive(ranks, timeout)

    def _receive(self, ranks: list[int], timeout: float | None) -> list[Any]:
        pending = {self._conns[r]: r for r in ranks}
        replies: dict[int, dict] = {}
        deadline = None if timeout is None else time.monotonic() + timeout
        disagree_since = None
        while pending:
            for conn in mpc.wait(list(pending), timeout=0.5):
                r = pending.pop(conn)
                try:
                    reply = receive(conn)
                except (EOFError, OSError):
                    self._fail(self._exit_reason(r, f"rank {r} closed its pipe"))
                replies[r] = reply
                if not reply.get("ok") and reply.get("kind") != "request":
                    self._fail(self._dead_peer(pending) or reply.get("error") or f"rank {r} failed")
                if not reply.get("ok") and disagree_since is None:
                    disagree_since = time.monotonic()
            for r in pending.values():
                why = self._death(r)
                if why:
                    self._fail(why)
            now = time.monotonic()
            if pending and disagree_since is not None and now - disagree_since > _DISAGREE_GRACE_S:
                r = next(iter(replies))
                self._fail(f"rank {r} refused the call ({replies[r].get('error')}) while the others went on")
            if pending and deadline is not None and now > deadline:
                self._fail(f"ranks {sorted(pending.values())} did not answer in {timeout:.0f}s")
        errors = [replies[r] for r in ranks if not replies[r].get("ok")]
        if errors:
            if len(errors) != len(ranks):
                self._fail(f"rank(s) disagreed on a request: {errors[0].get('error')}")
            raise RequestError(errors[0]["error"], int(errors[0].get("status", 422)))
        self.last = replies[ranks[0]]
        return [replies[r].get("value") for r in ranks]

    def _dead_peer(self, pending: dict) -> str | None:
        """The death of a rank, when one has died: any rank already gone, else one of ``pending`` (connection ->
        rank, still working) whose pipe closes within :data:`_PEER_GRACE_S`. None when all live (or answer)."""
        for r in range(self.world):
            why = self._death(r)
            if why:
                return why
        waiting, deadline = dict(pending), time.monotonic() + _PEER_GRACE_S
        while waiting and time.monotonic() < deadline:
            for conn in mpc.wait(list(waiting), timeout=max(0.0, deadline - time.monotonic())):
                r = waiting.pop(conn)
                try:
                    receive(conn)  # a reply: this rank lives (its own error, if any, is a symptom)
                except (EOFError, OSError):
                    return self._exit_reason(r, f"rank {r} closed its pipe")
        return None

    def _exit_reason(self, rank: int, fallback: str) -> str:
        """Why ``rank``'s pipe broke: its exit code once the process has ended (a pipe breaks as its process dies,
        so wait up to :data:`_CLOSE_GRACE_S` for it), else ``fallback``."""
        self._procs[rank].join(_CLOSE_GRACE_S)
        return self._death(rank) or fallback

    def _death(self, rank: int) -> str | None:
        p = self._procs[rank]
        if p.is_alive():
            return None
        return f"rank {rank} (pid {p.pid}, {self.devices[rank]}) died with exit code {p.exitcode}"

    def _fail(self, reason: str):
        self.failed = reason
        logger.error("sharded engine failed: %s; stopping its ranks", reason)
        self._kill()
        raise EngineFailed(reason)

    def _kill(self) -> None:
        for p in self._procs:
            if p.is_alive():
                p.kill()
        for p in self._procs:
            p.join(_CLOSE_GRACE_S)

    def close(self) -> None:
        """Ask every rank to exit, kill what is left after a grace period, remove the folder. Idempotent."""
        got = self._lock.acquire(timeout=_CLOSE_GRACE_S)
        try:
            if not self._closed:
                for c, p in zip(self._conns, self._procs, strict=False):
                    if p.is_alive():
                        with contextlib.suppress(OSError, EOFError, ValueError):
                            send(c, {"op": "close"})
            self._closed = True
        finally:
            if got:
                self._lock.release()
        deadline = time.monotonic() + _CLOSE_GRACE_S
        for p in self._procs:
            p.join(max(0.0, deadline - time.monotonic()))
        self._kill()
        for c in self._conns:
            with contextlib.suppress(OSError):
                c.close()
        shutil.rmtree(self.folder, ignore_errors=True)


class RankWeights:
    """The weights of a sharded job as a :class:`.engines.base.BucketedWeightSource` (the module docstring's weight
    sync); ``named_parameters()`` streams the same buckets in the ranks' own dtype through the group's folder."""

    def __init__(self, group: RankGroup, bucket_bytes: int):
        self._group = group
        self.bucket_bytes = int(bucket_bytes)

    def bucket_plan(self, dtype: torch.dtype | None, bucket_bytes: int) -> list[list[tuple[str, list[int], int]]]:
        msg = {"op": "sync_plan", "dtype": _dtype_name(dtype), "bucket_bytes": int(bucket_bytes)}
        plan = self._group.call([msg] + [None] * (self._group.world - 1))[0]  # every rank would plan the same
        return [[(n, list(shape), int(nb)) for n, shape, nb in b] for b in plan]

    def write_bucket(self, names: list[str], dtype: torch.dtype | None, path: str) -> None:
        self._group.call({"op": "write_sync_bucket", "names": list(names), "dtype": _dtype_name(dtype), "path": path})

    def named_parameters(self):
        from safetensors.torch import load_file

        for path, _ in stream_buckets(self, self._group.folder, bucket_bytes=self.bucket_bytes):
            yield from load_file(path).items()


def _dtype_name(dtype: torch.dtype | None) -> str | None:
    return None if dtype is None else str(dtype).removeprefix("torch.")


class _ShardedMemory:
    """Sleep / wake of a sharded engine: every rank moves its own shard."""

    _group: RankGroup
    asleep = False

    def require_awake(self) -> None:
        if self.asleep:
            raise RequestError(f"the {self.kind} engine is offloaded (sleeping); wake it first", 409)

    def offload(self, mode: str = "all") -> dict:
        outs = self._group.call({"op": "offload", "mode": mode})
        self.asleep = True
        return {**outs[0], "world_size": self._group.world}

    def reload(self) -> dict:
        outs = self._group.call({"op": "reload"})
        self.asleep = False
        return {**outs[0], "world_size": self._group.world}

    def empty_cache(self) -> dict:
        return {**self._group.call({"op": "empty_cache"})[0], "world_size": self._group.world}

    @property
    def pids(self) -> list[int]:
        return self._group.pids

    def close(self) -> None:
        self._group.close()

    def _forward(self, batch: dict, meta: dict, processing: dict | None) -> dict:
        plan = plan_forward(batch, meta, processing, vocab_size=self.vocab_size, max_seq_len=self.settings.max_seq_len)
        shards = split_rows(plan.db, plan.micro_batching, self._group.world)
        msgs = [
            {
                "op": "forward",
                "db": sub,
                "parts": parts,
                "temperature": plan.temperature,
                "want_entropy": plan.want_entropy,
            }
            for sub, parts in shards
        ]
        outs = self._group.call(msgs)
        n = int(plan.db.input_ids.shape[0])
        chunks = [c.tolist() for c in torch.arange(n).tensor_split(self._group.world)]
        lp = torch.zeros(plan.db.input_ids.shape, dtype=torch.float32)
        ent = torch.zeros(plan.db.input_ids.shape, dtype=torch.float32) if plan.want_entropy else None
        for c, o in zip(chunks, outs, strict=True):
            if c:
                lp[c] = o["logprobs"][: len(c)]
                if ent is not None:
                    ent[c] = o["entropy"][: len(c)]
        return forward_reply(lp, ent)


class ShardedTrainingEngine(_ShardedMemory, TrainingInterface):
    """Job ``training`` on N devices (kind ``fsdp``; see the module docstring)."""

    engine_name = "fsdp"

    def __init__(
        self,
        settings: EngineSettings,
        training: TrainingSettings,
        devices: list[str],
        *,
        threads: int | None = None,
        timeout_s: float = 1800.0,
        full_determinism: bool = False,
        weight_sync_bucket_mb: float = ServerLimits.weight_sync_bucket_mb,
    ):
        if settings.dtype == "float16":
            raise RequestError("float16 training needs loss scaling, which this server does not do; use bfloat16", 422)
        self.settings = settings
        self.training = training
        self.policy_version = 0
        self._group = RankGroup(
            "training",
            settings,
            devices,
            training=training,
            threads=threads,
            timeout_s=timeout_s,
            full_determinism=full_determinism,
        )
        hello = self._group.hello
        self.vocab_size = int(hello["vocab_size"])
        self.param_shapes: dict[str, list[int]] = hello["param_shapes"]
        self.param_names: list[str] = hello["trainable"]
        self.param_dtype = resolve_dtype(hello["param_dtype"])
        self._describe: dict = hello["describe"]
        self._weights = RankWeights(self._group, bucket_bytes(weight_sync_bucket_mb))

    @classmethod
    def from_spec(cls, spec: EngineSpec) -> ShardedTrainingEngine:
        return cls(
            spec.settings,
            spec.training,
            spec.devices or [spec.settings.device],
            threads=spec.threads,
            timeout_s=spec.engine_timeout_s,
            full_determinism=spec.full_determinism,
            weight_sync_bucket_mb=spec.weight_sync_bucket_mb,
        )

    @property
    def global_steps(self) -> int:
        return int(self._describe.get("global_steps", 0))

    def describe(self) -> dict[str, Any]:
        return {
            **self._describe,
            "policy_version": self.policy_version,
            "world_size": self._group.world,
            "ranks_cuda_visible_devices": self._group.cuda_visible_devices,
        }

    def _call(self, msgs, *, rank0_only: bool = False):
        if isinstance(msgs, dict):
            msgs = {**msgs, "policy_version": self.policy_version}
            if rank0_only:
                msgs = [msgs] + [None] * (self._group.world - 1)
        outs = self._group.call(msgs)
        self._describe = self._group.last.get("describe") or self._describe
        return outs

    # ---- training ----
    def forward_backward(self, batch: dict, meta: dict, processing: dict | None = None) -> dict:
        plan = plan_update(
            batch,
            meta,
            processing,
            vocab_size=self.vocab_size,
            max_seq_len=self.settings.max_seq_len,
            default_micro_batch_size=self.training.micro_batch_size,
        )
        world = self._group.world
        numbers = {
            "temperature": plan.temperature,
            "want_entropy": plan.want_entropy,
            "batch_num_tokens": plan.batch_num_tokens,
            "global_batch_size": plan.global_batch_size,
        }
        shards = split_rows(plan.db, plan.micro_batching, world)
        msgs = [
            {
                "op": "forward_backward",
                "db": sub,
                "parts": parts,
                "actor_config": plan.actor_config,
                "policy_loss_config": plan.policy_loss_config,
                "numbers": numbers,
                "dp_size": world,
            }
            for sub, parts in shards
        ]
        out = MetricAccumulator.merge_dp(self._call(msgs))
        real = sum(1 for _, parts in shards for p in parts if p)
        return {"metrics": out, "avg_loss": out["loss"], "micro_batches": real}

    def forward(self, batch: dict, meta: dict, processing: dict | None = None) -> dict:
        return self._forward(batch, meta, processing)

    def step(
        self,
        learning_rate: float | None = None,
        *,
        lr_scheduler_step: bool | None = None,
        total_training_steps: int | None = None,
    ) -> dict:
        kw = {"lr_scheduler_step": lr_scheduler_step, "total_training_steps": total_training_steps}
        return self._call({"op": "step", "learning_rate": learning_rate, "kw": kw})[0]

    # ---- checkpoints ----
    def save(self, root: Path, step: int | None, save_total_limit: int | None, export_hf: bool = False) -> dict:
        msg = {"op": "save", "root": str(root), "step": step, "save_total_limit": save_total_limit}
        return self._call({**msg, "export_hf": export_hf})[0]

    def export_hf(self, out: Path) -> None:
        self._call({"op": "export_hf", "out": str(out)})

    def load(self, target: Path) -> dict:
        from safetensors import safe_open

        read_checkpoint_state(target, self.param_names)
        with safe_open(str(target / "model.safetensors"), framework="pt") as f:
            shapes = {k: f.get_slice(k).get_shape() for k in f.keys()}
        try:
            check_weight_layout(shapes, self.param_shapes)
        except RequestError as e:
            raise RequestError(f"{target}: {e.reason}", 409) from None
        out = self._call({"op": "load", "target": str(target)})[0]
        self.policy_version = int(out["policy_version"])
        return out

    def profile(self, action: str, path: Path, tag: str | None = None) -> dict:
        return self._call({"op": "profile", "action": action, "path": str(path), "tag": tag}, rank0_only=True)[0]

    # ---- weights ----
    def weights_for_sync(self) -> WeightSource:
        return self._weights


class ShardedForwardEngine(_ShardedMemory, ForwardInterface):
    """Job ``log_prob`` on N devices (kind ``fsdp``): forward-only, rows split over the ranks."""

    engine_name = "fsdp"

    def __init__(
        self,
        settings: EngineSettings,
        devices: list[str],
        *,
        threads: int | None = None,
        timeout_s: float = 1800.0,
        full_determinism: bool = False,
        weight_sync_bucket_mb: float = ServerLimits.weight_sync_bucket_mb,
    ):
        self.settings = settings
        self._tokenizer = None
        self._group = RankGroup(
            "log_prob", settings, devices, threads=threads, timeout_s=timeout_s, full_determinism=full_determinism
        )
        hello = self._group.hello
        self.vocab_size = int(hello["vocab_size"])
        self.param_shapes: dict[str, list[int]] = hello["param_shapes"]
        self._weights = RankWeights(self._group, bucket_bytes(weight_sync_bucket_mb))
        # a sync from a training job lands here one bucket at a time, in float32 at most
        sizes = [nbytes(shape, torch.float32) for shape in self.param_shapes.values()]
        check_sync_space(self._group.folder, min(sum(sizes), max([self._weights.bucket_bytes, *sizes])))

    @classmethod
    def from_spec(cls, spec: EngineSpec) -> ShardedForwardEngine:
        return cls(
            spec.settings,
            spec.devices or [spec.settings.device],
            threads=spec.threads,
            timeout_s=spec.engine_timeout_s,
            full_determinism=spec.full_determinism,
            weight_sync_bucket_mb=spec.weight_sync_bucket_mb,
        )

    def describe(self) -> dict[str, Any]:
        return {"world_size": self._group.world, "ranks_cuda_visible_devices": self._group.cuda_visible_devices}

    def forward(self, batch: dict, meta: dict, processing: dict | None = None) -> dict:
        return self._forward(batch, meta, processing)

    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.settings.model_path)
        return self._tokenizer

    def log_probs_text(self, tokenizer, prompts: list, completions: list | None, top_k: int = 1) -> list[dict]:
        # every rank scores every row (the sharded forward is collective); rank 0's answer is returned
        msg = {"op": "log_probs_text", "prompts": prompts, "completions": completions, "top_k": top_k}
        return self._group.call(msg)[0]

    def load_weights_from(self, source: WeightSource) -> None:
        """The source's buckets (:func:`.engines.shared.stream_buckets`, its own dtype) into every rank's shards; a
        sharded source's plan is checked against this model before any bucket moves (409, nothing changed)."""
        for path, _ in stream_buckets(
            source, self._group.folder, bucket_bytes=self._weights.bucket_bytes, want=self.param_shapes
        ):
            self._group.call({"op": "load_sync_bucket", "path": path})

    def weight_norm(self) -> tuple[float, int]:
        from .model_engine import weight_norm

        return weight_norm(self._weights)
