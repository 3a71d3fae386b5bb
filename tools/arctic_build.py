# Copyright 2026 The arctic-verl Authors
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
# SPDX-License-Identifier: Apache-2.0
"""Build logic behind ``./build.sh``: pin, verify, patch, overlay, manifest.

Standard library only, so it runs before any environment exists. Every failure raises
:class:`BuildError` with a one-line reason; ``main`` prints it as ``build: <reason>`` and exits 1.

Subcommands (``python3 tools/arctic_build.py <cmd> --help``):

* ``fetch``     download the pinned sdist into the cache (or take ``--sdist``) and verify its sha256.
* ``prepare``   build ``build/src/verl`` atomically: extract, apply the series (zero fuzz), copy the overlay,
                write the build manifest and the stamp that ``setup.py`` checks.
* ``check``     lint every ``patches/verl-*/`` folder and apply it to its pinned upstream in a scratch dir.
* ``stamp``     print the input stamp (hash of everything that goes into the wheel).
* ``edit`` / ``export``  turn the series into git commits under ``build/edit`` and back into patch files.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PATCHES_ROOT = REPO / "patches"
OVERLAY_ROOT = REPO / "overlay"
# Everything that ships besides the patched verl tree. Changing any of these bumps N.
SHIPPED_PATHS = (
    "patches",
    "overlay",
    "arctic_platform",
    "kernels",
    "setup.py",
    "pyproject.toml",
    "tools/arctic_build.py",
)
DEP3_REQUIRED = ("Description", "Author", "Origin", "Forwarded", "Last-Update", "Covered-by")
PATCH_NAME_RE = re.compile(r"^(\d{4})-([a-z0-9_]+)-([a-z0-9][a-z0-9-]*)\.patch$")
HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
IGNORED_NAMES = {"__pycache__", ".DS_Store"}
IGNORED_SUFFIXES = (".pyc", ".pyo", ".orig", ".rej")


class BuildError(Exception):
    """A build input is wrong; the message is the one-line reason shown to the user."""


# ---------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def iter_files(root: Path):
    """Yield files under ``root`` in sorted order, skipping caches and patch leftovers."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_NAMES and d != ".pc")
        for name in sorted(filenames):
            if name in IGNORED_NAMES or name.endswith(IGNORED_SUFFIXES):
                continue
            yield Path(dirpath) / name


def tree_digest(root: Path) -> str:
    """sha256 over (relative path, content sha256) of every file under ``root``."""
    h = hashlib.sha256()
    for p in iter_files(root):
        rel = p.relative_to(root).as_posix()
        h.update(rel.encode() + b"\0" + sha256_file(p).encode() + b"\n")
    return h.hexdigest()


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


# ---------------------------------------------------------------------------------------------
# The pin
# ---------------------------------------------------------------------------------------------


@dataclass
class Upstream:
    folder: Path
    version: str
    sdist: str
    sha256: str
    tree_sha256: str
    url: str
    project: str

    @classmethod
    def load(cls, folder: Path) -> Upstream:
        path = folder / "UPSTREAM"
        if not path.is_file():
            raise BuildError(f"{path.relative_to(REPO)} is missing: every patches/verl-<version>/ needs its pin")
        data: dict[str, str] = {}
        for lineno, raw in enumerate(path.read_text().splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if "=" not in line:
                raise BuildError(f"{path.relative_to(REPO)}:{lineno}: expected 'key = value', got {raw!r}")
            key, value = (s.strip() for s in line.split("=", 1))
            data[key] = value
        missing = [k for k in ("version", "sdist", "sha256", "tree_sha256", "url", "project") if k not in data]
        if missing:
            raise BuildError(f"{path.relative_to(REPO)}: missing keys {missing}")
        if folder.name != f"verl-{data['version']}":
            raise BuildError(f"{path.relative_to(REPO)}: version {data['version']} does not match folder {folder.name}")
        if not re.fullmatch(r"[0-9a-f]{64}", data["sha256"]):
            raise BuildError(f"{path.relative_to(REPO)}: sha256 must be 64 lowercase hex digits")
        return cls(
            folder, data["version"], data["sdist"], data["sha256"], data["tree_sha256"], data["url"], data["project"]
        )


def patch_folders() -> list[Path]:
    def key(p: Path):
        return tuple(int(x) if x.isdigit() else x for x in re.split(r"[.]", p.name[len("verl-") :]))

    return sorted((p for p in PATCHES_ROOT.glob("verl-*") if p.is_dir()), key=key)


def default_folder() -> Path:
    folders = patch_folders()
    if not folders:
        raise BuildError("no patches/verl-<version>/ folder")
    return folders[-1]


def cache_dir() -> Path:
    base = os.environ.get("ARCTIC_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "arctic-verl"
    )
    return Path(base)


def fetch_sdist(up: Upstream, sdist: Path | None = None) -> Path:
    """Return a verified sdist path: the given one, the cached one, or a fresh download."""
    if sdist is not None:
        if not sdist.is_file():
            raise BuildError(f"--sdist {sdist}: no such file")
        verify_sha(sdist, up)
        return sdist
    target = cache_dir() / "sdist" / up.sdist
    if target.is_file():
        verify_sha(target, up)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".part-{os.getpid()}")
    try:
        try:
            with urllib.request.urlopen(up.url, timeout=120) as resp, open(tmp, "wb") as out:
                shutil.copyfileobj(resp, out)
        except OSError as direct_err:
            # Fall back to pip, which honours the machine's index configuration and proxies.
            tmpdir = Path(tempfile.mkdtemp(prefix="arctic-sdist-"))
            try:
                r = subprocess.run(
                    [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q", "-d",
                     str(tmpdir), f"{up.project}=={up.version}"],
                    capture_output=True, text=True, timeout=600,
                )  # fmt: skip
                got = tmpdir / up.sdist
                if r.returncode != 0 or not got.is_file():
                    raise BuildError(
                        f"could not download {up.sdist} ({direct_err}; pip: {r.stderr.strip().splitlines()[-1:]}); "
                        "pass --sdist PATH or --source DIR for an offline build"
                    ) from None
                shutil.move(str(got), tmp)
            finally:
                shutil.rmtree(tmpdir, ignore_errors=True)
        verify_sha(tmp, up)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def verify_sha(path: Path, up: Upstream) -> None:
    got = sha256_file(path)
    if got != up.sha256:
        raise BuildError(
            f"sha256 mismatch for {path}: got {got}, pinned {up.sha256} in "
            f"{(up.folder / 'UPSTREAM').relative_to(REPO)}; refusing a tampered or wrong sdist"
        )


def extract_verl(sdist: Path, up: Upstream, dest: Path) -> None:
    """Extract only ``<top>/verl/`` of the sdist into ``dest/verl`` (no tests/, no scripts/)."""
    top = f"{up.project}-{up.version}/"
    with tarfile.open(sdist, "r:gz") as tf:
        members = []
        for m in tf.getmembers():
            name = m.name
            if not name.startswith(top + "verl/") and name != top + "verl":
                continue
            rel = name[len(top) :]
            parts = Path(rel).parts
            if rel.startswith("/") or ".." in parts:
                raise BuildError(f"{sdist.name}: unsafe member path {name!r}")
            if not (m.isfile() or m.isdir()):
                raise BuildError(f"{sdist.name}: member {name!r} is not a regular file or directory")
            if any(p in IGNORED_NAMES for p in parts) or rel.endswith(IGNORED_SUFFIXES):
                continue
            members.append((m, rel))
        if not members:
            raise BuildError(f"{sdist.name}: no {top}verl/ directory inside")
        for m, rel in members:
            out = dest / rel
            if m.isdir():
                out.mkdir(parents=True, exist_ok=True)
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            src = tf.extractfile(m)
            assert src is not None
            out.write_bytes(src.read())
            os.chmod(out, 0o644)


def copy_verl_source(source: Path, dest: Path) -> None:
    src = source / "verl" if (source / "verl").is_dir() else source
    if not (src / "__init__.py").is_file() or src.name != "verl":
        raise BuildError(f"--source {source}: expected an unpacked verl tree (a directory holding verl/__init__.py)")
    for p in iter_files(src):
        out = dest / "verl" / p.relative_to(src)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(p.read_bytes())
        os.chmod(out, 0o644)


# ---------------------------------------------------------------------------------------------
# Patches: DEP-3 header + strict unified diff
# ---------------------------------------------------------------------------------------------


@dataclass
class Hunk:
    index: int  # 1-based within its file
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    header: str
    lines: list[str]  # with their ' ', '-', '+' prefix; '\\' markers attached to the previous line

    def old_new(self) -> tuple[list[str], list[str]]:
        old, new = [], []
        for i, line in enumerate(self.lines):
            tag, body = line[0], line[1:]
            nonl = i + 1 < len(self.lines) and self.lines[i + 1].startswith("\\")
            if tag == "\\":
                continue
            text = body if nonl else body + "\n"
            if tag in " -":
                old.append(text)
            if tag in " +":
                new.append(text)
        return old, new


@dataclass
class FilePatch:
    path: str
    hunks: list[Hunk] = field(default_factory=list)


@dataclass
class Patch:
    path: Path
    headers: dict[str, str]
    files: list[FilePatch]

    @property
    def name(self) -> str:
        return self.path.name


def parse_patch(path: Path) -> Patch:
    name = path.name
    text = path.read_text()
    lines = text.splitlines()
    # Header: everything before the first 'diff --git', '---' or 'Index:' line.
    i = 0
    header_lines: list[str] = []
    while i < len(lines) and not lines[i].startswith(("diff --git ", "--- ", "Index: ")):
        header_lines.append(lines[i])
        i += 1
    headers: dict[str, str] = {}
    last = None
    for raw in header_lines:
        if raw.startswith((" ", "\t")) and last:
            headers[last] += "\n" + raw.strip()
        elif re.match(r"^[A-Za-z][A-Za-z0-9-]*:", raw):
            key, value = raw.split(":", 1)
            headers[key] = value.strip()
            last = key
        elif raw.strip() in ("", "---"):
            last = None
        else:
            raise BuildError(f"patch {name}: header line {raw!r} is not a DEP-3 field (indent continuation lines)")
    files: list[FilePatch] = []
    cur: FilePatch | None = None
    while i < len(lines):
        line = lines[i]
        if line.startswith(("diff --git ", "index ", "Index: ", "====")):
            i += 1
            continue
        if line.startswith(("new file mode", "deleted file mode", "rename from", "rename to", "similarity index")):
            raise BuildError(f"patch {name}: {line.split(' mode')[0]} is not allowed; new files belong in overlay/")
        if line.startswith("GIT binary patch") or line.startswith("Binary files"):
            raise BuildError(f"patch {name}: binary patches are not allowed")
        if line.startswith("--- "):
            if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
                raise BuildError(f"patch {name}: '---' line without '+++' at line {i + 1}")
            old_path = _diff_path(name, line[4:], "a/", i + 1)
            new_path = _diff_path(name, lines[i + 1][4:], "b/", i + 2)
            if old_path is None:
                raise BuildError(f"patch {name}: creates {new_path} ('--- /dev/null'); new files belong in overlay/")
            if new_path is None:
                raise BuildError(f"patch {name}: deletes {old_path}; patches may only edit upstream files")
            if old_path != new_path:
                raise BuildError(f"patch {name}: renames {old_path} -> {new_path}; not allowed")
            cur = FilePatch(old_path)
            files.append(cur)
            i += 2
            continue
        m = HUNK_RE.match(line)
        if m:
            if cur is None:
                raise BuildError(f"patch {name}: hunk before any file header at line {i + 1}")
            old_start, old_len = int(m.group(1)), int(m.group(2) or "1")
            new_start, new_len = int(m.group(3)), int(m.group(4) or "1")
            hunk = Hunk(len(cur.hunks) + 1, old_start, old_len, new_start, new_len, line, [])
            i += 1
            seen_old = seen_new = 0
            while i < len(lines) and (seen_old < old_len or seen_new < new_len or lines[i].startswith("\\")):
                body = lines[i]
                if body == "":
                    body = " "  # some editors strip the space of an empty context line
                tag = body[0]
                if tag not in " -+\\":
                    raise BuildError(
                        f"patch {name}: {cur.path} hunk #{hunk.index} ({line}) is truncated or malformed"
                        f" at line {i + 1}"
                    )
                if tag in " -":
                    seen_old += 1
                if tag in " +":
                    seen_new += 1
                hunk.lines.append(body)
                i += 1
            if seen_old != old_len or seen_new != new_len:
                raise BuildError(
                    f"patch {name}: {cur.path} hunk #{hunk.index} ({line}) line counts do not match its header"
                )
            cur.hunks.append(hunk)
            continue
        if line.strip() == "" or line.startswith("-- "):  # trailing blank / format-patch signature
            i += 1
            continue
        raise BuildError(f"patch {name}: unexpected line {i + 1}: {line[:80]!r}")
    if not files:
        raise BuildError(f"patch {name}: contains no diff")
    return Patch(path, headers, files)


def _diff_path(name: str, raw: str, prefix: str, lineno: int) -> str | None:
    if "\t" in raw:
        raise BuildError(f"patch {name}: line {lineno} carries a timestamp; refresh with --no-timestamps")
    if raw == "/dev/null":
        return None
    if not raw.startswith(prefix):
        raise BuildError(f"patch {name}: line {lineno} path {raw!r} must start with {prefix!r} (-p1, a/ b/)")
    rel = raw[len(prefix) :]
    parts = Path(rel).parts
    if rel.startswith("/") or ".." in parts or not parts:
        raise BuildError(f"patch {name}: path {raw!r} points outside the tree")
    if parts[0] != "verl":
        raise BuildError(f"patch {name}: path {raw!r} is outside verl/ (only the verl package ships)")
    return rel


def lint_headers(patch: Patch) -> None:
    missing = [k for k in DEP3_REQUIRED if not patch.headers.get(k)]
    if "Description" in missing and patch.headers.get("Subject"):
        missing.remove("Description")
    if "Author" in missing and patch.headers.get("From"):
        missing.remove("Author")
    if missing:
        raise BuildError(f"patch {patch.name}: DEP-3 header lacks {', '.join(missing)}")
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", patch.headers["Last-Update"]):
        raise BuildError(f"patch {patch.name}: Last-Update must be an ISO date (YYYY-MM-DD)")
    covered = patch.headers["Covered-by"].split("::")[0].strip()
    if not covered.startswith("tests/") or not (REPO / covered).is_file():
        raise BuildError(f"patch {patch.name}: Covered-by names {covered!r}, which is not a file under tests/")
    if not PATCH_NAME_RE.match(patch.name):
        raise BuildError(f"patch {patch.name}: name must be NNNN-<area>-<slug>.patch")


def read_series(folder: Path) -> list[str]:
    path = folder / "series"
    if not path.is_file():
        raise BuildError(f"{path.relative_to(REPO)} is missing")
    names = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.split()[0] != line:
            raise BuildError(f"{path.relative_to(REPO)}: options after a patch name are not supported: {raw!r}")
        names.append(line)
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise BuildError(f"{path.relative_to(REPO)}: listed twice: {', '.join(dupes)}")
    on_disk = sorted(p.name for p in folder.glob("*.patch"))
    missing = [n for n in names if n not in on_disk]
    if missing:
        raise BuildError(f"{path.relative_to(REPO)}: series entry {missing[0]} has no file in {folder.name}/")
    unlisted = [n for n in on_disk if n not in names]
    if unlisted:
        raise BuildError(f"{folder.name}/{unlisted[0]} is not listed in series (add it or delete it)")
    return names


def load_series(folder: Path) -> list[Patch]:
    patches = []
    for name in read_series(folder):
        p = parse_patch(folder / name)
        lint_headers(p)
        patches.append(p)
    return patches


def apply_patch(patch: Patch, root: Path) -> list[str]:
    """Apply ``patch`` to ``root`` with zero fuzz. Returns notes about hunks that applied at an offset.

    All files of the patch are computed in memory first and written only when every hunk applied,
    so a failing patch never leaves a half-edited file behind.
    """
    notes: list[str] = []
    results: dict[Path, str] = {}
    for fp in patch.files:
        target = root / fp.path
        if not target.is_file():
            raise BuildError(
                f"patch {patch.name}: {fp.path} does not exist upstream (patches edit existing files only)"
            )
        text = results.get(target, target.read_text())
        lines = text.splitlines(keepends=True)
        offset = 0
        floor = 0  # hunks must apply in order, without overlapping
        for h in fp.hunks:
            old, new = h.old_new()
            want = max(h.old_start - 1 + offset, 0) if h.old_len else h.old_start + offset
            pos = _find_exact(lines, old, want, floor)
            if pos is None:
                raise BuildError(
                    f"patch {patch.name}: {fp.path}: hunk #{h.index} ({h.header.split('@@')[1].strip()}) "
                    "does not apply (context differs; zero fuzz)"
                )
            if pos != want:
                notes.append(f"{patch.name}: {fp.path} hunk #{h.index} applies at offset {pos - want:+d}")
            lines[pos : pos + len(old)] = new
            offset += len(new) - len(old) + (pos - want)
            floor = pos + len(new)
        results[target] = "".join(lines)
    for target, text in results.items():
        target.write_text(text)
    return notes


def _find_exact(lines: list[str], old: list[str], want: int, floor: int) -> int | None:
    n = len(old)
    limit = len(lines) - n
    if limit < floor:
        return None
    for delta in range(0, max(limit - floor, want - floor) + 1):
        for pos in (want - delta, want + delta) if delta else (want,):
            if floor <= pos <= limit and lines[pos : pos + n] == old:
                return pos
    return None


def copy_overlay(dest: Path) -> list[tuple[str, str]]:
    """Copy overlay/verl/** into dest/verl; refuse to overwrite an upstream file."""
    out = []
    src_root = OVERLAY_ROOT / "verl"
    if not src_root.is_dir():
        return out
    for p in iter_files(src_root):
        rel = Path("verl") / p.relative_to(src_root)
        target = dest / rel
        if target.exists():
            raise BuildError(
                f"overlay/{rel.as_posix()} would overwrite the upstream file {rel.as_posix()}; "
                "change upstream files with a patch in patches/, not the overlay"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, target)
        os.chmod(target, 0o644)
        out.append((rel.as_posix(), sha256_file(p)))
    stray = [
        p for p in OVERLAY_ROOT.iterdir() if p.name not in ("verl", "PROVENANCE.md") and p.name not in IGNORED_NAMES
    ]
    if stray:
        raise BuildError(f"overlay/{stray[0].name}: the overlay holds only verl/ and PROVENANCE.md")
    return out


# ---------------------------------------------------------------------------------------------
# Stamp, build number, manifest
# ---------------------------------------------------------------------------------------------


def input_stamp(folder: Path) -> str:
    """Hash of every input of the wheel (except the upstream sdist, pinned by its sha in UPSTREAM)."""
    h = hashlib.sha256()
    for rel in SHIPPED_PATHS:
        p = REPO / rel
        if p.is_file():
            h.update(rel.encode() + b"\0" + sha256_file(p).encode() + b"\n")
        elif p.is_dir():
            for f in iter_files(p):
                h.update(f.relative_to(REPO).as_posix().encode() + b"\0" + sha256_file(f).encode() + b"\n")
    h.update(b"folder\0" + folder.name.encode())
    h.update(f"\0N={build_number()}\0SOURCE_DATE_EPOCH={source_date_epoch()}".encode())
    return h.hexdigest()


def build_number() -> int:
    """N in ``<upstream>+arctic.<N>``: commits that touched shipped content (conda-forge's build number)."""
    env = os.environ.get("ARCTIC_BUILD_NUMBER")
    if env:
        if not env.isdigit():
            raise BuildError(f"ARCTIC_BUILD_NUMBER={env!r} must be a non-negative integer")
        return int(env)
    try:
        if git("rev-parse", "--is-shallow-repository") == "true":
            raise BuildError(
                "shallow git clone: N is a commit count; run 'git fetch --unshallow' or set ARCTIC_BUILD_NUMBER"
            )
        return int(git("rev-list", "--count", "HEAD", "--", *SHIPPED_PATHS) or "0")
    except (OSError, subprocess.CalledProcessError):
        raise BuildError("not a git checkout: set ARCTIC_BUILD_NUMBER to build outside git") from None


def source_date_epoch() -> int:
    env = os.environ.get("SOURCE_DATE_EPOCH")
    if env:
        return int(env)
    try:  # the last commit that touched shipped content, so docs-only commits do not change the wheel
        return int(git("log", "-1", "--format=%ct", "--", *SHIPPED_PATHS))
    except (OSError, subprocess.CalledProcessError, ValueError):
        return 315532800  # 1980-01-01, the earliest zip timestamp


def prepare(folder: Path, sdist: Path | None, source: Path | None, out: Path, quiet: bool = False) -> dict:
    """Create ``out`` (e.g. build/src) atomically. Returns the manifest."""
    up = Upstream.load(folder)
    patches = load_series(folder)
    number = build_number()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".tmp-", dir=out.parent))
    try:
        if source is not None:
            copy_verl_source(source, tmp)
            upstream_kind, sdist_sha = f"source tree {source.name}", None
        else:
            path = fetch_sdist(up, sdist)
            extract_verl(path, up, tmp)
            upstream_kind, sdist_sha = up.sdist, up.sha256
        digest = tree_digest(tmp / "verl")
        if digest != up.tree_sha256:
            raise BuildError(
                f"upstream verl tree digest {digest} does not match tree_sha256 pinned in "
                f"{(folder / 'UPSTREAM').relative_to(REPO)} ({upstream_kind} is not verl {up.version})"
            )
        notes = []
        for p in patches:
            notes += apply_patch(p, tmp)
        overlay = copy_overlay(tmp)
        for name in ("arctic_build_manifest.json",):
            if (tmp / "verl" / name).exists():
                raise BuildError(f"upstream verl {up.version} already has verl/{name}; rename the build manifest")
        manifest = {
            "distribution": "verl",
            "version": f"{up.version}+arctic.{number}",
            "build_number": number,
            "upstream": {"project": up.project, "version": up.version, "sdist": up.sdist, "sha256": up.sha256,
                         "tree_sha256": up.tree_sha256, "verified_sdist_sha256": sdist_sha},
            "patch_folder": folder.name,
            "patches": [{"name": p.name, "sha256": sha256_file(p.path)} for p in patches],
            "overlay": [{"path": rel, "sha256": sha} for rel, sha in overlay],
            "arctic_platform_sha256": (
                tree_digest(REPO / "arctic_platform") if (REPO / "arctic_platform").is_dir() else None
            ),
            "kernels_sha256": tree_digest(REPO / "kernels") if (REPO / "kernels").is_dir() else None,
            "input_stamp": input_stamp(folder),
            "source_date_epoch": source_date_epoch(),
        }  # fmt: skip
        (tmp / "verl" / "arctic_build_manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        (tmp / "BUILD_INFO.json").write_text(
            json.dumps(
                {"version": manifest["version"], "input_stamp": manifest["input_stamp"], "patch_folder": folder.name},
                sort_keys=True,
            )
            + "\n"
        )
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
        if notes and not quiet:
            for n in notes:
                print(f"build: note: {n} (refresh the patch)", file=sys.stderr)
        return manifest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check(folders: list[Path], sdist: Path | None, source: Path | None) -> list[str]:
    """Lint + apply each folder's series to its own pinned upstream in a scratch dir. Returns report lines."""
    report = []
    for folder in folders:
        up = Upstream.load(folder)
        patches = load_series(folder)
        with tempfile.TemporaryDirectory(prefix="arctic-check-") as td:
            root = Path(td)
            if source is not None:
                copy_verl_source(source, root)
            else:
                extract_verl(fetch_sdist(up, sdist), up, root)
            digest = tree_digest(root / "verl")
            if digest != up.tree_sha256:
                raise BuildError(f"{folder.name}: upstream tree digest {digest} != pinned tree_sha256")
            offsets = []
            hunks = 0
            for p in patches:
                offsets += apply_patch(p, root)
                hunks += sum(len(f.hunks) for f in p.files)
            copy_overlay(root)
            if offsets:
                raise BuildError(f"{folder.name}: {offsets[0]}; refresh it so the series applies without offsets")
        report.append(
            f"{folder.name}: {len(patches)} patches, {hunks} hunks applied to {up.sdist}"
            " with zero fuzz and zero offset; overlay OK"
        )
    return report


# ---------------------------------------------------------------------------------------------
# edit / export: the series as git commits and back
# ---------------------------------------------------------------------------------------------

HEADER_TEMPLATE = """Description: <one-line summary>
 <why no existing verl hook sufficed; what the hunk does>
Author: arctic-verl developers
Origin: vendor
Forwarded: no
Last-Update: {date}
Covered-by: tests/verl/<test file>
"""


def edit(folder: Path, sdist: Path | None, source: Path | None, workdir: Path) -> None:
    up = Upstream.load(folder)
    patches = load_series(folder)
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    if source is not None:
        copy_verl_source(source, workdir)
    else:
        extract_verl(fetch_sdist(up, sdist), up, workdir)
    env = {**os.environ, "GIT_AUTHOR_DATE": "@0 +0000", "GIT_COMMITTER_DATE": "@0 +0000"}
    ident = ["-c", "user.name=arctic-edit", "-c", "user.email=edit@invalid", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=workdir, check=True)
    subprocess.run(["git", *ident, "add", "-A"], cwd=workdir, check=True)
    subprocess.run(["git", *ident, "commit", "-q", "-m", "upstream"], cwd=workdir, check=True, env=env)
    subprocess.run(["git", "tag", "upstream"], cwd=workdir, check=True)
    for p in patches:
        apply_patch(p, workdir)
        subprocess.run(["git", *ident, "commit", "-q", "-a", "-m", p.name], cwd=workdir, check=True, env=env)
    print(f"edit: {workdir} has one commit per patch on top of 'upstream'. Amend with 'git commit --fixup' + "
          "'git rebase -i --autosquash upstream', add new commits named NNNN-<area>-<slug>.patch, then run "
          "'./build.sh export'.")  # fmt: skip


def export(folder: Path, workdir: Path) -> None:
    if not (workdir / ".git").is_dir():
        raise BuildError(f"{workdir} is not an edit checkout; run './build.sh edit' first")
    log = git("log", "--reverse", "--format=%H %s", "HEAD", cwd=workdir).splitlines()
    commits = [line.split(" ", 1) for line in log]
    if not commits or commits[0][1] != "upstream":
        raise BuildError(f"{workdir}: the first commit must be 'upstream'")
    names = []
    for sha, subject in commits[1:]:
        name = subject.strip()
        if not PATCH_NAME_RE.match(name):
            raise BuildError(
                f"edit commit {sha[:10]} subject {name!r} must be a patch file name NNNN-<area>-<slug>.patch"
            )
        diff = subprocess.run(
            ["git", "diff", "--no-color", "--no-ext-diff", "--src-prefix=a/", "--dst-prefix=b/", "-U3",
             "--no-renames", f"{sha}~1", sha],
            cwd=workdir, check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        diff = "".join(line for line in diff.splitlines(keepends=True) if not line.startswith("index "))
        target = folder / name
        if target.is_file():
            old = target.read_text()
            m = re.search(r"^(diff --git |--- )", old, flags=re.M)
            header = old[: m.start()] if m else old
            old_diff = old[m.start() :] if m else ""
            if old_diff != diff:
                header = re.sub(
                    r"^Last-Update: .*$", f"Last-Update: {_dt.date.today().isoformat()}", header, flags=re.M
                )
        else:
            header = HEADER_TEMPLATE.format(date=_dt.date.today().isoformat()) + "---\n"
        target.write_text(header + diff)
        names.append(name)
    series = folder / "series"
    comments = (
        [line for line in series.read_text().splitlines() if line.strip().startswith("#")] if series.exists() else []
    )
    series.write_text("\n".join(comments + names) + "\n")
    for stale in folder.glob("*.patch"):
        if stale.name not in names:
            stale.unlink()
    print(f"export: wrote {len(names)} patches to {folder.relative_to(REPO)}; fill in any template headers")


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------


def _folder_arg(value: str | None) -> Path:
    if not value:
        return default_folder()
    p = Path(value)
    if not p.is_absolute() and not p.exists():
        p = PATCHES_ROOT / value
    if not p.is_dir():
        raise BuildError(f"patch folder {value} not found")
    return p.resolve()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="arctic_build")
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p, sources=True):
        p.add_argument("--patches", help="patch folder (default: highest patches/verl-*)")
        if sources:
            p.add_argument("--sdist", type=Path, default=os.environ.get("ARCTIC_VERL_SDIST") or None)
            p.add_argument("--source", type=Path, default=os.environ.get("ARCTIC_VERL_SOURCE") or None)

    common(sub.add_parser("fetch"))
    p = sub.add_parser("prepare")
    common(p)
    p.add_argument("--out", type=Path, default=REPO / "build" / "src")
    p = sub.add_parser("check")
    common(p)
    p.add_argument("--all", action="store_true", help="every patches/verl-*/ folder (default)")
    common(sub.add_parser("stamp"), sources=False)
    p = sub.add_parser("edit")
    common(p)
    p.add_argument("--workdir", type=Path, default=REPO / "build" / "edit")
    p = sub.add_parser("export")
    common(p, sources=False)
    p.add_argument("--workdir", type=Path, default=REPO / "build" / "edit")
    sub.add_parser("version")
    sub.add_parser("sde", help="SOURCE_DATE_EPOCH for the wheel")
    args = ap.parse_args(argv)
    try:
        sdist = Path(args.sdist).resolve() if getattr(args, "sdist", None) else None
        source = Path(args.source).resolve() if getattr(args, "source", None) else None
        if sdist and source:
            raise BuildError("give --sdist or --source, not both")
        if args.cmd == "fetch":
            up = Upstream.load(_folder_arg(args.patches))
            if source is None:
                print(f"{fetch_sdist(up, sdist)} (sha256 verified)")
            else:
                with tempfile.TemporaryDirectory(prefix="arctic-source-") as td:
                    copy_verl_source(source, Path(td))
                    digest = tree_digest(Path(td) / "verl")
                if digest != up.tree_sha256:
                    raise BuildError(
                        f"--source {source}: verl tree digest {digest} does not match tree_sha256 pinned in "
                        f"{(up.folder / 'UPSTREAM').relative_to(REPO)} (not verl {up.version})"
                    )
                print(f"{source} (tree digest verified)")
        elif args.cmd == "prepare":
            m = prepare(_folder_arg(args.patches), sdist, source, args.out.resolve())
            print(m["version"])
        elif args.cmd == "check":
            folders = [_folder_arg(args.patches)] if args.patches else patch_folders()
            for line in check(folders, sdist, source):
                print(line)
        elif args.cmd == "stamp":
            print(input_stamp(_folder_arg(args.patches)))
        elif args.cmd == "sde":
            print(source_date_epoch())
        elif args.cmd == "version":
            up = Upstream.load(default_folder())
            print(f"{up.version}+arctic.{build_number()}")
        elif args.cmd == "edit":
            edit(_folder_arg(args.patches), sdist, source, args.workdir.resolve())
        elif args.cmd == "export":
            export(_folder_arg(args.patches), args.workdir.resolve())
    except BuildError as e:
        print(f"build: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
