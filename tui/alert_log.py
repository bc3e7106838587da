"""The alerts the feed's updates raise: a notification per completion, block, escalation or guard trip
(with the bell and the desktop notification ``--bell`` / ``--osc-notify`` ask for), one for bad journal
lines, one per journal rewritten; every one kept in the history the alerts screen shows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Final

from textual.app import App
from textual.notifications import SeverityLevel

from ledger.monitor import Update
from tui import format as fmt
from tui.attention import Attention
from tui.screens.alerts_screen import AlertEntry

MAX_TOASTS: Final = 4
SEVERITY: Final[dict[str, SeverityLevel]] = {
    "completed": "information",
    "blocked": "warning",
    "guard": "warning",
    "escalated": "error",
}
"""Alert kind -> notification severity."""


class AlertLog:
    """The app's alerts: raised as notifications, kept (tests and the alerts screen read them)."""

    def __init__(self, app: App[Any], now: Callable[[], datetime], attention: Attention) -> None:
        self._app = app
        self._now = now
        self.attention = attention  # the bell, the desktop notification, per alert (tui/attention.py)
        self.alerts: list[str] = []
        """Each alert's message, oldest first."""
        self.history: list[AlertEntry] = []
        """Every alert since start-up, oldest first (the alerts screen shows them newest first)."""
        self.bad_lines: list[str] = []
        self.resets: list[str] = []

    def raise_alerts(self, update: Update) -> None:
        """A notification per completion, block, escalation or guard trip; one for bad lines; one per
        journal truncated or rewritten."""
        notify = self._app.notify
        now = self._now()
        for n, alert in enumerate(update.alerts):
            message = " ".join(alert.message.split())
            self.alerts.append(message)
            self.history.append(AlertEntry(alert.ts or now, alert.session_id, alert.kind, message))
            if n < MAX_TOASTS:
                severity = SEVERITY.get(alert.kind, "information")
                notify(fmt.truncate(message, 240), title=alert.kind, severity=severity, markup=False)
                self.call_attention(alert.kind, message)
        if len(update.alerts) > MAX_TOASTS:
            hidden = len(update.alerts) - MAX_TOASTS
            notify(f"and {hidden} more alert(s)", title="alerts", severity="warning", markup=False)
        self.report_bad_lines(update.bad_lines)
        for path in update.reset:
            message = f"{path} was truncated or rewritten while watched: its session was read again"
            self.resets.append(message)
            notify(message, title="journal rewritten", severity="warning", markup=False)

    def call_attention(self, kind: str, message: str) -> None:
        """Ring the bell and send the desktop notification ``--bell`` / ``--osc-notify`` ask for, for one
        alert: written to the terminal through the driver, between its frames."""
        data = self.attention.sequence(kind, message)
        driver = self._app._driver
        if data and driver is not None:
            driver.write(data)
            driver.flush()

    def report_bad_lines(self, bad_lines: Sequence[str]) -> None:
        """One notification for journal lines that could not be read (the first, and how many more)."""
        if not bad_lines:
            return
        self.bad_lines += bad_lines
        now = self._now()
        self.history += [AlertEntry(now, "", "bad line", line) for line in bad_lines]
        first = bad_lines[0]
        more = f" (and {len(bad_lines) - 1} more)" if len(bad_lines) > 1 else ""
        self._app.notify(f"{first}{more}", title="bad journal line", severity="warning", markup=False)
