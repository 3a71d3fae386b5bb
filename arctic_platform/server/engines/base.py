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
"""The interfaces of the embedded server's engines: what the routes, the job registry and the generate batcher call.

Three job types, three interfaces (as verl's ``workers/engine/base.py`` ``BaseEngine`` and
``workers/rollout/base.py`` ``BaseRollout`` separate training from rollout):

* :class:`TrainingInterface` (job ``training``): ``forward_backward``, ``step``, ``forward``, checkpoints
  (``save`` / ``load``), ``profile``, memory (``offload`` / ``reload`` / ``empty_cache``) and the weights a sync
  sends (``weights_for_sync``).
* :class:`ForwardInterface` (job ``log_prob``): ``forward``, ``log_probs_text``, memory, and receiving weights.
* :class:`SamplingInterface` (job ``sampling``): ``generate``, ``sleep`` / ``wake``, ``reset_prefix_cache``,
  receiving weights, ``engine_config``. It carries the state machine every sampler shares (sleep levels, wake tags,
  the abort event, the tokenizer); an implementation supplies the memory part (``_release`` / ``_restore``).

Every engine is built from one :class:`EngineSpec` by its class's ``from_spec``; :mod:`.registry` maps (job type,
engine kind) to the class, imported on first use. A weight sync hands the target a :class:`WeightSource` (anything
with ``named_parameters()`` yielding full tensors under the checkpoint's names).
"""

from __future__ import annotations

import abc
import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ...protocol import DEFAULT_MAX_SEQ_LEN, DEFAULT_SEED
from ..errors import RequestError
from ..settings import ServerLimits

if TYPE_CHECKING:
    import torch

    from ...schedule import TrainingSettings

__all__ = [
    "BucketedWeightSource",
    "Engine",
    "EngineSettings",
    "EngineSpec",
    "ForwardInterface",
    "GenerateItem",
    "SamplingInterface",
    "TrainingInterface",
    "WeightSource",
    "WeightTarget",
]


@dataclass
class EngineSettings:
    """What every engine needs to load its model."""

    model_path: str
    device: str = "cpu"
    dtype: str = "float32"
    max_seq_len: int = DEFAULT_MAX_SEQ_LEN
    attn_implementation: str = "sdpa"
    seed: int = DEFAULT_SEED


@dataclass
class GenerateItem:
    """One prompt of a /generate request, with its resolved sampling parameters."""

    prompt: list[int]
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int = 16
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    logprobs: int | None = None
    seed: int | None = None
    text: str | None = None
    repetition_penalty: float = 1.0
    """vLLM's: logits of tokens in the prompt or the output so far are divided by it when positive, else multiplied."""
    presence_penalty: float = 0.0
    """vLLM's (OpenAI's): subtracted from the logits of tokens that occur in the output so far."""
    frequency_penalty: float = 0.0
    """vLLM's (OpenAI's): times its count in the output so far, subtracted from a token's logit."""
    min_p: float = 0.0
    """vLLM's: after temperature, tokens with probability below ``min_p`` x the top probability are dropped."""
    min_tokens: int = 0
    """vLLM's: the stop ids (EOS unless ``ignore_eos``, and ``stop_token_ids``) are masked until the output has this
    many tokens."""


def load_tokenizer(model_path: str):
    """The model folder's tokenizer (text prompts and results); 422 naming the folder's problem when it has none."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(model_path)
    except Exception as e:
        raise RequestError(f"the model folder has no usable tokenizer for text prompts ({e})", 422) from None


def param_items(model) -> list[tuple[str, torch.nn.Parameter]]:
    """Named parameters, each tensor once (tied embeddings are listed under their first name)."""
    return list(model.named_parameters())


def weight_norm(model) -> tuple[float, int]:
    """sqrt(Σ p²) in float64 over unique parameters, and their element count."""
    import torch

    total = torch.zeros((), dtype=torch.float64)
    n = 0
    with torch.no_grad():
        for _, p in param_items(model):
            total += p.detach().to("cpu", torch.float64).square().sum()
            n += p.numel()
    return math.sqrt(total.item()), n


class WeightSource(Protocol):
    """What a weight sync reads: ``(name, full tensor)`` pairs under the model folder's parameter names."""

    def named_parameters(self) -> Iterable[tuple[str, torch.Tensor]]: ...


class BucketedWeightSource(WeightSource, Protocol):
    """A source held in other processes (a sharded training job's ranks) that writes a sync's buckets itself: the
    full tensors are gathered there, cast to the target's dtype before the gather, and written as one safetensors
    file per bucket, so the server never holds (or re-reads) a whole-model file (:func:`.shared.stream_buckets`)."""

    def bucket_plan(self, dtype: torch.dtype | None, bucket_bytes: int) -> list[list[tuple[str, list[int], int]]]:
        """The sync's buckets in order: ``(name, shape, bytes in dtype)`` per tensor (``None``: the source's own
        dtype); a bucket holds ``bucket_bytes`` or one larger tensor."""

    def write_bucket(self, names: list[str], dtype: torch.dtype | None, path: str) -> None:
        """Write the tensors ``names`` (one bucket of :meth:`bucket_plan`) in ``dtype`` as the safetensors file
        ``path``, atomically."""


@dataclass
class EngineSpec:
    """Everything a job's engine is built from (:meth:`Engine.from_spec`)."""

    settings: EngineSettings
    training: TrainingSettings | None = None
    """Training jobs: optimizer, schedule, LoRA, clipping."""
    vllm_config: dict | None = None
    """Sampling jobs: the job's ``vllm_config``."""
    max_batch_rows: int = 64
    """Torch sampling engines: rows decoded together."""
    threads: int | None = None
    """The server's ``--threads`` (an engine process's torch / OpenMP threads)."""
    devices: list[str] = field(default_factory=list)
    """The job's devices, one per rank (empty: ``[settings.device]``)."""
    full_determinism: bool = False
    """``JobConfig.full_determinism``: an engine's own processes seed and pick deterministic kernels too."""
    engine_timeout_s: float = 1800.0
    """The server's ``--engine-timeout``: how long a sharded engine's ranks wait in a collective."""
    weight_sync_bucket_mb: float = ServerLimits.weight_sync_bucket_mb
    """The server's ``--weight-sync-bucket-mb``: the bucket a sync streams to a vLLM sampler's replicas."""

    @property
    def world_size(self) -> int:
        return max(1, len(self.devices))


class Engine(abc.ABC):
    """What every engine is: built from an :class:`EngineSpec`, described in ``/job/{id}``, closed with its job."""

    kind: ClassVar[str] = "base"
    """The job type it serves (``training``, ``sampling``, ``log_prob``)."""
    engine_name: ClassVar[str] = "torch"
    """The engine kind ``/job/{id}`` reports (``torch``, ``vllm``)."""

    @classmethod
    def check(cls, cfg: Any, limits: ServerLimits, settings: EngineSettings, devices: tuple[str, ...]) -> None:
        """Refuse what this engine cannot honour of a new job (its ``JobConfig``, the server's limits, the job's engine
        settings and devices) with a :class:`RequestError` naming it, at ``/initialize``, before anything is built.
        The default honours everything."""
        return None

    @classmethod
    @abc.abstractmethod
    def from_spec(cls, spec: EngineSpec) -> Engine:
        """Build the engine of one job."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release everything the engine holds (processes, memory, folders). Idempotent."""

    def describe(self) -> dict[str, Any]:
        """The job-type fields of ``/job/{id}`` this engine reports (empty by default)."""
        return {}

    def request_abort(self) -> None:  # noqa: B027 - most engines have nothing in flight to stop
        """Ask a call in flight to stop early (the job is being destroyed); most engines finish their call."""


class WeightTarget(abc.ABC):
    """An engine a weight sync writes into (sampling and log_prob jobs)."""

    @abc.abstractmethod
    def load_weights_from(self, source: WeightSource) -> None:
        """Replace the engine's weights with ``source``'s (same names and shapes, 409 otherwise)."""

    @abc.abstractmethod
    def weight_norm(self) -> tuple[float, int]:
        """sqrt(Σ p²) in float64 over the weights the engine computes with, and their element count."""


class _ModelMemory(abc.ABC):
    """Offload / reload of a model engine's memory (``/sleep-training``, ``/wake-log-prob``, ...)."""

    @abc.abstractmethod
    def require_awake(self) -> None:
        """409 when the engine is offloaded."""

    @abc.abstractmethod
    def offload(self, mode: str = "all") -> dict:
        """Move weights (and optimizer state) off the device."""

    @abc.abstractmethod
    def reload(self) -> dict:
        """Bring them back."""

    @abc.abstractmethod
    def empty_cache(self) -> dict:
        """Return cached device memory to the driver."""


class ForwardInterface(Engine, _ModelMemory, WeightTarget):
    """Job ``log_prob``: forward-only log-probs (``/forward``, ``/log-probs``) with the weights it was given."""

    kind = "log_prob"
    policy_version: int | None = None
    """A forward engine keeps no policy version (``/weight-norm`` reports null for it)."""

    @abc.abstractmethod
    def forward(self, batch: dict, meta: dict, processing: dict | None = None) -> dict:
        """``/forward``: predict-next log-probs ``[B, L]`` (and entropy)."""

    @abc.abstractmethod
    def tokenizer(self):
        """The model folder's tokenizer (``/log-probs`` with text prompts)."""

    @abc.abstractmethod
    def log_probs_text(self, tokenizer, prompts: list, completions: list | None, top_k: int = 1) -> list[dict]:
        """``/log-probs``: vLLM-shaped prompt log-probs of prompt + completion."""


class TrainingInterface(Engine, _ModelMemory):
    """Job ``training``: verl's actor update, checkpoints, and the weights a sync sends."""

    kind = "training"
    policy_version: int = 0
    global_steps: int = 0

    @abc.abstractmethod
    def forward_backward(self, batch: dict, meta: dict, processing: dict | None = None) -> dict:
        """verl's actor loss on one mini-batch; gradients accumulate until :meth:`step`."""

    @abc.abstractmethod
    def forward(self, batch: dict, meta: dict, processing: dict | None = None) -> dict:
        """``/forward`` on the training weights."""

    @abc.abstractmethod
    def step(
        self,
        learning_rate: float | None = None,
        *,
        lr_scheduler_step: bool | None = None,
        total_training_steps: int | None = None,
    ) -> dict:
        """Clip, take one optimizer step, advance the LR schedule."""

    @abc.abstractmethod
    def save(self, root: Path, step: int | None, save_total_limit: int | None, export_hf: bool = False) -> dict:
        """Write a checkpoint (docs/arctic-rl-protocol.md §8)."""

    @abc.abstractmethod
    def load(self, target: Path) -> dict:
        """Restore a checkpoint folder."""

    @abc.abstractmethod
    def profile(self, action: str, path: Path, tag: str | None = None) -> dict:
        """Start / stop the torch profiler."""

    @abc.abstractmethod
    def weights_for_sync(self) -> WeightSource:
        """The weights a sync sends (LoRA merged in)."""

    def weight_norm(self) -> tuple[float, int]:
        """sqrt(Σ p²) (float64) and element count of :meth:`weights_for_sync`."""
        return weight_norm(self.weights_for_sync())


class SamplingInterface(Engine, WeightTarget):
    """Job ``sampling``: generation, sleep / wake, the prefix cache, and receiving weights.

    Implementations set ``settings``, ``device``, ``max_batch_rows``, ``vocab_size``, ``eos_ids``, ``pad_id`` and
    call :meth:`_init_sampler`; the sleep / wake state machine lives here, the memory part in ``_release`` /
    ``_restore`` (an engine whose state lives in another process may forward ``sleep`` / ``wake`` whole).
    """

    kind = "sampling"
    settings: EngineSettings
    device: torch.device
    max_batch_rows: int
    vocab_size: int

    def _init_sampler(self, abort=None) -> None:
        """The state every sampler starts with (``abort``: a shared event for an engine in another process)."""
        self.policy_version = 0
        self.state = "ready"  # ready | sleeping | weights_ready
        self.abort = abort if abort is not None else threading.Event()
        self._tokenizer = None
        self._no_tokenizer = False

    @property
    def pid(self) -> int | None:
        """The OS process holding the model when it is not this one (``/job``'s ``engine_pid``), else None."""
        return None

    def request_abort(self) -> None:
        self.abort.set()

    def describe(self) -> dict[str, Any]:
        return {
            "policy_version": self.policy_version,
            "inference_state": self.state,
            "engine_pid": self.pid,
            "engine_config": self.engine_config(),
        }

    @abc.abstractmethod
    def generate(self, items: list[GenerateItem]) -> tuple[list[dict], int]:
        """Decode ``items`` as one batch; returns ``(results, policy_version)``."""

    @abc.abstractmethod
    def engine_config(self) -> dict[str, Any]:
        """What of the job's ``vllm_config`` the engine runs with (``/job/{id}``'s ``engine_config``)."""

    def reset_prefix_cache(self) -> bool:
        """Drop the prefix cache (an engine without one has nothing to drop)."""
        return True

    # ---- tokenizer ----
    def tokenizer(self):
        """The model folder's tokenizer (text prompts)."""
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.settings.model_path)
        return self._tokenizer

    def _text_tokenizer(self):
        """The tokenizer for ``text`` in results, or None when the model folder has none (text is then null)."""
        if self._tokenizer is None and not self._no_tokenizer:
            try:
                self.tokenizer()
            except Exception:  # a model folder without a tokenizer still serves token ids
                from ..logs import logger

                logger.warning("no tokenizer in %s: generate results carry text=null", self.settings.model_path)
                self._no_tokenizer = True
        return self._tokenizer

    # ---- sleep / wake (docs/arctic-rl-protocol.md §7) ----
    def sleep(self, level: int) -> dict:
        if level not in (1, 2):
            raise RequestError(f"sleep level must be 1 or 2, got {level}")
        released = self._release(level)
        self.state = "sleeping"
        return {"state": self.state, "level": level, "memory_released": released}

    def wake(self, tags: list[str] | None) -> dict:
        tags = None if tags is None else list(tags)
        if tags is not None and any(t not in ("weights", "kv_cache") for t in tags):
            raise RequestError(f"wake tags must be 'weights' and/or 'kv_cache', got {tags}")
        wake_weights = tags is None or "weights" in tags
        wake_kv = tags is None or "kv_cache" in tags
        if wake_kv and not wake_weights and self.state == "sleeping":
            raise RequestError("cannot wake kv_cache before weights (wake ['weights'] first)", 409)
        self._restore(tags, wake_weights)
        if wake_weights and wake_kv:
            self.state = "ready"
        elif wake_weights:
            self.state = "weights_ready" if self.state == "sleeping" else self.state
        elif wake_kv:
            self.state = "ready"
        return {"state": self.state}

    def require_ready(self) -> None:
        """409 unless the engine is awake (weights and KV cache)."""
        if self.state != "ready":
            raise RequestError(f"the sampling engine is {self.state}; call /wake-inference first", 409)

    def _release(self, level: int) -> bool:
        """:meth:`sleep`'s memory part; returns whether device memory was released (``memory_released``). By
        default nothing moves (an engine whose memory stays put; only the state changes)."""
        return False

    def _restore(self, tags: list[str] | None, wake_weights: bool) -> None:  # noqa: B027 - nothing moved
        """:meth:`wake`'s memory part, before the state moves on (by default nothing to bring back)."""
