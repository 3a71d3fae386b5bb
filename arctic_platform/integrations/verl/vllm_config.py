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
"""The sampling job's ``vllm_config`` / ``arctic_inference_config`` as the arctic adapter sends them.

A reference Arctic RL server passes ``vllm_config`` to ArcticInference's ``ModelConfig`` (unknown keys become vLLM
``AsyncEngineArgs``) and reads only ``zorro_inference.enable`` and ``speculative_decoding.model`` from
``arctic_inference_config`` (docs/arctic-rl-protocol.md §7). :func:`fca_engine_overrides` is the rule that makes
forest cascade attention (FCA) actually run under vLLM's CUDA graphs; the adapter applies it to ``vllm_config``
when ``rollout.zorro_inference.enable`` is set. Torch-free.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "CPU_NOT_SENT",
    "FULL_GRAPH_MODES",
    "arctic_inference_flags",
    "fca_engine_overrides",
    "sampling_vllm_config",
]

FULL_GRAPH_MODES = ("FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
CPU_NOT_SENT = {
    "enable_chunked_prefill": (
        "vLLM 0.31's CPU backend kills its worker when a seeded request's prefill is split across steps; the "
        "embedded server's CPU vLLM engine prefills each prompt in one step and refuses the key"
    ),
}
"""verl rollout keys :func:`sampling_vllm_config` does not forward to a sampler on CPU, and why (a user's
``sampling.engine_kwargs`` still sends them, and the server refuses them by name)."""


def _mode_name(mode) -> str:
    name = getattr(mode, "name", mode)  # vLLM's CUDAGraphMode enum or its string spelling
    return str(name).strip().upper()


def _json_object(name: str, text: str) -> dict:
    """``text`` parsed as a JSON object; a ValueError naming ``name`` when it is not valid JSON or not an object."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{name} is not valid JSON: {text!r}") from e
    if not isinstance(parsed, dict):
        raise ValueError(f"{name} must be a JSON object, got {text!r}")
    return parsed


def fca_engine_overrides(engine_kwargs: dict, *, fca_enabled: bool) -> dict:
    """vLLM engine kwargs with forest cascade attention (FCA) actually able to run; the input is never mutated.

    ArcticInference disables FCA for every batch when the CUDA-graph mode captures full graphs, and vLLM's default
    (FULL_AND_PIECEWISE) does. The rule, when ``fca_enabled``:

    * ``forest_cascade_attn_configs`` is added as ``"{}"`` (all defaults) when absent or None;
    * unless ``enforce_eager`` is true, ``compilation_config["cudagraph_mode"]`` becomes ``"PIECEWISE"`` when the
      caller chose no mode, merged into the caller's ``compilation_config`` (other keys kept, never a
      ``setdefault`` of the whole dict); a mode the caller chose explicitly is kept if it is PIECEWISE or NONE;
    * an explicit full-graph mode (FULL, FULL_DECODE_ONLY, FULL_AND_PIECEWISE) raises ``ValueError``: that
      combination would start an engine where FCA is configured but silently disabled;
    * with ``enforce_eager`` true there are no CUDA graphs, so the mode is left as the caller set it.

    With ``fca_enabled`` false the kwargs come back unchanged (a shallow copy).

    Args:
        engine_kwargs: vLLM ``LLM(...)`` / ``AsyncEngineArgs`` keyword arguments. ``compilation_config`` may be
            absent, None, a dict or a JSON object string (returned as a dict).
        fca_enabled: whether FCA / zorro inference is switched on.

    Returns:
        A new dict.

    Raises:
        ValueError: FCA with an explicit full-graph ``cudagraph_mode``, or a ``compilation_config`` /
            ``forest_cascade_attn_configs`` string that is not a JSON object.
        TypeError: a ``compilation_config`` of another type (pass a dict).
    """
    out = dict(engine_kwargs)
    if not fca_enabled:
        return out
    cfg = out.get("forest_cascade_attn_configs")
    if cfg is None:
        out["forest_cascade_attn_configs"] = "{}"
    elif isinstance(cfg, str):
        _json_object("forest_cascade_attn_configs", cfg)  # checked; the string itself is passed on
    elif not isinstance(cfg, dict):
        raise TypeError(f"forest_cascade_attn_configs must be a JSON object string or dict, got {type(cfg).__name__}")
    if out.get("enforce_eager"):
        return out
    cc = out.get("compilation_config")
    if cc is None:
        cc = {}
    elif isinstance(cc, str):
        cc = _json_object("compilation_config", cc)
    elif isinstance(cc, dict):
        cc = dict(cc)  # only a top-level key changes: a shallow copy keeps the caller's dict (and its values) intact
    else:
        raise TypeError(
            f"compilation_config must be a dict or JSON string for FCA, got {type(cc).__name__}; "
            "pass {'cudagraph_mode': 'PIECEWISE', ...}"
        )
    mode = cc.get("cudagraph_mode")
    if mode is None:
        cc["cudagraph_mode"] = "PIECEWISE"
    elif _mode_name(mode) in FULL_GRAPH_MODES:
        raise ValueError(
            f"forest cascade attention is enabled but compilation_config.cudagraph_mode={_mode_name(mode)} captures "
            "full CUDA graphs, which disables FCA for every batch; use cudagraph_mode='PIECEWISE' (or NONE / "
            "enforce_eager=True), or switch FCA off"
        )
    out["compilation_config"] = cc
    return out


def arctic_inference_flags(zorro: bool, spec_model: str) -> dict[str, Any] | None:
    """``arctic_inference_config`` for the yaml's ``rollout`` block; None when everything is off (an all-disabled
    block would still switch ArcticInference's environment on in the reference server)."""
    if not zorro and not spec_model:
        return None
    return {"zorro_inference": {"enable": bool(zorro)}, "speculative_decoding": {"model": spec_model or ""}}


def sampling_vllm_config(engine_kwargs: dict, rollout: Any, *, zorro: bool, cpu: bool = False) -> dict:
    """``vllm_config``: the user's engine kwargs, plus the verl rollout settings a vLLM server needs (never
    overriding the user's), with the FCA rule applied when ``zorro``.

    Args:
        engine_kwargs: ``remote_backend.arctic.sampling.engine_kwargs``.
        rollout: verl's ``actor_rollout_ref.rollout`` config (``tensor_model_parallel_size``,
            ``gpu_memory_utilization``, ``enforce_eager``, ``enable_chunked_prefill``, ``max_num_seqs``,
            ``max_model_len``: the reference adapter's set).
        cpu: the sampler runs on CPU: the rollout keys of :data:`CPU_NOT_SENT` are not forwarded.
    """
    out = dict(engine_kwargs)
    for key, src in (
        ("tensor_parallel_size", "tensor_model_parallel_size"),
        ("gpu_memory_utilization", "gpu_memory_utilization"),
        ("enforce_eager", "enforce_eager"),
        ("enable_chunked_prefill", "enable_chunked_prefill"),
        ("max_num_seqs", "max_num_seqs"),
        ("max_model_len", "max_model_len"),
    ):
        v = rollout.get(src, None) if hasattr(rollout, "get") else None
        if v is not None and not (cpu and key in CPU_NOT_SENT):
            out.setdefault(key, v)
    return fca_engine_overrides(out, fca_enabled=zorro)
