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
    from arctic_platform.integrations.verl import adapter
    from arctic_platform.server import loss

    assert normalize_state(JobStatus.RUNNING) == "running" and normalize_state("JOB_STATE_FAILED") == "failed"
    assert normalize_state(JobStatus.TERMINATED) in TERMINAL_STATES
    assert loss.AGG_MODES is AGG_MODES and loss.KL_TYPES is KL_TYPES and adapter.KL_TYPES is KL_TYPES


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
