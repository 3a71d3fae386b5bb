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
"""Async (one-step off-policy) mode of ``PPOTrainerRemoteBackend`` (arctic-verl).

A remote backend is disaggregated: its sampling job and its training job own different GPUs. In the sync loop each
idles while the other works. In async mode the trainer keeps ``prefetch_batches`` batches of prompts in flight, so
while step k trains (old log-probs, reference, ``update_actor``) the backend's sampler already generates the batch
of step k+1 with the weights of step k-1; after ``update_actor`` the trainer syncs the weights, which become policy
version k.

Configuration (backend-agnostic, read by the trainer; ``remote_backend.async_rollout`` of the Hydra group)::

    remote_backend.async_rollout.enable=true        # default false: the stock sync loop
    remote_backend.async_rollout.max_staleness=1    # policy versions a trajectory may lag the trained policy
    remote_backend.async_rollout.prefetch_batches=null   # batches generated ahead (null = max_staleness)
    remote_backend.async_rollout.drain_timeout_s=120     # shutdown: wait this long for in-flight generation

The staleness bound reuses verl's replay-buffer machinery: ``trainer.v1.sampler.max_off_policy_threshold`` (verl
counts the policy versions a prompt *spans*, so it is set to ``max_staleness + 1``) with verl's
``max_off_policy_strategy`` (``drop`` evicts and refills stale groups, ``wait`` blocks until they finish). The
off-policy correction is verl's own ``algorithm.rollout_correction`` (e.g. ``rollout_is=token``): rollout log-probs
come back from the backend and the loss takes ``rollout_is_weights``.

:class:`StalenessBoundReplayBuffer` is verl's :class:`ReplayBufferAsync` plus two checks verl's async buffer does not
make: every sampled trajectory's *generating* policy version (``min_global_steps``, stamped by the rollout server) is
within ``max_staleness`` of the policy it trains (a violation raises), and a persistent agent-loop failure raises
with the first recorded error instead of refilling forever. It also logs the staleness histogram per step.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any, Optional

from omegaconf import DictConfig

from verl.trainer.ppo.v1.replay_buffer import ReplayBufferAsync

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))

ASYNC_TRAINER_MODE = "remote_backend_async"
"""``trainer.v1.trainer_mode`` the remote-backend trainer pins in async mode (any non-``sync`` mode makes verl's base
trainer save/restore TransferQueue state with checkpoints and fetch prompts one at a time for exact refills)."""

STALENESS_HIST_PREFIX = "training/off_policy/staleness_hist/"


@dataclass(frozen=True)
class AsyncRolloutOptions:
    max_staleness: int = 1
    prefetch_batches: int = 1
    drain_timeout_s: float = 120.0

    @property
    def max_off_policy_threshold(self) -> int:
        """verl's threshold counts spanned versions: a prompt submitted at step j and trained at step k spans
        k - j + 1, and its generating version is >= j - 1, so span <= S + 1 bounds staleness by S."""
        return self.max_staleness + 1


def async_rollout_options(config: DictConfig) -> Optional[AsyncRolloutOptions]:
    """The async options of ``remote_backend.async_rollout``, or None for the (default) sync loop.

    Raises:
        ValueError: a bad value, or a setting async mode cannot honour, naming the key.
    """
    group = config.get("remote_backend", None) or {}
    block = group.get("async_rollout", None) or {}
    if not bool(block.get("enable", False)):
        return None
    prefix = "PPOTrainerRemoteBackend: remote_backend.async_rollout"
    max_staleness = block.get("max_staleness", 1)
    if isinstance(max_staleness, bool) or not isinstance(max_staleness, int) or max_staleness < 1:
        raise ValueError(f"{prefix}.max_staleness must be an integer >= 1, got {max_staleness!r}")
    prefetch = block.get("prefetch_batches", None)
    prefetch = max_staleness if prefetch is None else prefetch
    if isinstance(prefetch, bool) or not isinstance(prefetch, int) or not 1 <= prefetch <= max_staleness:
        raise ValueError(
            f"{prefix}.prefetch_batches must be an integer in [1, max_staleness={max_staleness}] (or null), got "
            f"{prefetch!r}: batches generated further ahead would always exceed the staleness bound"
        )
    drain = float(block.get("drain_timeout_s", 120.0))
    if drain < 0:
        raise ValueError(f"{prefix}.drain_timeout_s must be >= 0, got {drain}")
    sampler = config.trainer.v1.sampler
    custom = sampler.get("custom_sampler", None) or {}
    if custom.get("path") or custom.get("name"):
        raise ValueError(
            f"{prefix}.enable=true uses its own replay buffer (verl's ReplayBufferAsync with the staleness checks); "
            "unset trainer.v1.sampler.custom_sampler"
        )
    if int(config.trainer.v1.get(ASYNC_TRAINER_MODE, {}).get("parameter_sync_step", 1) or 1) != 1:
        raise ValueError(f"{prefix}: one weight sync per step (parameter_sync_step=1) is the only supported cadence")
    return AsyncRolloutOptions(max_staleness=max_staleness, prefetch_batches=prefetch, drain_timeout_s=drain)


def trajectory_staleness(tags: list[dict[str, Any]], global_steps: int) -> list[int]:
    """Per trajectory: versions between its oldest generating policy and the policy it trains (``global_steps - 1``).

    Padding rows and tags without a version (a failed trajectory) are skipped.
    """
    out = []
    for tag in tags:
        if tag.get("is_padding", False) or tag.get("min_global_steps") is None:
            continue
        out.append((global_steps - 1) - int(tag["min_global_steps"]))
    return out


def check_staleness(tags: list[dict[str, Any]], global_steps: int, max_staleness: int) -> dict[str, int]:
    """The staleness histogram of a sampled batch (``{metric: count}``); raises if any trajectory is too stale.

    Raises:
        RuntimeError: a trajectory generated by a policy more than ``max_staleness`` versions old, or one from
            the future (a version the trainer has not synced yet: the backend mis-tagged it).
    """
    staleness = trajectory_staleness(tags, global_steps)
    bad = sorted({s for s in staleness if s > max_staleness or s < 0})
    if bad:
        raise RuntimeError(
            f"async remote backend: step {global_steps} sampled trajectories with staleness {bad} outside "
            f"[0, max_staleness={max_staleness}] (policy version = step - 1 - staleness); the rollout server must tag "
            "each result with the version that produced it (TokenOutput.extra_fields['global_steps'])"
        )
    return {f"{STALENESS_HIST_PREFIX}{s}": n for s, n in sorted(Counter(staleness).items())}


class StalenessBoundReplayBuffer(ReplayBufferAsync):
    """verl's async replay buffer with the trajectory staleness check, its histogram and failure surfacing."""

    def __init__(self, *args, max_staleness: int = 1, max_failed_groups: Optional[int] = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_staleness = int(max_staleness)
        self.max_failed_groups = max_failed_groups
        self._failed_in_sample = 0
        self._failure_limit: Optional[int] = max_failed_groups
        self._first_failure: Optional[str] = None

    def _evict_terminal_groups(self, global_steps, partition_id, eviction_reasons):
        failed_uids = eviction_reasons[2]
        if failed_uids and partition_id != "val":
            self._record_failures(partition_id, failed_uids, global_steps)
        return super()._evict_terminal_groups(global_steps, partition_id, eviction_reasons)

    def _record_failures(self, partition_id: str, failed_uids: set[str], global_steps: int) -> None:
        import transfer_queue as tq

        from verl.trainer.ppo.v1.diagnostics import first_agent_loop_error

        if self._first_failure is None:
            tags = (tq.kv_list(partition_id) or {}).get(partition_id, {})
            self._first_failure = first_agent_loop_error({k: tags[k] for k in failed_uids if k in tags})
        self._failed_in_sample += len(failed_uids)
        limit = self._failure_limit
        if limit is not None and self._failed_in_sample > limit:
            message = (
                f"Async replay buffer: {self._failed_in_sample} prompt groups failed in the agent loop while sampling "
                f"step {global_steps} (more than the {limit} a batch needs); refilling would not end."
            )
            if self._first_failure:
                message += f" First agent-loop error: {self._first_failure}."
            raise RuntimeError(message)

    def sample(self, global_steps: int, partition_id: str, batch_size: int):
        self._failed_in_sample, self._first_failure = 0, None
        self._failure_limit = self.max_failed_groups if self.max_failed_groups is not None else batch_size
        batch, metrics = super().sample(global_steps=global_steps, partition_id=partition_id, batch_size=batch_size)
        if partition_id != "val":
            metrics = dict(metrics)
            metrics.update(check_staleness(batch.tags, global_steps, self.max_staleness))
        return batch, metrics
