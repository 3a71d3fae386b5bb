# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""``arctic-verl probe`` of a script's effective overrides against a running embedded server (the corpus tests')."""

from __future__ import annotations

PROBE_OK = (
    "capability check: 0 refusal(s) by the embedded arctic-verl server",
    "ok   update_actor: POST /forward-backward + POST /step",
    "ok   compute_log_prob: POST /forward (training job)",
    "ok   generate: POST /generate",
    "ok   update_weights: weight sync training -> sampling",
    "probe: OK",
)
"""What the probe prints for a script the embedded server runs: one update, log-probs, a generate, a weight sync."""


def probe_ok(server, overrides: list[str]) -> str:
    """Probe ``overrides`` against ``server`` (the ``probe_server`` fixture: ``url`` and ``work``); asserts that every
    call passed and returns the probe's text."""
    from arctic_platform.integrations.verl.probe import probe

    effective = [
        *overrides,
        f"trainer.default_local_dir={server.work / 'ckpt'}",
        "remote_backend.arctic.backend.type=onprem",
        f"remote_backend.arctic.backend.url={server.url}",
    ]
    out: list[str] = []
    rc = probe(effective, out=out.append)
    text = "\n".join(out)
    assert rc == 0, text
    for line in PROBE_OK:
        assert line in text, (line, text)
    return text
