# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The suite's own machinery (tests/conftest.py), run by a real pytest with two xdist workers on a small suite that
uses this repository's conftest: the work units (a file, or one end-to-end test), the most expensive unit first by
``tests/durations.json``, every test run exactly once, and the run's report (counts, budget, durations as JSON)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"
PYPROJECT = """\
[tool.pytest.ini_options]
addopts = "-p no:cacheprovider --dist loadfile"
arctic_pytest_budget_s = "0.5"
arctic_test_budget_s = "0.3"
arctic_e2e_test_budget_s = "100"
"""


def _suite(root: Path) -> None:
    (root / "tests" / "special_e2e").mkdir(parents=True)
    (root / "tests" / "unit").mkdir()
    shutil.copy(CONFTEST, root / "tests" / "conftest.py")
    (root / "pyproject.toml").write_text(PYPROJECT)
    sleep = "import time\n\n\n"
    (root / "tests" / "unit" / "test_cheap.py").write_text(
        sleep + "".join(f"def test_c{i}():\n    time.sleep(0.05)\n\n\n" for i in range(3))
    )
    (root / "tests" / "unit" / "test_dear.py").write_text(sleep + "def test_d0():\n    time.sleep(0.4)\n")
    (root / "tests" / "special_e2e" / "test_runs.py").write_text(
        sleep + "".join(f"def test_run{i}():\n    time.sleep(0.2)\n\n\n" for i in range(2))
    )
    durations = {
        "tests/unit/test_cheap.py::test_c0": 1.0,
        "tests/unit/test_dear.py::test_d0": 900.0,  # the most expensive unit: handed out first
        "tests/special_e2e/test_runs.py::test_run0": 200.0,
        "tests/special_e2e/test_runs.py::test_run1": 100.0,
    }
    (root / "tests" / "durations.json").write_text(json.dumps(durations))


def test_units_order_and_report(tmp_path):
    _suite(tmp_path)
    report = tmp_path / "report.json"
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-v", "tests"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "ARCTIC_TEST_REPORT": str(report)},
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    ran = re.findall(r"\[(gw\d)\] \[\s*\d+%\] PASSED (\S+)", r.stdout)
    worker = dict((nodeid, gw) for gw, nodeid in ran)
    assert (
        sorted(worker)
        == sorted(
            [f"tests/unit/test_cheap.py::test_c{i}" for i in range(3)]
            + ["tests/unit/test_dear.py::test_d0"]
            + [f"tests/special_e2e/test_runs.py::test_run{i}" for i in range(2)]
        )
        and len(ran) == 6
    )  # every test once
    # a file is one unit: its tests share a worker (and its module fixtures); end-to-end tests are units of their own
    assert len({worker[f"tests/unit/test_cheap.py::test_c{i}"] for i in range(3)}) == 1
    # the first two units handed out are the two most expensive ones, one to each worker
    first = {gw: nodeid for gw, nodeid in reversed(ran)}
    assert sorted(first.values()) == ["tests/special_e2e/test_runs.py::test_run0", "tests/unit/test_dear.py::test_d0"]
    # the report: counts, the pytest budget and the tests over theirs, and the JSON with every test's seconds
    assert "tests: 6 passed, 0 failed, 0 error, 0 skipped, 0 xfailed, 0 deselected (6 run)" in r.stdout
    assert "OVER BUDGET: the pytest stage took" in r.stdout
    assert re.search(r"over its own budget: \d+ s tests/unit/test_dear.py::test_d0", r.stdout), r.stdout
    over = [line for line in r.stdout.splitlines() if line.startswith("over its own budget:")]
    assert not [line for line in over if "special_e2e" in line], over  # under their own (larger) budget
    data = json.loads(report.read_text())
    assert data["counts"]["passed"] == 6 and data["over_budget"] is True
    assert set(data["durations"]) == set(worker) and data["durations"]["tests/unit/test_dear.py::test_d0"] >= 0.4
    assert 0.0 <= data["cpu_busy"] <= 1.0
    assert data["pace"] is None and "pace:" not in r.stdout  # four recorded tests: too few to say


def test_an_unreviewed_skip_fails_the_run(tmp_path):
    """A skip whose file and reason tests/conftest.py's REVIEWED_SKIPS lists passes; any other fails the run, named."""
    _suite(tmp_path)
    (tmp_path / "tests" / "kernels").mkdir()
    (tmp_path / "tests" / "kernels" / "test_densify.py").write_text(
        "import pytest\n\n\ndef test_gpu():\n    pytest.skip('needs a CUDA GPU (CPU coverage: elsewhere)')\n"
    )
    (tmp_path / "tests" / "unit" / "test_broken.py").write_text(
        "import pytest\n\nx = pytest.importorskip('a_module_that_does_not_exist')\n\n\ndef test_x():\n    pass\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "tests"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    unreviewed = [line for line in r.stdout.splitlines() if line.startswith("UNREVIEWED SKIP")]
    assert len(unreviewed) == 1 and "tests/unit/test_broken.py" in unreviewed[0], r.stdout[-3000:]
    assert "a_module_that_does_not_exist" in unreviewed[0]
    (tmp_path / "tests" / "unit" / "test_broken.py").unlink()
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "tests"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0 and "UNREVIEWED SKIP" not in r.stdout, r.stdout[-3000:]
    assert "1 skipped" in r.stdout


def test_pace_is_the_median_ratio_to_the_recorded_seconds():
    import importlib.util

    spec = importlib.util.spec_from_file_location("suite_conftest", CONFTEST)
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    recorded = {f"t{i}": 2.0 for i in range(25)} | {"short": 0.1, "gone": 5.0}
    run = {f"t{i}": 2.0 * (1.8 if i < 20 else 9.0) for i in range(25)} | {"short": 50.0, "new": 100.0}
    # 25 tests both have over the 1 s floor: 20 ran at 1.8x, five grew (9x); the short one and the new one do not count
    assert conftest.pace(run, recorded) == (1.8, 25)
    assert conftest.pace(run, recorded, least=26) is None  # too few to say
    assert conftest.pace({f"t{i}": 1.0 for i in range(4)}, {f"t{i}": 2.0 for i in range(4)}, least=4) == (0.5, 4)
