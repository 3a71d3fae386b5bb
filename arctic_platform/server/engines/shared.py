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
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from ..errors import RequestError

if TYPE_CHECKING:
    import torch

    from .base import WeightSource

__all__ = [
    "check_weight_layout",
    "shm_dir",
    "source_tensors",
    "sync_folder",
    "watch_parent",
    "weights_file",
]


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
