"""Claude Code's ``SubagentStop``: a sub-agent's run, recorded for its parent loop.

The loop is found as a stop finds it; its ledger session gets one ``subagent_stopped`` event at its
current iteration (the sub-agent's transcript read from where its previous record stopped: tokens,
tool calls, edited files). A SubagentStop never blocks, prints nothing and imports neither DuckDB
nor pyarrow. The rules: docs/design/claude-code-stop.md#subagentstop.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Final

from msgspec.structs import replace

from ledger import events as ev
from ledger.core.home import Home
from ledger.core.locks import loop_lock
from ledger.drivers.claude_code.stop.error_sink import ErrorSink
from ledger.drivers.claude_code.stop.locate import LOOP_FILE, STATE_FILE, HookInputError
from ledger.drivers.claude_code.stop.loop_file import LoopFileError, claim, read_loop_file, write_loop_file
from ledger.drivers.claude_code.stop.loop_sessions import state_session
from ledger.drivers.claude_code.stop.plugin import StateError, plugin_decision, read_state, write_state
from ledger.drivers.claude_code.stop.stop_input import HookInput, HookOutcome
from ledger.drivers.claude_code.stop.turn_wait import await_turn, lagging
from ledger.storage.fold import events_of
from ledger.storage.journal import Journal, journal_path

SUBAGENT_STOP: Final = "SubagentStop"
COMPONENT: Final = "hook claude-code: SubagentStop"
"""The ``component`` of the ``error_recorded`` event when the sub-agent's transcript cannot be read."""


def subagent_stop(
    data: HookInput,
    project: Path,
    home: Home,
    clock: Callable[[], datetime],
    sink: ErrorSink,
    stop_id: str = "",
) -> HookOutcome:
    """Record one SubagentStop in its parent loop's session (nothing when there is none); the
    outcome allows, printing nothing but a line on stderr when the sub-agent's transcript cannot
    be read. One whose identity ``stop_id`` is recorded already (run again after its warm worker
    was lost) records nothing more."""
    native = (project / LOOP_FILE).exists()
    path = project / (LOOP_FILE if native else STATE_FILE)
    with loop_lock(path.parent):
        parent = (
            _native_parent(data, path, home, clock) if native else _plugin_parent(data, path, home, clock)
        )
        if parent is None:
            return HookOutcome()
        sid, iteration = parent
        journal = Journal(journal_path(home.journals, sid), clock=clock, fsync=False)  # synced after
        sink.use(journal, sid)
        if _recorded(journal, stop_id):
            return HookOutcome(sync=(str(journal.path),))
        event, problem = _event(data, sid, iteration, journal)
        event = replace(event, stop_id=stop_id)
        notes = [ev.ErrorRecorded(session_id=sid, iteration=iteration, component=COMPONENT, message=problem)]
        journal.append(event, *(notes if problem else []))
    line = f"ralph-ledger hook: {SUBAGENT_STOP}: {problem}; its tokens are not counted\n" if problem else ""
    return HookOutcome(stderr=line, sync=(str(journal.path),))


def _native_parent(
    data: HookInput, path: Path, home: Home, clock: Callable[[], datetime]
) -> tuple[str, int] | None:
    """The ledger session and iteration of this session's ledger-native loop (claiming an
    unclaimed loop file as its first stop would), or None."""
    try:
        loop = read_loop_file(path)
    except LoopFileError as exc:
        raise HookInputError(str(exc)) from None
    if loop is None or (loop.claude_session_id and loop.claude_session_id != data.session_id):
        return None
    claimed, record, _ = claim(loop, data, home, clock)
    if record.ended:
        return None
    if claimed != loop:
        write_loop_file(path, claimed)
    return claimed.ledger_session, record.iteration or 1


def _plugin_parent(
    data: HookInput, path: Path, home: Home, clock: Callable[[], datetime]
) -> tuple[str, int] | None:
    """The ledger session and iteration of this session's drop-in loop (claiming an unclaimed
    state file as its first stop would), or None."""

    try:
        state = read_state(path)
    except StateError as exc:  # kept for the user to mend, as a stop keeps it
        raise HookInputError(str(exc)) from None
    if state is None or not plugin_decision(state, "", hook_session_id=data.session_id).ours:
        return None
    sid, record, _ = state_session(home, data.session_id, state, clock)
    if record.ended:
        return None
    claimed = replace(state, session_id=data.session_id, ledger_session=sid)
    if claimed != state:
        write_state(path, claimed)
    return sid, record.iteration if record.started else state.iteration


def _event(data: HookInput, sid: str, iteration: int, journal: Journal) -> tuple[ev.SubagentStopped, str]:
    """The ``subagent_stopped`` event, and what is wrong with the sub-agent's transcript ("" when
    it was read or none was named)."""
    agent_id = data.agent_id or ""
    given = data.agent_transcript_path
    start = _read_up_to(journal, agent_id, _resolved(given)) if given else 0
    read = await_turn(given, "agent_transcript_path", data.last_assistant_message, start)
    transcript, problem, turn = read.transcript, read.problem, read.turn
    if transcript is not None and not read.landed:
        problem = lagging(read)
    elif not given:
        problem = ""  # an older Claude Code: the main transcript holds the sub-agent's lines
    text = (
        data.last_assistant_message
        if data.last_assistant_message is not None
        else turn.last_text
        if turn
        else ""
    )
    event = ev.SubagentStopped(
        session_id=sid,
        iteration=iteration,
        agent_id=agent_id,
        agent_type=data.agent_type or "",
        transcript_path=str(transcript or data.agent_transcript_path or ""),
        transcript_offset=turn.end if turn else 0,
        tokens=turn.tokens if turn else ev.TokenUsage(),
        tool_count=turn.tool_count if turn else 0,
        files_modified=turn.files_modified if turn else [],
        output_excerpt=text[-2000:],
        model=turn.model if turn else "",
    )
    return event, problem


def _resolved(given: str) -> str:
    """The path a SubagentStopped event names for ``given`` (resolved as ``resolve_transcript``
    resolves it, whether or not the file is there yet)."""
    try:
        return str(Path(given).expanduser().resolve())
    except (OSError, RuntimeError, ValueError):
        return given


def _recorded(journal: Journal, stop_id: str) -> bool:
    """Whether this very SubagentStop was recorded already (docs/design/warm-worker.md)."""
    if not stop_id or not journal.path.exists():
        return False
    return any(isinstance(e, ev.SubagentStopped) and e.stop_id == stop_id for e in events_of(journal.path))


def _read_up_to(journal: Journal, agent_id: str, transcript: str) -> int:
    """Where this sub-agent's transcript was read up to by its latest record in the loop (0: none)."""
    offset = 0
    for e in events_of(journal.path):
        if isinstance(e, ev.SubagentStopped) and e.agent_id == agent_id and e.transcript_path == transcript:
            offset = e.transcript_offset
    return offset
