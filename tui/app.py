"""``ralph-tui``: watch ralph-ledger sessions live, or replay recorded ones as if live.

``RalphApp`` holds the screens, the keys and the parts it owns: ``feed`` (tui/feed.py: open the
monitor, ingest the backlog, watch and refresh the journals), ``replay`` (tui/replaying.py: play
recorded journals back into the watched directory), ``steering`` (tui/steering.py: pause, resume, steer
and unblock a loop) and ``alert_log`` (tui/alert_log.py: the notifications and the alert history).
Their workers only post messages; screens post messages up (``OpenSession``, ``SteerLoop``); the
handlers here own the UI (the style of harlequin and toolong). docs/design/tui.md draws the parts.
The command line is tui/main.py.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import ClassVar, Final

from platformdirs import user_downloads_path
from textual.app import App
from textual.binding import Binding, BindingType
from textual.filter import LineFilter
from textual.screen import Screen
from textual.widgets import Input, TextArea

from ledger import error_reason, plural
from ledger.monitor import Monitor, SessionRow
from tui.alert_log import AlertLog
from tui.attention import Attention
from tui.colours import ThemeColours
from tui.commands import RalphCommands
from tui.feed import Feed
from tui.messages import (
    Failed,
    LoadDone,
    Loaded,
    Opened,
    OpenExample,
    OpenSession,
    Pending,
    Refreshed,
    ReplayProgress,
    SetSpeed,
    Steered,
    SteerLoop,
    Watching,
)
from tui.replaying import DEFAULT_SPEED, Replay, utc_now
from tui.screens.alerts_screen import AlertsScreen
from tui.screens.help_screen import HelpScreen
from tui.screens.session_screen import SessionScreen
from tui.screens.sessions_screen import SessionsScreen
from tui.screens.sql_screen import SqlScreen
from tui.steering import Steering
from tui.welcome import welcome_text

SWITCH_INTERVAL_S: Final = 0.0005
DARK: Final = "textual-dark"
LIGHT: Final = "textual-light"


def screenshot_folder() -> Path:
    """Where a screenshot is saved: the user's downloads folder when it exists, else the current
    directory (Textual's default folder may not exist, and then the screenshot is lost)."""
    downloads = user_downloads_path()
    return downloads if downloads.is_dir() else Path.cwd()


class RalphApp(App[None]):
    """The ralph-ledger monitor: sessions, one session, the SQL console, alerts."""

    TITLE = "ralph-tui"
    COMMANDS: ClassVar = App.COMMANDS | {RalphCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        # priority: a dialog (help, palette, viewer, export) would otherwise stop it
        Binding("ctrl+c", "copy_or_quit", "Quit", show=False, priority=True),
        Binding("s", "sql", "SQL"),
        Binding("question_mark", "help", "Help"),
        Binding("t", "toggle_theme", "Theme"),
        Binding("a", "alerts", "Alerts"),
        Binding("plus", "faster", "Faster"),
        Binding("minus", "slower", "Slower"),
        Binding("p", "pause", "Pause replay"),
    ]
    CSS = """
    /* the replay's / backlog's progress: the bar shrinks, the percentage always shows */
    #loading-label { max-width: 70%; text-wrap: nowrap; text-overflow: ellipsis; }
    #loading ProgressBar { min-width: 10; }
    #loading ProgressBar Bar { width: 1fr; min-width: 3; }
    /* pop-ups stack in the bottom right corner, an alert's one line each (tui/alert_log.py) */
    Toast { padding: 0 1; margin-top: 0; }
    """

    def __init__(
        self,
        sources: Sequence[Path] = (),
        *,
        homes: Sequence[Path] = (),
        replay_files: Sequence[Path] = (),
        replay_dir: Path | None = None,
        speed: float = DEFAULT_SPEED,
        sequential: bool = False,
        sleep: Callable[[float], object] | None = None,
        now: Callable[[], datetime] | None = None,
        batch_bytes: int | None = None,
        watch: bool = True,
        attention: Attention = Attention(),  # noqa: B008 (frozen)
        dataset: Path | None = None,
    ) -> None:
        super().__init__()
        self.replay = Replay(
            self, replay_files, directory=replay_dir, speed=speed, sequential=sequential, sleep=sleep
        )
        if self.replay.on:
            assert self.replay.directory is not None
            sources, homes = [self.replay.directory], ()
        if not sources and not homes and dataset is None:
            raise ValueError("ralph-tui needs a ledger home, a journal directory or journals to replay")
        clock = now or (self.replay.clock if self.replay.on else utc_now)
        self.feed = Feed(
            self, sources, homes=homes, dataset=dataset, clock=clock, batch_bytes=batch_bytes, watch=watch
        )
        self.steering = Steering(self, self.current_monitor, self.session_row)
        self.alert_log = AlertLog(self, self.now, attention)
        self.sessions_screen = SessionsScreen(sources=dataset is not None, now=self.now)
        self.sql_screen = SqlScreen(self.current_monitor)
        self.theme_colours = ThemeColours(self)
        # state the handlers keep (tests read it)
        self.errors: list[str] = []
        self.screenshots: list[Path] = []
        self.updates = 0

    @property
    def replaying(self) -> bool:
        """Replaying recordings (``--replay``): the replay keys work."""
        return self.replay.on

    # -- screens -----------------------------------------------------------------------------------
    def get_line_filters(self) -> Sequence[LineFilter]:
        """Textual's filters and the theme's colours, readable everywhere (tui/colours.py), placed
        before ``NO_COLOR``'s grey."""
        return self.theme_colours.place(super().get_line_filters())

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
        self.feed.start()

    def on_unmount(self) -> None:
        """Stop the replay and the watcher."""
        self.replay.stop()
        self.feed.stop()

    def cleanup(self) -> None:
        """Close the monitor and remove a replay's temporary journals (after the app has exited)."""
        self.replay.stop()
        self.feed.close()
        self.replay.cleanup()

    def current_monitor(self) -> Monitor | None:
        """The monitor, once open (what the screens' workers read)."""
        return self.feed.monitor

    def now(self) -> datetime:
        """The clock the ages are measured with (the monitor's)."""
        return self.feed.now()

    def session_ids(self) -> list[str]:
        """Every session known, in the sessions table's order first."""
        shown = self.sessions_screen.visible_ids()
        rest = sorted(set(self.sessions_screen.rows) - set(shown))
        return shown + rest

    def session_row(self, session_id: str) -> SessionRow | None:
        """The session's latest row, as the sessions screen holds it."""
        return self.sessions_screen.rows.get(session_id)

    def open_session(self, session_id: str) -> None:
        """Show one session (replacing a session screen already shown)."""
        screen = SessionScreen(session_id, self.current_monitor, self.now)
        if isinstance(self.screen, SessionScreen):
            self.switch_screen(screen)
        else:
            self.push_screen(screen)

    def open_example(self, name: str) -> None:
        """Open the SQL console with a saved example query and run it."""
        self.action_sql()
        self.sql_screen.load_example(name)

    # -- what screens and the palette ask for ------------------------------------------------------
    def on_open_session(self, message: OpenSession) -> None:
        """A screen asked for a session: show it."""
        self.open_session(message.session_id)

    def on_open_example(self, message: OpenExample) -> None:
        """The palette asked for an example query."""
        self.open_example(message.name)

    def on_steer_loop(self, message: SteerLoop) -> None:
        """A screen or the palette asked to steer a loop: the steering asks for guidance, then writes."""
        self.steering.ask(message.session_id, message.action)

    def on_steered(self, message: Steered) -> None:
        """Say what the steering did (the watcher shows its event as it shows any)."""
        self.steering.steered_line(message)

    # -- what the feed posts ---------------------------------------------------------------------------
    def on_opened(self, message: Opened) -> None:
        """Keep the monitor; say that the sessions are being read."""
        self.feed.monitor = message.monitor
        self.sessions_screen.show_progress("reading sessions…")

    def on_pending(self, message: Pending) -> None:
        """Say how much is to ingest (the progress bar), or hide the bar."""
        p = message.pending
        label = f"ingesting {self.feed.what(p.files_total - p.files_done)}, {plural(p.bytes_total, 'byte')}…"
        self.sessions_screen.show_progress(label if p.bytes_total else "", 0, p.bytes_total)

    def on_loaded(self, message: Loaded) -> None:
        """A batch landed: update the table and the progress bar."""
        p = message.progress
        if p is not None:
            label = f"ingested {p.files_done}/{self.feed.what(p.files_total)}, {plural(p.events, 'event')}"
            self.sessions_screen.show_progress(label, p.bytes_done, p.bytes_total)
        self.sessions_screen.apply(message.rows, message.fleet)

    def on_load_done(self, message: LoadDone) -> None:
        """The backlog is in: hide the progress bar, report its bad lines, show the empty state if
        there is no session, start watching (then replaying)."""
        feed = self.feed
        feed.loaded = True
        self.sessions_screen.show_progress("")
        self.alert_log.report_bad_lines(message.bad_lines)
        if feed.monitor is not None and not self.replaying and feed.dataset is None:
            self.sessions_screen.show_welcome(welcome_text(feed.monitor))
        if feed.watch_files:
            feed.watch()
        elif self.replaying:
            self.replay.start()

    def on_failed(self, message: Failed) -> None:
        """Show the error (in the fleet line and as a notification)."""
        self.errors.append(message.error)
        self.sessions_screen.show_progress("")
        self.sessions_screen.note(message.error)
        self.notify(message.error, title="error", severity="error", markup=False)

    def on_watching(self, message: Watching) -> None:
        """Catch up with anything appended while loading (or while the watcher started again), then
        follow; a replay starts the first time."""
        self.feed.mark_dirty(None)
        if self.feed.live:
            return
        self.feed.live = True
        if self.replaying:
            self.replay.start()

    def on_refreshed(self, message: Refreshed) -> None:
        """Update the changed rows, drop those of deleted sources, raise the alerts, and follow an
        open session."""
        self.updates += 1
        update = message.update
        gone = {sid for sessions in update.vanished.values() for sid in sessions}
        self.sessions_screen.drop(gone)
        self.sessions_screen.apply(message.rows)
        if update.reset:  # a journal emptied has no session any more
            self.sessions_screen.drop(set(update.sessions) - {r.session_id for r in message.rows})
        self.alert_log.raise_alerts(update)
        changed = set(update.sessions) | gone
        for screen in self.screen_stack:
            if isinstance(screen, SessionScreen) and screen.session_id in changed:
                screen.reload()
            if isinstance(screen, AlertsScreen) and (update.alerts or update.bad_lines or update.vanished):
                screen.refresh_alerts()

    # -- the replay ------------------------------------------------------------------------------------
    def on_replay_progress(self, message: ReplayProgress) -> None:
        """Show how far the replay has come."""
        if self.replay.stopped or not self.is_running:  # quitting: the screens are going away
            return
        self.replay.progress(message)
        self.show_replay()

    def show_replay(self) -> None:
        """The replay's progress bar (its speed, the lines written), then a note in the fleet line."""
        if not self.replaying:
            return
        screen, replay = self.sessions_screen, self.replay
        if replay.done:
            screen.show_progress("")
            screen.note(f"replayed {replay.lines} lines")
        else:
            screen.show_progress(replay.label(), replay.lines, replay.total)

    def on_set_speed(self, message: SetSpeed) -> None:
        """The palette set the replay's speed."""
        self.replay.set_speed(message.speed)
        self.show_replay()

    def action_faster(self) -> None:
        """Replay twice as fast (up to no waiting at all)."""
        self.replay.faster()
        self.show_replay()

    def action_slower(self) -> None:
        """Replay half as fast (down to the slowest speed)."""
        self.replay.slower()
        self.show_replay()

    def action_pause(self) -> None:
        """Pause the replay (no line is written, the clock stands still), or resume it."""
        if self.replay.done:
            return
        self.replay.toggle_pause()
        self.show_replay()

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

    async def action_copy_or_quit(self) -> None:
        """ctrl+c: copy the text selected in the focused editor or input (or on the screen), else quit."""
        focused = self.focused
        selected = focused.selected_text if isinstance(focused, TextArea | Input) else None
        selected = selected or self.screen.get_selected_text()
        if selected:
            self.copy_to_clipboard(selected)
            self.notify("copied the selection (ctrl+c with nothing selected, or ctrl+q, quits)", markup=False)
            return
        await self.action_quit()

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
            self.push_screen(AlertsScreen(self.alert_log.history))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Replay keys only while replaying."""
        if action in ("faster", "slower", "pause"):
            return self.replaying
        return True

    def deliver_screenshot(
        self, filename: str | None = None, path: str | None = None, time_format: str | None = None
    ) -> str | None:
        """Save an SVG screenshot to a folder that exists (``screenshot_folder``) and say where."""
        folder = Path(path) if path else screenshot_folder()
        try:
            saved = Path(self.save_screenshot(filename, str(folder), time_format))
        except OSError as exc:
            error = f"cannot save a screenshot in {folder}: {error_reason(exc)}"
            self.notify(error, title="screenshot", severity="error", markup=False)
            return None
        self.screenshots.append(saved)
        self.notify(f"saved {saved}", title="screenshot", markup=False)
        return str(saved)
