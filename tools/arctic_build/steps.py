# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The steps ``build.sh`` runs: fetch, prepare ``build/src`` atomically, and check every set in a scratch tree."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from .apply import Finding, apply_patch, remove_rejects
from .errors import BuildError, CheckFailed
from .fetch import fetch_sdist, materialize
from .overlay import copy_overlay
from .patchfile import load_series, stale_wording
from .pins import Upstream, folder_version
from .stamp import MANIFEST_NAME, build_manifest, build_number, write_manifest


def fetch(folder: Path, sdist: Path | None, source: Path | None) -> str:
    """Get and verify the set's upstream; return the line that says what was verified."""
    up = Upstream.load(folder)
    if up.kind == "sdist" and source is None:  # cheap: the file's sha256 (prepare checks the tree too)
        return f"{fetch_sdist(up, sdist)} (sha256 verified)"
    with tempfile.TemporaryDirectory(prefix="arctic-fetch-") as td:
        got = materialize(up, Path(td), sdist, source)
    return f"{got['from']} ({got['verified']} verified)"


def prepare(folder: Path, sdist: Path | None, source: Path | None, out: Path) -> dict:
    """Create ``out`` (e.g. build/src) atomically: upstream, the series, the overlay, the manifest. Returns it."""
    up = Upstream.load(folder)
    patches = load_series(folder)
    number = build_number()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".tmp-", dir=out.parent))
    try:
        obtained = materialize(up, tmp, sdist, source)
        for p in patches:
            apply_patch(p, tmp)  # raises on the first failing or offset hunk; tmp is then removed
        overlay = copy_overlay(tmp)
        if (tmp / "verl" / MANIFEST_NAME).exists():
            raise BuildError(f"upstream verl {up.version} already has verl/{MANIFEST_NAME}; rename the build manifest")
        manifest = build_manifest(folder, up, obtained, patches, overlay, number)
        write_manifest(tmp, manifest)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
        return manifest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_folder(folder: Path, sdist: Path | None, source: Path | None) -> tuple[list[str], str]:
    """Lint and apply one set to its own upstream in a scratch dir: (every problem, the summary line)."""
    up = Upstream.load(folder)
    patches = load_series(folder)
    with tempfile.TemporaryDirectory(prefix="arctic-check-") as td:
        root = Path(td)
        materialize(up, root, sdist, source)
        findings: list[Finding] = []
        for p in patches:
            findings += apply_patch(p, root, keep_going=True)
            remove_rejects(root)
        copy_overlay(root)
    failing = [f for f in findings if not f.offset_only]
    wording = [w for p in patches for w in stale_wording(p, folder_version(folder))]
    if findings or wording:
        summary = (
            f"{folder.name}: {len(failing)} failing hunk(s) and {len(findings) - len(failing)} offset hunk(s) in "
            f"{len({f.patch for f in findings})} of {len(patches)} patches against {up.label}, "
            f"{len(wording)} stale header(s); rebase with ./build.sh edit --patches {folder.name}"
        )
        return [f"{folder.name}: {f}" for f in findings] + [f"{folder.name}: {w}" for w in wording], summary
    hunks = sum(p.hunk_count() for p in patches)
    return [], (
        f"{folder.name}: {len(patches)} patches, {hunks} hunks applied to {up.label}"
        " with zero fuzz and zero offset; overlay OK"
    )


def check(folders: list[Path], sdist: Path | None, source: Path | None) -> list[str]:
    """Check every set; raises :class:`CheckFailed` listing every problem of every set. Returns report lines."""
    if (sdist or source) and len(folders) > 1:
        raise BuildError(
            "--sdist/--source (or ARCTIC_VERL_SDIST/ARCTIC_VERL_SOURCE) belong to one patch set; "
            f"name it with --patches ({', '.join(f.name for f in folders)})"
        )
    report, problems = [], []
    for folder in folders:
        try:
            found, summary = check_folder(folder, sdist, source)
        except BuildError as e:
            found, summary = [f"{folder.name}: {e}"], f"{folder.name}: not checked"
        problems += found
        report.append(summary)
    if problems:
        raise CheckFailed(problems + report, f"check failed: {len(problems)} problem(s) in {len(folders)} set(s)")
    return report
