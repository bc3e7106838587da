"""The help screen: every key, by screen."""

from __future__ import annotations

from typing import ClassVar, Final

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tui import format as fmt

KEYS: Final[tuple[tuple[str, tuple[tuple[str, str], ...]], ...]] = (
    (
        "Everywhere",
        (
            ("?", "this help"),
            ("s", "SQL console"),
            ("a", "alert history"),
            ("t", "light / dark theme"),
            ("ctrl+p", "command palette"),
            ("+ -", "replay faster / slower"),
            ("p", "pause the replay"),
            ("q ctrl+c", "quit"),
        ),
    ),
    (
        "Sessions",
        (
            ("enter", "open the session"),
            ("↑ ↓ j k", "move"),
            ("home end", "first / last (G: last)"),
            ("/", "filter (esc clears)"),
            ("o", "sort by the next column"),
            ("r", "reverse the sort"),
            ("click", "header: sort · row ×2: open"),
        ),
    ),
    (
        "Session",
        (
            ("↑ ↓ j k", "choose an iteration"),
            ("home end", "first / last (G: last)"),
            ("i e", "focus timeline / events"),
            ("T", "its task list"),
            ("d", "its diff (git snapshot)"),
            ("esc", "back"),
        ),
    ),
    (
        "Alerts (a)",
        (
            ("enter", "read the whole alert"),
            ("o", "open the alert's session"),
            ("esc a", "back"),
        ),
    ),
    (
        "SQL console",
        (
            ("ctrl+r", "run the query"),
            ("esc", "cancel the run · back"),
            ("ctrl+↑ ↓", "query history"),
            ("ctrl+a", "select all in the editor"),
            ("ctrl+l", "example queries"),
            ("ctrl+o", "tables: enter inserts a name"),
            ("ctrl+t", "focus the results"),
            ("enter", "view the whole cell"),
            ("h j k l", "move · G last row"),
            ("c y", "copy the cell / row"),
            ("ctrl+s", "export .csv / .json"),
        ),
    ),
    (
        "A loop",
        (
            ("P", "pause / resume it"),
            ("g", "steer its next prompt"),
            ("u", "unblock it, 5 more"),
        ),
    ),
)

LEGEND: Final = (
    "status  ● running  ◌ stalled  ◷ waiting  ✔ complete  ■ blocked  ▲ escalated\n"
    "        ⏸ paused  ⏹ stop requested  ◌ blocked, nothing drives it  ◷ a usage limit holds it\n"
    "        ✗ its journal's hash chain is broken (ralph-ledger verify names the line)\n"
    "rules   ✔ pass  ✘ fail  ! error      ⚠ a guard tripped\n"
    "ctrl+p  open a session by id, run an example query, replay speed"
)


def section(name: str, keys: tuple[tuple[str, str], ...]) -> Table:
    """One screen's keys."""
    title = Text(name, style=f"bold {fmt.BLUE}")
    table = Table(show_header=False, box=None, padding=(0, 1, 0, 0), expand=False, title=title)
    table.title_justify = "left"
    table.add_column(style="bold", no_wrap=True, min_width=8)
    table.add_column(no_wrap=True)
    for key, what in keys:
        table.add_row(key, what)
    return table


COLUMNS: Final = (("Everywhere", "Session", "A loop"), ("Sessions", "Alerts (a)", "SQL console"))
"""Which sections stand in each column: about as tall as each other, so the box stays short."""


def help_table() -> Table:
    """The keys of every screen, in two columns of sections."""
    grid = Table.grid(padding=(0, 3, 0, 0))
    grid.add_column()
    grid.add_column()
    keys = dict(KEYS)
    cells = [
        Group(*[part for name in names for part in ("", section(name, keys[name]))][1:]) for names in COLUMNS
    ]
    grid.add_row(*cells)
    return grid


class HelpScreen(ModalScreen[None]):
    """Keys of every screen and the symbols' legend."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "app.pop_screen", "Close"),
    ]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 80; max-width: 100%; height: auto; max-height: 100%; scrollbar-size-vertical: 1;
        border: round $primary; background: $surface; padding: 0 1;
    }
    HelpScreen #legend { color: $text-muted; margin-top: 1; }
    """

    def compose(self) -> ComposeResult:
        """The keys table and the legend in a bordered box."""
        with VerticalScroll() as box:
            box.border_title = "ralph-tui · keys"
            box.border_subtitle = "esc closes"
            yield Static(help_table())
            yield Static(LEGEND, id="legend")
