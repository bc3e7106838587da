"""The TUI's messages: what workers post (the feed's, the replay's, the steering's, a screen's own), and
what screens post up to the app. The handlers that receive them own the UI state (docs/design/tui.md)."""

from __future__ import annotations

from pathlib import Path

from textual.message import Message

from ledger import QueryResult
from ledger.monitor import (
    Checkpoint,
    EventLine,
    Fleet,
    Heat,
    IterationDetail,
    IterationRow,
    Monitor,
    Progress,
    SessionRow,
    Update,
)


class Opened(Message):
    """The monitor is open."""

    def __init__(self, monitor: Monitor) -> None:
        super().__init__()
        self.monitor = monitor


class Pending(Message):
    """What the ledger holds is on screen; ``pending`` is the backlog still to ingest."""

    def __init__(self, pending: Progress) -> None:
        super().__init__()
        self.pending = pending


class Failed(Message):
    """Opening, ingesting or replaying failed (a one-line reason)."""

    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class Loaded(Message):
    """Sessions read at start-up: the most recent ones with the fleet totals (``fleet``), then all
    the ledger held, then each backlog batch's sessions with the batch's progress."""

    def __init__(self, progress: Progress | None, rows: list[SessionRow], fleet: Fleet | None = None) -> None:
        super().__init__()
        self.progress = progress
        self.rows = rows
        self.fleet = fleet


class LoadDone(Message):
    """The backlog is ingested; ``bad_lines``: the journals' bad lines (``path:line: reason``)."""

    def __init__(self, bad_lines: list[str] | None = None) -> None:
        super().__init__()
        self.bad_lines = bad_lines or []


class Refreshed(Message):
    """New lines were ingested: what changed and the changed sessions' rows."""

    def __init__(self, update: Update, rows: list[SessionRow]) -> None:
        super().__init__()
        self.update = update
        self.rows = rows


class Watching(Message):
    """The directory watcher is running (appends from now on are seen)."""

    def can_replace(self, message: Message) -> bool:
        """Another one waiting says the same: one is handled."""
        return isinstance(message, Watching)


class ReplayProgress(Message):
    """The replay wrote ``lines`` of ``total`` lines (``done`` when it has finished)."""

    def __init__(self, lines: int, total: int, done: bool) -> None:
        super().__init__()
        self.lines = lines
        self.total = total
        self.done = done

    def can_replace(self, message: Message) -> bool:
        """A later count waiting supersedes this one (the last, ``done``, is never dropped)."""
        return isinstance(message, ReplayProgress) and not self.done


class SessionLoaded(Message):
    """Everything the session screen shows except an iteration's detail."""

    def __init__(
        self,
        session_id: str,
        row: SessionRow | None,
        iterations: list[IterationRow],
        heat: Heat,
        checkpoints: list[Checkpoint],
        events: list[EventLine],
    ) -> None:
        super().__init__()
        self.session_id = session_id
        self.row = row
        self.iterations = iterations
        self.heat = heat
        self.checkpoints = checkpoints
        self.events = events


class DetailLoaded(Message):
    """One iteration's feedback, next prompt and output excerpt."""

    def __init__(self, session_id: str, detail: IterationDetail) -> None:
        super().__init__()
        self.session_id = session_id
        self.detail = detail


class QueryDone(Message):
    """A SQL console query finished: its result, or an error (one line, and ``detail`` whole)."""

    def __init__(self, sql: str, result: QueryResult | None, error: str, detail: str = "") -> None:
        super().__init__()
        self.sql = sql
        self.result = result
        self.error = error
        self.detail = detail
        """The error whole, where it says more than its first line (DuckDB's hints)."""
        self.elapsed = 0.0
        """How long the query ran, in seconds."""


class Exported(Message):
    """A SQL console export finished: ``rows`` written to ``path``, or a one-line error."""

    def __init__(self, path: Path, rows: int, error: str) -> None:
        super().__init__()
        self.path = path
        self.rows = rows
        self.error = error


class OpenSession(Message):
    """A screen asks the app to show one session (replacing a session screen already shown)."""

    def __init__(self, session_id: str) -> None:
        super().__init__()
        self.session_id = session_id


class OpenExample(Message):
    """The palette asks for the SQL console with a saved example query, run."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name


class SetSpeed(Message):
    """The palette asks for another replay speed (0: no waiting)."""

    def __init__(self, speed: float) -> None:
        super().__init__()
        self.speed = speed


class SteerLoop(Message):
    """A screen or the palette asks to steer a session's loop: ``pause`` (or resume, when paused),
    ``steer`` (guidance for its next iteration) or ``unblock``."""

    def __init__(self, session_id: str, action: str) -> None:
        super().__init__()
        self.session_id = session_id
        self.action = action


class Steered(Message):
    """A steering action was recorded (``line`` says what happens next), or refused (``error``)."""

    def __init__(self, session_id: str, line: str, error: bool) -> None:
        super().__init__()
        self.session_id = session_id
        self.line = line
        self.error = error
