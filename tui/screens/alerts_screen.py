"""The alert history: every alert since start-up (completions, blocks, escalations, bad journal lines,
sources deleted), newest first; Enter shows the whole alert, ``o`` opens its session."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar, Final, NamedTuple

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Label

from tui import format as fmt
from tui.messages import OpenSession
from tui.screens.value_viewer import ValueViewer

KIND_COLOURS: Final = {"completed": fmt.GREEN, "blocked": fmt.AMBER, "guard": fmt.AMBER, "escalated": fmt.RED}
"""Alert kind -> colour (as the notification's severity)."""


class AlertEntry(NamedTuple):
    """One alert as it was raised: when (the monitor's clock), the session (a bad journal line's is
    its journal's name; empty for a source deleted), its kind and what happened."""

    at: datetime
    session_id: str
    kind: str
    message: str


def alert_cells(entry: AlertEntry) -> list[Text]:
    """The table cells of one alert: time (UTC), session, kind, what happened."""
    return [
        Text(entry.at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")),
        Text(entry.session_id or "-", no_wrap=True),
        Text(entry.kind, style=KIND_COLOURS.get(entry.kind, fmt.GREY)),
        Text(entry.message),
    ]


class AlertsScreen(Screen[None]):
    """Every alert raised since ralph-tui started, newest first."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,a", "back", "Back"),
        Binding("o", "open_session", "Open session"),
    ]

    DEFAULT_CSS = """
    AlertsScreen { layout: vertical; }
    AlertsScreen #alerts-title { height: 1; padding: 0 1; background: $boost; }
    AlertsScreen #alerts { height: 1fr; }
    AlertsScreen #alerts-empty { height: auto; padding: 1 2; color: $text-muted; display: none; }
    AlertsScreen #alerts-empty.shown { display: block; }
    """

    def __init__(self, history: list[AlertEntry]) -> None:
        super().__init__(id="alerts-screen")
        self.history = history
        """The app's alert history (oldest first), read again by ``refresh_alerts``."""
        self.shown: list[AlertEntry] = []
        """The alerts in table order (newest first)."""

    def compose(self) -> ComposeResult:
        """A title line, the table (or a note while there are none), the footer."""
        yield Label("Alerts · newest first · Enter reads one · o opens its session", id="alerts-title")
        table: DataTable[Any] = DataTable(id="alerts", cursor_type="row", zebra_stripes=False)
        yield table
        yield Label(
            "No alerts yet. A session that completes, blocks or escalates, a guard that trips and a bad "
            "journal line each raise one; they are kept here while ralph-tui runs.",
            id="alerts-empty",
        )
        yield Footer()

    def on_mount(self) -> None:
        """The columns, then the alerts raised so far."""
        table: DataTable[Any] = self.query_one("#alerts", DataTable)
        table.add_column("time (UTC)", key="time", width=19)
        table.add_column("session", key="session", width=24)
        table.add_column("kind", key="kind", width=9)
        table.add_column("what happened", key="what")
        self.refresh_alerts()
        table.focus()

    def refresh_alerts(self) -> None:
        """Show the app's alert history again (newest first), keeping the cursor on its alert."""
        table: DataTable[Any] = self.query_one("#alerts", DataTable)
        keep = self.shown[table.cursor_row] if self.shown and table.cursor_row > 0 else None
        self.shown = sorted(reversed(self.history), key=lambda e: e.at, reverse=True)
        table.clear()
        for entry in self.shown:
            table.add_row(*alert_cells(entry))
        if keep is not None and keep in self.shown:
            table.move_cursor(row=self.shown.index(keep))
        self.query_one("#alerts-empty").set_class(not self.shown, "shown")
        self.query_one("#alerts-title", Label).update(
            f"Alerts · {len(self.shown)} since start-up, newest first · Enter reads one · o opens its session"
        )

    def current(self) -> AlertEntry | None:
        """The alert under the cursor."""
        table: DataTable[Any] = self.query_one("#alerts", DataTable)
        row = table.cursor_row
        return self.shown[row] if 0 <= row < len(self.shown) else None

    @on(DataTable.RowSelected, "#alerts")
    def _selected(self, event: DataTable.RowSelected) -> None:
        entry = self.shown[event.cursor_row]
        when = entry.at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
        title = " · ".join(filter(None, (entry.kind, entry.session_id, f"{when} UTC")))
        self.app.push_screen(ValueViewer(title, entry.message))

    def action_open_session(self) -> None:
        """Open the session of the alert under the cursor."""
        entry = self.current()
        if entry is None:
            return
        if entry.session_id:
            self.post_message(OpenSession(entry.session_id))
        else:
            self.notify(f"this alert ({entry.kind}) belongs to no session", severity="warning", markup=False)

    def action_back(self) -> None:
        """Back to the previous screen."""
        self.app.pop_screen()
