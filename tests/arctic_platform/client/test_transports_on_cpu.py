# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The client calls one transport interface (arctic_platform.client.transports) and never asks which transport it
holds: ``client.py`` names no backend, and each backend type gets its own implementation of the whole interface."""

from __future__ import annotations

import ast
import inspect

import pytest

import arctic_platform.client.client as client_module
from arctic_platform.client import ArcticRLClientConfig
from arctic_platform.client.transports import Transport, config_fields, transport_for
from arctic_platform.client.transports.cortex import CortexTransport
from arctic_platform.client.transports.onprem import LocalTransport, OnPremTransport

BACKENDS = {"local", "onprem", "cortex"}


def _code_nodes(tree: ast.AST):
    """Every node of ``tree`` except docstrings (a docstring may say what Cortex does; code may not branch on it)."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [n for n in ast.walk(tree) if id(n) not in docstrings]


def test_the_client_names_no_backend():
    tree = ast.parse(inspect.getsource(client_module))
    names, compared = [], []
    for node in _code_nodes(tree):
        if isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
        elif isinstance(node, ast.alias):
            names.append(node.name)
        elif isinstance(node, ast.ImportFrom):
            names.append(node.module or "")
        elif isinstance(node, ast.Compare):
            compared += [c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    assert len(names) > 500 and "AsyncArcticRLClient" in names  # the walk saw the client's code
    backend_words = ("cortex", "snowapi", "localconfig", "onprem", "localtransport", "localserver", "httpsession")
    named = sorted({n for n in names if any(w in n.lower() for w in backend_words)})
    assert named == [], f"client.py names a backend: {named}"
    assert not BACKENDS & set(compared), f"client.py compares with a backend type: {BACKENDS & set(compared)}"


@pytest.mark.parametrize(
    "backend, cls",
    [
        ({"type": "local"}, LocalTransport),
        ({"type": "onprem", "url": "http://127.0.0.1:1"}, OnPremTransport),
        ({"type": "cortex", "base_url": "http://127.0.0.1:1", "database": "D", "schema": "S"}, CortexTransport),
    ],
)
def test_each_backend_type_gets_a_whole_implementation(backend, cls):
    cfg = ArcticRLClientConfig(model_name="m", backend=backend)
    jobs = {"training": None, "sampling": None, "log_prob": None}
    t = transport_for(cfg, jobs)
    assert type(t) is cls and isinstance(t, Transport)
    assert not getattr(cls, "__abstractmethods__", None)  # every method of the interface is implemented
    assert t.jobs is jobs  # the client's job ids, which create_jobs fills
    assert t.owned == [] and t.url is None  # nothing reached or created before connect()


def test_a_reconnect_handle_names_its_backends_config():
    onprem = config_fields({"backend": "local", "url": "http://127.0.0.1:5", "token_env_var": "T"})
    assert onprem["backend"].type == "onprem" and onprem["backend"].url == "http://127.0.0.1:5"  # never owns it
    cortex = config_fields(
        {"backend": "cortex", "cortex": {"base_url": "http://h", "database": "D", "schema": "S"}, "max_seq_len": 64}
    )
    assert cortex["backend"].type == "cortex" and cortex["max_seq_len"] == 64
