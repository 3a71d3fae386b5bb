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
"""Build logic behind ``./build.sh``: pin, verify, patch (with ``git apply``), overlay, manifest.

Standard library plus ``git`` (and ``packaging``, or pip's vendored copy), so it runs before any environment exists.
Every failure raises :class:`BuildError` with a one-line reason; ``main`` prints it as ``build: <reason>``, exit 1.

Patch sets live side by side in ``patches/verl-<PEP 440 version>/`` (``UPSTREAM`` pin, ``series``, patches). The
default set is the newest *release* (not a dev or pre-release). A pin is a PyPI sdist or a git tree.

Subcommands (``python3 tools/arctic_build.py <cmd> --help``):

* ``fetch``     get the set's pinned upstream (sdist download, git tree) and verify it.
* ``prepare``   build ``build/src/verl`` atomically: upstream, the series (``git apply``, zero fuzz, zero offset),
                the overlay, the build manifest and the stamp that ``setup.py`` checks.
* ``check``     lint every set and apply it to its own pinned upstream in a scratch dir; report every failing
                hunk and every offset of every set in one run.
* ``stamp``     print the input stamp (hash of everything that goes into the wheel).
* ``edit`` / ``edit --continue`` / ``export``  the series as git commits under ``build/edit`` (rejects left as
                ``.rej`` files) and back into the patch files of the set ``edit`` opened.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import io
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

try:
    from packaging.version import InvalidVersion, Version
except ImportError:  # a bare python3: pip vendors the same library
    from pip._vendor.packaging.version import InvalidVersion, Version

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
# Header wording that names the upstream version a patch was made for ("rebased onto 0.9.1"): kept current by export.
VERSION_WORDING_RE = re.compile(r"\b(adapted to|rebased onto|ported to) (verl )?(\d+(?:\.\d+)*(?:\.?[a-z]+\d*)*)")
IGNORED_NAMES = {"__pycache__", ".DS_Store"}
IGNORED_SUFFIXES = (".pyc", ".pyo", ".orig", ".rej")
SDIST_KEYS = ("project", "version", "sdist", "sha256", "tree_sha256", "url")
GIT_KEYS = ("project", "version", "repo", "commit", "tree_sha256")


class BuildError(Exception):
    """A build input is wrong; the message is the one-line reason shown to the user."""


class CheckFailed(BuildError):
    """Several problems found in one run (``check``); each is one line."""

    def __init__(self, problems: list[str], summary: str):
        super().__init__(summary)
        self.problems = problems


# ---------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def iter_files(root: Path):
    """Yield files under ``root`` in sorted order, skipping caches and patch leftovers."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_NAMES and d not in (".pc", ".git"))
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


def rel_to_repo(path: Path) -> str:
    try:
        return path.relative_to(REPO).as_posix()
    except ValueError:
        return str(path)


# ---------------------------------------------------------------------------------------------
# The pin: patches/verl-<version>/UPSTREAM
# ---------------------------------------------------------------------------------------------


@dataclass
class Upstream:
    """One set's pin. ``kind`` is ``sdist`` (a PyPI source distribution) or ``git`` (a commit's tree)."""

    folder: Path
    kind: str
    project: str
    version: str
    tree_sha256: str
    sdist: str = ""
    sha256: str = ""
    url: str = ""
    repo: str = ""
    commit: str = ""

    @property
    def label(self) -> str:
        return self.sdist if self.kind == "sdist" else f"git {self.commit[:12]} ({self.repo})"

    def describe(self) -> dict:
        """What was pinned, as the manifest and ``arctic-verl doctor`` show it (no field that does not apply)."""
        base = {"kind": self.kind, "project": self.project, "version": self.version, "tree_sha256": self.tree_sha256}
        if self.kind == "sdist":
            return {**base, "sdist": self.sdist, "sha256": self.sha256, "url": self.url}
        return {**base, "repo": self.repo, "commit": self.commit}

    @classmethod
    def load(cls, folder: Path) -> Upstream:
        set_version(folder)  # the folder name is a PEP 440 version
        path = folder / "UPSTREAM"
        where = rel_to_repo(path)
        if not path.is_file():
            raise BuildError(f"{where} is missing: every patches/verl-<version>/ needs its pin")
        data: dict[str, str] = {}
        for lineno, raw in enumerate(path.read_text().splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if "=" not in line:
                raise BuildError(f"{where}:{lineno}: expected 'key = value', got {raw!r}")
            key, value = (s.strip() for s in line.split("=", 1))
            data[key] = value
        kind = data.pop("kind", "sdist")
        keys = {"sdist": SDIST_KEYS, "git": GIT_KEYS}.get(kind)
        if keys is None:
            raise BuildError(f"{where}: kind = {kind!r}; a pin is 'sdist' (PyPI) or 'git' (a commit's tree)")
        missing = [k for k in keys if not data.get(k)]
        if missing:
            raise BuildError(f"{where}: a {kind} pin needs {', '.join(missing)}")
        extra = sorted(set(data) - set(keys))
        if extra:
            raise BuildError(f"{where}: {', '.join(extra)} do not belong in a {kind} pin (keys: {', '.join(keys)})")
        if folder.name != f"verl-{data['version']}":
            raise BuildError(f"{where}: version {data['version']} does not match folder {folder.name}")
        for key, n in (("sha256", 64), ("tree_sha256", 64), ("commit", 40)):
            if key in data and not re.fullmatch(rf"[0-9a-f]{{{n}}}", data[key]):
                raise BuildError(f"{where}: {key} must be {n} lowercase hex digits")
        return cls(folder, kind, **data)


def set_version(folder: Path) -> Version:
    """The PEP 440 version a set folder is named for; a one-line error for any other name."""
    name = folder.name
    raw = name[len("verl-") :] if name.startswith("verl-") else ""
    try:
        v = Version(raw)
    except InvalidVersion:
        raise BuildError(
            f"patches/{name}: a patch set is named verl-<PEP 440 version of its upstream> "
            f"(e.g. verl-0.9.1, verl-0.10.0.dev0); {raw or name!r} is not one"
        ) from None
    if str(v) != raw:
        raise BuildError(f"patches/{name}: write the version in its normal form: verl-{v}")
    return v


def patch_folders() -> list[Path]:
    """Every set, sorted as versions (oldest first); a badly named folder stops here with a one-line error."""
    folders = [p for p in PATCHES_ROOT.glob("verl-*") if p.is_dir()]
    stray = [p for p in PATCHES_ROOT.iterdir() if p.is_dir() and not p.name.startswith("verl-")]
    if stray:
        set_version(stray[0])
    return sorted(folders, key=set_version)


def default_folder() -> Path:
    """The newest release set (a dev or pre-release set is built only when named with --patches)."""
    folders = patch_folders()
    if not folders:
        raise BuildError("no patches/verl-<version>/ folder")
    releases = [f for f in folders if not (set_version(f).is_prerelease or set_version(f).is_devrelease)]
    return (releases or folders)[-1]


def cache_dir() -> Path:
    base = os.environ.get("ARCTIC_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "arctic-verl"
    )
    return Path(base)


def fetch_sdist(up: Upstream, sdist: Path | None = None) -> Path:
    """Return a verified sdist path: the given one, the cached one, or a fresh download."""
    if up.kind != "sdist":
        raise BuildError(f"{up.folder.name} is pinned to {up.label}, not an sdist; --sdist does not apply")
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
                        f"pass --patches {up.folder.name} --sdist PATH (or --source DIR) for an offline build"
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
            f"{rel_to_repo(up.folder / 'UPSTREAM')}; refusing a tampered or wrong sdist"
        )


def extract_verl(sdist: Path, up: Upstream, dest: Path) -> None:
    """Extract only ``<top>/verl/`` of the sdist into ``dest/verl`` (no tests/, no scripts/)."""
    top = f"{up.project}-{up.version}/"
    with tarfile.open(sdist, "r:gz") as tf:
        _extract_members(tf, top, dest, sdist.name)


def _extract_members(tf: tarfile.TarFile, top: str, dest: Path, what: str) -> None:
    members = []
    for m in tf.getmembers():
        name = m.name
        if not name.startswith(top + "verl/") and name != top + "verl":
            continue
        rel = name[len(top) :]
        parts = Path(rel).parts
        if rel.startswith("/") or ".." in parts:
            raise BuildError(f"{what}: unsafe member path {name!r}")
        if not (m.isfile() or m.isdir()):
            raise BuildError(f"{what}: member {name!r} is not a regular file or directory")
        if any(p in IGNORED_NAMES for p in parts) or rel.endswith(IGNORED_SUFFIXES):
            continue
        members.append((m, rel))
    if not members:
        raise BuildError(f"{what}: no {top}verl/ directory inside")
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


def fetch_git_tree(up: Upstream) -> Path:
    """The pinned commit's ``verl/`` tree, from the cache or exported from ``repo`` (a URL or a local path)."""
    cached = cache_dir() / "git" / up.commit
    if (cached / "verl" / "__init__.py").is_file():
        return cached
    how = (
        f"supply it with --patches {up.folder.name} --source DIR (a tree of commit {up.commit[:12]} holding verl/), "
        f"or make {up.repo} reachable"
    )
    tmp = Path(tempfile.mkdtemp(prefix="arctic-git-"))
    try:
        r = subprocess.run(["git", "clone", "-q", "--no-checkout", up.repo, str(tmp / "repo")],
                           capture_output=True, text=True, timeout=1800)  # fmt: skip
        if r.returncode != 0:
            err = (r.stderr.strip().splitlines() or ["?"])[-1]
            raise BuildError(f"{up.folder.name}: upstream is {up.label}, not present here (git clone: {err}); {how}")
        r = subprocess.run(["git", "-C", str(tmp / "repo"), "archive", "--format=tar", "--prefix=t/", up.commit,
                            "verl"], capture_output=True, timeout=600)  # fmt: skip
        if r.returncode != 0:
            err = (r.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]
            raise BuildError(f"{up.folder.name}: {up.repo} has no commit {up.commit} with verl/ ({err}); {how}")
        with tarfile.open(fileobj=io.BytesIO(r.stdout)) as tf:
            _extract_members(tf, "t/", tmp / "tree", f"{up.repo}@{up.commit[:12]}")
        cached.parent.mkdir(parents=True, exist_ok=True)
        if not cached.exists():
            os.replace(tmp / "tree", cached)
        return cached
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def materialize(up: Upstream, dest: Path, sdist: Path | None, source: Path | None) -> dict:
    """Put the set's pinned upstream ``verl/`` under ``dest`` and verify it. Returns how it was obtained."""
    if source is not None:
        copy_verl_source(source, dest)
        obtained = {"from": f"--source {source.name}", "verified": "tree_sha256"}
    elif up.kind == "sdist":
        extract_verl(fetch_sdist(up, sdist), up, dest)
        obtained = {"from": up.sdist, "verified": "sha256 and tree_sha256", "verified_sdist_sha256": up.sha256}
    else:
        if sdist is not None:
            raise BuildError(f"{up.folder.name} is pinned to {up.label}; --sdist does not apply (use --source DIR)")
        copy_verl_source(fetch_git_tree(up), dest)
        obtained = {"from": f"git {up.commit[:12]}", "verified": "tree_sha256"}
    digest = tree_digest(dest / "verl")
    if digest != up.tree_sha256:
        raise BuildError(
            f"upstream verl tree digest {digest} does not match tree_sha256 pinned in "
            f"{rel_to_repo(up.folder / 'UPSTREAM')} ({obtained['from']} is not {up.label}, verl {up.version})"
        )
    return obtained


# ---------------------------------------------------------------------------------------------
# Patches: DEP-3 header, policy lint, ``git apply`` (zero fuzz, zero offset)
# ---------------------------------------------------------------------------------------------


@dataclass
class Patch:
    path: Path
    headers: dict[str, str]
    files: list[str]  # the upstream files it edits, in patch order
    hunks: dict[str, list[str]] = field(default_factory=dict)  # file -> the '-a,b +c,d' range of each hunk

    @property
    def name(self) -> str:
        return self.path.name

    def hunk_label(self, file: str, index: int) -> str:
        ranges = self.hunks.get(file, [])
        return f"hunk #{index} ({ranges[index - 1]})" if 0 < index <= len(ranges) else f"hunk #{index}"


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


def _git_apply(root: Path, patch: Path, *flags: str) -> subprocess.CompletedProcess:
    """``git apply`` in ``root`` only: never the repository around it, never the user's apply.* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    if not (root / ".git").exists():
        env["GIT_CEILING_DIRECTORIES"] = str(root.parent)  # do not find the checkout that holds build/
    cmd = ["git", "-c", "apply.whitespace=nowarn", "-c", "apply.ignoreWhitespace=no", "-c", "core.autocrlf=false",
           "apply", "-p1", "--whitespace=nowarn", *flags, str(patch)]  # fmt: skip
    return subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=300)


def _git_error(r: subprocess.CompletedProcess) -> str:
    errs = [line[len("error: ") :] for line in r.stderr.splitlines() if line.startswith(("error: ", "fatal: "))]
    return (errs or r.stderr.strip().splitlines() or ["git apply failed"])[0].removeprefix("fatal: ")


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


def parse_patch(path: Path) -> Patch:
    """Headers from the file; which files the diff touches, and how, from ``git apply --numstat --summary``.

    Enforces the policy git alone would not: -p1 a/ b/ paths inside verl/, no timestamps, no created, deleted,
    renamed, mode-changed or binary file (new files belong in overlay/).
    """
    name = path.name
    headers = parse_headers(path)
    with tempfile.TemporaryDirectory(prefix="arctic-lint-") as td:
        r = _git_apply(Path(td), path.resolve(), "--numstat", "--summary")
    if r.returncode != 0:
        err = _git_error(r)
        if "No valid patches" in err:
            raise BuildError(f"patch {name}: contains no diff")
        raise BuildError(f"patch {name}: {err} (git apply); the diff is truncated or malformed")
    files: list[str] = []
    for line in r.stdout.splitlines():
        if "\t" in line:  # numstat: added<TAB>deleted<TAB>path
            added, _, rel = line.split("\t", 2)
            if added == "-":
                raise BuildError(f"patch {name}: binary patches are not allowed ({rel})")
            parts = Path(rel).parts
            if rel.startswith("/") or ".." in parts or not parts:
                raise BuildError(f"patch {name}: path {rel!r} points outside the tree")
            if parts[0] != "verl":
                raise BuildError(f"patch {name}: path {rel!r} is outside verl/ (only the verl package ships)")
            files.append(rel)
            continue
        word, _, rest = line.strip().partition(" ")  # summary: create/delete/rename/copy/mode change
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
    if not files:
        raise BuildError(f"patch {name}: contains no diff")
    lines = path.read_text().splitlines()
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
    return Patch(path, headers, files, hunks)


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
    patches = []
    for name in read_series(folder):
        p = parse_patch(folder / name)
        lint_headers(p)
        patches.append(p)
    return patches


_HUNK_OFFSET = re.compile(r"^Hunk #(\d+) succeeded at (\d+) \(offset (-?\d+) lines?\)\.$")


def apply_patch(patch: Patch, root: Path, keep_going: bool = False) -> list[Finding]:
    """Apply ``patch`` to ``root`` with ``git apply``: zero fuzz (full context), and report any offset.

    First ``git apply --check``; a patch that applies cleanly and exactly where it says is then applied. Otherwise
    ``git apply --reject`` applies the hunks that do apply and leaves the others in ``<file>.rej``, and every
    failing or offset hunk is returned as a :class:`Finding`. Without ``keep_going`` the first finding raises
    :class:`BuildError` instead (the caller works in a scratch tree and throws it away: nothing half-applied ships).
    """
    for rel in patch.files:
        if not (root / rel).is_file():
            finding = Finding(patch.name, rel, "", "does not exist upstream (patches edit existing files only)")
            if not keep_going:
                raise BuildError(str(finding))
            return [finding]
    path = patch.path.resolve()
    r = _git_apply(root, path, "--check", "-v")
    offsets = [line for line in r.stderr.splitlines() if _HUNK_OFFSET.match(line)]
    if r.returncode == 0 and not offsets:
        r = _git_apply(root, path)
        if r.returncode != 0:
            raise BuildError(f"patch {patch.name}: {_git_error(r)} (git apply)")
        return []
    r = _git_apply(root, path, "--reject", "-v")
    findings: list[Finding] = []
    cur = ""
    for line in r.stderr.splitlines():
        m = re.match(r"^(?:Checking patch|Applying patch) (.+?)(?:\.\.\.| with \d+ rejects?\.\.\.)$", line)
        if m:
            cur = m.group(1)
            continue
        m = _HUNK_OFFSET.match(line)
        if m:
            n, at, off = int(m.group(1)), int(m.group(2)), int(m.group(3))
            why = f"applies only at offset {off:+d} (line {at}); zero offset: refresh the patch"
            findings.append(Finding(patch.name, cur, patch.hunk_label(cur, n), why, offset_only=True))
            continue
        m = re.match(r"^Rejected hunk #(\d+)\.$", line)
        if m:
            why = "does not apply (context differs; zero fuzz)"
            findings.append(Finding(patch.name, cur, patch.hunk_label(cur, int(m.group(1))), why))
            continue
        if line.startswith("error: ") and not re.match(
            r"^error: (while searching for|patch failed:|.*: patch does not apply)", line
        ):
            findings.append(Finding(patch.name, "", "", f"{line[len('error: ') :]} (git apply)"))
    if not findings and r.returncode != 0:
        findings.append(Finding(patch.name, "", "", f"{_git_error(r)} (git apply)"))

    def order(f: Finding):  # patch order of the files, then hunk number
        n = re.match(r"hunk #(\d+)", f.hunk)
        return (patch.files.index(f.file) if f.file in patch.files else -1, int(n.group(1)) if n else 0)

    findings.sort(key=order)
    if findings and not keep_going:
        first = next((f for f in findings if not f.offset_only), findings[0])
        more = len(findings) - 1
        raise BuildError(str(first) + (f" (and {more} more; ./build.sh check lists them all)" if more else ""))
    return findings


def remove_rejects(root: Path) -> list[Path]:
    found = sorted(root.rglob("*.rej"))
    for p in found:
        p.unlink()
    return found


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
        obtained = materialize(up, tmp, sdist, source)
        for p in patches:
            apply_patch(p, tmp)  # raises on the first failing or offset hunk; tmp is then removed
        overlay = copy_overlay(tmp)
        for name in ("arctic_build_manifest.json",):
            if (tmp / "verl" / name).exists():
                raise BuildError(f"upstream verl {up.version} already has verl/{name}; rename the build manifest")
        manifest = {
            "distribution": "verl",
            "version": f"{up.version}+arctic.{number}",
            "build_number": number,
            "upstream": {**up.describe(), "obtained": obtained["from"], "verified": obtained["verified"],
                         "verified_sdist_sha256": obtained.get("verified_sdist_sha256")},
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
        return manifest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_folder(folder: Path, sdist: Path | None, source: Path | None) -> tuple[list[str], str]:
    """Lint and apply one set to its own upstream in a scratch dir: (every problem, the summary line)."""
    up = Upstream.load(folder)
    patches = load_series(folder)
    with tempfile.TemporaryDirectory(prefix="arctic-check-") as td:
        root = Path(td)
        materialize(up, root, sdist, source)
        findings: list[Finding] = []
        for p in patches:
            findings += apply_patch(p, root, keep_going=True)
            remove_rejects(root)
        copy_overlay(root)
    hunks = sum(len(r) for p in patches for r in p.hunks.values())
    failing = [f for f in findings if not f.offset_only]
    wording = [w for p in patches for w in stale_wording(p, folder.name[len("verl-") :])]
    if findings or wording:
        summary = (
            f"{folder.name}: {len(failing)} failing hunk(s) and {len(findings) - len(failing)} offset hunk(s) in "
            f"{len({f.patch for f in findings})} of {len(patches)} patches against {up.label}, "
            f"{len(wording)} stale header(s); rebase with ./build.sh edit --patches {folder.name}"
        )
        return [f"{folder.name}: {f}" for f in findings] + [f"{folder.name}: {w}" for w in wording], summary
    return [], (
        f"{folder.name}: {len(patches)} patches, {hunks} hunks applied to {up.label}"
        " with zero fuzz and zero offset; overlay OK"
    )


def check(folders: list[Path], sdist: Path | None, source: Path | None) -> list[str]:
    """Check every set; raises :class:`CheckFailed` listing every problem of every set. Returns report lines."""
    report, problems = [], []
    for folder in folders:
        try:
            found, summary = check_folder(folder, sdist, source)
        except BuildError as e:
            found, summary = [f"{folder.name}: {e}"], f"{folder.name}: not checked"
        problems += found
        report.append(summary)
    if problems:
        raise CheckFailed(problems + report, f"check failed: {len(problems)} problem(s) in {len(folders)} set(s)")
    return report


# ---------------------------------------------------------------------------------------------
# edit / edit --continue / export: the series as git commits and back
# ---------------------------------------------------------------------------------------------

HEADER_TEMPLATE = """Description: <one-line summary>
 <why no existing verl hook sufficed; what the hunk does>
Author: arctic-verl developers
Origin: vendor
Forwarded: no
Last-Update: {date}
Covered-by: tests/verl/<test file>
"""
EDIT_STATE = "arctic-edit.json"  # under <workdir>/.git: the set edit opened and the patches still to apply
_IDENT = ["-c", "user.name=arctic-edit", "-c", "user.email=edit@invalid", "-c", "commit.gpgsign=false"]
_EDIT_ENV = {"GIT_AUTHOR_DATE": "@0 +0000", "GIT_COMMITTER_DATE": "@0 +0000"}


def _wgit(workdir: Path, *args: str) -> str:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **_EDIT_ENV}
    r = subprocess.run(["git", *_IDENT, *args], cwd=workdir, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise BuildError(f"git {' '.join(args)} in {workdir}: {r.stderr.strip() or r.stdout.strip()}")
    return r.stdout.strip()


def _edit_state(workdir: Path) -> dict:
    path = workdir / ".git" / EDIT_STATE
    if not path.is_file():
        raise BuildError(f"{rel_to_repo(workdir)} is not an edit checkout; run './build.sh edit --patches <set>' first")
    return json.loads(path.read_text())


def _save_state(workdir: Path, state: dict) -> None:
    (workdir / ".git" / EDIT_STATE).write_text(json.dumps(state, indent=2) + "\n")


def edit(folder: Path, sdist: Path | None, source: Path | None, workdir: Path) -> int:
    """Open the set as git commits on top of its pristine upstream (tag ``upstream``), one commit per patch."""
    up = Upstream.load(folder)
    names = read_series(folder)
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    materialize(up, workdir, sdist, source)
    _wgit(workdir, "init", "-q")
    (workdir / ".git" / "info").mkdir(exist_ok=True)
    (workdir / ".git" / "info" / "exclude").write_text("*.rej\n*.orig\n")
    _wgit(workdir, "add", "-A")
    _wgit(workdir, "commit", "-q", "-m", "upstream")
    _wgit(workdir, "tag", "upstream")
    _save_state(workdir, {"folder": folder.name, "todo": names, "current": None})
    return _edit_run(workdir)


def edit_continue(workdir: Path) -> int:
    """After fixing the rejects of the stopped patch: commit it and apply the rest."""
    state = _edit_state(workdir)
    if state["current"] is None:
        print(f"edit: nothing to continue in {rel_to_repo(workdir)}; run './build.sh export'")
        return 0
    left = sorted(p.relative_to(workdir).as_posix() for p in workdir.rglob("*.rej"))
    if left:
        raise BuildError(
            f"edit: {len(left)} .rej file(s) left ({', '.join(left[:3])}{', ...' if len(left) > 3 else ''}); "
            "apply each rejected hunk by hand, delete the .rej, then run './build.sh edit --continue'"
        )
    _wgit(workdir, "add", "-A")
    _wgit(workdir, "commit", "-q", "--allow-empty", "-m", state["current"])
    state["current"] = None
    _save_state(workdir, state)
    return _edit_run(workdir)


def _edit_run(workdir: Path) -> int:
    state = _edit_state(workdir)
    folder = PATCHES_ROOT / state["folder"]
    where = rel_to_repo(workdir)
    while state["todo"]:
        name = state["todo"].pop(0)
        patch = parse_patch(folder / name)
        findings = apply_patch(patch, workdir, keep_going=True)
        failing = [f for f in findings if not f.offset_only]
        for f in findings:
            print(f"edit: {f}" + (" (applied; export refreshes it)" if f.offset_only else ""))
        if failing:
            state["current"] = name
            _save_state(workdir, state)
            print(
                f"edit: stopped at {name}: {len(failing)} hunk(s) rejected, left next to their file as .rej in "
                f"{where}. Apply each by hand, delete the .rej files, then run './build.sh edit --continue' "
                f"({len(state['todo'])} patch(es) to go). The set being rebased: {state['folder']}."
            )
            return 3
        _wgit(workdir, "add", "-A")
        _wgit(workdir, "commit", "-q", "--allow-empty", "-m", name)
        _save_state(workdir, state)
    print(
        f"edit: {where} has one commit per patch of {state['folder']} on top of 'upstream'. Amend with "
        "'git commit --fixup' + 'git rebase -i --autosquash upstream', add new commits named "
        f"NNNN-<area>-<slug>.patch, then run './build.sh export' (writes patches/{state['folder']}/)."
    )
    return 0


def refresh_header(header: str, version: str, diff_changed: bool) -> str:
    """Name the set's version in 'rebased onto X' wording; bump Last-Update when the diff or the wording changed."""
    new = VERSION_WORDING_RE.sub(lambda m: f"{m.group(1)} {m.group(2) or ''}{version}", header)
    if diff_changed or new != header:
        new = re.sub(r"^Last-Update: .*$", f"Last-Update: {_dt.date.today().isoformat()}", new, flags=re.M)
    return new


def export(folder: Path | None, workdir: Path) -> None:
    """Write the edit checkout's commits back into the set ``edit`` opened (``--patches`` may only name that set)."""
    state = _edit_state(workdir)
    opened = PATCHES_ROOT / state["folder"]
    if folder is not None and folder.resolve() != opened.resolve():
        raise BuildError(f"export: {rel_to_repo(workdir)} holds {state['folder']}, not {folder.name}; "
                         f"drop --patches or run './build.sh edit --patches {folder.name}'")  # fmt: skip
    if state["current"] is not None or state["todo"]:
        raise BuildError(
            f"export: the edit of {state['folder']} stopped at {state['current']}; fix its .rej files and run "
            "'./build.sh edit --continue' first"
        )
    folder = opened
    version = folder.name[len("verl-") :]
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
        if not diff:
            raise BuildError(f"edit commit {sha[:10]} ({name}) is empty; drop it (git rebase -i upstream) and export")
        target = folder / name
        if target.is_file():
            old = target.read_text()
            m = re.search(r"^(diff --git |--- )", old, flags=re.M)
            header = old[: m.start()] if m else old
            header = refresh_header(header, version, diff_changed=(old[m.start() :] if m else "") != diff)
        else:
            header = HEADER_TEMPLATE.format(date=_dt.date.today().isoformat()) + "---\n"
        target.write_text(header + diff)
        names.append(name)
    series = folder / "series"
    comments = (
        [line for line in series.read_text().splitlines() if line.strip().startswith("#")] if series.exists() else []
    )
    comments = [re.sub(r"\bverl \d+(?:\.\d+)*(?:\.?[a-z]+\d*)*", f"verl {version}", c) for c in comments]
    series.write_text("\n".join(comments + names) + "\n")
    for stale in folder.glob("*.patch"):
        if stale.name not in names:
            stale.unlink()
    print(f"export: wrote {len(names)} patches to {rel_to_repo(folder)}; fill in any template headers, then "
          f"./build.sh check --patches {folder.name}")  # fmt: skip


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
        raise BuildError(f"patch folder {value} not found (sets: {', '.join(f.name for f in patch_folders())})")
    set_version(p)
    return p.resolve()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="arctic_build")
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p, sources=True):
        p.add_argument("--patches", help="patch set (default: the newest release set patches/verl-*)")
        if sources:
            p.add_argument("--sdist", type=Path, default=os.environ.get("ARCTIC_VERL_SDIST") or None)
            p.add_argument("--source", type=Path, default=os.environ.get("ARCTIC_VERL_SOURCE") or None)

    common(sub.add_parser("fetch"))
    p = sub.add_parser("prepare")
    common(p)
    p.add_argument("--out", type=Path, default=REPO / "build" / "src")
    p = sub.add_parser("check")
    common(p)
    p.add_argument("--all", action="store_true", help="every patches/verl-*/ set (default)")
    common(sub.add_parser("stamp"), sources=False)
    p = sub.add_parser("edit")
    common(p)
    p.add_argument("--continue", dest="cont", action="store_true", help="after fixing the .rej files")
    p.add_argument("--workdir", type=Path, default=REPO / "build" / "edit")
    p = sub.add_parser("export")
    common(p, sources=False)
    p.add_argument("--workdir", type=Path, default=REPO / "build" / "edit")
    sub.add_parser("version")
    sub.add_parser("sde", help="SOURCE_DATE_EPOCH for the wheel")
    sub.add_parser("sets", help="list the patch sets, newest last, and the default")
    args = ap.parse_args(argv)
    try:
        sdist = Path(args.sdist).resolve() if getattr(args, "sdist", None) else None
        source = Path(args.source).resolve() if getattr(args, "source", None) else None
        if sdist and source:
            raise BuildError("give --sdist or --source, not both")
        if args.cmd == "fetch":
            up = Upstream.load(_folder_arg(args.patches))
            if up.kind == "sdist" and source is None:  # cheap: the file's sha256 (prepare checks the tree too)
                print(f"{fetch_sdist(up, sdist)} (sha256 verified)")
            else:
                with tempfile.TemporaryDirectory(prefix="arctic-fetch-") as td:
                    got = materialize(up, Path(td), sdist, source)
                print(f"{got['from']} ({got['verified']} verified)")
        elif args.cmd == "prepare":
            m = prepare(_folder_arg(args.patches), sdist, source, args.out.resolve())
            print(m["version"])
        elif args.cmd == "check":
            if args.patches:
                folders = [_folder_arg(args.patches)]
            else:
                folders = patch_folders()
                if (sdist or source) and len(folders) > 1:
                    raise BuildError(
                        "--sdist/--source (or ARCTIC_VERL_SDIST/ARCTIC_VERL_SOURCE) belong to one patch set; "
                        f"name it with --patches ({', '.join(f.name for f in folders)})"
                    )
            for line in check(folders, sdist, source):
                print(line)
        elif args.cmd == "stamp":
            print(input_stamp(_folder_arg(args.patches)))
        elif args.cmd == "sde":
            print(source_date_epoch())
        elif args.cmd == "version":
            up = Upstream.load(default_folder())
            print(f"{up.version}+arctic.{build_number()}")
        elif args.cmd == "sets":
            default = default_folder()
            for f in patch_folders():
                print(f"{f.name}\t{Upstream.load(f).label}{'  (default)' if f == default else ''}")
        elif args.cmd == "edit":
            if args.cont:
                return edit_continue(args.workdir.resolve())
            return edit(_folder_arg(args.patches), sdist, source, args.workdir.resolve())
        elif args.cmd == "export":
            export(_folder_arg(args.patches) if args.patches else None, args.workdir.resolve())
    except CheckFailed as e:
        for line in e.problems:
            print(f"build: {line}", file=sys.stderr)
        print(f"build: {e}", file=sys.stderr)
        return 1
    except BuildError as e:
        print(f"build: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
