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
"""The protocol's vocabulary (docs/arctic-rl-protocol.md): job types and their creation order, job states and the
client-side state normalisation, the GPU counts a job asks for, the capabilities the embedded server advertises, batch
keys and processing names, and the loss-mode / agg-mode / KL-type lists with the optimizer defaults."""

from __future__ import annotations

from typing import Any, Literal, get_args

# ------------------------------------------------------------------------------------------------
# jobs and states (docs/arctic-rl-protocol.md §2)
# ------------------------------------------------------------------------------------------------

JobType = Literal["training", "sampling", "log_prob"]
"""A job type (request models: :data:`JobTypeName`, which refuses another value with 400 naming the types)."""
JOB_TYPES: tuple[JobType, ...] = get_args(JobType)
"""The job types in the server's order (placement, ``/status``, flags)."""
JOB_CREATE_ORDER: tuple[JobType, ...] = ("sampling", "log_prob", "training")
"""Creation order; destruction runs in reverse."""


def job_gpu_counts(source: Any) -> dict[str, int]:
    """Job type -> GPUs (0: no such job), read from ``source``'s ``<job type>_gpus`` fields: the server's
    ``--training-gpus`` / ``--sampling-gpus`` / ``--log-prob-gpus`` flags, its ``ServerLimits``, the client config."""
    return {t: int(getattr(source, f"{t}_gpus")) for t in JOB_TYPES}


DEFAULT_JOB_GPUS = 1
"""A job's GPUs (CPU workers) when nothing says: ``--training-gpus`` / ``--sampling-gpus`` / ``--log-prob-gpus``, the
client's and the plugin's ``*_gpus`` (Arctic-Platform's defaults too)."""

LOG_PROB_DEVICES = ("own", "training")
"""Where the log_prob (reference) job runs: ``own`` GPUs after the other jobs', or the ``training`` job's GPUs (a
sharded forward-only copy beside the training shards, used between the training job's phases, as stock verl
colocates its reference): server ``--log-prob-devices``, client and plugin ``log_prob_devices``."""


def distinct_gpus(source: Any) -> int:
    """The GPUs ``source``'s jobs occupy together: the sum of :func:`job_gpu_counts`, less the log_prob job's when it
    runs on the training job's GPUs (``log_prob_devices == "training"``)."""
    counts = job_gpu_counts(source)
    shared = getattr(source, "log_prob_devices", "own") == "training"
    return sum(counts.values()) - (counts["log_prob"] if shared else 0)


def gpus_flag(job_type: str) -> str:
    """The server flag of a job type's GPU count: ``--training-gpus``, ``--sampling-gpus``, ``--log-prob-gpus``."""
    return "--" + job_type.replace("_", "-") + "-gpus"


DEFAULT_MAX_SEQ_LEN = 8192
"""Prompt + response limit of a job when nothing else says (server ``--max-seq-len``, client ``max_seq_len``)."""


class JobStatus:
    """``job_info.status`` values, spelt as the reference server reports them (its client waits for ``RUNNING``)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    FAILED = "FAILED"
    TERMINATED = "TERMINATED"


LIVE_STATES = (JobStatus.PENDING, JobStatus.RUNNING)
TERMINAL_STATES = ("failed", "terminated", "done", "cancelled")  # after normalize_state (which maps "canceled")
"""Normalised (lower-case) states after which a client stops waiting (Cortex's states included)."""


def normalize_state(state: Any) -> str:
    """Lower case, without a ``job_state_`` / ``request_state_`` prefix, so ``RUNNING`` == ``running``, and one
    spelling of cancelled: servers send both ``cancelled`` and ``canceled``."""
    s = str(state or "").strip().lower()
    for prefix in ("job_state_", "request_state_"):
        if s.startswith(prefix):
            s = s[len(prefix) :]
    return "cancelled" if s == "canceled" else s


CAPABILITIES = (
    "token_ids",
    "policy_version",
    "rollout_logprobs",
    "job_states",
    "verl_losses",
    "lr_schedule",
    "lora",
    "profile",
)
"""What ``GET /health`` advertises beyond the reference's ``{"status": "OK"}`` (extension):

* ``token_ids``: ``/generate`` and ``/log-probs`` accept ``prompts: list[list[int]]`` and ``token_ids`` in results
  are exactly the generated ids (no decode / re-tokenize round trip).
* ``policy_version``: generate results, weight syncs and job infos carry the policy version.
* ``rollout_logprobs``: ``sampling_params.logprobs`` is honoured (sampled token's log-prob at the sampling T).
* ``job_states``: ``/initialize`` may return while the job is ``PENDING``; failures become ``FAILED`` + ``reason``.
* ``verl_losses``: ``/forward-backward`` computes verl's actor loss with verl's own functions for every
  ``policy_loss.loss_mode`` in :data:`LOSS_MODES`, micro-batched as the actor config says (fixed rows or a token
  budget), with verl's metric names and reductions.
* ``lr_schedule``: ``extensions.lr_schedule`` (verl's schedule keys) and ``/step`` ``lr_scheduler_step`` /
  ``total_training_steps``: verl's LR schedule, ticked once per training step.
* ``lora``: ``extensions.lora``: a peft LoRA adapter trains; syncs and HF exports carry merged weights.
* ``profile``: ``POST /profile`` starts / stops a torch profiler on the training job.
"""

# ------------------------------------------------------------------------------------------------
# batch keys and processing names (§4)
# ------------------------------------------------------------------------------------------------

RESPONSE_FIELDS = ("response_mask", "old_log_probs", "advantages", "ref_log_prob", "rollout_is_weights", "loss_mask")
"""Response-aligned batch tensors: ``[b, R]`` or left-padded ``[b, P+R]`` on the wire."""
RESPONSE_PAD_VALUES = {
    "response_mask": 0,
    "old_log_probs": 0.0,
    "advantages": 0.0,
    "ref_log_prob": 0.0,
    "rollout_is_weights": 1.0,
    "loss_mask": 0,
}
"""Right-padding value of each response-aligned tensor (IS weights pad with a neutral 1.0)."""
UPDATE_PROCESSING = {"post": ["apply_temperature", "compute_entropy_and_logprobs"], "loss_fn": "verl_grpo"}
FORWARD_PROCESSING = {"post": ["apply_temperature", "compute_entropy_and_logprobs"], "loss_fn": None}
ALLOWED_POST = ("apply_temperature", "compute_entropy_and_logprobs")
ALLOWED_LOSS_FNS = (None, "verl_grpo", "verl_ppo", "vanilla")

# ------------------------------------------------------------------------------------------------
# loss vocabulary (§6)
# ------------------------------------------------------------------------------------------------

LOSS_MODES = (
    "bypass_mode",
    "cispo",
    "clip_cov",
    "dppo_kl",
    "dppo_tv",
    "dro",
    "geo_mean",
    "gpg",
    "gspo",
    "kl_cov",
    "sapo",
    "vanilla",
)
"""``policy_loss.loss_mode`` values the embedded server computes: every name in verl 0.9.1's ``POLICY_LOSS_REGISTRY``
(the server calls ``get_policy_loss_fn``; a test holds this torch-free copy equal to the registry)."""
AGG_MODES = ("token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
KL_BASE_TYPES = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3")
KL_TYPES = KL_BASE_TYPES + tuple(k + "+" for k in KL_BASE_TYPES)
"""A ``+`` suffix is the straight-through variant (forward value of the base, gradient of k2)."""

DEFAULT_SEED = 42
"""A job's seed when its config names none (the reference's)."""
DEFAULT_LR = 1e-6
"""Peak learning rate of a training job when nothing names one (verl's actor default)."""
DEFAULT_BETAS = (0.9, 0.999)
DEFAULT_EPS = 1e-8
DEFAULT_WEIGHT_DECAY = 0.01
"""Decoupled (AdamW) weight decay (verl's default)."""
DEFAULT_GRAD_CLIP = 1.0
"""Max global grad norm (verl's actor ``grad_clip``)."""
