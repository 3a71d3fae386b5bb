# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The command line behind ``./build.sh`` (``python3 -m arctic_build <cmd>`` with ``tools/`` on the path).

The only module that prints: results on stdout, every error as ``build: <reason>`` on stderr with exit 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import edit, steps
from .errors import BuildError, CheckFailed
from .pins import Upstream, default_folder, patch_folders, resolve_folder
from .stamp import build_number, input_stamp, source_date_epoch
from .tree import REPO


def _sources(args) -> tuple[Path | None, Path | None]:
    """``--sdist`` and ``--source`` (or their environment variables), resolved; at most one of them."""
    sdist = Path(args.sdist).resolve() if getattr(args, "sdist", None) else None
    source = Path(args.source).resolve() if getattr(args, "source", None) else None
    if sdist and source:
        raise BuildError("give --sdist or --source, not both")
    return sdist, source


def _show(result: edit.EditResult) -> int:
    for line in result.lines:
        print(line)
    return result.code


def cmd_fetch(args) -> int:
    print(steps.fetch(resolve_folder(args.patches), *_sources(args)))
    return 0


def cmd_prepare(args) -> int:
    print(steps.prepare(resolve_folder(args.patches), *_sources(args), args.out.resolve())["version"])
    return 0


def cmd_check(args) -> int:
    folders = [resolve_folder(args.patches)] if args.patches else patch_folders()
    for line in steps.check(folders, *_sources(args)):
        print(line)
    return 0


def cmd_stamp(args) -> int:
    print(input_stamp(resolve_folder(args.patches)))
    return 0


def cmd_sde(args) -> int:
    print(source_date_epoch())
    return 0


def cmd_version(args) -> int:
    print(f"{Upstream.load(default_folder()).version}+arctic.{build_number()}")
    return 0


def cmd_sets(args) -> int:
    default = default_folder()
    for f in patch_folders():
        print(f"{f.name}\t{Upstream.load(f).label}{'  (default)' if f == default else ''}")
    return 0


def cmd_edit(args) -> int:
    if args.cont:
        return _show(edit.edit_continue(args.workdir.resolve()))
    return _show(edit.edit(resolve_folder(args.patches), *_sources(args), args.workdir.resolve()))


def cmd_export(args) -> int:
    return _show(edit.export(resolve_folder(args.patches) if args.patches else None, args.workdir.resolve()))


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="arctic_build", description="Build logic behind ./build.sh.")
    sub = ap.add_subparsers(dest="cmd", required=True)

    def command(name, func, summary, sources=True, patches=True):
        p = sub.add_parser(name, help=summary)
        if patches:
            p.add_argument("--patches", help="patch set (default: the newest release set patches/verl-*)")
        if sources:
            p.add_argument("--sdist", type=Path, default=os.environ.get("ARCTIC_VERL_SDIST") or None)
            p.add_argument("--source", type=Path, default=os.environ.get("ARCTIC_VERL_SOURCE") or None)
        p.set_defaults(func=func)
        return p

    command("fetch", cmd_fetch, "get the set's pinned upstream and verify it")
    p = command("prepare", cmd_prepare, "build build/src: upstream, series, overlay, manifest, stamp")
    p.add_argument("--out", type=Path, default=REPO / "build" / "src")
    command("check", cmd_check, "lint every set (or --patches) and apply each to its own upstream")
    command("stamp", cmd_stamp, "print the input stamp", sources=False)
    p = command("edit", cmd_edit, "the series as git commits under build/edit")
    p.add_argument("--continue", dest="cont", action="store_true", help="after fixing the .rej files")
    p.add_argument("--workdir", type=Path, default=REPO / "build" / "edit")
    p = command("export", cmd_export, "write the edit checkout back into the set edit opened", sources=False)
    p.add_argument("--workdir", type=Path, default=REPO / "build" / "edit")
    command("version", cmd_version, "the wheel version of the default set", sources=False, patches=False)
    command("sde", cmd_sde, "SOURCE_DATE_EPOCH for the wheel", sources=False, patches=False)
    command("sets", cmd_sets, "list the patch sets, newest last, and the default", sources=False, patches=False)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except CheckFailed as e:
        for line in e.problems:
            print(f"build: {line}", file=sys.stderr)
        print(f"build: {e}", file=sys.stderr)
        return 1
    except BuildError as e:
        print(f"build: {e}", file=sys.stderr)
        return 1
