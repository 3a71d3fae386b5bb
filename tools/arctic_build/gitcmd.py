# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The one way the build tool runs git.

Every call names its repository by ``cwd`` and runs without the caller's ``GIT_*`` variables (a hook's
``GIT_DIR`` or ``GIT_INDEX_FILE`` must not redirect it), unless ``inherit_env`` keeps them for a clone that may need
the user's transport settings (``GIT_SSH_COMMAND``, ``GIT_ASKPASS``, ...). A missing git, a timeout or (with
``check``) a failing command raises :class:`GitError` with a one-line reason.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from .errors import BuildError

# The user's apply.* and autocrlf settings must not loosen or change how a patch applies.
APPLY_CONFIG = ("apply.whitespace=nowarn", "apply.ignoreWhitespace=no", "core.autocrlf=false")


class GitError(BuildError):
    """git could not be run, timed out, or (with ``check``) exited non-zero."""


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment git runs in: this process's, minus every ``GIT_*`` variable, plus ``extra``."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **(extra or {})}


def run_git(
    *args: str,
    cwd: Path,
    config: Sequence[str] = (),
    env: dict[str, str] | None = None,
    ceiling: bool = False,
    inherit_env: bool = False,
    text: bool = True,
    check: bool = False,
    timeout: float = 600,
) -> subprocess.CompletedProcess:
    """Run ``git -c <config>... <args>`` in ``cwd`` and capture its output.

    Args:
        args: the git command and its arguments.
        cwd: the working directory, which names the repository.
        config: ``key=value`` settings passed as ``-c`` before the command.
        env: variables added to the environment (after the ``GIT_*`` clean-up).
        ceiling: stop git's repository search at ``cwd``'s parent, for a scratch tree that is no repository of its
            own (a build dir inside the checkout must never be taken for the checkout).
        inherit_env: keep the caller's ``GIT_*`` variables (a clone's transport settings).
        text: decode stdout and stderr as text (``False``: bytes, e.g. for ``git archive``).
        check: raise :class:`GitError` when git exits non-zero.
        timeout: seconds before the command is killed and :class:`GitError` raised.

    Returns:
        The completed process (``returncode``, ``stdout``, ``stderr``).

    Raises:
        GitError: git is not installed, timed out, or (with ``check``) failed.
    """
    full_env = {**os.environ, **(env or {})} if inherit_env else git_env(env)
    if ceiling:
        full_env["GIT_CEILING_DIRECTORIES"] = str(Path(cwd).parent)
    cmd = ["git", *(a for kv in config for a in ("-c", kv)), *args]
    try:
        r = subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=text, timeout=timeout)
    except FileNotFoundError:
        raise GitError("git is not installed (the build applies patches with git apply)") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {' '.join(args)} in {cwd}: timed out after {timeout:.0f}s") from None
    if check and r.returncode != 0:
        err = r.stderr if text else r.stderr.decode(errors="replace")
        out = r.stdout if text else r.stdout.decode(errors="replace")
        raise GitError(f"git {' '.join(args)} in {cwd}: {err.strip() or out.strip()}")
    return r


def git_output(*args: str, cwd: Path, **kwargs) -> str:
    """``run_git(..., check=True)``'s stdout, stripped."""
    return run_git(*args, cwd=cwd, check=True, **kwargs).stdout.strip()


def git_apply(root: Path, patch: Path, *flags: str) -> subprocess.CompletedProcess:
    """``git apply -p1`` of ``patch`` in ``root`` only: never the repository around it, never the user's apply.*."""
    return run_git(
        "apply", "-p1", "--whitespace=nowarn", *flags, str(patch),
        cwd=root, config=APPLY_CONFIG, ceiling=not (root / ".git").exists(), timeout=300,
    )  # fmt: skip


def first_error(r: subprocess.CompletedProcess, default: str = "git apply failed") -> str:
    """The first ``error:``/``fatal:`` line of a failed git command, without its prefix."""
    errs = [line[len("error: ") :] for line in r.stderr.splitlines() if line.startswith(("error: ", "fatal: "))]
    return (errs or r.stderr.strip().splitlines() or [default])[0].removeprefix("fatal: ")
