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
"""The Snowflake Cortex transport: the client's calls on SnowAPI (:mod:`.snowapi`), their bodies lowered to what
SnowAPI takes (:mod:`.cortex_body`).

* Jobs: one create makes the job and its sub-jobs (their ids are the client's job ids; the parent job is what
  :meth:`CortexTransport.close` cancels); what Cortex has no field for is refused before the create
  (``ArcticRLUnavailableError``, :func:`.cortex_body.cortex_refusals`). SnowAPI reports one state for the job, so
  waiting for some jobs waits for the job.
* Rows: each endpoint row maps to a :data:`.snowapi.CORTEX_ROUTES` route, a no-op (:data:`.snowapi.CORTEX_NOOPS`:
  sub-jobs are always awake) or an error naming cortex (``forward``, ``log_probs``, ``load_checkpoint``, the embedded
  server's extensions).
* Bodies: ``forward_backward`` travels as the ``grpo`` contract (:func:`.cortex_body.forward_backward_frame`) and
  ``processing`` must name verl's PPO loss; ``step`` sends the rate of the LR schedule this transport runs
  (:class:`.cortex_body.CortexSchedule`) as ``learning_rate``; ``save`` takes none of the client's arguments (the
  service keeps checkpoints in its own store); ``generate`` refuses a prompt with no room for an output token and
  checks that log-probs asked for came back; ``sync_weights`` carries no ``policy_version``; ``reset_prefix_cache``
  names its sub-job in the body (the URL names the parent job).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from ...backend_profile import CORTEX
from ...endpoints import endpoint
from ...protocol import JOB_TYPES
from ..config import ArcticRLClientConfig, CortexConfig
from ..errors import ArcticRLError, ArcticRLJobError, ArcticRLUnavailableError
from .base import JobId, Transport
from .snowapi import CORTEX_NOOPS, CORTEX_ROUTES, SnowApi, cortex_unavailable, sub_job_role

logger = logging.getLogger("arctic_platform.client")

HANDLE_CONFIG_FIELDS = ("training", "max_seq_len", "training_gpus", "sampling_gpus", "log_prob_gpus")
"""Config fields a Cortex reconnect handle carries (the client computes with them: schedule, dp_size, prompt check)."""
LOSS_FNS = ("verl_grpo", "verl_ppo", "grpo")
"""``processing.loss_fn`` values the ``grpo`` contract computes (verl's vanilla PPO)."""


class CortexTransport(Transport):
    """The client's calls on a SnowAPI ``cortex-training`` endpoint.

    Args:
        sleep: the coroutine every wait uses (retry backoff, polling); tests pass one that does not sleep.
        handle: the reconnect handle this client was re-attached from (the LR schedule goes on where it stood).
    """

    def __init__(
        self,
        config: ArcticRLClientConfig,
        jobs: dict[str, JobId | None],
        *,
        sleep: Callable[[float], Awaitable[Any]] | None = None,
        handle: dict | None = None,
    ):
        super().__init__(config, jobs)
        self._sleep = sleep
        self.api: SnowApi | None = None
        self.job_id: str | None = None
        """The parent job of the sub-jobs in :attr:`jobs` (every SnowAPI URL names it)."""
        self.schedule = None  # cortex_body.CortexSchedule, when there is a training sub-job
        self._position = (handle or {}).get("lr_schedule_position")

    def __repr__(self) -> str:
        return f"CortexTransport(job={self.job_id!r}, api={self.api!r})"

    @staticmethod
    def config_fields(handle: dict) -> dict[str, Any]:
        """The config fields of a client re-attached from ``handle`` (see :meth:`handle_fields`)."""
        return {
            "backend": CortexConfig.model_validate(handle["cortex"]),
            **{k: handle[k] for k in HANDLE_CONFIG_FIELDS if k in handle},
        }

    def handle_fields(self) -> dict[str, Any]:
        """The backend settings without the PAT (a re-attached client reads it from ``pat_env_var``), the parent
        job id, and what a re-attached client computes with: the training settings (the LR schedule it runs), where
        that schedule stands now (``lr_schedule_position``), the GPU counts (the loss's ``dp_size``) and
        ``max_seq_len`` (the prompt check)."""
        c = self.config
        return {
            "cortex": c.backend.model_dump(mode="json", by_alias=True, exclude={"pat"}),
            "job_id": self.job_id,
            "training": c.training.model_dump(mode="json"),
            "lr_schedule_position": self.schedule.position() if self.schedule is not None else None,
            **{k: getattr(c, k) for k in ("max_seq_len", "training_gpus", "sampling_gpus", "log_prob_gpus")},
        }

    # ---- lifecycle ----
    async def connect(self) -> None:
        c = self.config
        self.api = SnowApi(
            c.backend, request_timeout=c.request_timeout, connect_timeout=c.connect_timeout,
            job_ready_timeout=c.job_ready_timeout, sleep=self._sleep,
        )  # fmt: skip
        # no /health on SnowAPI: the profile is fixed, and so are the capabilities (token-id prompts, spec 6.6)
        self.url = self.api.prefix
        self.capabilities = ("token_ids",)
        self.profile = CORTEX

    async def create_jobs(self, body: Callable[[str], dict], wait_for: Collection[str] | None) -> None:
        from .cortex_body import cortex_refusals, sub_job_configs

        c = self.config
        refusals = cortex_refusals(c)
        if refusals:
            raise ArcticRLUnavailableError(
                None, f"{len(refusals)} setting(s) Snowflake Cortex cannot honour: " + "; ".join(refusals), "start"
            )
        self.job_id = await self.api.create_job(sub_job_configs(c))
        self.owned.append((self.job_id, "job"))
        job = await self.api.wait_running(self.job_id)
        ids = self.api.sub_job_ids(self.job_id, job)
        for jt in JOB_TYPES:
            if c.job_gpus(jt) > 0:
                self.jobs[jt] = ids[jt]
        self._start_schedule()

    async def attach(self, wait_for: Collection[str] | None) -> None:
        given = {jt: str(jid) for jt, jid in self.jobs.items() if jid is not None}
        parents = {jid.split(":", 1)[0] for jid in given.values()}
        if len(parents) != 1:
            raise ArcticRLError(None, f"cortex sub-job ids of more than one job: {given}", "start")
        self.job_id = parents.pop()
        job = await self.api.wait_running(self.job_id)  # still building: waits; terminal: raises with the reason
        ids = self.api.sub_job_ids(self.job_id, job)
        for jt, jid in given.items():
            if ids[jt] != jid:
                raise ArcticRLJobError(
                    None, f"{jid} is not the {jt} sub-job of cortex job {self.job_id} ({ids[jt]})", "start", jid
                )
        self._start_schedule()

    def _start_schedule(self) -> None:
        from .cortex_body import CortexSchedule

        if self.jobs["training"] is not None:
            self.schedule = CortexSchedule(self.config)
            if self._position:
                self.schedule.restore(self._position)

    def adopt(self) -> None:
        self.owned = [(self.job_id, "job")] if self.job_id is not None else []

    async def wait_ready(self, job_types: Collection[str]) -> None:
        if self.job_id is not None and any(self.jobs[jt] is not None for jt in job_types):
            await self.api.wait_running(self.job_id)

    async def job_info(self, job_id: JobId) -> dict:
        """The sub-job's entry in the job's state (its ``status`` and ``job_type`` as the client names them, the
        job's ``reason``)."""
        if self.job_id is None:
            raise ArcticRLError(None, "the client is not started (await client.start())", "job_info")
        job = await self.api.get_job(self.job_id)
        for sub in job.get("sub_jobs") or []:
            if isinstance(sub, dict) and str(sub.get("sub_job_id")) == str(job_id):
                return {**sub, "job_id": str(job_id), "job_type": sub_job_role(sub.get("job_type")),
                        "reason": job.get("reason"), "parent_job_id": self.job_id}  # fmt: skip
        role = next((jt for jt, jid in self.jobs.items() if str(jid) == str(job_id)), None)
        if role is None:
            raise ArcticRLError(404, f"{job_id} is not a sub-job of cortex job {self.job_id}", "job_info")
        # the service lists no sub-jobs: the job's own state stands for them
        return {"job_id": str(job_id), "job_type": role, "status": job.get("status"), "reason": job.get("reason"),
                "parent_job_id": self.job_id}  # fmt: skip

    async def close(self) -> list[str]:
        """Cancel the job this client created (never one it only re-attached to), close the connection."""
        self.closed = True
        errors = []
        if self.api is not None:
            for jid, _ in reversed(self.owned):
                err = await self.api.cancel(jid)
                if err:
                    errors.append(err)
            self.owned.clear()
            await self.api.aclose()
        return errors

    # ---- calls ----
    def check_route(self, name: str) -> None:
        if name not in CORTEX_ROUTES and name not in CORTEX_NOOPS:
            raise cortex_unavailable(name, endpoint(name).path)

    async def call(
        self, name: str, job_id: Any = None, *, json_body: Any = None, tree: Any = None, idempotent: bool | None = None
    ) -> Any:
        row = endpoint(name)
        if name in CORTEX_NOOPS:
            return {}
        route = CORTEX_ROUTES.get(name)
        if route is None:
            raise cortex_unavailable(name, row.path)
        if self.job_id is None:
            raise ArcticRLError(None, "the client is not started (await client.start())", row.path)
        if self.closed:
            raise ArcticRLError(None, "the client is closed", row.path)
        body = tree if tree is not None else json_body
        if name == "forward_backward":
            body = await self._forward_backward_frame(body)
        elif name == "step":
            return await self._step(body)
        elif name == "save":
            body = self._save_body(body)
        elif name == "generate":
            return await self._generate(body)
        elif name == "sync_weights":
            body = {**body, "payload": {k: v for k, v in body["payload"].items() if k != "policy_version"}}
        elif name == "reset_prefix_cache":
            body = {**body, "sub_job_id": job_id}  # SnowAPI routes by the sub-job (the URL names the parent job)
        return await self.api.call(route, self.job_id, body)

    async def _forward_backward_frame(self, tree: dict) -> dict:
        from .cortex_body import forward_backward_frame

        processing = tree.get("processing") or {}
        if processing.get("loss_fn") not in LOSS_FNS:
            raise ArcticRLError(
                None, f"processing.loss_fn={processing.get('loss_fn')!r}: on cortex the loss is grpo (verl's "
                "vanilla PPO)", "/forward-backward",
            )  # fmt: skip
        return await asyncio.to_thread(
            forward_backward_frame, tree["batch"], tree["meta"], dp_size=self.config.training_gpus
        )

    async def _step(self, body: dict) -> dict:
        """Send the schedule's rate (or the caller's ``learning_rate``) as SnowAPI's only step field; the reply is
        the service's (``{"global_steps", "last_lr"}``) with ``lr``, the schedule's rate after this step's tick."""
        from .cortex_body import step_reply

        sched = self.schedule
        if body.get("total_training_steps") is not None:
            sched.set_horizon(int(body["total_training_steps"]))
        lr = float(body["learning_rate"]) if body.get("learning_rate") is not None else sched.rate()
        reply = await self.api.call(CORTEX_ROUTES["step"], self.job_id, {"learning_rate": lr})
        moved = sched.observe(reply.get("global_steps") if isinstance(reply, dict) else None)
        if moved:
            logger.warning(moved)
        ticks = body.get("lr_scheduler_step")  # absent: the step ticks the schedule (the client's default)
        next_lr = sched.tick() if ticks is None or ticks else sched.rate()
        return step_reply(reply, next_lr)

    @staticmethod
    def _save_body(body: dict) -> dict:
        named = [k for k, v in body.items() if v is not None]
        if named:
            raise ArcticRLUnavailableError(
                None, f"save({', '.join(named)}=...): cortex keeps checkpoints in its own store and has no such "
                "field; call save() without arguments", "/save",
            )  # fmt: skip
        return {"checkpoint_type": "resumable"}

    async def _generate(self, tree: dict) -> Any:
        """Token-id prompts travel as ids; one of ``max_seq_len`` tokens or more is refused before sending (no room
        for an output token), as SnowAPI's own client does; log-probs asked for must come back."""
        limit = self.config.max_seq_len
        for i, p in enumerate(tree["prompts"]):
            if not isinstance(p, str) and len(p) >= limit:
                raise ArcticRLError(
                    None, f"prompts[{i}] has {len(p)} tokens: max_seq_len {limit} leaves no room for an output token "
                    "(never truncated)", "/generate",
                )  # fmt: skip
        asked = tree.get("sampling_params") or {}
        body = {k: v for k, v in tree.items() if v is not None}
        body["sampling_params"] = {k: v for k, v in asked.items() if v is not None}
        out = await self.api.call(CORTEX_ROUTES["generate"], self.job_id, body)
        results = out.get("results") if isinstance(out, dict) else None
        if asked.get("logprobs") is not None and isinstance(results, list):
            missing = [i for i, r in enumerate(results) if r.get("logprobs") is None]
            if missing:
                raise ArcticRLError(
                    None, f"sampling_params.logprobs was set but {len(missing)} cortex result(s) carry no logprobs "
                    f"(first: results[{missing[0]}])", "/generate",
                )  # fmt: skip
        return out
