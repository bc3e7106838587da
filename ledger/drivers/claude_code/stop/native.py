"""Ledger-native Claude Code loops: the project's rules and every guard, driven by the Stop hook.

``ralph-ledger loop start`` in a project with a ralph configuration writes
``.claude/ralph-ledger.local.json``; from then on every stop of the Claude Code session that owns
the loop is one iteration of the loop step (``ledger.loop.step``): CONTINUE blocks the stop with the
next prompt, an ending allows it and removes the loop file. The loop file says only which session
owns the loop, what the user asked and which ledger session records it. What each signal does, and
steering: docs/claude-code.md, docs/steering.md; what a stop decides from:
docs/design/claude-code-stop.md. This mode imports DuckDB (the guards read their facts with SQL).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from ledger import events as ev
from ledger.core.atomic import sweep_temps
from ledger.core.home import Home
from ledger.core.locks import loop_lock
from ledger.drivers.claude_code.stop import block_cap
from ledger.drivers.claude_code.stop.error_sink import ErrorSink
from ledger.drivers.claude_code.stop.locate import HookInputError
from ledger.drivers.claude_code.stop.loop_file import (
    AGENT,
    LoopFile,
    LoopFileError,
    claim,
    read_loop_file,
    write_loop_file,
)
from ledger.drivers.claude_code.stop.requester import decision_point
from ledger.drivers.claude_code.stop.stop_input import HookInput, HookOutcome, transcript_of, waiting_reason
from ledger.drivers.claude_code.stop.turn_wait import LAG, TurnRead, catch_up, lagging, read_turn
from ledger.drivers.claude_code.transcript.last_todos import find_last_todos
from ledger.drivers.claude_code.transcript.scan import scan
from ledger.loop.config.loop_config import (
    ConfigError,
    LoopConfig,
    agent_config,
    changed_settings,
    check_can_complete,
    find_config,
    source_of,
)
from ledger.loop.decision import Turn
from ledger.loop.engine import Engine
from ledger.loop.step import Continue, Decision, End, LoopSession, Wait
from ledger.loop.validate.todos import todos_wanted
from ledger.notify import notify_events
from ledger.storage.journal import journal_path


def loop_config(project: Path, loop: LoopFile) -> LoopConfig:
    """The project's configuration, with the loop's agent's definition when it names one
    (``agent_config``), then the loop's task and overrides; ``HookInputError`` when bad."""
    try:
        config = find_config(project)
        if loop.agent:  # the agent's iteration: block, then loop start's own overrides
            config = agent_config(project, loop.agent, config)
    except ConfigError as exc:
        raise HookInputError(str(exc)) from None
    promises, exclusive = config.completion_promises, config.exclusive_promises
    if loop.completion_promise:  # as the plugin's --completion-promise: that phrase and no other
        promises, exclusive = [loop.completion_promise], True
    config = msgspec.structs.replace(
        config,
        task=loop.prompt[:500] or (f"{Path(loop.tasks).name} (task list)" if loop.tasks else ""),
        agent=config.agent or AGENT,
        kind=loop.kind or config.kind,
        max_iterations=loop.max_iterations or config.max_iterations,
        completion_promises=promises,
        exclusive_promises=exclusive,
    )
    try:
        check_can_complete(config, *source_of(project))
    except ConfigError as exc:  # refused by loop start before any loop file is written
        raise HookInputError(f"{exc}; or give loop start --completion-promise PHRASE") from None
    return config


def _task_list(project: Path, home: Home, loop: LoopFile) -> dict[str, Any]:
    """``engine.start``'s task list of a ``loop start --tasks`` loop (none without one): the file read
    now, recorded relative to the folder holding the home (docs/tasks.md); a file that no longer reads
    is the hook's one line."""
    if not loop.tasks:
        return {}
    from ledger.core.errors import TaskFileError
    from ledger.loop.tasks.files import read_tasks
    from ledger.loop.tasks.progress import file_record

    try:
        tasks = read_tasks(Path(loop.tasks))
    except TaskFileError as exc:
        raise HookInputError(f"--tasks {exc}") from None
    return {"task_list": tasks.tasks, "task_file": file_record(home.root.parent, tasks.path)}


def config_note(project: Path, loop: LoopFile, recorded: dict[str, Any]) -> str:
    """One line when the project's configuration no longer gives what the running loop started with
    (``recorded``): the loop runs with what it started with (docs/design/loop-config.md), and each
    block says so, naming the settings that differ, or why the file cannot be read; "" otherwise."""
    try:
        changed = changed_settings(recorded, loop_config(project, loop))
    except HookInputError as exc:
        return f"⚠ {exc}; this loop goes on with the configuration it started with"
    if not changed:
        return ""
    return (
        f"⚠ {source_of(project)[0]} changed since this loop started ({', '.join(changed)}); it goes on "
        "with the configuration it started with (`ralph-ledger set` changes its limits, a new "
        "`loop start` takes the file)"
    )


def native_stop(
    data: HookInput,
    project: Path,
    home: Home,
    path: Path,
    clock: Callable[[], datetime],
    sink: ErrorSink | None = None,
    stop_id: str = "",
) -> HookOutcome:
    """One stop of a ledger-native loop: what to print. Errors are recorded by the caller in
    ``sink``, which names the loop's session once it is known. The loop file is read, claimed and
    acted on under the loop lock (``ledger.core.locks``). A stop whose identity ``stop_id`` is
    recorded already (run again after its warm worker was lost) is answered as it was."""
    loop = _loop_file(path)
    if loop is None or (loop.claude_session_id and loop.claude_session_id != data.session_id):
        return HookOutcome()  # no loop, or another Claude Code session's: never block or touch it
    with loop_lock(path.parent):
        loop = _loop_file(path)  # again: another stop may have claimed or ended it
        if loop is None or (loop.claude_session_id and loop.claude_session_id != data.session_id):
            return HookOutcome()
        return _owned_stop(data, project, home, path, loop, clock, sink, stop_id)


def _loop_file(path: Path) -> LoopFile | None:
    try:
        return read_loop_file(path)
    except LoopFileError as exc:
        raise HookInputError(str(exc)) from None


def _owned_stop(
    data: HookInput,
    project: Path,
    home: Home,
    path: Path,
    loop: LoopFile,
    clock: Callable[[], datetime],
    sink: ErrorSink | None,
    stop_id: str = "",
) -> HookOutcome:
    """A stop of the loop this stop's session owns (or claims now)."""
    if data.last_assistant_message is None and data.transcript_path and transcript_of(data) is None:
        raise HookInputError(f"transcript {data.transcript_path!r} is not a readable file")
    claimed, record, carry = claim(loop, data, home, clock)
    if claimed != loop:
        write_loop_file(path, claimed)
        loop = claimed
    sid = loop.ledger_session
    engine = Engine(home, work_dir=project, clock=clock, fsync=False, notify=notify_events)  # synced later
    synced = (str(journal_path(home.journals, sid)),)  # the journal synced after the answer
    if sink is not None:
        sink.use_session(home, sid, clock)
    rules = record.config.get("rules") or []
    session = LoopSession(engine, sid, loop.prompt)
    done = session.recorded_stop(stop_id) if record.started else None
    if done is not None:  # this very stop was decided before its answer was lost: that answer
        if record.ended:
            path.unlink(missing_ok=True)
            sweep_temps(path)
        return HookOutcome(stdout=done.answer, sync=synced)
    if not record.started:
        config = loop_config(project, loop)
        engine.start(sid, config, prompt=loop.prompt, **_task_list(project, home, loop))
        rules = config.rules  # the prompt above is the whole prompt: what an unblock tells again
    elif record.ended:
        path.unlink(missing_ok=True)  # a loop file left over from a loop that ended
        sweep_temps(path)
        return HookOutcome()
    note = config_note(project, loop, record.config) if record.started else ""
    if record.started and not record.ended and session.let_go():  # a person paused or unblocked it
        return _went_on(session.resume(_resumed(sid, note, stop_id)), path, synced, note)
    fields = data.stop_fields(stop_id)
    waiting = data.running_subagents()
    if waiting:  # the client wakes the agent when they end: docs/design/claude-code-stop.md
        n = record.iteration or 1
        decision_point()
        reason = waiting_reason(waiting)
        wait = ev.StopDecided(
            session_id=sid, iteration=n, decision="allow", reason=reason, waiting=True, **fields
        )
        session.record(wait)  # no agent_turn: the next stop reads this turn with its own
        return HookOutcome(sync=synced)
    start = record.offset if record.started else carry
    text, read = read_turn(data, start)
    turn = read.turn
    todos = None  # read only for a todos rule; the list outlives turns: the whole transcript's last
    if read.transcript is not None and todos_wanted(rules):
        todos = find_last_todos(read.transcript)
    said = Turn(
        text or "",
        files_modified=turn.files_modified if turn else (),
        tool_count=turn.tool_count if turn else 0,
        stop_reason=turn.stop_reason if turn else "",
        tokens=turn.tokens if turn else None,
        transcript_offset=turn.end if turn else 0,
        todos=todos,
        model=turn.model if turn else "",
        context_tokens=turn.context_tokens if turn else 0,
    )
    cap, warning = block_cap.block_cap()
    progress = ev.AgentTurn(session_id=sid, tool_count=said.tool_count)  # this stop's, for the count
    count = block_cap.cap_reached([*session.events(), progress], cap)
    n = record.iteration or 1
    limit = block_cap.trip(sid, n, count, cap) if count else None

    def lead(decision: Decision) -> list[ev.Event]:
        """This stop's own events: a late turn, then the stop decision (docs/design/claude-code-stop.md)."""
        late = (
            []
            if read.landed
            else _late(sid, data, read, start, decision.iteration, ending=isinstance(decision, End))
        )
        return [*late, _stop_decided(sid, decision, count, cap, fields, note)]

    decision = session.take_turn(said, lead, limit=limit)
    outcome = _answer(decision, path, count, cap, note)
    stderr = outcome.stderr + (warning + "\n" if warning and not isinstance(decision, End) else "")
    return msgspec.structs.replace(outcome, stderr=stderr, sync=synced)


def _late(sid: str, data: HookInput, read: TurnRead, start: int, n: int, *, ending: bool) -> list[ev.Event]:
    """A turn that had not landed by the deadline: the next stop counts it (a line says so); at the
    stop that ends the loop, it is waited for longer and what lands is recorded now, once, as a
    second ``agent_turn`` of the iteration (the range past the first's ``end``)."""
    late = catch_up(data, read, start) if ending else read
    if late.landed and late.turn is not None:  # landed meanwhile: the rest of the range, once
        rest = late.turn
        if read.turn is not None and late.transcript is not None:
            rest = scan(late.transcript, read.turn.end)
        if not rest.lines:
            return []
        return [
            ev.AgentTurn(
                session_id=sid,
                iteration=n,
                output_excerpt=(data.last_assistant_message or "")[-2000:],
                files_modified=rest.files_modified,
                tool_count=rest.tool_count,
                stop_reason=rest.stop_reason,
                tokens=rest.tokens,
                transcript_offset=rest.end,
                model=rest.model,
                context_tokens=rest.context_tokens,
            )
        ]
    return [ev.ErrorRecorded(session_id=sid, iteration=n, component=LAG, message=lagging(late))]


def _stop_decided(
    sid: str, decision: Decision, count: int, cap: int, fields: dict[str, Any], note: str = ""
) -> ev.StopDecided:
    """The stop's decision as recorded: a block that begins the next iteration (at the iteration
    validated; its system message as shown, ``config_note``'s line with it), or an allowed stop
    (paused, ended, or at Claude Code's block cap)."""
    decision_point()  # as the append is made: a hook killed meanwhile gets nothing decided
    result = decision.result
    n = result.iteration if result is not None else decision.iteration
    answer = _printed(decision, count, cap, note)  # what a stop run again is answered
    if isinstance(decision, Continue):
        return ev.StopDecided(
            session_id=sid,
            iteration=n,
            decision="block",
            reason="loop continues",
            system_message=_shown(decision.status, note),
            answer=answer,
            **fields,
        )
    if isinstance(decision, Wait):
        line = decision.line
        return ev.StopDecided(
            session_id=sid,
            iteration=n,
            decision="allow",
            reason="paused",
            system_message=line,
            answer=answer,
            **fields,
        )
    reason = block_cap.system_message(n, count, cap) if decision.guard == block_cap.GUARD else decision.line
    return ev.StopDecided(
        session_id=sid, iteration=n, decision="allow", reason=reason, answer=answer, **fields
    )


def _shown(status: str, note: str) -> str:
    """A block's system message: the iteration's status line, then ``config_note``'s line if any."""
    return f"{status}\n{note}" if note else status


def _resumed(sid: str, note: str = "", stop_id: str = "") -> Callable[[Decision], list[ev.Event]]:
    """The events of the stop that lets a loop go on after a person let it go: a block, when the
    next iteration begins (a stop asked for meanwhile ends it blocked, nothing else recorded)."""

    def lead(decision: Decision) -> list[ev.Event]:
        if not isinstance(decision, Continue):
            return []
        decision_point()
        return [
            ev.StopDecided(
                session_id=sid,
                iteration=decision.iteration - 1,
                decision="block",
                reason="loop resumes",
                system_message=_shown(decision.status, note),
                stop_id=stop_id,
                answer=_printed(decision, 0, 0, note),
            )
        ]

    return lead


def _went_on(decision: Decision, path: Path, synced: tuple[str, ...], note: str = "") -> HookOutcome:
    """The answer to the stop of a loop a person let go (``LoopSession.resume``)."""
    return msgspec.structs.replace(_answer(decision, path, 0, 0, note), sync=synced)


def _answer(decision: Decision, path: Path, count: int, cap: int, note: str = "") -> HookOutcome:
    """What the hook prints for a decision (:func:`_printed`); the loop file goes once the journal
    says the loop ended."""
    if isinstance(decision, End):
        path.unlink(missing_ok=True)
        sweep_temps(path)
    return HookOutcome(stdout=_printed(decision, count, cap, note))


def _printed(decision: Decision, count: int, cap: int, note: str = "") -> str:
    """What the hook prints for a decision: a block with the next prompt (its system message with
    ``note``), a line when the loop waits or ends, the block cap's allow."""
    if isinstance(decision, Continue):
        block = {
            "decision": "block",
            "reason": decision.prompt,
            "systemMessage": _shown(decision.status, note),
        }
        return msgspec.json.encode(block).decode() + "\n"
    if isinstance(decision, Wait):
        return decision.line + "\n"
    if decision.guard == block_cap.GUARD:
        n = decision.result.iteration if decision.result is not None else decision.iteration
        return block_cap.allow_json(block_cap.system_message(n, count, cap))
    return decision.line + "\n"
