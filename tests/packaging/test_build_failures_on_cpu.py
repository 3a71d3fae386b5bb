# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Bad build input stops the build with a one-line reason and leaves no wheel or half-patched tree (rule B1)."""

import re
import shutil

import pytest

from .conftest import REPO, load_build_tool, run_build

# the set a plain ./build.sh builds (the newest release), read from patches/, not hard-coded
FOLDER = load_build_tool().default_folder().relative_to(REPO).as_posix()


def _assert_refused(result, checkout, pattern):
    assert result.returncode != 0, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("build: ")]
    assert lines, result.stderr
    assert re.search(pattern, lines[0]), lines[0]
    assert not list((checkout / "dist").glob("*.whl")), "a failed build left a wheel"
    assert not (checkout / "build" / "src").exists(), "a failed build left a half-patched tree"


def _first_patch(checkout):
    series = (checkout / FOLDER / "series").read_text().split()
    name = next(n for n in series if n.endswith(".patch"))
    return checkout / FOLDER / name


def test_tampered_sdist_refused(repo_copy, sdist, tmp_path, toolenv):
    bad = tmp_path / sdist.name
    data = bytearray(sdist.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    r = run_build(repo_copy, sdist=bad, toolenv=toolenv)
    _assert_refused(r, repo_copy, r"sha256 mismatch .* refusing a tampered or wrong sdist")


def test_failed_build_removes_previous_wheel(repo_copy, sdist, toolenv):
    ok = run_build(repo_copy, sdist=sdist, toolenv=toolenv)
    assert ok.returncode == 0, ok.stderr
    assert len(list((repo_copy / "dist").glob("*.whl"))) == 1
    patch = _first_patch(repo_copy)
    patch.write_text(patch.read_text().replace("\n \n", "\n corrupted context line\n", 1))
    r = run_build(repo_copy, sdist=sdist, toolenv=toolenv)
    _assert_refused(r, repo_copy, r"does not apply")


def test_corrupted_hunk_names_patch_file_and_hunk(repo_copy, sdist, toolenv):
    patch = _first_patch(repo_copy)
    text = patch.read_text()
    # change one context line of the first hunk (a ' ' line right after the @@ header)
    lines = text.splitlines(keepends=True)
    i = next(k for k, line in enumerate(lines) if line.startswith("@@"))
    j = next(k for k in range(i + 1, len(lines)) if lines[k].startswith(" ") and lines[k].strip())
    lines[j] = " # context that upstream does not have\n"
    patch.write_text("".join(lines))
    target = next(line[6:].strip() for line in lines if line.startswith("+++ b/"))
    r = run_build(repo_copy, sdist=sdist, toolenv=toolenv)
    _assert_refused(r, repo_copy, rf"patch {re.escape(patch.name)}: {re.escape(target)}: hunk #1 \(.*\) does not apply")


def test_unlisted_patch_refused(repo_copy, sdist, toolenv):
    shutil.copy(_first_patch(repo_copy), repo_copy / FOLDER / "9999-trainer-stray.patch")
    r = run_build(repo_copy, sdist=sdist, toolenv=toolenv)
    _assert_refused(r, repo_copy, r"9999-trainer-stray.patch is not listed in series")


def test_missing_series_entry_refused(repo_copy, sdist, toolenv):
    series = repo_copy / FOLDER / "series"
    series.write_text(series.read_text() + "0999-trainer-missing.patch\n")
    r = run_build(repo_copy, sdist=sdist, toolenv=toolenv)
    _assert_refused(r, repo_copy, r"series entry 0999-trainer-missing.patch has no file")


def test_overlay_collision_refused(repo_copy, sdist, toolenv):
    (repo_copy / "overlay" / "verl" / "protocol.py").write_text("# would replace upstream verl/protocol.py\n")
    r = run_build(repo_copy, sdist=sdist, toolenv=toolenv)
    _assert_refused(r, repo_copy, r"overlay/verl/protocol.py would overwrite the upstream file")


HEADER = (
    "Description: x\nAuthor: a\nOrigin: vendor\nForwarded: no\nLast-Update: 2026-01-01\n"
    "Covered-by: tests/packaging/test_build_failures_on_cpu.py\n---\n"
)


@pytest.mark.parametrize(
    "diff, pattern",
    [
        pytest.param(
            "--- a/../evil.py\n+++ b/../evil.py\n@@ -1 +1 @@\n-a\n+b\n", r"points outside the tree", id="dotdot"
        ),
        pytest.param(
            "--- a//etc/passwd\n+++ b//etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", r"points outside the tree", id="absolute"
        ),
        pytest.param(
            "--- /dev/null\n+++ b/verl/new_module.py\n@@ -0,0 +1 @@\n+x = 1\n",
            r"creates verl/new_module.py",
            id="creates",
        ),
        pytest.param(
            "--- a/verl/nope.py\n+++ b/verl/nope.py\n@@ -1 +1 @@\n-a\n+b\n",
            r"does not exist upstream",
            id="missing-file",
        ),
        pytest.param(
            "--- a/verl/__init__.py\t2026-01-01 00:00:00\n+++ b/verl/__init__.py\n@@ -1 +1 @@\n-a\n+b\n",
            r"carries a timestamp",
            id="timestamp",
        ),
    ],
)
def test_malformed_patches_refused(repo_copy, sdist, toolenv, diff, pattern):
    (repo_copy / FOLDER / "9000-trainer-bad.patch").write_text(HEADER + diff)
    series = repo_copy / FOLDER / "series"
    series.write_text(series.read_text() + "9000-trainer-bad.patch\n")
    r = run_build(repo_copy, sdist=sdist, toolenv=toolenv)
    _assert_refused(r, repo_copy, pattern)


def test_missing_dep3_field_refused(repo_copy, sdist, toolenv):
    patch = _first_patch(repo_copy)
    patch.write_text(re.sub(r"^Forwarded: .*\n", "", patch.read_text(), flags=re.M))
    r = run_build(repo_copy, sdist=sdist, toolenv=toolenv)
    _assert_refused(r, repo_copy, rf"patch {re.escape(patch.name)}: DEP-3 header lacks Forwarded")


def test_covered_by_naming_a_missing_test_refused(repo_copy, sdist, toolenv):
    """``Covered-by: file::test`` must name a test of that file (a renamed or merged test leaves a stale name)."""
    patch = _first_patch(repo_copy)
    gone = "tests/packaging/test_build_failures_on_cpu.py::test_renamed_long_ago"
    patch.write_text(re.sub(r"^Covered-by: .*$", f"Covered-by: {gone}", patch.read_text(), flags=re.M))
    r = run_build(repo_copy, sdist=sdist, toolenv=toolenv)
    _assert_refused(
        r,
        repo_copy,
        rf"patch {re.escape(patch.name)}: Covered-by names 'test_renamed_long_ago', which is not a test in "
        r"tests/packaging/test_build_failures_on_cpu.py",
    )


def test_offset_hunk_refused(repo_copy, sdist, toolenv):
    """A hunk whose context matches only a few lines away from where it says is refused (zero offset), by name."""
    patch = _first_patch(repo_copy)
    lines = patch.read_text().splitlines(keepends=True)
    i = next(k for k, line in enumerate(lines) if line.startswith("@@"))
    m = re.match(r"^@@ -(\d+),(\d+) \+(\d+),(\d+) @@(.*)$", lines[i].rstrip("\n"))
    old, old_n, new, new_n, tail = int(m[1]), m[2], int(m[3]), m[4], m[5]
    lines[i] = f"@@ -{old + 3},{old_n} +{new + 3},{new_n} @@{tail}\n"
    patch.write_text("".join(lines))
    target = next(line[6:].strip() for line in lines if line.startswith("+++ b/"))
    r = run_build(repo_copy, sdist=sdist, toolenv=toolenv)
    _assert_refused(
        r, repo_copy, rf"patch {re.escape(patch.name)}: {re.escape(target)}: hunk #1 \(.*\) applies only at offset -3"
    )
