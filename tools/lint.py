# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The lint step of ``./build.sh test``: verl's ruff configuration over everything this project wrote.

``python tools/lint.py [--root DIR]`` runs ``ruff check`` and ``ruff format --check`` (the ``ruff`` of the
interpreter running this script, pinned in pyproject's ``test`` extra) with ``DIR/pyproject.toml``'s ``[tool.ruff]``
over :data:`LINT_PATHS` under ``DIR`` (default: this checkout). Exit status 0 when both are clean, 1 with a message
naming the failing check and the offending files otherwise, 2 when ruff is not installed. Only the standard library
is imported here, so the script runs before anything of the project is importable.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

# What we wrote; upstream verl (build/src) and the environments are never linted.
LINT_PATHS = ("arctic_platform", "kernels", "overlay", "tools", "tests", "benchmarks", "setup.py")


def ruff_command() -> list[str]:
    return [sys.executable, "-m", "ruff"]


def lint(root: Path) -> tuple[int, str]:
    """Run both checks under ``root``; return ``(exit status, report)``."""
    config = root / "pyproject.toml"
    if not config.is_file():
        return 2, f"lint: {config} not found (the ruff configuration lives in [tool.ruff] there)"
    probe = subprocess.run([*ruff_command(), "--version"], capture_output=True, text=True)
    if probe.returncode != 0:
        return 2, "lint: ruff is not installed in this environment (it is pinned in pyproject's `test` extra)"
    paths = [p for p in LINT_PATHS if (root / p).exists()]
    report, failed = [], []
    checks = (
        ("ruff check", ["check", "--no-fix", "--output-format=concise"], "ruff check --fix <file>, or fix by hand"),
        ("ruff format --check", ["format", "--check"], "ruff format <file>"),
    )
    for name, args, fix in checks:
        r = subprocess.run(
            [*ruff_command(), *args, "--config", str(config), *paths],
            cwd=root,
            capture_output=True,
            text=True,
        )
        out = (r.stdout + r.stderr).strip()
        if r.returncode != 0:
            failed.append(name)
            report.append(f"lint: `{name}` failed ({probe.stdout.strip()}, config {config}):\n{out}\nlint: fix: {fix}")
    if failed:
        report.append(f"lint: FAILED: {' and '.join(failed)} (over {', '.join(paths)})")
        return 1, "\n".join(report)
    return 0, f"lint: clean ({probe.stdout.strip()}: check + format over {', '.join(paths)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args(argv)
    rc, report = lint(args.root.resolve())
    print(report, file=sys.stderr if rc else sys.stdout)
    return rc


if __name__ == "__main__":
    sys.exit(main())
