"""One session: the iteration timeline, detail and checkpoints; score plot, files heat and tokens; events."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, RichLog, Static
from textual.worker import get_current_worker

from ledger import plural
from ledger.monitor import EventLine, IterationDetail, IterationRow, Monitor, SessionRow
from tui import format as fmt
from tui.messages import DetailLoaded, SessionLoaded
from tui.screens.steering_screen import STEERING_KEYS, SteeringScreen
from tui.screens.value_viewer import ValueViewer
from tui.widgets.charts import HeatGrid, ScorePlot, TokenBars, checkpoints_text
from tui.widgets.footer import KeyFooter

FEEDBACK_LINES = 12
TIMELINE_TAIL = ("score", "signal", "guards", "promise", "hook", "stop", "tokens", "cost", "ctx", "time")
EVENT_COLOURS = {
    "session_started": fmt.BLUE,
    "iteration_started": fmt.BLUE,
    "validation_ran": "",
    "guard_tripped": fmt.RED,
    "session_completed": fmt.GREEN,
    "session_blocked": fmt.AMBER,
    "session_escalated": fmt.RED,
    "error_recorded": fmt.RED,
    "override": fmt.AMBER,
    "rate_limited": fmt.AMBER,
    "summary_given": fmt.BLUE,
}


class TimelineTable(DataTable[Any]):
    """The iteration timeline: a row per iteration; Home / End (and vim's j, k, G) move the cursor."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("home", "scroll_top", "First iteration", show=False),
        Binding("end", "scroll_bottom", "Last iteration", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("j", "cursor_down", "Down", show=False),
        Binding("G", "scroll_bottom", "Last iteration", show=False),
    ]


def rule_cell(rules: dict[str, tuple[bool, bool]], name: str) -> Text:
    """✔ passed, ✘ failed, ! errored, blank when the rule did not run in that iteration."""
    if name not in rules:
        return Text("")
    passed, errored = rules[name]
    if errored:
        return Text("!", style=f"bold {fmt.AMBER}", justify="center")
    if passed:
        return Text("✔", style=fmt.GREEN, justify="center")
    return Text("✘", style=fmt.RED, justify="center")


def timeline_columns(iterations: list[IterationRow]) -> list[str]:
    """The rule names of a session, in the order they first ran."""
    names: dict[str, None] = {}
    for it in iterations:
        for cell in it.rules:
            names.setdefault(cell.rule, None)
    return list(names)


def timeline_row(it: IterationRow, rule_names: list[str]) -> list[Any]:
    """The cells of one iteration: number, one per rule, score, signal, guards, promise, hook, stop,
    tokens, cost, context window use and duration."""
    tripped = bool(it.guards)
    rules = {c.rule: (c.passed, c.errored) for c in it.rules}
    number = Text(f"⚠{it.iteration}" if tripped else str(it.iteration), justify="right")
    if tripped:
        number.stylize(f"bold {fmt.RED}")
    guards = Text(" ".join(it.guards), style=f"bold #ffffff on {fmt.RED}") if tripped else Text("")
    return [
        number,
        *(rule_cell(rules, name) for name in rule_names),
        fmt.score_text(it.score),
        fmt.signal_text(it.signal),
        guards,
        Text(fmt.truncate(it.promise, 14)),
        Text(it.hook_action),
        Text(it.stop_decision),
        Text(fmt.tokens(it.tokens_total), justify="right"),
        fmt.cost_text(it.cost_usd),
        fmt.context_text(it.context_used),
        Text("-" if it.duration_s is None else f"{it.duration_s:.0f}s", justify="right"),
    ]


def event_text(e: EventLine) -> Text:
    """One line of the event log."""
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append(f"{e.seq:>4} {e.ts:%H:%M:%S} it{e.iteration:<2} ", style=fmt.GREY)
    line.append(f"{e.type:<18} ", style=EVENT_COLOURS.get(e.type, ""))
    line.append(e.text)
    return line


def detail_text(d: IterationDetail) -> Text:
    """The guidance it was given, the summary of the loop its prompt carried (if any), the feedback,
    next prompt, hook reason and output excerpt of one iteration."""
    out = Text()
    if d.guidance:  # a person's guidance, given in this iteration's prompt
        out.append("guidance: ", style=f"bold {fmt.AMBER}")
        out.append(" ".join(d.guidance.split()) + "\n")
    if d.summary:
        out.append("summary given with its prompt\n", style="bold")
        out.append("".join(f"  {line}\n" for line in d.summary.splitlines()), style=fmt.GREY)
    if d.hook_reason:
        out.append("hook: ", style="bold")
        out.append(" ".join(d.hook_reason.split()) + "\n")
    out.append("feedback\n", style="bold")
    for item in d.feedback or ["(none)"]:
        lines = [line.rstrip() for line in item.strip().splitlines() if line.strip()] or [""]
        out.append(f"  • {lines[0]}\n")
        for line in lines[1:FEEDBACK_LINES]:
            out.append(f"    {line}\n", style=fmt.GREY)
        if len(lines) > FEEDBACK_LINES:
            out.append(f"    … {plural(len(lines) - FEEDBACK_LINES, 'more line')}\n", style=fmt.GREY)
    out.append("next prompt\n", style="bold")
    out.append("  " + (" ".join(d.next_prompt.split()) or "(none)") + "\n")
    out.append("agent output\n", style="bold")
    excerpt = d.output_excerpt.strip() or "(none)"
    out.append("\n".join("  " + line for line in excerpt.splitlines()[:40]))
    return out


def title_text(session_id: str, row: SessionRow | None, now: datetime) -> Text:
    """The one-line summary at the top of the screen (a usage limit's wait as of ``now``)."""
    out = Text(no_wrap=True, overflow="ellipsis")
    if row is None:
        out.append(f"{session_id}  (not ingested yet)")
        return out
    out.append_text(fmt.row_status_text(row, now))
    if (until := row.waiting_at(now)) is not None:  # said before anything a long line could cut
        out.append(f" until {until.astimezone(UTC):%H:%M} UTC (usage limit)", style=fmt.WAITING[1])
    if row.chain_break:  # its journal was altered: said before anything a long line could cut
        symbol, colour = fmt.CHAIN_BROKEN
        out.append(f" {symbol} journal altered ({row.chain_break})", style=colour)
    if row.stalled and row.runner:  # its runner has exited: say how to go on
        out.append(f" · continue it with `ralph-ledger run --resume {session_id}`", style=fmt.AMBER)
    out.append(f"  {session_id}", style="bold")
    iteration = f"{row.iteration}/{row.max_iterations}" if row.max_iterations else str(row.iteration)
    out.append(f"  it {iteration}")
    if row.tasks_total:  # a task-list loop: its progress and current task (T lists them all)
        out.append(f"  ☑ {row.tasks_done}/{row.tasks_total}", style=fmt.BLUE)
        if row.current_task:
            out.append(f" {' '.join(row.current_task.split())}")
    out.append("  score ")
    out.append_text(fmt.score_text(row.last_score))
    if row.tokens:
        out.append(f"  {fmt.tokens(row.tokens)} tokens")
    if row.cost_usd is not None:
        out.append(f"  {fmt.cost(row.cost_usd)}")
    out.append(f"  {row.agent}  ")
    if row.branch:  # a loop in its own worktree (run --worktree)
        out.append(f"⎇ {row.branch}  ")
    out.append(" ".join(row.task.split()), style=fmt.GREY)
    return out


class SessionScreen(SteeringScreen):
    """Everything about one session; follows it live while it is shown."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("e", "focus_events", "Events"),
        Binding("i", "focus_timeline", "Iterations"),
        Binding("T", "tasks", "Tasks", show=False),
        Binding("d", "diff", "Diff", show=False, tooltip="What the iteration changed (its git snapshot)"),
        *STEERING_KEYS,
    ]

    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]  # noqa: RUF012 (an instance variable in Textual)

    # The panels share the screen in proportions, so they grow with the terminal and reflow on a
    # resize; a short terminal (under 30 rows) gives the detail, the checkpoints and the event log
    # fixed heights. The charts are never below a fold: the score plot takes what the files and the
    # tokens leave, and each chart draws what fits its size (the same latest iterations in all three,
    # the most modified files).
    DEFAULT_CSS = """
    SessionScreen { layout: vertical; }
    SessionScreen.-short #detail-box { height: 7; min-height: 7; }
    SessionScreen.-short #checkpoints { max-height: 3; }
    SessionScreen.-short #events { height: 5; min-height: 5; }
    SessionScreen.-short #heat { max-height: 5; }
    SessionScreen.-short #tokens { max-height: 6; }
    SessionScreen #title { height: 1; padding: 0 1; background: $boost; }
    SessionScreen #body { height: 1fr; }
    SessionScreen #left { width: 2fr; }
    SessionScreen #timeline { height: 1fr; min-height: 4; }
    SessionScreen #detail-box, SessionScreen #checkpoints {
        height: 1fr; min-height: 9; border: round $primary 40%; border-title-color: $text-accent;
    }
    SessionScreen #checkpoints {
        height: auto; min-height: 3; max-height: 20%; text-wrap: nowrap; text-overflow: ellipsis;
    }
    SessionScreen #right { width: 1fr; min-width: 28; }
    SessionScreen #right > * { border: round $primary 40%; border-title-color: $text-accent; }
    SessionScreen #plot { height: 1fr; min-height: 6; }
    SessionScreen #heat { max-height: 30%; }
    SessionScreen #tokens { max-height: 40%; }
    SessionScreen #events {
        height: 25%; min-height: 8; overflow-x: hidden; border: round $primary 40%;
        border-title-color: $text-accent;
    }
    """

    def __init__(
        self, session_id: str, monitor: Callable[[], Monitor | None], now: Callable[[], datetime]
    ) -> None:
        super().__init__()
        self.session_id = session_id
        self.monitor = monitor
        """The monitor its workers read (``None`` while the ledger is opening)."""
        self.now = now
        """The clock a usage limit's wait is measured with (the monitor's)."""
        self.row: SessionRow | None = None
        self.iterations: list[IterationRow] = []
        self.rule_names: list[str] = []
        self.selected_iteration: int | None = None
        self.following = True
        """The selection follows the newest iteration (until the user moves it to another one)."""
        self.detail: IterationDetail | None = None
        self.last_seq = 0
        self.loads = 0

    def compose(self) -> ComposeResult:
        """Title, timeline and detail, the plots, the event log, the footer."""
        yield Static(title_text(self.session_id, None, self.now()), id="title")
        with Horizontal(id="body"):
            with Vertical(id="left"):
                yield TimelineTable(cursor_type="row", id="timeline")
                with VerticalScroll(id="detail-box"):
                    yield Static(id="detail")
                yield Static(id="checkpoints")
            with Vertical(id="right"):
                yield ScorePlot(id="plot")
                yield HeatGrid(id="heat")
                yield TokenBars(id="tokens")
        yield RichLog(id="events", max_lines=1000, wrap=False, auto_scroll=True)
        yield KeyFooter()

    def on_mount(self) -> None:
        """Title the panels and load the session."""
        self.query_one("#detail-box").border_title = "Iteration"
        self.query_one("#plot").border_title = "Score per iteration"
        self.query_one("#heat").border_title = "Files × iterations"
        self.query_one("#tokens").border_title = "Tokens per iteration"
        self.query_one("#checkpoints").border_title = "Checkpoints"
        self.query_one("#events").border_title = "Events"
        self.query_one("#timeline").focus()
        self.reload()

    # -- loading (thread workers post; the handlers below own the widgets) -------------------------
    def reload(self) -> None:
        """Fetch the session again (it changed, or the screen just opened)."""
        self.load_session()

    @work(thread=True, exclusive=True, group="session")
    def load_session(self) -> None:
        """Read the session's rows from the monitor."""
        monitor = self.monitor()
        if monitor is None:
            return
        sid = self.session_id
        rows = monitor.sessions([sid])
        message = SessionLoaded(
            sid,
            rows[0] if rows else None,
            monitor.iterations(sid),
            monitor.heat(sid),
            monitor.checkpoints(sid),
            monitor.events(sid, 200),
        )
        if not get_current_worker().is_cancelled:  # a newer load is on its way
            self.post_message(message)

    @work(thread=True, exclusive=True, group="detail")
    def load_detail(self, iteration: int) -> None:
        """Read one iteration's detail."""
        monitor = self.monitor()
        if monitor is None:
            return
        detail = monitor.detail(self.session_id, iteration)
        if not get_current_worker().is_cancelled:
            self.post_message(DetailLoaded(self.session_id, detail))

    def on_session_loaded(self, message: SessionLoaded) -> None:
        """Show what was read."""
        self.loads += 1
        self.row = message.row
        self.iterations = message.iterations
        self.query_one("#title", Static).update(title_text(self.session_id, message.row, self.now()))
        self.fill_timeline()
        self.query_one("#plot", ScorePlot).show(message.iterations)
        self.query_one("#heat", HeatGrid).show(message.heat)
        self.query_one("#tokens", TokenBars).show(message.iterations)
        self.query_one("#checkpoints", Static).update(checkpoints_text(message.checkpoints))
        log = self.query_one("#events", RichLog)
        for e in message.events:
            if e.seq > self.last_seq:
                log.write(event_text(e))
                self.last_seq = e.seq

    def fill_timeline(self) -> None:
        """(Re)build the timeline, keeping the selected iteration (the last one at first)."""
        table: DataTable[Any] = self.query_one("#timeline", DataTable)
        names = timeline_columns(self.iterations)
        self.rule_names = names
        labels = ["#", *(fmt.truncate(name, 12) for name in names), *TIMELINE_TAIL]
        keys = ["n", *(f"rule:{name}" for name in names), *TIMELINE_TAIL]
        rows = [timeline_row(it, names) for it in self.iterations]
        table.clear(columns=True)
        for label, key, width in zip(labels, keys, fmt.column_widths(labels, rows), strict=True):
            table.add_column(label, key=key, width=width)
        for it, row in zip(self.iterations, rows, strict=True):
            table.add_row(*row, key=str(it.iteration))
        numbers = [it.iteration for it in self.iterations]
        if not numbers:
            return
        follow = self.following or self.selected_iteration not in numbers
        target = numbers[-1] if follow else self.selected_iteration
        assert target is not None
        table.move_cursor(row=numbers.index(target), animate=False)
        self.select(target)  # (again: its events may have changed its detail)

    def select(self, iteration: int) -> None:
        """Show this iteration's detail."""
        self.selected_iteration = iteration
        self.query_one("#detail-box").border_title = f"Iteration {iteration}"
        self.load_detail(iteration)

    @on(DataTable.RowHighlighted, "#timeline")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        table = self.query_one("#timeline", DataTable)
        if event.row_key.value is None or event.cursor_row != table.cursor_row:
            return  # (a highlight from before the table was filled again)
        iteration = int(event.row_key.value)
        # on the newest iteration the selection follows the next ones; elsewhere it stays put
        self.following = event.cursor_row == table.row_count - 1
        if iteration != self.selected_iteration:
            self.select(iteration)

    def on_detail_loaded(self, message: DetailLoaded) -> None:
        """Show an iteration's feedback and next prompt."""
        if message.detail.iteration != self.selected_iteration:
            return
        self.detail = message.detail
        self.query_one("#detail", Static).update(detail_text(message.detail))

    def steering_target(self) -> str | None:
        """This session: the steering keys act on it."""
        return self.session_id

    def action_focus_events(self) -> None:
        """Focus the event log (scroll it with the arrows)."""
        self.query_one("#events").focus()

    def action_tasks(self) -> None:
        """Show the session's task list (``tui.screens.tasks_screen``)."""
        from tui.screens.tasks_screen import TasksScreen

        monitor = self.monitor()
        if monitor is not None:
            self.app.push_screen(TasksScreen(self.session_id, monitor.tasks(self.session_id)))

    def action_diff(self) -> None:
        """Show what the iteration under the cursor changed: its git snapshot's diff."""
        if self.selected_iteration is not None:
            self.load_diff(self.selected_iteration)

    @work(thread=True, exclusive=True, group="diff")
    def load_diff(self, iteration: int) -> None:
        """Read one iteration's diff, then show it."""
        monitor = self.monitor()
        if monitor is None:
            return
        text = monitor.diff(self.session_id, iteration)
        title = f"{self.session_id} · iteration {iteration} · diff"
        self.app.call_from_thread(self.app.push_screen, ValueViewer(title, text))

    def action_focus_timeline(self) -> None:
        """Focus the iteration timeline."""
        self.query_one("#timeline").focus()
