"""Steering a loop without stopping it: pause, resume, steer and unblock.

Each is an ``override`` event in the session's journal (``kind`` ``pause``, ``resume``, ``steer``,
``unblock``; the text in ``reason``), and every driver of a loop (the runner, the Claude Code hook
in both modes, the MCP tools) reads them through this module and ``Engine.next``. A command for a
session that has ended (unblock excepted), or that the home does not hold, is refused with one line
(``EngineError``). What each command does, and what each driver does then: docs/steering.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from ledger import events as ev
from ledger.core.errors import no_session
from ledger.loop.engine_types import EngineError
from ledger.loop.steering.state import (
    is_paused,
    iteration_guidance,
    learned,
    let_go,
    paused_line,
    paused_message,
    pending_guidance,
    validated,
)
from ledger.storage.fold import fold
from ledger.storage.journal import Journal, journal_path

if TYPE_CHECKING:
    from ledger.core.home import Home
    from ledger.loop.engine import Engine

__all__ = [
    "KINDS",
    "UNBLOCK_ITERATIONS",
    "apply",
    "is_paused",
    "iteration_guidance",
    "learned",
    "let_go",
    "pause",
    "paused_line",
    "paused_message",
    "pending_guidance",
    "resume",
    "steer",
    "unblock",
    "validated",
]

KINDS: Final = ("pause", "resume", "steer", "unblock")
"""The ``override`` kinds that steer a loop."""

UNBLOCK_ITERATIONS: Final = 5
"""How many more iterations ``unblock`` gives when not told."""


# ----------------------------------------------------------------------------- the overrides
class _Seen(NamedTuple):
    """A session as a steering command reads it: its events and its ``sessions`` row (whatever
    drives it: a runner, the engine, the Claude Code drop-in hook with its own configuration)."""

    events: list[ev.AnyEvent]
    row: dict[str, Any]

    @property
    def status(self) -> str:
        return str(self.row["status"])

    @property
    def iteration(self) -> int:
        return int(self.row["iteration"] or 0)


def _where(where: Engine | Path, session_id: str) -> tuple[Path, Path, Home | None]:
    """The session's journal, the folder errors name, and the home (``None``: a folder of journals)."""
    if isinstance(where, Path):
        return journal_path(where, session_id), where, None
    return journal_path(where.home.journals, session_id), where.home.root, where.home


def _append(where: Engine | Path, session_id: str, *events: ev.Event) -> None:
    if isinstance(where, Path):
        Journal(journal_path(where, session_id)).append(*events)
    else:
        where.journal(session_id).append(*events)


def _seen(where: Engine | Path, session_id: str) -> _Seen:
    """The session; ``EngineError`` (one line) when the home holds no such session."""
    path, root, home = _where(where, session_id)
    if not path.exists():
        raise EngineError(no_session(session_id, root))
    read = fold(path)
    events = list(read.events)
    if not any(isinstance(e, ev.SessionStarted) for e in events):
        raise EngineError(no_session(session_id, root, path))
    rows = read.ledger(home).rows("SELECT * FROM sessions WHERE session_id = ?", [session_id])
    return _Seen(events, dict(rows[0]))


def _live(engine: Engine | Path, session_id: str, verb: str) -> _Seen:
    """The session when it is running; else ``EngineError`` saying why it cannot be ``verb``."""
    s = _seen(engine, session_id)
    if s.status != "running":
        raise EngineError(f"session {session_id!r} is {s.status}; it cannot be {verb}")
    return s


def _override(s: _Seen, session_id: str, kind: str, reason: str, **more: Any) -> ev.Override:
    return ev.Override(session_id=session_id, iteration=s.iteration, kind=kind, reason=reason, **more)


def pause(engine: Engine | Path, session_id: str, reason: str = "") -> int:
    """Pause a running loop after the iteration under way; returns that iteration."""
    s = _live(engine, session_id, "paused")
    if is_paused(s.events):
        raise EngineError(f"session {session_id!r} is already paused")
    _append(engine, session_id, _override(s, session_id, "pause", reason))
    return s.iteration


def resume(engine: Engine | Path, session_id: str, reason: str = "") -> int:
    """Resume a paused loop; returns its iteration."""
    s = _live(engine, session_id, "resumed")
    if not is_paused(s.events):
        raise EngineError(f"session {session_id!r} is not paused")
    _append(engine, session_id, _override(s, session_id, "resume", reason))
    return s.iteration


def steer(engine: Engine | Path, session_id: str, guidance: str) -> int:
    """Give a running loop ``guidance`` for its next iteration's prompt; returns the iteration under
    way (the guidance goes to the one after it)."""
    if not guidance.strip():
        raise EngineError("the guidance is empty")
    s = _live(engine, session_id, "steered")
    _append(engine, session_id, _override(s, session_id, "steer", guidance.strip()))
    return s.iteration


def unblock(
    engine: Engine | Path, session_id: str, guidance: str = "", iterations: int = UNBLOCK_ITERATIONS
) -> tuple[int, int]:
    """Let a blocked or escalated session go on: it runs again, with ``iterations`` more than it has
    used (the maximum is raised, a stop request and a pause are lifted, the windowed guards count
    from here), and its next iteration's prompt carries ``guidance`` (and any pending ``steer``):
    ``Engine.next`` begins it as after any iteration. Returns the session's iteration and its new
    maximum."""
    if iterations < 1:
        raise EngineError(f"--iterations must be at least 1, got {iterations}")
    s = _seen(engine, session_id)
    if s.status not in ("blocked", "escalated"):
        raise EngineError(
            f"session {session_id!r} is {s.status}; only a blocked or escalated session is unblocked"
        )
    n, max_it = s.iteration, s.iteration + iterations
    _append(engine, session_id, _override(s, session_id, "unblock", guidance.strip(), max_iterations=max_it))
    return n, max_it


def apply(
    where: Engine | Path, session_id: str, action: str, text: str = "", iterations: int = UNBLOCK_ITERATIONS
) -> str:
    """Carry out one steering ``action`` (``pause``, ``resume``, ``steer``, ``unblock``) on the
    session, in the journals of an engine's home or of a folder, and say in one line what happens
    next; ``EngineError`` (one line) when it cannot be done."""
    sid = session_id
    if action == "pause":
        n = pause(where, sid, text)
        return f"{sid}: pausing once iteration {n} ends; resume it with `ralph-ledger resume {sid}`"
    if action == "resume":
        return f"{sid}: resumed; the loop goes on after iteration {resume(where, sid, text)}"
    if action == "steer":
        return f"{sid}: guidance recorded; the prompt of iteration {steer(where, sid, text) + 1} carries it"
    if action == "unblock":
        n, max_it = unblock(where, sid, text, iterations)
        return f"{sid}: unblocked; iteration {n + 1} of {max_it} comes next"
    raise EngineError(f"unknown steering action {action!r}: expected one of {', '.join(KINDS)}")
