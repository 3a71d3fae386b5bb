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
"""``PPOTrainerRemoteBackend``: the V1 sync trainer with all model work delegated to a :class:`RemoteBackend`.

Selected by the Hydra group choice ``remote_backend=<name>`` (which sets ``trainer.v1.trainer_mode=remote_backend``)
or by ``trainer.remote_backend=<name>`` with that mode. verl keeps the control loop (TransferQueue, agent loop,
reward, advantages, metrics, checkpoint cadence); the backend's forwarder worker runs in a CPU-only resource pool,
its rollout replica serves generation, and the ``"remote_backend"`` checkpoint engine is a no-op.

API of upstream verl PR #7102, with arctic-verl's fixes (see ``docs/architecture.md``):

* LoRA + reference policy: the forwarder replaces the worker class of the role the base trainer mapped.
* Only the forwarder's pool is CPU-only; reward-model and teacher pools keep their GPUs; a critic (GAE) or a
  reward model colocated in the forwarder's pool is rejected at start-up.
* A rollout parallel size that yields zero replicas fails at start-up naming the settings.
* The backend is destroyed when ``__init__``, ``init()`` or ``fit()`` fails, not only after ``fit()``.
* Throughput metrics are normalised by the backend's GPU count (optional ``num_gpus()``), not the forwarder count.

``remote_backend.async_rollout.enable=true`` selects the async (one-step off-policy) mode, where the backend samples
the next step's batch while the current one trains; see :mod:`verl.trainer.ppo.v1.remote_backend_async`. The
default is the sync loop, unchanged.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import time
from typing import Any, Optional

import ray
from omegaconf import DictConfig, OmegaConf, open_dict

from verl.remote_backend import RemoteBackend, RemoteBackendRegistry
from verl.trainer.ppo.utils import Role, need_critic
from verl.trainer.ppo.v1.remote_backend_async import (
    ASYNC_TRAINER_MODE,
    AsyncRolloutOptions,
    StalenessBoundReplayBuffer,
    async_rollout_options,
)
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils.debug import marked_timer
from verl.utils.import_utils import import_external_libs
from verl.workers.rollout.replica import RolloutReplicaRegistry

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))

FORWARDER_ROLES = (Role.ActorRolloutRef, Role.ActorRollout, Role.Actor)


def _run_awaitable(result: Any) -> Any:
    """Run a coroutine/awaitable returned by a plugin's ``destroy()`` to completion from sync code."""

    async def _wait():
        return await result

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_wait())
    # Called from inside a running loop (unusual for the trainer): finish it on a private loop in a thread.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, _wait()).result()


def validate_remote_backend_config(config: DictConfig) -> None:
    """Reject configurations the remote-backend trainer cannot honour, before any backend is created.

    Raises:
        ValueError: a critic-based estimator, a reward model colocated in the forwarder's CPU-only pool, or a
            rollout parallel size that leaves zero rollout replicas for the forwarder.
    """
    if need_critic(config):
        raise ValueError(
            f"algorithm.adv_estimator={config.algorithm.adv_estimator}: PPOTrainerRemoteBackend runs no critic (it "
            "would run in the forwarder's CPU-only resource pool; remote backends own no critic), and this estimator "
            "needs one; use a critic-free estimator such as algorithm.adv_estimator=grpo"
        )
    reward_model = config.reward.reward_model
    if reward_model.get("enable", False) and not reward_model.get("enable_resource_pool", False):
        raise ValueError(
            "reward.reward_model.enable=True, reward.reward_model.enable_resource_pool=False: PPOTrainerRemoteBackend "
            "would colocate the reward model in the forwarder's CPU-only pool; set reward.reward_model."
            "enable_resource_pool=True (it keeps its GPUs) or use a rule-based reward"
        )
    rollout = config.actor_rollout_ref.rollout
    tp, dp, pp = (
        rollout.tensor_model_parallel_size,
        rollout.data_parallel_size,
        rollout.pipeline_model_parallel_size,
    )
    world_size = config.trainer.n_gpus_per_node * config.trainer.nnodes
    if world_size // _workers_per_replica(rollout, tp * dp * pp) < 1:
        raise ValueError(
            f"PPOTrainerRemoteBackend: rollout world size {tp * dp * pp} (actor_rollout_ref.rollout."
            f"tensor_model_parallel_size={tp} x data_parallel_size={dp} x pipeline_model_parallel_size={pp}) exceeds "
            f"the {world_size} forwarder worker(s) (trainer.n_gpus_per_node x trainer.nnodes), which leaves zero "
            "rollout replicas. Set each of the three to 1: the remote backend sizes its own engines"
        )


def _workers_per_replica(rollout: DictConfig, world_size: int) -> int:
    """Forwarder workers one rollout replica spans: the registered replica class decides (a plugin replica that
    forwards to a backend placing its own engines spans one); TP x DP x PP for a name no replica is registered as
    (LLMServerManager then fails with the registry's own error), or none."""
    name = OmegaConf.select(rollout, "name", default=None)  # None when unset (mandatory, checked later)
    try:
        replica_cls = RolloutReplicaRegistry.get(name)
    except (ValueError, ImportError):
        return world_size
    return replica_cls.workers_per_replica(rollout, world_size)


class RemoteBackendConfigError(ValueError):
    """Every problem :func:`check_remote_backend_config` found, one line each; ``errors`` keeps the exceptions they
    came from (a backend's own error type, with whatever structure it carries)."""

    def __init__(self, lines: list[str], errors: list[BaseException]):
        super().__init__("\n".join(lines))
        self.lines, self.errors = lines, errors


def check_remote_backend_config(config: DictConfig, backend_check: Optional[Any] = None) -> None:
    """``main_ppo``'s check of a remote-backend run before Ray starts (``compose_check`` runs this same function, so
    the two agree): the trainer mode, :func:`validate_remote_backend_config`, verl's ``validate_config`` (which
    ``main_ppo`` runs next anyway), and the backend's own start-up check
    (:meth:`RemoteBackend.check_config`). Every problem at once, one line
    each (``<setting>: <who> <why>; <way out>``). Nothing to check without ``trainer.remote_backend``.

    Args:
        config: the whole trainer config.
        backend_check: the backend's check to run instead of its ``check_config`` (a dry run against another
            profile).

    Raises:
        RemoteBackendConfigError: the lines (a ``ValueError``).
    """
    name = config.trainer.get("remote_backend", None)
    if not name:
        return
    problems: list[str] = []
    errors: list[BaseException] = []
    mode = config.trainer.v1.get("trainer_mode", None)
    if not config.trainer.use_v1:
        problems.append(
            f"trainer.use_v1={config.trainer.use_v1}: remote_backend={name} runs on verl's V1 trainer only (the legacy "
            "trainer would train on verl's own GPU workers and never touch the backend); set trainer.use_v1=true"
        )
    if mode != "remote_backend":
        why = (
            f"the stock {mode} trainer would train on verl's own GPU workers and never touch the backend"
            if mode != "sync"
            else "trainer.remote_backend alone does not select the remote-backend trainer"
        )
        problems.append(
            f"trainer.v1.trainer_mode={mode}: remote_backend={name} runs with trainer.v1.trainer_mode=remote_backend "
            f"only ({why}); drop the override (the remote_backend=<name> choice selects the mode; "
            "remote_backend.async_rollout.enable=true overlaps sampling with training)"
        )
    try:
        validate_remote_backend_config(config)
    except ValueError as e:
        problems.append(str(e))
        errors.append(e)
    try:  # verl's own validation, which main_ppo runs next: its refusal belongs in the same try
        from verl.trainer.ppo.utils import need_reference_policy
        from verl.utils.config import validate_config

        validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    except Exception as e:  # an assert, a ValueError, a dataclass verl cannot build: verl's own words
        problems.append(f"verl's validate_config (stock verl refuses it too): {' '.join(str(e).split())}")
        errors.append(e)
    import_external_libs((config.get("remote_backend", None) or {}).get("custom_backend_module", None))
    try:
        check = backend_check or RemoteBackendRegistry.get(name).check_config
    except Exception as e:  # not registered: the registry's message names the plugin mechanism
        problems.append(f"trainer.remote_backend={name}: {e}")
        errors.append(e)
    else:
        try:
            check(config)
        except ValueError as e:
            problems.append(str(e))
            errors.append(e)
    if problems:
        raise RemoteBackendConfigError(problems, errors)


def prestart_remote_backend(config: DictConfig) -> None:
    """``main_ppo``'s call, after :func:`check_remote_backend_config` and before Ray starts: the backend's
    :meth:`RemoteBackend.prestart` (its slow start overlaps Ray's and the TaskRunner's). Nothing without
    ``trainer.remote_backend``."""
    name = config.trainer.get("remote_backend", None)
    if name:
        RemoteBackendRegistry.get(name).prestart(config)


@register_trainer("remote_backend")
class PPOTrainerRemoteBackend(PPOTrainerSync):
    """Sync V1 trainer whose actor, reference, rollout and weight sync live in a remote backend."""

    def __init__(self, config: DictConfig):
        self._backend: Optional[RemoteBackend] = None
        # 1. backend name: trainer.remote_backend wins, else the Hydra group's `name`.
        name = config.trainer.get("remote_backend", None)
        if not name:
            name = (config.get("remote_backend", None) or {}).get("name", None)
            if not name:
                raise ValueError(
                    "PPOTrainerRemoteBackend requires either trainer.remote_backend=<name> or a remote_backend=<name> "
                    "Hydra group choice"
                )
            with open_dict(config.trainer):
                config.trainer.remote_backend = name
        self._backend_name: str = name

        # 2. plugin modules named in the config register their backend before it is looked up.
        import_external_libs(config.actor_rollout_ref.rollout.checkpoint_engine.get("custom_backend_module", None))
        import_external_libs((config.get("remote_backend", None) or {}).get("custom_backend_module", None))

        # 3. the loop itself is the stock sync one (sync ReplayBuffer, v1.sync options), unless async mode is on:
        # then a non-sync mode (async replay buffer, TransferQueue checkpointing) with verl's staleness threshold.
        self._async: Optional[AsyncRolloutOptions] = async_rollout_options(config)
        with open_dict(config.trainer.v1):
            config.trainer.v1.trainer_mode = ASYNC_TRAINER_MODE if self._async else "sync"
        if self._async:
            with open_dict(config.trainer.v1.sampler):
                config.trainer.v1.sampler.max_off_policy_threshold = self._async.max_off_policy_threshold
            if not (config.algorithm.get("rollout_correction", None) or {}).get("rollout_is"):
                logger.warning(
                    "remote_backend.async_rollout: trajectories are up to "
                    f"{self._async.max_staleness} policy version(s) old and algorithm.rollout_correction.rollout_is "
                    "is null, so the loss has no importance-sampling correction; consider rollout_is=token"
                )

        # Bad configurations fail here, before a backend (and its GPUs) exists.
        validate_remote_backend_config(config)

        # 4. create the backend; from here on every failure tears it down again.
        self._backend = RemoteBackendRegistry.get(name).from_config(config)
        try:
            self._backend_handle: dict[str, Any] = self._backend.reconnect_handle()
            self._warned_throughput = False
            super().__init__(config)
        except BaseException:
            self._destroy_backend()
            raise

    # ------------------------------------------------------------------ hooks of PPOTrainer

    def _checkpoint_engine_backend(self) -> str:
        return "remote_backend"

    def _actor_rollout_wg_extra_kwargs(self) -> dict:
        return {"main_config": self.config, "backend_handle": self._backend_handle}

    def _llm_server_replica_init_kwargs(self) -> dict:
        return {"main_config": self.config, "backend_handle": self._backend_handle}

    def _init_resource_pool_mgr(self):
        super()._init_resource_pool_mgr()
        name = self._backend_name
        worker_cls = RemoteBackendRegistry.get_worker(name)
        if worker_cls is None:
            raise RuntimeError(
                f"Remote backend '{name}' did not register an ActorRollout forwarder worker "
                f"(RemoteBackendRegistry.register_worker('{name}', loader))"
            )
        # Replace the worker class of whichever actor role the base trainer mapped (never add a role: with
        # LoRA the reference policy lives in the actor, and the base maps ActorRollout, not ActorRolloutRef).
        role = next((r for r in FORWARDER_ROLES if r in self.role_worker_mapping), None)
        if role is None:
            raise ValueError(
                f"PPOTrainerRemoteBackend: the base trainer mapped none of {[str(r) for r in FORWARDER_ROLES]}; "
                f"got {[str(r) for r in self.role_worker_mapping]}"
            )
        self.role_worker_mapping[role] = ray.remote(worker_cls)
        # Only the forwarder's pool is CPU-only; reward-model and teacher pools keep their GPUs.
        self.resource_pool_manager.set_pool_use_gpu(self.mapping[role], False)
        n_forwarders = self.config.trainer.n_gpus_per_node * self.config.trainer.nnodes
        if self._backend.requires_single_forwarder() and n_forwarders != 1:
            raise AssertionError(
                f"Backend '{name}' requires a single forwarder worker: set trainer.n_gpus_per_node=1 and "
                f"trainer.nnodes=1 (got {self.config.trainer.n_gpus_per_node} x {self.config.trainer.nnodes}); "
                "the backend owns its own parallelism"
            )

    def _build_replay_buffer(self):
        if not self._async:
            return super()._build_replay_buffer()
        sampler = self.config.trainer.v1.sampler
        return StalenessBoundReplayBuffer(
            trainer_mode=self.trainer_mode,
            trainer_config=self.config.trainer.v1.get(self.trainer_mode, {}),
            max_off_policy_threshold=self._async.max_off_policy_threshold,
            max_off_policy_strategy=sampler.max_off_policy_strategy,
            sampler_kwargs=sampler.sampler_kwargs,
            refill_fn=self._add_prompts_to_generate,
            filter_groups_metric=self._resolve_filter_groups_metric(),
            sync_refill_failed_groups=bool(sampler.get("sync_refill_failed_groups", False)),
            poll_interval=float(sampler.get("poll_interval", 2.0)),
            max_staleness=self._async.max_staleness,
        )

    # ------------------------------------------------------------------ async mode (PPOTrainer hooks)

    def on_train_begin(self):
        super().on_train_begin()
        if self._async:
            # the prefetch window; restored TransferQueue prompts (resume) count towards it
            remaining = self.total_training_steps - self.global_steps + 1
            self._add_async_warmup_batches(min(self._async.prefetch_batches, max(0, remaining)))

    def prepare_step(self) -> dict:
        # async: the batch submitted at step k is trained at step k + prefetch; none is submitted for steps past
        # the end, so the last steps do not generate batches that would only be drained and thrown away
        if self._async and self.global_steps + self._async.prefetch_batches > self.total_training_steps:
            return {}
        return super().prepare_step()

    def on_sample_end(self):
        if not self._async:
            return super().on_sample_end()
        # async: the sampler keeps generating the next batch while this one trains (no sleep_replicas)
        if self.curr_step_profile:
            self._stop_rollout_profiling()

    def on_step_end(self):
        # both modes: the trained weights become policy version `global_steps`; the backend applies them between
        # generate requests (a sequence is never generated by two versions) and tags each result with its version
        with marked_timer("update_weights", self.timing_raw, color="red"):
            self.checkpoint_manager.update_weights(self.global_steps)

    def _drain_rollouts(self) -> int:
        """Wait (bounded) until no training prompt is still generating; returns how many were left in flight."""
        import transfer_queue as tq

        def inflight() -> int:
            items = (tq.kv_list("train") or {}).get("train", {})
            return sum(
                1 for t in items.values() if t.get("is_prompt", False) and t.get("status") in ("pending", "running")
            )

        first = left = inflight()
        timeout = self._async.drain_timeout_s
        if first:  # said before the wait, so a long shutdown is explained while it happens
            logger.info(
                f"async remote backend: waiting up to {timeout:g}s for {first} in-flight prompt group(s) "
                "before destroying the backend"
            )
        deadline = time.monotonic() + timeout
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = inflight()
        if first:
            tail = f"; {left} still generating after {timeout:g}s" if left else ""
            logger.info(f"async remote backend: drained {first - left} in-flight prompt group(s) at shutdown{tail}")
        return left

    def _get_n_gpus_for_throughput(self) -> int:
        num_gpus = getattr(self._backend, "num_gpus", None)
        if callable(num_gpus):
            return max(1, int(num_gpus()))
        if not self._warned_throughput:
            logger.warning(
                f"Remote backend '{self._backend_name}' reports no num_gpus(); perf/throughput is per forwarder"
            )
            self._warned_throughput = True
        return 1

    # ------------------------------------------------------------------ lifecycle

    def init(self):
        try:
            super().init()
        except BaseException:
            self._destroy_backend()
            raise

    def fit(self, agent_loop_manager):
        try:
            result = super().fit(agent_loop_manager)
            if self._async:  # clean shutdown: no generate request is cut off by the backend's teardown
                self._drain_rollouts()
            return result
        finally:
            self._destroy_backend()

    def _destroy_backend(self) -> None:
        """Destroy the backend once (idempotent); an awaitable result is run to completion; errors are logged."""
        backend, self._backend = getattr(self, "_backend", None), None
        if backend is None:
            return
        try:
            result = backend.destroy()
            if inspect.isawaitable(result):
                _run_awaitable(result)
        except Exception:
            logger.exception(f"Destroying remote backend '{self._backend_name}' failed")
