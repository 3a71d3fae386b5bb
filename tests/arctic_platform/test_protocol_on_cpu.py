# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""arctic_platform.protocol: torch-free, one vocabulary, the ds_config builder and reader agree."""

import subprocess
import sys

import pytest

from arctic_platform.protocol import (
    AGG_MODES,
    KL_TYPES,
    TERMINAL_STATES,
    DsConfigError,
    JobStatus,
    build_ds_config,
    normalize_state,
    read_ds_config,
)


def test_importing_the_protocol_loads_no_torch():
    code = "import sys, arctic_platform.protocol; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd="/")


def test_client_needs_neither_torch_nor_verl_and_the_server_imports_verl_only_for_training():
    client = "import sys, arctic_platform.client; assert not {'torch', 'verl'} & set(sys.modules), 'heavy import'"
    subprocess.run([sys.executable, "-c", client], check=True, cwd="/")
    # verl (~2.4 s, ~220 MiB measured) is imported by the training engine's loss and schedule, not at server start
    server = "import sys, arctic_platform.server.app; assert 'verl' not in sys.modules, 'verl imported at start'"
    subprocess.run([sys.executable, "-c", server], check=True, cwd="/")


def test_states_and_vocabularies_are_shared():
    from arctic_platform.backend_profile import ARCTIC_PLATFORM_MAIN
    from arctic_platform.server import loss
    from arctic_platform.server.capabilities import server_profile

    assert normalize_state(JobStatus.RUNNING) == "running" and normalize_state("JOB_STATE_FAILED") == "failed"
    assert normalize_state(JobStatus.TERMINATED) in TERMINAL_STATES
    assert loss.AGG_MODES is AGG_MODES and loss.KL_TYPES is KL_TYPES
    assert server_profile().kl_types == KL_TYPES == ARCTIC_PLATFORM_MAIN.kl_types
    assert server_profile().agg_modes == AGG_MODES


@pytest.mark.parametrize("sched", ["constant", "cosine"])
def test_ds_config_round_trip(sched):
    kw = dict(lr=3e-4, betas=(0.8, 0.95), eps=1e-7, weight_decay=0.0, grad_clip=2.0, warmup_steps=5)
    if sched == "cosine":
        kw.update(lr_scheduler_type="cosine", total_steps=50, min_lr_ratio=0.1)
    got = read_ds_config(build_ds_config(**kw, micro_batch_size=2))
    want = {k: v for k, v in kw.items() if k != "grad_clip"}
    assert got == {**want, "grad_clip": 2.0, "micro_batch_size": 2, "lr_scheduler_type": sched}


@pytest.mark.parametrize(
    "ds, key",
    [
        ({"optimizer": {"type": "SGD"}}, "optimizer.type"),
        ({"optimizer": {"type": "Adam", "params": {"adam_w_mode": False}}}, "optimizer.params.adam_w_mode"),
        ({"scheduler": {"type": "OneCycle", "params": {"warmup_type": "linear"}}}, "scheduler.type"),
        (
            {"scheduler": {"type": "WarmupLR", "params": {"warmup_type": "linear", "warmup_min_lr": 1e-6}}},
            "scheduler.params.warmup_min_lr",
        ),  # fmt: skip
        ({"gradient_clipping": -1}, "gradient_clipping"),
        ({"activation_checkpointing": {}}, "activation_checkpointing"),
    ],
)
def test_ds_config_refusals_name_the_key(ds, key):
    with pytest.raises(DsConfigError) as ei:
        read_ds_config(ds)
    assert ei.value.key == key and f"ds_config.{key}" in str(ei.value)


def test_training_config_is_read_as_the_reference_reads_it():
    from arctic_platform.protocol import DsConfigError, read_training_config

    tc = {
        "optimizer": {"lr": 2e-5, "beta1": 0.8, "beta2": 0.95, "gradient_clipping": 0.5},
        "lr_scheduler": {"type": "cosine", "warmup_ratio": 0.1, "min_lr_ratio": 0.2},
        "training_horizon": 40,
        "gradient_accumulation_steps": 2,
    }
    got = read_training_config(tc)
    assert got == {
        "lr": 2e-5,
        "betas": (0.8, 0.95),
        "eps": 1e-8,
        "weight_decay": 0.0,  # the reference's default with training_config
        "grad_clip": 0.5,
        "lr_scheduler_type": "cosine",
        "warmup_steps": 4,
        "total_steps": 40,
        "min_lr_ratio": 0.2,
    }
    # no horizon: the reference keeps a constant rate
    assert "lr_scheduler_type" not in read_training_config({"lr_scheduler": {"type": "cosine"}})
    for bad, key in (
        ({"lr": 1}, "training_config.lr"),
        ({"optimizer": {"amsgrad": True}}, "training_config.optimizer.amsgrad"),
        ({"lr_scheduler": {"type": "linear"}, "training_horizon": 3}, "training_config.lr_scheduler.type"),
        ({"optimizer": {"lr": -1}}, "training_config.optimizer.lr"),
    ):
        with pytest.raises(DsConfigError, match=key.replace(".", r"\.")):
            read_training_config(bad)
