# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Compose verl's real ppo_trainer config from the installed wheel with Hydra's compose API."""

from pathlib import Path

import pytest

DUMMY_YAML = """\
# a minimal remote-backend group entry, as a plugin ships it (no @package header)
name: dummy
custom_backend_module: null
dummy:
  lr: 0.5
"""


@pytest.fixture(scope="session")
def verl_config_dir() -> str:
    import verl

    return str(Path(verl.__file__).parent / "trainer" / "config")


@pytest.fixture(scope="session")
def plugin_conf_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("plugin_conf")
    (root / "remote_backend").mkdir()
    (root / "remote_backend" / "dummy.yaml").write_text(DUMMY_YAML)
    return root


@pytest.fixture(scope="session")
def compose(verl_config_dir):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    def _compose(overrides=(), return_hydra_config=False):
        with initialize_config_dir(config_dir=verl_config_dir, version_base=None):
            return hydra_compose("ppo_trainer", overrides=list(overrides), return_hydra_config=return_hydra_config)

    return _compose
