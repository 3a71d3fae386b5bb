# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""arctic_platform.client.config: validation, transports, Cortex from_env, and secrets kept out of reprs."""

from __future__ import annotations

import json
import sys

import pytest
from pydantic import ValidationError

from arctic_platform.client import (
    ArcticRLClientConfig,
    CortexConfig,
    LocalConfig,
    OnPremConfig,
)
from arctic_platform.ds_config import read_ds_config
from arctic_platform.protocol import JobConfig


def test_defaults_and_job_bodies(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    c = ArcticRLClientConfig(model_name=str(model), seed=7, training={"checkpoint_path": "ckpt"})
    assert isinstance(c.backend, LocalConfig) and c.backend.port == 0 and c.backend.host == "127.0.0.1"
    assert c.backend.python == sys.executable and not c.reconnecting
    t = c.job_config("training")
    assert t["job_type"] == "training" and t["seed"] == 7 and t["checkpoint_path"].endswith("/ckpt")
    # reference JobConfig names only: optimizer settings in ds_config (the reference adapter's shape)
    assert set(t) <= set(JobConfig.model_fields), set(t) - set(JobConfig.model_fields)
    opt = {"lr": 1e-6, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}
    assert t["ds_config"]["optimizer"] == {"type": "AdamW", "params": opt}
    assert t["ds_config"]["gradient_clipping"] == 1.0 and "scheduler" not in t["ds_config"]
    assert read_ds_config(t["ds_config"]) == {**opt, "betas": (0.9, 0.999), "grad_clip": 1.0}  # round trip
    assert t["extensions"] == {"device": "auto", "max_seq_len": 8192, "lr_schedule": {}}  # a constant rate
    s = c.job_config("sampling")
    assert s["vllm_config"]["max_model_len"] == 8192 and "arctic_inference_config" not in s
    lp = c.job_config("log_prob")  # a DeepSpeed log_prob job on a reference server (vLLM has no /forward)
    assert lp["ds_config"] == t["ds_config"] and lp["log_prob_config"] == {"sequence_parallel_size": 1}
    assert "optimizer" not in lp["log_prob_config"] and "checkpoint_path" not in lp
    json.dumps([t, s])  # plain JSON bodies
    schedule = {"lr_scheduler_type": "cosine", "total_training_steps": 10, "lr_warmup_steps": 2}
    cos = ArcticRLClientConfig(model_name="m", training={"lr_schedule": schedule}).job_config("training")
    assert read_ds_config(cos["ds_config"])["lr_scheduler_type"] == "cosine"
    assert read_ds_config(cos["ds_config"])["total_steps"] == 10
    assert cos["extensions"]["lr_schedule"] == schedule  # the same spec, for a server with verl's schedule
    old = ArcticRLClientConfig(model_name="m", sampling={"engine_kwargs": {"max_num_seqs": 4}})  # the old name
    assert old.sampling.vllm_config == {"max_num_seqs": 4}


@pytest.mark.parametrize(
    "backend, match",
    [
        ({"type": "ray"}, "does not match any of the expected tags"),
        ({"type": "onprem", "url": "http://x", "protocol": "ray"}, "protocol"),
        ({"type": "remote", "protocol": "cortex"}, "expected tags"),
        ({"type": "local", "launch_local_server": True}, "Extra inputs are not permitted"),
    ],
    ids=["ray-type", "ray-protocol", "reference-remote", "unknown-field"],
)
def test_unsupported_transports_are_rejected(backend, match):
    with pytest.raises(ValidationError, match=match):
        ArcticRLClientConfig(model_name="m", backend=backend)


def test_other_validation():
    with pytest.raises(ValidationError, match="Extra inputs"):
        ArcticRLClientConfig(model_name="m", sampling_engine="vllm")
    with pytest.raises(ValidationError, match="Extra inputs"):
        ArcticRLClientConfig(model_name="m", training={"lr_scheduler_type": "cosine"})  # the spec is lr_schedule
    with pytest.raises(ValidationError, match="at least one"):
        ArcticRLClientConfig(model_name="m", training_gpus=0, sampling_gpus=0, log_prob_gpus=0)
    c = ArcticRLClientConfig(model_name="m", training_gpus=0, sampling_gpus=0, log_prob_gpus=0, sampling_job_id="3")
    assert c.reconnecting


def test_onprem_token_is_an_env_var_name(monkeypatch):
    monkeypatch.setenv("ARL_TOKEN_FOR_TEST", "very-secret-value")
    c = ArcticRLClientConfig(
        model_name="m", backend=OnPremConfig(url="http://h:7000", token_env_var="ARL_TOKEN_FOR_TEST")
    )
    assert "very-secret-value" not in repr(c) and "very-secret-value" not in c.model_dump_json()


def test_cortex_from_env_with_a_fake_environment():
    # Snowflake Cortex is unreachable here: a fake environment mapping stands in for the real one.
    env = {
        "ARCTIC_CORTEX_HOST": "acct.region.snowflakecomputing.com",
        "ARCTIC_CORTEX_PAT_ENV_VAR": "MY_PAT",
        "ARCTIC_CORTEX_DATABASE": "DB",
        "ARCTIC_CORTEX_SCHEMA": "SCH",
        "ARCTIC_CORTEX_ENDPOINT": "",  # empty values are ignored
        "ARCTIC_CORTEX_BASE_URL": "",
        "MY_PAT": "pat-value-123",
    }
    c = CortexConfig.from_env(env)
    assert (c.host, c.pat_env_var, c.database, c.schema_, c.endpoint) == (
        "acct.region.snowflakecomputing.com",
        "MY_PAT",
        "DB",
        "SCH",
        "cortex-training",
    )
    assert c.base_url is None and c.resolve_pat(env) == "pat-value-123"
    over = CortexConfig.from_env(env, schema="OTHER", endpoint="ep", pat="inline-pat-456")
    assert (over.schema_, over.endpoint) == ("OTHER", "ep")  # explicit overrides win
    assert "inline-pat-456" not in repr(over) and "inline-pat-456" not in str(over.model_dump())
    assert over.resolve_pat(env) == "inline-pat-456"
    with pytest.raises(ValidationError, match="base_url or host"):
        CortexConfig.from_env({})
    with pytest.raises(ValidationError, match="database and schema"):
        CortexConfig.from_env({"ARCTIC_CORTEX_HOST": "h"})
    assert CortexConfig.from_env({"ARCTIC_CORTEX_BASE_URL": "http://mock"}).base_url == "http://mock"
    cfg = ArcticRLClientConfig(model_name="m", backend=c)
    assert cfg.backend.type == "cortex"


@pytest.mark.parametrize(
    "sent,seen",
    [
        ("cancelled", "cancelled"),
        ("canceled", "cancelled"),  # both spellings reach the client; one name inside it
        ("JOB_STATE_CANCELED", "cancelled"),
        ("REQUEST_STATE_RUNNING", "running"),
        (" Terminated ", "terminated"),
        (None, ""),
    ],
)
def test_job_states_are_normalized_to_one_spelling(sent, seen):
    from arctic_platform.client.client import TERMINAL_STATES, normalize_state

    assert normalize_state(sent) == seen
    assert set(TERMINAL_STATES) == {"failed", "terminated", "done", "cancelled"}
