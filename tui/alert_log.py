"""The alerts the feed's updates raise: a pop-up per completion, block or escalation (with the bell and
the desktop notification ``--bell`` / ``--osc-notify`` ask for), one for bad journal lines, one per
journal rewritten, one per watched source deleted; every one kept in the history the alerts screen
shows.

The alert pop-ups stay small, in the bottom right corner: one line each, at most ``visible()`` at once
(fewer on a short terminal); while they are up, further alerts only count in one ``+k more`` line
(``a`` shows them all). A replay of the bundled samples raises about 30 alerts in a few seconds: they
never cover the table (docs/ralph-tui.md, "Alerts")."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from textual.app import App
from textual.notifications import Notification, Notify, SeverityLevel

from ledger import is_journal, plural
from ledger.monitor import Alert, Update
from tui import format as fmt
from tui.attention import Attention
from tui.screens.alerts_screen import AlertEntry

MAX_POPUPS: Final = 3
"""Alert pop-ups shown at once on a terminal of ``ROWS_PER_POPUP * MAX_POPUPS`` rows or more."""
ROWS_PER_POPUP: Final = 8
"""Terminal rows per alert pop-up: a 10-row terminal shows one (and the ``+k more`` line)."""
POPUP_S: Final = 5.0
"""How long an alert pop-up stays (seconds)."""
SEVERITY: Final[dict[str, SeverityLevel]] = {
    "completed": "information",
    "blocked": "warning",
    "escalated": "error",
}
"""Alert kind -> notification severity."""
SYMBOLS: Final = {"completed": fmt.STATUS["complete"][0], "blocked": fmt.STATUS["blocked"][0]}
"""Alert kind -> the status symbol its pop-up starts with (escalated: ``▲``)."""
_BAD_LINE: Final = re.compile(r"(?P<path>.+?):\d+: ")


def bad_line_session(line: str) -> str:
    """The session a bad journal line (``path:line: reason``) belongs to: its journal's name (a
    journal is named for its session); ``""`` when the line names no journal."""
    found = _BAD_LINE.match(line)
    path = found["path"] if found else ""
    return Path(path).stem if path and is_journal(path) else ""


class AlertLog:
    """The app's alerts: raised as pop-ups, kept (tests and the alerts screen read them)."""

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
        self.gone: list[str] = []
        """What each deleted source's line said."""
        self.popups: list[Notification] = []
        """The alert pop-ups raised (those not expired are on screen)."""
        self.more: Notification | None = None
        """The ``+k more`` line, while it is up."""
        self.hidden = 0
        """Alerts counted in the ``+k more`` line since it went up."""

    def visible(self) -> int:
        """How many alert pop-ups may be up at once: fewer on a short terminal."""
        return max(1, min(MAX_POPUPS, self._app.size.height // ROWS_PER_POPUP))

    def raise_alerts(self, update: Update) -> None:
        """A pop-up per completion, block or escalation (as many as fit, then one ``+k more`` line);
        one for bad lines; one per journal truncated or rewritten; one per source deleted."""
        now = self._now()
        for alert in update.alerts:
            message = " ".join(alert.message.split())
            self.alerts.append(message)
            self.history.append(AlertEntry(alert.ts or now, alert.session_id, alert.kind, message))
            self.pop_up(alert, " ".join((alert.short or alert.message).split()))
        self.report_bad_lines(update.bad_lines)
        notify = self._app.notify
        for path in update.reset:
            message = f"{path} was truncated or rewritten while watched: its session was read again"
            self.resets.append(message)
            notify(message, title="journal rewritten", severity="warning", markup=False)
        for path, sessions in update.vanished.items():
            message = f"{path} was deleted: {plural(len(sessions), 'session')} gone from the list"
            self.gone.append(message)
            self.history.append(AlertEntry(now, "", "deleted", message))
            notify(message, title="source deleted", severity="warning", markup=False)
        for path in update.returned:
            notify(f"{path} is back: watching it again", title="source", markup=False)

    def pop_up(self, alert: Alert, text: str) -> None:
        """Show one alert as a one-line pop-up saying ``text`` (its symbol first), or count it in the
        ``+k more`` line when as many as fit are up; only a pop-up shown calls for attention (bell,
        desktop notification, which say the alert's whole message)."""
        self.popups = [p for p in self.popups if not p.has_expired]
        if len(self.popups) < self.visible():
            symbol = SYMBOLS.get(alert.kind, fmt.STATUS["escalated"][0])
            self.popups.append(self._show(self.line(f"{symbol} {text}"), SEVERITY[alert.kind]))
            self.call_attention(alert.kind, " ".join(alert.message.split()))
            return
        if self.more is None or self.more.has_expired:
            self.hidden = 0
        else:
            self._app._unnotify(self.more)
        self.hidden += 1
        more = f"+{self.hidden} more · a: alert history"
        self.more = self._show(more if len(more) <= self.room() else f"+{self.hidden} more (a)", "warning")

    def room(self) -> int:
        """The characters of the one line a pop-up has (Textual's toast: 60 columns at most, half the
        screen's width, less its border and padding)."""
        return min(60, self._app.size.width // 2) - 4

    def line(self, text: str) -> str:
        """``text`` cut to the one line of a pop-up."""
        return fmt.truncate(text, self.room())

    def _show(self, text: str, severity: SeverityLevel) -> Notification:
        """Raise one title-less pop-up at once; the notification, to take it back or see it expire.
        (``App.notify`` raises it later, by a message: taking it back before then would not work,
        and Textual has no public way to take one notification back.)"""
        notification = Notification(text, "", severity, POPUP_S, markup=False)
        self._app._on_notify(Notify(notification))
        return notification

    def call_attention(self, kind: str, message: str) -> None:
        """Ring the bell and send the desktop notification ``--bell`` / ``--osc-notify`` ask for, for one
        alert: written to the terminal through the driver, between its frames."""
        data = self.attention.sequence(kind, message)
        driver = self._app._driver
        if data and driver is not None:
            driver.write(data)
            driver.flush()

    def report_bad_lines(self, bad_lines: Sequence[str]) -> None:
        """One notification for journal lines that could not be read (the first, and how many more);
        each kept in the history with its session (its journal's name)."""
        if not bad_lines:
            return
        self.bad_lines += bad_lines
        now = self._now()
        self.history += [AlertEntry(now, bad_line_session(line), "bad line", line) for line in bad_lines]
        first = bad_lines[0]
        more = f" (and {len(bad_lines) - 1} more)" if len(bad_lines) > 1 else ""
        self._app.notify(f"{first}{more}", title="bad journal line", severity="warning", markup=False)
