# Copyright 2026 The arctic-verl Authors
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
# SPDX-License-Identifier: Apache-2.0
"""Packaging only: the package map of the prepared tree. Dependencies live in pyproject.toml.

This file never downloads or patches. ``./build.sh`` prepares ``build/src`` (pinned upstream verl + patch
series + overlay + build manifest); this script refuses to run when that tree is missing or stale.
"""

import json
import os
import sys
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
SRC = HERE / "build" / "src"
sys.path.insert(0, str(HERE / "tools"))
from arctic_build import PATCHES_ROOT, input_stamp  # noqa: E402  (tools/arctic_build/, the build tool)

info_path = SRC / "BUILD_INFO.json"
if not info_path.is_file():
    sys.exit("setup.py: build/src is not prepared; run ./build.sh (setup.py never downloads or patches)")
info = json.loads(info_path.read_text())
stamp = input_stamp(PATCHES_ROOT / info["patch_folder"])
if info["input_stamp"] != stamp:
    sys.exit(
        "setup.py: build/src is stale (patches, overlay or shipped code changed since it was prepared); run ./build.sh"
    )

# Data files shipped with each package tree (everything that is not Python source).
DATA_SUFFIXES = (".yaml", ".yml", ".json", ".sh", ".jinja", ".txt", ".typed", ".md")


def package_map(root: Path, name: str, data_all: bool) -> tuple[list[str], dict[str, str], dict[str, list[str]]]:
    """List every package (folders holding .py files or data) under ``root`` as import ``name``."""
    packages, package_dir, package_data = [], {}, {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        rel = Path(dirpath).relative_to(root)
        pkg = ".".join((name, *rel.parts))
        files = sorted(f for f in filenames if not f.endswith((".pyc", ".pyo")))
        if not files:
            continue
        packages.append(pkg)
        package_dir[pkg] = os.path.relpath(dirpath, HERE)
        data = [f for f in files if not f.endswith(".py") and (data_all or f.endswith(DATA_SUFFIXES))]
        if data:
            package_data[pkg] = data
    return packages, package_dir, package_data


packages, package_dir, package_data = [], {}, {}
for root, name, data_all in (
    (SRC / "verl", "verl", True),  # every upstream file ships, as in the upstream wheel (minus tests/, scripts/)
    (HERE / "arctic_platform", "arctic_platform", False),
    (HERE / "kernels", "arctic_platform.kernels", False),  # never a top-level `kernels` (HF owns that name)
):
    p, d, pd = package_map(root, name, data_all)
    packages += p
    package_dir.update(d)
    package_data.update(pd)

setup(
    version=info["version"],
    packages=packages,
    package_dir=package_dir,
    package_data=package_data,
    include_package_data=False,
    zip_safe=False,
    options={"egg_info": {"egg_base": "build"}, "build": {"build_base": "build/setuptools"}},
)
