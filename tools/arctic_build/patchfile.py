# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The patch format and its lint: ``series``, the DEP-3 header, and what a diff may touch.

A patch is ``NNNN-<area>-<slug>.patch``: a DEP-3 header, then a ``-p1`` unified diff (``a/`` ``b/``, no timestamps)
that only edits existing files under ``verl/``. ``git apply --numstat --summary`` says what a diff touches; the
rest (header fields, names, timestamps, prefixes) is checked here.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .errors import BuildError
from .gitcmd import first_error, git_apply
from .tree import REPO, rel_to_repo

DEP3_REQUIRED = ("Description", "Author", "Origin", "Forwarded", "Last-Update", "Covered-by")
PATCH_NAME_RE = re.compile(r"^(\d{4})-([a-z0-9_]+)-([a-z0-9][a-z0-9-]*)\.patch$")
# An upstream version as header and series wording writes it (0.9.1, 0.10.0.dev0, 0.9.10rc1).
VERSION = r"\d+(?:\.\d+)*(?:\.?[a-z]+\d*)*"
# Header wording that names the upstream version a patch was made for ("rebased onto 0.9.1"): kept current by export.
VERSION_WORDING_RE = re.compile(rf"\b(adapted to|rebased onto|ported to) (verl )?({VERSION})")
# A series comment's "verl <version>": export makes it name the set's version.
SERIES_VERSION_RE = re.compile(rf"\bverl {VERSION}")
HEADER_TEMPLATE = """Description: <one-line summary>
 <why no existing verl hook sufficed; what the hunk does>
Author: arctic-verl developers
Origin: vendor
Forwarded: no
Last-Update: {date}
Covered-by: tests/verl/<test file>
"""


@dataclass
class Patch:
    """One patch file: its DEP-3 header, the upstream files it edits and the range of each hunk."""

    path: Path
    headers: dict[str, str]
    files: list[str]  # the upstream files it edits, in patch order
    hunks: dict[str, list[str]] = field(default_factory=dict)  # file -> the '-a,b +c,d' range of each hunk

    @property
    def name(self) -> str:
        return self.path.name

    def hunk_label(self, file: str, index: int) -> str:
        """``hunk #N (-a,b +c,d)``, as failure messages name a hunk."""
        ranges = self.hunks.get(file, [])
        return f"hunk #{index} ({ranges[index - 1]})" if 0 < index <= len(ranges) else f"hunk #{index}"

    def hunk_count(self) -> int:
        return sum(len(r) for r in self.hunks.values())


def parse_headers(path: Path) -> dict[str, str]:
    """The DEP-3 header: the fields before the first diff line."""
    headers: dict[str, str] = {}
    last = None
    for raw in path.read_text().splitlines():
        if raw.startswith(("diff --git ", "--- ", "Index: ")):
            break
        if raw.startswith((" ", "\t")) and last:
            headers[last] += "\n" + raw.strip()
        elif re.match(r"^[A-Za-z][A-Za-z0-9-]*:", raw):
            key, value = raw.split(":", 1)
            headers[key] = value.strip()
            last = key
        elif raw.strip() in ("", "---"):
            last = None
        else:
            raise BuildError(f"patch {path.name}: header line {raw!r} is not a DEP-3 field (indent continuation lines)")
    return headers


def split_header(text: str) -> tuple[str, str]:
    """A patch file's text as (DEP-3 header, diff)."""
    m = re.search(r"^(diff --git |--- )", text, flags=re.M)
    return (text[: m.start()], text[m.start() :]) if m else (text, "")


def parse_patch(path: Path) -> Patch:
    """Headers from the file; which files the diff touches, and how, from ``git apply --numstat --summary``.

    Enforces the policy git alone would not: -p1 a/ b/ paths inside verl/, no timestamps, no created, deleted,
    renamed, mode-changed or binary file (new files belong in overlay/).
    """
    name = path.name
    headers = parse_headers(path)
    with tempfile.TemporaryDirectory(prefix="arctic-lint-") as td:
        r = git_apply(Path(td), path.resolve(), "--numstat", "--summary")
    if r.returncode != 0:
        err = first_error(r)
        if "No valid patches" in err:
            raise BuildError(f"patch {name}: contains no diff")
        raise BuildError(f"patch {name}: {err} (git apply); the diff is truncated or malformed")
    files = [_checked_file(name, line) for line in r.stdout.splitlines() if "\t" in line]
    for line in r.stdout.splitlines():
        if "\t" not in line:
            _refuse_summary(name, line)
    if not files:
        raise BuildError(f"patch {name}: contains no diff")
    return Patch(path, headers, files, _hunk_ranges(name, path.read_text().splitlines(), files))


def _checked_file(name: str, line: str) -> str:
    """The path of one ``--numstat`` line (added<TAB>deleted<TAB>path), refused when binary or outside verl/."""
    added, _, rel = line.split("\t", 2)
    if added == "-":
        raise BuildError(f"patch {name}: binary patches are not allowed ({rel})")
    parts = Path(rel).parts
    if rel.startswith("/") or ".." in parts or not parts:
        raise BuildError(f"patch {name}: path {rel!r} points outside the tree")
    if parts[0] != "verl":
        raise BuildError(f"patch {name}: path {rel!r} is outside verl/ (only the verl package ships)")
    return rel


def _refuse_summary(name: str, line: str) -> None:
    """A ``--summary`` line (create/delete/rename/copy/mode change): every one of them is refused."""
    word, _, rest = line.strip().partition(" ")
    target = rest.split()[-1] if rest.split() else rest
    if word == "create":
        raise BuildError(f"patch {name}: creates {target} ('--- /dev/null'); new files belong in overlay/")
    if word == "delete":
        raise BuildError(f"patch {name}: deletes {target}; patches may only edit upstream files")
    if word in ("rename", "copy"):
        raise BuildError(f"patch {name}: {word}s {rest}; not allowed")
    if word == "mode":
        raise BuildError(f"patch {name}: changes the mode of {target}; not allowed")
    raise BuildError(f"patch {name}: git apply --summary reports {line.strip()!r}; not allowed")


def _hunk_ranges(name: str, lines: list[str], files: list[str]) -> dict[str, list[str]]:
    """File -> the ``-a,b +c,d`` range of each of its hunks; refuses timestamps and non-``a/ b/`` paths."""
    hunks: dict[str, list[str]] = {}
    cur = None
    for i, line in enumerate(lines):
        for rel in files:
            for mark in (f"--- a/{rel}\t", f"+++ b/{rel}\t"):
                if line.startswith(mark):
                    raise BuildError(f"patch {name}: line {i + 1} carries a timestamp; refresh with --no-timestamps")
        if line.startswith("+++ ") and i and lines[i - 1].startswith("--- "):
            rel = line[4:]
            if not rel.startswith("b/") or not lines[i - 1].startswith("--- a/"):
                raise BuildError(f"patch {name}: line {i + 1} path {rel!r} must start with 'b/' (-p1, a/ b/)")
            cur = rel[2:]
            hunks.setdefault(cur, [])
        elif line.startswith("@@ -") and cur is not None:
            hunks[cur].append(line.split("@@")[1].strip())
    return hunks


def lint_headers(patch: Patch) -> None:
    """DEP-3 fields present, an ISO ``Last-Update``, a ``Covered-by`` test that exists (the file, and the test function
    when ``file::test`` names one), an ``NNNN-area-slug`` name."""
    missing = [k for k in DEP3_REQUIRED if not patch.headers.get(k)]
    if "Description" in missing and patch.headers.get("Subject"):
        missing.remove("Description")
    if "Author" in missing and patch.headers.get("From"):
        missing.remove("Author")
    if missing:
        raise BuildError(f"patch {patch.name}: DEP-3 header lacks {', '.join(missing)}")
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", patch.headers["Last-Update"]):
        raise BuildError(f"patch {patch.name}: Last-Update must be an ISO date (YYYY-MM-DD)")
    covered, _, test = (part.strip() for part in patch.headers["Covered-by"].partition("::"))
    if not covered.startswith("tests/") or not (REPO / covered).is_file():
        raise BuildError(f"patch {patch.name}: Covered-by names {covered!r}, which is not a file under tests/")
    if test and not re.search(rf"^(async )?def {re.escape(test)}\(", (REPO / covered).read_text(), re.M):
        raise BuildError(f"patch {patch.name}: Covered-by names {test!r}, which is not a test in {covered}")
    if not PATCH_NAME_RE.match(patch.name):
        raise BuildError(f"patch {patch.name}: name must be NNNN-<area>-<slug>.patch")


def stale_wording(patch: Patch, version: str) -> list[str]:
    """Header wording that names another upstream version than the set's ('rebased onto 0.9.1' in verl-0.9.0)."""
    out = []
    for key in ("Description", "Origin"):
        for m in VERSION_WORDING_RE.finditer(patch.headers.get(key, "")):
            if m.group(3) != version:
                out.append(
                    f"patch {patch.name}: {key} says '{m.group(0)}' in the verl-{version} set "
                    "(stale; ./build.sh export refreshes it)"
                )
    return out


def read_series(folder: Path) -> list[str]:
    """The patch names ``folder/series`` lists, in order; refuses duplicates, missing and unlisted patch files."""
    path = folder / "series"
    if not path.is_file():
        raise BuildError(f"{rel_to_repo(path)} is missing")
    names = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.split()[0] != line:
            raise BuildError(f"{rel_to_repo(path)}: options after a patch name are not supported: {raw!r}")
        names.append(line)
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise BuildError(f"{rel_to_repo(path)}: listed twice: {', '.join(dupes)}")
    on_disk = sorted(p.name for p in folder.glob("*.patch"))
    missing = [n for n in names if n not in on_disk]
    if missing:
        raise BuildError(f"{rel_to_repo(path)}: series entry {missing[0]} has no file in {folder.name}/")
    unlisted = [n for n in on_disk if n not in names]
    if unlisted:
        raise BuildError(f"{folder.name}/{unlisted[0]} is not listed in series (add it or delete it)")
    return names


def load_series(folder: Path) -> list[Patch]:
    """Every patch of the set, parsed and linted, in series order."""
    patches = []
    for name in read_series(folder):
        p = parse_patch(folder / name)
        lint_headers(p)
        patches.append(p)
    return patches
