from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.amber import AmberSnapshotExtension
from syrupy.location import PyTestLocation

from ledger.core.home import Home
from ledger.loop.engine import Engine
from tests.fixtures.scenarios import HOME
from tests.helpers import ticking

ROOT = Path(__file__).resolve().parent.parent

os.environ["RALPH_WARM"] = "0"
"""Stop hooks run by the tests (and every process they start) run their stops in-process, where each
effect is observable; the tests of the warm worker, which Claude Code's hook uses by default, ask for
it (``RALPH_WARM=1``), and ``tests/journeys/test_warm.py`` runs the default itself."""


if os.environ.get("PYTEST_XDIST_WORKER"):
    # a parallel worker exports COLUMNS=80 and LINES=24, which a user's shell does not: a program a test
    # starts in a terminal of its own (ralph-tui in tmux) would take them for its size
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)


class TopLevelSnapshots(AmberSnapshotExtension):
    """Snapshots live in the repository's top-level ``snapshots/`` folder."""

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        return str(ROOT / "snapshots")


@pytest.fixture
def snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(TopLevelSnapshots)


@pytest.fixture
def home(tmp_path: Path) -> Home:
    h = Home.resolve(tmp_path / "home")
    h.ensure()
    return h


@pytest.fixture
def fixture_home(tmp_path: Path) -> Home:
    """A copy of the hand-written sample home (journals only)."""
    shutil.copytree(HOME / "journals", tmp_path / "fixture" / "journals")
    return Home.resolve(tmp_path / "fixture")


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """An empty work directory for an engine or runner."""
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def engine(home: Home, work: Path) -> Engine:
    """An engine on a fresh home with a deterministic clock and no fsync."""
    return Engine(home, work_dir=work, clock=ticking(), fsync=False)


SLOW_FILES = frozenset({"test_spark.py", "test_bench.py", "test_tui_serve.py"})
"""Test files marked ``slow``: Spark, the browser, the benches (``make fast`` leaves them out)."""

SOLO_FILES = frozenset(
    {
        "journeys/test_warm.py",
        "journeys/test_warm_faults.py",
        "journeys/test_notify.py",
        "journeys/test_fault_suite.py",
        "reliability/test_warm_worker.py",
    }
)
"""Test files (under ``tests/``) marked ``solo``: they kill processes at chosen moments or wait for
answers within a time, so they run with no other test beside them (as do the tests of a real terminal,
``terminals``)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by what it runs: ``journey`` (tests/journeys/), ``clients`` (tests/clients/),
    ``slow`` (``SLOW_FILES``), so that ``make fast`` can leave them out; the full run runs all."""
    for item in items:
        path = Path(str(item.fspath))
        if path.parent.name == "journeys":
            item.add_marker(pytest.mark.journey)
        elif path.parent.name == "clients":
            item.add_marker(pytest.mark.clients)
        if path.name in SLOW_FILES:
            item.add_marker(pytest.mark.slow)
        if f"{path.parent.name}/{path.name}" in SOLO_FILES or "terminals" in getattr(
            item, "fixturenames", ()
        ):
            item.add_marker(pytest.mark.solo)


@pytest.fixture(scope="session")
def _solo_locks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path] | None:
    """The two lock files the suite's parallel workers share (None: the suite runs in one process)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    shared = tmp_path_factory.getbasetemp().parent  # the run's folder, above each worker's own
    return shared / "solo.lock", shared / "solo.turnstile"


@pytest.fixture(autouse=True)
def _solo(request: pytest.FixtureRequest, _solo_locks: tuple[Path, Path] | None) -> Iterator[None]:
    """The suite runs in parallel workers (``-n 2``, pyproject): a ``solo`` test holds the shared lock
    alone, every other test shares it. The turnstile keeps a solo test from waiting for ever behind the
    other worker's stream of shared holds (docs/design/architecture.md, "Tests and benches")."""
    if _solo_locks is None:
        yield
        return
    lock, turnstile = _solo_locks
    alone = request.node.get_closest_marker("solo") is not None
    with open(lock, "a") as held, open(turnstile, "a") as gate:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(held, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--long``: run the reliability suites (crash, load, hostile input) in their long form."""
    parser.addoption(
        "--long",
        action="store_true",
        default=False,
        help="run the crash, load and hostile-input suites in their long form (minutes, not seconds)",
    )


@pytest.fixture
def long_form(request: pytest.FixtureRequest) -> bool:
    """True when the suite runs with ``--long``."""
    return bool(request.config.getoption("--long"))
