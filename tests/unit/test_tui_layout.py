"""ralph-tui's layout at the sizes the manual promises, driven with Textual's Pilot: everything fits
80x24 (the fleet line, the replay's progress, the export dialog, the session's charts), wide terminals
use their width, and the keys of the lists and tables."""

from __future__ import annotations

import asyncio
import itertools
import re
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from rich.color import Color as RichColor
from textual.app import App
from textual.widget import Widget
from textual.widgets import DataTable, OptionList

from ledger import events as E
from ledger.storage.journal import Journal
from tests.unit.test_tui_support import (
    NOW,
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
            await pilot.press("ctrl+l")
            examples = app.sql_screen.query_one("#examples", OptionList)
            await settle(pilot, lambda: app.focused is examples)
            await pilot.press("j", "j", "k")
            assert examples.highlighted == 1
            await pilot.press("G")
            assert examples.highlighted == examples.option_count - 1

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


# -- contrast ----------------------------------------------------------------------------------------
def fmt_rgb(colour: tuple[int, int, int]) -> str:
    """``#rrggbb``."""
    return "#" + "".join(f"{c:02x}" for c in colour)


def drawing(text: str) -> bool:
    """Only spaces, box-drawing and block characters (borders, scrollbars, bars)."""
    return all(c.isspace() or "\u2500" <= c <= "\u259f" for c in text)


def unreadable(app: App[Any], widgets: list[Widget]) -> list[tuple[str, str, str, float]]:
    """(text, colour, background, contrast) of every cell drawn below 4.5:1: any text on the screen,
    and anything at all (bars, sparklines, glyphs) inside the widgets' content."""
    strips = screen_strips(app)
    regions = [w.scrollable_content_region for w in widgets]
    found = []
    for y, strip in enumerate(strips):
        x = 0
        for segment in strip:
            text, style = segment.text, segment.style
            start, x = x, x + segment.cell_length
            inside = any(r.y <= y < r.bottom and r.x <= start < r.right for r in regions)
            if style is None or style.dim or not text.strip() or (drawing(text) and not inside):
                continue
            fg, bg = rgb(style.color), rgb(style.bgcolor)
            if style.reverse:
                fg, bg = bg, fg
            ratio = fmt.contrast(fg, bg)
            if ratio < fmt.MIN_CONTRAST:
                found.append((text, fmt_rgb(fg), fmt_rgb(bg), round(ratio, 2)))
    return found


@pytest.mark.parametrize("theme", ["textual-dark", "textual-light", "NO_COLOR"])
def test_every_cell_is_readable_in_every_theme_and_without_colour(
    tmp_path: Path, theme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """WCAG AA (4.5:1) between every painted cell and its painted background: the sessions table with
    the cursor on a row of each status (focused or not), the session screen with its timeline's cursor
    row, charts, detail and events, and the fleet line, titles and footers around them; in the dark
    and light themes and under ``NO_COLOR`` (where Textual paints in greys)."""
    if theme == "NO_COLOR":
        monkeypatch.setenv("NO_COLOR", "1")
    app = samples_app(tmp_path)
    if theme != "NO_COLOR":
        app.theme = theme

    async def scenario() -> None:
        async with app.run_test(size=(120, 30)) as pilot:
            await settle(pilot, lambda: app.feed.loaded and len(app.sessions_screen.rows) == 20)
            assert app.no_color == (theme == "NO_COLOR")
            screen = app.sessions_screen
            table = screen.table
            by_status = {row.status: sid for sid, row in sorted(screen.rows.items())}
            for focused in (True, False):
                table.focus() if focused else app.set_focus(None)
                for sid in [
                    *by_status.values(),
                    "quality-regression",
                    "cc-5c0375b4-57a5-4f26-b12d-d022ee4e51b7",
                ]:
                    table.move_to(sid)
                    await pilot.pause()
                    assert unreadable(app, [table]) == [], (theme, focused, sid)
            for sid in ("thrashing", "quality-regression", CC_SAMPLE):
                session = await open_session(pilot, app, sid)
                panels = ["#timeline", "#detail-box", "#plot", "#heat", "#tokens", "#checkpoints", "#events"]
                widgets = [session.query_one(p) for p in panels]
                await pilot.pause()
                assert unreadable(app, widgets) == [], (theme, sid)
                await pilot.press("up")  # the cursor on another iteration
                await pilot.pause()
                assert unreadable(app, widgets) == [], (theme, sid)
                app.pop_screen()
                await pilot.pause()

    asyncio.run(scenario())


# -- wide terminals ----------------------------------------------------------------------------------
def write_session(
    journals: Path, sid: str, iterations: range, *, max_iterations: int, files: int = 3
) -> None:
    """A journal of ``iterations`` (scores, files modified, tokens), started three hours before the
    tests' clock."""
    t0 = NOW - timedelta(hours=3)
    events: list[E.Event] = [E.SessionStarted(session_id=sid, ts=t0, task=f"the loop {sid}", agent="bot")]
    for k in iterations:
        t = t0 + timedelta(seconds=k)
        events += [
            E.IterationStarted(session_id=sid, ts=t, iteration=k, max_iterations=max_iterations),
            E.AgentTurn(
                session_id=sid,
                ts=t,
                iteration=k,
                files_modified=[f"src/f{k % files}.py"],
                tokens=E.TokenUsage(input=1000 + k, output=200, cache_read=5000),
            ),
            E.ValidationRan(session_id=sid, ts=t, iteration=k, score=float((k * 37) % 101)),
            E.SignalResolved(session_id=sid, ts=t, iteration=k, signal="CONTINUE"),
        ]
    Journal.for_session(journals, sid, fsync=False).append(*events)


def test_the_task_column_takes_the_free_width(tmp_path: Path) -> None:
    """On a wide terminal the task column runs to the table's right edge (no columns left empty)."""
    app = samples_app(tmp_path)

    async def scenario() -> None:
        async with app.run_test(size=(200, 30)) as pilot:
            await settle(pilot, lambda: app.feed.loaded)
            screen = app.sessions_screen
            lines = screen_text(app)
            header = next(line for line in lines if " task" in line)
            start, at = header.index(" task") + 1, header.index(" session") + 1
            right = screen.table.scrollable_content_region.right
            shown = {}
            for sid, row in screen.rows.items():
                if len(sid) >= 24:  # (cut in its column)
                    continue
                line = next(line for line in lines if line[at:].startswith(f"{sid} "))
                shown[sid] = line[start:right].rstrip()
                task = " ".join(row.task.split())
                assert shown[sid] == task or (
                    shown[sid].endswith("…") and len(line[:right].rstrip()) >= right - 1
                )
            assert max(len(text) for text in shown.values()) > 48, shown

    asyncio.run(scenario())


@pytest.mark.parametrize("size", [(80, 24), (200, 30)], ids=["80x24", "200x30"])
def test_four_digit_iteration_counts_are_whole(tmp_path: Path, size: tuple[int, int]) -> None:
    journals = tmp_path / "j"
    write_session(journals, "long-run", range(1999, 2001), max_iterations=5000)
    copy_samples(journals, ["thrashing"])
    app = RalphApp([journals], now=fixed_clock, watch=False)

    async def scenario() -> None:
        async with app.run_test(size=size) as pilot:
            await settle(pilot, lambda: app.feed.loaded and len(app.sessions_screen.rows) == 2)
            line = next(line for line in screen_text(app) if " long-run " in line)
            assert " 2000/5000 " in line, line
            assert " 5/15 " in next(line for line in screen_text(app) if " thrashing " in line)

    asyncio.run(scenario())


# -- charts of long sessions --------------------------------------------------------------------------
def labels(line: str) -> list[int]:
    """The iteration numbers on an axis line."""
    return [int(word) for word in line.split() if word.isdigit()]


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)], ids=["80x24", "120x40", "200x50"])
def test_the_charts_of_a_long_session_show_the_same_latest_iterations_with_readable_ticks(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    """120 iterations: the score plot, the files and the tokens show the same window (the latest
    iterations all three have room for), and their axes name every k-th iteration in full."""
    journals = tmp_path / "j"
    write_session(journals, "long", range(1, 121), max_iterations=200)
    app = RalphApp([journals], now=fixed_clock, watch=False)

    async def scenario() -> None:
        async with app.run_test(size=size) as pilot:
            screen = await open_session(pilot, app, "long")
            await pilot.pause()
            plot, heat, tokens = (screen.query_one(f"#{name}") for name in ("plot", "heat", "tokens"))
            # on screen: a token bar per iteration, the latest ones, numbered in full
            bars = [int(line.split()[0]) for line in region_text(app, tokens)[1:] if line.strip()]
            assert bars and bars[-1] == 120 and bars == list(range(bars[0], 121)), bars
            # the axes: full numbers of the same iterations, evenly spaced
            plot_axis = labels(region_text(app, plot)[-1])
            heat_axis = labels(region_text(app, heat)[0])
            for ticks in (plot_axis, heat_axis):
                assert ticks and set(ticks) <= set(bars), (ticks, bars)
                steps = {b - a for a, b in itertools.pairwise(ticks)}
                step = steps.pop() if len(steps) == 1 else 1
                assert not steps and all(n % step == 0 for n in ticks), ticks
            assert len(bars) == 1 or len(plot_axis) >= 2, plot_axis
            # and the three charts drew the same iterations
            assert getattr(plot, "shown", None) == getattr(heat, "shown", None) == bars

    asyncio.run(scenario())


@pytest.mark.parametrize("theme", ["textual-dark", "textual-light", "NO_COLOR"])
def test_a_broken_hash_chain_is_marked_readably_in_the_fleet_and_the_session(
    tmp_path: Path, theme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session whose journal was edited by hand carries ✗ in the fleet table's status and says where
    its chain broke at the top of its screen, readable (4.5:1) in both themes and under ``NO_COLOR``;
    an intact session carries no mark."""
    if theme == "NO_COLOR":
        monkeypatch.setenv("NO_COLOR", "1")
    journals = tmp_path / "j"
    write_session(journals, "altered", range(1, 4), max_iterations=5)
    write_session(journals, "intact", range(1, 3), max_iterations=5)
    path = journals / "altered.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"agent":"bot"', b'"agent":"bob"', 1))
    app = RalphApp([journals], now=fixed_clock, watch=False)
    if theme != "NO_COLOR":
        app.theme = theme

    async def scenario() -> None:
        async with app.run_test(size=(120, 30)) as pilot:
            await settle(pilot, lambda: app.feed.loaded and len(app.sessions_screen.rows) == 2)
            rows = app.sessions_screen.rows
            assert rows["altered"].chain_break == "line 1: edited (line 2 links to other text)"
            assert rows["intact"].chain_break == ""
            table = app.sessions_screen.table
            table.focus()
            for sid in ("altered", "intact"):
                table.move_to(sid)
                await pilot.pause()
                assert unreadable(app, [table]) == [], (theme, sid)
            fleet = "\n".join(screen_text(app))
            altered = next(line for line in fleet.splitlines() if "altered" in line)
            intact = next(line for line in fleet.splitlines() if "intact" in line)
            assert "✗" in altered and "✗" not in intact
            await open_session(pilot, app, "altered")
            await pilot.pause()
            assert "✗ journal altered (line 1: edited" in "\n".join(screen_text(app))
            assert unreadable(app, []) == [], theme

    asyncio.run(scenario())
