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
"""``ArcticV1Replica``: the ``RolloutReplica`` registered as ``actor_rollout_ref.rollout.name=arctic``.

Constructed by ``LLMServerManager`` with ``main_config`` and ``backend_handle`` (``replica_init_kwargs`` of the
remote-backend trainer). ``launch_servers`` starts one :class:`ArcticV1LLMServer` Ray actor with default resources
(no GPU) and a unique address; ``set_global_steps`` forwards the policy version to it.
"""

from __future__ import annotations

import uuid
from typing import Any, Optional

import ray
from omegaconf import DictConfig

from verl.workers.rollout.replica import RolloutReplica

from .server import ArcticV1LLMServer


class ArcticV1Replica(RolloutReplica):
    def __init__(
        self,
        *args: Any,
        main_config: Optional[DictConfig] = None,
        backend_handle: Optional[dict[str, Any]] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        if main_config is None or backend_handle is None:
            raise ValueError(
                "ArcticV1Replica needs main_config and backend_handle (LLMServerManager.replica_init_kwargs); run it "
                "with remote_backend=arctic, which selects PPOTrainerRemoteBackend"
            )
        self.main_config = main_config
        self.backend_handle = dict(backend_handle)

    @classmethod
    def workers_per_replica(cls, config, world_size: int) -> int:
        """One forwarder worker per replica at any rollout TP x DP x PP: the backend's sampling job runs the rollout's
        tensor parallelism in its own engines (``remote_backend.arctic.sampling_gpus`` / TP replicas)."""
        return 1

    def rollout_worker_use_gpu(self) -> bool:
        return False

    async def launch_servers(self):
        unique = f"{self.replica_rank}{self.name_suffix}_{uuid.uuid4().hex[:8]}"
        server = (
            ray.remote(ArcticV1LLMServer)
            .options(name=f"arctic_rollout_server_{unique}", max_concurrency=self.max_concurrency, num_cpus=0)
            .remote(self.main_config, self.backend_handle, self.replica_rank)
        )
        self._server_handle = server
        self.servers = [server]
        url = self.backend_handle.get("url", "arctic")
        job = self.backend_handle.get("sampling_job_id")
        self._server_address = f"arctic+{url}/sampling/{job}/replica-{unique}"

    async def set_global_steps(self, global_steps: int) -> None:
        await self._server_handle.set_global_steps.remote(global_steps)
