"""``ralph-ledger hook claude-code``: the Claude Code Stop hook.

Contract (``shared/fixtures/claude-code/README.md``): JSON on stdin
(``session_id``, ``transcript_path``, ``cwd``, ``stop_hook_active``, and
``last_assistant_message`` in newer versions). To continue the loop print
``{"decision": "block", "reason": <next prompt>, "systemMessage": <status>}``
and exit 0; to allow the stop print nothing and exit 0.

Drop-in for the ``ralph-loop`` plugin: when ``.claude/ralph-loop.local.md``
exists in the project, the decisions are the plugin's (``ledger.claude_code``),
and every stop is also recorded in the ledger as events of the session
``cc-<claude session id>``: the agent's turn read from the transcript (only the
bytes appended since the previous stop), promises, the stop decision, and how
the loop ended.

The hook never wedges the agent: any internal error allows the stop, prints
one line on stderr, exits 0, and records an ``error_recorded`` event when it
knows the session. It imports neither DuckDB nor pyarrow.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import msgspec

from ledger import events as ev
from ledger.claude_code import (
    LoopState,
    PluginDecision,
    StateError,
    apply_decision,
    plugin_decision,
    read_state,
)
from ledger.errors import one_line
from ledger.home import Home
from ledger.journal import Cursor, Journal, JournalError, check_session_id, journal_path, read_new, utc_now
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
    """What the hook process prints and its exit code (always 0)."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0


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


def ledger_session(claude_session: str) -> str:
    """The ledger session id of a Claude Code session."""
    return check_session_id(f"cc-{claude_session}")


def project_dir(data: HookInput) -> Path:
    """The project the hook runs for: ``cwd`` from stdin, which must be an existing directory."""
    cwd = Path(data.cwd or os.getcwd())
    if not cwd.is_absolute():
        raise HookInputError(f"cwd {data.cwd!r} is not an absolute path")
    cwd = cwd.resolve()
    if not cwd.is_dir():
        raise HookInputError(f"cwd {str(cwd)!r} is not a directory")
    return cwd


def transcript_of(data: HookInput) -> Path | None:
    """The transcript path from stdin, resolved; None when absent, relative, or not a regular file
    (a directory, a FIFO, a device, a symlink loop): reading those could block or never end."""
    if not data.transcript_path:
        return None
    try:
        path = Path(data.transcript_path).expanduser()
        if not path.is_absolute():
            return None
        path = path.resolve()
        return path if path.is_file() else None
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL byte, "~" with no home
        return None


def _previous_offset(journal: Journal) -> tuple[bool, int]:
    """(whether the session was started in the ledger, transcript offset of its last turn)."""
    if not journal.path.exists():
        return False, 0
    offset = 0
    started = False
    for e in read_new(journal.path, Cursor()).events:
        if isinstance(e, ev.SessionStarted):
            started = True
        elif isinstance(e, ev.AgentTurn) and e.transcript_offset:
            offset = e.transcript_offset
    return started, offset


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


def _events(
    sid: str,
    state: LoopState,
    decision: PluginDecision,
    text: str | None,
    turn: Scan | None,
    started: bool,
    data: HookInput,
) -> list[ev.Event]:
    """The events one stop appends, in order."""
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
                config={"mode": "ralph-loop", "claude_session_id": data.session_id},
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
    return []


def run(raw: bytes, *, home: Home | None = None, clock: Callable[[], datetime] = utc_now) -> HookOutcome:
    """One stop, fail-open: the outcome to print; never raises."""
    sid = ""
    journal: Journal | None = None
    try:
        data = parse_input(raw)
        sid = ledger_session(data.session_id)
        project = project_dir(data)
        home = home or Home.resolve(os.environ.get("RALPH_HOME") or project / ".ralph")
        journal = Journal(journal_path(home.journals, sid), clock=clock)
        if (project / LOOP_FILE).exists():  # a ledger-native loop: the engine decides (imports DuckDB)
            from ledger.hook_loop import native_stop

            return native_stop(data, project, home, project / LOOP_FILE, clock)
        state_path = project / STATE_FILE
        try:
            state = read_state(state_path)
        except StateError as exc:  # kept for the user to mend; the plugin would delete it
            raise HookInputError(str(exc)) from None
        if state is None:
            return HookOutcome()
        started, offset = _previous_offset(journal)
        transcript = transcript_of(data)
        text, turn = _turn(data, transcript, offset)
        decision = plugin_decision(state, text, hook_session_id=data.session_id)
        if not decision.ours:
            return HookOutcome()  # another Claude Code session's loop: never block or touch it
        journal.append(*_events(sid, state, decision, text, turn, started, data))
        apply_decision(state_path, decision, current=state)
        return _outcome(decision)
    except Exception as exc:  # the agent must never be wedged by the hook
        line = f"ralph-ledger hook: {one_line(exc, 300)}; allowing the stop"
        _record_error(journal, sid, line)
        return HookOutcome(stderr=line + "\n")


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


def main(stdin: Any = None, stdout: Any = None, stderr: Any = None) -> int:
    """Entry point: read stdin, print the outcome, exit 0."""
    stdin = stdin or sys.stdin.buffer
    outcome = run(stdin.read(MAX_STDIN + 1))
    (stdout or sys.stdout).write(outcome.stdout)
    (stderr or sys.stderr).write(outcome.stderr)
    return outcome.exit_code
