# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The input stamp, the build number N, ``SOURCE_DATE_EPOCH`` and the build manifest the wheel carries.

N in ``<upstream>+arctic.<N>`` counts the commits that touched shipped content (conda-forge's build number), so it
only grows; the stamp hashes every input of the wheel, and ``setup.py`` refuses a ``build/src`` whose stamp is stale.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .errors import BuildError
from .gitcmd import GitError, git_output
from .patchfile import Patch
from .pins import Upstream
from .tree import REPO, digest_lines, iter_files, sha256_file, tree_digest

# Everything that ships besides the patched verl tree. Changing any of these bumps N.
SHIPPED_PATHS = (
    "patches",
    "overlay",
    "arctic_platform",
    "kernels",
    "setup.py",
    "pyproject.toml",
    "tools/arctic_build",
    # the build tool's single file before it became the package above: kept so N still counts its commits
    "tools/arctic_build.py",
)
MANIFEST_NAME = "arctic_build_manifest.json"  # written to verl/ of the prepared tree
BUILD_INFO = "BUILD_INFO.json"  # beside verl/: what setup.py reads (version, stamp, set)
_EARLIEST_ZIP_TIME = 315532800  # 1980-01-01


def input_stamp(folder: Path) -> str:
    """Hash of every input of the wheel (except the upstream sdist, pinned by its sha in UPSTREAM)."""
    h = hashlib.sha256()
    for rel in SHIPPED_PATHS:
        p = REPO / rel
        if p.is_file():
            digest_lines(h, [p], REPO)
        elif p.is_dir():
            digest_lines(h, iter_files(p), REPO)
    h.update(b"folder\0" + folder.name.encode())
    h.update(f"\0N={build_number()}\0SOURCE_DATE_EPOCH={source_date_epoch()}".encode())
    return h.hexdigest()


def build_number() -> int:
    """N in ``<upstream>+arctic.<N>``: ``$ARCTIC_BUILD_NUMBER``, else commits that touched shipped content."""
    env = os.environ.get("ARCTIC_BUILD_NUMBER")
    if env:
        if not env.isdigit():
            raise BuildError(f"ARCTIC_BUILD_NUMBER={env!r} must be a non-negative integer")
        return int(env)
    try:
        shallow = git_output("rev-parse", "--is-shallow-repository", cwd=REPO) == "true"
        count = None if shallow else git_output("rev-list", "--count", "HEAD", "--", *SHIPPED_PATHS, cwd=REPO)
    except GitError:
        raise BuildError("not a git checkout: set ARCTIC_BUILD_NUMBER to build outside git") from None
    if shallow:
        raise BuildError(
            "shallow git clone: N is a commit count; run 'git fetch --unshallow' or set ARCTIC_BUILD_NUMBER"
        )
    return int(count or "0")


def source_date_epoch() -> int:
    """``$SOURCE_DATE_EPOCH``, else the time of the last commit that touched shipped content (else 1980-01-01).

    Docs-only commits therefore do not change the wheel.
    """
    env = os.environ.get("SOURCE_DATE_EPOCH")
    if env:
        return int(env)
    try:
        return int(git_output("log", "-1", "--format=%ct", "--", *SHIPPED_PATHS, cwd=REPO))
    except (GitError, ValueError):
        return _EARLIEST_ZIP_TIME


def build_manifest(
    folder: Path,
    up: Upstream,
    obtained: dict,
    patches: list[Patch],
    overlay: list[tuple[str, str]],
    number: int,
) -> dict:
    """The manifest the wheel carries as ``verl/arctic_build_manifest.json``: pin, inputs' sha256s, N, stamp."""
    return {
        "distribution": "verl",
        "version": f"{up.version}+arctic.{number}",
        "build_number": number,
        "upstream": {**up.describe(), "obtained": obtained["from"], "verified": obtained["verified"],
                     "verified_sdist_sha256": obtained.get("verified_sdist_sha256")},
        "patch_folder": folder.name,
        "patches": [{"name": p.name, "sha256": sha256_file(p.path)} for p in patches],
        "overlay": [{"path": rel, "sha256": sha} for rel, sha in overlay],
        "arctic_platform_sha256": (
            tree_digest(REPO / "arctic_platform") if (REPO / "arctic_platform").is_dir() else None
        ),
        "kernels_sha256": tree_digest(REPO / "kernels") if (REPO / "kernels").is_dir() else None,
        "input_stamp": input_stamp(folder),
        "source_date_epoch": source_date_epoch(),
    }  # fmt: skip


def write_manifest(tree: Path, manifest: dict) -> None:
    """Write the manifest into ``tree/verl`` and the build info ``setup.py`` reads beside it."""
    (tree / "verl" / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    info = {"version": manifest["version"], "input_stamp": manifest["input_stamp"],
            "patch_folder": manifest["patch_folder"]}  # fmt: skip
    (tree / BUILD_INFO).write_text(json.dumps(info, sort_keys=True) + "\n")
