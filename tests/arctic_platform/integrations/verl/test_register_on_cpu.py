# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Registration through `import verl` (verl.plugins entry point), laziness, idempotency, and the stock-verl error.

verl logs entry-point failures only at DEBUG, so these run a fresh interpreter and assert the registrations.
"""

import json
import os
import subprocess
import sys

import pytest

PROBE = r"""
import json, sys
import verl
from verl.remote_backend import RemoteBackendRegistry
from verl.workers.rollout.replica import RolloutReplicaRegistry
state = {
    "backends": RemoteBackendRegistry.list(),
    "backend_cls": RemoteBackendRegistry.get("arctic").__qualname__,
    "worker_loader": "arctic" in RemoteBackendRegistry._worker_loaders,
    "replica": "arctic" in RolloutReplicaRegistry._registry,
    "lazy_worker": "arctic_platform.integrations.verl.v1.worker" not in sys.modules,
    "lazy_replica": "arctic_platform.integrations.verl.v1.replica" not in sys.modules,
    "no_client": "arctic_platform.client" not in sys.modules and "arctic_platform.server" not in sys.modules,
}
import importlib
importlib.import_module("arctic_platform.integrations.verl.register")  # again: harmless
state["worker"] = RemoteBackendRegistry.get_worker("arctic").__qualname__
state["replica_cls"] = RolloutReplicaRegistry.get("arctic").__qualname__
print(json.dumps(state))
"""


def _probe(**env):
    r = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, env={**os.environ, **env}
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_plain_import_verl_registers_arctic():
    state = _probe(VERL_USE_EXTERNAL_PLUGINS="auto")
    assert "arctic" in state["backends"] and state["backend_cls"] == "ArcticRemoteBackend"
    assert state["worker_loader"] and state["replica"]
    assert state["lazy_worker"] and state["lazy_replica"] and state["no_client"]
    assert state["worker"] == "ArcticV1ActorRolloutRefWorker"
    assert state["replica_cls"] == "ArcticV1Replica"


def test_external_modules_env_var_is_idempotent_with_the_entry_point():
    state = _probe(VERL_USE_EXTERNAL_MODULES="arctic_platform.integrations.verl.register")
    assert state["backend_cls"] == "ArcticRemoteBackend" and state["worker"] == "ArcticV1ActorRolloutRefWorker"


def test_env_var_alone_registers_when_entry_points_are_off():
    state = _probe(
        VERL_USE_EXTERNAL_PLUGINS="none", VERL_USE_EXTERNAL_MODULES="arctic_platform.integrations.verl.register"
    )
    assert state["backend_cls"] == "ArcticRemoteBackend"


def test_entry_points_off_and_no_env_var_means_not_registered():
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "import verl; from verl.remote_backend import RemoteBackendRegistry as R; print(R.list())",
        ],
        capture_output=True, text=True, timeout=300, env={**os.environ, "VERL_USE_EXTERNAL_PLUGINS": "none"},
    )  # fmt: skip
    assert r.returncode == 0 and "arctic" not in r.stdout


@pytest.fixture(scope="module")
def stock_verl(tmp_path_factory):
    """Real stock verl (the installed wheel's pinned sdist, own files, no seam), unpacked into a separate path entry."""
    import tarfile
    from pathlib import Path

    from verl.arctic_manifest import manifest

    up = manifest()["upstream"]
    if up.get("kind", "sdist") != "sdist":
        pytest.skip(f"this wheel's upstream is {up['kind']}-pinned, not an sdist")
    cache = Path(os.environ.get("ARCTIC_CACHE_DIR", Path.home() / ".cache" / "arctic-verl")) / "sdist"
    sdist = cache / up["sdist"]
    if not sdist.exists():
        pytest.skip("the pinned sdist is not in the cache (./build.sh puts it there)")
    top = f"{up['project']}-{up['version']}"
    root = tmp_path_factory.mktemp("stock")
    with tarfile.open(sdist) as tf:
        members = [m for m in tf.getmembers() if m.name.startswith(f"{top}/verl/")]
        tf.extractall(root, members=members, filter="data")
    return root / top


def test_stock_verl_gives_a_clear_error(stock_verl):
    code = "import arctic_platform.integrations.verl.register"
    env = {**os.environ, "PYTHONPATH": str(stock_verl), "VERL_USE_EXTERNAL_PLUGINS": "none"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode != 0
    assert "lacks the RemoteBackend seam" in r.stderr
    assert "pip install --force-reinstall --no-deps dist/verl-*+arctic.*.whl" in r.stderr
