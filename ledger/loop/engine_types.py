"""What the loop engine answers (``ValidateResult``, ``NextResult``, ``CompleteResult``, one-line
``EngineError``) and its view of one session while a call runs (``SessionView``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ledger import events as ev

if TYPE_CHECKING:
    from ledger.loop.config.loop_config import LoopConfig
    from ledger.loop.decide.signals import Trip
    from ledger.loop.validate.rules import Rule
    from ledger.storage.database import Ledger


class EngineError(Exception):
    """A lifecycle call that cannot be made now; the message is one line."""


class Paused(EngineError):
    """``next`` refused: a human paused the session (``ledger.loop.steering.commands``); not an ending."""


@dataclass(frozen=True, slots=True)
class ValidateResult:
    """iteration_validate's answer."""

    session_id: str
    iteration: int
    validation_passed: bool
    signal: ev.Signal
    detected_promise: str
    feedback: list[str]
    results: list[ev.RuleResult]
    score: float
    reason: str
    next_prompt: str = ""
    trips: list[Trip] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Judged:
    """A turn judged: the answer, and the events recording it (stamped, not yet appended)."""

    result: ValidateResult
    events: list[ev.Event]


@dataclass(frozen=True, slots=True)
class NextResult:
    """What ``start`` and ``next`` return: the iteration begun, the maximum, its checkpoint and a message."""

    session_id: str
    iteration: int
    max_iterations: int
    checkpoint_id: str
    message: str
    guidance: str = ""  # what a human steered the loop with: the new iteration's prompt carries it


@dataclass(frozen=True, slots=True)
class CompleteResult:
    """What ``complete`` returns: iterations used, the last iteration's score (``None`` if unscored),
    one ``iterations`` row per iteration, the completion time and a message.
    """

    session_id: str
    total_iterations: int
    final_score: float | None
    history: list[dict[str, Any]]
    completed_at: datetime
    message: str


@dataclass(slots=True)
class SessionView:
    """A session's events and configuration, read from its journal, and its
    row of the ``sessions`` view (status, iteration, stop requests, ...)."""

    events: list[ev.AnyEvent]
    config: LoopConfig
    rules: list[Rule]
    row: dict[str, Any]
    ledger: Ledger  # in memory, over this session's journal; ``refresh`` reads only what was appended

    @property
    def session_id(self) -> str:
        """The session's id."""
        return str(self.row["session_id"])

    @property
    def iteration(self) -> int:
        """The session's current iteration."""
        return int(self.row["iteration"])

    @property
    def status(self) -> ev.SessionStatus:
        """The session's status."""
        return ev.session_status(self.row["status"])

    def stop_requested(self) -> str | None:
        """The reason of a pending ``ralph-ledger stop`` ("" when none was given); None when none."""
        return str(self.row["stop_reason"] or "") if self.row["stop_requested"] else None
