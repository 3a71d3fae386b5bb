# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The GPUs a local server gets (arctic_platform.client.transports.local_server.server_environment): verl's
TaskRunner Ray actor, which asks Ray for no GPU, spawns it; the server must see the node's GPUs, not the empty
CUDA_VISIBLE_DEVICES Ray gives such an actor when RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=1 (Ray 2.60's default keeps the
node's value)."""

import asyncio
import os
import sys

from ray import cloudpickle

from arctic_platform.client.transports.local_server import NODE_DEVICES_ENV, record_node_devices, server_environment

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def test_server_environment_rules():
    node = {NODE_DEVICES_ENV: "4,5,6,7"}
    # a driver, or a Ray worker holding GPUs: its own view
    assert server_environment({"CUDA_VISIBLE_DEVICES": "1"}, {}, ray_gave_no_gpu=False)["CUDA_VISIBLE_DEVICES"] == "1"
    assert "CUDA_VISIBLE_DEVICES" not in server_environment({}, {}, ray_gave_no_gpu=False)
    # a GPU-less Ray worker: what the driver recorded, else the inherited value, except Ray's blank (all GPUs)
    assert server_environment({**node, "CUDA_VISIBLE_DEVICES": ""}, {}, ray_gave_no_gpu=True)[
        "CUDA_VISIBLE_DEVICES"
    ] == ("4,5,6,7")
    assert "CUDA_VISIBLE_DEVICES" not in server_environment({"CUDA_VISIBLE_DEVICES": ""}, {}, ray_gave_no_gpu=True)
    assert (
        server_environment({"CUDA_VISIBLE_DEVICES": "0,1"}, {}, ray_gave_no_gpu=True)["CUDA_VISIBLE_DEVICES"] == "0,1"
    )
    # the user's extra_env wins everywhere
    env = server_environment({**node, "CUDA_VISIBLE_DEVICES": ""}, {"CUDA_VISIBLE_DEVICES": "2"}, ray_gave_no_gpu=True)
    assert env["CUDA_VISIBLE_DEVICES"] == "2"
    recorded = {"CUDA_VISIBLE_DEVICES": "3"}
    record_node_devices(recorded)
    assert recorded[NODE_DEVICES_ENV] == "3"
    unset: dict = {}
    record_node_devices(unset)
    assert unset == {}  # nothing recorded: every GPU of the node


def _spawn_and_ask() -> tuple:
    """Inside the GPU-less actor: the variable Ray left, and the one the spawned server reports in /status."""
    import httpx

    from arctic_platform.client.config import LocalConfig
    from arctic_platform.client.transports.local_server import LocalServer

    inherited = os.environ.get("CUDA_VISIBLE_DEVICES")
    server = LocalServer(
        LocalConfig(startup_timeout=180),
        job_gpus={"training": 0, "sampling": 1, "log_prob": 0},
        max_seq_len=64,
        device="cpu",
    )

    async def run():
        url = await server.start()
        try:
            for _ in range(600):  # the port file is written when the socket is bound; /status answers right after
                try:
                    return httpx.get(f"{url}/status", timeout=30, trust_env=False).json()
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
        finally:
            await server.stop()

    status = asyncio.run(run())
    return inherited, status["server"]["cuda_visible_devices"]


class TaskRunnerLike:
    def spawn(self):
        return _spawn_and_ask()


def test_a_server_spawned_by_a_gpu_less_ray_actor_sees_the_nodes_gpus(monkeypatch):
    """Fake GPU resources: Ray with 8 GPUs on this CPU host, the node's CUDA_VISIBLE_DEVICES recorded as the plugin's
    preflight records it, and Ray told to blank the variable of a worker that asked for none."""
    import ray

    node = "3,2,1,0,7,6,5,4"  # not Ray's own 0..7, so a value that came from Ray would show
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", node)
    monkeypatch.setenv("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "1")
    monkeypatch.delenv(NODE_DEVICES_ENV, raising=False)
    recorded: dict = dict(os.environ)
    record_node_devices(recorded)  # what ArcticRemoteBackend.preflight does in main_ppo before Ray starts
    monkeypatch.setenv(NODE_DEVICES_ENV, recorded[NODE_DEVICES_ENV])
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, num_gpus=8, include_dashboard=False, log_to_driver=False)
    try:
        task_runner = (
            ray.remote(TaskRunnerLike).options(num_gpus=0).remote()
        )  # verl's TaskRunner asks for no GPU either
        inherited, seen = ray.get(task_runner.spawn.remote(), timeout=300)
        assert ray.cluster_resources().get("GPU") == 8
    finally:
        ray.shutdown()
    assert inherited == "", "premise: Ray blanked the GPU-less worker's CUDA_VISIBLE_DEVICES"
    assert seen == node
