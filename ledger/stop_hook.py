"""``ralph-ledger hook claude-code``: the Claude Code Stop hook.

Contract (``shared/fixtures/claude-code/README.md``): JSON on stdin
(``session_id``, ``transcript_path``, ``cwd``, ``stop_hook_active``, and
``last_assistant_message`` in newer versions). To continue the loop print
``{"decision": "block", "reason": <next prompt>, "systemMessage": <status>}``
and exit 0; to allow the stop print nothing and exit 0.

Drop-in for the ``ralph-loop`` plugin: when ``.claude/ralph-loop.local.md``
exists in the project, the decisions are the plugin's (``ledger.claude_code``),
and every stop is also recorded in the ledger as events of the loop's session:
the agent's turn read from the transcript (only the bytes appended since the
previous stop), promises, the stop decision, and how the loop ended.

Loop identity: each loop is its own ledger session. The first loop of a Claude
Code session is ``cc-<claude session id>``, the next ones ``cc-<id>-2``,
``cc-<id>-3``, ... (:func:`loop_session`); the first stop of a loop chooses its
session and writes it into the loop file (``ledger_session``), so a loop
started after another ended is never appended to it. A new loop reads the
transcript from where the previous loop of the session stopped reading.

Finding the loop (:func:`find_project`): ``$CLAUDE_PROJECT_DIR``, else the
hook's working directory, else stdin's ``cwd`` and its parents up to the
project root (the first holding ``.git``): the first that holds a loop file.
The home (:func:`hook_home`): ``--home``, else ``$RALPH_HOME``, else
``<project>/.ralph``; a relative one is taken from the project directory.

A transcript the drop-in cannot read (no path, a relative one, missing, not a
regular file, unreadable) stops the loop as the plugin does: one line on stderr
naming it, the state file deleted, the session escalated.

The hook never wedges the agent: any internal error allows the stop, prints
one line on stderr, exits 0, and records an ``error_recorded`` event when it
knows the session. It imports neither DuckDB nor pyarrow.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final, NamedTuple

import msgspec
from msgspec.structs import replace

from ledger import events as ev
from ledger.claude_code import (
    LoopState,
    PluginDecision,
    StateError,
    apply_decision,
    plugin_decision,
    read_state,
    write_state,
)
from ledger.errors import one_line, os_error
from ledger.fold import events_of
from ledger.home import Home
from ledger.journal import (
    Journal,
    JournalError,
    check_session_id,
    journal_path,
    sync_file,
    utc_now,
)
from ledger.locks import loop_lock
from ledger.promises import detect_promises, to_event
from ledger.transcript import Scan, find_last_text, scan

STATE_FILE: Final = Path(".claude") / "ralph-loop.local.md"
LOOP_FILE: Final = Path(".claude") / "ralph-ledger.local.json"
"""A ledger-native loop (``ledger.hook_loop``); it takes precedence over ``STATE_FILE``."""
MAX_STDIN: Final = 16 * 1024 * 1024


class HookInput(msgspec.Struct, frozen=True, kw_only=True):
    """The Stop hook's stdin (unknown fields are ignored)."""

    session_id: str = ""
    transcript_path: str = ""
    cwd: str = ""
    stop_hook_active: bool = False
    last_assistant_message: str | None = None
    hook_event_name: str = "Stop"


class HookOutcome(msgspec.Struct, frozen=True):
    """What the hook process prints and its exit code (always 0), and the journals it appended to
    without an fsync: :func:`main` syncs them once the answer is out (see docs/reliability.md)."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    sync: tuple[str, ...] = ()


class HookInputError(ValueError):
    """The hook's stdin is not what Claude Code sends; one line."""


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


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def _has_loop(directory: Path) -> bool:
    return (directory / LOOP_FILE).exists() or (directory / STATE_FILE).exists()


def project_root(start: Path) -> Path:
    """The git work tree holding ``start`` (the nearest directory at or above it holding ``.git``),
    ``start`` itself when there is none."""
    return next((d for d in (start, *start.parents) if (d / ".git").exists()), start)


def _up_to_root(start: Path) -> list[Path]:
    """``start`` and its parents up to its project root (just ``start`` outside a git work tree)."""
    root = project_root(start)
    return [start, *(d for d in start.parents if d.is_relative_to(root))]


def _stdin_cwd(data: HookInput) -> Path:
    """``cwd`` from stdin (the hook's own when empty): an existing directory, else ``HookInputError``."""
    cwd = Path(data.cwd or os.getcwd())
    if not cwd.is_absolute():
        raise HookInputError(f"cwd {data.cwd!r} is not an absolute path")
    cwd = cwd.resolve()
    if not cwd.is_dir():
        raise HookInputError(f"cwd {str(cwd)!r} is not a directory")
    return cwd


def find_project(data: HookInput, env: dict[str, str] | None = None) -> Path:
    """The project whose loop this stop is for: the first of ``$CLAUDE_PROJECT_DIR``, the hook's
    working directory, and stdin's ``cwd`` and its parents up to the project root (the first one
    holding ``.git``) that holds a loop file. With no loop anywhere: ``$CLAUDE_PROJECT_DIR`` when
    set, else the project root above stdin's ``cwd``. ``HookInputError`` when it comes to stdin's
    ``cwd`` and that is not an existing absolute directory."""
    environ = os.environ if env is None else env
    claude_dir = environ.get("CLAUDE_PROJECT_DIR", "")
    declared = Path(claude_dir) if claude_dir and Path(claude_dir).is_absolute() else None
    if declared is not None and _is_dir(declared) and _has_loop(declared):
        return declared.resolve()
    with contextlib.suppress(OSError):  # the hook's working directory may have been removed
        here = Path.cwd()
        if _has_loop(here):
            return here
    cwd = _stdin_cwd(data)
    for d in _up_to_root(cwd):
        if _has_loop(d):
            return d
    return declared.resolve() if declared is not None and _is_dir(declared) else project_root(cwd)


def hook_home(project: Path, home: str | None = None, env: dict[str, str] | None = None) -> Home:
    """The hook's ledger home: ``home`` (``--home``), else ``$RALPH_HOME``, else ``<project>/.ralph``;
    a relative path is taken from ``project``, wherever Claude Code runs the hook from."""
    chosen = home or (os.environ if env is None else env).get("RALPH_HOME") or ".ralph"
    path = Path(chosen).expanduser()
    return Home.resolve(path if path.is_absolute() else project / path)


def transcript_problem(data: HookInput) -> tuple[Path | None, str]:
    """The transcript path from stdin, resolved, and ``""``; or None and what is wrong with it
    (absent, relative, missing, not a regular file: a directory, a FIFO, a device or a symlink
    loop could block or never end)."""
    if not data.transcript_path:
        return None, "the Stop event names no transcript_path"
    try:
        path = Path(data.transcript_path).expanduser()
        if not path.is_absolute():
            return None, f"transcript {data.transcript_path!r} is not an absolute path"
        path = path.resolve()
        if not path.exists():
            return None, f"transcript {path} does not exist"
        return (path, "") if path.is_file() else (None, f"transcript {path} is not a regular file")
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL byte, "~" with no home
        return None, f"transcript {data.transcript_path!r} cannot be resolved"


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
    return LoopRecord(started=started, ended=ended, offset=offset, iteration=iteration, config=config)


def _previous_offset(journal: Journal) -> tuple[bool, int]:
    """(whether the session was started in the ledger, transcript offset of its last turn)."""
    record = read_record(journal)
    return record.started, record.offset


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


def _turn(data: HookInput, transcript: Path | None, start: int) -> tuple[str | None, Scan | None]:
    """The agent's last text (None when there is no way to read it) and what
    it did since ``start`` in the transcript (from its start again if it is now shorter: rewritten)."""
    if transcript is not None and start > transcript.stat().st_size:
        start = 0
    turn = scan(transcript, start) if transcript is not None else None
    if data.last_assistant_message is not None:
        return data.last_assistant_message, turn
    if turn is not None and turn.last_text:
        return turn.last_text, turn
    return (find_last_text(transcript).text if transcript is not None else None), turn


def _events(stop: _Stop, decision: PluginDecision, *, ending: bool = True) -> list[ev.Event]:
    """The events one stop appends, in order (without how the loop goes on or ends when not
    ``ending``)."""
    sid, state, text, turn, started, data = stop
    n = state.iteration
    text = text or ""
    out: list[ev.Event] = []
    if not started:
        out += [
            ev.SessionStarted(
                session_id=sid,
                task=state.prompt[:500],
                agent="claude-code",
                max_iterations=state.max_iterations,
                completion_promises=[state.completion_promise] if state.completion_promise else [],
                config={
                    "mode": "ralph-loop",
                    "claude_session_id": data.session_id,
                    "started_at": state.started_at,
                },
            ),
            ev.IterationStarted(session_id=sid, iteration=n, max_iterations=state.max_iterations or None),
        ]
    out.append(
        ev.AgentTurn(
            session_id=sid,
            iteration=n,
            output_excerpt=text[-2000:],
            files_modified=turn.files_modified if turn else [],
            tool_count=turn.tool_count if turn else 0,
            stop_reason=turn.stop_reason if turn else "",
            tokens=turn.tokens if turn else ev.TokenUsage(),
            transcript_offset=turn.end if turn else 0,
        )
    )
    custom = [state.completion_promise] if state.completion_promise else []
    out += [to_event(p, session_id=sid, iteration=n) for p in detect_promises(text, custom=custom).promises]
    out.append(
        ev.StopDecided(
            session_id=sid,
            iteration=n,
            decision=decision.action,
            reason=decision.reason if decision.action == "allow" else "loop continues",
            system_message=decision.system_message,
        )
    )
    if ending:
        out += _ending(sid, state, decision)
    return out


def _ending(sid: str, state: LoopState, decision: PluginDecision) -> list[ev.Event]:
    n = state.iteration
    if decision.action == "block" and decision.next_state is not None:
        nxt = decision.next_state
        return [
            ev.IterationStarted(
                session_id=sid, iteration=nxt.iteration, max_iterations=nxt.max_iterations or None
            )
        ]
    if decision.completed:
        return [
            ev.SessionCompleted(
                session_id=sid,
                iteration=n,
                promise=state.completion_promise or "",
                total_iterations=n,
                reason=decision.reason,
            )
        ]
    if decision.max_reached:
        return [
            ev.GuardTripped(
                session_id=sid, iteration=n, guard="max_iterations", signal="ESCALATE", detail=decision.reason
            ),
            ev.SessionEscalated(session_id=sid, iteration=n, guard="max_iterations", reason=decision.reason),
        ]
    if decision.action == "allow":  # the loop stopped on a problem (transcript, prompt): nothing runs on
        return [ev.SessionEscalated(session_id=sid, iteration=n, reason=decision.reason)]
    return []


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


def run(
    raw: bytes,
    *,
    home: Home | None = None,
    clock: Callable[[], datetime] = utc_now,
    home_arg: str | None = None,
) -> HookOutcome:
    """One stop, fail-open: the outcome to print; never raises. ``home`` is the ledger home itself,
    ``home_arg`` the ``--home`` given on the command line (see :func:`hook_home`)."""
    sink = ErrorSink()
    as_hook = home is None and clock is utc_now  # as the hook process runs it (the worker may)
    try:
        data = parse_input(raw)
        ledger_session(data.session_id)  # a session id that cannot name a journal is refused here
        project = find_project(data)
        home = home or hook_home(project, home_arg)
        sink.guess(home, data.session_id, clock)
        if (project / LOOP_FILE).exists():  # a ledger-native loop: the engine decides (imports DuckDB)
            if as_hook and warm_wanted():  # RALPH_WARM=1: the home's warm worker, if it takes it
                from ledger.warm import ask

                if (answer := ask(raw, home, home_arg)) is not None:
                    return answer
            from ledger.hook_loop import native_stop

            return native_stop(data, project, home, project / LOOP_FILE, clock, sink)
        return _drop_in(data, project / STATE_FILE, home, clock, sink)
    except Exception as exc:  # the agent must never be wedged by the hook
        line = _allowing(exc)
        _record_error(*sink.target(), line)
        return HookOutcome(stderr=line + "\n")


def warm_wanted() -> bool:
    """Whether a ledger-native stop goes to the warm worker (``ledger.warm``): ``RALPH_WARM=1``,
    and this process is not the worker."""
    if os.environ.get("RALPH_WARM") != "1":
        return False
    from ledger.warm import wanted

    return wanted()


def _drop_in(
    data: HookInput, state_path: Path, home: Home, clock: Callable[[], datetime], sink: ErrorSink
) -> HookOutcome:
    """One stop of a ``ralph-loop`` plugin loop: the plugin's decision, recorded. The state is read,
    decided on and written under the loop lock (``ledger.locks``); see :func:`_commit` for the
    order of effects."""
    if not _owned(data, state_path):
        return HookOutcome()  # no loop, or another Claude Code session's: never block or touch it
    with loop_lock(state_path.parent):
        read = _read_state(state_path)  # again: another stop may have claimed, advanced or ended it
        if read is None or not plugin_decision(read, "", hook_session_id=data.session_id).ours:
            return HookOutcome()
        sid, record, carry = _state_session(home, data.session_id, read, clock)
        journal = Journal(
            journal_path(home.journals, sid), clock=clock, fsync=False
        )  # synced after the answer
        sink.use(journal, sid)
        state, note = reconcile(replace(read, ledger_session=sid), record)
        transcript, problem = transcript_problem(data)
        text: str | None = None
        turn: Scan | None = None
        if transcript is not None:
            try:
                text, turn = _turn(data, transcript, record.offset if record.started else carry)
            except OSError as exc:
                problem = f"transcript {transcript} cannot be read: {exc.strerror or exc}"
        decision = plugin_decision(state, text, hook_session_id=data.session_id, transcript_problem=problem)
        stop = _Stop(sid, state, text, turn, record.started, data)
        notes = [ev.ErrorRecorded(session_id=sid, component=RECONCILE, message=note)] if note else []
        return _commit(state_path, read, journal, decision, notes, stop)


RECONCILE: Final = "hook claude-code: reconcile"
"""The ``component`` of the ``error_recorded`` event a stop appends when it sets the state file's
iteration back to the journal's."""


def _read_state(path: Path) -> LoopState | None:
    try:
        return read_state(path)
    except StateError as exc:  # kept for the user to mend; the plugin would delete it
        raise HookInputError(str(exc)) from None


def _owned(data: HookInput, state_path: Path) -> bool:
    """Whether a state file is there and this stop's session may drive it (read without the lock:
    a loop claimed by another session stays that session's, so its stops never wait for ours)."""
    read = _read_state(state_path)
    return read is not None and plugin_decision(read, "", hook_session_id=data.session_id).ours


def reconcile(state: LoopState, record: LoopRecord) -> tuple[LoopState, str]:
    """The state with the journal's iteration when the two disagree, and a line saying so ("" when
    they agree). A stop rewrites the state file before it records its decision and answers only
    after both, so a state file ahead of the journal is a block that was never recorded nor
    delivered (the stop was killed, or its journal append failed): the journal says what the agent
    was told, and the loop goes on from there."""
    if not record.started or not record.iteration or state.iteration == record.iteration:
        return state, ""
    note = (
        f"the state file said iteration {state.iteration} and the journal iteration "
        f"{record.iteration}: continuing from {record.iteration} (a stop was interrupted between "
        "rewriting the state file and recording its decision)"
    )
    return replace(state, iteration=record.iteration), note


class _Stop(NamedTuple):
    """What one stop of a plugin loop records besides its decision."""

    sid: str
    state: LoopState
    text: str | None
    turn: Scan | None
    started: bool
    data: HookInput


def _commit(
    state_path: Path,
    read: LoopState,
    journal: Journal,
    decision: PluginDecision,
    notes: Sequence[ev.Event],
    stop: _Stop,
) -> HookOutcome:
    """Carry out a decision, in the one order that never lets the journal claim a decision the
    agent did not get: (1) the state file (a block's next iteration, or its removal), (2) the
    stop's events in one all-or-nothing append, (3) the answer. A state file that cannot be
    written turns a block into an allowed stop, recorded as such; a failed append puts the state
    file back (a kill between (1) and (2) is put right by the next stop: :func:`reconcile`)."""
    try:
        apply_decision(state_path, decision, current=read)
    except OSError as exc:
        line = _allowing(os_error(exc, f"writing {state_path}"))
        ending = decision.action == "allow"  # a loop that ended has ended, file or no file
        if decision.action == "block":  # the agent is allowed, and the loop stays where it was
            decision = PluginDecision(action="allow", outcome=decision.outcome, reason=line)
        error = ev.ErrorRecorded(session_id=stop.sid, component="hook claude-code", message=line)
        with contextlib.suppress(OSError):  # the stop is allowed whatever the journal can take
            journal.append(*notes, *_events(stop, decision, ending=ending), error)
        return HookOutcome(stderr=line + "\n")
    try:
        journal.append(*notes, *_events(stop, decision))
    except OSError as exc:
        line = _allowing(exc)
        if decision.action == "block":
            with contextlib.suppress(OSError):  # else the next stop's reconcile puts it back
                write_state(state_path, read)
        _record_error(journal, stop.sid, line)
        return HookOutcome(stderr=line + "\n")
    return msgspec.structs.replace(_outcome(decision), sync=(str(journal.path),))


def _allowing(exc: BaseException | str) -> str:
    """The one line a stop prints on stderr when ``exc`` (or what it says) makes it allow the stop."""
    return f"ralph-ledger hook: {exc if isinstance(exc, str) else one_line(exc, 300)}; allowing the stop"


def _state_session(
    home: Home, claude_session: str, state: LoopState, clock: Callable[[], datetime]
) -> tuple[str, LoopRecord, int]:
    """The ledger session of a plugin loop: the one its file names, else :func:`loop_session`'s
    (the running loop continues when it started with this file's ``started_at``, or, recorded
    before loops had their own session, when it is at this file's iteration)."""
    if state.ledger_session and belongs(state.ledger_session, claude_session):
        return state.ledger_session, *named_session(home, claude_session, state.ledger_session, clock)

    def same_loop(record: LoopRecord) -> bool:
        if "started_at" in record.config:
            return bool(record.config["started_at"] == state.started_at)
        return state.iteration > 1 and record.iteration == state.iteration

    return loop_session(home, claude_session, same_loop, clock)


def _outcome(decision: PluginDecision) -> HookOutcome:
    """Print what the plugin prints: the block JSON, or its message on allowing."""
    block = decision.hook_json()
    if block is not None:
        return HookOutcome(stdout=block + "\n")
    message = (decision.message_for_user + "\n") if decision.message_for_user else ""
    return HookOutcome(stderr=message) if decision.message_to_stderr else HookOutcome(stdout=message)


def _record_error(journal: Journal | None, sid: str, line: str) -> None:
    if journal is None or not sid:
        return
    with contextlib.suppress(OSError, JournalError):  # best effort: the stop is allowed whatever happens
        journal.append(ev.ErrorRecorded(session_id=sid, component="hook claude-code", message=line))


def main(stdin: Any = None, stdout: Any = None, stderr: Any = None, *, home: str | None = None) -> int:
    """Entry point: read stdin, print the outcome, exit 0. ``home`` is ``--home`` (see :func:`hook_home`)."""
    stdin = stdin or sys.stdin.buffer
    outcome = run(stdin.read(MAX_STDIN + 1), home_arg=home)
    out = stdout or sys.stdout
    out.write(outcome.stdout)
    out.flush()  # the answer first: a kill from here on leaves the agent's decision recorded
    (stderr or sys.stderr).write(outcome.stderr)
    for path in outcome.sync:
        sync_file(Path(path))
    return outcome.exit_code
