# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Patch sets side by side: PEP 440 names, version order, sdist and git pins, and a check that reports everything."""

import re
import shutil
import subprocess
import sys

from .conftest import run_build


def _tool(checkout, *args, **env):
    import os

    return subprocess.run(
        [sys.executable, "-m", "arctic_build", *args],
        cwd=checkout, capture_output=True, text=True, timeout=600,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("ARCTIC_VERL_")}, "ARCTIC_BUILD_NUMBER": "7",
             "PYTHONPATH": str(checkout / "tools"), **env},
    )  # fmt: skip


def _new_set(checkout, pin, version, upstream_text):
    src = checkout / "patches" / f"verl-{pin.version}"
    dst = checkout / "patches" / f"verl-{version}"
    shutil.copytree(src, dst)
    (dst / "UPSTREAM").write_text(upstream_text)
    return dst


def _git_pin(version, commit="0" * 40, repo="/nonexistent/verl.git", tree="1" * 64):
    return (
        f'kind = "git"\nproject = "verl"\nversion = "{version}"\nrepo = "{repo}"\ncommit = "{commit}"\n'
        f'tree_sha256 = "{tree}"\n'
    )


def test_folder_that_is_not_a_pep440_version_is_one_clear_line(repo_copy, pin, sdist, toolenv):
    bad = repo_copy / "patches" / "verl-main-1dda039"
    shutil.copytree(repo_copy / "patches" / f"verl-{pin.version}", bad)
    for args in (("check",), ()):
        r = run_build(repo_copy, *args, sdist=sdist if not args else None, toolenv=toolenv)
        lines = [line for line in r.stderr.splitlines() if line.startswith("build: ")]
        assert r.returncode != 0 and lines, r.stderr
        assert "'main-1dda039' is not one" in lines[0] and "PEP 440" in lines[0], lines[0]
        assert "Traceback" not in r.stderr


def test_sets_sort_as_versions_and_default_is_newest_release(repo_copy, pin):
    for version in ("0.10.0.dev0", "0.9.10rc1", "0.1.0"):
        _new_set(repo_copy, pin, version, _git_pin(version))
    r = _tool(repo_copy, "sets")
    assert r.returncode == 0, r.stderr
    names = [line.split("\t")[0] for line in r.stdout.splitlines()]
    assert names.index("verl-0.1.0") < names.index(f"verl-{pin.version}") < names.index("verl-0.9.10rc1")
    assert names[-1] == "verl-0.10.0.dev0"  # 0.10 > 0.9.10 > 0.9.1 (not string order)
    (default,) = [line for line in r.stdout.splitlines() if "(default)" in line]
    assert default.startswith(f"verl-{pin.version}\t"), r.stdout  # the newest release, not the dev or rc set


def test_git_pin_has_no_sdist_fields_and_absent_source_fails_check_saying_how(repo_copy, pin):
    dev = _new_set(repo_copy, pin, "0.10.0.dev0", _git_pin("0.10.0.dev0"))
    r = _tool(repo_copy, "check")
    assert r.returncode != 0
    assert re.search(
        r"verl-0\.10\.0\.dev0: .*not present here .*supply it with --patches verl-0\.10\.0\.dev0 --source DIR", r.stderr
    ), r.stderr
    assert re.search(rf"verl-{re.escape(pin.version)}: \d+ patches, .* zero offset", r.stderr), r.stderr  # checked
    (dev / "UPSTREAM").write_text(_git_pin("0.10.0.dev0") + f'sha256 = "{pin.sha256}"\n')
    r = _tool(repo_copy, "check", "--patches", "verl-0.10.0.dev0")
    assert r.returncode != 0 and "sha256 do not belong in a git pin" in r.stderr, r.stderr


def test_source_belongs_to_one_set(repo_copy, pin, tmp_path, arctic_build, sdist):
    _new_set(repo_copy, pin, "0.10.0.dev0", _git_pin("0.10.0.dev0"))
    arctic_build.extract_verl(sdist, pin, tmp_path / "tree")
    r = _tool(repo_copy, "check", "--source", str(tmp_path / "tree"))
    assert r.returncode != 0 and "belong to one patch set; name it with --patches" in r.stderr, r.stderr
    r = _tool(repo_copy, "check", "--patches", f"verl-{pin.version}", "--source", str(tmp_path / "tree"))
    assert r.returncode == 0, r.stderr
    assert "zero fuzz and zero offset" in r.stdout


def test_check_reports_every_failing_and_offset_hunk_in_one_run(repo_copy, pin):
    folder = repo_copy / "patches" / f"verl-{pin.version}"
    series = [n for n in (folder / "series").read_text().split() if n.endswith(".patch")]
    broken = []
    for name in series[:2]:  # corrupt the first context line of the first hunk of two patches
        p = folder / name
        lines = p.read_text().splitlines(keepends=True)
        i = next(k for k, line in enumerate(lines) if line.startswith("@@"))
        j = next(k for k in range(i + 1, len(lines)) if lines[k].startswith(" ") and lines[k].strip())
        lines[j] = " # context that upstream does not have\n"
        p.write_text("".join(lines))
        broken.append(name)
    p = folder / series[-1]  # and shift the first hunk of the last patch by 2 lines
    lines = p.read_text().splitlines(keepends=True)
    i = next(k for k, line in enumerate(lines) if line.startswith("@@"))
    m = re.match(r"^@@ -(\d+),(\d+) \+(\d+),(\d+) @@(.*)$", lines[i].rstrip("\n"))
    lines[i] = f"@@ -{int(m[1]) + 2},{m[2]} +{int(m[3]) + 2},{m[4]} @@{m[5]}\n"
    p.write_text("".join(lines))
    r = _tool(repo_copy, "check", "--patches", f"verl-{pin.version}")
    assert r.returncode != 0
    for name in broken:
        assert re.search(rf"patch {re.escape(name)}: verl/\S+: hunk #1 \(.*\) does not apply", r.stderr), r.stderr
    assert re.search(rf"patch {re.escape(series[-1])}: verl/\S+: hunk #1 \(.*\) applies only at offset -2", r.stderr)
    # (a rejected hunk that adds lines also shifts the later hunks of its file: those are reported as offsets too)
    assert re.search(rf"2 failing hunk\(s\) and \d+ offset hunk\(s\) in 3 of {len(series)} patches", r.stderr)
    assert not list(repo_copy.rglob("*.rej"))
