"""What a loop step takes and answers (docs/design/loop-step.md): a driver's ``Turn``, the loop's
``Decision`` (``Continue``, ``Wait`` or ``End``), and the one composition of a next prompt. Light
(msgspec Structs, no DuckDB, no dataclasses): the drop-in Stop hook asks :func:`steered` how a
person steered its block."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

import msgspec

from ledger import events as ev
from ledger.core.words import plural
from ledger.loop.prompt.next_prompt import Learned, next_prompt
from ledger.loop.steering.state import Learned as Taught
from ledger.loop.steering.state import is_paused, paused_line, pending_guidance

if TYPE_CHECKING:
    from ledger.loop.engine_types import CompleteResult, ValidateResult
    from ledger.loop.validate.todos import Todo


class Turn(msgspec.Struct, frozen=True):
    """One turn of the agent, as a driver read it: its final text (``output``: the only place a
    promise counts), what it did and spent, and how it ended.

    ``todos`` is the agent's own todo list, for the ``todos`` rule (``None``: not known);
    ``failure`` says why its run failed (a failed run fails its iteration); ``other_models`` holds the
    tokens spent on models other than ``model``; ``final`` asks for the rules kept for the last
    iteration (lazy validation); ``transcript_offset`` is where a Claude Code turn ended."""

    output: str = ""
    files_modified: Sequence[str] = ()
    tool_count: int = 0
    stop_reason: str = ""
    tokens: ev.TokenUsage | None = None
    duration_ms: float = 0.0
    final: bool = False
    transcript_offset: int = 0
    todos: Sequence[Todo] | None = None
    model: str = ""
    cost_usd: float | None = None
    context_tokens: int = 0
    failure: str = ""
    stderr: str = ""
    other_models: Sequence[tuple[str, ev.TokenUsage]] = ()


class Continue(msgspec.Struct, frozen=True):
    """The loop goes on: ``iteration`` (of ``max_iterations``) has begun with ``prompt``; ``status``
    is the one line for the person watching; ``result`` the turn's validation (``None`` when a
    person let the loop go on: resume, unblock)."""

    iteration: int
    max_iterations: int
    prompt: str
    status: str
    result: ValidateResult | None = None
    guidance: str = ""  # a person's guidance the prompt carries


class Wait(msgspec.Struct, frozen=True):
    """A person paused the loop after ``iteration``: nothing begins until ``resume``."""

    iteration: int
    line: str
    result: ValidateResult | None = None


class End(msgspec.Struct, frozen=True):
    """The loop ended at ``iteration``: ``signal`` (COMPLETE, BLOCKED or ESCALATE), why, and the line
    that says so."""

    iteration: int
    signal: ev.Signal
    reason: str
    line: str
    result: ValidateResult | None = None
    completed: CompleteResult | None = None
    guard: str = ""  # the guard that ended it, when a driver's limit did (``take_turn``'s ``limit``)


Decision = Continue | Wait | End
"""What a step decided."""

Lead = Callable[[Decision], Sequence[ev.Event]]
"""A driver's own events for a decision (a Claude Code stop's ``stop_decided``), first in the step's
append after the turn and its validation."""


def steered(events: Sequence[ev.AnyEvent], session_id: str, iteration: int, prompt: str) -> Decision | None:
    """A block the ``ralph-loop`` plugin's rules chose at ``iteration``, as a person steered it: while
    the loop is paused, ``Wait`` (the stop is allowed, the loop stays at its iteration); with guidance
    pending, ``Continue`` with ``prompt`` carrying it, once; else ``None`` (the block as it is)."""
    if is_paused(events):
        return Wait(iteration, paused_line(session_id, iteration))
    guidance = pending_guidance(events)
    if not guidance:
        return None
    told = compose_prompt(prompt, Taught(iteration, "", []), "", guidance)
    return Continue(iteration + 1, 0, told, "", None, guidance)


def compose_prompt(task: str, taught: Learned, summary: str, guidance: str) -> str:
    """The one place a next prompt is composed (``ledger.loop.prompt.next_prompt``)."""
    return next_prompt(task, taught, summary, guidance=guidance)


def status_line(result: ValidateResult, iteration: int, max_iterations: int) -> str:
    """The one line shown to the person while the loop continues."""
    failing = [r.name for r in result.results if not r.passed]
    parts = [f"🔄 Ralph iteration {iteration} of {max_iterations}", f"score {result.score:.0f}"]
    parts.append(f"failing: {', '.join(failing)}" if failing else "validation passing")
    return " | ".join(parts)


def with_line(end: End, *, refused: bool = False) -> End:
    """``end`` with the line that says how the loop ended."""
    n, reason = end.iteration, end.reason
    if refused or end.signal == "ESCALATE":
        line = f"🛑 Ralph loop escalated at iteration {n}: {reason}"
    elif end.signal == "COMPLETE":
        line = f"✅ Ralph loop complete after {plural(n, 'iteration')}: {reason}"
    else:
        line = f"⛔ Ralph loop blocked at iteration {n}: {reason}"
    return End(n, end.signal, reason, line, end.result, end.completed, end.guard)


def lead_of(lead: Lead | None, decision: Decision) -> list[ev.Event]:
    """The driver's events for ``decision`` (none without a ``lead``)."""
    return list(lead(decision)) if lead is not None else []


_SETTLED: Final = (
    ev.Override,
    ev.IterationStarted,
    ev.SessionCompleted,
    ev.SessionBlocked,
    ev.SessionEscalated,
    ev.StopDecided,
    ev.ErrorRecorded,
)
"""Events after which a turn's step is over: interrupted, the next iteration begun, the session
ended, a stop hook's answer or error recorded."""


def cut_short(events: Sequence[ev.AnyEvent], iteration: int) -> list[ev.AnyEvent]:
    """The events of ``iteration``'s step that landed when its append was cut short (a driver killed
    mid-write): from its turn (``agent_turn``) to the end of the journal, when nothing settled it
    (``_SETTLED``) and its signal, if it landed, was not CONTINUE (a step that resolved CONTINUE
    resumes as after a pause). ``[]``: no step was cut short (docs/design/loop-step.md)."""
    start = None
    for i in range(len(events) - 1, -1, -1):
        e = events[i]
        if isinstance(e, _SETTLED):
            return []
        if isinstance(e, ev.SignalResolved) and e.iteration == iteration and e.signal == "CONTINUE":
            return []
        if isinstance(e, ev.AgentTurn):
            start = i if e.iteration == iteration else None
            break
    return [] if start is None else list(events[start:])


def unlanded(events: Sequence[ev.Event], landed: Sequence[ev.AnyEvent]) -> list[ev.Event]:
    """A step's ``events`` (computed again) without those that already ``landed`` (``cut_short``):
    after its validation, by count; before it, by kind (the turn, its models' tokens, as many
    promises as landed)."""
    if not landed:
        return list(events)
    ran = [i for i, e in enumerate(events) if isinstance(e, ev.ValidationRan)]
    cut = ran[0] + 1 if ran else len(events)
    first, rest = list(events[:cut]), list(events[cut:])
    was = [i for i, e in enumerate(landed) if isinstance(e, ev.ValidationRan)]
    if was:
        return rest[len(landed) - 1 - was[0] :]
    counts = Counter(type(e).__name__ for e in landed)
    kept: list[ev.Event] = []
    for e in first:
        if counts[type(e).__name__] > 0:
            counts[type(e).__name__] -= 1
        else:
            kept.append(e)
    return kept + rest


def turn_of(landed: Sequence[ev.AnyEvent]) -> Turn:
    """The turn a cut-short step recorded (``cut_short``: its ``agent_turn`` first), as a driver gave
    it: its output as far as the journal keeps it, the other models' tokens that landed."""
    t = landed[0]
    assert isinstance(t, ev.AgentTurn)
    return Turn(
        t.output_excerpt,
        files_modified=list(t.files_modified),
        tool_count=t.tool_count,
        stop_reason=t.stop_reason,
        tokens=t.tokens,
        duration_ms=t.duration_ms,
        transcript_offset=t.transcript_offset,
        model=t.model,
        cost_usd=t.cost_usd,
        context_tokens=t.context_tokens,
        failure=t.failure,
        stderr=t.stderr_excerpt,
        other_models=[(e.model, e.tokens) for e in landed if isinstance(e, ev.ModelTokens)],
    )
