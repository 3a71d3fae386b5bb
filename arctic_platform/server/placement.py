# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Where the embedded server puts its jobs: a range of devices per job, and how a sampling job's range is cut
into vLLM replicas.

* :func:`place_jobs`: each job (training, sampling, log_prob, in that order) gets as many devices as it asks for
  (``--training-gpus`` ...). On CUDA the ranges are consecutive and never overlap (training ``cuda:0-3``, sampling
  ``cuda:4-6``, log_prob ``cuda:7`` for 4 + 3 + 1 on an 8-GPU node). A node with fewer GPUs than one per job still
  hosts three one-GPU jobs (the later ones share the last GPU; training keeps its own while there are two), but jobs
  of several GPUs that do not fit are refused, naming the counts, never squeezed. On CPU a job's count is its number
  of workers (``("cpu", "cpu")`` for two).
* :func:`sampling_replicas`: the sampling range cut into replicas of ``tensor_parallel_size`` devices each
  (independent engines, as verl runs dense models); a size that does not divide the range is refused.
* :func:`engine_visible_devices`: the ``CUDA_VISIBLE_DEVICES`` of one engine process, mapped through the server's
  own list (a server started with ``CUDA_VISIBLE_DEVICES=2,3`` calls its GPUs ``cuda:0`` / ``cuda:1``).
* :func:`split_node`: the default job sizes of an H200 node (the launcher's split).

Everything here is a pure function of counts and strings, so it is tested on any machine with fake counts.
"""

from __future__ import annotations

import re

from ..protocol import JOB_TYPES, LOG_PROB_DEVICES, gpus_flag

Devices = tuple[str, ...]
"""A job's devices: ``("cuda:4", "cuda:5")``, or ``("cpu",) * workers``."""

_CUDA = re.compile(r"^cuda(?::(\d+))?$")
_CUDA_RANGE = re.compile(r"^cuda:(\d+)-(\d+)$")


class PlacementError(ValueError):
    """A placement that cannot be honoured (the message names the job and the fix)."""


def parse_job_devices(spec: str | None) -> dict[str, str]:
    """``training=cuda:0-3,sampling=cuda:4`` -> dict (the ``--job-devices`` server option); empty for None / ''.

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


def check_devices(spec: str, count: int, device_count: int, what: str) -> Devices:
    """A job's devices from an override: ``cpu`` (``count`` workers), ``cuda:N`` or ``cuda:N-M`` (inclusive).

    Raises:
        PlacementError: a device that does not exist, or a range whose size is not the job's ``count``.
    """
    if spec == "cpu":
        return ("cpu",) * max(1, count)
    m = _CUDA_RANGE.match(spec)
    if m:
        lo, hi = int(m.group(1)), int(m.group(2))
        if hi < lo:
            raise PlacementError(f"{what}: device range {spec!r} is empty")
        devices = tuple(check_device(f"cuda:{i}", device_count, what) for i in range(lo, hi + 1))
    else:
        devices = (check_device(spec, device_count, what),)
    if len(devices) != count:
        raise PlacementError(f"{what}: {spec!r} names {len(devices)} GPU(s) but the job asks for {count}")
    return devices


def place_jobs(
    requested: dict[str, int],
    *,
    device: str,
    device_count: int,
    overrides: dict[str, str] | None = None,
    log_prob_devices: str = "own",
) -> dict[str, Devices]:
    """The devices of every requested job (count > 0).

    Args:
        requested: job type -> GPUs asked for (``--training-gpus`` ...; 0 = no such job; on CPU: workers).
        device: the server's ``--device``: ``auto`` (GPUs if any, else cpu), ``cpu``, ``cuda`` (consecutive ranges
            over the GPUs) or ``cuda:N`` (every job on that one device; one GPU per job).
        device_count: GPUs visible (``torch.cuda.device_count()``).
        overrides: job type -> ``cpu``, ``cuda:N`` or ``cuda:N-M`` (``--job-devices``), taking precedence.
        log_prob_devices: ``own`` (its own range) or ``training`` (``--log-prob-devices``: the training job's
            devices, which the log_prob job then needs as many of as training has).

    Returns:
        job type -> its devices, for the jobs with a count > 0.

    Raises:
        PlacementError: jobs that do not fit the GPUs, a device that does not exist, an override whose size is not
            the job's count, or an unknown job type.
    """
    unknown = sorted(set(requested) - set(JOB_TYPES)) + sorted(set(overrides or {}) - set(JOB_TYPES))
    if unknown:
        raise PlacementError(f"unknown job type(s) {unknown} (one of {JOB_TYPES})")
    counts = {j: int(requested.get(j, 0)) for j in JOB_TYPES if int(requested.get(j, 0)) > 0}
    shared = _shared_log_prob(counts, log_prob_devices, overrides or {})
    if shared:
        log_prob = counts.pop("log_prob")
    if device == "auto":
        device = "cuda" if device_count > 0 else "cpu"
    out: dict[str, Devices] = {}
    if device == "cpu":
        out = {j: ("cpu",) * n for j, n in counts.items()}
    elif device == "cuda":
        if device_count <= 0:
            raise PlacementError("device 'cuda' requested but CUDA is not available on this server")
        out = _ranges(counts, device_count)
    else:
        one = check_device(device, device_count, "--device")
        wide = {j: n for j, n in counts.items() if n > 1}
        if wide:
            j, n = next(iter(wide.items()))
            raise PlacementError(
                f"--device {device} puts every job on that one GPU, but the {j} job asks for {n} "
                f"({gpus_flag(j)} {n}); use --device cuda (consecutive ranges) or --job-devices {j}=cuda:N-M"
            )
        out = {j: (one,) for j in counts}
    for j, spec in (overrides or {}).items():
        if j in out:
            out[j] = check_devices(spec, counts[j], device_count, f"{j} job")
    if shared:
        counts["log_prob"] = log_prob
        out["log_prob"] = out["training"]
    return out


def _shared_log_prob(counts: dict[str, int], log_prob_devices: str, overrides: dict[str, str]) -> bool:
    """Whether the log_prob job takes the training job's devices (``--log-prob-devices training``).

    Raises:
        PlacementError: an unknown value, no training job, a log_prob count other than training's, or a
            ``--job-devices`` entry for the log_prob job as well.
    """
    if log_prob_devices not in LOG_PROB_DEVICES:
        raise PlacementError(f"--log-prob-devices {log_prob_devices!r} is not one of {LOG_PROB_DEVICES}")
    if log_prob_devices == "own" or "log_prob" not in counts:
        return False
    train, lp = (counts["training"] if "training" in counts else 0), counts["log_prob"]
    if train != lp:
        raise PlacementError(
            f"--log-prob-devices training runs the log_prob job on the training job's {train} device(s), but it asks "
            f"for {lp} (--log-prob-gpus {lp}); set --log-prob-gpus {train} (remote_backend.arctic.log_prob_gpus="
            f"{train}), or --log-prob-devices own"
        )
    if "log_prob" in overrides:
        raise PlacementError(
            f"--job-devices log_prob={overrides['log_prob']} and --log-prob-devices training both place the log_prob "
            "job; keep one"
        )
    return True


def _ranges(counts: dict[str, int], device_count: int) -> dict[str, Devices]:
    """Consecutive, non-overlapping ranges in job order; one-GPU jobs share the last GPU when there are too few."""
    total = sum(counts.values())
    if total <= device_count:
        out, start = {}, 0
        for j, n in counts.items():
            out[j] = tuple(f"cuda:{i}" for i in range(start, start + n))
            start += n
        return out
    if all(n == 1 for n in counts.values()):
        # a small node still hosts the three one-GPU jobs; training keeps its GPU alone as long as there are two
        return {j: (f"cuda:{min(i, device_count - 1)}",) for i, j in enumerate(counts)}
    asked = " + ".join(f"{j} {n}" for j, n in counts.items())
    flags = " / ".join(gpus_flag(j) for j in counts)
    raise PlacementError(
        f"the jobs ask for {total} GPUs ({asked}) but this server sees {device_count}; lower {flags} "
        "(remote_backend.arctic.{training,sampling,log_prob}_gpus)"
    )


def replica_count(sampling: int, tensor_parallel_size: int) -> int:
    """The rollout TP / replicas rule, in one place (the server's sampling job, the verl plugin's start-up check and
    the H200 launcher's plan all call it): ``sampling`` devices run ``sampling / TP`` independent vLLM replicas of
    ``TP`` devices each, so TP must be at least 1 and divide them.

    Raises:
        PlacementError: a size below 1, or one that does not divide ``sampling`` (naming both settings).
    """
    tp, n = int(tensor_parallel_size), int(sampling)
    if tp < 1 or n % tp:
        raise PlacementError(
            f"vllm_config.tensor_parallel_size={tp} does not divide the sampling job's {n} device(s) "
            f"({gpus_flag('sampling')} {n}): the sampling job runs {gpus_flag('sampling')} / tensor_parallel_size "
            "replicas; make the sampling GPUs a multiple of the tensor-parallel size"
        )
    return n // tp


def tp_sizes(sampling: int) -> list[int]:
    """The tensor-parallel sizes :func:`replica_count` accepts for ``sampling`` devices."""
    return [d for d in range(1, int(sampling) + 1) if int(sampling) % d == 0]


def sampling_replicas(devices: Devices, tensor_parallel_size: int) -> list[Devices]:
    """The sampling job's devices cut into replicas of ``tensor_parallel_size`` consecutive devices each
    (:func:`replica_count`'s rule).

    Raises:
        PlacementError: a size below 1, or one that does not divide the job's devices (naming both settings).
    """
    replica_count(len(devices), tensor_parallel_size)
    tp = int(tensor_parallel_size)
    return [tuple(devices[i : i + tp]) for i in range(0, len(devices), tp)]


def engine_visible_devices(devices: Devices, server_visible: str | None) -> str:
    """``CUDA_VISIBLE_DEVICES`` of an engine process on ``devices`` (``cuda:N``), mapped through the server's own
    ``CUDA_VISIBLE_DEVICES`` (``server_visible``; None or unset: the GPUs are numbered as the driver sees them).

    Raises:
        PlacementError: a device that is not CUDA, or an index outside the server's list.
    """
    visible = [v.strip() for v in server_visible.split(",") if v.strip()] if server_visible else None
    out = []
    for d in devices:
        m = _CUDA.match(d)
        if not m or m.group(1) is None:
            raise PlacementError(f"engine device {d!r} is not cuda:N")
        i = int(m.group(1))
        if visible is None:
            out.append(str(i))
        elif i < len(visible):
            out.append(visible[i])
        else:
            raise PlacementError(f"engine device {d} is outside the server's CUDA_VISIBLE_DEVICES={server_visible}")
    return ",".join(out)


def describe(placement: dict[str, Devices]) -> str:
    """One line for logs and /status, e.g. ``training=cuda:0-3 sampling=cuda:4-6 log_prob=cuda:7``."""
    return " ".join(f"{j}={describe_devices(placement[j])}" for j in JOB_TYPES if j in placement)


def describe_devices(devices: Devices) -> str:
    """``cuda:4-6`` for a consecutive range, ``cuda:1,cuda:3`` otherwise, ``cpu`` / ``cpu x2`` on CPU."""
    if devices and all(d == "cpu" for d in devices):
        return "cpu" if len(devices) == 1 else f"cpu x{len(devices)}"
    idx = [int(m.group(1)) for d in devices if (m := _CUDA.match(d)) and m.group(1) is not None]
    if len(idx) == len(devices) > 1 and idx == list(range(idx[0], idx[0] + len(idx))):
        return f"cuda:{idx[0]}-{idx[-1]}"
    return ",".join(devices)


def split_node(
    gpus: int,
    *,
    tensor_parallel_size: int = 1,
    reference: bool = True,
    min_training: int = 1,
    reference_on_training: bool = False,
) -> dict:
    """The default job sizes of a node of ``gpus`` GPUs (the H200 launcher's split).

    Half the node trains (FSDP over those GPUs: the update of a GRPO step is as long as its generation, and the
    sharded optimizer state shrinks with every GPU added), at least ``min_training`` (what the model's training
    state needs); one GPU computes reference log-probs when there is a reference (forward-only, bf16 weights);
    the rest samples, rounded down to a multiple of ``tensor_parallel_size`` (replicas = sampling / TP), and what
    rounding leaves goes back to training. When half the node leaves no room for one replica, training gets fewer
    GPUs (never below ``min_training``). With ``reference_on_training`` the reference runs sharded on the training
    GPUs (``--log-prob-devices training``): it takes no GPU of its own, and ``log_prob`` is the training count.

    Returns:
        ``{"training": n, "sampling": n, "log_prob": n, "replicas": n}``.

    Raises:
        PlacementError: a node too small for one training GPU, the reference and one sampling replica.
    """
    tp = max(1, int(tensor_parallel_size))
    ref = 1 if reference and not reference_on_training else 0
    least = max(1, int(min_training))
    sampling = (gpus - max(least, gpus // 2) - ref) // tp * tp
    if sampling < tp:  # half the node for training leaves no replica: train on fewer GPUs (never below least)
        sampling = (gpus - least - ref) // tp * tp
    if sampling < tp:
        raise PlacementError(
            f"{gpus} GPU(s) cannot hold {least} training GPU(s), {ref} reference GPU and one sampling replica of "
            f"{tp} GPU(s) (tensor_model_parallel_size={tp})"
        )
    training = gpus - ref - sampling
    log_prob = training if reference and reference_on_training else ref
    return {"training": training, "sampling": sampling, "log_prob": log_prob, "replicas": replica_count(sampling, tp)}
