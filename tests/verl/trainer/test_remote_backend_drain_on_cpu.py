# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The two V1 paths that read TransferQueue's prompt tags, against a real TransferQueue (controller + one SimpleStorage
unit as Ray actors on a local CPU Ray, shared by the module): the async remote-backend trainer's shutdown drain,
``PPOTrainerRemoteBackend._drain_rollouts``, and the replay buffers' batches with failed prompt groups (patch 0017:
quoted, not left out without a word or, for validation, ended in TransferQueue's "empty list as keys").

``fit`` calls the drain after the last step and before it destroys the backend; it reads nothing but TransferQueue's
``train`` partition and ``self._async`` (an :class:`AsyncRolloutOptions`). Building a whole trainer needs a dataset,
worker groups and a backend, so the method is called on a minimal object carrying only ``_async``: the code under
test is the installed trainer's method itself.

The prompt tags are written as verl writes them: the trainer puts ``{"is_prompt": True, "status": "pending"}`` per
prompt group, the agent loop tags it ``running`` and then ``finished`` / ``failure``, and trajectories are keys
without ``is_prompt``. The "agent loop" here is a thread that flips the tags once the drain has said it is waiting
(its INFO line before the wait), so the order is fixed without sleeps.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import types

import pytest

LOGGER = "verl.trainer.ppo.v1.trainer_remote_backend"


@pytest.fixture(scope="module")
def tq(ray_cpu):
    import transfer_queue as tq
    from omegaconf import OmegaConf

    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1, "total_storage_size": 64}}}))
    yield tq
    tq.close()


def _emptied_after(tq, partition_id: str):
    """Yields ``tq``, then clears every key of ``partition_id`` (the body of the per-test partition fixtures)."""
    yield tq
    keys = list((tq.kv_list(partition_id) or {}).get(partition_id, {}))
    if keys:
        tq.kv_clear(keys=keys, partition_id=partition_id)


@pytest.fixture
def train_partition(tq):
    """The ``train`` partition, emptied after each test."""
    yield from _emptied_after(tq, "train")


class _Lines(logging.Handler):
    """Collects the trainer logger's messages; ``waiting`` is set when the drain announces its wait."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.messages: list[str] = []
        self.waiting = threading.Event()

    def emit(self, record):
        msg = record.getMessage()
        self.messages.append(msg)
        if msg.startswith("async remote backend: waiting up to"):
            self.waiting.set()


@contextlib.contextmanager
def _collecting(logger_name: str, level: int = logging.INFO):
    """A :class:`_Lines` handler on ``logger_name`` for the duration of the block."""
    logger, h = logging.getLogger(logger_name), _Lines()
    h.setLevel(level)
    logger.addHandler(h)
    try:
        yield h
    finally:
        logger.removeHandler(h)


@pytest.fixture
def lines():
    with _collecting(LOGGER) as h:
        yield h


def _drain(timeout_s: float) -> int:
    from verl.trainer.ppo.v1.remote_backend_async import AsyncRolloutOptions
    from verl.trainer.ppo.v1.trainer_remote_backend import PPOTrainerRemoteBackend

    trainer = types.SimpleNamespace(_async=AsyncRolloutOptions(drain_timeout_s=timeout_s))
    return PPOTrainerRemoteBackend._drain_rollouts(trainer)


def _prompt(status: str) -> dict:
    return {"is_prompt": True, "status": status, "global_steps": 3}


def test_drain_with_nothing_in_flight_returns_at_once_and_says_nothing(train_partition, lines):
    assert _drain(timeout_s=120) == 0  # an empty (never written) train partition
    train_partition.kv_batch_put(keys=["d0"], partition_id="train", tags=[_prompt("finished")])
    assert _drain(timeout_s=120) == 0
    assert lines.messages == []


def test_drain_waits_until_the_agent_loop_finishes_every_prompt_group(train_partition, lines):
    tq = train_partition
    inflight = ["u0", "u1", "u2", "u3"]
    tq.kv_batch_put(keys=inflight, partition_id="train", tags=[_prompt("running")] * 3 + [_prompt("pending")])
    # neither counts: a group that already finished, and a trajectory (no is_prompt) whose tag says running
    tq.kv_batch_put(keys=["u9", "u0_0"], partition_id="train", tags=[_prompt("finished"), {"status": "running"}])

    flipped = threading.Event()

    def agent_loop():
        assert lines.waiting.wait(120), "the drain never announced its wait"
        for i, uid in enumerate(inflight):  # one group at a time, as sessions settle; one of them fails
            tq.kv_put(key=uid, partition_id="train", tag={"status": "failure" if i == 2 else "finished"})
        flipped.set()

    t = threading.Thread(target=agent_loop, daemon=True)
    t.start()
    left = _drain(timeout_s=120)
    t.join(120)

    assert flipped.is_set(), "the agent-loop thread did not finish its puts"
    assert left == 0
    assert lines.messages == [
        "async remote backend: waiting up to 120s for 4 in-flight prompt group(s) before destroying the backend",
        "async remote backend: drained 4 in-flight prompt group(s) at shutdown",
    ]
    tags = tq.kv_list("train")["train"]
    assert {k: tags[k]["status"] for k in inflight} == {
        "u0": "finished",
        "u1": "finished",
        "u2": "failure",
        "u3": "finished",
    }
    assert tags["u0"]["is_prompt"] is True, "a status-only put must keep the trainer's prompt tag"


def test_drain_gives_up_after_its_timeout_and_returns_what_is_still_generating(train_partition, lines):
    tq = train_partition
    tags = [_prompt("running"), _prompt("pending"), _prompt("finished")]
    tq.kv_batch_put(keys=["s0", "s1", "s2"], partition_id="train", tags=tags)
    left = _drain(timeout_s=0.5)
    assert left == 2
    assert lines.messages == [
        "async remote backend: waiting up to 0.5s for 2 in-flight prompt group(s) before destroying the backend",
        "async remote backend: drained 0 in-flight prompt group(s) at shutdown; 2 still generating after 0.5s",
    ]


# ---------------------------------------------------------------------------------------------------------------
# Batches with failed prompt groups (patch 0017 + diagnostics.check_failed_groups), sync and async buffers
# ---------------------------------------------------------------------------------------------------------------

TOP_P = "ArcticRLError: /generate failed (422): top_p: Input should be less than or equal to 1"


@pytest.fixture
def val_partition(tq):
    """The ``val`` partition, emptied after each test."""
    yield from _emptied_after(tq, "val")


@pytest.fixture
def warnings_of_the_replay_buffer():
    with _collecting("verl.trainer.ppo.v1.replay_buffer", logging.WARNING) as h:
        yield h.messages


def _replay_buffer(kind: str):
    """The sync trainer's buffer (verl's ``ReplayBuffer``) or the async remote backend's (its subclass of verl's
    ``ReplayBufferAsync``), as the trainers build them for a run without off-policy control."""
    from omegaconf import OmegaConf

    from verl.trainer.ppo.v1.remote_backend_async import StalenessBoundReplayBuffer
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    cls = ReplayBuffer if kind == "sync" else StalenessBoundReplayBuffer
    return cls(kind, OmegaConf.create({}), None, "drop", OmegaConf.create({}), poll_interval=0.01)


def _put_groups(tq, groups: dict[str, list[str]], partition_id: str = "val") -> None:
    """Prompt groups as the agent loop leaves them: a finished group with its trajectory keys, a failed one (empty
    list) with its error in the tag and no trajectory."""
    keys, tags = [], []
    for uid, trajectories in groups.items():
        tag = {"is_prompt": True, "global_steps": 0, "status": "finished" if trajectories else "failure"}
        if not trajectories:
            tag["error"] = TOP_P
        keys += [uid, *trajectories]
        tags += [tag, *[{"status": "finished", "global_steps": 0}] * len(trajectories)]
    tq.kv_batch_put(keys=keys, partition_id=partition_id, tags=tags)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_validation_keeps_the_finished_groups_and_says_how_many_failed_and_why(
    kind, val_partition, warnings_of_the_replay_buffer
):
    _put_groups(val_partition, {"v0": ["v0_0", "v0_1"], "v1": [], "v2": ["v2_0"]})
    batch, _ = _replay_buffer(kind).sample(global_steps=0, partition_id="val", batch_size=3)
    assert sorted(batch.keys) == ["v0_0", "v0_1", "v2_0"]
    assert warnings_of_the_replay_buffer == [
        f"Validation: 1 of 3 prompt groups failed in the agent loop; first agent-loop error: {TOP_P} (uid=v1); "
        "the validation metrics of this batch leave them out."
    ]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_validation_whose_every_group_failed_ends_with_the_first_agent_loop_error(
    kind, val_partition, warnings_of_the_replay_buffer
):
    _put_groups(val_partition, {"w0": [], "w1": []})
    with pytest.raises(RuntimeError) as exc:
        _replay_buffer(kind).sample(global_steps=0, partition_id="val", batch_size=2)
    message = str(exc.value)
    assert message.startswith("Validation: 2 of 2 prompt groups failed in the agent loop; first agent-loop error: ")
    assert f"{TOP_P} (uid=w" in message and message.endswith("; no validation metric can be computed.")
    assert warnings_of_the_replay_buffer == []


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_validation_without_failures_says_nothing(kind, val_partition, warnings_of_the_replay_buffer):
    _put_groups(val_partition, {"x0": ["x0_0"], "x1": ["x1_0", "x1_1"]})
    batch, _ = _replay_buffer(kind).sample(global_steps=0, partition_id="val", batch_size=2)
    assert sorted(batch.keys) == ["x0_0", "x1_0", "x1_1"]
    assert warnings_of_the_replay_buffer == []


def test_a_sync_training_step_keeps_the_finished_groups_and_says_how_many_failed_and_why(
    train_partition, warnings_of_the_replay_buffer
):
    """verl's sync buffer (sync_refill_failed_groups off, its default) trains on the groups that finished; it now
    says what it left out, and a step whose every group failed keeps its RuntimeError (quoting the first error)."""
    _put_groups(train_partition, {"t0": ["t0_0"], "t1": [], "t2": ["t2_0", "t2_1"], "t3": []}, "train")
    batch, _ = _replay_buffer("sync").sample(global_steps=1, partition_id="train", batch_size=4)
    assert sorted(batch.keys) == ["t0_0", "t2_0", "t2_1"]
    (warning,) = warnings_of_the_replay_buffer
    assert warning.startswith(
        f"Training: 2 of 4 prompt groups failed in the agent loop; first agent-loop error: {TOP_P}"
    )
    assert warning.endswith(
        "; the batch keeps the other 2 (trainer.v1.sampler.sync_refill_failed_groups=true replaces failed groups)."
    )

    _put_groups(train_partition, {"f0": []}, "train")
    with pytest.raises(RuntimeError, match=r"no materializable trajectories\. First agent-loop error: ArcticRLError"):
        _replay_buffer("sync").sample(global_steps=2, partition_id="train", batch_size=1)
