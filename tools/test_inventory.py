# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Count what the test suite asserts, from the source: test functions and assertions per file (stdlib only).

    python3 tools/test_inventory.py [--root DIR] [--json]

* a test function is a module-level or class-level ``def test_*`` / ``async def test_*`` in ``tests/**/test_*.py``;
* an assertion is an ``assert`` statement or a ``pytest.raises`` / ``pytest.warns`` context or call, wherever it
  is written in ``tests/`` (helpers and fixtures too: a check moved from a test into a helper it calls still
  counts once per place it is written, not per call).

Parametrized cases are not expanded here (pytest's ``--collect-only -q`` counts those); the point is to compare two
revisions of the suite: ``git worktree add /tmp/old <rev> && python3 tools/test_inventory.py --root /tmp/old``.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

RAISES = {"raises", "warns", "deprecated_call"}


def _is_pytest_check(node: ast.AST) -> bool:
    func = node.func if isinstance(node, ast.Call) else None
    return isinstance(func, ast.Attribute) and func.attr in RAISES and getattr(func.value, "id", "") == "pytest"


def inventory(path: Path) -> dict[str, int]:
    """``{"tests": ..., "asserts": ...}`` of one file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    tests = 0
    if path.name.startswith("test_"):
        scopes = [tree.body] + [n.body for n in tree.body if isinstance(n, ast.ClassDef)]
        for body in scopes:
            tests += sum(
                1 for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test_")
            )
    asserts = sum(1 for n in ast.walk(tree) if isinstance(n, ast.Assert) or _is_pytest_check(n))
    return {"tests": tests, "asserts": asserts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--json", action="store_true", help="per-file counts as JSON")
    args = parser.parse_args(argv)
    files = sorted((args.root / "tests").rglob("*.py"))
    per_file = {str(f.relative_to(args.root)): inventory(f) for f in files}
    total = {k: sum(v[k] for v in per_file.values()) for k in ("tests", "asserts")}
    if args.json:
        print(json.dumps({"total": total, "files": per_file}, indent=1))
    else:
        for name, counts in per_file.items():
            if counts["tests"] or counts["asserts"]:
                print(f"{counts['tests']:5d} {counts['asserts']:6d}  {name}")
        print(f"{total['tests']:5d} {total['asserts']:6d}  total (test functions, assertions) in {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
