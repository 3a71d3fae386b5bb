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
"""The Arctic RL client: :class:`AsyncArcticRLClient` and its sync wrapper :class:`ArcticRLClient`.

Lifecycle::

    client = AsyncArcticRLClient(ArcticRLClientConfig(model_name="./tiny", training=...))
    await client.start()          # local: start the server; then create sampling, log_prob, training jobs
    ...                           # data plane (below)
    handle = client.reconnect_handle()   # JSON-serialisable; re-attach elsewhere with from_handle(handle)
    await client.close()          # destroy only the jobs this client created; stop the server it started

Every call goes through a row of the endpoint table (:data:`arctic_platform.endpoints.ENDPOINTS`: path, job types,
body kind, idempotency). On-prem (``local`` / ``onprem``), idempotent calls are retried after a send-side failure or
502/503/504: ``health``, ``status``, ``job_info``, ``forward``, ``generate`` (it changes no server state; a retried
unseeded request returns fresh samples), ``weight_norm``, ``load_checkpoint``, ``sleep_inference``,
``wake_inference``, ``reset_prefix_cache``, ``sync_weights(policy_version=...)`` and ``save(step=...)``. Never
retried after sending: ``forward_backward``, ``step``, ``sync_weights()`` without a version, ``save()`` without a
step, job creation. A connection that was never established is retried for every call. 4xx is never retried.

The client builds every call's body as the Arctic RL API has it and hands it to its transport
(:class:`.transports.Transport`: ``local``, ``onprem`` or ``cortex``), which owns how the backend is reached and how
jobs are created and released; it never asks which transport it holds. On Snowflake Cortex (``cortex``) the rows map
to SnowAPI routes (:mod:`.transports.cortex`, with its own retry rules): one create makes the job and its sub-jobs
(their ids are this client's job ids), sleep / wake are no-ops, ``forward``, ``log_probs``, ``load_checkpoint`` and
the embedded server's extensions fail at once naming cortex, and the LR schedule is run by the transport and sent as
each step's ``learning_rate``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Concatenate, ParamSpec, TypeVar

from ..backend_profile import ARCTIC_PLATFORM_MAIN, BackendProfile
from ..endpoints import endpoint
from ..protocol import FORWARD_PROCESSING, JOB_TYPES, TERMINAL_STATES, UPDATE_PROCESSING, normalize_state
from .config import ArcticRLClientConfig
from .errors import ArcticRLError
from .transports import Transport, config_fields, transport_for

logger = logging.getLogger("arctic_platform.client")

__all__ = ["ArcticRLClient", "AsyncArcticRLClient", "normalize_state", "sampled_logprobs", "TERMINAL_STATES"]

HANDLE_VERSION = 1


def sampled_logprobs(result: dict) -> list[float] | None:
    """Log-prob of each generated token from a generate result: ``logprobs[k][str(token_ids[k])]["logprob"]``.

    Accepts the reference (ArcticInference) shape, one ``{token_id: {logprob, rank}}`` dict per position (token-id
    keys as strings or ints), and a plain list of floats. None when the result carries no log-probs.
    """
    lps = result.get("logprobs")
    if lps is None:
        return None
    ids = result["token_ids"]
    if len(lps) != len(ids):
        raise ArcticRLError(None, f"generate result has {len(lps)} logprobs for {len(ids)} tokens", "/generate")
    out = []
    for k, (entry, tok) in enumerate(zip(lps, ids, strict=True)):
        if isinstance(entry, (int, float)):
            out.append(float(entry))
            continue
        if not isinstance(entry, dict):
            raise ArcticRLError(None, f"logprobs[{k}] is {type(entry).__name__}, not a dict", "/generate")
        e = entry.get(str(tok), entry.get(tok))
        if e is None:
            raise ArcticRLError(None, f"logprobs[{k}] has no entry for the sampled token {tok}", "/generate")
        out.append(float(e["logprob"] if isinstance(e, dict) else e))
    return out


RANK_AGREED = ("grad_norm", "last_lr", "lr")
"""Step metrics every data-parallel rank computes identically (the global grad norm, the scheduler's rate)."""


def rank_agreed_metrics(metrics: dict, endpoint: str) -> dict:
    """``metrics`` with per-rank lists of :data:`RANK_AGREED` keys collapsed to one value.

    Arctic-Platform's ``/step`` returns one value per training rank (``merge_dict_shards``) when it has more than one
    worker; those must agree (relative 1e-6), else the ranks have diverged and the call fails naming the values.
    """
    out = dict(metrics)
    for key in RANK_AGREED:
        v = out.get(key)
        if not isinstance(v, (list, tuple)):
            continue
        if not v or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
            raise ArcticRLError(None, f"metrics.{key} is {v!r}: expected a number per training rank", endpoint)
        ref = float(v[0])
        if any(abs(float(x) - ref) > 1e-6 * max(1.0, abs(ref)) for x in v):
            raise ArcticRLError(None, f"the training ranks disagree on {key}: {list(v)}", endpoint)
        out[key] = ref
    return out


def _job_id(v: int | str | None) -> int | str | None:
    if isinstance(v, str) and v.strip().isdigit():
        return int(v)
    return v


class AsyncArcticRLClient:
    """Async client of one Arctic RL server and up to three jobs (training, sampling, log_prob).

    Args:
        config: an :class:`ArcticRLClientConfig` (or a dict validated into one).
        sleep: the coroutine the Cortex transport waits with (retry backoff, polling); tests pass one that does not
            sleep. None: ``asyncio.sleep``.
    """

    def __init__(self, config: ArcticRLClientConfig | dict, *, sleep: Callable[[float], Awaitable[Any]] | None = None):
        self.config = (
            config if isinstance(config, ArcticRLClientConfig) else ArcticRLClientConfig.model_validate(config)
        )
        c = self.config
        self._jobs: dict[str, int | str | None] = {t: _job_id(getattr(c, f"{t}_job_id")) for t in JOB_TYPES}
        self._transport: Transport | None = None  # set by connect()
        self._handle: dict | None = None  # the reconnect handle this client was re-attached from
        self._adopt = False  # adopt_jobs(): own the re-attached jobs
        self._sleep = sleep
        self._started = False
        self._closed = False
        self.url: str | None = None
        self.capabilities: tuple[str, ...] = ()
        """What the server advertised in /health (``token_ids``, ...); empty for a reference server."""
        self.backend_profile: BackendProfile = ARCTIC_PLATFORM_MAIN
        """What the backend honours (/health ``profile``; Arctic-Platform main's when it advertises none)."""
        self.retokenize_stats = {"prompts": 0, "mismatches": 0}
        """Text-prompt generation: prompts sent as text, and those whose ``encode(decode(ids)) != ids``."""
        self._tokenizer = None

    def __repr__(self) -> str:
        return (
            f"AsyncArcticRLClient(backend={self.config.backend.type!r}, url={self.url!r}, "
            f"jobs={ {k: v for k, v in self._jobs.items() if v is not None} }, owned={len(self.owned_job_ids)})"
        )

    # ---- job ids ----
    @property
    def training_job_id(self):
        return self._jobs["training"]

    @property
    def sampling_job_id(self):
        return self._jobs["sampling"]

    @property
    def log_prob_job_id(self):
        return self._jobs["log_prob"]

    @property
    def owned_job_ids(self) -> list:
        return [j for j, _ in self._transport.owned] if self._transport is not None else []

    # ---- lifecycle ----
    async def connect(self) -> AsyncArcticRLClient:
        """Reach the server (starting the local one if configured) and read what it advertises; create nothing.

        Sets :attr:`capabilities` and :attr:`backend_profile` from ``/health``. :meth:`start` calls it first; call it
        alone to check a run's settings against the backend before any job exists.

        Raises:
            ArcticRLError: the server did not come up (whatever was started is stopped first).
        """
        if self._closed:
            raise ArcticRLError(None, "this client was closed; create a new one", "start")
        if self._transport is not None:
            return self
        self._transport = transport_for(self.config, self._jobs, sleep=self._sleep, handle=self._handle)
        try:
            await self._transport.connect()
        except BaseException:
            await self.close()
            raise
        t = self._transport
        self.url, self.capabilities, self.backend_profile = t.url, t.capabilities, t.profile
        return self

    async def start(self, *, wait_for: Collection[str] | None = None) -> AsyncArcticRLClient:
        """Connect (starting the local server if configured), then create or verify the jobs.

        Creating: every job is created (``/initialize`` validates its config and answers at once; the server builds
        the engines concurrently), then this waits until the jobs of ``wait_for`` (default: all) are running. A job
        left out keeps building: :meth:`wait_ready` waits for it, and a client re-attached with :meth:`from_handle`
        waits for it in its own :meth:`start`. The verl plugin waits for the training and log-prob jobs only, so a
        vLLM engine's start (tens of seconds on CPU, minutes on a GPU node) overlaps the trainer's own start-up.

        Re-attaching (job ids given): checks each job's type and waits while a job of ``wait_for`` (default: all) is
        still building (``PENDING``, up to ``job_ready_timeout``); a job that failed or was destroyed raises.

        A start that fails half-way destroys every job it created (retried, :meth:`close`) and stops its server.

        Cortex: one create makes every sub-job (retried only when it provably never landed); this waits for the job
        to be ``running`` (``wait_for`` does not apply: SnowAPI reports one state for the job), and the sub-job ids
        become the job ids. What Cortex has no field for is refused before the create
        (``ArcticRLUnavailableError``, :func:`.transports.cortex_body.cortex_refusals`).

        Raises:
            ArcticRLError: the server did not come up, a job failed (``ArcticRLJobError``, with the reason), or
                Cortex cannot honour the config (``ArcticRLUnavailableError``). Whatever was created is cleaned up
                first.
        """
        if self._started:
            return self
        if wait_for is not None and not set(wait_for) <= set(JOB_TYPES):
            raise ValueError(f"wait_for: unknown job types {sorted(set(wait_for) - set(JOB_TYPES))} (of {JOB_TYPES})")
        await self.connect()
        try:
            if self.config.reconnecting:
                await self._transport.attach(wait_for)
                if self._adopt:
                    self._transport.adopt()
            else:
                await self._transport.create_jobs(self.job_body, wait_for)
        except BaseException:
            await self.close()
            raise
        self._started = True
        return self

    def adopt_jobs(self) -> None:
        """Own the jobs this re-attached client names: :meth:`close` destroys them (the verl plugin's TaskRunner
        taking over the jobs ``main_ppo`` created before Ray started). Before :meth:`start`, the jobs are owned once
        it has attached to them."""
        self._adopt = True
        if self._transport is not None:
            self._transport.adopt()

    async def wait_ready(self, job_types: Collection[str] | None = None) -> None:
        """Wait until this client's jobs of ``job_types`` (default: all it knows) are running.

        Raises:
            ArcticRLJobError: a job failed or was destroyed (with its reason), or it is still building after
                ``job_ready_timeout``.
        """
        await self._t.wait_ready(set(JOB_TYPES if job_types is None else job_types))

    def job_body(self, job_type: str) -> dict:
        """The ``/initialize`` body this client sends for ``job_type``: :meth:`ArcticRLClientConfig.job_config`, with
        ``ds_worker_config.attn_implementation`` left unset there resolved to the server's default
        (:attr:`BackendProfile.default_attn_implementation`; Arctic-Platform's engine refuses a job without one)."""
        body = self.config.job_config(job_type)
        schedule = self.config.training.lr_schedule
        if job_type == "training" and not self.backend_profile.lr_schedule and schedule.needs_horizon():
            if schedule.horizon is None:  # the ds_config scheduler could not say it: never a silent constant rate
                raise ValueError(
                    f"training.lr_schedule ({schedule.kind}, warmup ratio {schedule.lr_warmup_steps_ratio}) needs "
                    f"total_training_steps: {self.backend_profile.name} runs the ds_config scheduler, built with the "
                    "job"
                )
        wc = body.get("ds_worker_config")
        if wc is not None and wc.get("attn_implementation") is None:
            wc["attn_implementation"] = self.backend_profile.default_attn_implementation
        return body

    async def close(self) -> list[str]:
        """Destroy the jobs this client created (reverse order; 404 = already gone), stop its server. Idempotent.

        Returns:
            One line per job that may still be running (its ``/destroy`` failed after the retries), each also logged
            as a warning; empty when every job is gone. A second call returns ``[]``.
        """
        if self._closed:
            return []
        self._closed = True
        errors = await self._transport.close() if self._transport is not None else []
        for e in errors:
            logger.warning("close: %s", e)
        return errors

    async def __aenter__(self) -> AsyncArcticRLClient:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # ---- reconnect ----
    def reconnect_handle(self) -> dict:
        """JSON-serialisable handle: URL, job ids, backend type and the token variable's *name* (never the token).

        Cortex: the backend settings without the PAT (a re-attached client reads it from ``pat_env_var``), the parent
        job id and the sub-job ids, and what a re-attached client computes with: the training settings (the LR
        schedule it runs) and where that schedule stands now (``lr_schedule_position``: a client re-attached after
        N steps goes on at N), the GPU counts (the loss's ``dp_size``) and ``max_seq_len`` (the prompt check).
        """
        if self.url is None:
            raise ArcticRLError(None, "start() the client before asking for a reconnect handle", "reconnect_handle")
        b = self.config.backend
        extra = self._transport.handle_fields() if self._transport is not None else {}
        return {
            **extra,
            "version": HANDLE_VERSION,
            "backend": b.type,
            "url": self.url,
            "token_env_var": getattr(b, "token_env_var", None),
            "model_name": self.config.model_name,
            "training_job_id": self._jobs["training"],
            "sampling_job_id": self._jobs["sampling"],
            "log_prob_job_id": self._jobs["log_prob"],
            "request_timeout": self.config.request_timeout,
            "connect_timeout": self.config.connect_timeout,
            "job_ready_timeout": self.config.job_ready_timeout,
            "max_retries": self.config.max_retries,
        }

    @classmethod
    def from_handle(
        cls, handle: dict, *, sleep: Callable[[float], Awaitable[Any]] | None = None, **overrides: Any
    ) -> AsyncArcticRLClient:
        """A re-attached client (creates and destroys nothing; never stops the server). Call ``start()`` on it.

        Args:
            handle: from :meth:`reconnect_handle`.
            sleep: as the constructor's.
            **overrides: ``ArcticRLClientConfig`` fields to change (e.g. ``request_timeout``).
        """
        if handle.get("version") != HANDLE_VERSION:
            raise ValueError(f"unsupported reconnect handle version {handle.get('version')!r}")
        fields = {
            k: handle[k]
            for k in ("model_name", "request_timeout", "connect_timeout", "job_ready_timeout", "max_retries")
            if k in handle
        }
        fields.update({k: handle.get(k) for k in ("training_job_id", "sampling_job_id", "log_prob_job_id")})
        fields.update(config_fields(handle))
        fields.update(overrides)
        client = cls(ArcticRLClientConfig(**fields), sleep=sleep)
        client._handle = handle
        return client

    # ---- plumbing ----
    @property
    def _t(self) -> Transport:
        if self._transport is None:
            raise ArcticRLError(None, "the client is not started (await client.start())", "start")
        return self._transport

    async def _op(
        self,
        name: str,
        job_id: Any = None,
        *,
        json_body: Any = None,
        tree: Any = None,
        idempotent: bool | None = None,
    ) -> Any:
        """Send the call of endpoint row ``name`` (``tree``: a frame body) through the transport and return the
        reply. ``idempotent``: when the call carries the row's idempotency key (``step=``, ``policy_version=``)."""
        if self._transport is None:
            raise ArcticRLError(None, "the client is not started (await client.start())", endpoint(name).path)
        return await self._transport.call(name, job_id, json_body=json_body, tree=tree, idempotent=idempotent)

    def _server_path(self, path: str | None) -> str | None:
        return self._transport.server_path(path) if self._transport is not None else path

    def _need(self, job_type: str, name: str):
        """The job id of ``job_type`` for endpoint row ``name``; a row the transport has no route for fails first,
        naming the backend."""
        if self._transport is not None:
            self._transport.check_route(name)
        jid = self._jobs[job_type]
        if jid is None:
            raise ArcticRLError(None, f"No {job_type} job initialized.", endpoint(name).path)
        return jid

    # ---- control ----
    async def health(self) -> dict:
        return await self._op("health")

    async def status(self) -> dict:
        return await self._op("status")

    async def job_info(self, job_id) -> dict:
        """The job's status (``status``, ``job_type``, ``reason``, ...). Cortex: the sub-job's entry in the job's
        state (its ``status`` and ``job_type`` as this client names them, the job's ``reason``)."""
        return await self._t.job_info(job_id)

    # ---- training ----
    async def forward_backward(self, batch: dict, meta: dict, processing: dict | None = None) -> dict:
        """One PPO mini-batch: verl policy loss + backward on the training job (gradients accumulate to ``step``).

        Args:
            batch: docs/arctic-rl-protocol.md §5 tensors (``input_ids``, ``attention_mask``, ``prompts``, ``responses``,
                ``response_mask``, ``old_log_probs``, ``advantages``, optional ``ref_log_prob``,
                ``rollout_is_weights``, ``position_ids``); response-aligned ones as ``[b, R]`` or left-padded
                ``[b, P+R]``.
            meta: ``actor_config``, ``temperature``, ``calculate_entropy``, ``global_batch_size``,
                ``batch_num_tokens``, ``max_prompt_len``, ``max_response_len``, ...
            processing: default ``{"post": [...], "loss_fn": "verl_grpo"}``.

        Returns:
            ``{"job_id", "metrics": {"actor/pg_loss", "actor/pg_clipfrac", "actor/ppo_kl", "actor/pg_clipfrac_lower",
            ["actor/entropy_loss"], ["kl_loss", "kl_coef"], "loss"} (verl's names), "avg_loss"}``. Cortex:
            ``{"job_id", "avg_loss", "metrics" (may be empty), "post_process_outputs"}``.

        Cortex: the batch travels as the ``grpo`` contract (:func:`.transports.cortex_body.forward_backward_frame`:
        the prompt length, the loss settings of ``meta``; ``old_log_probs`` only when the batch has them), in a chunk
        envelope whose group id makes a resent call run once; ``processing`` must name verl's PPO loss (or be None).
        """
        jid = self._need("training", "forward_backward")
        tree = {"batch": batch, "meta": meta, "processing": processing or UPDATE_PROCESSING}
        return await self._op("forward_backward", jid, tree=tree)

    async def step(
        self,
        learning_rate: float | None = None,
        *,
        lr_scheduler_step: bool | None = None,
        total_training_steps: int | None = None,
    ) -> dict:
        """Optimizer step: ``{"job_id", "metrics": {"grad_norm", "last_lr", ["lr"]}, "global_steps", "skipped"}``.

        ``grad_norm`` is the pre-clip global norm; ``last_lr`` the rate this step used (``learning_rate``, when given,
        overrides the schedule for this step only); the embedded server adds ``lr``, the scheduled rate after this
        step's tick (verl's ``lr`` metric). Extensions (embedded server): ``lr_scheduler_step=False`` steps the
        optimizer without ticking the schedule (verl ticks once per training step); ``total_training_steps`` gives
        the schedule its horizon when the job was created without one.

        Cortex: the client runs the schedule and sends this step's rate as ``learning_rate`` (SnowAPI's only step
        field); the reply is the service's (``{"global_steps", "last_lr"}``, no ``metrics``) with ``lr`` added, the
        schedule's rate after this step's tick.
        """
        jid = self._need("training", "step")
        body: dict[str, Any] = {} if learning_rate is None else {"learning_rate": learning_rate}
        if lr_scheduler_step is not None:
            body["lr_scheduler_step"] = bool(lr_scheduler_step)
        if total_training_steps is not None:
            body["total_training_steps"] = int(total_training_steps)
        reply = await self._op("step", jid, json_body=body)
        if isinstance(reply, dict) and isinstance(reply.get("metrics"), dict):
            reply["metrics"] = rank_agreed_metrics(reply["metrics"], "/step")
        return reply

    async def profile(self, action: str, *, path: str | None = None, tag: str | None = None) -> dict:
        """Extension (capability ``profile``): ``start`` / ``stop`` the training engine's torch profiler; ``stop``
        writes ``<path>/<tag>.json`` (a chrome trace) and returns ``{"trace": ...}``."""
        jid = self._need("training", "profile")
        body = {"action": action, "path": self._server_path(path), "tag": tag}
        return await self._op("profile", jid, json_body={k: v for k, v in body.items() if v is not None})

    async def forward(self, batch: dict, meta: dict, processing: dict | None = None, *, ref: bool = False) -> dict:
        """Predict-next log-probs: ``{"batch": {"logprobs" [B, P+R] float32[, "entropy"]}, "metrics"}``.

        Slot i holds log P(input_ids[i+1]) at ``meta.temperature``; 0 on padding and in the last column.
        ``ref=True`` asks the log_prob job (the initial weights).
        """
        jt = "log_prob" if ref else "training"
        jid = self._need(jt, "forward")
        tree = {"batch": batch, "meta": meta, "processing": processing or FORWARD_PROCESSING}
        return await self._op("forward", jid, tree=tree)

    async def save(
        self,
        path: str | None = None,
        step: int | None = None,
        save_total_limit: int | None = None,
        *,
        export_hf: bool = False,
    ) -> dict:
        """Checkpoint to ``<path or job dir>/checkpoint-<step or global_steps>`` + ``latest``.

        Returns:
            ``{"job_id", "path", "hf_path", "global_step"}``. Cortex: ``{"checkpoint_id", "checkpoint_path",
            "checkpoint_tag"}`` (a resumable checkpoint in the service's own store; it takes none of the arguments).
        """
        jid = self._need("training", "save")
        body = {"path": self._server_path(path), "step": step, "save_total_limit": save_total_limit}
        if export_hf:
            body["export_hf"] = True  # also write <target>/hf (save_pretrained: config + safetensors)
        return await self._op(
            "save", jid, json_body={k: v for k, v in body.items() if v is not None}, idempotent=step is not None
        )

    async def load_checkpoint(self, path: str | None = None, step: int | None = None) -> dict:
        """Restore model, optimizer, scheduler and counters: ``{"path", "global_step", "policy_version"}``.

        The sampler is not touched; call ``sync_weights(policy_version=...)`` afterwards to serve the loaded weights.
        """
        jid = self._need("training", "load_checkpoint")
        body = {k: v for k, v in {"path": self._server_path(path), "step": step}.items() if v is not None}
        return await self._op("load_checkpoint", jid, json_body=body)

    # ---- sampling ----
    async def generate(
        self,
        prompts: list[list[int]] | list[str],
        sampling_params: dict | None = None,
        *,
        routing_key: Any = None,
        strict: bool = False,
    ) -> list[dict]:
        """Sample continuations (batched server-side with concurrent callers).

        Token-id prompts travel as ids only to a server that advertises the ``token_ids`` capability (and
        ``sampling.prompt_format`` is ``auto``); otherwise they are decoded to text with the model's tokenizer, as the
        reference ``GenerateRequest.prompts: list[str]`` needs, and each is checked: ``encode(decode(ids)) == ids``
        and the server's ``prompt_len`` == ``len(ids)``. Mismatches are counted in :attr:`retokenize_stats`; above
        ``sampling.max_retokenize_mismatch_rate`` the call fails, naming the counts.

        Returns:
            One dict per prompt: ``text``, ``token_ids`` (exactly the generated ids), ``finish_reason``
            (stop / length / abort), ``prompt_len``, ``generation_len``, ``prefix_cache_len``, ``logprobs`` (None, or
            one ``{str(token_id): {logprob, rank}}`` per generated token; see :func:`sampled_logprobs`) and, from
            this project's server, ``policy_version``. Cortex: ``text``, ``token_ids``, ``finish_reason`` and what
            the service adds (``logprobs`` when ``sampling_params.logprobs`` is set: a result without them fails).

        Cortex: token-id prompts travel as ids (the specification's prompts take them); one of ``max_seq_len``
        tokens or more is refused before sending (no room for an output token), as SnowAPI's own client does.
        """
        jid = self._need("sampling", "generate")
        prompts = list(prompts)
        if not prompts:
            raise ArcticRLError(None, "prompts is empty", "/generate")
        as_ids = all(not isinstance(p, str) for p in prompts)
        wire_prompts: list = [list(map(int, p)) if as_ids else p for p in prompts]
        check = None
        if as_ids and ("token_ids" not in self.capabilities or self.config.sampling.prompt_format == "text"):
            wire_prompts, check = await asyncio.to_thread(self._to_text, wire_prompts)
        tree: dict[str, Any] = {
            "prompts": wire_prompts,
            "sampling_params": dict(sampling_params or {}),
            "routing_key": routing_key,
            "strict": bool(strict),
        }
        out = await self._op("generate", jid, tree=tree)
        results = out.get("results") if isinstance(out, dict) else None
        if not isinstance(results, list):
            raise ArcticRLError(None, f"the generate result has no results list: {str(out)[:300]}", "/generate")
        if len(results) != len(prompts):
            raise ArcticRLError(None, f"{len(results)} results for {len(prompts)} prompts", "/generate")
        if check is not None:
            self._count_mismatches(check, results, [len(p) for p in prompts])
        return results

    def tokenizer(self):
        """The model's tokenizer (loaded on first use from ``model_name``; only text-prompt generation needs it)."""
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.config.model_name)
        return self._tokenizer

    def _to_text(self, id_prompts: list[list[int]]) -> tuple[list[str], list[bool]]:
        tok = self.tokenizer()
        texts, same = [], []
        for ids in id_prompts:
            text = tok.decode(ids)
            texts.append(text)
            same.append(list(tok.encode(text, add_special_tokens=False)) == ids)
        return texts, same

    def _count_mismatches(self, same: list[bool], results: list[dict], lens: list[int]) -> None:
        st = self.retokenize_stats
        bad = sum(1 for ok, r, n in zip(same, results, lens, strict=True) if not ok or r.get("prompt_len", n) != n)
        st["prompts"] += len(same)
        st["mismatches"] += bad
        if bad:
            logger.warning(
                "generate: %d of %d text prompts do not re-tokenize to their ids (total %d of %d)",
                bad, len(same), st["mismatches"], st["prompts"],
            )  # fmt: skip
        rate = self.config.sampling.max_retokenize_mismatch_rate
        if st["mismatches"] > rate * st["prompts"]:
            raise ArcticRLError(
                None,
                f"{st['mismatches']} of {st['prompts']} prompts sent as text did not re-tokenize to the same ids "
                f"(max_retokenize_mismatch_rate={rate}); the server does not advertise token_ids, so use one that "
                "does, or raise the rate",
                "/generate",
            )

    async def log_probs(
        self, prompts: list[str] | list[list[int]], completions: list | None = None, top_k: int = 1
    ) -> list[dict]:
        """``/log-probs`` on the log_prob job: per-position ``prompt_logprobs`` of prompt + completion."""
        jid = self._need("log_prob", "log_probs")
        body = {"prompts": list(prompts), "completions": completions, "top_k": top_k}
        out = await self._op("log_probs", jid, json_body=body)
        return out["results"]

    # Cortex: the sleep / wake calls are no-ops (its sub-jobs are always awake); empty_training_cache is unavailable.
    async def sleep_training(self, mode: str = "all") -> dict:
        """Offload the training engine (``all`` / ``non_lp`` / ``lp_params``): ``{"job_id", "workers"}``."""
        jid = self._need("training", "sleep_training")
        return await self._op("sleep_training", jid, json_body={"mode": mode})

    async def wake_training(self) -> dict:
        jid = self._need("training", "wake_training")
        return await self._op("wake_training", jid, json_body={})

    async def empty_training_cache(self) -> dict:
        jid = self._need("training", "empty_training_cache")
        return await self._op("empty_training_cache", jid)

    async def sleep_log_prob(self) -> dict:
        jid = self._need("log_prob", "sleep_log_prob")
        return await self._op("sleep_log_prob", jid)

    async def wake_log_prob(self) -> dict:
        jid = self._need("log_prob", "wake_log_prob")
        return await self._op("wake_log_prob", jid)

    async def sync_weights(self, policy_version: int | None = None) -> dict:
        """Copy the training weights into the sampler (and bump or set its version): ``{"policy_version", ...}``.

        Sent as the reference unified client sends it: ``POST /operation`` with ``operation_type="weight-sync"``
        (``policy_version`` in the payload is an extension a reference server ignores). Every /generate that arrives
        after this returns uses the new weights. Cortex: the same envelope with its sub-job ids, without
        ``policy_version`` (SnowAPI's weight-sync has no such field); the reply is the service's.
        """
        tid = self._need("training", "sync_weights")
        sid = self._need("sampling", "sync_weights")
        payload: dict[str, Any] = {"source_sub_job_id": tid, "target_sub_job_ids": [sid]}
        if policy_version is not None:
            payload["policy_version"] = policy_version
        body = {"operation_type": "weight-sync", "sub_job_id": tid, "sub_job_type": "training", "payload": payload}
        return await self._op("sync_weights", tid, json_body=body, idempotent=policy_version is not None)

    async def sleep_inference(self, level: int = 1) -> dict:
        sid = self._need("sampling", "sleep_inference")
        return await self._op("sleep_inference", sid, json_body={"level": level})

    async def wake_inference(self, tags: list[str] | None = None) -> dict:
        sid = self._need("sampling", "wake_inference")
        return await self._op("wake_inference", sid, json_body={"tags": tags})

    async def reset_prefix_cache(self) -> dict:
        """Drop the sampler's prefix cache after the batch in flight (Cortex answers inline, with no request id)."""
        sid = self._need("sampling", "reset_prefix_cache")
        body: dict[str, Any] = {
            "operation_type": "reset-prefix-cache",
            "sub_job_type": "sampling",
            "payload": {"drain": True, "timeout_s": 60.0, "retry_interval_s": 0.1},
        }
        return await self._op("reset_prefix_cache", sid, json_body=body)

    async def weight_norm(self) -> dict:
        """``{"training_norm", "sampling_norm", "training_num_params", "sampling_num_params", "policy_version"}``."""
        tid = self._need("training", "weight_norm")
        sid = self._need("sampling", "weight_norm")
        return await self._op("weight_norm", json_body={"training_job_id": tid, "sampling_job_id": sid})


def _forwarded(name: str) -> property:
    """A read-only property of :class:`ArcticRLClient` that reads the same attribute of its async client."""
    return property(lambda self: getattr(self._client, name), doc=f"As :attr:`AsyncArcticRLClient.{name}`.")


P = ParamSpec("P")
R = TypeVar("R")


def _synced(
    method: Callable[Concatenate[AsyncArcticRLClient, P], Awaitable[R]],
) -> Callable[Concatenate[ArcticRLClient, P], R]:
    """The :class:`ArcticRLClient` method of the coroutine method ``method`` of :class:`AsyncArcticRLClient`: same
    name, parameters and docstring (``inspect.signature`` follows ``__wrapped__``; type checkers read the
    ``ParamSpec``), returning the coroutine's result, run on the sync client's own loop."""
    name = method.__name__

    @functools.wraps(method)
    def call(self: ArcticRLClient, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._run(getattr(self._client, name)(*args, **kwargs))

    call.__qualname__ = f"ArcticRLClient.{name}"
    return call


class ArcticRLClient:
    """Synchronous wrapper of :class:`AsyncArcticRLClient` with the same method names.

    It runs a private event loop in the calling thread, so it must not be used from inside a running event loop
    (use :class:`AsyncArcticRLClient` there) and serves one thread at a time (calls are serialised by a lock).
    """

    def __init__(self, config: ArcticRLClientConfig | dict, *, _client: AsyncArcticRLClient | None = None):
        self._client = _client or AsyncArcticRLClient(config)
        self._loop = asyncio.new_event_loop()
        self._lock = threading.Lock()

    @classmethod
    def from_handle(cls, handle: dict, **overrides: Any) -> ArcticRLClient:
        c = AsyncArcticRLClient.from_handle(handle, **overrides)
        return cls(c.config, _client=c)

    def __repr__(self) -> str:
        return f"ArcticRLClient({self._client!r})"

    def _run(self, coro):
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            coro.close()
            raise RuntimeError(
                "ArcticRLClient (sync) cannot run inside a running event loop; use AsyncArcticRLClient and await it"
            )
        if self._loop.is_closed():
            coro.close()
            raise ArcticRLError(None, "the client is closed", "sync")
        with self._lock:
            return self._loop.run_until_complete(coro)

    config = _forwarded("config")
    url = _forwarded("url")
    training_job_id = _forwarded("training_job_id")
    sampling_job_id = _forwarded("sampling_job_id")
    log_prob_job_id = _forwarded("log_prob_job_id")

    def connect(self) -> ArcticRLClient:
        self._run(self._client.connect())
        return self

    def start(self, *, wait_for: Collection[str] | None = None) -> ArcticRLClient:
        self._run(self._client.start(wait_for=wait_for))
        return self

    def job_body(self, job_type: str) -> dict:
        return self._client.job_body(job_type)

    def adopt_jobs(self) -> None:
        self._client.adopt_jobs()

    def close(self) -> list[str]:
        """:meth:`AsyncArcticRLClient.close` (the jobs that may still be running), then the loop. Idempotent."""
        if self._loop.is_closed():
            return []
        c = self._client
        if c._transport is None:  # never connected: nothing to release
            self._loop.close()
            return []
        try:
            return self._run(self._client.close())
        finally:
            self._loop.close()

    def __enter__(self) -> ArcticRLClient:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def reconnect_handle(self) -> dict:
        return self._client.reconnect_handle()

    # ---- every coroutine method of AsyncArcticRLClient, run to completion on this client's loop ----
    wait_ready = _synced(AsyncArcticRLClient.wait_ready)
    health = _synced(AsyncArcticRLClient.health)
    status = _synced(AsyncArcticRLClient.status)
    job_info = _synced(AsyncArcticRLClient.job_info)
    forward_backward = _synced(AsyncArcticRLClient.forward_backward)
    step = _synced(AsyncArcticRLClient.step)
    profile = _synced(AsyncArcticRLClient.profile)
    forward = _synced(AsyncArcticRLClient.forward)
    save = _synced(AsyncArcticRLClient.save)
    load_checkpoint = _synced(AsyncArcticRLClient.load_checkpoint)
    generate = _synced(AsyncArcticRLClient.generate)
    log_probs = _synced(AsyncArcticRLClient.log_probs)
    sleep_training = _synced(AsyncArcticRLClient.sleep_training)
    wake_training = _synced(AsyncArcticRLClient.wake_training)
    empty_training_cache = _synced(AsyncArcticRLClient.empty_training_cache)
    sleep_log_prob = _synced(AsyncArcticRLClient.sleep_log_prob)
    wake_log_prob = _synced(AsyncArcticRLClient.wake_log_prob)
    sync_weights = _synced(AsyncArcticRLClient.sync_weights)
    sleep_inference = _synced(AsyncArcticRLClient.sleep_inference)
    wake_inference = _synced(AsyncArcticRLClient.wake_inference)
    reset_prefix_cache = _synced(AsyncArcticRLClient.reset_prefix_cache)
    weight_norm = _synced(AsyncArcticRLClient.weight_norm)

    capabilities = _forwarded("capabilities")
    backend_profile = _forwarded("backend_profile")
    retokenize_stats = _forwarded("retokenize_stats")
