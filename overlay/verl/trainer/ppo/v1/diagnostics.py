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
"""Fail-fast checks and error carriers for the V1 loop (arctic-verl; bodies of small patches to 0.9.1).

* :func:`check_ray_cpus_for_transfer_queue`: before ``tq.init`` creates its actors, compare the logical CPUs they
  and the worker placement groups hold with what Ray has, instead of hanging with no message.
* :func:`describe_agent_loop_error` / :func:`first_agent_loop_error`: the agent loop records the first exception
  of a failed prompt group in its TransferQueue tag, and the replay buffer quotes it in its final error.
* :func:`check_failed_groups`: the same for a batch that leaves failed groups out (validation's, or a sync
  training step's), which verl did without a word.
"""

from __future__ import annotations

from typing import Any, Optional

from omegaconf import DictConfig

# ResourcePoolManager.max_colocate_count: logical CPUs in each worker bundle (one bundle per GPU slot).
CPUS_PER_WORKER_BUNDLE = 3
# A default-resource actor (agent loop, reward, rollout server, load balancer) needs one free CPU to be scheduled.
FREE_CPUS_FOR_DEFAULT_ACTORS = 1
MAX_ERROR_CHARS = 500


def ray_cpu_demand(config: DictConfig) -> dict[str, int]:
    """Logical CPUs held by TransferQueue's actors and the trainer's worker bundles, plus one free CPU."""
    backend = config.transfer_queue.get("backend", {}) or {}
    storage_units = 0
    if backend.get("storage_backend", "SimpleStorage") == "SimpleStorage":
        storage_units = int((backend.get("SimpleStorage", {}) or {}).get("num_data_storage_units", 0))
    slots = config.trainer.n_gpus_per_node * config.trainer.nnodes
    reward_model = config.reward.reward_model
    if reward_model.get("enable_resource_pool", False):
        slots += reward_model.n_gpus_per_node * reward_model.nnodes
    distillation = config.get("distillation", None)
    if distillation is not None and distillation.get("enabled", False):
        slots += distillation.n_gpus_per_node * distillation.nnodes
    demand = {
        "transfer_queue_controller": 1,
        "transfer_queue_storage_units": storage_units,
        "worker_bundles": CPUS_PER_WORKER_BUNDLE * slots,
        "free_for_default_actors": FREE_CPUS_FOR_DEFAULT_ACTORS,
    }
    demand["total"] = sum(demand.values())
    return demand


def check_ray_cpus_for_transfer_queue(config: DictConfig, available_cpus: Optional[float] = None) -> dict[str, int]:
    """Raise a one-line ``RuntimeError`` when Ray cannot schedule TransferQueue and the worker bundles.

    Args:
        config: the trainer config.
        available_cpus: defaults to ``ray.available_resources()["CPU"]`` (Ray must be initialised).

    Returns:
        The demand breakdown (see :func:`ray_cpu_demand`).
    """
    demand = ray_cpu_demand(config)
    if available_cpus is None:
        import ray

        available_cpus = ray.available_resources().get("CPU", 0.0)
    if available_cpus < demand["total"]:
        raise RuntimeError(
            f"Ray has {available_cpus:g} logical CPUs available but needs {demand['total']}: TransferQueue holds "
            f"{demand['transfer_queue_controller'] + demand['transfer_queue_storage_units']} (1 controller + "
            f"{demand['transfer_queue_storage_units']} storage units), the worker bundles "
            f"{demand['worker_bundles']}, and 1 must stay free; raise ray_kwargs.ray_init.num_cpus (logical CPUs "
            "are accounting only) or lower transfer_queue.backend.SimpleStorage.num_data_storage_units"
        )
    return demand


def describe_agent_loop_error(error: BaseException) -> str:
    """``"<Type>: <message>"``, one line, bounded, for a TransferQueue tag.

    A Ray task error is unwrapped to the exception raised inside the remote call (its ``cause``), whose message is
    what names the problem; the Ray wrapper's text starts with a traceback.
    """
    seen = set()
    while isinstance(getattr(error, "cause", None), BaseException) and id(error) not in seen:
        seen.add(id(error))
        error = error.cause
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def first_agent_loop_error(partition_tags: dict[str, dict[str, Any]]) -> Optional[str]:
    """The first recorded agent-loop error among the failed prompt groups of one partition, with its uid."""
    for key, tag in partition_tags.items():
        if tag.get("is_prompt", False) and tag.get("status") == "failure" and tag.get("error"):
            return f"{tag['error']} (uid={key})"
    return None


def check_failed_groups(
    partition_id: str, selected_prompt_uids: list[str], trajectories: dict[str, dict[str, Any]]
) -> Optional[str]:
    """What a batch about to be materialized lost to the agent loop (called by the replay buffer, patch 0017).

    verl's replay buffer materializes the trajectories of the selected prompt groups; a group whose agent loop
    failed has none and is left out without a word: a validation batch's metrics then cover fewer prompts, a sync
    training step (``trainer.v1.sampler.sync_refill_failed_groups`` off, the default) trains on fewer groups, and a
    validation batch whose every group failed ended the run with TransferQueue's "Received an empty list as keys".
    (A training batch whose every group failed is the sync buffer's own RuntimeError; the async buffer evicts and
    refills failed groups, so none reaches this point.)

    Args:
        partition_id: ``train`` or ``val``.
        selected_prompt_uids: the prompt groups selected for the batch.
        trajectories: the partition's trajectory keys (``<uid>_<index>``) with their tags.

    Returns:
        ``None`` when every selected group has trajectories, else a warning line: how many failed, the first
        agent-loop error (from the prompt tags in TransferQueue), what the batch keeps.

    Raises:
        RuntimeError: every group of a validation batch failed (nothing to validate on); it quotes the first error.
    """
    materialized = {key.split("_")[0] for key in trajectories}
    failed = [uid for uid in selected_prompt_uids if uid not in materialized]
    if not failed:
        return None
    import transfer_queue as tq

    tags = (tq.kv_list(partition_id) or {}).get(partition_id, {})
    what = "Validation" if partition_id == "val" else "Training"
    message = f"{what}: {len(failed)} of {len(selected_prompt_uids)} prompt groups failed in the agent loop"
    first_error = first_agent_loop_error({uid: tags[uid] for uid in failed if uid in tags})
    if first_error:
        message += f"; first agent-loop error: {first_error}"
    kept = len(selected_prompt_uids) - len(failed)
    if partition_id == "val":
        if not kept:
            raise RuntimeError(f"{message}; no validation metric can be computed.")
        return f"{message}; the validation metrics of this batch leave them out."
    return (
        f"{message}; the batch keeps the other {kept} (trainer.v1.sampler.sync_refill_failed_groups=true replaces "
        "failed groups)."
    )
