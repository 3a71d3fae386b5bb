# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The two errors of the build tool; the cli prints either as ``build: <reason>`` and exits 1."""

from __future__ import annotations


class BuildError(Exception):
    """A build input is wrong; the message is the one-line reason shown to the user."""


class CheckFailed(BuildError):
    """Several problems found in one run (``check``); each is one line."""

    def __init__(self, problems: list[str], summary: str):
        super().__init__(summary)
        self.problems = problems
