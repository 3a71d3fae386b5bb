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
"""The request models of every JSON endpoint, with the reference's field names (``JobConfig``, ``GenerateRequest``,
``SaveRequest``, ...); where this project adds a field it is marked "extension"."""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .job_config import DsConfig, DsWorkerConfig, Extensions, JobTypeName, ReferenceTrainingConfig, _refuse
from .vocabulary import DEFAULT_SEED

# ------------------------------------------------------------------------------------------------
# request models (reference names: common/utils/server_models.py)
# ------------------------------------------------------------------------------------------------

_LEGACY_JOB_KEYS = {
    "device": "extensions.device",
    "dtype": "extensions.dtype",
    "max_seq_len": "extensions.max_seq_len (sampling: vllm_config.max_model_len)",
    "attn_implementation": "ds_worker_config.attn_implementation",
    "engine_kwargs": "vllm_config",
}


class JobConfig(BaseModel):
    """``POST /initialize``. Unknown keys are ignored, as by the reference, except this project's old top-level names
    (``device``, ``dtype``, ``max_seq_len``, ``attn_implementation``, ``engine_kwargs``), which are refused with the
    place they moved to, so a setting is never silently lost. The sections the embedded server reads are typed and
    refuse what it cannot honour by key path (:func:`first_error`)."""

    model_config = ConfigDict(extra="ignore", protected_namespaces=())
    model_name: str | None = None
    """HF model (the reference requires it; the embedded server falls back to its ``--model``)."""
    job_type: JobTypeName = "training"
    num_devices: int | None = None
    ds_config: DsConfig | None = None
    training_config: ReferenceTrainingConfig | None = None
    log_prob_config: DsConfig | None = None
    """The log_prob job's DeepSpeed config (only that job's)."""
    ds_worker_config: DsWorkerConfig = Field(default_factory=DsWorkerConfig)
    vllm_config: dict[str, Any] | None = None
    """vLLM engine arguments: open-ended (vLLM's ``EngineArgs``, which move with its version), so a plain object;
    the sampling engine checks them against the installed vLLM (``vllm_engine.check_vllm_config``)."""
    checkpoint_path: str | None = None
    arctic_inference_config: dict[str, Any] | None = None
    """ArcticInference's plugin settings (FCA, speculative decoding): open-ended like ``vllm_config``; the torch
    engine ignores them with one warning."""
    full_determinism: bool = False
    seed: int = DEFAULT_SEED
    cuda_ipc: bool = False
    low_memory: bool = False
    extensions: Extensions = Field(default_factory=Extensions)
    """Extension (the reference ignores it): :class:`Extensions`."""

    @model_validator(mode="before")
    @classmethod
    def _legacy_names(cls, data: Any) -> Any:
        if isinstance(data, dict):
            bad = sorted(k for k in data if k in _LEGACY_JOB_KEYS)
            if bad:
                where = "; ".join(f"{k} -> {_LEGACY_JOB_KEYS[k]}" for k in bad)
                raise ValueError(f"JobConfig keys {bad} are not protocol fields (a real server ignores them): {where}")
        return data

    @field_validator("seed", mode="before")
    @classmethod
    def _seed(cls, v: Any) -> Any:
        return DEFAULT_SEED if v is None else v

    @field_validator("ds_worker_config", "extensions", mode="before")
    @classmethod
    def _null_is_empty(cls, v: Any) -> Any:
        return {} if v is None else v

    @model_validator(mode="after")
    def _log_prob_config_on_its_job(self) -> JobConfig:
        if self.log_prob_config is not None and self.job_type != "log_prob":
            raise _refuse(f"log_prob_config on a {self.job_type} job (it configures the log_prob job)")
        return self


class DestroyRequest(BaseModel):
    job_type: JobTypeName


class SamplingParams(BaseModel):
    """vLLM-style sampling parameters both sampling engines implement (vLLM's ranges); others are ignored unless
    ``strict`` (:meth:`unsupported`)."""

    model_config = ConfigDict(extra="allow")
    temperature: float = Field(1.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: int = -1
    max_tokens: int | None = Field(None, ge=0)
    stop_token_ids: list[int] | None = None
    seed: int | None = None
    logprobs: int | None = Field(None, ge=0)
    ignore_eos: bool = False
    n: int = Field(1, ge=1, le=1)
    repetition_penalty: float = Field(1.0, gt=0)
    presence_penalty: float = Field(0.0, ge=-2, le=2)
    frequency_penalty: float = Field(0.0, ge=-2, le=2)
    min_p: float = Field(0.0, ge=0, le=1)
    min_tokens: int = Field(0, ge=0)
    """vLLM's: EOS and ``stop_token_ids`` cannot end a sequence before it has this many tokens."""

    @field_validator("logprobs", mode="before")
    @classmethod
    def _bool_logprobs(cls, v):
        """verl passes ``rollout.calculate_log_probs`` as a bool: True = the sampled token's, False = none."""
        if isinstance(v, bool):
            return 0 if v else None
        return v

    @field_validator("top_k", mode="before")
    @classmethod
    def _top_k_none(cls, v):
        return -1 if v is None else v

    def unsupported(self) -> list[str]:
        """The extra (vLLM) parameters given that the engines do not implement, sorted; empty, None and "off"
        values (:data:`NEUTRAL_SAMPLING_EXTRAS`) and output-formatting flags (:data:`HARMLESS_SAMPLING_EXTRAS`) do not
        count."""
        out = []
        for k, v in (self.model_extra or {}).items():
            if k in HARMLESS_SAMPLING_EXTRAS or v is None or v == [] or v == {}:
                continue
            if k in NEUTRAL_SAMPLING_EXTRAS and v == NEUTRAL_SAMPLING_EXTRAS[k]:
                continue
            out.append(k)
        return sorted(out)


NEUTRAL_SAMPLING_EXTRAS: dict[str, Any] = {
    "stop": None,
    "prompt_logprobs": None,
    "bad_words": None,
    "logit_bias": None,
}
"""vLLM parameters the engines do not implement, with the value that means "off" (accepted silently)."""
HARMLESS_SAMPLING_EXTRAS = frozenset(
    {
        "detokenize",
        "skip_special_tokens",
        "spaces_between_special_tokens",
        "include_stop_str_in_output",
        "output_kind",
        "truncate_prompt_tokens",
    }
)
"""Output-formatting flags that do not change the sampled token ids."""


class GenerateRequest(BaseModel):
    """``POST /generate`` (a DSSST1 frame, or JSON). ``prompts`` as token-id lists is an extension (capability
    ``token_ids``).

    Read as the embedded server has always read it: a missing or empty ``sampling_params`` means the defaults (its
    errors name the parameter alone, e.g. ``temperature: ...``), ``strict`` is taken by truthiness, and unknown keys
    are ignored. Each prompt is checked against the model by the server (strings are tokenized, ids range-checked).
    """

    prompts: list[Any]
    """Strings or token ids (lists of ints; inside a frame also 1-D integer tensors); not empty."""
    sampling_params: SamplingParams = Field(default_factory=SamplingParams)
    routing_key: Any = None
    strict: bool = False
    """Refuse :meth:`SamplingParams.unsupported` parameters (422) instead of ignoring them."""

    @model_validator(mode="before")
    @classmethod
    def _read(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        sp = data.get("sampling_params") or {}
        if not isinstance(sp, (dict, SamplingParams)):
            raise PydanticCustomError("sampling_params", "sampling_params must be an object")
        sp = SamplingParams.model_validate(sp)
        data["sampling_params"] = sp
        data["strict"] = bool(data.get("strict", False))
        unsupported = sp.unsupported()
        if unsupported and data["strict"]:
            raise PydanticCustomError(
                "sampling_params",
                f"sampling_params {unsupported} are not supported by the sampling engine (strict=true)",
            )
        if not isinstance(data.get("prompts"), list) or not data["prompts"]:
            raise PydanticCustomError(
                "prompts", "prompts must be a non-empty list of strings (or token-id lists: capability token_ids)"
            )
        return data


class LogProbsRequest(BaseModel):
    """``POST /log-probs`` (JSON in, frame out). Token-id prompts/completions are an extension (``token_ids``)."""

    prompts: list[str] | list[list[int]]
    completions: list[str] | list[list[int]] | None = None
    top_k: int = Field(1, ge=0)


class StepRequest(BaseModel):
    learning_rate: float | None = Field(None, ge=0)
    lr_scheduler_step: bool | None = None
    """Extension: advance the LR schedule after this step (None: yes, one tick per ``/step`` as the reference does;
    verl's actor ticks only on the last mini-batch of a training step, so its client sends false on the others)."""
    total_training_steps: int | None = Field(None, ge=1)
    """Extension: the schedule's horizon in ticks, when the job was created without it (verl's
    ``actor.optim.total_training_steps``, known only after verl built its dataloader)."""


class ProfileRequest(BaseModel):
    """Extension ``POST /profile?job_id=`` (training): torch profiler around the job's engine calls."""

    model_config = ConfigDict(extra="forbid")
    action: str
    """``start`` or ``stop``."""
    path: str | None = None
    """``stop``: folder for the chrome trace (default: the job's checkpoint folder / ``profile``)."""
    tag: str | None = None
    """``stop``: trace file name without ``.json`` (default ``training_step_<n>``)."""


class SaveRequest(BaseModel):
    checkpoint_id: str | None = None
    checkpoint_type: str = "resumable"
    path: str | None = None
    step: int | None = Field(None, ge=0)
    export_hf: bool = False
    save_total_limit: int | None = Field(None, ge=1)
    stage_info: dict[str, Any] | None = None


class LoadCheckpointRequest(BaseModel):
    path: str | None = None
    step: int | None = Field(None, ge=0)


class ResetPrefixCacheRequest(BaseModel):
    drain: bool = True
    timeout_s: float = 60.0
    retry_interval_s: float = 0.1


class WeightSyncRequest(BaseModel):
    source_sub_job_id: int | None = None
    target_sub_job_ids: list[int] | None = None
    cuda_ipc: bool | None = None
    low_memory: bool | None = None
    policy_version: int | None = Field(None, ge=0)
    """Extension: the version the sampler serves after the sync (default: its previous version + 1)."""


class OperationRequest(BaseModel):
    operation_type: str
    sub_job_id: int | str | None = None
    sub_job_type: str | None = None
    payload: dict[str, Any] = Field(default_factory=dict)


class WeightNormRequest(BaseModel):
    training_job_id: int
    sampling_job_id: int


class SleepRequest(BaseModel):
    level: int = 1


class SleepTrainingRequest(BaseModel):
    mode: str = "all"


SLEEP_TRAINING_MODES = ("all", "non_lp", "lp_params")
