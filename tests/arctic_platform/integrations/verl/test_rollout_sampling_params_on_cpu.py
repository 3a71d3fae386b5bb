# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The rollout server's translation of verl's sampling params to the backend's ``/generate`` params
(``arctic_platform.integrations.verl.v1.server.to_backend_sampling_params``): vLLM's penalties and ``min_p`` reach
the backend (issue 20; both sampling engines apply them: tests/arctic_platform/server/, sampling conformance)."""

import pytest

from arctic_platform.integrations.verl.v1.server import to_backend_sampling_params

BASE = {"temperature": 0.9, "top_p": 0.8, "top_k": -1, "logprobs": True}


@pytest.mark.parametrize(
    "key,value",
    [("repetition_penalty", 1.3), ("presence_penalty", 0.5), ("frequency_penalty", -0.4), ("min_p", 0.05)],
)
def test_each_penalty_and_min_p_is_forwarded(key, value):
    out = to_backend_sampling_params({**BASE, key: value}, max_tokens=16)
    assert out[key] == value
    assert out["temperature"] == 0.9 and out["top_p"] == 0.8 and out["top_k"] == 0 and out["logprobs"] == 0
    assert out["max_tokens"] == 16
    assert key not in to_backend_sampling_params(BASE, max_tokens=16)  # absent stays absent (the server's default)


def test_verls_neutral_repetition_penalty_is_sent_as_is():
    # verl's agent loop always sends repetition_penalty=1.0; the backend treats 1.0 as off, like vLLM
    assert to_backend_sampling_params({**BASE, "repetition_penalty": 1.0}, max_tokens=4)["repetition_penalty"] == 1.0
