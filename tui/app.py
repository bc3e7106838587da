"""``ralph-tui``: watch ralph-ledger sessions live, or replay recorded ones as if live.

Data flow (the style of harlequin and toolong): every read of the ledger happens in a thread worker
that only posts messages; the message handlers own the UI. Start-up opens the monitor and ingests the
backlog in batches (a progress bar, the table filling as batches land), then a watchfiles worker
watches the journal directories and hands the changed files to one refresh worker at a time, which
ingests only the new bytes (``Monitor.refresh``) and posts what changed.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar, Final

from platformdirs import user_downloads_path
from rich.text import Text
from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.filter import LineFilter
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.worker import get_current_worker
from watchfiles import Change, awatch

from ledger import is_journal, journals_in, ready
from ledger import one_line as first_line
from ledger.monitor import Monitor, Update, default_home_here, resolve_home
from ledger.monitor.replay import replay
from tui import format as fmt
from tui.colours import ThemeColours
from tui.commands import MAX_SPEED, MIN_SPEED, RalphCommands, faster, slower, speed_label, valid_speed
from tui.messages import (
    Failed,
    LoadDone,
    Loaded,
    Opened,
    OpenSession,
    Pending,
    Refreshed,
    ReplayProgress,
    Watching,
)
from tui.screens.alerts import AlertEntry, AlertsScreen
from tui.screens.fleet import SessionsScreen
from tui.screens.help import HelpScreen
from tui.screens.query import SqlScreen
from tui.screens.session_detail import SessionScreen

DEFAULT_SPEED: Final = 20.0
MAX_GAP_S: Final = 2.0
BATCH_BYTES: Final = 8 << 20
DEBOUNCE_MS: Final = 50
SWITCH_INTERVAL_S: Final = 0.0005
FIRST_SCREEN: Final = 200
"""Sessions read first (the most recent), before all of them."""
MAX_TOASTS: Final = 4
DARK: Final = "textual-dark"
LIGHT: Final = "textual-light"
SEVERITY: Final[dict[str, SeverityLevel]] = {
    "completed": "information",
    "blocked": "warning",
    "guard": "warning",
    "escalated": "error",
}
"""Alert kind -> notification severity."""


def utc_now() -> datetime:
    """The wall clock, in UTC."""
    return datetime.now(UTC)


def welcome_text(monitor: Monitor, cwd: Path | None = None) -> Text:
    """The empty state: what is watched (and whether it exists yet), and how to start a loop there."""
    out = Text()
    out.append("No sessions yet.\n\n", style="bold")
    for path in monitor.watch_paths:
        out.append("Watching ")
        out.append(str(path), style="bold")
        home = next((h for h in monitor.homes if path == h / "journals"), None)
        if home is not None and not home.exists():
            out.append("  (the home does not exist yet: ralph-tui creates nothing)", style=fmt.GREY)
        elif not path.is_dir():
            out.append("  (does not exist yet)", style=fmt.GREY)
        out.append("\n")
    out.append("A session shows here within a second of its journal appearing.\n\n")
    if monitor.homes:
        home = monitor.homes[0]
        here = {default_home_here(cwd), default_home_here(cwd).resolve()}
        option = "" if home in here else f" --home {shlex.quote(str(home))}"
        out.append("Start a loop (in another terminal, in the project):\n")
        out.append(f"  ralph-ledger{option} run -- AGENT_CMD ...", style="bold")
        out.append("   the loop runner; the task on stdin\n", style=fmt.GREY)
        out.append(f'  ralph-ledger{option} loop start "TASK"', style="bold")
        out.append("   in Claude Code (after ralph-ledger init claude-code)\n", style=fmt.GREY)
    else:
        out.append("Journals (*.jsonl) written to a watched directory show here.\n")
    out.append("\n? help · q quit", style=fmt.GREY)
    return out


def screenshot_folder() -> Path:
    """Where a screenshot is saved: the user's downloads folder when it exists, else the current
    directory (Textual's default folder may not exist, and then the screenshot is lost)."""
    downloads = user_downloads_path()
    return downloads if downloads.is_dir() else Path.cwd()


def journal_files(paths: Sequence[Path]) -> list[Path]:
    """The journals named: a directory stands for its ``*.jsonl`` files."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += journals_in(path)
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such journal or directory")
    return files


def count_lines(files: Sequence[Path]) -> int:
    """The lines a replay of ``files`` writes (a torn last line counts as one)."""
    total = 0
    for f in files:
        data = f.read_bytes()
        total += data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1)
    return total


class RalphApp(App[None]):
    """The ralph-ledger monitor: sessions, one session, the SQL console, alerts."""

    TITLE = "ralph-tui"
    COMMANDS: ClassVar = App.COMMANDS | {RalphCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False),
        Binding("s", "sql", "SQL"),
        Binding("question_mark", "help", "Help"),
        Binding("t", "toggle_theme", "Theme"),
        Binding("a", "alerts", "Alerts"),
        Binding("plus", "faster", "Faster"),
        Binding("minus", "slower", "Slower"),
        Binding("p", "pause", "Pause"),
    ]
    CSS = """
    /* the replay's / backlog's progress: the bar shrinks, the percentage always shows */
    #loading-label { max-width: 70%; text-wrap: nowrap; text-overflow: ellipsis; }
    #loading ProgressBar { min-width: 10; }
    #loading ProgressBar Bar { width: 1fr; min-width: 3; }
    """

    def __init__(
        self,
        sources: Sequence[Path] = (),
        *,
        homes: Sequence[Path] = (),
        replay_files: Sequence[Path] = (),
        replay_dir: Path | None = None,
        speed: float = DEFAULT_SPEED,
        sleep: Callable[[float], object] | None = None,
        now: Callable[[], datetime] | None = None,
        batch_bytes: int = BATCH_BYTES,
        watch: bool = True,
    ) -> None:
        super().__init__()
        self.replay_files = list(replay_files)
        self.replaying = bool(self.replay_files)
        self._own_replay_dir = False
        if self.replaying:
            if replay_dir is None:
                replay_dir = Path(tempfile.mkdtemp(prefix="ralph-tui-replay-"))
                self._own_replay_dir = True
            replay_dir.mkdir(parents=True, exist_ok=True)
            sources, homes = [replay_dir], ()
        if not sources and not homes:
            raise ValueError("ralph-tui needs a ledger home, a journal directory or journals to replay")
        self.sources = list(sources)
        self.homes = list(homes)
        self.replay_dir = replay_dir
        self.speed = speed
        self._sleep = sleep
        self._replayed_at: tuple[float, float] | None = None  # (recorded time, monotonic) of the last line
        self._clock = now or (self.replay_clock if self.replaying else utc_now)
        self.batch_bytes = batch_bytes
        self.watch_files = watch
        self.monitor: Monitor | None = None
        self.sessions_screen = SessionsScreen()
        self.sql_screen = SqlScreen()
        self.theme_colours = ThemeColours(self)
        # state the handlers keep (tests read it)
        self.loaded = False
        self.live = False
        self.replay_lines = 0
        self.replay_total = 0
        self.replay_done = False
        self.alerts: list[str] = []
        self.alert_history: list[AlertEntry] = []
        """Every alert since start-up, oldest first (the alerts screen shows them newest first)."""
        self.paused = False
        self._resume = threading.Event()
        self._resume.set()
        self._paused_at: float | None = None
        self.errors: list[str] = []
        self.bad_lines: list[str] = []
        self.resets: list[str] = []
        self.screenshots: list[Path] = []
        self.updates = 0
        # the refresh worker's queue of changed files (single flight)
        self._dirty: set[Path] = set()
        self._dirty_all = False
        self._refreshing = False
        self._dirty_lock = threading.Lock()
        self._stop = threading.Event()
        self._watch_stop = asyncio.Event()

    # -- screens -----------------------------------------------------------------------------------
    def get_line_filters(self) -> Sequence[LineFilter]:
        """Textual's filters, then the status colours in the theme's colours (readable everywhere)."""
        return [*super().get_line_filters(), self.theme_colours]

    def get_default_screen(self) -> Screen[None]:
        """The sessions screen is the bottom of the stack."""
        return self.sessions_screen

    def on_mount(self) -> None:
        """Install the SQL console and start opening the sources."""
        # The workers make many short calls that release the GIL (DuckDB, file system); each takes it
        # back only after the switch interval if the UI thread is busy (5 ms by default): a refresh
        # measured 50 ms in the app at 5 ms, 26 ms at 0.2 ms, 22 ms in a process of its own.
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
        self.install_screen(self.sql_screen, "sql")
        self.sessions_screen.show_progress("opening…")
        self.open_and_load()

    def on_unmount(self) -> None:
        """Stop the replay and the watcher."""
        self._stop.set()
        self._watch_stop.set()

    def cleanup(self) -> None:
        """Close the monitor and remove a replay's temporary journals (after the app has exited)."""
        self._stop.set()
        if self.monitor is not None:
            self.monitor.close()
        if self._own_replay_dir and self.replay_dir is not None:
            shutil.rmtree(self.replay_dir, ignore_errors=True)

    def now(self) -> datetime:
        """The clock the ages are measured with (the monitor's)."""
        return self.monitor.now() if self.monitor is not None else self._clock()

    def replay_clock(self) -> datetime:
        """A replay's clock: the recorded time of the last line replayed, running on from there
        (so ages read as they did while the loops ran); the wall clock before the first line."""
        at = self._replayed_at
        if at is None:
            return utc_now()
        recorded, written = at
        now = self._paused_at if self._paused_at is not None else time.monotonic()
        return datetime.fromtimestamp(recorded + now - written, UTC)

    def _replayed(self, recorded: float) -> None:
        """Called by the replay before each line: waits while paused, then notes the line's time."""
        while not self._resume.wait(0.1):
            if self._stop.is_set():
                return
        self._replayed_at = (recorded, time.monotonic())

    def session_ids(self) -> list[str]:
        """Every session known, in the sessions table's order first."""
        shown = self.sessions_screen.visible_ids()
        rest = sorted(set(self.sessions_screen.rows) - set(shown))
        return shown + rest

    def open_session(self, session_id: str) -> None:
        """Show one session (replacing a session screen already shown)."""
        screen = SessionScreen(session_id)
        if isinstance(self.screen, SessionScreen):
            self.switch_screen(screen)
        else:
            self.push_screen(screen)

    def on_open_session(self, message: OpenSession) -> None:
        """A screen asked for a session: show it."""
        self.open_session(message.session_id)

    def open_example(self, name: str) -> None:
        """Open the SQL console with a saved example query and run it."""
        self.action_sql()
        self.sql_screen.load_example(name)

    # -- actions -------------------------------------------------------------------------------------
    def action_sql(self) -> None:
        """Open the SQL console (the focus in its editor)."""
        self.sql_screen.opening()
        if self.screen is self.sql_screen:
            return
        if self.sql_screen in self.screen_stack:
            while self.screen is not self.sql_screen:
                self.pop_screen()
            return
        self.push_screen("sql")

    def action_help(self) -> None:
        """Show (or close) the help screen."""
        if isinstance(self.screen, HelpScreen):
            self.pop_screen()
        else:
            self.push_screen(HelpScreen())

    def action_toggle_theme(self) -> None:
        """Switch between the light and the dark theme."""
        self.theme = LIGHT if self.current_theme.dark else DARK

    def action_alerts(self) -> None:
        """Show (or close) the alert history."""
        if isinstance(self.screen, AlertsScreen):
            self.pop_screen()
        else:
            self.push_screen(AlertsScreen())

    def action_faster(self) -> None:
        """Replay twice as fast (up to no waiting at all)."""
        self.set_speed(faster(self.speed))

    def action_slower(self) -> None:
        """Replay half as fast (down to the slowest speed)."""
        self.set_speed(slower(self.speed))

    def set_speed(self, speed: float) -> None:
        """The replay's speed (0: no waiting), kept within the speeds a replay can play at."""
        self.speed = 0.0 if speed <= 0 else min(MAX_SPEED, max(MIN_SPEED, speed))
        self.show_replay()

    def action_pause(self) -> None:
        """Pause the replay (no line is written, the clock stands still), or resume it."""
        if self.replay_done:
            return
        self.paused = not self.paused
        if self.paused:
            self._paused_at = time.monotonic()
            self._resume.clear()
        else:
            if self._paused_at is not None and self._replayed_at is not None:
                recorded, written = self._replayed_at
                self._replayed_at = (recorded, written + time.monotonic() - self._paused_at)
            self._paused_at = None
            self._resume.set()
        self.show_replay()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Replay keys only while replaying."""
        if action in ("faster", "slower", "pause"):
            return self.replaying
        return True

    # -- opening and loading the backlog ----------------------------------------------------------
    @work(thread=True, exclusive=True, group="ingest", exit_on_error=False)
    def open_and_load(self) -> None:
        """Open the monitor and ingest the backlog in batches, posting each batch's sessions."""
        worker = get_current_worker()
        try:
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
            names = ", ".join(map(str, [*self.sources, *self.homes]))
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
        label = f"ingesting {p.files_total - p.files_done} journal(s), {p.bytes_total:,} bytes…"
        self.sessions_screen.show_progress(label if p.bytes_total else "", 0, p.bytes_total)

    def on_loaded(self, message: Loaded) -> None:
        """A batch landed: update the table and the progress bar."""
        p = message.progress
        if p is not None:
            label = f"ingested {p.files_done}/{p.files_total} journal(s), {p.events:,} events"
            self.sessions_screen.show_progress(label, p.bytes_done, p.bytes_total)
        self.sessions_screen.apply(message.rows, message.fleet)

    def on_load_done(self, message: LoadDone) -> None:
        """The backlog is in: hide the progress bar, report its bad lines, show the empty state if
        there is no session, start watching (then replaying)."""
        self.loaded = True
        self.sessions_screen.show_progress("")
        self.report_bad_lines(message.bad_lines)
        if self.monitor is not None and not self.replaying:
            self.sessions_screen.show_welcome(welcome_text(self.monitor))
        if self.watch_files:
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

    def deliver_screenshot(
        self, filename: str | None = None, path: str | None = None, time_format: str | None = None
    ) -> str | None:
        """Save an SVG screenshot to a folder that exists (``screenshot_folder``) and say where."""
        folder = Path(path) if path else screenshot_folder()
        try:
            saved = Path(self.save_screenshot(filename, str(folder), time_format))
        except OSError as exc:
            error = f"cannot save a screenshot in {folder}: {exc.strerror}"
            self.notify(error, title="screenshot", severity="error", markup=False)
            return None
        self.screenshots.append(saved)
        self.notify(f"saved {saved}", title="screenshot", markup=False)
        return str(saved)

    # -- replay ------------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="replay", exit_on_error=False)
    def run_replay(self) -> None:
        """Copy the recordings into the watched directory as if the loops were running now."""
        assert self.replay_dir is not None
        total = count_lines(self.replay_files)
        self.post_message(ReplayProgress(0, total, False))
        written, last_post = 0, 0.0
        try:
            for written in replay(
                self.replay_files,
                self.replay_dir,
                speed=1.0,  # the gaps are scaled by the current speed in _replay_sleep
                max_gap_s=float("inf"),
                sleep=self._replay_sleep,
                stop=self._stop,
                on_line=self._replayed,
            ):
                if time.monotonic() - last_post > 0.1:
                    last_post = time.monotonic()
                    self.post_message(ReplayProgress(written, total, False))
        except Exception as exc:
            self.post_message(Failed(f"replay failed: {first_line(exc)}"))
        self.post_message(ReplayProgress(written, total, True))

    def _replay_sleep(self, gap: float) -> None:
        """Wait a recorded gap at the current speed (capped), or not at all at speed 0."""
        speed = self.speed
        if speed <= 0:
            return
        wait = min(gap / speed, MAX_GAP_S)
        if self._sleep is not None:
            self._sleep(wait)
        else:
            self._stop.wait(wait)

    def on_replay_progress(self, message: ReplayProgress) -> None:
        """Show how far the replay has come."""
        if self._stop.is_set() or not self.is_running:  # quitting: the screens are going away
            return
        self.replay_lines, self.replay_total = message.lines, message.total
        self.replay_done = message.done
        self.show_replay()

    def show_replay(self) -> None:
        """The replay's progress bar (its speed, the lines written), then a note in the fleet line."""
        if not self.replaying:
            return
        screen = self.sessions_screen
        if self.replay_done:
            screen.show_progress("")
            screen.note(f"replayed {self.replay_lines} lines")
        else:
            state = "paused (p resumes)" if self.paused else "replaying"
            label = f"{state} {speed_label(self.speed)}: {self.replay_lines}/{self.replay_total} lines"
            label += "" if self.paused else " · p pauses"
            screen.show_progress(label, self.replay_lines, self.replay_total)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="ralph-tui",
        description="Watch ralph-ledger loops live, or replay recorded sessions as if live.",
    )
    parser.add_argument(
        "homes",
        nargs="*",
        type=Path,
        metavar="HOME",
        help="ledger homes, journal directories or journals (default: --home)",
    )
    parser.add_argument(
        "--home",
        type=Path,
        metavar="DIR",
        help="the ledger home to watch, as in ralph-ledger (default: $RALPH_HOME or ./.ralph); "
        "it may not exist yet: its first loop shows up as it starts",
    )
    parser.add_argument(
        "--replay",
        nargs="+",
        type=Path,
        metavar="FILE_OR_DIR",
        help="play recorded journals back as if live (e.g. sample_sessions/)",
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=DEFAULT_SPEED,
        help=f"replay speed: recorded gaps / N, each at most {MAX_GAP_S:g} s; N from {MIN_SPEED:g} to "
        f"{MAX_SPEED:g}, or 0 = no waiting (default {DEFAULT_SPEED:g}); + / - change it, p pauses",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """``ralph-tui [HOME ...]`` or ``ralph-tui --replay FILE_OR_DIR ... [--speed N]``."""
    ready()  # loaded: Ctrl-C is the app's again
    args = parse_args(argv)
    if not valid_speed(args.speed):
        print(
            f"ralph-tui: --speed {args.speed:g}: expected 0 (no waiting) or {MIN_SPEED:g} to {MAX_SPEED:g}",
            file=sys.stderr,
        )
        return 2
    if args.replay:
        if args.homes or args.home:
            print("ralph-tui: give either HOME ... or --replay FILE_OR_DIR ..., not both", file=sys.stderr)
            return 2
        try:
            files = journal_files(args.replay)
        except FileNotFoundError as exc:
            print(f"ralph-tui: {exc}", file=sys.stderr)
            return 2
        if not files:
            print("ralph-tui: no *.jsonl journals to replay", file=sys.stderr)
            return 2
        app = RalphApp(replay_files=files, speed=args.speed)
    else:
        sources = list(args.homes)
        missing = [s for s in sources if not s.exists()]
        if missing:
            what = "no such ledger home, journal directory or journal"
            hint = f" (to wait for a home yet to be made: ralph-tui --home {shlex.quote(str(missing[0]))})"
            print(f"ralph-tui: {missing[0]}: {what}{hint}", file=sys.stderr)
            return 1
        homes = [resolve_home(args.home)] if args.home or not sources else []
        app = RalphApp(sources, homes=homes)
    try:
        app.run()
    finally:
        app.cleanup()
    return 0
