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
"""``ArcticV1LLMServer``: the rollout server actor whose ``generate`` runs on the backend's sampling job.

verl's agent loop calls ``generate(request_id, prompt_ids, sampling_params, ...)`` with token ids and expects a
``TokenOutput``; this server forwards the ids unchanged to a backend that advertises the ``token_ids`` capability
(else the client sends the decoded text and checks the round trip), returns the sampled ids, their
log-probs when ``sampling_params["logprobs"]`` is set, and tags the output with the policy version that produced it
(``extra_fields["global_steps"]``, an int). It stays usable across verl's ``sleep()`` calls: verl's sync loop sleeps
the replicas every step and never wakes them, so the control methods are no-ops and weights are synced by the
forwarder's ``update_weights``.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from omegaconf import DictConfig

from arctic_platform.client.client import sampled_logprobs
from arctic_platform.client.coalesce import GenerateCoalescer
from verl.workers.rollout.replica import TokenOutput

logger = logging.getLogger(__name__)

STOP_REASONS = {"abort": "aborted", "stop": "completed", "length": "completed"}


def to_backend_sampling_params(sampling_params: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """verl's sampling params -> the Arctic RL ``/generate`` ones (verl sends no max_tokens)."""
    params = {
        "temperature": float(sampling_params.get("temperature", 1.0)),
        "top_p": float(sampling_params.get("top_p", 1.0)),
        "top_k": int(sampling_params.get("top_k", -1) or -1),
        "max_tokens": int(sampling_params.get("max_tokens") or max_tokens),
        "logprobs": 0 if sampling_params.get("logprobs") else None,
    }
    if params["top_k"] < 0:
        params["top_k"] = 0  # disabled
    # vLLM's penalties and min-p, as verl's vLLM rollout passes them on; both sampling engines apply them
    for key in ("seed", "stop_token_ids", "repetition_penalty", "presence_penalty", "frequency_penalty", "min_p"):
        if sampling_params.get(key) is not None:
            params[key] = sampling_params[key]
    return params


class ArcticV1LLMServer:
    """Ray actor (created by :class:`ArcticV1Replica`); all methods are async so requests run concurrently."""

    def __init__(self, main_config: DictConfig, backend_handle: dict[str, Any], replica_rank: int = 0):
        from arctic_platform.integrations.verl.adapter import ArcticRemoteBackend, coalesce_settings
        from arctic_platform.integrations.verl.options import arctic_options, sleeps_between_rollouts

        self.main_config = main_config
        self.replica_rank = replica_rank
        self.backend = ArcticRemoteBackend.from_config(main_config, handle=backend_handle)
        opts = arctic_options(main_config)
        self.max_tokens = int(opts.sampling.max_tokens or main_config.actor_rollout_ref.rollout.response_length)
        self.global_steps: Optional[int] = None
        self.rollout_logprobs = self.backend.profile.rollout_logprobs
        self.colocated = sleeps_between_rollouts(main_config, opts)
        max_prompts, window_s = coalesce_settings(opts)
        self.coalescer = GenerateCoalescer(self._send, max_prompts=max_prompts, window_s=window_s)

    async def _send(self, prompts: list[list[int]], params: dict[str, Any]) -> list[dict]:
        return await (await self.backend.client()).generate(prompts, params)

    async def generate(
        self,
        request_id: str,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        image_data: Optional[list[Any]] = None,
        video_data: Optional[list[Any]] = None,
        **kwargs: Any,
    ) -> TokenOutput:
        if image_data or video_data or kwargs.get("audio_data"):
            raise ValueError("the arctic rollout server is text-only: image/video/audio inputs are not supported")
        params = to_backend_sampling_params(sampling_params, self.max_tokens)
        if not self.rollout_logprobs:
            params["logprobs"] = None  # the backend returns none (start-up note); verl recomputes old log-probs
        result = await self.coalescer.generate_one(list(map(int, prompt_ids)), params)
        version = result.get("policy_version", self.global_steps)
        if version is None:
            raise RuntimeError("the backend returned no policy version and set_global_steps was never called")
        log_probs = sampled_logprobs(result) if params["logprobs"] is not None else None
        reason = result.get("finish_reason")
        return TokenOutput(
            token_ids=list(result["token_ids"]),
            log_probs=list(log_probs) if log_probs is not None else None,
            stop_reason=STOP_REASONS.get(reason, reason),
            extra_fields={"global_steps": int(version)},
        )

    async def set_global_steps(self, global_steps: int) -> None:
        """Record the policy version fanned out after a weight sync (fallback tag if the backend reports none)."""
        self.global_steps = int(global_steps)

    async def get_global_steps(self) -> Optional[int]:
        return self.global_steps

    # verl's replica control methods. verl's sync loop sleeps the replicas after every rollout and never wakes them:
    # the forwarder's update_weights does (staged, on a colocated backend). Otherwise the sampler stays awake.
    async def wake_up(self):
        return None

    async def sleep(self):
        """Colocated backend (``remote_backend.arctic.colocate``) with ``rollout.free_cache_engine``: sleep the
        sampler (level 1: weights offloaded, KV cache dropped) so training gets the GPU memory; else nothing."""
        if self.colocated and self.replica_rank == 0:
            await (await self.backend.client()).sleep_inference(level=1)

    async def abort_all_requests(self, reject_request: bool = False):
        return None

    async def resume_generation(self):
        return None

    async def clear_kv_cache(self):
        await (await self.backend.client()).reset_prefix_cache()

    async def release_kv_cache(self):
        return None

    async def resume_kv_cache(self):
        return None

    async def start_profile(self, **kwargs):
        return None

    async def stop_profile(self):
        return None
