"""The SQL console: one read-only query over the ledger's views and detectors, results in a table.

The editor has the focus when the console opens. A running query shows its elapsed time and ``Esc``
cancels it; an error replaces the result (the table always shows the last run's answer, or nothing).
Queries run are kept in a history (``ctrl+up`` / ``ctrl+down`` in the editor, or the History list).
In the results, ``Enter`` opens the cell's whole value in a viewer, ``c`` / ``y`` copy the cell / the row,
and ``ctrl+s`` exports the whole result to a CSV or JSON file. Values are rendered as the CLI renders
them (``ledger.core.output``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, Final

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import DataTable, Label, OptionList, Static, TextArea
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from ledger import QueryResult, error_reason, output, plural
from ledger import one_line as first_line
from ledger.monitor import EXAMPLE_QUERIES, Monitor
from tui import format as fmt
from tui.messages import Exported, QueryDone
from tui.screens.export_dialog import ExportDialog, export_format
from tui.screens.value_viewer import ValueViewer
from tui.widgets.footer import KeyFooter
from tui.widgets.results import cell, full_text, row_text
from tui.widgets.schema import SchemaTree

MAX_ROWS: Final = 1000

QUERY_TIMEOUT_S: Final = 60.0

HISTORY_SIZE: Final = 100

NARROW: Final = 70
"""Columns under which the side lists give their width to the editor and the results."""
SHORT: Final = 16
"""Rows under which the editor is two lines high (and the title goes)."""


def clock() -> float:
    """The clock a query's elapsed time is measured with (monotonic seconds)."""
    return time.monotonic()


def seconds(elapsed: float) -> str:
    """``0.04 s``, ``12.3 s``."""
    return f"{elapsed:.2f} s" if elapsed < 10 else f"{elapsed:.1f} s"


class ResultTable(DataTable[Any]):
    """The result table: a cell cursor; Enter views the cell, ``c`` / ``y`` copy the cell / the row."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "View cell"),
        Binding("c", "copy_cell", "Copy cell"),
        Binding("y", "copy_row", "Copy row"),
        # vim's keys; Home / End go to the first / last column, G to the last row (ctrl+home: the first)
        Binding("k", "cursor_up", "Up", show=False),
        Binding("j", "cursor_down", "Down", show=False),
        Binding("h", "cursor_left", "Left", show=False),
        Binding("l", "cursor_right", "Right", show=False),
        Binding("G", "scroll_bottom", "Last row", show=False),
    ]

    def action_copy_cell(self) -> None:
        """Copy the cell under the cursor."""
        if isinstance(self.screen, SqlScreen):
            self.screen.copy_cell()

    def action_copy_row(self) -> None:
        """Copy the row under the cursor."""
        if isinstance(self.screen, SqlScreen):
            self.screen.copy_row()


class QueryList(OptionList):
    """The examples and the history: vim's ``j`` / ``k`` / ``G`` besides the arrows, Home and End."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("k", "cursor_up", "Up", show=False),
        Binding("j", "cursor_down", "Down", show=False),
        Binding("G", "last", "Last", show=False),
    ]


class QueryEditor(TextArea):
    """The query editor: a text area where ``ctrl+a`` selects all (``home`` goes to the line's start)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("ctrl+a", "select_all", "Select all")]

    def action_select_all(self) -> None:
        """Select the whole query."""
        self.select_all()


class SqlScreen(Screen[None]):
    """A query editor, the saved example queries, the tables, the history, and the result table.

    Narrower than ``NARROW`` columns the editor and the results take the whole width, and the side
    lists come in its place while one of them has the focus (``ctrl+l``, ``ctrl+o``); shorter than
    ``SHORT`` rows the editor is two lines high."""

    AUTO_FOCUS = "#editor"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW, "-wide")]  # noqa: RUF012 (Textual's)
    VERTICAL_BREAKPOINTS = [(0, "-short"), (SHORT, "-tall")]  # noqa: RUF012 (Textual's)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "run", "Run", priority=True),
        Binding("f5", "run", "Run", show=False),
        Binding("escape", "back", "Back"),
        Binding("ctrl+l", "examples", "Examples"),
        Binding("ctrl+o", "tables", "Tables"),
        Binding("ctrl+t", "results", "Results"),
        Binding("ctrl+s", "export", "Export"),
        Binding("ctrl+up", "history(-1)", "Previous query", show=False),
        Binding("ctrl+down", "history(1)", "Next query", show=False),
    ]

    DEFAULT_CSS = """
    SqlScreen { layout: vertical; }
    SqlScreen #sql-title { height: 1; padding: 0 1; background: $boost; }
    SqlScreen #sql-main { height: 1fr; }
    SqlScreen #sql-side { width: 30; }
    SqlScreen #examples, SqlScreen #tables, SqlScreen #history {
        height: 1fr; border: round $primary 40%; border-title-color: $text-accent;
    }
    SqlScreen #tables { height: 2fr; overflow-x: hidden; }
    SqlScreen #sql-side > * { scrollbar-size-vertical: 1; }
    SqlScreen #editor { height: 7; border: round $primary 40%; }
    SqlScreen #sql-error-box { height: auto; max-height: 8; display: none; }
    SqlScreen #sql-error-box.shown { display: block; }
    SqlScreen #sql-error { height: auto; padding: 0 1; color: $text-error; }
    SqlScreen #sql-status { height: 1; padding: 0 1; color: $text-muted; }
    SqlScreen #results { height: 1fr; }
    SqlScreen.-narrow #sql-side { display: none; width: 1fr; }
    SqlScreen.-narrow.-side #sql-side { display: block; }
    SqlScreen.-narrow #sql-side > * { display: none; }
    SqlScreen.-narrow #sql-side > .-active { display: block; height: 1fr; }
    SqlScreen.-narrow.-side #sql-query { display: none; }
    SqlScreen.-short #sql-title { display: none; }
    SqlScreen.-short #editor { height: 4; }
    SqlScreen.-short #sql-error-box { max-height: 3; }
    """

    def __init__(self, monitor: Callable[[], Monitor | None]) -> None:
        super().__init__(id="sql-screen")
        self.monitor = monitor
        """The monitor its queries run on (``None`` while the ledger is opening)."""
        self.result: QueryResult | None = None
        self.result_sql = ""
        self.result_columns: list[str] = []
        self.result_rows = 0
        self.error = ""
        self.runs = 0
        self.exports = 0
        self.status_text = ""
        self.history: list[str] = []
        """Queries run, oldest first (a query run again moves to the end)."""
        self._history_at: int | None = None
        self._pending: tuple[str, bool] | None = None
        self.running: str | None = None
        """The query running now."""
        self._started = 0.0
        self._cancelled = False
        self._ticker: Timer | None = None
        self._focus_editor = False
        self.error_detail = ""
        """The last error whole, as shown (``error`` is its first line)."""

    def compose(self) -> ComposeResult:
        """The examples and the history, the editor, the error line, the status and the results."""
        yield Label("SQL console · one read-only SELECT over the views and detectors", id="sql-title")
        with Horizontal(id="sql-main"):
            with Vertical(id="sql-side"):
                yield QueryList(*(Option(name, id=name) for name in EXAMPLE_QUERIES), id="examples")
                yield SchemaTree(self.monitor, id="tables")
                yield QueryList(id="history")
            with Vertical(id="sql-query"):
                yield QueryEditor(next(iter(EXAMPLE_QUERIES.values())), id="editor", soft_wrap=True)
                with VerticalScroll(id="sql-error-box"):
                    yield Static("", id="sql-error")
                yield Static("Ctrl+R runs the query; Enter on an example loads and runs it", id="sql-status")
                yield ResultTable(id="results", cursor_type="cell")
        yield KeyFooter()

    def on_mount(self) -> None:
        """Focus the editor; load an example asked for before mounting."""
        self.query_one("#examples").border_title = "Examples"
        self.query_one("#history").border_title = "History"
        self.query_one("#tables").border_title = "Tables"
        self.query_one(SchemaTree).load()
        editor = self.query_one("#editor", TextArea)
        if self.app.is_headless:
            editor.cursor_blink = False
        editor.focus()
        self.show_history()
        if self._pending is not None:
            name, run = self._pending
            self._pending = None
            self.load_example(name, run=run)

    def opening(self) -> None:
        """The console is being opened (not returned to from its viewer or export dialog): the
        editor gets the focus, wherever it was when the console was left."""
        self._focus_editor = True
        if self.is_mounted:
            self.query_one(SchemaTree).load()  # (the ledger may have been opening at mount)
            if self.app.screen is self:
                self.editor.focus()

    def on_screen_resume(self) -> None:
        """Opened again: focus the editor (back from a dialog: the focus stays where it was)."""
        if self._focus_editor:
            self._focus_editor = False
            self.editor.focus()

    @property
    def editor(self) -> TextArea:
        """The query editor."""
        return self.query_one("#editor", TextArea)

    @property
    def table(self) -> DataTable[Any]:
        """The result table."""
        return self.query_one("#results", DataTable)

    def status(self, text: str) -> None:
        """The status line under the editor."""
        self.status_text = text
        self.query_one("#sql-status", Static).update(text)

    # -- running a query -------------------------------------------------------------------------
    def action_run(self) -> None:
        """Run the query in the editor (one at a time)."""
        if self.running is not None:
            self.status(f"a query is running ({seconds(clock() - self._started)}) · Esc cancels it")
            return
        sql = self.editor.text.strip()
        if not sql:
            self.show_error("empty query: expected one SELECT statement")
            return
        self.remember(sql)
        self.show_error("")  # (the last query's error is not this one's)
        self.running = sql
        self._cancelled = False
        self._started = clock()
        self.tick()
        self._ticker = self.set_interval(0.1, self.tick)
        self.run_query(sql)

    def tick(self) -> None:
        """The running query's elapsed time."""
        if self.running is not None:
            self.status(f"running… {seconds(clock() - self._started)} · Esc cancels")

    def action_back(self) -> None:
        """Cancel the running query, or go back to the previous screen."""
        if self.running is not None:
            self.cancel()
        else:
            self.app.pop_screen()

    def cancel(self) -> None:
        """Stop the running query (its worker reports back with an error, shown as cancelled)."""
        monitor = self.monitor()
        if self.running is None or monitor is None:
            return
        self._cancelled = True
        self.status(f"cancelling… {seconds(clock() - self._started)}")
        monitor.interrupt_query()

    @work(thread=True, exclusive=True, group="sql")
    def run_query(self, sql: str) -> None:
        """Run one read-only query on the monitor (errors come back as one line)."""
        monitor = self.monitor()
        started = clock()
        if monitor is None:
            message = QueryDone(sql, None, "the ledger is still opening; try again in a moment")
        else:
            try:
                result = monitor.query(sql, max_rows=MAX_ROWS, timeout_s=QUERY_TIMEOUT_S)
                message = QueryDone(sql, result, "")
            except Exception as exc:  # the console shows its message, never a traceback
                detail = getattr(exc, "detail", "")  # a refused or failed query's whole message
                message = QueryDone(sql, None, first_line(exc), detail if isinstance(detail, str) else "")
        message.elapsed = clock() - started
        if not get_current_worker().is_cancelled:
            self.post_message(message)

    def on_query_done(self, message: QueryDone) -> None:
        """Show the result, or the error whole (the old result goes: it answered another query); the
        focus goes back to the editor from results that are gone."""
        self.runs += 1
        self.running = None
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None
        took = seconds(message.elapsed)
        if message.result is None:
            self.clear_result()
            if self._cancelled:
                self.show_error("")
                self.status(f"cancelled after {took}")
            else:
                self.show_error(message.error, message.detail)
                self.status(f"failed after {took}")
            if self.focused is None or self.focused is self.table:
                self.editor.focus()  # (typing into an empty result would go nowhere)
            return
        self.show_error("")
        self.show_result(message.sql, message.result)
        result = message.result
        count = (
            f"the first {len(result.rows):,} rows (more not fetched; ctrl+s exports all)"
            if result.truncated
            else plural(len(result.rows), "row")
        )
        self.status(f"{count} · {plural(len(result.columns), 'column')} · {took} · enter views a cell")

    def clear_result(self) -> None:
        """No result on screen."""
        self.result, self.result_sql = None, ""
        self.result_columns, self.result_rows = [], 0
        self.table.clear(columns=True)

    def show_result(self, sql: str, result: QueryResult) -> None:
        """Fill the table with a result."""
        table = self.table
        table.clear(columns=True)
        rows = [[cell(v) for v in row] for row in result.rows]
        widths = fmt.column_widths(result.columns, rows)
        for i, (name, width) in enumerate(zip(result.columns, widths, strict=True)):
            table.add_column(name, key=f"c{i}", width=width)
        for row in rows:
            table.add_row(*row)
        self.result, self.result_sql = result, sql
        self.result_columns = list(result.columns)
        self.result_rows = len(result.rows)

    def show_error(self, error: str, detail: str = "") -> None:
        """The error under the editor, whole (``detail``, else ``error``; scrolls when long); empty
        clears it."""
        self.error = error
        self.error_detail = (detail or error) if error else ""
        self.query_one("#sql-error", Static).update(Text(self.error_detail, style=fmt.RED))
        box = self.query_one("#sql-error-box", VerticalScroll)
        box.set_class(bool(error), "shown")
        box.scroll_home(animate=False)

    # -- history -----------------------------------------------------------------------------------
    def remember(self, sql: str) -> None:
        """Keep a query run in the history (once: run again, it moves to the end)."""
        if sql in self.history:
            self.history.remove(sql)
        self.history.append(sql)
        del self.history[:-HISTORY_SIZE]
        self._history_at = None
        self.show_history()

    def show_history(self) -> None:
        """The history list, newest first."""
        if not self.is_mounted:
            return
        options = self.query_one("#history", OptionList)
        options.clear_options()
        options.add_options(
            [Option(fmt.truncate(sql, 26), id=str(n)) for n, sql in reversed(list(enumerate(self.history)))]
        )

    def action_history(self, step: int) -> None:
        """Put the previous (-1) or next (+1) query of the history in the editor."""
        if not self.history:
            return
        at = len(self.history) if self._history_at is None else self._history_at
        at = max(0, min(len(self.history), at + step))
        self._history_at = at
        self.editor.load_text(self.history[at] if at < len(self.history) else "")
        self.editor.focus()

    @on(OptionList.OptionSelected, "#history")
    def _history_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id is not None:
            self._history_at = int(event.option.id)
            self.editor.load_text(self.history[self._history_at])
            self.editor.focus()

    # -- examples -----------------------------------------------------------------------------------
    def action_examples(self) -> None:
        """Focus the list of example queries."""
        self.focus_side("#examples")

    def action_tables(self) -> None:
        """Focus the table browser."""
        self.focus_side("#tables")

    def focus_side(self, selector: str) -> None:
        """Focus one of the side lists (on a narrow screen it alone is shown, in the editor's place)."""
        self.show_side(self.query_one(selector))
        self.call_after_refresh(self.query_one(selector).focus)

    def show_side(self, active: Widget | None) -> None:
        """Which side list is shown on a narrow screen (``None``: the editor and the results are)."""
        self.set_class(active is not None, "-side")
        for panel in self.query_one("#sql-side").children:
            panel.set_class(panel is active, "-active")

    def on_descendant_focus(self) -> None:
        """On a narrow screen a side list is shown while it has the focus."""
        focused = self.focused
        side = self.query_one("#sql-side")
        self.show_side(focused if focused is not None and focused.parent is side else None)

    @on(SchemaTree.Insert)
    def _insert(self, event: SchemaTree.Insert) -> None:
        self.editor.insert(event.text)
        self.editor.focus()

    def action_results(self) -> None:
        """Focus the results."""
        self.table.focus()

    def load_example(self, name: str, *, run: bool = True) -> None:
        """Put a saved example query in the editor (and run it); waits for the screen to mount."""
        if not self.is_mounted:
            self._pending = (name, run)
            return
        self.editor.load_text(EXAMPLE_QUERIES[name])
        examples = self.query_one("#examples", OptionList)
        examples.highlighted = examples.get_option_index(name)
        if run:
            self.action_run()

    @on(OptionList.OptionSelected, "#examples")
    def _example_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id is not None:
            self.load_example(event.option.id)
            self.editor.focus()

    # -- the result: view, copy, export -------------------------------------------------------------
    def value_at(self, row: int, column: int) -> Any:
        """The raw value of one result cell."""
        assert self.result is not None
        return self.result.rows[row][column]

    @on(DataTable.CellSelected, "#results")
    def _cell_selected(self, event: DataTable.CellSelected) -> None:
        self.view_cell(event.coordinate.row, event.coordinate.column)

    def view_cell(self, row: int, column: int) -> None:
        """Open a cell's whole value in the viewer."""
        if self.result is None or not self.result.rows:
            return
        name = self.result_columns[column]
        self.app.push_screen(ValueViewer(f"{name} · row {row + 1}", full_text(self.value_at(row, column))))

    def _cursor(self) -> tuple[int, int] | None:
        if self.result is None or not self.result.rows:
            self.notify("no result to copy", severity="warning", markup=False)
            return None
        coordinate = self.table.cursor_coordinate
        return coordinate.row, coordinate.column

    def copy_cell(self) -> None:
        """Copy the value under the cursor (whole) to the clipboard."""
        at = self._cursor()
        if at is not None:
            text = full_text(self.value_at(*at))
            self.app.copy_to_clipboard(text)
            self.notify(f"copied {self.result_columns[at[1]]} of row {at[0] + 1}", markup=False)

    def copy_row(self) -> None:
        """Copy the row under the cursor (a JSON object) to the clipboard."""
        at = self._cursor()
        if at is not None:
            assert self.result is not None
            self.app.copy_to_clipboard(row_text(self.result_columns, self.result.rows[at[0]]))
            self.notify(f"copied row {at[0] + 1} as JSON", markup=False)

    def action_export(self) -> None:
        """Ask for a file, then export the last result (every row, run again without a row limit)."""
        if self.result is None:
            self.show_error("nothing to export: run a query first")
            return
        default = f"ralph-query-{datetime.now().strftime('%Y%m%d-%H%M%S')}.csv"

        def chosen(path: Path | None) -> None:
            if path is None:
                return
            try:
                kind = export_format(path)
            except ValueError as exc:
                self.show_error(str(exc))
                return
            self.show_error("")  # (an earlier export's error is not this one's)
            self.status(f"exporting to {path}…")
            self.export(self.result_sql, path, kind)

        self.app.push_screen(ExportDialog(default), chosen)

    @work(thread=True, exclusive=True, group="sql-export")
    def export(self, sql: str, path: Path, kind: str) -> None:
        """Run the query again without a row limit and write every row to ``path``."""
        monitor = self.monitor()
        try:
            if monitor is None:
                raise RuntimeError("the ledger is not open")
            result = monitor.query(sql, timeout_s=QUERY_TIMEOUT_S)
            text = output.render_rows(result.columns, result.rows, kind)
        except Exception as exc:
            self.post_message(Exported(path, 0, f"cannot export: {first_line(exc)}"))
            return
        try:
            with path.open("x", encoding="utf-8") as out:  # never over a file that is there
                out.write(text)
        except OSError as exc:
            reason = error_reason(exc)  # ("File exists": it is kept)
            self.post_message(Exported(path, 0, f"cannot write {path}: {reason}"))
            return
        self.post_message(Exported(path, len(result.rows), ""))

    def on_exported(self, message: Exported) -> None:
        """Say where the rows went, or why they did not."""
        if message.error:
            self.show_error(message.error)
            self.status("")
            return
        self.exports += 1
        path, where = message.path, message.path.resolve()
        # the name as typed first (the line may be cut), then the folder it is relative to
        rows = plural(message.rows, "row")
        self.status(f"wrote {rows} to {path}" + ("" if path.is_absolute() else f" in {Path.cwd()}"))
        self.notify(f"wrote {rows} to {where}", title="export", markup=False)
