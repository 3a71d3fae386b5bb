# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The installed ``arctic_platform``'s import graph (every ``import`` statement, in functions and under
``TYPE_CHECKING`` too): no circle, and neither ``client`` nor ``server`` imports the other."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest


def _modules() -> dict[str, tuple[Path, bool]]:
    root = Path(importlib.util.find_spec("arctic_platform").submodule_search_locations[0])
    out = {}
    for p in root.rglob("*.py"):
        parts = ["arctic_platform", *p.relative_to(root).with_suffix("").parts]
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (p, is_pkg)
    return out


def _graph(mods: dict[str, tuple[Path, bool]]) -> dict[str, set[str]]:
    """module -> the arctic_platform modules it imports (``from pkg import sub`` is an edge to ``sub`` only: the
    package itself is imported on the way to any of its modules)."""
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, (path, is_pkg) in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = mod.split(".")[: None if is_pkg else -1]
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods]
                targets = subs if len(subs) == len(node.names) else [base, *subs]
            else:
                continue
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != mod:
                    graph[mod].add(t)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


@pytest.fixture(scope="module")
def graph():
    g = _graph(_modules())
    assert len(g) > 100 and sum(map(len, g.values())) > 300  # the walk saw the package
    return g


def test_no_import_circle(graph):
    assert _circles(graph) == []


def test_the_circle_finder_finds_one():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_client_and_server_do_not_import_each_other(graph):
    client, server = "arctic_platform.client", "arctic_platform.server"
    for a, b in ((client, server), (server, client)):
        arrows = sorted(f"{m} -> {t}" for m, ts in graph.items() if m.startswith(a) for t in ts if t.startswith(b))
        assert arrows == [], arrows
