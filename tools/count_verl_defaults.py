# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Count the verl defaults the plugin restates as literals (each a place a verl release can silently diverge).

``python3 tools/count_verl_defaults.py [--root DIR] [--list] [--plugin-only]`` parses the package's modules
(``arctic_platform/**.py``: the plugin, the client, the server, the CLI; ``tasks/`` and ``examples/`` are data
preparation and launchers, not config readers) and counts, per file:

* a *config read with a literal fallback*: a call ``<x>.get(KEY, LIT)`` / ``get(.., default=LIT)`` /
  ``OmegaConf.select(.., default=LIT)`` whose key is a string or a name holding one (a verl config key or dotted
  path), and whose fallback ``LIT`` is a literal other than ``None`` (a number, string, bool, or a tuple / list of
  them), and
* a *literal default handed to a check*: the second argument of ``_refuse_unless_default`` / ``_cosine_option``
  (verl's default the check compares against), or of ``_master_weights``-style helpers that take one;
* an *``or LIT`` fallback* right after such a read (``x.get("k") or 1``), when the read itself has no literal.

Two columns: ``verl`` (verl's tree, verl's defaults restated) and ``arctic.yaml`` (fallbacks read from the merged
``remote_backend.arctic`` options, restating the plugin's own yaml).

Reads of HTTP replies and request data (``reply.get("policy_version", ...)``) match the same pattern; a file list
with ``--list`` shows every hit with its line so the count can be read, and ``REPLY_NAMES`` excludes receivers that
are not configs. ``tests/special_sanity/test_verl_defaults_ceiling_on_cpu.py`` holds the totals at or below
:data:`CEILING` (the count when it was written): a change may lower them, never raise them. Standard library only.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

CHECK_HELPERS = ("_refuse_unless_default", "_cosine_option")
CEILING = {"package": 62, "plugin": 8}
"""The ``verl`` column's totals on 2026-12-07 (main after issue 41): the whole package and the verl plugin alone."""
PLUGIN = Path("integrations") / "verl"
REPLY_NAMES = {
    "reply",
    "result",
    "step",
    "step_metrics",
    "health",
    "handle",
    "backend_handle",
    "self.backend_handle",
    "sampling_params",
    "kwargs",
    "m",
    "h",
    "r",
    "info",
    "training",
    "data",
    "metrics",
    "os.environ",
    "tu",
}
"""Receivers of ``.get`` that hold HTTP replies, handles, call arguments or batch data (``tu.get(data, ...)``), not a
config (matched by their first name)."""
ARCTIC_OPTION_NAMES = {"opts", "sampling", "self.opts"}
"""Receivers that hold the merged ``remote_backend.arctic`` options (arctic.yaml's defaults, not verl's)."""


def _is_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value is not None
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(isinstance(e, ast.Constant) for e in node.elts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        return True
    return False


def _receiver(call: ast.Call) -> str:
    f = call.func
    return ast.unparse(f.value) if isinstance(f, ast.Attribute) else ""


def _root(receiver: str) -> str:
    """The receiver's first name (``step`` of ``step.get('metrics', step)``, ``opts`` of ``opts.backend``)."""
    for i, ch in enumerate(receiver):
        if not (ch.isalnum() or ch == "_"):
            return receiver[:i] if receiver[:i] != "self" else receiver
    return receiver


def _kind(node: ast.Call) -> str:
    """``arctic``: a fallback restating ``arctic.yaml`` (the plugin's own options, read from ``opts``); ``verl``: any
    other config read (verl's tree, or a check helper comparing against verl's default)."""
    fname = node.func.id if isinstance(node.func, ast.Name) else ""
    if fname in CHECK_HELPERS:
        return "verl"
    receiver = _receiver(node)
    root = _root(receiver.removeprefix("ctx."))
    return "arctic" if root in ARCTIC_OPTION_NAMES else "verl"


def _is_config_read(call: ast.Call) -> bool:
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
    if name not in ("get", "select"):
        return False
    receiver = _receiver(call)
    if _root(receiver) in REPLY_NAMES or receiver.startswith("{"):  # a dict literal is a lookup table, not a config
        return False
    key = call.args[1] if name == "select" and len(call.args) > 1 else call.args[0] if call.args else None
    return key is not None and not (isinstance(key, ast.Constant) and not isinstance(key.value, str))


def _fallback(call: ast.Call) -> ast.AST | None:
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
    for kw in call.keywords:
        if kw.arg == "default":
            return kw.value
    if name == "get" and len(call.args) >= 2:
        return call.args[1]
    return None


def count(path: Path) -> list[tuple[int, str, str]]:
    """``(line, kind, source)`` of every literal default in ``path`` (kind: ``verl`` or ``arctic``)."""
    tree = ast.parse(path.read_text())
    hits: list[tuple[int, str, str]] = []
    literal_reads: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fname = node.func.id if isinstance(node.func, ast.Name) else ""
        if fname in CHECK_HELPERS and len(node.args) >= 2 and _is_literal(node.args[1]):
            hits.append((node.lineno, _kind(node), ast.unparse(node)[:100]))
        elif _is_config_read(node):
            fb = _fallback(node)
            if fb is not None and _is_literal(fb):
                hits.append((node.lineno, _kind(node), ast.unparse(node)[:100]))
                literal_reads.add(id(node))
    for node in ast.walk(tree):
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and len(node.values) == 2:
            read, lit = node.values
            if (
                isinstance(read, ast.Call)
                and _is_config_read(read)
                and id(read) not in literal_reads
                and _is_literal(lit)
            ):
                hits.append((node.lineno, _kind(read), ast.unparse(node)[:100]))
    return sorted(hits)


def scan(root: Path, plugin_only: bool = False) -> dict[Path, list[tuple[int, str, str]]]:
    """Every file's hits (:func:`count`) under ``root/arctic_platform`` (or its verl plugin), by path from there."""
    package = root / "arctic_platform"
    base = package / PLUGIN if plugin_only else package
    out = {}
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(package)
        if "tasks" in rel.parts or "examples" in rel.parts:
            continue
        out[rel] = count(path)
    return out


def total(hits: dict[Path, list], kind: str = "verl") -> int:
    """How many hits of ``kind`` (``verl`` or ``arctic``) :func:`scan` found."""
    return sum(1 for file_hits in hits.values() for h in file_hits if h[1] == kind)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--list", action="store_true", help="print every hit")
    parser.add_argument("--plugin-only", action="store_true", help="only arctic_platform/integrations/verl")
    args = parser.parse_args(argv)
    totals = {"verl": 0, "arctic": 0}
    print("verl arctic.yaml  file")
    for rel, hits in scan(args.root, args.plugin_only).items():
        per = {k: sum(1 for h in hits if h[1] == k) for k in totals}
        for k in totals:
            totals[k] += per[k]
        if hits:
            print(f"{per['verl']:4d} {per['arctic']:11d}  {rel}")
            if args.list:
                for line, kind, src in hits:
                    print(f"          {line:5d} {kind:6s} {src}")
    print(f"{totals['verl']:4d} {totals['arctic']:11d}  total")
    return 0


if __name__ == "__main__":
    sys.exit(main())
