# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""ArcticV1Replica + ArcticV1LLMServer through verl's real LLMServerManager, LLMServerClient and
CheckpointEngineManager (the "remote_backend" short-circuit and its set_global_steps fan-out)."""

import asyncio
import uuid

import pytest
import ray

from verl.checkpoint_engine import CheckpointEngineManager
from verl.workers.config.rollout import CheckpointEngineConfig
from verl.workers.rollout.llm_server import LLMServerManager
from verl.workers.rollout.replica import TokenOutput


@pytest.fixture(scope="module")
def manager(forwarder, arctic_cfg, arctic_backend):
    extras = {"main_config": arctic_cfg, "backend_handle": arctic_backend.reconnect_handle()}
    return LLMServerManager.create(config=arctic_cfg, worker_group=forwarder, replica_init_kwargs=extras)


def _generate(manager, prompt, *, logprobs=True):
    client = manager.get_client()
    params = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": logprobs}
    return asyncio.run(client.generate(request_id=uuid.uuid4().hex, prompt_ids=prompt, sampling_params=params))


def test_unique_addresses_and_server_handles(manager):
    (replica,) = manager.get_replicas()
    assert type(replica).__name__ == "ArcticV1Replica"
    assert manager.get_addresses()[0] and manager.get_addresses()[0].startswith("arctic+http://127.0.0.1:")
    assert replica.rollout_worker_use_gpu() is False


def test_token_output_tagged_with_the_synced_policy_version(manager, forwarder, arctic_cfg):
    ckpt = CheckpointEngineManager(
        config=CheckpointEngineConfig(backend="remote_backend"), actor_wg=forwarder, replicas=manager.get_replicas()
    )
    ckpt.update_weights(global_steps=3)
    out = _generate(manager, [11, 12, 13, 14])
    assert isinstance(out, TokenOutput)
    assert all(isinstance(t, int) for t in out.token_ids) and 1 <= len(out.token_ids) <= 8  # response_length cap
    assert out.log_probs is not None and len(out.log_probs) == len(out.token_ids)
    assert all(lp <= 0 for lp in out.log_probs)
    assert out.stop_reason == "completed"
    assert out.extra_fields["global_steps"] == 3 and type(out.extra_fields["global_steps"]) is int
    # LLMServerClient copies the tag into the min/max fields the trainer's staleness metrics cast to int
    assert out.extra_fields["min_global_steps"] == out.extra_fields["max_global_steps"] == 3
    server = manager.get_replicas()[0]._server_handle
    assert ray.get(server.get_global_steps.remote()) == 3  # fanned out by the manager


def test_no_log_probs_when_not_asked(manager):
    out = _generate(manager, [21, 22], logprobs=False)
    assert out.log_probs is None


def test_rollout_usable_after_sleep_replicas(manager, forwarder):
    ckpt = CheckpointEngineManager(
        config=CheckpointEngineConfig(backend="remote_backend"), actor_wg=forwarder, replicas=manager.get_replicas()
    )
    ckpt.sleep_replicas()  # verl calls this every step and never wakes the replicas
    out = _generate(manager, [31, 32, 33])
    assert len(out.token_ids) >= 1
