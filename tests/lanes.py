"""Lanes: where each test runs follows from what it needs, decided here from
its folder and its fixtures, never marked by hand.

| lane | its tests need | run it with |
|---|---|---|
| pure | Python alone | `pytest --lane pure` |
| database | a PostgreSQL server | `pytest --lane database` |
| processes | `tidings` commands, a browser, Prism, network namespaces | `pytest --lane processes` |
| long | the matrices and the long runs, bounded | `pytest --lane long` |

`pytest` alone runs the default lane: pure, database, and the processes
tests marked `smoke` (the ones a newcomer's first week leans on). `--lane
smoke` runs only those marked `smoke`; `--lane all` runs everything. Files
or tests named on the command line run whatever their lane, unless
`--lane` is given too.

A test in the pure or database lane that starts a process fails and says
so, so the table above cannot drift from what the tests do.

`--lane-budget` fails the run when its wall time overruns the budget of
the lanes it ran by more than half (CI sets it), so the budgets stay true.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

TESTS = Path(__file__).parent
LANES = ("pure", "database", "processes", "long")
SELECTIONS = (*LANES, "smoke", "default", "all")
# Folders whose every test is in one lane; elsewhere the fixtures decide.
LANE_OF_FOLDER = {"e2e": "processes", "docs": "processes", "long": "long"}
STARTS_PROCESSES = "_tidings_starts_processes"
# What every database test asks for, directly or through `tidings`/`db_url`.
DATABASE_FIXTURE = "pg_server_url"
# Folders that promise what their tests need at most: a test there that
# needs more is in the wrong folder.
PROMISED = {"unit": {"pure"}, "integration": {"pure", "database"}}
# Wall-time budget of each lane on two cores, `-n 2`, in seconds.
BUDGET_S = {"pure": 60, "database": 240, "processes": 300, "long": 420, "smoke": 150}
OVERRUN = 1.5

_started = time.monotonic()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tidings lanes")
    group.addoption(
        "--lane",
        action="append",
        choices=SELECTIONS,
        default=[],
        help="run this lane (repeatable): " + ", ".join(SELECTIONS) + " (tests/lanes.py)",
    )
    group.addoption(
        "--lane-budget",
        action="store_true",
        help="fail when the run takes over 1.5x the budget of the lanes it ran",
    )


def pytest_configure(config: pytest.Config) -> None:
    for lane in LANES:
        config.addinivalue_line("markers", f"{lane}: in the {lane} lane (set by tests/lanes.py)")
    config.addinivalue_line(
        "markers", "smoke: a processes test the README's `pytest` runs too (tests/lanes.py)"
    )


def lane_of(item: pytest.Item) -> str:
    folder = Path(item.path).relative_to(TESTS).parts[0]
    if folder in LANE_OF_FOLDER:
        return LANE_OF_FOLDER[folder]
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs if info is not None else {}
    if any(getattr(d[-1].func, STARTS_PROCESSES, False) for d in defs.values() if d):
        return "processes"
    return "database" if DATABASE_FIXTURE in getattr(item, "fixturenames", ()) else "pure"


F = TypeVar("F", bound=Callable[..., Any])


def starts_processes(fixture: F) -> F:
    """Marks a fixture function that starts a process (Prism, `tidings
    serve`, a worker): every test using it is in the processes lane. Put it
    under `@pytest.fixture`."""
    setattr(fixture, STARTS_PROCESSES, True)
    return fixture


def _selected(config: pytest.Config) -> set[str] | None:
    """The lanes to keep; None keeps everything collected."""
    chosen = set(config.getoption("lane"))
    if not chosen:
        named = config.args_source != pytest.Config.ArgsSource.TESTPATHS
        chosen = set() if named else {"default"}
    if not chosen or "all" in chosen:
        return None
    if "default" in chosen:
        chosen |= {"pure", "database", "smoke"}
    return chosen


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    misplaced = []
    for item in items:
        lane = lane_of(item)
        item.add_marker(lane)
        promised = PROMISED.get(Path(item.path).relative_to(TESTS).parts[0])
        if promised and lane not in promised:
            misplaced.append(f"{item.nodeid}: needs the {lane} lane, its folder promises less")
    if misplaced:
        raise pytest.UsageError("tests in the wrong folder:\n" + "\n".join(misplaced))
    keep = _selected(config)
    if keep is None:
        return
    chosen, dropped = [], []
    for item in items:
        smoke = item.get_closest_marker("smoke") is not None
        wanted = lane_of(item) in keep or (smoke and "smoke" in keep)
        (chosen if wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = chosen


@pytest.fixture(autouse=True)
def _lane_guard(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pure and database tests may not start processes."""
    lane = lane_of(request.node)
    if lane in ("pure", "database"):

        def refuse(self: subprocess.Popen[Any], args: Any, *rest: Any, **kw: Any) -> None:
            raise AssertionError(
                f"a {lane} test started a process ({args!r:.80}): it belongs in the "
                "processes lane: in tests/e2e/, or through a fixture marked "
                "@starts_processes (tests/lanes.py)"
            )

        monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if not config.getoption("lane_budget") or hasattr(config, "workerinput"):
        return
    keep = _selected(config) or set(LANES)
    keep.discard("default")
    budget = sum(BUDGET_S[lane] for lane in keep if lane in BUDGET_S)
    took = time.monotonic() - _started
    verdict = "within" if took <= budget * OVERRUN else "OVER"
    line = f"lanes {'+'.join(sorted(keep))}: {took:.0f} s, budget {budget} s ({verdict})"
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)
    if verdict == "OVER" and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
@starts_processes
def spawns() -> None:
    """Asked for by a test that starts processes in its own body (outside
    tests/e2e/ and without a fixture that does): it puts the test in the
    processes lane, as `db_url` puts one in the database lane."""
