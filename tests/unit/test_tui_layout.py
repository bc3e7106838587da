"""ralph-tui's layout at the sizes the manual promises, driven with Textual's Pilot: everything fits
80x24 (the fleet line, the replay's progress, the export dialog, the session's charts), wide terminals
use their width, and the keys of the lists and tables."""

from __future__ import annotations

import asyncio
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from rich.color import Color as RichColor
from textual.app import App
from textual.widget import Widget
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
from tui import format as fmt
from tui.app import RalphApp
from tui.messages import ReplayProgress
from tui.screens.export_dialog import ExportDialog
from tui.screens.session_screen import SessionScreen

CC_SAMPLE = "cc-5c0375b4-57a5-4f26-b12d-d022ee4e51b7"
SIZES = [(80, 24), (120, 40)]
SIZE_IDS = ["80x24", "120x40"]


def region_text(app: App[Any], widget: Widget) -> list[str]:
    """The lines of the screen inside a widget's content region, as text."""
    region = widget.content_region
    strips = screen_strips(app)[region.y : region.bottom]
    return [strip.crop(region.x, region.right).text for strip in strips]


def rgb(colour: RichColor | None) -> tuple[int, int, int]:
    """A painted colour as an (r, g, b) triple."""
    assert colour is not None
    c = colour.get_truecolor()
    return (c.red, c.green, c.blue)


def samples_app(tmp_path: Path, names: list[str] | None = None) -> RalphApp:
    return RalphApp([copy_samples(tmp_path / "j", names)], now=fixed_clock, watch=False)


async def open_session(pilot: Any, app: RalphApp, session_id: str) -> SessionScreen:
    await settle(pilot, lambda: app.feed.loaded)
    app.open_session(session_id)
    await settle(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.detail is not None)
    screen = app.screen
    assert isinstance(screen, SessionScreen)
    return screen


# -- 80x24 fits ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_the_fleet_line_keeps_its_totals_completion_and_filter_count(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    """The fleet line takes a shorter form where the long one does not fit: the completion rate and
    the filter's count are always there whole (never cut at ``· completion``)."""
    app = samples_app(tmp_path)

    async def scenario() -> None:
        async with app.run_test(size=size) as pilot:
            await settle(pilot, lambda: app.feed.loaded)
            screen = app.sessions_screen
            await pilot.press("slash", *"blocked", "enter")
            await settle(pilot, lambda: screen.filter_text == "blocked")
            fleet = screen_text(app)[0].rstrip()
            shown = screen.table.row_count
            assert "…" not in fleet, fleet
            assert re.search(r"\b20 sessions\b", fleet), fleet
            assert re.search(r"· completion \d+%", fleet), fleet
            assert fleet.endswith(f"{shown}/20"), fleet
            for symbol, count in (("●", 1), ("✔", 5), ("■", 4), ("▲", 10)):
                assert re.search(rf"{symbol} ?{count}\b", fleet), (symbol, fleet)

    asyncio.run(scenario())


@pytest.mark.parametrize("width", range(80, 121, 4))
def test_the_replay_progress_and_its_end_fit_every_width(tmp_path: Path, width: int) -> None:
    """From 80 to 120 columns the replay's progress keeps its count and percentage, and the fleet line
    says ``replayed N lines`` whole once it has ended, with the completion rate's ``%``."""
    gate = threading.Event()
    app = RalphApp(
        replay_files=SAMPLE_FILES,
        replay_dir=tmp_path / "replay",
        speed=20,
        sleep=lambda seconds: gate.wait(10),
        watch=False,
    )

    async def scenario() -> None:
        async with app.run_test(size=(width, 24)) as pilot:
            await until(pilot, lambda: app.replay.total > 0)
            app.post_message(ReplayProgress(1234, 12345, False))
            await until(pilot, lambda: app.replay.lines == 1234)
            await pilot.pause()
            lines = [line.rstrip() for line in screen_text(app) if "1234/12345 lines" in line]
            assert len(lines) == 1 and lines[0].endswith("10%"), screen_text(app)[:3]
            gate.set()
            await until(pilot, lambda: app.replay.done)
            app.feed.mark_dirty(None)  # (not watching: read what the replay wrote)
            await settle(pilot, lambda: app.sessions_screen.fleet.sessions == 20)
            fleet = screen_text(app)[0].rstrip()
            total = app.replay.total
            assert fleet.endswith(f"· replayed {total} lines"), fleet
            assert re.search(r"· completion \d+%", fleet), fleet

    asyncio.run(scenario())


HINT = "Enter writes it (.csv or .json, relative to the current folder) · esc cancels"


@pytest.mark.parametrize("size", [*SIZES, (40, 10)], ids=[*SIZE_IDS, "40x10"])
def test_the_export_dialogs_hint_is_whole(tmp_path: Path, size: tuple[int, int]) -> None:
    app = samples_app(tmp_path, ["thrashing"])

    async def scenario() -> None:
        async with app.run_test(size=size) as pilot:
            await settle(pilot, lambda: app.feed.loaded)
            await pilot.press("s")
            app.sql_screen.editor.load_text("SELECT 1 AS one")
            await pilot.press("ctrl+r")
            await settle(pilot, lambda: app.sql_screen.runs == 1)
            await pilot.press("ctrl+s")
            await settle(pilot, lambda: isinstance(app.screen, ExportDialog))
            hint = app.screen.query_one("#export-hint")
            shown = " ".join(line.strip() for line in region_text(app, hint))
            assert " ".join(shown.split()) == HINT, region_text(app, hint)

    asyncio.run(scenario())


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_the_session_charts_are_in_view_with_their_bars(tmp_path: Path, size: tuple[int, int]) -> None:
    """The tokens panel shows its legend on one line and a bar per iteration, in view (not below the
    fold of the right-hand column), as do the score and files charts."""
    app = samples_app(tmp_path, [CC_SAMPLE])

    async def scenario() -> None:
        async with app.run_test(size=size) as pilot:
            screen = await open_session(pilot, app, CC_SAMPLE)
            await pilot.pause()
            right = screen.query_one("#right")
            for name in ("plot", "heat", "tokens"):
                panel = screen.query_one(f"#{name}")
                assert panel.region.bottom <= right.region.bottom, (name, panel.region, right.region)
            legend, *bars = region_text(app, screen.query_one("#tokens"))
            assert legend.split()[:4] == ["█in", "█out", "█cache", "="], legend
            totals = [line.split()[-2] for line in bars if line.strip()]
            assert totals == ["58.4k", "220.3k", "97.0k"], bars
            heat = region_text(app, screen.query_one("#heat"))
            assert any("×2" in line for line in heat), heat

    asyncio.run(scenario())


# -- keys ------------------------------------------------------------------------------------------------
def test_home_end_and_vim_keys_move_through_the_timeline(tmp_path: Path) -> None:
    app = samples_app(tmp_path, ["thrashing"])

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            screen = await open_session(pilot, app, "thrashing")
            timeline = screen.query_one("#timeline", DataTable)
            assert app.focused is timeline and timeline.cursor_row == 4
            for key, row in (("home", 0), ("j", 1), ("j", 2), ("k", 1), ("end", 4), ("home", 0), ("G", 4)):
                await pilot.press(key)
                await settle(pilot, lambda row=row: screen.selected_iteration == row + 1)  # type: ignore[misc]
                assert timeline.cursor_row == row, key
            assert screen.following  # back on the newest: it follows again

    asyncio.run(scenario())


def test_vim_keys_move_through_the_sessions_and_the_results(tmp_path: Path) -> None:
    app = samples_app(tmp_path)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, lambda: app.feed.loaded)
            table = app.sessions_screen.table
            assert app.focused is table and table.cursor_row == 0
            await pilot.press("j", "j", "k")
            assert table.cursor_row == 1
            await pilot.press("G")
            assert table.cursor_row == table.row_count - 1
            await pilot.press("home")
            assert table.cursor_row == 0
            await pilot.press("s")
            app.sql_screen.editor.load_text("SELECT * FROM (VALUES (1, 2), (3, 4), (5, 6)) t(a, b)")
            await pilot.press("ctrl+r")
            await settle(pilot, lambda: app.sql_screen.runs == 1)
            await pilot.press("ctrl+t")
            results = app.sql_screen.table
            await pilot.press("j", "l")
            assert tuple(results.cursor_coordinate) == (1, 1)
            await pilot.press("h", "k")
            assert tuple(results.cursor_coordinate) == (0, 0)
            await pilot.press("G")
            assert results.cursor_coordinate.row == 2

    asyncio.run(scenario())


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_the_steering_keys_are_in_the_footer(tmp_path: Path, size: tuple[int, int]) -> None:
    """``P``, ``g`` and ``u`` are in the footer of the sessions and the session screen, at 80x24 too
    (less needed keys give way), with the screens' own keys and ``?``."""
    app = samples_app(tmp_path, ["thrashing", "tdd-success"])
    steering = ["P Pause loop", "g Steer", "u Unblock"]

    async def scenario() -> None:
        async with app.run_test(size=size) as pilot:
            await settle(pilot, lambda: app.feed.loaded)
            footer = screen_text(app)[-1]
            for key in [*steering, "⏎ Open", "/ Filter", "o Sort", "s SQL", "? Help", "^p palette"]:
                assert key in footer, (key, footer)
            await open_session(pilot, app, "thrashing")
            await pilot.pause()
            footer = screen_text(app)[-1]
            for key in [*steering, "esc Back", "? Help", "^p palette"]:
                assert key in footer, (key, footer)

    asyncio.run(scenario())


def test_the_cursor_rows_sparkline_is_drawn_like_its_text(tmp_path: Path) -> None:
    """On the cursor row the trend's blocks are readable and as light as the row's own text is (the
    cursor is blue with light text in the dark theme: light blocks, never near-black ones)."""
    app = samples_app(tmp_path, ["thrashing", "tdd-success"])

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, lambda: app.feed.loaded and len(app.sessions_screen.rows) == 2)
            table = app.sessions_screen.table
            for theme in ("textual-dark", "textual-light"):
                app.theme = theme
                for sid in ("thrashing", "tdd-success"):
                    table.move_to(sid)
                    await pilot.pause()
                    row = next(s for s in screen_strips(app) if f" {sid} " in s.text)
                    cells = [seg for seg in row if seg.style and seg.text.strip()]
                    text = next(seg for seg in cells if sid in seg.text).style
                    blocks = [seg.style for seg in cells if set(seg.text.strip()) <= set(fmt.BLOCKS)]
                    assert text is not None and blocks, (theme, sid)
                    bg = rgb(text.bgcolor)
                    light_text = fmt.luminance(rgb(text.color)) > fmt.luminance(bg)
                    for style in blocks:
                        assert style is not None
                        fg = rgb(style.color)
                        assert fmt.contrast(fg, bg) >= 4.5, (theme, sid, fg, bg)
                        assert (fmt.luminance(fg) > fmt.luminance(bg)) == light_text, (theme, sid, fg, bg)

    asyncio.run(scenario())
