# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The sampler's vLLM enablement of forest cascade attention (moved here from the kernels tests with the rule)."""

import copy

import pytest

from arctic_platform.integrations.verl.vllm_config import (
    CPU_NOT_SENT,
    arctic_inference_flags,
    fca_engine_overrides,
    sampling_vllm_config,
)


class _Mode:  # stands in for vllm.config.CUDAGraphMode members (vLLM is not installed in CPU CI)
    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, _Mode) and other.name == self.name

    __hash__ = None


MODES = [None, "PIECEWISE", "NONE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE", "full_and_piecewise",
         _Mode("FULL"), _Mode("PIECEWISE")]  # fmt: skip
MODE_IDS = ["unset", "piecewise", "none", "full", "full-decode-only", "full-and-piecewise", "lowercase-full",
            "enum-full", "enum-piecewise"]  # fmt: skip


@pytest.mark.parametrize("enforce_eager", [False, True], ids=["graphs", "eager"])
@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_fca_engine_overrides(mode, enforce_eager):
    kwargs = {"model": "m", "enforce_eager": enforce_eager, "compilation_config": {"pass_config": {"x": False}}}
    if mode is not None:
        kwargs["compilation_config"]["cudagraph_mode"] = mode
    before = copy.deepcopy(kwargs)
    name = getattr(mode, "name", mode)
    full = name is not None and name.upper().startswith("FULL")

    off = fca_engine_overrides(kwargs, fca_enabled=False)
    assert off == before and off is not kwargs

    if full and not enforce_eager:
        with pytest.raises(ValueError, match="captures full CUDA graphs"):
            fca_engine_overrides(kwargs, fca_enabled=True)
        assert kwargs == before
        return
    on = fca_engine_overrides(kwargs, fca_enabled=True)
    assert kwargs == before  # never mutates the input (nested dicts included)
    assert on["forest_cascade_attn_configs"] == "{}"
    assert on["compilation_config"]["pass_config"] == {"x": False}  # the caller's other keys are merged, not lost
    if enforce_eager:
        assert on["compilation_config"] == before["compilation_config"]  # no graphs: the mode is left alone
    elif mode is None:
        assert on["compilation_config"]["cudagraph_mode"] == "PIECEWISE"
    else:
        assert on["compilation_config"]["cudagraph_mode"] is mode  # an explicit PIECEWISE/NONE is kept as given


def test_fca_engine_overrides_other_shapes():
    on = fca_engine_overrides({}, fca_enabled=True)
    assert on == {"forest_cascade_attn_configs": "{}", "compilation_config": {"cudagraph_mode": "PIECEWISE"}}
    on = fca_engine_overrides({"compilation_config": None, "forest_cascade_attn_configs": '{"min_batch_size": 4}'},
                              fca_enabled=True)  # fmt: skip
    assert on["forest_cascade_attn_configs"] == '{"min_batch_size": 4}'
    assert on["compilation_config"] == {"cudagraph_mode": "PIECEWISE"}
    on = fca_engine_overrides({"compilation_config": '{"level": 3}'}, fca_enabled=True)
    assert on["compilation_config"] == {"level": 3, "cudagraph_mode": "PIECEWISE"}
    with pytest.raises(ValueError, match="captures full CUDA graphs"):
        fca_engine_overrides({"compilation_config": '{"cudagraph_mode": "FULL"}'}, fca_enabled=True)
    with pytest.raises(ValueError, match="JSON object"):
        fca_engine_overrides({"forest_cascade_attn_configs": "[1]"}, fca_enabled=True)
    with pytest.raises(TypeError, match="dict or JSON string"):
        fca_engine_overrides({"compilation_config": 3}, fca_enabled=True)
    assert fca_engine_overrides({"compilation_config": 3}, fca_enabled=False) == {"compilation_config": 3}


def test_sampling_vllm_config_keeps_user_values_and_applies_fca():
    rollout = {"tensor_model_parallel_size": 2, "gpu_memory_utilization": 0.4, "enforce_eager": False}
    out = sampling_vllm_config({"gpu_memory_utilization": 0.9}, rollout, zorro=True)
    assert out["tensor_parallel_size"] == 2 and out["gpu_memory_utilization"] == 0.9  # the user's value wins
    assert out["compilation_config"] == {"cudagraph_mode": "PIECEWISE"}
    assert "compilation_config" not in sampling_vllm_config({}, rollout, zorro=False)
    assert arctic_inference_flags(False, "") is None
    flags = arctic_inference_flags(True, "")
    assert flags == {"zorro_inference": {"enable": True}, "speculative_decoding": {"model": ""}}


def test_sampling_vllm_config_leaves_verl_chunked_prefill_out_on_cpu():
    rollout = {"enable_chunked_prefill": True, "enforce_eager": True}
    assert sampling_vllm_config({}, rollout, zorro=False)["enable_chunked_prefill"] is True
    on_cpu = sampling_vllm_config({}, rollout, zorro=False, cpu=True)
    assert "enable_chunked_prefill" not in on_cpu and on_cpu["enforce_eager"] is True
    assert set(CPU_NOT_SENT) == {"enable_chunked_prefill"}
    # the user's own engine kwargs are sent as given (the server refuses them by name)
    user = sampling_vllm_config({"enable_chunked_prefill": True}, rollout, zorro=False, cpu=True)
    assert user["enable_chunked_prefill"] is True
