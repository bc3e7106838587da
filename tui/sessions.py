"""The main screen: one row per session, fleet totals, sort and filter, updated in place."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, Final

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.coordinate import Coordinate
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Input, Label, ProgressBar, Static

from ledger.monitor import Fleet, SessionRow
from tui import format as fmt

if TYPE_CHECKING:
    from tui.app import RalphApp

NEVER: Final = datetime.min.replace(tzinfo=UTC)
TREND_POINTS: Final = 10
FILTER_DEBOUNCE_S: Final = 0.15
STATUS_ORDER: Final = {"running": 0, "blocked": 1, "escalated": 2, "complete": 3}


class IdCell:
    """A session id cell: shows the id cut to a width, keeps the whole id (the sort key)."""

    __slots__ = ("session_id", "width")

    def __init__(self, session_id: str, width: int = 28) -> None:
        self.session_id = session_id
        self.width = width

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(fmt.truncate(self.session_id, self.width), no_wrap=True)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        n = min(len(self.session_id), self.width)
        return Measurement(n, n)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IdCell) and (other.session_id, other.width) == (self.session_id, self.width)

    def __hash__(self) -> int:
        return hash(self.session_id)


@dataclass(frozen=True)
class SortKey:
    """One way to order the table: a name, the column it shows in, a key, and whether largest first."""

    name: str
    column: str
    key: Callable[[SessionRow], Any]
    descending: bool


SORTS: Final[tuple[SortKey, ...]] = (
    SortKey("activity", "age", lambda r: r.updated_at or NEVER, True),
    SortKey("status", "status", lambda r: STATUS_ORDER.get(r.status, 9), False),
    SortKey("session", "session", lambda r: r.session_id, False),
    SortKey("iteration", "iter", lambda r: r.iteration, True),
    SortKey("score", "score", lambda r: -1.0 if r.last_score is None else r.last_score, True),
    SortKey("failures", "fails", lambda r: r.consecutive_failures, True),
    SortKey("tokens", "tokens", lambda r: r.tokens, True),
    SortKey("agent", "agent", lambda r: r.agent, False),
)

ID_WIDTH: Final = 24
COLUMNS: Final[tuple[tuple[str, str, int], ...]] = (
    ("status", "status", 11),
    ("session", "session", ID_WIDTH),
    ("iter", "iter", 7),
    ("score", "score", 5),
    ("trend", "trend", TREND_POINTS),
    ("signal", "signal", 8),
    ("fails", "fails", 5),
    ("tokens", "tokens", 6),
    ("age", "age", 4),
    ("agent", "agent", 12),
    ("task", "task", 48),
)
"""(key, label, width): fixed widths, so columns never jump while sessions update live."""


def cells(row: SessionRow, now: datetime) -> dict[str, Any]:
    """The table cells of one session, by column key."""
    iteration = f"{row.iteration}/{row.max_iterations}" if row.max_iterations else str(row.iteration)
    stop = Text(" ⏹", style=fmt.AMBER) if row.stop_requested and row.status == "running" else Text("")
    return {
        "status": fmt.status_text(row.status) + stop,
        "session": IdCell(row.session_id, ID_WIDTH),
        "iter": Text(iteration, justify="right"),
        "score": fmt.score_text(row.last_score),
        "trend": fmt.sparkline_text(row.scores, TREND_POINTS),
        "signal": fmt.signal_text(row.last_signal),
        "fails": Text(
            str(row.consecutive_failures),
            justify="right",
            style=fmt.RED if row.consecutive_failures >= 3 else "" if row.consecutive_failures else fmt.GREY,
        ),
        "tokens": Text(fmt.tokens(row.tokens), justify="right"),
        "age": Text(fmt.age(row.updated_at, now), justify="right"),
        "agent": Text(fmt.truncate(row.agent, 12)),
        "task": Text(fmt.truncate(row.task, 48)),
    }


def matches(row: SessionRow, needle: str) -> bool:
    """Whether the filter text is a substring of the session's id, agent, task or status."""
    if not needle:
        return True
    needle = needle.lower()
    return any(needle in field.lower() for field in (row.session_id, row.agent, row.task, row.status))


class SessionTable(DataTable[Any]):
    """The sessions table: Enter opens the session under the cursor (shown in the footer)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select_cursor", "Open")]


class SessionsScreen(Screen[None]):
    """All sessions: status (colour and symbol), iteration, score and trend, signal, failures, tokens, age."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "Filter"),
        Binding("o", "sort", "Sort"),
        Binding("r", "reverse", "Reverse"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    DEFAULT_CSS = """
    SessionsScreen { layout: vertical; }
    SessionsScreen #fleet { height: 1; padding: 0 1; background: $boost; }
    SessionsScreen #loading { height: 1; padding: 0 1; }
    SessionsScreen #loading Label { width: auto; margin-right: 1; }
    SessionsScreen #loading ProgressBar { width: 1fr; }
    SessionsScreen #filter-row { height: 1; padding: 0 1; display: none; }
    SessionsScreen #filter-row.shown { display: block; }
    SessionsScreen #filter-label { width: auto; color: $text-accent; }
    SessionsScreen #filter { height: 1; border: none; padding: 0; width: 1fr; }
    SessionsScreen #sessions { height: 1fr; }
    SessionsScreen #empty { height: 1; padding: 0 1; color: $text-muted; display: none; }
    SessionsScreen #empty.shown { display: block; }
    """

    def __init__(self) -> None:
        super().__init__(id="sessions-screen")
        self.rows: dict[str, SessionRow] = {}
        self.fleet = Fleet(sessions=0, running=0, complete=0, blocked=0, escalated=0, completion_rate=None)
        self.sort_index = 0
        self.descending = SORTS[0].descending
        self.filter_text = ""
        self.status_note = ""
        self.load_label = ""
        self.load_progress: tuple[int, int] | None = None
        self._early: list[SessionRow] = []
        self.cell_cache: dict[str, dict[str, Any]] = {}
        self._filter_timer: Timer | None = None

    @property
    def ralph(self) -> RalphApp:
        """The app, typed."""
        from tui.app import RalphApp

        assert isinstance(self.app, RalphApp)
        return self.app

    def compose(self) -> ComposeResult:
        """Fleet line, progress bar, filter, the table, the footer."""
        yield Static(id="fleet")
        with Horizontal(id="loading"):
            yield Label("opening…", id="loading-label")
            yield ProgressBar(total=None, show_eta=False, id="progress")
        with Horizontal(id="filter-row"):
            yield Label("filter ", id="filter-label")
            yield Input(placeholder="id, agent, task or status · Enter keeps it · Esc clears", id="filter")
        yield SessionTable(cursor_type="row", id="sessions")
        yield Label("no sessions match", id="empty")
        yield Footer()

    def on_mount(self) -> None:
        """Add the columns and show what arrived before mounting."""
        table = self.table
        for key, label, width in COLUMNS:
            table.add_column(label, key=key, width=width)
        if self.app.is_headless:
            self.query_one("#filter", Input).cursor_blink = False
        self.set_interval(5.0, self.tick_ages)
        self.draw_loading()
        early, self._early = self._early, []
        self.apply(early)
        table.focus()

    @property
    def table(self) -> DataTable[Any]:
        """The sessions table."""
        return self.query_one("#sessions", DataTable)

    # -- what the app tells this screen --------------------------------------------------------
    def show_progress(self, label: str, done: int | None = None, total: int | None = None) -> None:
        """Show a progress bar (loading the backlog, replaying); an empty label hides it."""
        self.load_label = label
        if total is not None:
            self.load_progress = (done or 0, total)
        if self.is_mounted:
            self.draw_loading()

    def draw_loading(self) -> None:
        """Draw (or hide) the progress bar."""
        box = self.query_one("#loading")
        box.display = bool(self.load_label)
        if not self.load_label:
            return
        self.query_one("#loading-label", Label).update(self.load_label)
        if self.load_progress is not None:
            done, total = self.load_progress
            self.query_one("#progress", ProgressBar).update(total=max(1, total), progress=done)

    def apply(self, rows: Iterable[SessionRow], fleet: Fleet | None = None) -> int:
        """Put these sessions' rows in the table (adding, updating or removing only those that
        changed) and re-sort if anything changed; returns how many rows changed."""
        if not self.is_mounted:
            self._early += rows
            self.fleet = fleet or self.fleet
            return 0
        table = self.table
        now = self.ralph.now()
        changed = 0
        for row in rows:
            sid = row.session_id
            old = self.rows.get(sid)
            if old == row:
                continue
            self.rows[sid] = row
            changed += 1
            shown = sid in table.rows
            if not matches(row, self.filter_text):
                self.cell_cache.pop(sid, None)  # computed again when it matches
                if shown:
                    table.remove_row(sid)
                continue
            new = cells(row, now)
            before = self.cell_cache.get(sid, {})
            self.cell_cache[sid] = new
            if not shown:
                table.add_row(*new.values(), key=sid)
                continue
            for column, value in new.items():
                if before.get(column) != value:
                    table.update_cell(sid, column, value)
        if fleet is not None:
            self.fleet = fleet
        if changed:
            self.resort()
        self.show_fleet()
        return changed

    def note(self, text: str) -> None:
        """A short note at the end of the fleet line (replay progress, errors)."""
        self.status_note = text
        self.show_fleet()

    # -- drawing ---------------------------------------------------------------------------------
    def show_fleet(self) -> None:
        """The header line: fleet totals, completion rate, sort and filter."""
        f = self.fleet
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"{f.sessions} sessions ", style="bold")
        for status, count in (
            ("running", f.running),
            ("complete", f.complete),
            ("blocked", f.blocked),
            ("escalated", f.escalated),
        ):
            symbol, colour = fmt.STATUS[status]
            line.append(f"{symbol} {count} {status} ", style=colour)
        line.append(f"· completion {fmt.percent(f.completion_rate)}")
        sort = SORTS[self.sort_index]
        line.append(f"  · sort {sort.name} {'↓' if self.descending else '↑'}", style=fmt.GREY)
        if self.filter_text:
            line.append(f"  · filter “{self.filter_text}” {self.table.row_count}/{len(self.rows)}")
        if self.status_note:
            line.append(f"  · {self.status_note}", style=fmt.GREY)
        self.query_one("#fleet", Static).update(line)
        self.query_one("#empty").set_class(bool(self.rows) and self.table.row_count == 0, "shown")

    def resort(self) -> None:
        """Sort the rows by the current sort key, keeping the cursor on its session (or at the top)."""
        table = self.table
        if not table.row_count:
            return
        keep = self.selected() if table.cursor_row > 0 else None
        sort = SORTS[self.sort_index]
        rows = self.rows

        def key(cell: IdCell) -> tuple[Any, str]:
            row = rows[cell.session_id]
            return sort.key(row), row.session_id

        table.sort("session", key=key, reverse=self.descending)
        if keep is not None and keep in table.rows:
            table.move_cursor(row=table.get_row_index(keep), animate=False)

    def rebuild(self) -> None:
        """Rebuild the rows (after the filter changed)."""
        table = self.table
        keep = self.selected()
        now = self.ralph.now()
        table.clear()
        for sid, row in self.rows.items():
            if matches(row, self.filter_text):
                if sid not in self.cell_cache:
                    self.cell_cache[sid] = cells(row, now)
                table.add_row(*self.cell_cache[sid].values(), key=sid)
        self.resort()
        if keep is not None and keep in table.rows:
            table.move_cursor(row=table.get_row_index(keep), animate=False)
        self.show_fleet()

    def tick_ages(self) -> None:
        """Refresh the age column of the rows on screen (the clock moved; rows off screen wait)."""
        table = self.table
        if not table.row_count:
            return
        now = self.ralph.now()
        first = int(table.scroll_y)
        ordered = table.ordered_rows[first : first + table.size.height]
        for r in ordered:
            row = self.rows.get(str(r.key.value))
            if row is None:
                continue
            value = Text(fmt.age(row.updated_at, now), justify="right")
            cached = self.cell_cache.get(row.session_id)
            if cached is not None and cached["age"] != value:
                cached["age"] = value
                table.update_cell(r.key, "age", value)

    def selected(self) -> str | None:
        """The session under the cursor."""
        table = self.table
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key
        return str(key.value)

    def visible_ids(self) -> list[str]:
        """The sessions in table order (for tests and the command palette)."""
        return [str(r.key.value) for r in self.table.ordered_rows]

    # -- actions ---------------------------------------------------------------------------------
    @on(DataTable.RowSelected, "#sessions")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        self.ralph.open_session(str(event.row_key.value))

    def action_open(self) -> None:
        """Open the session under the cursor."""
        sid = self.selected()
        if sid is not None:
            self.ralph.open_session(sid)

    def action_filter(self) -> None:
        """Show the filter input and focus it."""
        self.query_one("#filter-row").add_class("shown")
        self.query_one("#filter", Input).focus()

    def action_clear_filter(self) -> None:
        """Clear the filter and hide its input."""
        self.query_one("#filter", Input).value = ""
        self.query_one("#filter-row").remove_class("shown")
        if self._filter_timer is not None:
            self._filter_timer.stop()
            self._filter_timer = None
        if self.filter_text:
            self.filter_text = ""
            self.rebuild()
        self.table.focus()

    def action_sort(self) -> None:
        """Sort by the next column."""
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self.descending = SORTS[self.sort_index].descending
        self.resort()
        self.show_fleet()

    def action_reverse(self) -> None:
        """Reverse the sort order."""
        self.descending = not self.descending
        self.resort()
        self.show_fleet()

    def apply_filter(self) -> None:
        """Filter by what the filter input holds now."""
        if self._filter_timer is not None:
            self._filter_timer.stop()
            self._filter_timer = None
        text = self.query_one("#filter", Input).value.strip()
        if text != self.filter_text:
            self.filter_text = text
            self.rebuild()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        # typing is debounced: a large table is rebuilt once the typing pauses
        if self._filter_timer is not None:
            self._filter_timer.stop()
        self._filter_timer = self.set_timer(FILTER_DEBOUNCE_S, self.apply_filter)

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self.apply_filter()
        if not self.filter_text:
            self.query_one("#filter-row").remove_class("shown")
        self.table.focus()
