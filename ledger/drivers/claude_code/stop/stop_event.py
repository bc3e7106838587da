"""What every Claude Code Stop answers from, in the drop-in and the ledger-native loop alike.

The Stop event's stdin (:class:`HookInput`) and what the hook prints (:class:`HookOutcome`) (where the
loop is and its home: ``ledger.drivers.claude_code.stop.locate``); the transcript the event names; which
ledger session a loop is (:func:`loop_session`, :func:`named_session`) and what its journal says
(:class:`LoopRecord`); the agent's turn (:func:`read_turn`); where an error is recorded (:class:`ErrorSink`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import msgspec

from ledger import events as ev
from ledger.core.errors import error_reason
from ledger.core.home import Home
from ledger.drivers.claude_code.stop.locate import MAX_STDIN, HookInputError
from ledger.drivers.claude_code.transcript.last_text import find_last_text
from ledger.drivers.claude_code.transcript.scan import Scan, scan
from ledger.storage.fold import events_of
from ledger.storage.journal import Journal, check_session_id, journal_path, utc_now

if TYPE_CHECKING:
    from ledger.drivers.claude_code.stop.plugin import LoopState


class HookInput(msgspec.Struct, frozen=True, kw_only=True):
    """The Stop (or SubagentStop) hook's stdin (unknown fields are ignored). A SubagentStop's
    ``session_id`` and ``transcript_path`` are the parent session's; ``agent_id``, ``agent_type``
    and ``agent_transcript_path`` (its own transcript, under ``subagents/``) name the sub-agent."""

    session_id: str = ""
    transcript_path: str | None = ""  # null: no transcript, as when absent
    cwd: str = ""
    stop_hook_active: bool = False
    last_assistant_message: str | None = None
    hook_event_name: str = "Stop"
    agent_id: str | None = None
    agent_type: str | None = None
    agent_transcript_path: str | None = None
    prompt_id: str | None = None
    background_tasks: list[Any] | None = None
    session_crons: list[Any] | None = None

    def tasks(self) -> list[dict[str, Any]]:
        """The background tasks the client still knows (objects only)."""
        return [t for t in self.background_tasks or () if isinstance(t, dict)]

    def running_subagents(self) -> list[dict[str, Any]]:
        """The sub-agents still running in the background: the client wakes the agent when each
        ends, so the stop waits for them (docs/design/claude-code-stop.md)."""
        return [t for t in self.tasks() if t.get("type") == "subagent" and t.get("status") in RUNNING]

    def stop_fields(self) -> dict[str, Any]:
        """What a ``stop_decided`` event records of this input."""
        return {
            "prompt_id": self.prompt_id or "",
            "background_tasks": self.tasks(),
            "session_crons": [c for c in self.session_crons or () if isinstance(c, dict)],
        }


RUNNING: Final = frozenset({"running", "pending"})
"""A background task's statuses while it works (2.1.328 sends ``running``)."""


def waiting_reason(tasks: list[dict[str, Any]]) -> str:
    """The reason of a stop allowed while sub-agents run."""
    names = ", ".join(str(t.get("description") or t.get("id") or "?") for t in tasks[:3])
    return f"waiting for {len(tasks)} background sub-agent(s) to finish: {names}"


class HookOutcome(msgspec.Struct, frozen=True):
    """What the hook process prints and its exit code (always 0), and the journals it appended to
    without an fsync: :func:`main` syncs them once the answer is out (see docs/reliability.md)."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    sync: tuple[str, ...] = ()


class RequesterGone(Exception):
    """The hook process that asked the warm worker for this stop has ended: nothing is decided."""


_requester_alive: Callable[[], bool] | None = None


@contextlib.contextmanager
def served_for(alive: Callable[[], bool]) -> Iterator[None]:
    """Run a stop on behalf of another process (the warm worker for a hook): ``alive`` says whether
    that process still waits for the answer (see :func:`decision_point`)."""
    global _requester_alive
    _requester_alive = alive
    try:
        yield
    finally:
        _requester_alive = None


def decision_point() -> None:
    """Called right before a stop records its decision: ``RequesterGone`` when the process that
    asked for the stop has ended (it was killed), so no decision is recorded that no agent gets."""
    if _requester_alive is not None and not _requester_alive():
        raise RequesterGone("the hook process that asked for this stop ended before it was decided")


def parse_input(raw: bytes) -> HookInput:
    """Decode stdin strictly enough to act on, with one-line errors."""
    if len(raw) > MAX_STDIN:
        raise HookInputError(f"stdin is {len(raw)} bytes, over the {MAX_STDIN} byte limit")
    try:
        data = msgspec.json.decode(raw, type=HookInput)
    except msgspec.ValidationError as exc:
        raise HookInputError(f"stdin is not a Stop hook event: {exc}") from None
    except msgspec.DecodeError as exc:
        raise HookInputError(f"stdin is not JSON: {exc}") from None
    except RecursionError:
        raise HookInputError("stdin is not a Stop hook event: JSON nested too deeply") from None
    if not data.session_id.strip():
        raise HookInputError("stdin has no session_id")
    return data


def ledger_session(claude_session: str, n: int = 1) -> str:
    """The ledger session id of the ``n``-th loop of a Claude Code session: ``cc-<id>``, then
    ``cc-<id>-2``, ``cc-<id>-3``, ..."""
    return check_session_id(f"cc-{claude_session}" if n == 1 else f"cc-{claude_session}-{n}")


def transcript_problem(data: HookInput) -> tuple[Path | None, str]:
    """The transcript path from stdin, resolved, and ``""``; or None and what is wrong with it
    (see :func:`resolve_transcript`)."""
    return resolve_transcript(data.transcript_path, "transcript_path")


def resolve_transcript(given: str | None, key: str) -> tuple[Path | None, str]:
    """The transcript path stdin gives under ``key``, resolved, and ``""``; or None and what is
    wrong with it (absent, relative, missing, not a regular file: a directory, a FIFO, a device or
    a symlink loop could block or never end)."""
    if not given:
        return None, f"the {'Stop' if key == 'transcript_path' else 'SubagentStop'} event names no {key}"
    try:
        path = Path(given).expanduser()
        if not path.is_absolute():
            return None, f"transcript {given!r} is not an absolute path"
        path = path.resolve()
        if not path.exists():
            return None, f"transcript {path} does not exist"
        return (path, "") if path.is_file() else (None, f"transcript {path} is not a regular file")
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL byte, "~" with no home
        return None, f"transcript {given!r} cannot be resolved"


def transcript_of(data: HookInput) -> Path | None:
    """The transcript path from stdin, resolved; None when absent, relative, or not a regular file
    (see :func:`transcript_problem`)."""
    return transcript_problem(data)[0]


class LoopRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What a loop's journal says: started, ended, the transcript offset of its last turn, its
    latest iteration and the configuration it started with."""

    started: bool = False
    ended: bool = False
    offset: int = 0
    iteration: int = 0
    config: dict[str, Any] = {}


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


WAIT_ENV: Final = "RALPH_TRANSCRIPT_WAIT_MS"
DEFAULT_WAIT_MS: Final = 2000
"""How long a stop waits for its turn to land in the transcript (docs/design/claude-code-stop.md)."""
POLL_SECONDS: Final = 0.005


END_WAIT_ENV: Final = "RALPH_TRANSCRIPT_END_WAIT_MS"
DEFAULT_END_WAIT_MS: Final = 10000
"""How much longer the stop that ends a loop waits for a turn still missing: nothing reads the
transcript after it (docs/design/claude-code-stop.md)."""


def _ms(name: str, default: int) -> float:
    raw = os.environ.get(name, "").strip()
    return (int(raw) if raw.isascii() and raw.isdigit() else default) / 1000


def wait_seconds() -> float:
    """The bounded wait for a turn that has not landed yet: ``$RALPH_TRANSCRIPT_WAIT_MS`` (a whole
    number of milliseconds), else :data:`DEFAULT_WAIT_MS`."""
    return _ms(WAIT_ENV, DEFAULT_WAIT_MS)


def end_wait_seconds() -> float:
    """The further wait at the stop that ends the loop: ``$RALPH_TRANSCRIPT_END_WAIT_MS``, else
    :data:`DEFAULT_END_WAIT_MS`."""
    return _ms(END_WAIT_ENV, DEFAULT_END_WAIT_MS)


def _words(text: str) -> str:
    return " ".join(text.split())


def holds_turn(turn: Scan | None, last_message: str | None) -> bool:
    """Whether the range ``turn`` read holds the turn the stop is about: with no
    ``last_assistant_message`` (an older Claude Code) whatever is there is taken; else the range must
    end with a finished turn whose last message says the same (whitespace aside)."""
    if last_message is None:
        return True
    if turn is None or not turn.ended:
        return False
    said, seen = _words(last_message), _words(turn.end_text)
    return said == seen or (bool(said) and bool(seen) and (said.endswith(seen) or seen.endswith(said)))


class TurnRead(NamedTuple):
    """What a stop read of its transcript: the path (None when it cannot be read: ``problem`` says
    why), the range read since the offset, and whether that range holds the turn (``landed``)."""

    transcript: Path | None
    problem: str
    turn: Scan | None
    landed: bool


def await_turn(
    given: str | None, key: str, last_message: str | None, start: int, wait: float | None = None
) -> TurnRead:
    """Read the transcript ``given`` (stdin's ``key``) from ``start`` (from 0 again when the file is
    now shorter: rewritten), waiting up to :func:`wait_seconds` for it to hold the turn that
    ``last_message`` ends (:func:`holds_turn`), or to exist at all (``wait``: other seconds). What
    has not landed by then is left past the range's ``end``: the next read from there counts it,
    once (docs/design/claude-code-stop.md)."""
    deadline = time.monotonic() + (wait_seconds() if wait is None else wait)
    while True:
        path, problem = resolve_transcript(given, key)
        turn: Scan | None = None
        if path is not None:
            try:
                turn = scan(path, start if start <= path.stat().st_size else 0)
            except OSError as exc:
                problem = f"transcript {path} cannot be read: {error_reason(exc)}"
        landed = holds_turn(turn, last_message)
        missing = path is None and problem.endswith("does not exist")
        if landed or time.monotonic() >= deadline or not (turn is not None or missing):
            return TurnRead(path, problem, turn, landed)
        time.sleep(POLL_SECONDS)


def lagging(read: TurnRead) -> str:
    """The line recorded when the turn had not landed by the deadline (see :func:`await_turn`)."""
    what = read.problem or f"transcript {read.transcript} did not hold the turn yet"
    waited = int(wait_seconds() * 1000)
    return f"{what} after {waited} ms: its lines are counted when they land, at the next stop"


def catch_up(data: HookInput, read: TurnRead, start: int) -> TurnRead:
    """At the stop that ends a loop, a turn that had not landed: read again from ``start`` (where
    ``read`` began), waiting up to :func:`end_wait_seconds` more; ``read`` itself when it had landed."""
    if read.landed:
        return read
    return await_turn(
        data.transcript_path, "transcript_path", data.last_assistant_message, start, end_wait_seconds()
    )


def read_turn(data: HookInput, start: int) -> tuple[str | None, TurnRead]:
    """The text the stop decides from (stdin's ``last_assistant_message``; from the transcript only
    when a Claude Code too old to send it; None when there is no way to know it) and the transcript
    read for the turn (:func:`await_turn`)."""
    read = await_turn(data.transcript_path, "transcript_path", data.last_assistant_message, start)
    if data.last_assistant_message is not None:
        return data.last_assistant_message, read
    if read.turn is not None and read.turn.last_text:
        return read.turn.last_text, read
    if read.transcript is None:
        return None, read
    return find_last_text(read.transcript).text, read


class ErrorSink:
    """Where an error of this stop is recorded: the loop's session once it is known; before that,
    the Claude Code session's latest loop while it runs, else the session its next loop will have
    (so an error never lands in a loop that has ended)."""

    def __init__(self) -> None:
        self.journal: Journal | None = None
        self.sid = ""
        self._guess: Callable[[], str] | None = None
        self._clock: Callable[[], datetime] = utc_now
        self._home: Home | None = None

    def use(self, journal: Journal, sid: str) -> None:
        """Record errors in ``journal`` (of session ``sid``) from now on."""
        self.journal, self.sid, self._guess = journal, sid, None

    def use_session(self, home: Home, sid: str, clock: Callable[[], datetime]) -> None:
        """Record errors in the journal of session ``sid`` of ``home`` from now on."""
        self.use(Journal(journal_path(home.journals, sid), clock=clock), sid)

    def guess(self, home: Home, claude_session: str, clock: Callable[[], datetime]) -> None:
        """Until :meth:`use` names the loop's session, find it from the Claude Code session's loops."""
        self._home, self._clock = home, clock
        self._guess = lambda: loop_session(home, claude_session, lambda _: True, clock)[0]

    def target(self) -> tuple[Journal | None, str]:
        """The journal and session an error is recorded in (None when nothing is known yet)."""
        if self._guess is not None and self._home is not None:
            with contextlib.suppress(Exception):  # best effort, like the recording itself
                sid = self._guess()
                return Journal(journal_path(self._home.journals, sid), clock=self._clock), sid
        return self.journal, self.sid


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
