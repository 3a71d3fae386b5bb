# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Job placement of the embedded server (arctic_platform.server.placement): a pure function of the requested
counts, the server's --device and a device count, so 0, 1, 2, 3 and 8 GPUs are tested here without any GPU."""

import pytest

from arctic_platform.server.placement import (
    ONE_DEVICE,
    PlacementError,
    describe,
    parse_job_devices,
    place_jobs,
)

ALL = {"training": 1, "sampling": 1, "log_prob": 1}


@pytest.mark.parametrize(
    "count, expected",
    [
        (8, {"training": "cuda:0", "sampling": "cuda:1", "log_prob": "cuda:2"}),
        (3, {"training": "cuda:0", "sampling": "cuda:1", "log_prob": "cuda:2"}),
        (2, {"training": "cuda:0", "sampling": "cuda:1", "log_prob": "cuda:1"}),  # training keeps its GPU alone
        (1, {"training": "cuda:0", "sampling": "cuda:0", "log_prob": "cuda:0"}),
        (0, {"training": "cpu", "sampling": "cpu", "log_prob": "cpu"}),
    ],
)
def test_auto_gives_each_job_its_own_gpu_when_there_are_enough(count, expected):
    assert place_jobs(ALL, device="auto", device_count=count) == expected


def test_absent_jobs_take_no_device():
    assert place_jobs({"training": 1, "sampling": 0, "log_prob": 1}, device="cuda", device_count=4) == {
        "training": "cuda:0",
        "log_prob": "cuda:1",
    }
    assert place_jobs({"sampling": 1}, device="auto", device_count=2) == {"sampling": "cuda:0"}


def test_explicit_device_and_overrides():
    assert set(place_jobs(ALL, device="cuda:3", device_count=4).values()) == {"cuda:3"}
    got = place_jobs(ALL, device="cuda", device_count=8, overrides={"sampling": "cuda:5", "log_prob": "cpu"})
    assert got == {"training": "cuda:0", "sampling": "cuda:5", "log_prob": "cpu"}
    assert describe(got) == "training=cuda:0 sampling=cuda:5 log_prob=cpu"
    assert place_jobs(ALL, device="cpu", device_count=8) == {j: "cpu" for j in ALL}


@pytest.mark.parametrize("job", ["training", "sampling", "log_prob"])
def test_a_multi_gpu_job_is_refused_with_the_onprem_hint(job):
    with pytest.raises(PlacementError) as e:
        place_jobs({**ALL, job: 4}, device="auto", device_count=8)
    assert f"the {job} job asks for 4 GPUs" in str(e.value) and ONE_DEVICE in str(e.value)
    assert "ARCTIC_BACKEND=onprem" in ONE_DEVICE


def test_counts_on_cpu_are_on_off():
    """No GPU is involved on a CPU server: a count above 1 only means the job exists (the CPU e2e flows)."""
    assert place_jobs({**ALL, "training": 4}, device="cpu", device_count=0)["training"] == "cpu"


@pytest.mark.parametrize(
    "device, count, match",
    [
        ("cuda:2", 2, r"does not exist \(this server sees 2 GPU"),
        ("cuda", 0, "CUDA is not available"),
        ("cuda:0", 0, "CUDA is not available"),
        ("tpu", 4, "is not 'auto', 'cpu' or 'cuda"),
    ],
)
def test_bad_devices_name_the_problem(device, count, match):
    with pytest.raises(PlacementError, match=match):
        place_jobs(ALL, device=device, device_count=count)


def test_parse_job_devices():
    assert parse_job_devices("training=cuda:0, log-prob=cuda:2") == {"training": "cuda:0", "log_prob": "cuda:2"}
    assert parse_job_devices(None) == {} and parse_job_devices("") == {}
    for bad in ("training", "critic=cuda:0", "sampling="):
        with pytest.raises(PlacementError, match="is not JOB=DEVICE"):
            parse_job_devices(bad)
    with pytest.raises(PlacementError, match="unknown job type"):
        place_jobs({"critic": 1}, device="cpu", device_count=0)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--job-devices", "critic=cuda:0"], "is not JOB=DEVICE"),
        (["--device", "cuda:0"], "CUDA is not available"),  # this CPU host: refused at startup, not at the first job
    ],
)
def test_server_refuses_a_bad_placement_at_startup(args, message, tmp_path):
    import subprocess
    import sys

    import torch

    if torch.cuda.is_available() and "--device" in args:
        pytest.skip("this host has CUDA: --device cuda:0 is valid here")
    r = subprocess.run([sys.executable, "-m", "arctic_platform.server", "--port", "0", *args],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)  # fmt: skip
    assert r.returncode == 2 and message in r.stderr, r.stderr[-2000:]
