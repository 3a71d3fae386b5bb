# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the client tests: one real server on 127.0.0.1 per module (``serve_server`` in the parent conftest); for
the Cortex tests the fake SnowAPI (``fake_snowapi.py``: a fake, Snowflake Cortex is unreachable here), a virtual
clock whose sleeps do not wait, and a self-signed TLS certificate for the PAT tests."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def onprem_server(tiny_model_dir, tmp_path_factory, serve_server):
    """A server with the tiny model and ``--max-seq-len 64``; ``.url``, ``.work`` (its working folder)."""
    work = tmp_path_factory.mktemp("onprem")
    with serve_server(work, "--model", str(tiny_model_dir), "--max-seq-len", "64") as s:
        s.work = work
        yield s


HERE = Path(__file__).parent


def _load_fake():
    name = "arctic_test_fake_snowapi"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / "fake_snowapi.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses resolve their module by name
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def fake_mod():
    """The ``fake_snowapi`` module (``FakeSnowAPI``, ``Fault``, ``CannedBackend``, ``EmbeddedBackend``)."""
    return _load_fake()


@pytest.fixture
def fake(fake_mod):
    """A fresh fake with the canned backend (no model), database ``DB``, schema ``SCH``."""
    with fake_mod.FakeSnowAPI() as f:
        yield f


class VirtualClock:
    """A monotonic clock that only the sleeps advance; each sleep yields for a millisecond of real time (so the fake's
    thread runs) and is recorded."""

    def __init__(self):
        self.t = 0.0
        self.sleeps: list[float] = []
        self.hooks: list = []
        """Called (no arguments) on the next sleep, each once: e.g. the fake accepting connections again."""

    def __call__(self) -> float:
        return self.t

    async def sleep(self, delay: float) -> None:
        self.sleeps.append(delay)
        self.t += delay
        hooks, self.hooks = self.hooks, []
        for h in hooks:
            await asyncio.to_thread(h)
        await asyncio.sleep(0.001)


@pytest.fixture
def clock():
    return VirtualClock()


@pytest.fixture(scope="session")
def tls_cert(tmp_path_factory):
    """``(cert_file, key_file)``: a self-signed certificate for 127.0.0.1 (it is its own CA)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    d = tmp_path_factory.mktemp("tls")
    cert_file, key_file = d / "cert.pem", d / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file
