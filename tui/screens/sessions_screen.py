"""The main screen: one row per session, fleet totals, sort and filter, updated in place."""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Final

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.timer import Timer
from textual.widgets import Input, Label, ProgressBar, Static

from ledger import plural
from ledger.monitor import Fleet, SessionRow, SessionStatus, fleet_of
from tui import format as fmt
from tui.messages import OpenSession
from tui.screens.steering_screen import STEERING_KEYS, SteeringScreen
from tui.widgets.footer import KeyFooter
from tui.widgets.table import Column, VirtualTable

NEVER: Final = datetime.min.replace(tzinfo=UTC)
TREND_POINTS: Final = 10
FILTER_DEBOUNCE_S: Final = 0.15
STATUS_ORDER: Final[dict[SessionStatus, int]] = {"running": 0, "blocked": 1, "escalated": 2, "complete": 3}
MOVE_AT_MOST: Final = 32
"""Changed rows up to which an update moves rows into place instead of sorting them all."""


class Descending:
    """A sort key compared the other way round (largest first)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: Descending) -> bool:
        return bool(other.value < self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Descending) and bool(self.value == other.value)

    def __hash__(self) -> int:
        return hash(self.value)


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
    SortKey("cost", "cost", lambda r: -1.0 if r.cost_usd is None else r.cost_usd, True),
)

ID_WIDTH: Final = 24
COLUMNS: Final[tuple[Column, ...]] = (
    Column("status", "status", 11),
    Column("session", "session", ID_WIDTH),
    Column("iter", "iter", 7),
    Column("score", "score", 5),
    Column("trend", "trend", TREND_POINTS),
    Column("signal", "signal", 8),
    Column("fails", "fails", 5),
    Column("tokens", "tokens", 6),
    Column("cost", "cost", 7),
    Column("age", "age", 4),
    Column("agent", "agent", 12),
    Column("task", "task", 48),
)
"""(key, label, width): fixed widths, so columns never jump live; a dataset's add ``source`` (12).
The task takes the width the others leave (48 at least), and ``iter`` grows (never shrinks) to the
widest count shown (``2000/5000``)."""
TASK_CHARS: Final = 400
"""The most of a task a cell holds (the column cuts it to its width with an ellipsis)."""


def iteration_text(row: SessionRow) -> str:
    """``3/15``, or ``3`` without a maximum."""
    return f"{row.iteration}/{row.max_iterations}" if row.max_iterations else str(row.iteration)


def cells(row: SessionRow, now: datetime) -> dict[str, Text]:
    """The table cells of one session, by column key."""
    iteration = iteration_text(row)
    stop = Text(" ⏹", style=fmt.AMBER) if row.stop_requested and row.status == "running" else Text("")
    stop += Text(" ⏸", style=fmt.AMBER) if row.paused and row.status == "running" else ""
    stop += Text(f" {fmt.CHAIN_BROKEN[0]}", style=fmt.CHAIN_BROKEN[1]) if row.chain_break else ""
    fails = row.consecutive_failures
    return {
        "status": fmt.row_status_text(row, now) + stop,
        "session": Text(row.session_id, no_wrap=True),
        "source": Text(fmt.truncate(row.source, 12)),
        "iter": Text(iteration, justify="right"),
        "score": fmt.score_text(row.last_score),
        "trend": fmt.sparkline_text(row.scores, TREND_POINTS),
        "signal": fmt.signal_text(row.last_signal),
        "fails": Text(
            str(fails), justify="right", style=fmt.RED if fails >= 3 else "" if fails else fmt.GREY
        ),
        "tokens": Text(fmt.tokens(row.tokens), justify="right"),
        "cost": fmt.cost_text(row.cost_usd),
        "age": Text(fmt.age(row.updated_at, now), justify="right"),
        "agent": Text(fmt.truncate(row.agent, 12)),
        "task": Text(fmt.truncate(task_cell(row), TASK_CHARS)),
    }


def task_cell(row: SessionRow) -> str:
    """The task column: a task-list loop's progress (done / total) and its current task in place of
    its label, after the worktree's branch when it runs in one."""
    task = row.task
    if row.tasks_total:
        task = f"☑ {row.tasks_done}/{row.tasks_total} · {row.current_task or row.task}"
    return f"⎇ {row.branch} · {task}" if row.branch else task


def matches(row: SessionRow, needle: str) -> bool:
    """Whether the filter text is a substring of the session's id, agent, task, status, branch or source."""
    needle, r = needle.lower(), row
    fields = (
        r.session_id,
        r.agent,
        r.task,
        r.status,
        r.branch,
        r.source,
        "stalled" if r.stalled else "",
        r.current_task,
    )
    return any(needle in f.lower() for f in fields)


@dataclass(frozen=True)
class FleetView:
    """What the fleet line says besides the totals: the sort, the filter and its count, a note."""

    sort: str
    filter_text: str = ""
    shown: int = 0
    total: int = 0
    note: str = ""


FLEET_STATUSES: Final[tuple[SessionStatus, ...]] = ("running", "complete", "blocked", "escalated")


FLEET_FORMS: Final = ((True, True, True), (True, False, True), (False, False, True), (False, False, False))
"""The fleet line's forms, longest first: (statuses in words, the sort, the filter's text)."""


def fleet_line(fleet: Fleet, view: FleetView, width: int) -> Text:
    """The fleet line in the longest form that fits ``width`` cells: statuses with their words and
    the sort; then without the sort (the table's header marks the sorted column); then statuses as
    symbol and count; then without the filter's text. The totals, the completion rate and the
    filter's count are never cut; a note that still does not fit ends with an ellipsis."""
    counts = {s: getattr(fleet, s) for s in FLEET_STATUSES}
    forms: list[Text] = []
    for level, (words, sort, filter_text) in enumerate(FLEET_FORMS):
        line = Text(no_wrap=True, overflow="ellipsis", end="")
        line.append(f"{plural(fleet.sessions, 'session')} ", style="bold")
        for status in FLEET_STATUSES:
            symbol, colour = fmt.STATUS[status]
            count = counts[status]
            line.append(f"{symbol} {count} {status} " if words else f"{symbol}{count} ", colour)
            if status == "running" and fleet.stalled:
                symbol, colour = fmt.STALLED
                word = f"{symbol} {fleet.stalled} stalled " if words else f"{symbol}{fleet.stalled} "
                line.append(word, colour)
        gap = "  · " if level == 0 else " · "
        line.append(f"{gap[1:]}completion {fmt.percent(fleet.completion_rate)}")
        if sort:
            line.append(f"{gap}sort {view.sort}", style=fmt.GREY)
        if view.filter_text:
            what = f"“{view.filter_text}” " if filter_text else ""
            line.append(f"{gap}filter {what}{view.shown}/{view.total}")
        forms.append(line)
    note = Text(f" · {view.note}", style=fmt.GREY) if view.note else Text()
    for line in forms:
        if line.cell_len + note.cell_len <= width:
            return line + note
    last = forms[-1]
    for line in forms:  # the note is cut, in the longest form that leaves it some room
        if line.cell_len + min(note.cell_len, 12) <= width:
            last = line
            break
    last.append_text(note)
    last.truncate(max(width, 1), overflow="ellipsis")
    return last


class SessionsScreen(SteeringScreen):
    """All sessions: status, iteration, score and trend, signal, failures, tokens, cost, age."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "Filter"),
        Binding("o", "sort", "Sort"),
        Binding("r", "reverse", "Reverse"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        *STEERING_KEYS,
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
    SessionsScreen #welcome { height: auto; padding: 1 2; display: none; }
    SessionsScreen #welcome.shown { display: block; }
    """

    def __init__(self, *, sources: bool = False, now: Callable[[], datetime]) -> None:
        super().__init__(id="sessions-screen")
        self.now = now
        """The clock the ages are measured with (the monitor's)."""
        self.columns = (*COLUMNS[:2], Column("source", "source", 12), *COLUMNS[2:]) if sources else COLUMNS
        self.rows: dict[str, SessionRow] = {}
        self.fleet = Fleet(sessions=0, running=0, complete=0, blocked=0, escalated=0, completion_rate=None)
        self.sort_index = 0
        self.descending = SORTS[0].descending
        self.filter_text = ""
        self.status_note = ""
        self.load_label = ""
        self.load_progress: tuple[int, int] | None = None
        self._early: list[SessionRow] = []
        self.cell_cache: dict[str, dict[str, Text]] = {}
        self.status_counts: Counter[SessionStatus] = Counter()
        """Sessions per status, kept as rows change (the fleet totals are counted from it)."""
        self.stalled = 0
        """Running sessions that nothing drives, kept as rows change."""
        self.table = VirtualTable(self.columns, self.render_row, flex="task", id="sessions")
        self.iter_width = next(c.width for c in self.columns if c.key == "iter")
        self._filter_timer: Timer | None = None
        self._fleet_line: Text | None = None
        self.welcome: Text | None = None
        self._welcome_shown: Text | None = None
        """The empty state (what is watched, how to start a loop), shown while there is no session."""

    def compose(self) -> ComposeResult:
        """Fleet line, progress bar, filter, the table, the footer."""
        yield Static(id="fleet")
        with Horizontal(id="loading"):
            yield Label("opening…", id="loading-label")
            yield ProgressBar(total=None, show_eta=False, id="progress")
        with Horizontal(id="filter-row"):
            yield Label("filter ", id="filter-label")
            yield Input(placeholder="id, agent, task or status · Enter keeps it · Esc clears", id="filter")
        yield self.table
        yield Label("no sessions match", id="empty")
        yield Static(id="welcome")
        yield KeyFooter()

    def on_mount(self) -> None:
        """Add the columns and show what arrived before mounting."""
        table = self.table
        table.sorted_column = SORTS[self.sort_index].column
        if self.app.is_headless:
            self.query_one("#filter", Input).cursor_blink = False
        self.set_interval(5.0, self.tick_ages)
        self.draw_loading()
        early, self._early = self._early, []
        self.apply(early, self.fleet if early else None)
        table.focus()

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
        """Take these sessions' rows (new or changed), repaint only those and re-sort if anything
        changed; returns how many rows changed. Nothing is drawn for rows out of view. The fleet
        totals are counted from the rows held, unless ``fleet`` is given (when only some are)."""
        if not self.is_mounted:
            self._early += rows
            self.fleet = fleet or self.fleet
            return 0
        changed: list[str] = []
        counts = self.status_counts
        for row in rows:
            sid = row.session_id
            old = self.rows.get(sid)
            if old == row:
                continue
            if old is not None:
                counts[old.status] -= 1
                self.stalled -= old.stalled
            counts[row.status] += 1
            self.stalled += row.stalled
            self.rows[sid] = row
            self.cell_cache.pop(sid, None)
            changed.append(sid)
        if fleet is not None:
            self.fleet = fleet
        elif changed:
            self.fleet = fleet_of(counts, self.stalled)
        if changed:
            widest = max(len(iteration_text(self.rows[sid])) for sid in changed)
            if widest > self.iter_width:  # grows, never shrinks: columns do not jump back and forth
                self.iter_width = widest
                self.table.set_width("iter", widest)
            self.table.invalidate(changed)
            if len(changed) <= MOVE_AT_MOST and self.table.row_count:
                self.move(changed)
            else:
                self.resort()
        self.show_fleet()
        return len(changed)

    def drop(self, ids: Iterable[str]) -> None:
        """Drop these sessions (their journals were emptied or deleted)."""
        gone = [sid for sid in ids if sid in self.rows]
        for sid in gone:
            row = self.rows.pop(sid)
            self.status_counts[row.status] -= 1
            self.stalled -= row.stalled
            self.cell_cache.pop(sid, None)
        if gone:
            self.fleet = fleet_of(self.status_counts, self.stalled)
            self.resort()
            self.show_fleet()

    def show_welcome(self, text: Text | None) -> None:
        """The empty state to show while there is no session (``None``: none)."""
        self.welcome = text
        if self.is_mounted:
            self.show_fleet()

    def render_row(self, sid: str) -> list[Text]:
        """The cells of one session (computed when the row is first painted, then kept)."""
        cached = self.cell_cache.get(sid)
        if cached is None:
            cached = self.cell_cache[sid] = cells(self.rows[sid], self.now())
        return [cached[c.key] for c in self.columns]

    def note(self, text: str) -> None:
        """A short note at the end of the fleet line (replay progress, errors)."""
        self.status_note = text
        self.show_fleet()

    # -- drawing ---------------------------------------------------------------------------------
    def show_fleet(self) -> None:
        """The header line: fleet totals, completion rate, sort and filter, in the form that fits."""
        box = self.query_one("#fleet", Static)
        width = box.content_size.width or max(1, self.app.size.width - 2)
        sort = SORTS[self.sort_index]
        line = fleet_line(
            self.fleet,
            FleetView(
                sort=f"{sort.name} {'↓' if self.descending else '↑'}",
                filter_text=self.filter_text,
                shown=self.table.row_count,
                total=len(self.rows),
                note=self.status_note,
            ),
            width,
        )
        if line != self._fleet_line:  # an update lays the screen out again: only when it changed
            self._fleet_line = line
            box.update(line)
        self.query_one("#empty").set_class(bool(self.rows) and self.table.row_count == 0, "shown")
        welcome = self.query_one("#welcome", Static)
        empty = not self.rows and self.welcome is not None
        if empty and self._welcome_shown is not self.welcome:
            self._welcome_shown = self.welcome
            welcome.update(self.welcome or "")
        welcome.set_class(empty, "shown")
        if self.table.display == empty:
            self.table.display = not empty
            if not empty and self.focused is None:
                self.table.focus()

    def on_resize(self) -> None:
        """The fleet line takes the form that fits the new width."""
        self.show_fleet()

    def ordered(self) -> list[str]:
        """The sessions that match the filter, in the current sort order."""
        sort = SORTS[self.sort_index]
        rows = [r for r in self.rows.values() if matches(r, self.filter_text)]
        rows.sort(key=lambda r: r.session_id)
        rows.sort(key=sort.key, reverse=self.descending)  # stable: ties stay by session id
        return [r.session_id for r in rows]

    def move(self, changed: list[str]) -> None:
        """Put a few changed rows in their sorted places (the same order ``ordered`` gives, without
        sorting every session again)."""
        sort = SORTS[self.sort_index]
        rows = self.rows

        def key(sid: str) -> tuple[Any, str]:
            value = sort.key(rows[sid])
            return (Descending(value) if self.descending else value, sid)

        table = self.table
        keep = self.selected() if table.cursor_row > 0 else None
        moving = set(changed)
        order = [sid for sid in table.keys if sid not in moving]
        for sid in changed:
            if matches(rows[sid], self.filter_text):
                bisect.insort(order, sid, key=key)
        table.set_keys(order, keep=keep)

    def resort(self) -> None:
        """Sort (and filter) the rows again, keeping the cursor on its session unless it is on the
        first row (which then shows whatever comes first, e.g. the latest activity)."""
        table = self.table
        keep = self.selected() if table.cursor_row > 0 else None
        table.sorted_column = SORTS[self.sort_index].column
        table.set_keys(self.ordered(), keep=keep)

    def rebuild(self) -> None:
        """Rebuild the rows (after the filter changed), keeping the cursor on its session."""
        self.table.set_keys(self.ordered(), keep=self.selected())
        self.show_fleet()

    def tick_ages(self) -> None:
        """The clock moved: the age column is computed again as rows are painted (those in view now)."""
        if not self.table.row_count:
            return
        self.cell_cache.clear()
        self.table.invalidate()

    def selected(self) -> str | None:
        """The session under the cursor (the one the steering keys act on)."""
        return self.table.cursor_key

    steering_target = selected

    def visible_ids(self) -> list[str]:
        """The sessions in table order (for tests and the command palette)."""
        return list(self.table.keys)

    # -- actions ---------------------------------------------------------------------------------
    @on(VirtualTable.Selected, "#sessions")
    def _row_selected(self, event: VirtualTable.Selected) -> None:
        self.post_message(OpenSession(event.key))

    @on(VirtualTable.HeaderClicked, "#sessions")
    def _header_clicked(self, event: VirtualTable.HeaderClicked) -> None:
        for index, sort in enumerate(SORTS):
            if sort.column == event.key:
                if index == self.sort_index:
                    self.descending = not self.descending
                else:
                    self.sort_index, self.descending = index, sort.descending
                self.resort()
                self.show_fleet()
                return

    def action_open(self) -> None:
        """Open the session under the cursor."""
        sid = self.selected()
        if sid is not None:
            self.post_message(OpenSession(sid))

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
