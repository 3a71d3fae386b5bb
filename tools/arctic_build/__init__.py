# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Build logic behind ``./build.sh``: pin, verify, patch (with ``git apply``), overlay, manifest.

Standard library plus ``git`` (``packaging`` and, on Python 3.10, ``tomli``: installed or pip's vendored copies), so
it runs from the host ``python3`` before any environment exists. Library functions return results and raise
:class:`BuildError` with a one-line reason; only :mod:`.cli` prints (``build: <reason>``, exit 1).

Patch sets live side by side in ``patches/verl-<PEP 440 version>/`` (``UPSTREAM`` pin, ``series``, patches). The
default set is the newest *release* (not a dev or pre-release). A pin is a PyPI sdist or a git tree.

========================  ==========================================================================================
module                    concern
========================  ==========================================================================================
:mod:`.errors`            ``BuildError``, ``CheckFailed``
:mod:`.tree`              repository paths, which files count, the one digest format (``tree_sha256``)
:mod:`.gitcmd`            the one way git is run (``GIT_*`` cleaned), ``git apply`` with the user's settings off
:mod:`.pins`              ``UPSTREAM`` (TOML), set folders and their PEP 440 order, the default set
:mod:`.fetch`             sdist download/cache and sha256, git tree export, safe tar extraction, ``--source``
:mod:`.patchfile`         ``series``, DEP-3 headers, what a diff may touch (the lint)
:mod:`.apply`             ``git apply`` at zero fuzz and zero offset; its output as findings per patch/file/hunk
:mod:`.overlay`           ``overlay/verl/**`` copied in, never over an upstream file
:mod:`.stamp`             input stamp, build number N, ``SOURCE_DATE_EPOCH``, the build manifest
:mod:`.steps`             ``fetch``, ``prepare`` (``build/src``, atomically) and ``check`` (every set, every hunk)
:mod:`.edit`              the ``edit`` / ``edit --continue`` / ``export`` state machine
:mod:`.cli`               argparse sub-commands; the only printing
========================  ==========================================================================================

Subcommands (``PYTHONPATH=tools python3 -m arctic_build <cmd> --help``): ``fetch``, ``prepare``, ``check``,
``stamp``, ``edit`` [``--continue``], ``export``, ``version``, ``sde``, ``sets``.

The names below are the library API that ``setup.py``, ``tools/patch_mutation_check.py`` and ``tests/packaging``
use.
"""

from .apply import Finding, apply_patch, remove_rejects
from .errors import BuildError, CheckFailed
from .fetch import extract_verl, fetch_sdist, materialize
from .overlay import copy_overlay
from .patchfile import Patch, load_series, parse_patch, read_series
from .pins import Upstream, default_folder, patch_folders, set_version
from .stamp import MANIFEST_NAME, build_number, input_stamp, source_date_epoch
from .steps import check, prepare
from .tree import PATCHES_ROOT, REPO, tree_digest

__all__ = [
    "BuildError",
    "CheckFailed",
    "Finding",
    "MANIFEST_NAME",
    "PATCHES_ROOT",
    "Patch",
    "REPO",
    "Upstream",
    "apply_patch",
    "build_number",
    "check",
    "copy_overlay",
    "default_folder",
    "extract_verl",
    "fetch_sdist",
    "input_stamp",
    "load_series",
    "materialize",
    "parse_patch",
    "patch_folders",
    "prepare",
    "read_series",
    "remove_rejects",
    "set_version",
    "source_date_epoch",
    "tree_digest",
]
