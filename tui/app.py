"""``ralph-tui``: watch ralph-ledger sessions live, or replay recorded ones as if live.

``RalphApp`` holds the screens, the keys and the state; what it does over time comes from its mixins:
``LiveJournals`` (tui/live.py: open the monitor, ingest the backlog, watch and refresh the journals,
raise the alerts), ``Replaying`` (tui/replaying.py: play recorded journals back into the watched
directory) and ``Steering`` (tui/steering.py: pause, resume, steer and unblock a loop). Every read
of the ledger happens in a thread worker that only posts messages; the message handlers own the UI
(the style of harlequin and toolong). The command line is tui/main.py.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import threading
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

from ledger import error_reason
from ledger.monitor import Monitor, SessionRow
from ledger.monitor.replay import ReplayClock
from tui.attention import Attention
from tui.colours import ThemeColours
from tui.commands import RalphCommands
from tui.live import BATCH_BYTES, LiveJournals
from tui.messages import OpenSession
from tui.replaying import DEFAULT_SPEED, Replaying, utc_now
from tui.screens.alerts import AlertEntry, AlertsScreen
from tui.screens.fleet import SessionsScreen
from tui.screens.help import HelpScreen
from tui.screens.query import SqlScreen
from tui.screens.session_detail import SessionScreen
from tui.steering import Steering

SWITCH_INTERVAL_S: Final = 0.0005
DARK: Final = "textual-dark"
LIGHT: Final = "textual-light"


def screenshot_folder() -> Path:
    """Where a screenshot is saved: the user's downloads folder when it exists, else the current
    directory (Textual's default folder may not exist, and then the screenshot is lost)."""
    downloads = user_downloads_path()
    return downloads if downloads.is_dir() else Path.cwd()


class RalphApp(LiveJournals, Replaying, Steering, App[None]):
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
        sequential: bool = False,
        sleep: Callable[[float], object] | None = None,
        now: Callable[[], datetime] | None = None,
        batch_bytes: int = BATCH_BYTES,
        watch: bool = True,
        attention: Attention = Attention(),  # noqa: B008 (frozen)
        dataset: Path | None = None,
    ) -> None:
        super().__init__()
        self.dataset = dataset
        """An exported Parquet dataset watched instead of journals (``--dataset``): read-only."""
        self.replay_files = list(replay_files)
        self.replaying = bool(self.replay_files)
        self._own_replay_dir = False
        if self.replaying:
            if replay_dir is None:
                replay_dir = Path(tempfile.mkdtemp(prefix="ralph-tui-replay-"))
                self._own_replay_dir = True
            replay_dir.mkdir(parents=True, exist_ok=True)
            sources, homes = [replay_dir], ()
        if not sources and not homes and dataset is None:
            raise ValueError("ralph-tui needs a ledger home, a journal directory or journals to replay")
        self.sources = list(sources)
        self.homes = list(homes)
        self.replay_dir = replay_dir
        self.speed = speed
        self.sequential = sequential
        self._sleep = sleep
        self.replay_clock = ReplayClock()
        self._clock = now or (self.replay_clock if self.replaying else utc_now)
        self.batch_bytes = batch_bytes
        self.watch_files = watch
        self.monitor: Monitor | None = None
        self.sessions_screen = SessionsScreen(sources=dataset is not None)
        self.sql_screen = SqlScreen()
        self.theme_colours = ThemeColours(self)
        # state the handlers keep (tests read it)
        self.loaded = False
        self.live = False
        self.replay_lines = 0
        self.replay_total = 0
        self.replay_done = False
        self.alerts: list[str] = []
        self.steered: list[str] = []
        """What each steering action from the keys or the palette did, one line each (tests read it)."""
        self.alert_history: list[AlertEntry] = []
        """Every alert since start-up, oldest first (the alerts screen shows them newest first)."""
        self.attention = attention  # the bell, the desktop notification, per alert (tui/attention.py)
        self.paused = False
        self._resume = threading.Event()
        self._resume.set()
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
            self.push_screen(AlertsScreen())

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
