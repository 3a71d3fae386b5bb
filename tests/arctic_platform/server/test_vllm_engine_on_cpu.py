# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""``arctic_platform.server.engines.vllm_engine``'s pure functions, without starting an engine: which engine a
sampling job gets (:func:`resolve_sampling_engine`) and what the job's ``vllm_config`` becomes (:func:`engine_kwargs`).

The engine itself (started through a real server) is tested in ``test_sampling_conformance_on_cpu.py``.
"""

from __future__ import annotations

import importlib.util

import pytest

from arctic_platform.server.engines.vllm_engine import resolve_sampling_engine, vllm_available
from arctic_platform.server.errors import RequestError

# (requested, device, vLLM installed) -> engine; None = refused with a 400 naming the extra to install
RESOLUTION = [
    ("auto", "cpu", True, "vllm"),
    ("auto", "cpu", False, "torch"),
    ("auto", "cuda:0", True, "vllm"),
    ("auto", "cuda:0", False, None),
    ("vllm", "cpu", True, "vllm"),
    ("vllm", "cpu", False, None),
    ("vllm", "cuda:1", True, "vllm"),
    ("vllm", "cuda:1", False, None),
    ("torch", "cpu", True, "torch"),
    ("torch", "cpu", False, "torch"),
    ("torch", "cuda:0", True, "torch"),
    ("torch", "cuda:0", False, "torch"),
]


@pytest.mark.parametrize(
    "requested,device,installed,want",
    RESOLUTION,
    ids=[f"{r}-{d}-{'vllm' if i else 'novllm'}" for r, d, i, _ in RESOLUTION],
)
def test_resolve_sampling_engine(requested, device, installed, want):
    if want is not None:
        assert resolve_sampling_engine(requested, device, vllm_installed=installed) == want
        return
    with pytest.raises(RequestError) as e:
        resolve_sampling_engine(requested, device, vllm_installed=installed)
    assert e.value.status == 400
    extra = "h200" if device.startswith("cuda") else "cpu"
    assert f"verl[{extra}]" in str(e.value) and "--sampling-engine torch" in str(e.value)


def test_resolve_sampling_engine_refuses_an_unknown_name():
    with pytest.raises(RequestError) as e:
        resolve_sampling_engine("sglang", "cpu", vllm_installed=True)
    assert e.value.status == 422 and "sglang" in str(e.value)


def test_resolve_sampling_engine_checks_the_installed_vllm_by_default():
    installed = importlib.util.find_spec("vllm") is not None
    assert vllm_available() is installed
    assert resolve_sampling_engine("auto", "cpu") == ("vllm" if installed else "torch")


def test_route_items_keeps_a_group_on_one_replica_and_spreads_the_groups():
    from collections import OrderedDict

    from arctic_platform.server.engines.vllm_engine import ROUTING_MEMORY, route_items

    sticky: OrderedDict = OrderedDict()
    a, b, c = [1, 2, 3], [4, 5], [6]
    assert route_items([a, a, b, b, c, c], 2, sticky) == [0, 0, 1, 1, 0, 0]  # groups together, least-loaded first
    assert route_items([b, a, b], 2, sticky) == [1, 0, 1]  # a prompt seen before goes where it went
    assert route_items([[7], [7], [7], [8]], 2, sticky) == [0, 0, 0, 1]
    assert route_items([a, b, [9]], 1, OrderedDict()) == [0, 0, 0]
    many: OrderedDict = OrderedDict()
    route_items([[i] for i in range(ROUTING_MEMORY + 5)], 3, many)
    assert len(many) == ROUTING_MEMORY and (0,) not in many  # the oldest prompts are forgotten first


def test_a_sync_folder_too_small_for_a_bucket_is_refused_with_the_sizes(tmp_path):
    from arctic_platform.server.engines.shared import check_sync_space

    check_sync_space(str(tmp_path), 1)
    with pytest.raises(RequestError) as e:
        check_sync_space(str(tmp_path), 1 << 60)
    assert e.value.status == 507 and "MiB free in" in str(e.value) and "--weight-sync-bucket-mb" in str(e.value)


def test_cascade_attention_is_on_for_a_cuda_sampler_unless_the_job_turns_it_off(tiny_model_dir):
    """GRPO's n samples share their prompt: on CUDA the engine arguments enable vLLM's cascade attention (vLLM 0.31
    defaults it off), a job's own ``disable_cascade_attn`` wins, and the CPU engine leaves vLLM's default (the CPU
    platform has no cascade kernel)."""
    from arctic_platform.server.engines.model_engine import EngineSettings
    from arctic_platform.server.engines.vllm_engine import engine_kwargs

    def settings(device):
        return EngineSettings(model_path=str(tiny_model_dir), device=device, dtype="bfloat16", max_seq_len=64)

    assert engine_kwargs(settings("cuda:0"), {})["disable_cascade_attn"] is False
    assert engine_kwargs(settings("cuda:0"), {"disable_cascade_attn": True})["disable_cascade_attn"] is True
    assert "disable_cascade_attn" not in engine_kwargs(settings("cpu"), {})
