"""Ledger-native Claude Code loops: the project's rules and every guard, driven by the Stop hook.

``ralph-ledger loop start "PROMPT"`` in a project with a ralph configuration
(``ralph.toml`` or ``[tool.ralph]``) writes ``.claude/ralph-ledger.local.json``
instead of the ``ralph-loop`` plugin's state file. From then on every stop of
the Claude Code session that owns the loop is one iteration of the loop
engine (``ledger.loop.engine``): the turn is stdin's ``last_assistant_message`` and what the
transcript says it did (once it holds it: docs/design/claude-code-stop.md), and, when a ``todos``
rule is configured, the agent's todo list (its task list or its last ``TodoWrite``); the
configured validation rules run in the project, promises are detected, the
guards and hooks are evaluated and the signal table decides:

| signal    | the hook                                                            |
|-----------|---------------------------------------------------------------------|
| CONTINUE  | blocks the stop; the reason is the prompt plus the validation       |
|           | feedback (and, with ``summary = true``, the summary of the loop so   |
|           | far), the system message the iteration, score and failures          |
| COMPLETE  | allows the stop, completes the session, removes the loop file        |
| BLOCKED   | allows the stop (the session is blocked), removes the loop file      |
| ESCALATE  | allows the stop (the session is escalated), removes the loop file    |

A person steers the loop with ``ralph-ledger pause`` / ``resume`` / ``steer`` / ``unblock``
(``ledger.loop.steering.commands``): a paused loop's next stop is validated as usual and then allowed
("paused"; the loop file stays); the stops after it are allowed, unrecorded, until ``resume``; the
first stop after ``resume`` begins the next iteration and blocks with its prompt (the person's own
turns in between are not iterations). ``unblock`` writes the loop file again, and its next stop
likewise begins the next iteration and blocks with its prompt. Guidance given with ``steer``
is added once to the next iteration's prompt.

The loop file only says which Claude Code session owns the loop, what the
user asked and which ledger session records it; everything else (iteration,
scores, trips) is that session's. The first stop claims an unclaimed file for
its session, like the plugin, and names the loop's own ledger session in it
(``cc-<claude session id>`` for the session's first loop, ``cc-<id>-2``, ...
after it: ``ledger.drivers.claude_code.stop.stop_event.loop_session``); a stop of any other session never
blocks or touches the loop. Every block starts a new iteration, so seed 002's
``max_stop_retries`` (blocks within one iteration) never trips here: the
iteration guards bound the loop instead (``max_iterations`` is on by default).

This mode imports DuckDB (the guards read their facts with SQL); the plugin
drop-in mode does not.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import msgspec

from ledger import events as ev
from ledger.core.atomic import sweep_temps
from ledger.core.home import Home
from ledger.core.locks import loop_lock
from ledger.drivers.claude_code.stop import block_cap
from ledger.drivers.claude_code.stop.locate import HookInputError
from ledger.drivers.claude_code.stop.loop_file import (
    LoopFile,
    LoopFileError,
    claim,
    read_loop_file,
    write_loop_file,
)
from ledger.drivers.claude_code.stop.stop_event import (
    ErrorSink,
    HookInput,
    HookOutcome,
    TurnRead,
    catch_up,
    decision_point,
    lagging,
    read_turn,
    transcript_of,
    waiting_reason,
)
from ledger.drivers.claude_code.transcript.last_todos import find_last_todos
from ledger.drivers.claude_code.transcript.scan import scan
from ledger.loop.config.loop_config import (
    ConfigError,
    LoopConfig,
    agent_config,
    check_can_complete,
    find_config,
    source_of,
)
from ledger.loop.engine import Engine
from ledger.loop.engine_types import EngineError, Paused, ValidateResult
from ledger.loop.prompt.next_prompt import next_prompt
from ledger.loop.steering import commands as steering
from ledger.loop.validate.todos import todos_wanted
from ledger.storage.fold import events_of
from ledger.storage.journal import Journal, journal_path

AGENT: Final = "claude-code"
LAG: Final = "hook claude-code: transcript"


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
        task=loop.prompt[:500],
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


def status_line(result: ValidateResult, iteration: int, max_iterations: int) -> str:
    """The one-line system message shown to the user while the loop continues."""
    failing = [r.name for r in result.results if not r.passed]
    parts = [f"🔄 Ralph iteration {iteration} of {max_iterations}", f"score {result.score:.0f}"]
    parts.append(f"failing: {', '.join(failing)}" if failing else "validation passing")
    return " | ".join(parts)


def native_stop(
    data: HookInput,
    project: Path,
    home: Home,
    path: Path,
    clock: Callable[[], datetime],
    sink: ErrorSink | None = None,
) -> HookOutcome:
    """One stop of a ledger-native loop: what to print. Errors are recorded by the caller in
    ``sink``, which names the loop's session once it is known. The loop file is read, claimed and
    acted on under the loop lock (``ledger.core.locks``)."""
    loop = _loop_file(path)
    if loop is None or (loop.claude_session_id and loop.claude_session_id != data.session_id):
        return HookOutcome()  # no loop, or another Claude Code session's: never block or touch it
    with loop_lock(path.parent):
        loop = _loop_file(path)  # again: another stop may have claimed or ended it
        if loop is None or (loop.claude_session_id and loop.claude_session_id != data.session_id):
            return HookOutcome()
        return _owned_stop(data, project, home, path, loop, clock, sink)


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
) -> HookOutcome:
    """A stop of the loop this stop's session owns (or claims now)."""
    if data.last_assistant_message is None and data.transcript_path and transcript_of(data) is None:
        raise HookInputError(f"transcript {data.transcript_path!r} is not a readable file")
    claimed, record, carry = claim(loop, data, home, clock)
    if claimed != loop:
        write_loop_file(path, claimed)
        loop = claimed
    sid = loop.ledger_session
    engine = Engine(home, work_dir=project, clock=clock, fsync=False)  # synced after the answer
    journal = Journal(journal_path(home.journals, sid), clock=clock)
    if sink is not None:
        sink.use(journal, sid)
    rules = record.config.get("rules") or []
    summary = bool(record.config.get("summary"))  # as recorded: off costs nothing
    if not record.started:
        config = loop_config(project, loop)
        engine.start(sid, config, prompt=loop.prompt)  # the whole prompt: what an unblock tells again
        rules, summary = config.rules, config.summary
    elif record.ended:
        path.unlink(missing_ok=True)  # a loop file left over from a loop that ended
        sweep_temps(path)
        return HookOutcome()
    elif (held := _let_go(engine, path, loop, sid)) is not None:
        return msgspec.structs.replace(held, sync=(str(journal.path),))
    fields = data.stop_fields()
    waiting = data.running_subagents()
    if waiting:  # the client wakes the agent when they end: docs/design/claude-code-stop.md
        n = record.iteration or 1
        decision_point()
        reason = waiting_reason(waiting)
        wait = ev.StopDecided(
            session_id=sid, iteration=n, decision="allow", reason=reason, waiting=True, **fields
        )
        journal.append(wait)  # no agent_turn: the next stop reads this turn with its own
        return HookOutcome(sync=(str(journal.path),))
    start = record.offset if record.started else carry
    text, read = read_turn(data, start)
    turn = read.turn
    todos = None  # read only for a todos rule; the list outlives turns: the whole transcript's last
    if read.transcript is not None and todos_wanted(rules):
        todos = find_last_todos(read.transcript)
    result = engine.validate(
        sid,
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
    count = block_cap.cap_reached(events_of(journal.path), cap) if result.signal == "CONTINUE" else 0
    if not read.landed:  # docs/design/claude-code-stop.md
        ending = result.signal != "CONTINUE" or bool(count)
        _late(journal, sid, data, read, start, result.iteration, ending=ending)
    outcome = (
        _at_cap(engine, path, result, count, cap, fields)
        if count
        else _decide(engine, loop, path, result, summary, fields)
    )
    stderr = outcome.stderr + (warning + "\n" if warning and result.signal == "CONTINUE" else "")
    return msgspec.structs.replace(outcome, stderr=stderr, sync=(str(journal.path),))


def _late(
    journal: Journal, sid: str, data: HookInput, read: TurnRead, start: int, n: int, *, ending: bool
) -> None:
    """A turn that had not landed by the deadline: the next stop counts it (a line says so); at the
    stop that ends the loop, it is waited for longer and what lands is recorded now, once, as a
    second ``agent_turn`` of the iteration (the range past the first's ``end``)."""
    late = catch_up(data, read, start) if ending else read
    if late.landed and late.turn is not None:  # landed meanwhile: the rest of the range, once
        rest = late.turn
        if read.turn is not None and late.transcript is not None:
            rest = scan(late.transcript, read.turn.end)
        if rest.lines:
            journal.append(
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
            )
        return
    journal.append(ev.ErrorRecorded(session_id=sid, iteration=n, component=LAG, message=lagging(late)))


def _at_cap(
    engine: Engine, path: Path, result: ValidateResult, count: int, cap: int, fields: dict[str, Any]
) -> HookOutcome:
    """Allow the stop whose block would reach Claude Code's block cap (``block_cap``): the stop,
    the guard trip and the session's escalation in one append, then the loop file goes."""
    sid, n = result.session_id, result.iteration
    trip = block_cap.trip(sid, n, count, cap)
    message = block_cap.system_message(n, count, cap)
    decision_point()
    allowed = ev.StopDecided(session_id=sid, iteration=n, decision="allow", reason=message, **fields)
    engine.escalate(sid, trip.detail, guard=trip.guard, lead=[allowed, trip])
    path.unlink(missing_ok=True)
    sweep_temps(path)
    return HookOutcome(stdout=block_cap.allow_json(message))


def _decide(
    engine: Engine,
    loop: LoopFile,
    path: Path,
    result: ValidateResult,
    summary: bool,
    fields: dict[str, Any] | None = None,
) -> HookOutcome:
    """Record the stop decision and act on the signal. The decision lands in the same append as
    what it starts or ends (the next iteration, the session's end, with ``summary`` the summary of
    the loop given to the next) and the answer is printed after it; the loop file goes once the
    journal says the loop ended (a file left by a stop killed in between is removed by the next stop)."""
    sid, n = result.session_id, result.iteration
    refused = ""
    if result.signal == "CONTINUE":
        told = _summary(engine, sid, n, summary)
        block = {"decision": "block", "reason": "", "systemMessage": ""}

        def decided(iteration: int, max_iterations: int) -> list[ev.Event]:
            decision_point()  # as the append is made: a hook killed meanwhile gets nothing decided
            message = status_line(result, iteration, max_iterations)
            block["systemMessage"] = message
            return _blocked(sid, n, "loop continues", message, iteration, told, fields)

        try:
            advanced = engine.next(sid, lead=decided)
        except Paused:  # the iteration is done; the loop waits for `ralph-ledger resume`
            line = steering.paused_line(sid, n)
            decision_point()
            engine.journal(sid).append(
                ev.StopDecided(
                    session_id=sid,
                    iteration=n,
                    decision="allow",
                    reason="paused",
                    system_message=line,
                    **(fields or {}),
                )
            )
            return HookOutcome(stdout=line + "\n")
        except EngineError as exc:
            refused = str(exc)
        else:
            block["reason"] = next_prompt(loop.prompt, result, told, guidance=advanced.guidance)
            return HookOutcome(stdout=msgspec.json.encode(block).decode() + "\n")
    message = _ending(n, result, refused)
    decision_point()
    allowed = [
        ev.StopDecided(session_id=sid, iteration=n, decision="allow", reason=message, **(fields or {}))
    ]
    if result.signal == "COMPLETE":
        engine.complete(sid, result.detected_promise, lead=allowed)
    elif refused:
        engine.escalate(sid, refused, lead=allowed)
    else:  # BLOCKED / ESCALATE: validate recorded the session's end
        engine.journal(sid).append(*allowed)
    path.unlink(missing_ok=True)
    sweep_temps(path)
    return HookOutcome(stdout=message + "\n")


def _summary(engine: Engine, sid: str, n: int, wanted: bool) -> str:
    """The summary of the loop to give the iteration after ``n`` ("" unless the loop asked for it)."""
    if not wanted:
        return ""
    from ledger.loop.prompt.summary import summary_to_give  # only for a loop that asked for it

    return summary_to_give(engine, sid, n)


def _let_go(engine: Engine, path: Path, loop: LoopFile, sid: str) -> HookOutcome | None:
    """The stop of a loop a person let go (``steering.let_go``: paused, or unblocked) and nothing to
    say (``None``) otherwise. Asked to stop meanwhile: the loop ends blocked. Still paused: the stop
    is allowed again, nothing recorded. Else the next iteration begins and the agent is told its
    prompt, with the guidance."""
    s = engine.view(sid)
    if not steering.let_go(s.events):
        return None
    n = s.iteration
    if s.stop_requested() is not None:
        reason = steering.halt(engine, sid)
        path.unlink(missing_ok=True)
        sweep_temps(path)
        return HookOutcome(stdout=f"⛔ Ralph loop blocked at iteration {n}: {reason}\n")
    if steering.is_paused(s.events):
        return HookOutcome(stdout=steering.paused_line(sid, n) + "\n")
    block = {"decision": "block", "reason": "", "systemMessage": ""}
    told = _summary(engine, sid, n, s.config.summary)

    def decided(iteration: int, max_iterations: int) -> list[ev.Event]:
        decision_point()
        block["systemMessage"] = f"🔄 Ralph iteration {iteration} of {max_iterations} | resumed by a person"
        return _blocked(sid, n, "loop resumes", block["systemMessage"], iteration, told)

    learned = steering.learned(s.events, n)  # its iteration was validated: the next one begins now
    advanced = engine.next(sid, lead=decided)
    block["reason"] = next_prompt(loop.prompt, learned, told, guidance=advanced.guidance)
    return HookOutcome(stdout=msgspec.json.encode(block).decode() + "\n")


def _ending(n: int, result: ValidateResult, refused: str) -> str:
    """The line printed when the loop ends at iteration ``n``."""
    if result.signal == "COMPLETE":
        return f"✅ Ralph loop complete after {n} iteration(s): {result.reason}"
    if result.signal == "BLOCKED":
        return f"⛔ Ralph loop blocked at iteration {n}: {result.reason}"
    if result.signal == "ESCALATE":
        return f"🛑 Ralph loop escalated at iteration {n}: {result.reason}"
    return f"🛑 Ralph loop escalated at iteration {n}: {refused}"


def _blocked(
    sid: str,
    n: int,
    reason: str,
    message: str,
    iteration: int,
    told: str,
    fields: dict[str, Any] | None = None,
) -> list[ev.Event]:
    """The events of a stop blocked at iteration ``n`` so that ``iteration`` starts: the decision,
    then the loop summary its prompt carries (``told``; none when empty)."""
    given = [ev.SummaryGiven(session_id=sid, iteration=iteration, loop_summary=told)] if told else []
    decided = ev.StopDecided(
        session_id=sid, iteration=n, decision="block", reason=reason, system_message=message, **(fields or {})
    )
    return [decided, *given]
