"""ralph-tui's tools, driven with Textual's Pilot: the replay's progress line, pause and speeds; the
alert history; the status colours' contrast; the SQL console."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from textual.color import Color
from textual.widgets import DataTable

from tests.unit.test_tui_support import (
    SAMPLE_FILES,
    copy_samples,
    fixed_clock,
    screen_strips,
    screen_text,
    settle,
    until,
)
from tui.app import RalphApp
from tui.commands import MAX_SPEED, MIN_SPEED
from tui.main import main
from tui.messages import ReplayProgress, Watching
from tui.screens.alerts_screen import AlertsScreen
from tui.screens.session_screen import SessionScreen
from tui.screens.sessions_screen import SessionsScreen
from tui.screens.value_viewer import ValueViewer

SAMPLES = SAMPLE_FILES[0].parent


def held_replay(tmp_path: Path) -> tuple[RalphApp, threading.Event]:
    """A replay of the samples whose first wait lasts until the returned event is set."""
    gate = threading.Event()

    def sleep(seconds: float) -> None:
        gate.wait(10)

    app = RalphApp(
        replay_files=SAMPLE_FILES, replay_dir=tmp_path / "replay", speed=20, sleep=sleep, watch=False
    )
    return app, gate


def written_lines(directory: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in directory.glob("*.jsonl"))


# -- replay ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [(60, 20), (80, 24), (120, 30)])
def test_the_replay_progress_line_never_clips(tmp_path: Path, size: tuple[int, int]) -> None:
    """``replaying ×20: 33/263 lines`` and the percentage are both on screen at any width."""
    app, gate = held_replay(tmp_path)

    async def scenario() -> None:
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: app.replay.total > 0)
            app.post_message(ReplayProgress(33, 263, False))
            await until(pilot, lambda: app.replay.lines == 33)
            await pilot.pause()
            lines = [line for line in screen_text(app) if "33/263" in line]
            assert len(lines) == 1, screen_text(app)
            assert "replaying ×20: 33/263 lines" in lines[0]
            assert lines[0].rstrip().endswith("13%"), lines[0]
            gate.set()

    asyncio.run(scenario())


def test_p_pauses_the_replay_and_its_clock_then_resumes(tmp_path: Path) -> None:
    app, gate = held_replay(tmp_path)
    replay_dir = tmp_path / "replay"

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            first = len(SAMPLE_FILES)  # every recording's first line: they start together
            await until(pilot, lambda: written_lines(replay_dir) == first)
            await pilot.press("p")
            assert app.replay.paused
            gate.set()  # the worker would go on now, but the replay is paused
            clock = app.now()
            await pilot.pause(0.4)
            assert written_lines(replay_dir) == first and app.now() == clock
            assert any("paused (p resumes) ×20: " in line for line in screen_text(app))
            await pilot.press("p")
            await until(pilot, lambda: app.replay.done)
            assert written_lines(replay_dir) == sum(f.read_bytes().count(b"\n") for f in SAMPLE_FILES)
            assert app.now() > clock

    asyncio.run(scenario())


def test_replay_speeds_are_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``+`` ends at no waiting at all (and stays there), ``-`` at the slowest speed (never 0)."""
    app, gate = held_replay(tmp_path)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: app.replay.total > 0)
            seen = []
            for _ in range(15):
                await pilot.press("plus")
                seen.append(app.replay.speed)
            assert seen[:3] == [40, 80, 160] and seen[-1] == 0 and max(seen) <= MAX_SPEED
            assert seen[seen.index(0) :] == [0] * (len(seen) - seen.index(0))
            await pilot.press("minus")
            assert app.replay.speed == MAX_SPEED
            for _ in range(30):
                await pilot.press("minus")
            assert app.replay.speed == MIN_SPEED
            assert any("replaying ×0.25:" in line for line in screen_text(app))
            gate.set()

    asyncio.run(scenario())
    for bad in ("5000", "0.01", "nan", "inf", "-1"):
        assert main(["--replay", str(SAMPLES), "--speed", bad]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 5 and all("expected 0 (no waiting) or 0.25 to 1000" in e for e in errors)


# -- alerts ------------------------------------------------------------------------------------------------
def test_alerts_are_kept_in_a_history_screen_enter_reads_one_and_o_opens_its_session(tmp_path: Path) -> None:
    app = RalphApp(replay_files=SAMPLE_FILES, replay_dir=tmp_path / "replay", speed=0, now=fixed_clock)

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:  # tall enough to show every alert
            await until(pilot, lambda: app.replay.done and len(app.sessions_screen.rows) == len(SAMPLE_FILES))
            await until(pilot, lambda: any("tdd-success complete" in a for a in app.alert_log.alerts))
            await pilot.press("a")
            screen = app.screen
            assert isinstance(screen, AlertsScreen)
            table = screen.query_one("#alerts", DataTable)
            assert table.row_count == len(app.alert_log.alerts) >= 5
            # newest first, each with the time it was recorded, the session and what happened
            times = [e.at for e in screen.shown]
            assert times == sorted(times, reverse=True)
            done = next(e for e in screen.shown if e.session_id == "tdd-success")
            assert done.kind == "completed" and done.message == "tdd-success complete after 3 iterations"
            text = "\n".join(screen_text(app))
            assert (
                "2026-04-01 09:04:30  tdd-success               completed  tdd-success complete after" in text
            )
            assert "tdd-success complete after 3 iterations" in text
            # Enter shows the whole alert; o opens the alert's session; Esc comes back to the history
            table.move_cursor(row=screen.shown.index(done))
            await pilot.press("enter")
            await settle(pilot, lambda: isinstance(app.screen, ValueViewer))
            assert app.screen.text == done.message  # type: ignore[attr-defined]
            await pilot.press("escape")
            assert app.screen is screen
            await pilot.press("o")
            await settle(pilot, lambda: isinstance(app.screen, SessionScreen))
            opened = app.screen
            assert isinstance(opened, SessionScreen) and opened.session_id == "tdd-success"
            await pilot.press("escape")
            assert app.screen is screen
            await pilot.press("escape")
            assert isinstance(app.screen, SessionsScreen)

    asyncio.run(scenario())


def test_the_alert_history_says_when_there_are_none_and_fills_live(tmp_path: Path) -> None:
    journals = tmp_path / "journals"
    journals.mkdir()
    app = RalphApp([journals], now=fixed_clock)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: app.feed.live)
            await pilot.press("a")
            assert isinstance(app.screen, AlertsScreen)
            assert any("No alerts yet" in line for line in screen_text(app))
            (journals / "tdd-success.jsonl").write_bytes((SAMPLES / "tdd-success.jsonl").read_bytes())
            await until(pilot, lambda: app.screen.query_one("#alerts", DataTable).row_count == 1)
            assert not any("No alerts yet" in line for line in screen_text(app))

    asyncio.run(scenario())


# -- status colours ----------------------------------------------------------------------------------------
GLYPHS = {"●": "running", "✔": "complete", "■": "blocked", "▲": "escalated"}


def wcag_ratio(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    """The WCAG 2 contrast ratio, computed here from its definition."""

    def lum(rgb: tuple[int, int, int]) -> float:
        channels = [c / 255 for c in rgb]
        r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    high, low = sorted((lum(a), lum(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def status_colours(app: RalphApp) -> list[tuple[str, bool, tuple[int, int, int], tuple[int, int, int]]]:
    """(status, on the cursor row, foreground, background) of every status cell on screen, as painted."""
    table = app.sessions_screen.table
    cursor = table.cursor_key
    found = []
    for strip in screen_strips(app):
        text = strip.text
        row = next((sid for sid in app.sessions_screen.rows if f" {sid} " in text), None)
        if row is None:
            continue
        for segment in strip:
            glyph = segment.text.strip()[:1]
            if glyph in GLYPHS and segment.style is not None:
                assert segment.style.color is not None and segment.style.bgcolor is not None
                fg, bg = segment.style.color.get_truecolor(), segment.style.bgcolor.get_truecolor()
                found.append((GLYPHS[glyph], row == cursor, tuple(fg), tuple(bg)))
                break
    return found  # type: ignore[return-value]


def test_status_colours_are_readable_on_the_cursor_row_and_in_both_themes(tmp_path: Path) -> None:
    """Contrast >= 4.5:1 (WCAG AA) between each painted status and its painted background: every
    status on normal rows and on the cursor row, focused and not, dark and light."""
    app = RalphApp([copy_samples(tmp_path / "j")], now=fixed_clock, watch=False)

    async def scenario() -> None:
        async with app.run_test(size=(120, 30)) as pilot:
            await settle(
                pilot, lambda: app.feed.loaded and len(app.sessions_screen.rows) == len(SAMPLE_FILES)
            )
            screen = app.sessions_screen
            table = screen.table
            by_status: dict[str, str] = {}
            for sid, row in sorted(screen.rows.items()):
                if len(sid) < 24:  # the whole id on screen
                    by_status.setdefault(row.status, sid)
            assert set(by_status) == set(GLYPHS.values())
            for theme in ("textual-dark", "textual-light"):
                app.theme = theme
                seen = set()
                for focused in (True, False):
                    if focused:
                        table.focus()
                    else:
                        app.set_focus(None)
                    for sid in by_status.values():
                        table.move_to(sid)
                        await pilot.pause()
                        for status, on_cursor, fg, bg in status_colours(app):
                            ratio = wcag_ratio(fg, bg)
                            assert ratio >= 4.5, (theme, status, on_cursor, focused, fg, bg, round(ratio, 2))
                            seen.add((status, on_cursor))
                assert seen == {(s, c) for s in GLYPHS.values() for c in (True, False)}, theme

    asyncio.run(scenario())


def test_status_colours_come_from_the_theme(tmp_path: Path) -> None:
    """The theme picker changes the status colours: each theme paints ``complete`` in its own success
    colour (as is, where that is readable already)."""
    app = RalphApp([copy_samples(tmp_path / "j", ["tdd-success", "thrashing"])], now=fixed_clock, watch=False)
    painted: dict[str, tuple[int, int, int]] = {}

    async def scenario() -> None:
        async with app.run_test(size=(120, 30)) as pilot:
            await settle(pilot, lambda: app.feed.loaded and len(app.sessions_screen.rows) == 2)
            app.sessions_screen.table.move_to("thrashing")
            for theme in ("textual-dark", "nord", "gruvbox", "solarized-light"):
                app.theme = theme
                await pilot.pause()
                complete = [fg for status, cursor, fg, _ in status_colours(app) if status == "complete"]
                assert len(complete) == 1
                painted[theme] = complete[0]
                if theme == "nord":
                    success = Color.parse(app.theme_variables["text-success"])
                    assert complete[0] == (success.r, success.g, success.b)

    asyncio.run(scenario())
    assert len(set(painted.values())) == 4, painted


def test_a_later_replay_count_or_watching_waiting_supersedes_the_earlier() -> None:
    """Messages that repeat coalesce (``can_replace``): a later replay count supersedes an earlier one
    waiting, but never the last (``done``); a second ``Watching`` says what the first says."""
    assert ReplayProgress(10, 263, False).can_replace(ReplayProgress(40, 263, False))
    assert ReplayProgress(10, 263, False).can_replace(ReplayProgress(263, 263, True))
    assert not ReplayProgress(263, 263, True).can_replace(ReplayProgress(263, 263, True))
    assert not ReplayProgress(10, 263, False).can_replace(Watching())
    assert Watching().can_replace(Watching())
    assert not Watching().can_replace(ReplayProgress(10, 263, False))
