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
"""The ``"remote_backend"`` checkpoint engine: a no-op, because the remote backend syncs its own weights.

``CheckpointEngineManager.update_weights`` short-circuits for this backend: it only calls the forwarder's
``update_weights(global_steps=..., mode="remote_backend")`` and fans ``set_global_steps`` out to the replicas.
"""

from typing import Any

from .base import CheckpointEngine, CheckpointEngineRegistry


@CheckpointEngineRegistry.register("remote_backend")
class RemoteBackendCheckpointEngine(CheckpointEngine):
    """Placeholder engine selected by ``PPOTrainerRemoteBackend``; moving weights is the backend's job."""

    def __init__(self, bucket_size: int = 0, is_master: bool = False, **_ignored: Any) -> None:
        self.bucket_size = bucket_size
        self.is_master = is_master

    def prepare(self) -> None:
        return None

    @classmethod
    def build_topology(cls, *args, **kwargs) -> tuple[dict, dict]:
        return {}, {}

    def init_process_group(self, **kwargs) -> None:
        return None

    def finalize(self) -> None:
        return None

    async def send_weights(self, weights, global_steps=None):
        raise NotImplementedError(
            "RemoteBackendCheckpointEngine does not move weights: CheckpointEngineManager.update_weights calls the "
            "remote backend's forwarder instead"
        )

    def receive_weights(self, global_steps=None):
        raise NotImplementedError(
            "RemoteBackendCheckpointEngine does not move weights: the remote backend updates its rollout engine"
        )
