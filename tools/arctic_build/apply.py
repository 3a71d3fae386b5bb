# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Applying one patch with ``git apply`` at zero fuzz and zero offset, and reading git's account of every hunk.

``git apply --check -v`` first; a patch that applies cleanly and exactly where it says is then applied. Otherwise
``git apply --reject -v`` applies what applies, leaves the rest in ``<file>.rej``, and its verbose output is parsed
into one :class:`Finding` per failing or offset hunk, named by patch, file and hunk.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .errors import BuildError
from .gitcmd import first_error, git_apply
from .patchfile import Patch

_HUNK_OFFSET = re.compile(r"^Hunk #(\d+) succeeded at (\d+) \(offset (-?\d+) lines?\)\.$")
_HUNK_REJECTED = re.compile(r"^Rejected hunk #(\d+)\.$")
_FILE_LINE = re.compile(r"^(?:Checking patch|Applying patch) (.+?)(?:\.\.\.| with \d+ rejects?\.\.\.)$")
# error lines that only repeat what the hunk lines above already say
_HUNK_ERROR = re.compile(r"^error: (while searching for|patch failed:|.*: patch does not apply)")


@dataclass
class Finding:
    """One hunk (or whole patch) that did not apply cleanly."""

    patch: str
    file: str
    hunk: str  # 'hunk #N (-a,b +c,d)', or '' for a whole-file problem
    why: str
    offset_only: bool = False

    def __str__(self) -> str:
        where = f"{self.file}: {self.hunk} " if self.hunk else (f"{self.file}: " if self.file else "")
        return f"patch {self.patch}: {where}{self.why}"


def apply_patch(patch: Patch, root: Path, keep_going: bool = False) -> list[Finding]:
    """Apply ``patch`` to ``root`` with ``git apply``: zero fuzz (full context), and report any offset.

    Returns:
        Every failing or offset hunk (empty when the patch applied exactly). Failing hunks are left in ``.rej``.

    Raises:
        BuildError: without ``keep_going``, for the first finding (the caller works in a scratch tree and throws it
            away: nothing half-applied ships).
    """
    for rel in patch.files:
        if not (root / rel).is_file():
            finding = Finding(patch.name, rel, "", "does not exist upstream (patches edit existing files only)")
            if not keep_going:
                raise BuildError(str(finding))
            return [finding]
    path = patch.path.resolve()
    r = git_apply(root, path, "--check", "-v")
    offsets = [line for line in r.stderr.splitlines() if _HUNK_OFFSET.match(line)]
    if r.returncode == 0 and not offsets:
        r = git_apply(root, path)
        if r.returncode != 0:
            raise BuildError(f"patch {patch.name}: {first_error(r)} (git apply)")
        return []
    r = git_apply(root, path, "--reject", "-v")
    findings = parse_apply_output(patch, r.stderr)
    if not findings and r.returncode != 0:
        findings.append(Finding(patch.name, "", "", f"{first_error(r)} (git apply)"))
    if findings and not keep_going:
        first = next((f for f in findings if not f.offset_only), findings[0])
        more = len(findings) - 1
        raise BuildError(str(first) + (f" (and {more} more; ./build.sh check lists them all)" if more else ""))
    return findings


def parse_apply_output(patch: Patch, stderr: str) -> list[Finding]:
    """The findings in ``git apply --reject -v``'s output, in patch order of the files, then hunk number."""
    findings: list[Finding] = []
    cur = ""
    for line in stderr.splitlines():
        if m := _FILE_LINE.match(line):
            cur = m.group(1)
        elif m := _HUNK_OFFSET.match(line):
            n, at, off = int(m.group(1)), int(m.group(2)), int(m.group(3))
            why = f"applies only at offset {off:+d} (line {at}); zero offset: refresh the patch"
            findings.append(Finding(patch.name, cur, patch.hunk_label(cur, n), why, offset_only=True))
        elif m := _HUNK_REJECTED.match(line):
            why = "does not apply (context differs; zero fuzz)"
            findings.append(Finding(patch.name, cur, patch.hunk_label(cur, int(m.group(1))), why))
        elif line.startswith("error: ") and not _HUNK_ERROR.match(line):
            findings.append(Finding(patch.name, "", "", f"{line[len('error: ') :]} (git apply)"))

    def order(f: Finding):
        n = re.match(r"hunk #(\d+)", f.hunk)
        return (patch.files.index(f.file) if f.file in patch.files else -1, int(n.group(1)) if n else 0)

    return sorted(findings, key=order)


def remove_rejects(root: Path) -> list[Path]:
    """Delete every ``.rej`` file under ``root``; return them."""
    found = sorted(root.rglob("*.rej"))
    for p in found:
        p.unlink()
    return found
