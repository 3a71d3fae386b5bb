# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Contents and metadata of the wheel that ./build.sh put in dist/ (and that this test run installed)."""

import hashlib
import json
import re
import zipfile
from email.parser import Parser

import pytest

from .conftest import REPO


@pytest.fixture(scope="module")
def wheel():
    wheels = sorted((REPO / "dist").glob("verl-*+arctic.*-py3-none-any.whl"))
    assert len(wheels) == 1, wheels
    return zipfile.ZipFile(wheels[0])


def test_only_verl_arctic_platform_and_dist_info(wheel):
    tops = {n.split("/", 1)[0] for n in wheel.namelist()}
    dist_info = {t for t in tops if t.endswith(".dist-info")}
    assert tops - dist_info == {"verl", "arctic_platform"}
    assert "kernels" not in tops  # Hugging Face's `kernels` owns that import name
    assert any(n.startswith("arctic_platform/kernels/") for n in wheel.namelist())
    for name in wheel.namelist():
        assert "/tests/" not in f"/{name}" and not name.startswith("tests/")
        assert not name.endswith((".orig", ".rej", ".pyc")) and "/.pc/" not in name and "__pycache__" not in name


def test_metadata_name_version_entry_points(wheel, pin):
    (meta_name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    meta = Parser().parsestr(wheel.read(meta_name).decode())
    assert meta["Name"] == "verl"
    assert meta["Version"].startswith(f"{pin.version}+arctic.")
    requires = meta.get_all("Requires-Dist")
    assert any(r.startswith("TransferQueue") for r in requires)
    assert any(r.startswith("vllm==") and 'extra == "h200"' in r for r in requires)
    # torch is not a dependency (as upstream): build.sh installs a pinned CPU build only when it is missing
    assert not any(re.match(r"torch\b(?!data)", r) for r in requires if "extra" not in r)
    ep = wheel.read(meta_name.replace("METADATA", "entry_points.txt")).decode()
    assert "[verl.plugins]\narctic = arctic_platform.integrations.verl.register" in ep
    assert "arctic-verl = arctic_platform.cli:main" in ep


def test_manifest_records_every_input(wheel):
    manifest = json.loads(wheel.read("verl/arctic_build_manifest.json"))
    assert (
        manifest["version"]
        == Parser().parsestr(wheel.read(next(n for n in wheel.namelist() if n.endswith("METADATA"))).decode())[
            "Version"
        ]
    )
    folder = REPO / "patches" / manifest["patch_folder"]
    series = [
        line.strip()
        for line in (folder / "series").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert [p["name"] for p in manifest["patches"]] == series
    for p in manifest["patches"]:
        assert p["sha256"] == hashlib.sha256((folder / p["name"]).read_bytes()).hexdigest()
    for o in manifest["overlay"]:
        data = wheel.read(o["path"])
        assert hashlib.sha256(data).hexdigest() == o["sha256"]
        assert data == (REPO / "overlay" / o["path"]).read_bytes()
    assert manifest["upstream"]["sha256"] in (folder / "UPSTREAM").read_text()


def test_every_upstream_file_ships(wheel, sdist, arctic_build, pin, tmp_path):
    arctic_build.extract_verl(sdist, pin, tmp_path)
    upstream = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert upstream - set(wheel.namelist()) == set()
