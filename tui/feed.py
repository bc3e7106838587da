"""The feed: open the monitor, ingest the backlog, watch the journals, refresh what changed.

``Feed`` is owned by the app (``RalphApp.feed``). Every read of the ledger happens in a worker that only
posts messages (tui/messages.py) to the app, whose handlers own the UI. Start-up ingests the backlog in
batches (``Opened``, ``Loaded`` per batch, ``Pending``, then ``LoadDone``); then a watchfiles worker
(``Watching``) marks the changed journals in the dirty set for one refresh worker at a time, which
ingests only the new bytes (``Monitor.refresh``) and posts what changed (``Refreshed``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from textual.app import App
from textual.worker import get_current_worker
from watchfiles import Change, awatch

from ledger import is_journal, plural
from ledger import one_line as first_line
from ledger.monitor import DatasetMonitor, Monitor
from tui.messages import Failed, LoadDone, Loaded, Opened, Pending, Refreshed, Watching

DEBOUNCE_MS: Final = 50
POLL_S: Final = 0.5
"""How often a dataset's sources are looked at (``--dataset``): one listing of its folders."""
FIRST_SCREEN: Final = 200
"""Sessions read first (the most recent), before all of them."""


class Feed:
    """The ledger as it grows: the monitor, the watcher, the dirty set and the refresh worker."""

    def __init__(
        self,
        app: App[Any],
        sources: Sequence[Path] = (),
        *,
        homes: Sequence[Path] = (),
        dataset: Path | None = None,
        clock: Callable[[], datetime],
        batch_bytes: int | None = None,
        watch: bool = True,
    ) -> None:
        self._app = app
        self.sources = list(sources)
        self.homes = list(homes)
        self.dataset = dataset
        """An exported Parquet dataset read instead of journals (``--dataset``): read-only."""
        self.clock = clock
        self.batch_bytes = batch_bytes
        """INSERT size of the backlog load; None: the ledger's (one INSERT, as ``ralph-ledger ingest``)."""
        self.watch_files = watch
        self.monitor: Monitor | None = None
        """Set by the app when ``Opened`` arrives (the UI thread's copy)."""
        self.loaded = False
        """The backlog is in (``LoadDone`` handled)."""
        self.live = False
        """The watcher has run (``Watching`` handled once)."""
        # the refresh worker's queue of changed files (single flight)
        self._dirty: set[Path] = set()
        self._dirty_all = False
        self._refreshing = False
        self._dirty_lock = threading.Lock()
        self._stop = threading.Event()
        self._watch_stop = asyncio.Event()

    def now(self) -> datetime:
        """The clock the ages are measured with (the monitor's)."""
        return self.monitor.now() if self.monitor is not None else self.clock()

    def what(self, n: int) -> str:
        """``n`` of what is ingested, for the progress bar: dataset sources or journals."""
        counted: str = plural(n, "dataset source" if self.dataset is not None else "journal")
        return counted

    def stop(self) -> None:
        """Stop the watcher and the refresh worker."""
        self._stop.set()
        self._watch_stop.set()

    def close(self) -> None:
        """Close the monitor (after the app has exited)."""
        self._stop.set()
        if self.monitor is not None:
            self.monitor.close()

    # -- opening and loading the backlog ----------------------------------------------------------
    def start(self) -> None:
        """Open the monitor and ingest the backlog (a thread worker)."""
        self._app.run_worker(
            self._open_and_load,
            name="open_and_load",
            group="ingest",
            thread=True,
            exclusive=True,
            exit_on_error=False,
        )

    def _open_and_load(self) -> None:
        """Open the monitor and ingest the backlog in batches, posting each batch's sessions."""
        post = self._app.post_message
        worker = get_current_worker()
        try:
            monitor: Monitor
            if self.dataset is not None:
                monitor = DatasetMonitor(self.dataset, now=self.clock)
            else:
                monitor = Monitor(self.sources, homes=self.homes, now=self.clock)
            post(Opened(monitor))
            # the first screen: the latest sessions and the totals, then every session held
            first = monitor.recent_sessions(FIRST_SCREEN)
            if len(first) < FIRST_SCREEN:
                post(Loaded(None, first))
            else:
                post(Loaded(None, first, monitor.fleet()))
                post(Loaded(None, monitor.sessions()))
            post(Pending(monitor.pending()))
            sized = {} if self.batch_bytes is None else {"batch_bytes": self.batch_bytes}
            for progress in monitor.load(**sized):
                post(Loaded(progress, monitor.sessions(progress.sessions)))
                if worker.is_cancelled:
                    return
            bad = monitor.bad_lines()
        except Exception as exc:
            names = ", ".join(map(str, [*self.sources, *self.homes, *filter(None, [self.dataset])]))
            post(Failed(f"cannot open {names}: {first_line(exc)}"))
            return
        post(LoadDone(bad))

    # -- live tail ------------------------------------------------------------------------------------
    def watch(self) -> None:
        """Follow the journals (or poll a dataset's sources) in a worker that posts ``Watching``."""
        run = self._poll_dataset if self.dataset is not None else self._watch_journals
        self._app.run_worker(run(), name=run.__name__, group="watch", exclusive=True, exit_on_error=False)

    async def _watch_journals(self) -> None:
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
            self._app.post_message(Watching())  # (again after a restart: read what came meanwhile)
            try:
                while monitor.watch_roots() == roots:
                    batch = await pending
                    self.mark_dirty({Path(path) for _, path in batch if is_journal(path)})
                    pending = asyncio.ensure_future(anext(changes))
            except StopAsyncIteration:
                return
            finally:
                pending.cancel()

    async def _poll_dataset(self) -> None:
        """Look at a dataset's sources every ``POLL_S``: the refresh worker reads again those whose
        files changed (a partition swapped in by rename included)."""
        self._app.post_message(Watching())
        while not self._watch_stop.is_set():
            try:
                await asyncio.wait_for(self._watch_stop.wait(), POLL_S)
            except TimeoutError:
                self.mark_dirty(None)

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
            self._app.run_worker(
                self._refresh,
                name="refresh_journals",
                group="refresh",
                thread=True,
                exclusive=True,
                exit_on_error=False,
            )

    def _refresh(self) -> None:
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
                if update.news:
                    rows = monitor.sessions(update.sessions) if update.sessions else []
                    self._app.post_message(Refreshed(update, rows))
        except Exception as exc:
            with self._dirty_lock:
                self._refreshing = False
            self._app.post_message(Failed(f"refresh failed: {first_line(exc)}"))
