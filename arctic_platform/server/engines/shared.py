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
"""What engines that hold their model in another process share: where weight files go (``/dev/shm``), the atomic
weight file a sync hands over, the parameter name / shape check of a sync, and the watchdog that ends a child
process when its parent dies. Imports torch only inside the functions that need it.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from ..errors import RequestError

if TYPE_CHECKING:
    import torch

    from .base import BucketedWeightSource, WeightSource

__all__ = [
    "ENGINE_ENV_KEYS",
    "SERVER_ENV",
    "apply_environ",
    "bucket_bytes",
    "check_sync_space",
    "check_weight_layout",
    "export_tokenizer",
    "nbytes",
    "own_environ",
    "plan_buckets",
    "replica_environ",
    "shm_dir",
    "source_tensors",
    "stream_buckets",
    "sync_folder",
    "watch_parent",
    "weights_file",
]


SERVER_ENV: dict[str, str] = dict(os.environ)
"""This process's environment when the engines package loaded, before any engine was built."""

ENGINE_ENV_KEYS = ("CUDA_VISIBLE_DEVICES", "VLLM_CPU_OMP_THREADS_BIND", "OMP_NUM_THREADS")
"""The variables a vLLM replica's build sets in this process for its own processes (:func:`replica_environ`)."""

_REPLICA_ENV_LOCK = threading.Lock()


@contextlib.contextmanager
def replica_environ(env: Mapping[str, str]) -> Iterator[None]:
    """``env`` set in this process's environment for the block, one block at a time. vLLM 0.31's ``LLMEngine`` takes
    no environment of its own: its processes inherit this one at spawn, so a replica's build sets its GPUs (and CPU
    threads) here. The processes the server starts itself (FSDP ranks, the sampling process) never inherit such a
    value: they set :func:`own_environ` first (:func:`apply_environ`), whatever another job's build set meanwhile."""
    with _REPLICA_ENV_LOCK:
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            yield
        finally:
            apply_environ(old)


def own_environ() -> dict[str, str | None]:
    """The server's own values (``None``: unset) of :data:`ENGINE_ENV_KEYS`, for an engine process the server starts
    (passed to it explicitly; it calls :func:`apply_environ` before it touches a device)."""
    return {k: SERVER_ENV.get(k) for k in ENGINE_ENV_KEYS}


def apply_environ(env: Mapping[str, str | None]) -> None:
    """Set (or, for ``None``, remove) each of ``env`` in this process's environment."""
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def export_tokenizer(model_path: str, out) -> None:
    """Save the model folder's tokenizer beside an HF export in ``out`` (a folder without one: the weights alone,
    with a warning)."""
    from .base import load_tokenizer

    try:
        load_tokenizer(model_path).save_pretrained(out)
    except RequestError as e:
        from ..logs import logger

        logger.warning("HF export to %s: no tokenizer saved (%s)", out, e.reason)


def shm_dir() -> str | None:
    """``/dev/shm`` when it exists and is writable (weight files stay in memory), else None (the temp folder)."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def sync_folder(prefix: str) -> str:
    """A new private folder for an engine's weight files, under :func:`shm_dir` when there is one."""
    return tempfile.mkdtemp(prefix=prefix, dir=shm_dir())


def source_tensors(source: WeightSource) -> dict[str, torch.Tensor]:
    """``source``'s parameters as contiguous CPU tensors by name (each tensor once)."""
    return {n: p.detach().to("cpu").contiguous() for n, p in source.named_parameters()}


def check_weight_layout(source: Mapping[str, Sequence[int]], target: Mapping[str, Sequence[int]]) -> None:
    """A sync's source and target hold the same parameter names with the same shapes.

    Raises:
        RequestError: 409 naming up to five missing and unexpected names, or the first shape that differs.
    """
    if set(source) != set(target):
        missing, extra = sorted(set(target) - set(source))[:5], sorted(set(source) - set(target))[:5]
        raise RequestError(
            "source and target models have different parameter names; cannot sync weights "
            f"(missing {missing}, unexpected {extra})",
            409,
        )
    for n, shape in source.items():
        if list(shape) != list(target[n]):
            raise RequestError(f"weight {n}: shape {list(shape)} != target {list(target[n])}", 409)


@contextlib.contextmanager
def weights_file(folder: str, tensors: Mapping[str, torch.Tensor], name: str = "weights.safetensors") -> Iterator[str]:
    """Write ``tensors`` as ``<folder>/<name>`` atomically (a reader never sees a partial file) and yield its path;
    the file is removed when the block ends."""
    from safetensors.torch import save_file

    path = os.path.join(folder, name)
    save_file(dict(tensors), path + ".tmp")
    os.replace(path + ".tmp", path)
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.remove(path)


def check_sync_space(folder: str, need: int) -> None:
    """The sync folder (``/dev/shm`` when writable) has ``need`` bytes free.

    Raises:
        RequestError: 507 naming both sizes and the ways out.
    """
    free = shutil.disk_usage(folder).free
    if free < need:
        raise RequestError(
            f"a weight sync needs {need / 1024**2:.0f} MiB free in {os.path.dirname(folder) or folder} (one bucket "
            f"of --weight-sync-bucket-mb, or the model's largest tensor in the target's dtype) but only "
            f"{free / 1024**2:.0f} MiB are free: enlarge it (docker run --shm-size=...) or lower "
            "--weight-sync-bucket-mb",
            507,
        )


def stream_buckets(
    source: WeightSource | BucketedWeightSource,
    folder: str,
    *,
    bucket_bytes: int,
    dtype: torch.dtype | None = None,
    want: Mapping[str, Sequence[int]] | None = None,
) -> Iterator[tuple[str, dict[str, list[int]]]]:
    """A weight sync as a stream of bucket files: yields ``(path, {name: shape})`` per bucket, each a safetensors
    file of at most ``bucket_bytes`` (or one larger tensor) in ``dtype`` (``None``: the source's own) under
    ``folder``; the file is removed when the consumer asks for the next one. At any moment the sync holds one bucket,
    never the whole model.

    A :class:`.base.BucketedWeightSource` (a sharded training job) plans its buckets, and the plan is checked against
    ``want`` (name -> shape) and the folder's free space before the first bucket is written, so a mismatch changes
    nothing; its ranks write each bucket themselves (cast before the gather). Any other source is read once, each
    tensor checked against ``want`` as it comes, cast where it lives and copied to the CPU.

    Raises:
        RequestError: 409 on a name or shape ``want`` does not have (an in-process source: the buckets already
            yielded were delivered), 507 when ``folder`` cannot hold a bucket.
    """
    if hasattr(source, "bucket_plan"):
        plan = source.bucket_plan(dtype, bucket_bytes)
        if want is not None:
            check_weight_layout({n: s for b in plan for n, s, _ in b}, want)
        check_sync_space(folder, max((sum(nb for *_, nb in b) for b in plan), default=0))
        for k, b in enumerate(plan):
            path = os.path.join(folder, f"bucket-{k}.safetensors")
            source.write_bucket([n for n, *_ in b], dtype, path)
            try:
                yield path, {n: list(s) for n, s, _ in b}
            finally:
                with contextlib.suppress(OSError):
                    os.remove(path)
        return
    seen: dict[str, list[int]] = {}
    bucket: dict[str, torch.Tensor] = {}
    size, k = 0, 0
    for name, p in source.named_parameters():
        shape = list(p.shape)
        if want is not None and (name not in want or list(want[name]) != shape):
            check_weight_layout({**seen, name: shape}, {n: want[n] for n in [*seen, name] if n in want})
        seen[name] = shape
        t = p.detach()
        t = (t.to(dtype=dtype) if dtype is not None else t).to("cpu").contiguous()  # cast where it lives, then copy
        nbytes = t.numel() * t.element_size()
        if bucket and size + nbytes > bucket_bytes:
            with weights_file(folder, bucket, name=f"bucket-{k}.safetensors") as path:
                yield path, {n: list(v.shape) for n, v in bucket.items()}
            bucket, size, k = {}, 0, k + 1
        bucket[name] = t
        size += nbytes
    if bucket:
        with weights_file(folder, bucket, name=f"bucket-{k}.safetensors") as path:
            yield path, {n: list(v.shape) for n, v in bucket.items()}
    if want is not None:
        check_weight_layout(seen, want)  # nothing missing


def plan_buckets(tensors: Sequence[tuple[str, list[int], int]], bucket_bytes: int) -> list[list]:
    """``(name, shape, bytes)`` in order, cut into buckets of at most ``bucket_bytes`` (or one larger tensor)."""
    buckets: list[list] = []
    size = 0
    for name, shape, nbytes in tensors:
        if not buckets or (buckets[-1] and size + nbytes > bucket_bytes):
            buckets.append([])
            size = 0
        buckets[-1].append((name, list(shape), int(nbytes)))
        size += nbytes
    return buckets


def bucket_bytes(mb: float) -> int:
    """``--weight-sync-bucket-mb`` in bytes (at least 1)."""
    return max(1, int(float(mb) * 1024**2))


def nbytes(shape: Sequence[int], dtype: torch.dtype) -> int:
    """Bytes of a tensor of ``shape`` in ``dtype``."""
    import torch

    return math.prod(shape) * torch.empty((), dtype=dtype).element_size()


def watch_parent(on_orphan: Callable[[], None], parent_pid: int | None = None, interval_s: float = 0.5):
    """Call ``on_orphan()`` once when this process's parent changes (the parent died); a daemon thread polls every
    ``interval_s``. ``parent_pid`` defaults to the current parent. Returns the thread."""
    parent = os.getppid() if parent_pid is None else int(parent_pid)

    def loop() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                on_orphan()
                return

    t = threading.Thread(target=loop, daemon=True, name="arctic-parent-watch")
    t.start()
    return t
