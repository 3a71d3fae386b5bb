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
"""The verl V1 "arctic" plugin: remote backend adapter, forwarder worker, rollout replica and server.

| File | Role |
|---|---|
| ``register.py`` | registrations only (``verl.plugins`` entry point): backend, lazy worker/replica loaders, Hydra |
| ``adapter.py`` | the ``arctic`` ``RemoteBackend``: verl config -> Arctic RL client config, jobs, start-up checks |
| ``options.py`` | the plugin's own options typed (``remote_backend.*``, mirrors arctic.yaml); composition |
| ``verl_config.py`` | verl's settings through verl's config dataclasses; the optimizer / LR schedule the backend runs |
| ``refusal.py`` | the one form of a start-up refusal (``<setting>=<value>: <backend> <why>; <way out>``) |
| ``settings/`` | every verl setting per backend profile (model, checks, table, render: docs/settings.md) |
| ``node.py`` | the rollout TP / replicas and job sizes against the sampler and GPUs the backend has (start-up) |
| ``node_plan.py`` | the H200 launcher's split of a node and the memory per GPU, from the model's config |
| ``compose_check.py``, ``probe.py`` | the dry run before Ray starts; ``arctic-verl probe`` against a live backend |
| ``v1/worker.py`` | ``ArcticV1ActorRolloutRefWorker``: the CPU forwarder (log-probs, updates, weight sync, ckpts) |
| ``v1/replica.py`` | ``ArcticV1Replica``: ``RolloutReplica`` whose server forwards ``generate`` to the backend |
| ``v1/server.py`` | ``ArcticV1LLMServer``: the Ray actor serving ``generate`` -> ``TokenOutput`` |
| ``config/remote_backend/arctic.yaml`` | the ``remote_backend=arctic`` Hydra group entry (defaults documented) |
| ``tasks/`` | task code of the shipped runs: the smoke's data set + reward, ``prepare-gsm8k`` |
| ``examples/`` | launch scripts only (the H200 GSM8K launcher) |
"""

# Import verl first, so that importing any module of this package (say the adapter) before verl cannot cut the
# verl.plugins entry point's registration short with a circular import (verl logs that failure only at DEBUG).
import verl  # noqa: E402,F401
