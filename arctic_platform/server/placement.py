# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Where the embedded server puts its jobs: one device per job, and an honest refusal of multi-GPU jobs.

The embedded server runs each job (training, sampling, log_prob) as one torch engine on one device. With enough
GPUs every job gets its own (training ``cuda:0``, sampling ``cuda:1``, log_prob ``cuda:2``, in that order over the
jobs that exist); with fewer, the later jobs share the last device (training stays alone as long as there are two
GPUs: it holds the optimizer state). Weight syncs copy tensors across devices. A job asking for more than one GPU
is refused with :data:`ONE_DEVICE` instead of being silently squeezed onto one card.

:func:`place_jobs` is a pure function of the requested counts, the server's ``--device`` and the device count, so
the policy is tested on any machine with a fake count.
"""

from __future__ import annotations

import re

from ..protocol import JOB_TYPES

ONE_DEVICE = (
    "the embedded server runs a job on one device; for multi-GPU jobs point the plugin at an Arctic-Platform "
    "server: ARCTIC_BACKEND=onprem"
)

_CUDA = re.compile(r"^cuda(?::(\d+))?$")


class PlacementError(ValueError):
    """A placement that cannot be honoured (the message names the job and the fix)."""


def parse_job_devices(spec: str | None) -> dict[str, str]:
    """``training=cuda:0,sampling=cuda:1`` -> dict (the ``--job-devices`` server option); empty for None / ''.

    Raises:
        PlacementError: an unknown job type or a malformed entry.
    """
    out: dict[str, str] = {}
    for part in (spec or "").split(","):
        part = part.strip()
        if not part:
            continue
        job, sep, dev = part.partition("=")
        job, dev = job.strip().replace("-", "_"), dev.strip()
        if not sep or job not in JOB_TYPES or not dev:
            raise PlacementError(f"--job-devices entry {part!r} is not JOB=DEVICE with JOB one of {JOB_TYPES}")
        out[job] = dev
    return out


def check_device(device: str, device_count: int, what: str) -> str:
    """``device`` if it is ``cpu`` or ``cuda:N`` with N < ``device_count`` (``cuda`` alone means ``cuda:0``).

    Raises:
        PlacementError: anything else, naming ``what``.
    """
    if device == "cpu":
        return device
    m = _CUDA.match(device)
    if not m:
        raise PlacementError(f"{what}: device {device!r} is not 'auto', 'cpu' or 'cuda[:N]'")
    if device_count <= 0:
        raise PlacementError(f"{what}: device {device!r} requested but CUDA is not available on this server")
    idx = int(m.group(1) or 0)
    if idx >= device_count:
        raise PlacementError(f"{what}: device {device!r} does not exist (this server sees {device_count} GPU(s))")
    return f"cuda:{idx}"


def place_jobs(
    requested: dict[str, int], *, device: str, device_count: int, overrides: dict[str, str] | None = None
) -> dict[str, str]:
    """The device of every requested job (count > 0).

    Args:
        requested: job type -> GPUs asked for (``--training-gpus`` ...; 0 = no such job).
        device: the server's ``--device``: ``auto`` (GPUs if any, else cpu), ``cpu``, ``cuda`` (spread over the
            GPUs) or ``cuda:N`` (every job on that one device).
        device_count: GPUs visible (``torch.cuda.device_count()``).
        overrides: job type -> device (``--job-devices``), taking precedence.

    Returns:
        job type -> ``cpu`` or ``cuda:N``, for the jobs with a count > 0.

    Raises:
        PlacementError: a job asking for more than one GPU on CUDA (:data:`ONE_DEVICE`), a device that does not
            exist, or an unknown job type.
    """
    unknown = sorted(set(requested) - set(JOB_TYPES)) + sorted(set(overrides or {}) - set(JOB_TYPES))
    if unknown:
        raise PlacementError(f"unknown job type(s) {unknown} (one of {JOB_TYPES})")
    jobs = [j for j in JOB_TYPES if int(requested.get(j, 0)) > 0]
    if device == "auto":
        device = "cuda" if device_count > 0 else "cpu"
    out: dict[str, str] = {}
    if device == "cpu":
        out = {j: "cpu" for j in jobs}
    elif device == "cuda":
        if device_count <= 0:
            raise PlacementError("device 'cuda' requested but CUDA is not available on this server")
        out = {j: f"cuda:{min(i, device_count - 1)}" for i, j in enumerate(jobs)}
    else:
        one = check_device(device, device_count, "--device")
        out = {j: one for j in jobs}
    for j, dev in (overrides or {}).items():
        if j in out:
            out[j] = check_device(dev, device_count, f"{j} job")
    for j in jobs:
        n = int(requested[j])
        if n > 1 and out[j].startswith("cuda"):
            raise PlacementError(f"the {j} job asks for {n} GPUs: {ONE_DEVICE}")
    return out


def describe(placement: dict[str, str]) -> str:
    """One line for logs and /status, e.g. ``training=cuda:0 sampling=cuda:1 log_prob=cuda:2``."""
    return " ".join(f"{j}={placement[j]}" for j in JOB_TYPES if j in placement)
