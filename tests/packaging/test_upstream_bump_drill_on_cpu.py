# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The bump drill of docs/upstream-bump.md as a test: a fake "next upstream" through the whole documented loop.

From the pinned sdist, a git tree "verl 0.10.0.dev0" is made with a few changed context lines (two rejected hunks,
shifted hunks) and one removed internal (``padding_utils.SYNTHETIC_PADDING_SEQ_LEN``, renamed upstream). It is pinned
as a git set and driven check -> edit -> (fix) -> edit --continue -> export -> check -> build -> doctor (which must
name the removed symbol and the compat module) -> compat fix -> build -> doctor OK, in a temp copy of the repo.
The time of each step is printed (run with -rP to see it); nothing asserts on time.
"""

import re
import subprocess
import time

from .conftest import fresh_install, run_build

NEW = "0.10.0.dev0"
SET = f"verl-{NEW}"
SYMBOL = "verl.trainer.ppo.padding_utils.SYNTHETIC_PADDING_SEQ_LEN"


def _sub(path, old, new, count=1):
    text = path.read_text()
    assert text.count(old) >= 1, f"{path}: {old!r} not found (upstream changed; update the drill)"
    path.write_text(text.replace(old, new, count))


def _fake_next_upstream(arctic_build, pin, sdist, root):
    """A git repo holding verl/ of the pinned sdist, edited the way a real next upstream differs."""
    arctic_build.extract_verl(sdist, pin, root)
    verl = root / "verl"
    (verl / "version" / "version").write_text(NEW + "\n")
    # a changed context line under patch 0001's second hunk, and one under 0013's first hunk: both are rejected
    _sub(verl / "checkpoint_engine" / "__init__.py", "# Every engine below is optional: it carries",
         "# Each engine below is optional: it carries")  # fmt: skip
    _sub(verl / "workers" / "engine_workers.py", "import asyncio\nimport functools\n",
         "import asyncio  # event loop helpers\nimport functools\n")  # fmt: skip
    # two new lines above LLMServerManager: patches 0010 and 0011 still apply, at an offset
    _sub(verl / "workers" / "rollout" / "llm_server.py", "\nclass LLMServerManager",
         "\n# (upstream moved a helper here)\n\n\nclass LLMServerManager")  # fmt: skip
    # an internal the plugin relies on goes away (renamed upstream)
    padding = verl / "trainer" / "ppo" / "padding_utils.py"
    padding.write_text(padding.read_text().replace("SYNTHETIC_PADDING_SEQ_LEN", "PADDING_SEQ_LEN"))
    ident = ["-c", "user.name=drill", "-c", "user.email=drill@invalid", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", f"verl {NEW} (drill)"]):
        subprocess.run(["git", *ident, *args], cwd=root, check=True, capture_output=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, check=True, capture_output=True, text=True)
    return commit.stdout.strip(), arctic_build.tree_digest(verl)


def _doctor(wheel, env_dir, cwd):
    bin_dir = fresh_install(wheel, env_dir)
    return subprocess.run([str(bin_dir / "arctic-verl"), "doctor"], capture_output=True, text=True, timeout=600,
                          cwd=cwd)  # fmt: skip


def test_bump_drill(repo_copy, arctic_build, pin, sdist, toolenv, tmp_path):
    times = {}
    t_all = t = time.monotonic()

    def lap(name):
        nonlocal t
        now = time.monotonic()
        times[name] = round(now - t, 1)
        t = now

    env = {"ARCTIC_CACHE_DIR": str(tmp_path / "cache")}  # nothing of this git pin is cached yet
    upstream = tmp_path / "next-upstream"
    commit, tree = _fake_next_upstream(arctic_build, pin, sdist, upstream)
    old_set = repo_copy / "patches" / f"verl-{pin.version}"
    new_set = repo_copy / "patches" / SET
    new_set.mkdir()
    (new_set / "UPSTREAM").write_text(
        f'# drill: a git pin\nkind = "git"\nproject = "verl"\nversion = "{NEW}"\nrepo = "{upstream}"\n'
        f'commit = "{commit}"\ntree_sha256 = "{tree}"\n'
    )
    for f in old_set.iterdir():
        if f.name != "UPSTREAM":
            (new_set / f.name).write_bytes(f.read_bytes())
    before = {f.name: f.read_bytes() for f in old_set.iterdir()}
    lap("make fake upstream + new set")

    # 1. check: every failing hunk, every offset, every stale header, in one run
    r = run_build(repo_copy, "check", "--patches", SET, toolenv=toolenv, **env)
    assert r.returncode != 0
    assert re.search(r"0001-\S+: verl/checkpoint_engine/__init__.py: hunk #2 \(.*\) does not apply", r.stderr), r.stderr
    assert re.search(r"0013-\S+: verl/workers/engine_workers.py: hunk #1 \(.*\) does not apply", r.stderr), r.stderr
    assert re.search(
        r"0010-\S+: verl/workers/rollout/llm_server.py: hunk #1 \(.*\) applies only at offset \+3", r.stderr
    )
    assert "0011-" in r.stderr and f"in the {SET} set (stale" in r.stderr
    lap("check (fails, lists all)")

    # 2. edit: applies what applies, stops at the first rejected hunk with a .rej and the next command
    edit = repo_copy / "build" / "edit"
    r = run_build(repo_copy, "edit", "--patches", SET, toolenv=toolenv, **env)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "stopped at 0001-" in r.stdout and "./build.sh edit --continue" in r.stdout
    rej = edit / "verl" / "checkpoint_engine" / "__init__.py.rej"
    assert rej.is_file()
    r = run_build(repo_copy, "edit", "--continue", toolenv=toolenv, **env)
    assert r.returncode != 0 and ".rej file(s) left" in r.stderr  # continuing before the fix is refused
    _sub(edit / "verl" / "checkpoint_engine" / "__init__.py", '    "CheckpointEngineWorker",\n]\n',
         '    "CheckpointEngineWorker",\n    "RemoteBackendCheckpointEngine",\n]\n')  # fmt: skip
    rej.unlink()
    r = run_build(repo_copy, "edit", "--continue", toolenv=toolenv, **env)
    assert r.returncode == 3 and "stopped at 0013-" in r.stdout, r.stdout + r.stderr
    _sub(edit / "verl" / "workers" / "engine_workers.py", "import functools\n", "import functools\nimport inspect\n")
    (edit / "verl" / "workers" / "engine_workers.py.rej").unlink()
    r = run_build(repo_copy, "edit", "--continue", toolenv=toolenv, **env)
    assert r.returncode == 0 and "./build.sh export" in r.stdout, r.stdout + r.stderr
    lap("edit + 2 fixes + continue")

    # 3. export: back into the set edit opened, headers refreshed; the old set is untouched
    r = run_build(repo_copy, "export", toolenv=toolenv, **env)
    assert r.returncode == 0 and f"patches/{SET}" in r.stdout, r.stdout + r.stderr
    assert {f.name: f.read_bytes() for f in old_set.iterdir()} == before
    p0001 = next(new_set.glob("0001-*.patch")).read_text()
    assert f"adapted to {NEW}" in p0001 and re.search(r"^Last-Update: \d{4}-\d{2}-\d{2}$", p0001, re.M)
    assert f"for verl {NEW}" in (new_set / "series").read_text()
    r = run_build(repo_copy, "check", "--patches", SET, toolenv=toolenv, **env)
    assert r.returncode == 0 and "zero fuzz and zero offset" in r.stdout, r.stderr
    lap("export + check")

    # 4. build, install, doctor: the removed internal is named, with the module that needs it
    r = run_build(repo_copy, "--patches", SET, toolenv=toolenv, **env)
    assert r.returncode == 0, r.stderr
    (wheel,) = (repo_copy / "dist").glob("*.whl")
    assert wheel.name == f"verl-{NEW}+arctic.7-py3-none-any.whl"
    d = _doctor(wheel, tmp_path / "venv1", tmp_path)
    assert d.returncode == 1, d.stdout + d.stderr
    assert f"upstream: verl {NEW} from git {upstream} commit {commit}" in d.stdout
    assert f"PROBLEM: arctic_platform.integrations.verl.compat needs upstream {SYMBOL}, which verl {NEW} lacks" in (
        d.stdout
    ), d.stdout
    lap("build + install + doctor (catches the symbol)")

    # 5. the fix goes in the one adapter point; the rebuilt wheel's doctor passes
    compat = repo_copy / "arctic_platform" / "integrations" / "verl" / "compat.py"
    _sub(compat, 'if VERL_VERSION >= Version("0.9.1"):\n',
         f'if VERL_VERSION >= Version("{NEW}"):  # drill: renamed upstream\n'
         "    from verl.trainer.ppo.padding_utils import PADDING_SEQ_LEN as SYNTHETIC_PADDING_SEQ_LEN\n\n"
         "    SYNTHETIC_PADDING_PROMPT_LEN = SYNTHETIC_PADDING_SEQ_LEN - 1\n"
         'elif VERL_VERSION >= Version("0.9.1"):\n')  # fmt: skip
    r = run_build(repo_copy, "--patches", SET, toolenv=toolenv, **env)
    assert r.returncode == 0, r.stderr
    (wheel,) = (repo_copy / "dist").glob("*.whl")
    d = _doctor(wheel, tmp_path / "venv2", tmp_path)
    assert d.returncode == 0, d.stdout + d.stderr
    assert "upstream names: 0 missing" in d.stdout and f"adapted for verl {NEW}" in d.stdout
    lap("compat fix + build + install + doctor OK")
    times["total"] = round(time.monotonic() - t_all, 1)
    print("bump drill timings (s):", times)
