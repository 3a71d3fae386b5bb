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
"""The server's routes by concern: each module has one ``router`` (a FastAPI ``APIRouter``) that
:func:`..app.create_app` includes.

| Module | Routes |
|---|---|
| ``context.py`` | shared: the app context and job lookup as FastAPI dependencies (``Ctx``, ``TrainingJob``, ...) |
| ``bodies.py`` | shared: JSON bodies into protocol models, wire frames in and out |
| ``inference_ops.py`` | shared: sampling sleep / wake / prefix-cache reset (their routes and /operation) |
| ``jobs.py`` | /health, /status, /job/{id}, /initialize, /destroy |
| ``training.py`` | /forward-backward, /forward, /step, /save, /load-checkpoint, sleep / wake of training and log_prob |
| ``sampling.py`` | /generate (via ``..batcher``), /sleep-inference, /wake-inference, /reset-prefix-cache, /log-probs |
| ``admin.py`` | /weight-sync, /weight-norm, /operation, 410 on legacy paths |
"""
