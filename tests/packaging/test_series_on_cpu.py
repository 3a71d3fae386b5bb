# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The patch series lints clean and applies to its pinned upstream (rule T4, what ./build.sh check runs)."""

import re

import pytest

from .conftest import REPO

FOLDERS = sorted(p for p in (REPO / "patches").glob("verl-*") if p.is_dir())


@pytest.mark.parametrize("folder", FOLDERS, ids=[f.name for f in FOLDERS])
def test_series_and_disk_agree(folder, arctic_build):
    listed = arctic_build.read_series(folder)
    on_disk = sorted(p.name for p in folder.glob("*.patch"))
    assert sorted(listed) == on_disk
    assert listed == sorted(listed), "series order follows the NNNN numbering"
    numbers = [int(n[:4]) for n in listed]
    assert len(set(numbers)) == len(numbers)


@pytest.mark.parametrize("folder", FOLDERS, ids=[f.name for f in FOLDERS])
def test_dep3_headers_and_diff_hygiene(folder, arctic_build):
    # load_series runs lint_headers: DEP-3 fields, ISO date, the Covered-by file (and test function) exists
    for patch in arctic_build.load_series(folder):
        text = patch.path.read_text()
        assert re.search(r"^Last-Update: \d{4}-\d{2}-\d{2}$", text, re.M)
        covered = patch.headers["Covered-by"]  # a test file, or file::test
        assert (REPO / covered.split("::")[0]).is_file(), covered
        for line in text.splitlines():
            if line.startswith(("--- ", "+++ ")):
                assert "\t" not in line, f"{patch.name}: timestamp in {line!r}"
                assert line[4:] == "/dev/null" or line[4:6] in ("a/", "b/"), f"{patch.name}: {line!r}"
                assert "/dev/null" not in line, f"{patch.name} creates or deletes a file: {line!r}"
                assert not line[6:].startswith("/") and "/../" not in line, f"{patch.name}: {line!r}"


@pytest.mark.parametrize("folder", FOLDERS, ids=[f.name for f in FOLDERS])
def test_series_applies_with_zero_fuzz_and_offset(folder, arctic_build, sdist):
    report = arctic_build.check([folder], None, None)
    assert report and "zero fuzz and zero offset" in report[0]


def test_overlay_files_are_new_and_documented(arctic_build, sdist, tmp_path):
    up = arctic_build.Upstream.load(arctic_build.default_folder())
    arctic_build.extract_verl(sdist, up, tmp_path)
    overlay = sorted(p.relative_to(REPO / "overlay").as_posix() for p in (REPO / "overlay" / "verl").rglob("*.py"))
    assert overlay
    provenance = (REPO / "overlay" / "PROVENANCE.md").read_text()
    for rel in overlay:
        assert not (tmp_path / rel).exists(), f"overlay/{rel} shadows an upstream file"
        assert f"`{rel}`" in provenance, f"overlay/{rel} has no row in overlay/PROVENANCE.md"
