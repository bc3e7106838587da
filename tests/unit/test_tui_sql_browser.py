"""The SQL console's errors, table browser, keys and small-terminal layout, driven with Textual's Pilot."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.widgets import Tree

from tests.unit.test_tui_console import console_app, open_console, run
from tests.unit.test_tui_layout import region_text
from tests.unit.test_tui_support import screen_text, settle
from tui.screens.help_screen import HelpScreen
from tui.widgets.schema import SchemaTree


@pytest.mark.parametrize(
    ("sql", "hint"),
    [
        ("SELECT sesion_id FROM sessions", 'Candidate bindings: "session_id"'),
        ("SELECT * FROM sesions", "Did you mean 'sessions'?"),
        ("SELECT * FROM sessions WHERE", "LINE 1: SELECT * FROM sessions WHERE"),
    ],
)
def test_an_error_is_shown_whole_with_its_hints(tmp_path: Path, sql: str, hint: str) -> None:
    """DuckDB's hints under an error's first line (candidate names, the place in the query) are on
    screen, in a box that scrolls when the message is long; ``error`` stays its first line."""
    app = console_app(tmp_path)

    async def scenario() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            console = await open_console(pilot)
            await run(pilot, sql, console)
            assert "\n" not in console.error and console.error_detail.startswith(console.error)
            shown = " ".join(" ".join(region_text(app, console.query_one("#sql-error"))).split())
            assert " ".join(console.error_detail.split()) == shown, shown
            assert hint in shown, shown

    asyncio.run(scenario())


def test_the_table_browser_lists_the_ledger_and_inserts_names(tmp_path: Path) -> None:
    """``ctrl+o`` focuses the tables: the views, the tables and the detectors with their columns
    (parameters); ``Enter`` puts the name under the cursor into the editor at its cursor."""
    app = console_app(tmp_path)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            console = await open_console(pilot)
            tree = console.query_one(SchemaTree)
            await settle(pilot, lambda: tree.loaded)
            kinds = {r.name: r.kind for r in tree.found}
            assert kinds["sessions"] == kinds["iterations"] == "view"
            assert kinds["events"] == "table" and kinds["thrashing"] == "detector"
            sessions = next(r for r in tree.found if r.name == "sessions")
            assert "session_id" in dict(sessions.columns) and "status" in dict(sessions.columns)
            thrashing = next(r for r in tree.found if r.name == "thrashing")
            assert [name for name, _ in thrashing.columns] == ["session", "min_iterations"]
            console.editor.load_text("SELECT  FROM ")
            console.editor.move_cursor((0, 7))
            await pilot.press("ctrl+o")
            await settle(pilot, lambda: app.focused is tree)
            tree.move_cursor(next(n for n in tree.root.children if str(n.label).startswith("sessions ")))
            await pilot.press("right", "down", "enter")  # the view's first column
            await settle(pilot, lambda: app.focused is console.editor)
            first = sessions.columns[0][0]
            assert console.editor.text == f"SELECT {first} FROM "
            await pilot.press("end", "ctrl+o")
            await settle(pilot, lambda: app.focused is tree)
            await pilot.press("left", "enter")  # back on the view: its name
            await settle(pilot, lambda: app.focused is console.editor)
            assert console.editor.text == f"SELECT {first} FROM sessions"
            lines = screen_text(app)
            assert any("sessions view" in line for line in lines) and any(first in line for line in lines)
            assert isinstance(tree, Tree)

    asyncio.run(scenario())


def test_ctrl_a_selects_the_query_and_the_footer_and_help_say_so(tmp_path: Path) -> None:
    app = console_app(tmp_path)

    async def scenario() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            console = await open_console(pilot)
            console.editor.load_text("SELECT 1\nFROM sessions")
            assert app.focused is console.editor
            await pilot.press("ctrl+a")
            assert console.editor.selected_text == "SELECT 1\nFROM sessions"
            footer = screen_text(app)[-1]
            assert "^a Select all" in footer and "^r Run" in footer and "^s Export" in footer, footer
            app.push_screen(HelpScreen())
            await settle(pilot, lambda: isinstance(app.screen, HelpScreen))
            assert any("ctrl+a" in line and "select all" in line for line in screen_text(app))

    asyncio.run(scenario())


def test_typing_after_a_failed_query_goes_to_the_editor(tmp_path: Path) -> None:
    """A failed query clears the results: with the focus there, it goes back to the editor, so what is
    typed next fixes the query."""
    app = console_app(tmp_path)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            console = await open_console(pilot)
            await run(pilot, "SELECT 1 AS one", console)
            await pilot.press("ctrl+t")
            assert app.focused is console.table
            console.editor.load_text("SELEC 1")
            await pilot.press("ctrl+r")
            await settle(pilot, lambda: console.runs == 2)
            assert console.error.startswith("SQL error")
            await pilot.press("home", "S")
            assert console.editor.has_focus and console.editor.text == "SSELEC 1"

    asyncio.run(scenario())


@pytest.mark.parametrize("size", [(40, 10), (60, 15), (80, 24)], ids=["40x10", "60x15", "80x24"])
def test_the_editor_stays_usable_on_a_small_terminal(tmp_path: Path, size: tuple[int, int]) -> None:
    """The editor keeps most of the width (the side lists give theirs way on a narrow terminal and
    come in its place while one of them has the focus), and the status and results stay in view."""
    app = console_app(tmp_path)
    width, height = size

    async def scenario() -> None:
        async with app.run_test(size=size) as pilot:
            console = await open_console(pilot)
            await run(pilot, "SELECT 1 AS one", console)
            editor = console.editor
            assert editor.content_size.width >= min(width - 6, 40), editor.content_size
            assert editor.content_size.height >= 2
            status = console.query_one("#sql-status")
            assert status.region.height == 1 and status.region.bottom <= height - 1
            assert console.table.region.height >= 2
            await pilot.press("ctrl+l")
            await settle(pilot, lambda: app.focused is console.query_one("#examples"))
            examples = console.query_one("#examples")
            assert examples.region.width >= min(width, 28) and examples.region.height >= 4
            assert any("completion rate by agent" in line for line in screen_text(app))
            await pilot.press("enter")  # loads and runs it: back in the editor
            await settle(pilot, lambda: console.runs == 2 and app.focused is editor)
            assert editor.region.width >= min(width - 2, 40) and console.result_columns[0] == "agent"

    asyncio.run(scenario())
