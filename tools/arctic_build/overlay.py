# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Copying ``overlay/verl/**`` into a prepared tree: new files only, never over an upstream file."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .errors import BuildError
from .tree import IGNORED_NAMES, OVERLAY_ROOT, iter_files, sha256_file

OVERLAY_TOP = ("verl", "PROVENANCE.md")  # all that overlay/ may hold


def copy_overlay(dest: Path) -> list[tuple[str, str]]:
    """Copy overlay/verl/** into dest/verl; refuse to overwrite an upstream file.

    Returns:
        ``(path under dest, sha256)`` of every copied file, in sorted order.
    """
    out = []
    src_root = OVERLAY_ROOT / "verl"
    if not src_root.is_dir():
        return out
    for p in iter_files(src_root):
        rel = Path("verl") / p.relative_to(src_root)
        target = dest / rel
        if target.exists():
            raise BuildError(
                f"overlay/{rel.as_posix()} would overwrite the upstream file {rel.as_posix()}; "
                "change upstream files with a patch in patches/, not the overlay"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, target)
        os.chmod(target, 0o644)
        out.append((rel.as_posix(), sha256_file(p)))
    stray = [p for p in OVERLAY_ROOT.iterdir() if p.name not in OVERLAY_TOP and p.name not in IGNORED_NAMES]
    if stray:
        raise BuildError(f"overlay/{stray[0].name}: the overlay holds only verl/ and PROVENANCE.md")
    return out
