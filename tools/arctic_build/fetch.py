# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Getting a set's pinned upstream ``verl/`` tree: sdist download or cache, git export, ``--source``; all verified.

Archives are extracted member by member after a check (only ``<top>/verl/``, only regular files and directories,
no absolute or ``..`` path), and through tarfile's ``data`` filter where the Python has it (3.10.12+, 3.11.4+).
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

from .errors import BuildError
from .gitcmd import run_git
from .pins import Upstream
from .tree import ignored, iter_files, rel_to_repo, sha256_file, tree_digest

# tarfile's own safety filter, where this Python has it (3.12, and the 3.10.12+/3.11.4+ security releases)
_DATA_FILTER = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}


def cache_dir() -> Path:
    """``$ARCTIC_CACHE_DIR``, else ``$XDG_CACHE_HOME/arctic-verl`` (``~/.cache/arctic-verl``)."""
    base = os.environ.get("ARCTIC_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "arctic-verl"
    )
    return Path(base)


def verify_sha(path: Path, up: Upstream) -> None:
    """Refuse an sdist whose sha256 is not the pinned one."""
    got = sha256_file(path)
    if got != up.sha256:
        raise BuildError(
            f"sha256 mismatch for {path}: got {got}, pinned {up.sha256} in "
            f"{rel_to_repo(up.folder / 'UPSTREAM')}; refusing a tampered or wrong sdist"
        )


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
            _pip_download(up, tmp, direct_err)
        verify_sha(tmp, up)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _pip_download(up: Upstream, dest: Path, direct_err: OSError) -> None:
    """Fall back to pip, which honours the machine's index configuration and proxies."""
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
        shutil.move(str(got), dest)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def extract_verl(sdist: Path, up: Upstream, dest: Path) -> None:
    """Extract only ``<top>/verl/`` of the sdist into ``dest/verl`` (no tests/, no scripts/)."""
    with tarfile.open(sdist, "r:gz") as tf:
        extract_members(tf, f"{up.project}-{up.version}/", dest, sdist.name)


def extract_members(tf: tarfile.TarFile, top: str, dest: Path, what: str) -> None:
    """Extract ``<top>verl/**`` of ``tf`` as ``dest/verl/**``, refusing any member that is not plainly safe.

    Args:
        tf: the open archive.
        top: the archive's top folder, with a trailing slash (``verl-0.9.1/``).
        dest: the folder that receives ``verl/``.
        what: how error messages name the archive.

    Raises:
        BuildError: a member path is absolute or has ``..``, a member is a link or device, or there is no verl/.
    """
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
        if ignored(parts):
            continue
        # Stored as the build tree wants it: under verl/, rw-r--r-- (rwxr-xr-x for folders), owned by nobody.
        m.name, m.mode = rel, 0o755 if m.isdir() else 0o644
        m.uid = m.gid = 0
        m.uname = m.gname = ""
        members.append(m)
    if not members:
        raise BuildError(f"{what}: no {top}verl/ directory inside")
    try:
        tf.extractall(dest, members=members, **_DATA_FILTER)
    except (tarfile.TarError, OSError) as e:  # tarfile.FilterError is a TarError
        raise BuildError(f"{what}: cannot extract ({e})") from None


def copy_verl_source(source: Path, dest: Path) -> None:
    """Copy an unpacked ``verl/`` tree (``--source DIR``) to ``dest/verl``."""
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
        r = run_git("clone", "-q", "--no-checkout", up.repo, str(tmp / "repo"), cwd=tmp, inherit_env=True,
                    timeout=1800)  # fmt: skip
        if r.returncode != 0:
            err = (r.stderr.strip().splitlines() or ["?"])[-1]
            raise BuildError(f"{up.folder.name}: upstream is {up.label}, not present here (git clone: {err}); {how}")
        r = run_git("archive", "--format=tar", "--prefix=t/", up.commit, "verl", cwd=tmp / "repo", text=False)
        if r.returncode != 0:
            err = (r.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]
            raise BuildError(f"{up.folder.name}: {up.repo} has no commit {up.commit} with verl/ ({err}); {how}")
        with tarfile.open(fileobj=io.BytesIO(r.stdout)) as tf:
            extract_members(tf, "t/", tmp / "tree", f"{up.repo}@{up.commit[:12]}")
        cached.parent.mkdir(parents=True, exist_ok=True)
        if not cached.exists():
            os.replace(tmp / "tree", cached)
        return cached
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def materialize(up: Upstream, dest: Path, sdist: Path | None, source: Path | None) -> dict:
    """Put the set's pinned upstream ``verl/`` under ``dest`` and verify it.

    Returns:
        How it was obtained: ``from`` (what it came from), ``verified`` (which digests were checked) and, for an
        sdist, ``verified_sdist_sha256``.
    """
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
