"""SVG snapshots of ralph-tui's screens, stored in ``snapshots/test_tui_snapshots/``.

Why our own syrupy extension instead of pytest-textual-snapshot: its 1.1.0 release pins pytest < 9
and syrupy 4, while this project runs pytest 9 and syrupy 7, so it cannot be installed alongside.
What it does is small: take ``App.export_screenshot()`` (an SVG of the current screen) and compare
it with a stored file. ``SvgSnapshots`` below is that: a ``SingleFileSnapshotExtension`` writing
text ``.svg`` files into the repository's top-level ``snapshots/`` folder, like the other snapshots
(``tests/conftest.py``'s ``TopLevelSnapshots``). An SVG opens in any browser for review.

Deterministic by construction: a fixed clock (``Monitor(now=...)``, so the age column does not move),
a fixed terminal size (100x30, and 80x24 for the smallest supported terminal), no file watcher
(``watch=False``), every worker awaited and every message handled, then the screen taken once three
shots in a row agree; no sleeps, no cursor blink (headless apps switch it off), notifications off
(Textual's test default).

Update with ``pytest tests/unit/test_tui_snapshots.py --snapshot-update`` and review the SVGs.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode
from syrupy.location import PyTestLocation
from textual.pilot import Pilot

from tests.unit.test_tui_support import ROOT, copy_samples, fixed_clock, settle
from tui.alert_log import bad_line_session
from tui.app import RalphApp
from tui.screens.alerts_screen import AlertEntry, AlertsScreen
from tui.screens.help_screen import HelpScreen
from tui.screens.session_screen import SessionScreen
from tui.screens.value_viewer import ValueViewer


class SvgSnapshots(SingleFileSnapshotExtension):
    """One ``.svg`` file per snapshot, in ``snapshots/<test file>/``."""

    file_extension = "svg"
    _write_mode = WriteMode.TEXT

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        return str(ROOT / "snapshots" / test_location.basename)


@pytest.fixture
def svg(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(SvgSnapshots)


@pytest.fixture(autouse=True)
def still_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """A SQL query takes no time (its elapsed time is on screen)."""
    monkeypatch.setattr("tui.screens.sql_screen.clock", lambda: 0.0)


@pytest.fixture
def journals(tmp_path: Path) -> Path:
    return copy_samples(tmp_path / "samples")


def shoot(app: RalphApp, size: tuple[int, int], steps: Any = None) -> str:
    """Run the app at ``size`` until it has loaded, run ``steps(pilot)``, and return the screenshot."""
    shot: list[str] = []

    async def scenario() -> None:
        async with app.run_test(size=size) as pilot:
            await settle(pilot, lambda: app.feed.loaded)
            if steps is not None:
                await steps(pilot)
            await settle(pilot, lambda: True)
            shot.append(await steady_screenshot(pilot))

    asyncio.run(scenario())
    return shot[0]


async def steady_screenshot(pilot: Pilot[Any], *, rounds: int = 50) -> str:
    """The screenshot once the screen stops changing: three identical shots in a row (a widget may
    still have work queued for its idle handler, e.g. a DataTable measuring new rows' widths)."""
    shots = [pilot.app.export_screenshot()]
    for _ in range(rounds):
        await pilot.pause()
        shots.append(pilot.app.export_screenshot())
        if len(shots) >= 3 and shots[-1] == shots[-2] == shots[-3]:
            return shots[-1]
    raise AssertionError("the screen did not settle")


def session_steps(session_id: str) -> Any:
    """Open a session and wait until its timeline and the selected iteration's detail are shown."""

    async def steps(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, RalphApp)
        app.open_session(session_id)

        def ready() -> bool:
            screen = app.screen
            return (
                isinstance(screen, SessionScreen)
                and screen.loads > 0
                and screen.detail is not None
                and screen.detail.iteration == screen.selected_iteration
            )

        await settle(pilot, ready)

    return steps


def app_for(journals: Path) -> RalphApp:
    return RalphApp([journals], now=fixed_clock, watch=False)


@pytest.mark.parametrize("size", [(100, 30), (80, 24)], ids=["100x30", "80x24"])
def test_sessions_screen(journals: Path, svg: SnapshotAssertion, size: tuple[int, int]) -> None:
    assert shoot(app_for(journals), size) == svg


@pytest.mark.parametrize(
    "session_id", ["tdd-success", "thrashing", "circuit-breaker", "quality-regression", "validation-stall"]
)
def test_session_screen(journals: Path, svg: SnapshotAssertion, session_id: str) -> None:
    assert shoot(app_for(journals), (100, 30), session_steps(session_id)) == svg


def test_session_screen_with_costs(journals: Path, svg: SnapshotAssertion) -> None:
    """The recorded Claude Code session names its model: its cost in dollars in the title, per
    iteration in the timeline (wide enough to show the column) and beside the token bars."""
    assert (
        shoot(app_for(journals), (150, 36), session_steps("cc-5c0375b4-57a5-4f26-b12d-d022ee4e51b7")) == svg
    )


def test_session_screen_80x24(journals: Path, svg: SnapshotAssertion) -> None:
    assert shoot(app_for(journals), (80, 24), session_steps("thrashing")) == svg


def test_session_screen_light_theme(journals: Path, svg: SnapshotAssertion) -> None:
    app = app_for(journals)
    app.theme = "textual-light"
    assert shoot(app, (100, 30), session_steps("tdd-success")) == svg


def test_sql_console_with_a_result(journals: Path, svg: SnapshotAssertion) -> None:
    app = app_for(journals)

    async def steps(pilot: Pilot[Any]) -> None:
        await pilot.press("s")
        # the saved "thrashing files" query, with a tie-breaker: rows that tie on ``times`` would
        # otherwise come back in any order (DuckDB reads in parallel)
        app.sql_screen.editor.load_text(
            "SELECT session_id, file, times, iterations\n"
            "FROM thrashing(min_iterations := 3)\n"
            "ORDER BY times DESC, session_id, file"
        )
        await pilot.press("ctrl+r")
        await settle(pilot, lambda: app.sql_screen.runs == 1)

    assert shoot(app, (100, 30), steps) == svg


def test_sql_console_error(journals: Path, svg: SnapshotAssertion) -> None:
    app = app_for(journals)

    async def steps(pilot: Pilot[Any]) -> None:
        await pilot.press("s")
        app.sql_screen.editor.load_text("SELECT * FROM read_csv('/etc/passwd')")
        await pilot.press("ctrl+r")
        await settle(pilot, lambda: app.sql_screen.runs == 1)

    assert shoot(app, (80, 24), steps) == svg


def test_help_screen(journals: Path, svg: SnapshotAssertion) -> None:
    app = app_for(journals)

    async def steps(pilot: Pilot[Any]) -> None:
        await pilot.press("question_mark")
        await settle(pilot, lambda: isinstance(app.screen, HelpScreen))

    assert shoot(app, (100, 30), steps) == svg


def test_filtered_and_sorted_sessions(journals: Path, svg: SnapshotAssertion) -> None:
    app = app_for(journals)

    async def steps(pilot: Pilot[Any]) -> None:
        await pilot.press("slash", *"blocked", "enter", "o", "o")
        await settle(pilot, lambda: app.sessions_screen.filter_text == "blocked")

    assert shoot(app, (100, 30), steps) == svg


def test_alert_history(journals: Path, svg: SnapshotAssertion) -> None:
    app = app_for(journals)

    async def steps(pilot: Pilot[Any]) -> None:
        at = datetime(2026, 4, 1, 9, 4, tzinfo=UTC)
        bad = "torn-last-line.jsonl:9: not JSON"
        blocked = "thrashing: same files modified again and again: calc.py (5 iterations)"
        app.alert_log.history += [
            AlertEntry(at, "tdd-success", "completed", "tdd-success complete after 3 iterations"),
            AlertEntry(
                at + timedelta(minutes=31),
                "thrashing",
                "blocked",
                f"thrashing blocked at iteration 5: {blocked}",
            ),
            AlertEntry(at + timedelta(minutes=32), bad_line_session(bad), "bad line", bad),
        ]
        await pilot.press("a")
        await settle(pilot, lambda: isinstance(app.screen, AlertsScreen))

    assert shoot(app, (100, 30), steps) == svg


def test_sql_value_viewer(journals: Path, svg: SnapshotAssertion) -> None:
    app = app_for(journals)

    async def steps(pilot: Pilot[Any]) -> None:
        await pilot.press("s")
        app.sql_screen.editor.load_text("SELECT repeat('a long value ', 40) AS long, 42 AS n")
        await pilot.press("ctrl+r")
        await settle(pilot, lambda: app.sql_screen.runs == 1)
        await pilot.press("ctrl+t", "enter")
        await settle(pilot, lambda: isinstance(app.screen, ValueViewer))

    assert shoot(app, (80, 24), steps) == svg
