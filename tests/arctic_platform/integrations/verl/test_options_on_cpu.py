# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The plugin's own options are one typed model that mirrors ``config/remote_backend/arctic.yaml`` key for key and
default for default, and refuses a bad value by its full key, with its default as the way out."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from arctic_platform.integrations.verl.options import DEFAULTS_YAML, RemoteBackendOptions, read_options


def test_the_typed_options_mirror_arctic_yaml():
    yaml = OmegaConf.to_container(OmegaConf.load(DEFAULTS_YAML), resolve=True)
    # Hydra's defaults list: the verl fork's keys Arctic-Platform's scripts pass, merged into the root config
    assert yaml.pop("defaults") == ["/arctic_compat/verl_fork@_global_", "_self_"]
    assert RemoteBackendOptions().model_dump() == yaml  # every key, every default, nothing more


@pytest.mark.parametrize(
    "user, line, fix",
    [
        (
            {"train": {"deepspeed": {"zero_optimization": {"stage": "three"}}}},
            "remote_backend.arctic.train.deepspeed.zero_optimization.stage='three': the arctic backend needs a valid "
            "integer",
            "remote_backend.arctic.train.deepspeed.zero_optimization.stage=3",
        ),
        (
            {"backend": {"type": "ray"}},
            "remote_backend.arctic.backend.type='ray': the arctic backend needs 'local', 'onprem' or 'cortex'",
            "remote_backend.arctic.backend.type=local",
        ),
        (
            {"log_prob_gpus": -1},
            "remote_backend.arctic.log_prob_gpus=-1: the arctic backend needs greater than or equal to 0",
            "remote_backend.arctic.log_prob_gpus=1",
        ),
        ({"trian": {}}, "remote_backend.arctic.trian={}: the arctic backend has no such option", None),
    ],
)
def test_a_bad_option_is_refused_by_its_full_key(user, line, fix):
    opts, refusals = read_options(OmegaConf.create({"remote_backend": {"arctic": user}}))
    assert len(refusals) == 1 and refusals[0].startswith(line), refusals
    assert refusals[0].fix == ((fix,) if fix else ())
    assert opts == type(opts)()  # the bad value gave way to its default: the other checks still run


def test_several_bad_options_are_refused_at_once():
    user = {"sampling": {"coalesce_window_ms": -1, "max_prompts_per_request": 0}, "timeouts": {"request": 0}}
    _, refusals = read_options(OmegaConf.create({"remote_backend": {"arctic": user}}))
    assert sorted(r.setting.split("=")[0] for r in refusals) == [
        "remote_backend.arctic.sampling.coalesce_window_ms",
        "remote_backend.arctic.sampling.max_prompts_per_request",
        "remote_backend.arctic.timeouts.request",
    ]
