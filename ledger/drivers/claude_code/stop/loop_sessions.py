"""Which ledger session a Claude Code loop is (:func:`loop_session`, :func:`named_session`,
:func:`state_session`) and what its journal says so far (:class:`LoopRecord`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ledger import events as ev
from ledger.core.home import Home
from ledger.storage.fold import events_of
from ledger.storage.journal import Journal, JournalError, check_session_id, journal_path

if TYPE_CHECKING:
    from ledger.drivers.claude_code.stop.plugin import LoopState


def ledger_session(claude_session: str, n: int = 1) -> str:
    """The ledger session id of the ``n``-th loop of a Claude Code session: ``cc-<id>``, then
    ``cc-<id>-2``, ``cc-<id>-3``, ..."""
    return check_session_id(f"cc-{claude_session}" if n == 1 else f"cc-{claude_session}-{n}")


class LoopRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What a loop's journal says: started, ended, the transcript offset of its last turn, its
    latest iteration and the configuration it started with."""

    started: bool = False
    ended: bool = False
    offset: int = 0
    iteration: int = 0
    config: dict[str, Any] = {}


DROP_IN: Final = "ralph-loop"
"""The ``mode`` a drop-in loop records in its ``session_started`` config (``dropin._events``)."""

_ENDINGS: Final = (ev.SessionCompleted, ev.SessionBlocked, ev.SessionEscalated)


def read_record(journal: Journal) -> LoopRecord:
    """The :class:`LoopRecord` of ``journal`` (an empty one when there is no journal)."""
    if not journal.path.exists():
        return LoopRecord()
    started = ended = False
    offset = iteration = 0
    config: dict[str, Any] = {}
    for e in events_of(journal.path):  # only what was appended since this process last read it
        if isinstance(e, ev.SessionStarted):
            started, config = True, e.config
        elif isinstance(e, ev.AgentTurn) and e.transcript_offset:
            offset = e.transcript_offset
        elif isinstance(e, ev.IterationStarted):
            iteration = e.iteration
        elif isinstance(e, _ENDINGS):
            ended = True
        elif isinstance(e, ev.Override) and e.kind == "unblock":  # a person let the loop go on
            ended = False
    return LoopRecord(started=started, ended=ended, offset=offset, iteration=iteration, config=config)


_UUID: Final = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def claude_session_of(sid: str, journals: Path) -> str:
    """The Claude Code session whose loop the ledger session ``sid`` is (``ledger_session`` read
    back): ``cc-<id>-N`` is the ``N``-th loop of ``<id>`` only when ``N`` >= 2 is written as
    ``ledger_session`` writes it and ``<id>`` is a UUID (what Claude Code's ids are) or, for any
    other id, its first loop ``cc-<id>`` has a journal in ``journals``. A UUID's last group may be
    all digits (``...-123456789012``): that group is never taken for a loop's number."""
    rest = sid.removeprefix("cc-")
    if _UUID.fullmatch(rest):
        return rest
    base, _, n = rest.rpartition("-")
    if not (base and n.isdigit() and n == str(int(n)) and int(n) >= 2):
        return rest
    if _UUID.fullmatch(base):
        return base
    try:
        first = journal_path(journals, ledger_session(base))
    except JournalError:
        return rest
    return base if first.exists() else rest


def belongs(sid: str, claude_session: str) -> bool:
    """Whether ``sid`` names a loop of the Claude Code session ``claude_session``."""
    base = ledger_session(claude_session)
    return sid == base or (sid.startswith(base + "-") and sid[len(base) + 1 :].isdigit())


def loop_session(
    home: Home, claude_session: str, same_loop: Callable[[LoopRecord], bool], clock: Callable[[], datetime]
) -> tuple[str, LoopRecord, int]:
    """The ledger session of a loop whose file names none yet: the latest loop of the Claude Code
    session when it is still running and ``same_loop`` says the file is that loop's (a loop file
    written before files named their session), else the first of ``cc-<id>``, ``cc-<id>-2``, ...
    not started yet. Also its record, and the transcript offset the session's loops reached."""
    latest: tuple[str, LoopRecord] | None = None
    carry = 0
    n = 1
    while True:
        sid = ledger_session(claude_session, n)
        record = read_record(Journal(journal_path(home.journals, sid), clock=clock))
        if not record.started:
            break
        latest, carry = (sid, record), max(carry, record.offset)
        n += 1
    if latest is not None and not latest[1].ended and same_loop(latest[1]):
        return latest[0], latest[1], carry
    return sid, record, carry


def named_session(
    home: Home, claude_session: str, sid: str, clock: Callable[[], datetime]
) -> tuple[LoopRecord, int]:
    """The record of the loop session ``sid`` a loop file names, and where its first turn starts
    reading the transcript (where the Claude Code session's earlier loops stopped)."""
    record = read_record(Journal(journal_path(home.journals, sid), clock=clock))
    if record.started:
        return record, record.offset
    carry, n = 0, 1
    while (other := ledger_session(claude_session, n)) != sid:
        earlier = read_record(Journal(journal_path(home.journals, other), clock=clock))
        if not earlier.started:
            break
        carry, n = max(carry, earlier.offset), n + 1
    return record, carry


def state_session(
    home: Home, claude_session: str, state: LoopState, clock: Callable[[], datetime]
) -> tuple[str, LoopRecord, int]:
    """The ledger session of a plugin loop: the one its file names, else :func:`loop_session`'s
    (the running loop continues when it started with this file's ``started_at`` and the file is
    not behind its journal, or, recorded before loops had their own session, when it is at this
    file's iteration)."""
    if state.ledger_session and belongs(state.ledger_session, claude_session):
        return state.ledger_session, *named_session(home, claude_session, state.ledger_session, clock)

    def same_loop(record: LoopRecord) -> bool:
        if "started_at" in record.config:  # started_at has whole seconds: a loop restarted within
            # the second has the same; but a file is never behind its own loop's journal (the
            # file is written first), so a fresh file after a block is another loop
            same = record.config["started_at"] == state.started_at
            return bool(same and state.iteration >= record.iteration)
        return state.iteration > 1 and record.iteration == state.iteration

    return loop_session(home, claude_session, same_loop, clock)
