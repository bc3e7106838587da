"""The SQL console: one read-only query over the ledger's views and detectors, results in a table."""

from __future__ import annotations

from numbers import Number
from typing import TYPE_CHECKING, Any, ClassVar, Final

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Label, OptionList, Static, TextArea
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from ledger import one_line as first_line
from ledger.monitor import EXAMPLE_QUERIES
from tui import format as fmt
from tui.messages import QueryDone

if TYPE_CHECKING:
    from tui.app import RalphApp

MAX_ROWS: Final = 1000
QUERY_TIMEOUT_S: Final = 60.0


def cell(value: Any) -> Any:
    """A result value as a table cell (NULL shown as a dim ∅; never parsed as markup)."""
    if value is None:
        return Text("∅", style=fmt.GREY)
    if isinstance(value, bool):
        return Text(str(value).lower())
    if isinstance(value, float):
        return Text(f"{value:.6g}", justify="right")
    if isinstance(value, Number):
        return Text(str(value), justify="right")
    return Text(fmt.truncate(str(value), 60))


class SqlScreen(Screen[None]):
    """A query editor, the saved example queries, and the result table."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "run", "Run", priority=True),
        Binding("f5", "run", "Run", show=False),
        Binding("escape", "back", "Back"),
        Binding("ctrl+l", "examples", "Examples"),
        Binding("ctrl+t", "results", "Results"),
    ]

    DEFAULT_CSS = """
    SqlScreen { layout: vertical; }
    SqlScreen #sql-title { height: 1; padding: 0 1; background: $boost; }
    SqlScreen #sql-main { height: 1fr; }
    SqlScreen #examples { width: 30; border: round $primary 40%; border-title-color: $text-accent; }
    SqlScreen #editor { height: 7; border: round $primary 40%; }
    SqlScreen #sql-error { height: auto; max-height: 3; padding: 0 1; color: $text-error; }
    SqlScreen #sql-status { height: 1; padding: 0 1; color: $text-muted; }
    SqlScreen #results { height: 1fr; }
    """

    def __init__(self) -> None:
        super().__init__(id="sql-screen")
        self.result_columns: list[str] = []
        self.result_rows = 0
        self.error = ""
        self.runs = 0
        self._pending: tuple[str, bool] | None = None

    @property
    def ralph(self) -> RalphApp:
        """The app, typed."""
        from tui.app import RalphApp

        assert isinstance(self.app, RalphApp)
        return self.app

    def compose(self) -> ComposeResult:
        """The examples, the editor, the error line and the results."""
        yield Label("SQL console · one read-only SELECT over the views and detectors", id="sql-title")
        with Horizontal(id="sql-main"):
            yield OptionList(*(Option(name, id=name) for name in EXAMPLE_QUERIES), id="examples")
            with Vertical():
                yield TextArea(next(iter(EXAMPLE_QUERIES.values())), id="editor", soft_wrap=True)
                yield Static("", id="sql-error")
                yield Static("Ctrl+R runs the query; Enter on an example loads and runs it", id="sql-status")
                table: DataTable[Any] = DataTable(id="results", cursor_type="row")
                yield table
        yield Footer()

    def on_mount(self) -> None:
        """Focus the editor; load an example asked for before mounting."""
        self.query_one("#examples").border_title = "Examples"
        editor = self.query_one("#editor", TextArea)
        if self.app.is_headless:
            editor.cursor_blink = False
        editor.focus()
        if self._pending is not None:
            name, run = self._pending
            self._pending = None
            self.load_example(name, run=run)

    @property
    def editor(self) -> TextArea:
        """The query editor."""
        return self.query_one("#editor", TextArea)

    def action_run(self) -> None:
        """Run the query in the editor."""
        sql = self.editor.text.strip()
        if not sql:
            self.show_error("empty query: expected one SELECT statement")
            return
        self.query_one("#sql-status", Static).update("running…")
        self.run_query(sql)

    def action_back(self) -> None:
        """Back to the previous screen."""
        self.app.pop_screen()

    def action_examples(self) -> None:
        """Focus the list of example queries."""
        self.query_one("#examples").focus()

    def action_results(self) -> None:
        """Focus the results."""
        self.query_one("#results").focus()

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

    @work(thread=True, exclusive=True, group="sql")
    def run_query(self, sql: str) -> None:
        """Run one read-only query on the monitor (errors come back as one line)."""
        monitor = self.ralph.monitor
        if monitor is None:
            message = QueryDone(sql, None, "the ledger is still opening; try again in a moment")
        else:
            try:
                result = monitor.query(sql, max_rows=MAX_ROWS, timeout_s=QUERY_TIMEOUT_S)
                message = QueryDone(sql, result, "")
            except Exception as exc:  # one line in the console, never a traceback
                message = QueryDone(sql, None, first_line(exc))
        if not get_current_worker().is_cancelled:
            self.post_message(message)

    def on_query_done(self, message: QueryDone) -> None:
        """Show the result, or the error on one line."""
        self.runs += 1
        status = self.query_one("#sql-status", Static)
        if message.result is None:
            self.show_error(message.error)
            status.update("")
            return
        self.show_error("")
        result = message.result
        table: DataTable[Any] = self.query_one("#results", DataTable)
        table.clear(columns=True)
        rows = [[cell(v) for v in row] for row in result.rows]
        widths = fmt.column_widths(result.columns, rows)
        for i, (name, width) in enumerate(zip(result.columns, widths, strict=True)):
            table.add_column(name, key=f"c{i}", width=width)
        for row in rows:
            table.add_row(*row)
        self.result_columns = list(result.columns)
        self.result_rows = len(result.rows)
        count = f"the first {len(result.rows):,} rows (more not fetched)" if result.truncated else (
            f"{len(result.rows):,} row(s)"
        )
        status.update(f"{count} · {len(result.columns)} column(s)")

    def show_error(self, error: str) -> None:
        """One line of error under the editor (empty clears it)."""
        self.error = error
        line = Text(fmt.truncate(error, 300), style=fmt.RED) if error else ""
        self.query_one("#sql-error", Static).update(line)
