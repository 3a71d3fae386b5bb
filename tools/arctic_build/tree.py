# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Where the inputs live, which files count, and the one digest format every hash of a tree uses."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PATCHES_ROOT = REPO / "patches"
OVERLAY_ROOT = REPO / "overlay"
IGNORED_NAMES = {"__pycache__", ".DS_Store"}
IGNORED_SUFFIXES = (".pyc", ".pyo", ".orig", ".rej")


def sha256_file(path: Path) -> str:
    """The hex sha256 of one file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def ignored(parts: Iterable[str]) -> bool:
    """Whether a path (its parts) is a cache or a patch leftover that never counts as content."""
    parts = tuple(parts)
    return any(p in IGNORED_NAMES for p in parts) or (bool(parts) and parts[-1].endswith(IGNORED_SUFFIXES))


def iter_files(root: Path) -> Iterator[Path]:
    """Yield files under ``root`` in sorted order, skipping caches, patch leftovers, ``.pc`` and ``.git``."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_NAMES and d not in (".pc", ".git"))
        for name in sorted(filenames):
            if not ignored((name,)):
                yield Path(dirpath) / name


def digest_lines(h, files: Iterable[Path], base: Path) -> None:
    """Feed ``h`` one line per file: its path relative to ``base``, NUL, its content sha256, newline."""
    for p in files:
        h.update(p.relative_to(base).as_posix().encode() + b"\0" + sha256_file(p).encode() + b"\n")


def tree_digest(root: Path) -> str:
    """sha256 over (relative path, content sha256) of every file under ``root`` (the pins' ``tree_sha256``)."""
    h = hashlib.sha256()
    digest_lines(h, iter_files(root), root)
    return h.hexdigest()


def rel_to_repo(path: Path) -> str:
    """``path`` relative to the checkout when it is inside it (for messages), else as given."""
    try:
        return path.relative_to(REPO).as_posix()
    except ValueError:
        return str(path)
