"""The task list of a task-list loop (key ``T`` on a session): each task's status, iterations, tokens
and cost, as the ``tasks`` view has them (docs/tasks.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Final

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ledger.monitor import TaskRow
from tui import format as fmt

STATUS: Final[dict[str, tuple[str, str]]] = {
    "pending": ("·", fmt.GREY),
    "running": ("●", fmt.BLUE),
    "done": ("✔", fmt.GREEN),
    "blocked": ("■", fmt.RED),
    "skipped": ("↷", fmt.AMBER),
}
"""Each status's mark and colour."""


def tasks_table(tasks: Sequence[TaskRow]) -> Table | Text:
    """One row per task: its number, status, title, iterations, tokens and cost."""
    if not tasks:
        return Text(
            "This loop has no task list (ralph-ledger run --tasks / loop start --tasks).", style=fmt.GREY
        )
    table = Table(box=None, padding=(0, 1, 0, 0), expand=True, header_style="bold")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("task", ratio=1, no_wrap=True, overflow="ellipsis")
    table.add_column("iter", justify="right", no_wrap=True)
    table.add_column("tokens", justify="right", no_wrap=True)
    table.add_column("cost", justify="right", no_wrap=True)
    for t in tasks:
        mark, colour = STATUS.get(t.status, ("?", ""))
        table.add_row(
            str(t.task_no),
            Text(f"{mark} {t.status}", style=colour),
            t.title,
            str(t.iterations),
            fmt.tokens(t.tokens),
            fmt.cost_text(t.cost_usd),
        )
    return table


def tasks_title(session_id: str, tasks: Sequence[TaskRow]) -> str:
    """The box's title: the session and how many of its tasks are done."""
    done = [t.status for t in tasks].count("done")  # a task's status, not a session's
    return f"{session_id} · tasks {done}/{len(tasks)} done" if tasks else f"{session_id} · tasks"


class TasksScreen(ModalScreen[None]):
    """A session's tasks over its screen; read once when opened (``T`` again reads them anew)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,T,q", "app.pop_screen", "Close")]

    DEFAULT_CSS = """
    TasksScreen { align: center middle; }
    TasksScreen > VerticalScroll {
        width: 100; max-width: 100%; height: auto; max-height: 100%; scrollbar-size-vertical: 1;
        border: round $primary; background: $surface; padding: 0 1;
    }
    """

    def __init__(self, session_id: str, tasks: Sequence[TaskRow]) -> None:
        super().__init__()
        self.session_id = session_id
        self.tasks = list(tasks)

    def compose(self) -> ComposeResult:
        """The tasks table in a bordered box."""
        with VerticalScroll() as box:
            box.border_title = tasks_title(self.session_id, self.tasks)
            box.border_subtitle = "esc closes"
            yield Static(tasks_table(self.tasks), id="tasks")
