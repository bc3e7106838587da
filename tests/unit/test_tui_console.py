"""The SQL console, driven with Textual's Pilot: focus, elapsed time and cancelling, errors, history,
the value viewer, copying and exporting."""

from __future__ import annotations

import asyncio
import csv
import json
import re
from pathlib import Path
from typing import Any

from textual.coordinate import Coordinate
from textual.pilot import Pilot
from textual.widgets import Input, OptionList, TextArea

from tests.unit.test_tui_support import SAMPLE_FILES, copy_samples, fixed_clock, screen_text, settle, until
from tui.app import RalphApp
from tui.screens.export_dialog import ExportDialog
from tui.screens.session_screen import SessionScreen
from tui.screens.sessions_screen import SessionsScreen
from tui.screens.sql_screen import MAX_ROWS, SqlScreen
from tui.screens.value_viewer import ValueViewer

SLOW = "SELECT count(*) FROM range(100000000000) a"
LONG = "SELECT repeat('abc', 100) AS long, 42 AS n, NULL AS nothing, [1, 2] AS l"


def elapsed_shown(app: RalphApp) -> float:
    """The elapsed time the status line shows for a running query (-1 when none)."""
    for line in screen_text(app):
        found = re.search(r"running… (\d+\.\d+) s", line)
        if found:
            return float(found.group(1))
    return -1.0


def console_app(tmp_path: Path) -> RalphApp:
    return RalphApp([copy_samples(tmp_path / "j")], now=fixed_clock, watch=False)


async def open_console(pilot: Pilot[Any]) -> SqlScreen:
    app = pilot.app
    assert isinstance(app, RalphApp)
    await settle(pilot, lambda: app.feed.loaded)
    await pilot.press("s")
    await pilot.pause()
    return app.sql_screen


async def run(pilot: Pilot[Any], sql: str, sql_screen: SqlScreen) -> None:
    runs = sql_screen.runs
    sql_screen.editor.load_text(sql)
    await pilot.press("ctrl+r")
    await settle(pilot, lambda: sql_screen.runs == runs + 1)


def test_the_editor_has_the_focus_when_the_console_opens(tmp_path: Path) -> None:
    app = console_app(tmp_path)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            sql = await open_console(pilot)
            assert app.focused is sql.editor
            sql.editor.load_text("")
            await pilot.press(*"select 1")  # s, t and q are bindings elsewhere: here they are text
            assert sql.editor.text == "select 1" and app.screen is sql
            # opened again after the focus was left elsewhere: the editor again
            for elsewhere in ("ctrl+l", "ctrl+t"):
                await pilot.press(elsewhere, "escape", "s")
                assert app.screen is sql and app.focused is sql.editor
            await pilot.press("ctrl+t")
            app.open_session("thrashing")  # over the console
            await settle(pilot, lambda: isinstance(app.screen, SessionScreen))
            await pilot.press("s")
            assert app.screen is sql and app.focused is sql.editor

    asyncio.run(scenario())


def test_a_running_query_shows_its_elapsed_time_and_esc_cancels_it(tmp_path: Path) -> None:
    app = console_app(tmp_path)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            sql = await open_console(pilot)
            await run(pilot, "SELECT 1 AS one", sql)
            assert sql.result_rows == 1
            sql.editor.load_text(SLOW)
            await pilot.press("ctrl+r")
            await until(pilot, lambda: elapsed_shown(app) >= 0.3, timeout=10)
            first = elapsed_shown(app)
            await until(pilot, lambda: elapsed_shown(app) > first, timeout=10)  # the time runs on
            assert any("Esc cancels" in line for line in screen_text(app))
            await pilot.press("ctrl+r")  # one query at a time
            assert sql.running == SLOW
            await pilot.press("escape")
            await until(pilot, lambda: sql.running is None, timeout=5)
            assert app.screen is sql  # Esc cancelled the query; it did not leave the console
            status = [line for line in screen_text(app) if "cancelled after" in line]
            assert status and sql.error == ""
            assert sql.result_rows == 0 and sql.table.row_count == 0  # the old result is gone
            await run(pilot, "SELECT 2 AS two", sql)  # the connection still answers
            assert sql.result_columns == ["two"]
            await pilot.press("escape")
            assert isinstance(app.screen, SessionsScreen)

    asyncio.run(scenario())


def test_an_error_clears_the_old_result(tmp_path: Path) -> None:
    app = console_app(tmp_path)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            sql = await open_console(pilot)
            await run(pilot, "SELECT session_id FROM sessions ORDER BY 1", sql)
            assert sql.table.row_count == len(SAMPLE_FILES)
            await run(pilot, "SELEC 1", sql)
            assert sql.error.startswith("SQL error")
            assert sql.table.row_count == 0 and len(sql.table.columns) == 0
            assert sql.result is None and sql.result_columns == []
            assert any("failed after" in line for line in screen_text(app))

    asyncio.run(scenario())


def test_the_last_error_goes_when_the_next_query_starts(tmp_path: Path) -> None:
    """While a query runs, the line under the editor does not still show the previous query's error
    (it read as the running query's)."""
    app = console_app(tmp_path)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            sql = await open_console(pilot)
            await run(pilot, "SELEC 1", sql)
            assert any("SQL error" in line for line in screen_text(app))
            sql.editor.load_text(SLOW)
            await pilot.press("ctrl+r")
            await until(pilot, lambda: elapsed_shown(app) >= 0.2, timeout=10)
            assert sql.error == "" and not any("SQL error" in line for line in screen_text(app))
            await pilot.press("escape")
            await until(pilot, lambda: sql.running is None, timeout=5)

    asyncio.run(scenario())


def test_queries_run_are_kept_in_a_history(tmp_path: Path) -> None:
    app = console_app(tmp_path)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            sql = await open_console(pilot)
            for query in ("SELECT 1 AS a", "SELECT 2 AS b", "SELEC 3"):
                await run(pilot, query, sql)
            assert sql.history == ["SELECT 1 AS a", "SELECT 2 AS b", "SELEC 3"]  # errors too: fix and rerun
            sql.editor.load_text("")
            await pilot.press("ctrl+up")
            assert sql.editor.text == "SELEC 3"
            await pilot.press("ctrl+up", "ctrl+up", "ctrl+up")
            assert sql.editor.text == "SELECT 1 AS a"
            await pilot.press("ctrl+down")
            assert sql.editor.text == "SELECT 2 AS b"
            await run(pilot, "SELECT 1 AS a", sql)  # run again: it moves to the end, once
            assert sql.history == ["SELECT 2 AS b", "SELEC 3", "SELECT 1 AS a"]
            history = sql.query_one("#history", OptionList)
            assert [str(history.get_option_at_index(i).prompt) for i in range(3)] == [
                "SELECT 1 AS a",
                "SELEC 3",
                "SELECT 2 AS b",
            ]
            # choosing a query in the list puts it in the editor
            history.focus()
            history.highlighted = 1
            await pilot.press("enter")
            assert sql.editor.text == "SELEC 3" and app.focused is sql.editor

    asyncio.run(scenario())


def test_a_long_value_opens_in_a_viewer_and_cells_and_rows_copy(tmp_path: Path) -> None:
    app = console_app(tmp_path)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            sql = await open_console(pilot)
            await run(pilot, LONG, sql)
            shown = str(sql.table.get_cell_at(Coordinate(0, 0)))
            assert shown.endswith("…") and len(shown) < 300  # cut in the table
            await pilot.press("ctrl+t", "enter")
            viewer = app.screen
            assert isinstance(viewer, ValueViewer)
            assert viewer.query_one("#value", TextArea).text == "abc" * 100
            await pilot.press("c")
            assert app.clipboard == "abc" * 100
            await pilot.press("escape")
            assert app.screen is sql and app.focused is sql.table
            await pilot.press("right")
            await pilot.press("c")
            assert app.clipboard == "42"
            await pilot.press("right", "right", "enter")
            assert isinstance(app.screen, ValueViewer)
            assert app.screen.query_one("#value", TextArea).text == "[\n  1,\n  2\n]"
            await pilot.press("escape", "y")
            assert json.loads(app.clipboard) == {"long": "abc" * 100, "n": 42, "nothing": None, "l": [1, 2]}

    asyncio.run(scenario())


def test_results_export_to_csv_and_json_files(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    app = console_app(tmp_path)
    query = "SELECT range AS i, 'row ' || range AS label FROM range(1500) ORDER BY 1"

    async def export(pilot: Pilot[Any], sql: SqlScreen, name: str) -> ExportDialog:
        await pilot.press("ctrl+s")
        dialog = app.screen
        assert isinstance(dialog, ExportDialog)
        field = dialog.query_one("#export-path", Input)
        field.value = name
        await pilot.press("enter")
        await settle(pilot, lambda: not isinstance(app.screen, ExportDialog))
        return dialog

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            sql = await open_console(pilot)
            await pilot.press("ctrl+s")
            assert sql.error.startswith("nothing to export")
            await run(pilot, query, sql)
            assert sql.result_rows == MAX_ROWS  # the table holds the first rows
            await pilot.press("ctrl+s")
            dialog = app.screen
            assert isinstance(dialog, ExportDialog)
            default = dialog.query_one("#export-path", Input).value
            assert default.startswith("ralph-query-") and default.endswith(".csv")
            await pilot.press("escape")
            assert app.screen is sql and sql.exports == 0

            await export(pilot, sql, "out/all.csv")  # a folder that does not exist
            assert sql.error.startswith("cannot write out/all.csv") and sql.exports == 0
            (tmp_path / "out").mkdir()
            await export(pilot, sql, "out/all.csv")
            await settle(pilot, lambda: sql.exports == 1)
            rows = list(csv.reader((tmp_path / "out/all.csv").open()))
            assert rows[0] == ["i", "label"] and len(rows) == 1 + 1500 and rows[-1] == ["1499", "row 1499"]
            assert sql.status_text == f"wrote 1,500 rows to out/all.csv in {tmp_path}"
            assert sql.error == ""  # the failed export's line went
            await export(pilot, sql, "all.json")
            await settle(pilot, lambda: sql.exports == 2)
            data = json.loads((tmp_path / "all.json").read_text())
            assert len(data) == 1500 and data[7] == {"i": 7, "label": "row 7"}
            await export(pilot, sql, "all.json")  # again: the file is there, and kept
            assert sql.error == "cannot write all.json: File exists" and sql.exports == 2
            assert json.loads((tmp_path / "all.json").read_text()) == data
            (tmp_path / "package.json").write_text('{"name": "mine"}')
            await export(pilot, sql, "package.json")
            assert sql.error == "cannot write package.json: File exists"
            assert (tmp_path / "package.json").read_text() == '{"name": "mine"}'
            await export(pilot, sql, "all.txt")
            assert sql.error == "all.txt: expected a file name ending in .csv or .json" and sql.exports == 2

    asyncio.run(scenario())
