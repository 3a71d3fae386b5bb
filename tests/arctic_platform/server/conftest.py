# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the server tests (the real server itself is ``serve_server`` in the parent conftest)."""

from __future__ import annotations

import time

import pytest


@pytest.fixture
def train_batch() -> dict:
    """A fresh two-row /forward-backward batch for the tiny model: 4 prompt + 4 response columns (left-padded
    prompts, right-padded responses), old log-probs -5.7, advantages +1 / -1 per row."""
    import torch

    p, r = 4, 4
    ids = torch.tensor([[0, 0, 5, 6, 7, 8, 9, 0], [1, 2, 3, 4, 10, 11, 0, 0]])
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 0, 0]])
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "prompts": ids[:, :p],
        "responses": ids[:, p:],
        "response_mask": mask[:, p:],
        "old_log_probs": torch.full((2, r), -5.7),
        "advantages": torch.tensor([[1.0] * r, [-1.0] * r]),
    }


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_process_dead(pid: int, timeout: float = 60) -> bool:
    """Poll until ``pid`` is dead; False if it still runs after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while process_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
