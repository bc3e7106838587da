"""The ``ralph-loop`` plugin drop-in: one stop of a plugin loop decided by the plugin's own rules
(``ledger.drivers.claude_code.stop.plugin``), steered by a person (``ledger.loop.decision.steered``),
bounded by Claude Code's block cap, and recorded as the loop's session's events. Imports neither
DuckDB nor pyarrow. What a stop reads, decides and records: ``docs/claude-code-plugin.md`` ("The
hook, stop by stop")."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Final, NamedTuple

import msgspec
from msgspec.structs import replace

from ledger import events as ev
from ledger.core.errors import os_error
from ledger.core.home import Home
from ledger.core.locks import loop_lock
from ledger.drivers.claude_code.stop import block_cap
from ledger.drivers.claude_code.stop.error_sink import ErrorSink, allowing, record_error
from ledger.drivers.claude_code.stop.locate import (
    HookInputError,
)
from ledger.drivers.claude_code.stop.loop_sessions import LoopRecord, state_session
from ledger.drivers.claude_code.stop.plugin import (
    LoopState,
    PluginDecision,
    StateError,
    apply_decision,
    plugin_decision,
    read_state,
    write_state,
)
from ledger.drivers.claude_code.stop.requester import RequesterGone, decision_point
from ledger.drivers.claude_code.stop.stop_input import HookInput, HookOutcome, waiting_reason
from ledger.drivers.claude_code.stop.turn_wait import LAG, catch_up, lagging, read_turn
from ledger.drivers.claude_code.transcript.scan import Scan
from ledger.loop.decision import Continue, Wait, recorded_stop, steered
from ledger.loop.validate.promises import detect_promises, to_event
from ledger.notify import notify_events
from ledger.storage.fold import events_of
from ledger.storage.journal import Journal, journal_path


def _events(stop: _Stop, decision: PluginDecision, *, ending: bool = True) -> list[ev.Event]:
    """The events one stop appends, in order (without how the loop goes on or ends when not
    ``ending``)."""
    sid, state, text, _, started, data, capped, *_ = stop
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
    waiting = decision.outcome == "waiting"  # the turn is read with the next stop's
    if not waiting:
        out.append(_turn(stop))
    if stop.lag:
        out.append(ev.ErrorRecorded(session_id=sid, iteration=n, component=LAG, message=stop.lag))
    custom = [state.completion_promise] if state.completion_promise else []
    promises = [] if waiting else detect_promises(text, custom=custom).promises
    out += [to_event(p, session_id=sid, iteration=n) for p in promises]
    out.append(
        ev.StopDecided(
            session_id=sid,
            iteration=n,
            decision=decision.action,
            reason=decision.reason if decision.action == "allow" else "loop continues",
            system_message=decision.system_message,
            waiting=waiting,
            answer=_outcome(decision).stdout,  # what a stop run again is answered
            **data.stop_fields(stop.stop_id),
        )
    )
    if ending:
        out += _ending(sid, state, decision, capped, stop.guidance)
    return out


def _turn(stop: _Stop) -> ev.AgentTurn:
    """The ``agent_turn`` of one stop: the text it answers from, what the transcript says it did."""
    text, turn = stop.text or "", stop.turn
    return ev.AgentTurn(
        session_id=stop.sid,
        iteration=stop.state.iteration,
        output_excerpt=text[-2000:],
        files_modified=turn.files_modified if turn else [],
        tool_count=turn.tool_count if turn else 0,
        stop_reason=turn.stop_reason if turn else "",
        tokens=turn.tokens if turn else ev.TokenUsage(),
        transcript_offset=turn.end if turn else 0,
        model=turn.model if turn else "",
        context_tokens=turn.context_tokens if turn else 0,
    )


def _ending(
    sid: str, state: LoopState, decision: PluginDecision, capped: tuple[int, int], guidance: str
) -> list[ev.Event]:
    n = state.iteration
    if decision.outcome in ("paused", "waiting"):  # the loop stays at its iteration
        return []
    if decision.outcome == "block_cap":  # Claude Code would have dropped this block: see block_cap
        trip = block_cap.trip(sid, n, *capped)
        return [trip, ev.SessionEscalated(session_id=sid, iteration=n, guard=trip.guard, reason=trip.detail)]
    if decision.action == "block" and decision.next_state is not None:
        nxt = decision.next_state
        return [
            ev.IterationStarted(
                session_id=sid,
                iteration=nxt.iteration,
                max_iterations=nxt.max_iterations or None,
                guidance=guidance,
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


def dropin_stop(
    data: HookInput,
    state_path: Path,
    home: Home,
    clock: Callable[[], datetime],
    sink: ErrorSink,
    stop_id: str = "",
) -> HookOutcome:
    """One stop of a ``ralph-loop`` plugin loop: the plugin's decision, recorded. The state is read,
    decided on and written under the loop lock (``ledger.core.locks``); see :func:`_commit` for the
    order of effects. A stop whose identity ``stop_id`` is recorded already (run again after its
    warm worker was lost) is answered as it was, and nothing is changed."""
    if not _owned(data, state_path):
        return HookOutcome()  # no loop, or another Claude Code session's: never block or touch it
    with loop_lock(state_path.parent):
        read = _read_state(state_path)  # again: another stop may have claimed, advanced or ended it
        if read is None or not plugin_decision(read, "", hook_session_id=data.session_id).ours:
            return HookOutcome()
        sid, record, carry = state_session(home, data.session_id, read, clock)
        journal = Journal(
            journal_path(home.journals, sid), clock=clock, fsync=False
        )  # synced after the answer
        sink.use(journal, sid)
        done = recorded_stop(events_of(journal.path), stop_id) if record.started else None
        if done is not None:  # this very stop was decided before its answer was lost: that answer
            return HookOutcome(stdout=done.answer, sync=(str(journal.path),))
        state, note = reconcile(replace(read, ledger_session=sid), record)
        waiting = data.running_subagents()
        if waiting:  # the client wakes the agent when they end: docs/design/claude-code-stop.md
            claimed = replace(state, session_id=data.session_id)
            decision = PluginDecision(
                action="allow", outcome="waiting", reason=waiting_reason(waiting), next_state=claimed
            )
            said = data.last_assistant_message
            stop = _Stop(sid, claimed, said, None, record.started, data, stop_id=stop_id)
            notes = [ev.ErrorRecorded(session_id=sid, component=RECONCILE, message=note)] if note else []
            return _commit(state_path, read, journal, decision, notes, stop)
        start = record.offset if record.started else carry
        text, got = read_turn(data, start)
        problem = got.problem if text is None else ""  # decided from last_assistant_message
        decision = plugin_decision(state, text, hook_session_id=data.session_id, transcript_problem=problem)
        lag = "" if got.landed else lagging(got)  # counted by the next stop: docs/design/claude-code-stop.md
        stop = _Stop(sid, state, text, got.turn, record.started, data, lag=lag, stop_id=stop_id)
        notes = [ev.ErrorRecorded(session_id=sid, component=RECONCILE, message=note)] if note else []
        warning = ""
        if decision.action == "block":
            decision, stop = _steered(decision, stop, journal)
        if decision.action == "block":
            decision, stop, warning = _capped(decision, stop, journal)
        if decision.action == "allow" and decision.outcome != "paused" and not got.landed:
            got = catch_up(data, got, start)  # the loop ends: no later stop reads on from here
            stop = stop._replace(turn=got.turn, lag="" if got.landed else lagging(got))
        outcome = _commit(state_path, read, journal, decision, notes, stop)
        return replace(outcome, stderr=outcome.stderr + warning + "\n") if warning else outcome


def _steered(decision: PluginDecision, stop: _Stop, journal: Journal) -> tuple[PluginDecision, _Stop]:
    """A block as a person steered it (``ledger.loop.step.steered``): while the loop is paused the
    stop is allowed ("paused") and the state file left at its iteration, so the next stop after
    ``resume`` goes on as the plugin would; else the prompt carries the pending guidance, once."""
    steering = steered(events_of(journal.path), stop.sid, stop.state.iteration, decision.reason)
    if isinstance(steering, Wait):
        paused = PluginDecision(
            action="allow",
            outcome="paused",
            reason="paused",
            next_state=stop.state,
            message_for_user=steering.line,
        )
        return paused, stop
    if isinstance(steering, Continue):
        return replace(decision, reason=steering.prompt), stop._replace(guidance=steering.guidance)
    return decision, stop


def _capped(decision: PluginDecision, stop: _Stop, journal: Journal) -> tuple[PluginDecision, _Stop, str]:
    """The block, or the allowed stop that ends the loop when the block would reach Claude Code's
    block cap (``block_cap``); and the line for stderr when the cap's variable is bad."""
    cap, warning = block_cap.block_cap()
    count = block_cap.cap_reached([*events_of(journal.path), _turn(stop)], cap)
    if not count:
        return decision, stop, warning
    allowed = PluginDecision(
        action="allow",
        outcome="block_cap",
        reason=block_cap.trip_reason(count, cap),
        next_state=None,
        message_for_user=block_cap.system_message(stop.state.iteration, count, cap),
    )
    return allowed, stop._replace(capped=(count, cap)), warning


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
    capped: tuple[int, int] = (0, 0)  # the block count and the cap, when the stop is allowed at the cap
    guidance: str = ""  # a person's guidance the block's prompt carries (``_steered``)
    lag: str = ""  # the turn had not landed in the transcript by the deadline: why (``lagging``)
    stop_id: str = ""  # the stop's identity (``HookInput.stop_id``)


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
    file back (a kill between (1) and (2) is put right by the next stop: :func:`reconcile`). Served
    by the warm worker for a hook process killed before (2), nothing is decided: the state file is
    put back (``decision_point``)."""
    decision_point()
    try:
        apply_decision(state_path, decision, current=read)
    except OSError as exc:
        line = allowing(os_error(exc, f"writing {state_path}"))
        ending = decision.action == "allow"  # a loop that ended has ended, file or no file
        if decision.action == "block":  # the agent is allowed, and the loop stays where it was
            decision = PluginDecision(action="allow", outcome=decision.outcome, reason=line)
        error = ev.ErrorRecorded(session_id=stop.sid, component="hook claude-code", message=line)
        with contextlib.suppress(OSError):  # the stop is allowed whatever the journal can take
            journal.append(*notes, *_events(stop, decision, ending=ending), error)
        return HookOutcome(stderr=line + "\n")
    try:
        decision_point()  # again as the append is made: what is left is the append, the reply, the print
    except RequesterGone:
        with contextlib.suppress(OSError):  # else the next stop's reconcile puts it back
            write_state(state_path, read)
        raise
    events = [*notes, *_events(stop, decision)]
    try:
        journal.append(*events)
    except OSError as exc:
        line = allowing(exc)
        if decision.action == "block":
            with contextlib.suppress(OSError):  # else the next stop's reconcile puts it back
                write_state(state_path, read)
        record_error(journal, stop.sid, line)
        return HookOutcome(stderr=line + "\n")
    notify_events(journal.path, events, state_path.parent.parent)  # detached: nothing waits for it
    return msgspec.structs.replace(_outcome(decision), sync=(str(journal.path),))


def _outcome(decision: PluginDecision) -> HookOutcome:
    """Print what the plugin prints: the block JSON, or its message on allowing (at the block cap,
    shown to the user as a ``systemMessage``)."""
    if decision.outcome == "block_cap" and decision.message_for_user:
        return HookOutcome(stdout=block_cap.allow_json(decision.message_for_user))
    block = decision.hook_json()
    if block is not None:
        return HookOutcome(stdout=block + "\n")
    message = (decision.message_for_user + "\n") if decision.message_for_user else ""
    return HookOutcome(stderr=message) if decision.message_to_stderr else HookOutcome(stdout=message)
