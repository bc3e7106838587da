"""The live tail: open the monitor, ingest the backlog, watch the journals, refresh what changed.

``LiveJournals`` is a mixin of ``RalphApp`` (tui/app.py), which sets the state declared here in its
``__init__``. Every read of the ledger happens in a thread worker that only posts messages (tui/messages.py);
the handlers here own the UI. Start-up ingests the backlog in batches (a progress bar, the table filling
as batches land); then a watchfiles worker marks the changed journals for one refresh worker at a time,
which ingests only the new bytes (``Monitor.refresh``) and posts what changed.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final

from textual import work
from textual.notifications import SeverityLevel
from textual.worker import get_current_worker
from watchfiles import Change, awatch

from ledger import is_journal
from ledger import one_line as first_line
from ledger.monitor import DatasetMonitor, Monitor, Update
from tui import format as fmt
from tui.attention import Attention
from tui.messages import Failed, LoadDone, Loaded, Opened, Pending, Refreshed, Watching
from tui.screens.alerts import AlertEntry, AlertsScreen
from tui.screens.fleet import SessionsScreen
from tui.screens.session_detail import SessionScreen
from tui.welcome import welcome_text

if TYPE_CHECKING:
    from textual.app import App
    from textual.worker import Worker

    _AppBase = App[None]
else:
    _AppBase = object

BATCH_BYTES: Final = 8 << 20
DEBOUNCE_MS: Final = 50
POLL_S: Final = 0.5
"""How often a dataset's sources are looked at (``--dataset``): one listing of its folders."""
FIRST_SCREEN: Final = 200
"""Sessions read first (the most recent), before all of them."""
MAX_TOASTS: Final = 4
SEVERITY: Final[dict[str, SeverityLevel]] = {
    "completed": "information",
    "blocked": "warning",
    "guard": "warning",
    "escalated": "error",
}
"""Alert kind -> notification severity."""


class LiveJournals(_AppBase):
    """Load the backlog, then follow the journals as they grow; raise alerts for what happens."""

    sources: list[Path]
    homes: list[Path]
    dataset: Path | None
    monitor: Monitor | None
    batch_bytes: int
    watch_files: bool
    replaying: bool
    sessions_screen: SessionsScreen
    loaded: bool
    live: bool
    updates: int
    alerts: list[str]
    alert_history: list[AlertEntry]
    attention: Attention
    errors: list[str]
    bad_lines: list[str]
    resets: list[str]
    _clock: Callable[[], datetime]
    _dirty: set[Path]
    _dirty_all: bool
    _refreshing: bool
    _dirty_lock: threading.Lock
    _stop: threading.Event
    _watch_stop: asyncio.Event

    if TYPE_CHECKING:  # defined by RalphApp and by Replaying (tui/replaying.py)

        def now(self) -> datetime:
            """The clock the ages are measured with."""
            ...

        def run_replay(self) -> Worker[None]:
            """Start replaying the recordings into the watched directory."""
            ...

    # -- opening and loading the backlog ----------------------------------------------------------
    @work(thread=True, exclusive=True, group="ingest", exit_on_error=False)
    def open_and_load(self) -> None:
        """Open the monitor and ingest the backlog in batches, posting each batch's sessions."""
        worker = get_current_worker()
        try:
            monitor: Monitor
            if self.dataset is not None:
                monitor = DatasetMonitor(self.dataset, now=self._clock)
            else:
                monitor = Monitor(self.sources, homes=self.homes, now=self._clock)
            self.post_message(Opened(monitor))
            # the first screen: the latest sessions and the totals, then every session held
            first = monitor.recent_sessions(FIRST_SCREEN)
            if len(first) < FIRST_SCREEN:
                self.post_message(Loaded(None, first))
            else:
                self.post_message(Loaded(None, first, monitor.fleet()))
                self.post_message(Loaded(None, monitor.sessions()))
            self.post_message(Pending(monitor.pending()))
            for progress in monitor.load(batch_bytes=self.batch_bytes):
                self.post_message(Loaded(progress, monitor.sessions(progress.sessions)))
                if worker.is_cancelled:
                    return
            bad = monitor.bad_lines()
        except Exception as exc:
            names = ", ".join(map(str, [*self.sources, *self.homes, *filter(None, [self.dataset])]))
            self.post_message(Failed(f"cannot open {names}: {first_line(exc)}"))
            return
        self.post_message(LoadDone(bad))

    def on_opened(self, message: Opened) -> None:
        """Keep the monitor; say that the sessions are being read."""
        self.monitor = message.monitor
        self.sessions_screen.show_progress("reading sessions…")

    def on_pending(self, message: Pending) -> None:
        """Say how much is to ingest (the progress bar), or hide the bar."""
        p = message.pending
        what = "dataset source(s)" if self.dataset is not None else "journal(s)"
        label = f"ingesting {p.files_total - p.files_done} {what}, {p.bytes_total:,} bytes…"
        self.sessions_screen.show_progress(label if p.bytes_total else "", 0, p.bytes_total)

    def on_loaded(self, message: Loaded) -> None:
        """A batch landed: update the table and the progress bar."""
        p = message.progress
        if p is not None:
            what = "dataset source(s)" if self.dataset is not None else "journal(s)"
            label = f"ingested {p.files_done}/{p.files_total} {what}, {p.events:,} events"
            self.sessions_screen.show_progress(label, p.bytes_done, p.bytes_total)
        self.sessions_screen.apply(message.rows, message.fleet)

    def on_load_done(self, message: LoadDone) -> None:
        """The backlog is in: hide the progress bar, report its bad lines, show the empty state if
        there is no session, start watching (then replaying)."""
        self.loaded = True
        self.sessions_screen.show_progress("")
        self.report_bad_lines(message.bad_lines)
        if self.monitor is not None and not self.replaying and self.dataset is None:
            self.sessions_screen.show_welcome(welcome_text(self.monitor))
        if self.watch_files and self.dataset is not None:
            self.poll_dataset()
        elif self.watch_files:
            self.watch_journals()
        elif self.replaying:
            self.run_replay()

    def on_failed(self, message: Failed) -> None:
        """Show the error (in the fleet line and as a notification)."""
        self.errors.append(message.error)
        self.sessions_screen.show_progress("")
        self.sessions_screen.note(message.error)
        self.notify(message.error, title="error", severity="error", markup=False)

    # -- live tail ------------------------------------------------------------------------------------
    @work(exclusive=True, group="watch", exit_on_error=False)
    async def watch_journals(self) -> None:
        """Watch the journal directories; each batch of changes marks files for the refresh worker.
        A directory that does not exist yet (a home before its first loop) is waited for by watching
        its nearest existing ancestor; once it appears the watcher starts again on it."""
        monitor = self.monitor
        assert monitor is not None

        def wanted(change: Change, path: str) -> bool:
            return is_journal(path) or monitor.awaited(Path(path))

        while not self._watch_stop.is_set():
            roots = monitor.watch_roots()
            changes = awatch(
                *roots,
                watch_filter=wanted,
                step=5,
                debounce=DEBOUNCE_MS,
                stop_event=self._watch_stop,
                recursive=False,
            ).__aiter__()
            pending = asyncio.ensure_future(anext(changes))
            for _ in range(3):  # awatch creates its (synchronous) watcher before its first await
                await asyncio.sleep(0)
            self.post_message(Watching())  # (again after a restart: read what came meanwhile)
            try:
                while monitor.watch_roots() == roots:
                    batch = await pending
                    self.mark_dirty({Path(path) for _, path in batch if is_journal(path)})
                    pending = asyncio.ensure_future(anext(changes))
            except StopAsyncIteration:
                return
            finally:
                pending.cancel()

    @work(exclusive=True, group="watch", exit_on_error=False)
    async def poll_dataset(self) -> None:
        """Look at a dataset's sources every ``POLL_S``: the refresh worker reads again those whose
        files changed (a partition swapped in by rename included)."""
        self.post_message(Watching())
        while not self._watch_stop.is_set():
            try:
                await asyncio.wait_for(self._watch_stop.wait(), POLL_S)
            except TimeoutError:
                self.mark_dirty(None)

    def on_watching(self, message: Watching) -> None:
        """Catch up with anything appended while loading (or while the watcher started again), then
        follow; a replay starts the first time."""
        self.mark_dirty(None)
        if self.live:
            return
        self.live = True
        if self.replaying:
            self.run_replay()

    def mark_dirty(self, paths: set[Path] | None) -> None:
        """Queue changed journals (``None``: all) and start the refresh worker unless it runs."""
        with self._dirty_lock:
            if paths is None:
                self._dirty_all = True
            else:
                self._dirty |= paths
            start = not self._refreshing
            self._refreshing = True
        if start:
            self.refresh_journals()

    @work(thread=True, exclusive=True, group="refresh", exit_on_error=False)
    def refresh_journals(self) -> None:
        """Ingest what was appended to the queued journals until the queue is empty."""
        monitor = self.monitor
        try:
            while True:
                with self._dirty_lock:
                    if monitor is None or self._stop.is_set() or not (self._dirty or self._dirty_all):
                        self._refreshing = False
                        return
                    paths = None if self._dirty_all else sorted(self._dirty)
                    self._dirty, self._dirty_all = set(), False
                update = monitor.refresh(paths)
                if update.sessions or update.bad_lines:
                    rows = monitor.sessions(update.sessions) if update.sessions else []
                    self.post_message(Refreshed(update, rows))
        except Exception as exc:
            with self._dirty_lock:
                self._refreshing = False
            self.post_message(Failed(f"refresh failed: {first_line(exc)}"))

    def on_refreshed(self, message: Refreshed) -> None:
        """Update the changed rows, raise the alerts, and follow an open session."""
        self.updates += 1
        update = message.update
        self.sessions_screen.apply(message.rows)
        if update.reset:  # a journal emptied has no session any more
            self.sessions_screen.drop(set(update.sessions) - {r.session_id for r in message.rows})
        self.raise_alerts(update)
        changed = set(update.sessions)
        for screen in self.screen_stack:
            if isinstance(screen, SessionScreen) and screen.session_id in changed:
                screen.reload()

    def raise_alerts(self, update: Update) -> None:
        """A notification per completion, block, escalation or guard trip; one for bad lines."""
        now = self.now()
        for n, alert in enumerate(update.alerts):
            message = " ".join(alert.message.split())
            self.alerts.append(message)
            self.alert_history.append(AlertEntry(alert.ts or now, alert.session_id, alert.kind, message))
            if n < MAX_TOASTS:
                severity = SEVERITY.get(alert.kind, "information")
                self.notify(fmt.truncate(message, 240), title=alert.kind, severity=severity, markup=False)
                self.call_attention(alert.kind, message)
        if len(update.alerts) > MAX_TOASTS:
            hidden = len(update.alerts) - MAX_TOASTS
            self.notify(f"and {hidden} more alert(s)", title="alerts", severity="warning", markup=False)
        self.report_bad_lines(update.bad_lines)
        if update.alerts or update.bad_lines:
            for screen in self.screen_stack:
                if isinstance(screen, AlertsScreen):
                    screen.refresh_alerts()
        for path in update.reset:
            message = f"{path} was truncated or rewritten while watched: its session was read again"
            self.resets.append(message)
            self.notify(message, title="journal rewritten", severity="warning", markup=False)

    def call_attention(self, kind: str, message: str) -> None:
        """Ring the bell and send the desktop notification ``--bell`` / ``--osc-notify`` ask for, for one
        alert: written to the terminal through the driver, between its frames."""
        data = self.attention.sequence(kind, message)
        if data and self._driver is not None:
            self._driver.write(data)
            self._driver.flush()

    def report_bad_lines(self, bad_lines: Sequence[str]) -> None:
        """One notification for journal lines that could not be read (the first, and how many more)."""
        if not bad_lines:
            return
        self.bad_lines += bad_lines
        now = self.now()
        self.alert_history += [AlertEntry(now, "", "bad line", line) for line in bad_lines]
        first = bad_lines[0]
        more = f" (and {len(bad_lines) - 1} more)" if len(bad_lines) > 1 else ""
        self.notify(f"{first}{more}", title="bad journal line", severity="warning", markup=False)
