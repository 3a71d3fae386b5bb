# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Job placement of the embedded server (arctic_platform.server.placement): pure functions of the requested
counts, the server's --device and a device count, so 0, 1, 2, 3 and 8 GPUs are tested here without any GPU."""

import pytest

from arctic_platform.server.placement import (
    PlacementError,
    describe,
    engine_visible_devices,
    parse_job_devices,
    place_jobs,
    sampling_replicas,
    split_node,
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
def test_one_gpu_jobs_get_their_own_gpu_when_there_are_enough(count, expected):
    assert place_jobs(ALL, device="auto", device_count=count) == {j: (d,) for j, d in expected.items()}


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize("reference", [True, False])
def test_an_8_gpu_node_split_as_the_launcher_splits_it(tp, reference):
    """split_node is the launcher's default; its ranges cover the node without overlap, and the sampling range
    cuts into replicas of TP GPUs (TP x replicas = sampling GPUs)."""
    if tp == 8:
        with pytest.raises(PlacementError, match="one sampling replica of 8 GPU"):
            split_node(8, tensor_parallel_size=tp, reference=reference)
        return
    split = split_node(8, tensor_parallel_size=tp, reference=reference)
    counts = {j: split[j] for j in ("training", "sampling", "log_prob")}
    assert sum(counts.values()) == 8 and counts["log_prob"] == int(reference)
    assert counts["training"] >= (4 if tp <= 2 else 1)
    placed = place_jobs(counts, device="cuda", device_count=8)
    used = [d for devices in placed.values() for d in devices]
    assert sorted(used, key=lambda d: int(d[5:])) == [f"cuda:{i}" for i in range(8)]  # no overlap, nothing idle
    replicas = sampling_replicas(placed["sampling"], tp)
    assert len(replicas) == split["replicas"] and tp * len(replicas) == counts["sampling"]
    assert [d for r in replicas for d in r] == list(placed["sampling"])
    if tp == 1 and reference:
        assert describe(placed) == "training=cuda:0-3 sampling=cuda:4-6 log_prob=cuda:7"


def test_absent_jobs_take_no_device():
    assert place_jobs({"training": 1, "sampling": 0, "log_prob": 1}, device="cuda", device_count=4) == {
        "training": ("cuda:0",),
        "log_prob": ("cuda:1",),
    }
    assert place_jobs({"sampling": 1}, device="auto", device_count=2) == {"sampling": ("cuda:0",)}


def test_explicit_device_and_overrides():
    assert set(place_jobs(ALL, device="cuda:3", device_count=4).values()) == {("cuda:3",)}
    got = place_jobs(
        {**ALL, "sampling": 2}, device="cuda", device_count=8, overrides={"sampling": "cuda:5-6", "log_prob": "cpu"}
    )
    assert got == {"training": ("cuda:0",), "sampling": ("cuda:5", "cuda:6"), "log_prob": ("cpu",)}
    assert describe(got) == "training=cuda:0 sampling=cuda:5-6 log_prob=cpu"
    assert place_jobs(ALL, device="cpu", device_count=8) == {j: ("cpu",) for j in ALL}
    with pytest.raises(PlacementError, match="names 1 GPU.*asks for 2"):
        place_jobs({**ALL, "sampling": 2}, device="cuda", device_count=8, overrides={"sampling": "cuda:5"})


def test_jobs_that_do_not_fit_are_refused_naming_the_counts():
    with pytest.raises(PlacementError) as e:
        place_jobs({"training": 4, "sampling": 4, "log_prob": 1}, device="cuda", device_count=8)
    assert "ask for 9 GPUs (training 4 + sampling 4 + log_prob 1) but this server sees 8" in str(e.value)
    assert "--training-gpus / --sampling-gpus / --log-prob-gpus" in str(e.value)
    with pytest.raises(PlacementError, match="--device cuda:1 puts every job on that one GPU, but the training job"):
        place_jobs({**ALL, "training": 2}, device="cuda:1", device_count=8)


def test_counts_on_cpu_are_workers():
    assert place_jobs({**ALL, "training": 2}, device="cpu", device_count=0)["training"] == ("cpu", "cpu")
    assert describe(place_jobs({"sampling": 2}, device="cpu", device_count=0)) == "sampling=cpu x2"


def test_sampling_replicas_and_engine_devices():
    devices = ("cuda:4", "cuda:5", "cuda:6", "cuda:7")
    assert sampling_replicas(devices, 2) == [("cuda:4", "cuda:5"), ("cuda:6", "cuda:7")]
    assert sampling_replicas(("cpu", "cpu"), 2) == [("cpu", "cpu")]
    with pytest.raises(PlacementError, match="tensor_parallel_size=3 does not divide the sampling job's 4 device"):
        sampling_replicas(devices, 3)
    # an engine's CUDA_VISIBLE_DEVICES goes through the server's own list
    assert engine_visible_devices(("cuda:1", "cuda:2"), None) == "1,2"
    assert engine_visible_devices(("cuda:1", "cuda:2"), "4,5,6,7") == "5,6"
    assert engine_visible_devices(("cuda:0",), "GPU-aa,GPU-bb") == "GPU-aa"
    with pytest.raises(PlacementError, match="outside the server's CUDA_VISIBLE_DEVICES=4,5"):
        engine_visible_devices(("cuda:2",), "4,5")


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


def test_the_reference_on_the_training_gpus_frees_a_gpu_for_sampling():
    """--log-prob-devices training: the log_prob job gets exactly the training job's devices (its shards beside
    training's) and takes none of its own, so an 8-GPU node at TP 1 samples on 4 GPUs (split_node); its count must be
    training's, and only one flag may place it."""
    split = split_node(8, tensor_parallel_size=1, reference=True, reference_on_training=True)
    assert split == {"training": 4, "sampling": 4, "log_prob": 4, "replicas": 4}
    counts = {j: split[j] for j in ("training", "sampling", "log_prob")}
    placed = place_jobs(counts, device="cuda", device_count=8, log_prob_devices="training")
    assert describe(placed) == "training=cuda:0-3 sampling=cuda:4-7 log_prob=cuda:0-3"
    with pytest.raises(PlacementError, match="the jobs ask for 12 GPUs"):  # the own-GPU placement of the same sizes
        place_jobs(counts, device="cuda", device_count=8)
    assert place_jobs({"training": 2, "sampling": 1, "log_prob": 2}, device="cpu", device_count=0,
                      log_prob_devices="training")["log_prob"] == ("cpu", "cpu")  # fmt: skip
    with pytest.raises(PlacementError, match=r"asks for 1 \(--log-prob-gpus 1\); set --log-prob-gpus 4"):
        place_jobs({"training": 4, "sampling": 4, "log_prob": 1}, device="cuda", device_count=8,
                   log_prob_devices="training")  # fmt: skip
    with pytest.raises(PlacementError, match="both place the log_prob job"):
        place_jobs(counts, device="cuda", device_count=8, log_prob_devices="training",
                   overrides={"log_prob": "cuda:0-3"})  # fmt: skip
    with pytest.raises(PlacementError, match="is not one of"):
        place_jobs(counts, device="cuda", device_count=8, log_prob_devices="sampling")
    # no reference at all: nothing to place
    assert split_node(8, reference=False, reference_on_training=True)["log_prob"] == 0
