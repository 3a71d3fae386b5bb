# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Patch sets and their pins: ``patches/verl-<PEP 440 version>/UPSTREAM``, a small TOML file.

A pin is a PyPI sdist (``kind = "sdist"``, the default) or a git commit's tree (``kind = "git"``); every value is a
quoted string. Sets sort as versions; the default set is the newest *release* (not a dev or pre-release).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .errors import BuildError
from .tree import PATCHES_ROOT, rel_to_repo

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (build.sh accepts 3.10-3.12); drop this fallback with 3.10
    try:
        import tomli as tomllib
    except ModuleNotFoundError:  # a bare python3: pip vendors tomli too
        from pip._vendor import tomli as tomllib

try:
    from packaging.version import InvalidVersion, Version
except ImportError:  # a bare python3: pip vendors the same library
    from pip._vendor.packaging.version import InvalidVersion, Version

SDIST_KEYS = ("project", "version", "sdist", "sha256", "tree_sha256", "url")
GIT_KEYS = ("project", "version", "repo", "commit", "tree_sha256")
HEX_LENGTHS = {"sha256": 64, "tree_sha256": 64, "commit": 40}


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
        """How messages name the upstream: the sdist file, or the commit and its repository."""
        return self.sdist if self.kind == "sdist" else f"git {self.commit[:12]} ({self.repo})"

    def describe(self) -> dict:
        """What was pinned, as the manifest and ``arctic-verl doctor`` show it (no field that does not apply)."""
        base = {"kind": self.kind, "project": self.project, "version": self.version, "tree_sha256": self.tree_sha256}
        if self.kind == "sdist":
            return {**base, "sdist": self.sdist, "sha256": self.sha256, "url": self.url}
        return {**base, "repo": self.repo, "commit": self.commit}

    @classmethod
    def load(cls, folder: Path) -> Upstream:
        """Read and validate ``folder/UPSTREAM``.

        Raises:
            BuildError: the file is missing, not TOML, or a key is missing, unknown, not a string or malformed.
        """
        set_version(folder)  # the folder name is a PEP 440 version
        path = folder / "UPSTREAM"
        where = rel_to_repo(path)
        if not path.is_file():
            raise BuildError(f"{where} is missing: every patches/verl-<version>/ needs its pin")
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as e:
            raise BuildError(f'{where}: not TOML ({e}); write each value quoted: key = "value"') from None
        not_str = [k for k, v in data.items() if not isinstance(v, str)]
        if not_str:
            raise BuildError(f'{where}: {", ".join(not_str)} must be a quoted string (key = "value")')
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
        for key, n in HEX_LENGTHS.items():
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


def folder_version(folder: Path) -> str:
    """The upstream version a set folder is named for, as written (``verl-0.9.1`` -> ``0.9.1``)."""
    return folder.name[len("verl-") :]


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


def resolve_folder(value: str | None) -> Path:
    """The set ``--patches`` names (a folder name under patches/ or a path), or the default set."""
    if not value:
        return default_folder()
    p = Path(value)
    if not p.is_absolute() and not p.exists():
        p = PATCHES_ROOT / value
    if not p.is_dir():
        raise BuildError(f"patch folder {value} not found (sets: {', '.join(f.name for f in patch_folders())})")
    set_version(p)
    return p.resolve()
