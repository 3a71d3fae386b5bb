# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""``edit`` / ``edit --continue`` / ``export``: a set's series as git commits under ``build/edit``, and back.

The state machine: ``edit`` commits the pristine upstream (tag ``upstream``) and applies the series one commit per
patch; a patch with a rejected hunk stops it (``current`` = that patch, its ``.rej`` files left beside their
files). ``edit --continue`` commits the fixed patch and goes on; ``export`` writes the commits back into the set
``edit`` opened once nothing is left to apply. The state lives in ``<workdir>/.git/arctic-edit.json``.
Each step returns an :class:`EditResult`: its exit code and the lines the cli prints.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .apply import apply_patch
from .errors import BuildError
from .fetch import materialize
from .gitcmd import git_output, run_git
from .patchfile import (
    HEADER_TEMPLATE,
    PATCH_NAME_RE,
    SERIES_VERSION_RE,
    VERSION_WORDING_RE,
    parse_patch,
    read_series,
    split_header,
)
from .pins import Upstream, folder_version
from .tree import PATCHES_ROOT, rel_to_repo

EDIT_STATE = "arctic-edit.json"  # under <workdir>/.git: the set edit opened and the patches still to apply
# Edit commits are byte-stable and need no user identity: a fixed author and date, no signing.
_IDENT = ("user.name=arctic-edit", "user.email=edit@invalid", "commit.gpgsign=false")
_EDIT_ENV = {"GIT_AUTHOR_DATE": "@0 +0000", "GIT_COMMITTER_DATE": "@0 +0000"}
STOPPED = 3  # the exit code of an edit that stopped at a rejected hunk


@dataclass
class EditResult:
    """What one edit step did: the exit code and the lines to show (stdout)."""

    code: int = 0
    lines: list[str] = field(default_factory=list)


def _wgit(workdir: Path, *args: str) -> str:
    return git_output(*args, cwd=workdir, config=_IDENT, env=_EDIT_ENV)


def _commit(workdir: Path, message: str) -> None:
    _wgit(workdir, "add", "-A")
    _wgit(workdir, "commit", "-q", "--allow-empty", "-m", message)


def _load_state(workdir: Path) -> dict:
    path = workdir / ".git" / EDIT_STATE
    if not path.is_file():
        raise BuildError(f"{rel_to_repo(workdir)} is not an edit checkout; run './build.sh edit --patches <set>' first")
    return json.loads(path.read_text())


def _save_state(workdir: Path, state: dict) -> None:
    (workdir / ".git" / EDIT_STATE).write_text(json.dumps(state, indent=2) + "\n")


def edit(folder: Path, sdist: Path | None, source: Path | None, workdir: Path) -> EditResult:
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
    return _run(workdir)


def edit_continue(workdir: Path) -> EditResult:
    """After fixing the rejects of the stopped patch: commit it and apply the rest."""
    state = _load_state(workdir)
    if state["current"] is None:
        return EditResult(0, [f"edit: nothing to continue in {rel_to_repo(workdir)}; run './build.sh export'"])
    left = sorted(p.relative_to(workdir).as_posix() for p in workdir.rglob("*.rej"))
    if left:
        raise BuildError(
            f"edit: {len(left)} .rej file(s) left ({', '.join(left[:3])}{', ...' if len(left) > 3 else ''}); "
            "apply each rejected hunk by hand, delete the .rej, then run './build.sh edit --continue'"
        )
    _commit(workdir, state["current"])
    state["current"] = None
    _save_state(workdir, state)
    return _run(workdir)


def _run(workdir: Path) -> EditResult:
    """Apply the patches still to do, one commit each; stop at the first with a rejected hunk."""
    state = _load_state(workdir)
    folder = PATCHES_ROOT / state["folder"]
    where = rel_to_repo(workdir)
    out = EditResult()
    while state["todo"]:
        name = state["todo"].pop(0)
        findings = apply_patch(parse_patch(folder / name), workdir, keep_going=True)
        failing = [f for f in findings if not f.offset_only]
        out.lines += [f"edit: {f}" + (" (applied; export refreshes it)" if f.offset_only else "") for f in findings]
        if failing:
            state["current"] = name
            _save_state(workdir, state)
            out.lines.append(
                f"edit: stopped at {name}: {len(failing)} hunk(s) rejected, left next to their file as .rej in "
                f"{where}. Apply each by hand, delete the .rej files, then run './build.sh edit --continue' "
                f"({len(state['todo'])} patch(es) to go). The set being rebased: {state['folder']}."
            )
            out.code = STOPPED
            return out
        _commit(workdir, name)
        _save_state(workdir, state)
    out.lines.append(
        f"edit: {where} has one commit per patch of {state['folder']} on top of 'upstream'. Amend with "
        "'git commit --fixup' + 'git rebase -i --autosquash upstream', add new commits named "
        f"NNNN-<area>-<slug>.patch, then run './build.sh export' (writes patches/{state['folder']}/)."
    )
    return out


def refresh_header(header: str, version: str, diff_changed: bool) -> str:
    """Name the set's version in 'rebased onto X' wording; bump Last-Update when the diff or the wording changed."""
    new = VERSION_WORDING_RE.sub(lambda m: f"{m.group(1)} {m.group(2) or ''}{version}", header)
    if diff_changed or new != header:
        new = re.sub(r"^Last-Update: .*$", f"Last-Update: {_dt.date.today().isoformat()}", new, flags=re.M)
    return new


def _commit_diff(workdir: Path, sha: str) -> str:
    """One edit commit as a patch body: -p1 a/ b/, 3 lines of context, no renames, no ``index`` lines."""
    diff = run_git(
        "diff", "--no-color", "--no-ext-diff", "--src-prefix=a/", "--dst-prefix=b/", "-U3", "--no-renames",
        f"{sha}~1", sha, cwd=workdir, check=True,
    ).stdout  # fmt: skip
    return "".join(line for line in diff.splitlines(keepends=True) if not line.startswith("index "))


def export(folder: Path | None, workdir: Path) -> EditResult:
    """Write the edit checkout's commits back into the set ``edit`` opened (``--patches`` may only name that set)."""
    state = _load_state(workdir)
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
    version = folder_version(folder)
    log = git_output("log", "--reverse", "--format=%H %s", "HEAD", cwd=workdir).splitlines()
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
        diff = _commit_diff(workdir, sha)
        if not diff:
            raise BuildError(f"edit commit {sha[:10]} ({name}) is empty; drop it (git rebase -i upstream) and export")
        target = folder / name
        if target.is_file():
            header, old_diff = split_header(target.read_text())
            header = refresh_header(header, version, diff_changed=old_diff != diff)
        else:
            header = HEADER_TEMPLATE.format(date=_dt.date.today().isoformat()) + "---\n"
        target.write_text(header + diff)
        names.append(name)
    series = folder / "series"
    comments = (
        [line for line in series.read_text().splitlines() if line.strip().startswith("#")] if series.exists() else []
    )
    comments = [SERIES_VERSION_RE.sub(f"verl {version}", c) for c in comments]
    series.write_text("\n".join(comments + names) + "\n")
    for stale in folder.glob("*.patch"):
        if stale.name not in names:
            stale.unlink()
    return EditResult(0, [f"export: wrote {len(names)} patches to {rel_to_repo(folder)}; fill in any template "
                          f"headers, then ./build.sh check --patches {folder.name}"])  # fmt: skip
