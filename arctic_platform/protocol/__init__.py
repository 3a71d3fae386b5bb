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
"""The one definition of the Arctic RL protocol (docs/arctic-rl-protocol.md), shared by client, server and adapter.

Torch-free (pydantic only), so the verl adapter can import it during ``import verl``. It holds:

* the job types and their creation order, the job status vocabulary (the reference's upper-case strings) and the
  client-side state normalisation;
* the request models of every JSON endpoint, with the reference's field names (``JobConfig``, ``GenerateRequest``,
  ``SaveRequest``, ...); where this project adds a field it is marked "extension";
* the sections of a ``JobConfig`` the embedded server reads, typed (``DsConfig``, ``ReferenceTrainingConfig``,
  ``DsWorkerConfig``, ``Extensions``), refusing what it cannot honour by key path (:func:`first_error`) (the
  ``ds_config`` builder and the readers that turn the sections into training settings are :mod:`.ds_config`);
* the capabilities the embedded server advertises in ``/health`` (extensions: the reference has none);
* batch keys, processing names and the loss-mode / agg-mode / KL-type lists.

| Module | Holds |
|---|---|
| ``vocabulary.py`` | job types, states, GPU counts, capabilities, batch keys, processing names, loss vocabulary |
| ``job_config.py`` | the typed sections of a ``JobConfig`` (DeepSpeed, training, LR schedule, LoRA, extensions) |
| ``requests.py`` | ``JobConfig`` and the request model of every JSON endpoint |

Every public name is importable from this package (``from arctic_platform.protocol import JobConfig``).
"""

from __future__ import annotations

from .job_config import (  # noqa: F401 (re-exported)
    DsConfig,
    DsOptimizer,
    DsOptimizerParams,
    DsPrecision,
    DsScheduler,
    DsSchedulerParams,
    DsWorkerConfig,
    Extensions,
    JobTypeName,
    Lora,
    LrSchedule,
    OptimizerSpec,
    ReferenceTrainingConfig,
    TrainingLrScheduler,
    TrainingOptimizer,
    first_error,
)
from .requests import (  # noqa: F401 (re-exported)
    HARMLESS_SAMPLING_EXTRAS,
    NEUTRAL_SAMPLING_EXTRAS,
    SLEEP_TRAINING_MODES,
    DestroyRequest,
    GenerateRequest,
    JobConfig,
    LoadCheckpointRequest,
    LogProbsRequest,
    OperationRequest,
    ProfileRequest,
    ResetPrefixCacheRequest,
    SamplingParams,
    SaveRequest,
    SleepRequest,
    SleepTrainingRequest,
    StepRequest,
    WeightNormRequest,
    WeightSyncRequest,
)
from .vocabulary import (  # noqa: F401 (re-exported)
    AGG_MODES,
    ALLOWED_LOSS_FNS,
    ALLOWED_POST,
    CAPABILITIES,
    DEFAULT_BETAS,
    DEFAULT_EPS,
    DEFAULT_GRAD_CLIP,
    DEFAULT_JOB_GPUS,
    DEFAULT_LR,
    DEFAULT_MAX_SEQ_LEN,
    DEFAULT_SEED,
    DEFAULT_WEIGHT_DECAY,
    FORWARD_PROCESSING,
    JOB_CREATE_ORDER,
    JOB_TYPES,
    KL_BASE_TYPES,
    KL_TYPES,
    LIVE_STATES,
    LOG_PROB_DEVICES,
    LOSS_MODES,
    RESPONSE_FIELDS,
    RESPONSE_PAD_VALUES,
    TERMINAL_STATES,
    UPDATE_PROCESSING,
    JobStatus,
    JobType,
    distinct_gpus,
    gpus_flag,
    job_gpu_counts,
    normalize_state,
)

__all__ = [
    "AGG_MODES",
    "CAPABILITIES",
    "FORWARD_PROCESSING",
    "DEFAULT_MAX_SEQ_LEN",
    "JOB_CREATE_ORDER",
    "JOB_TYPES",
    "KL_BASE_TYPES",
    "KL_TYPES",
    "LIVE_STATES",
    "LOSS_MODES",
    "RESPONSE_FIELDS",
    "TERMINAL_STATES",
    "UPDATE_PROCESSING",
    "DestroyRequest",
    "DsConfig",
    "DsWorkerConfig",
    "Extensions",
    "GenerateRequest",
    "JobConfig",
    "JobStatus",
    "DEFAULT_JOB_GPUS",
    "JobType",
    "JobTypeName",
    "LOG_PROB_DEVICES",
    "Lora",
    "LrSchedule",
    "OptimizerSpec",
    "ReferenceTrainingConfig",
    "SamplingParams",
    "first_error",
    "distinct_gpus",
    "gpus_flag",
    "job_gpu_counts",
    "normalize_state",
]
