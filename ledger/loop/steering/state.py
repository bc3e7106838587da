"""The steering rules read from a session's events (``ledger.loop.steering.commands`` has the commands):
whether it is paused, the guidance pending and given, what an iteration's prompt was. Light: the
Claude Code drop-in hook reads them without importing DuckDB."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from ledger import events as ev


def paused_message(session_id: str) -> str:
    """The one sentence a paused session's refusal says."""
    return f"task {session_id} is paused; resume it with `ralph-ledger resume {session_id}`"


def is_paused(events: Iterable[ev.AnyEvent]) -> bool:
    """Whether a person paused the session and nothing lifted it since: a resume, an unblock, or the
    session's end (a loop that completed while a pause waited for its turn to end is not paused);
    the ``sessions`` view's ``paused`` column says the same in SQL."""
    paused = False
    for e in events:
        if isinstance(e, ev.Override) and e.kind in ("pause", "resume", "unblock"):
            paused = e.kind == "pause"
        elif isinstance(e, ev.SessionCompleted | ev.SessionBlocked | ev.SessionEscalated):
            paused = False
    return paused


def pending_guidance(events: Iterable[ev.AnyEvent]) -> str:
    """The guidance of the ``steer`` and ``unblock`` overrides since the latest iteration began (one
    per line, in order; ``""`` when there is none): what the next iteration's prompt will carry."""
    pending: list[str] = []
    for e in events:
        if isinstance(e, ev.IterationStarted):
            pending = []
        elif isinstance(e, ev.Override) and e.kind in ("steer", "unblock") and e.reason.strip():
            pending.append(e.reason.strip())
    return "\n".join(pending)


def iteration_guidance(events: Iterable[ev.AnyEvent], iteration: int) -> str:
    """The guidance iteration ``iteration`` began with (``""``: none)."""
    guidance = ""
    for e in events:
        if isinstance(e, ev.IterationStarted) and e.iteration == iteration:
            guidance = e.guidance
    return guidance


class Learned(NamedTuple):
    """What an iteration taught the loop, as read back from the journal (``prompts.Learned``)."""

    iteration: int
    next_prompt: str
    feedback: list[str]
    summary: str = ""  # the summary of the loop given with the next iteration's prompt


def learned(events: Iterable[ev.AnyEvent], iteration: int) -> Learned:
    """What iteration ``iteration`` taught the loop: the deciding hook's next prompt and the feedback
    of its last validate (nothing for iteration 0, or one not validated), and the summary of the loop
    given to the iteration after it (``summary_given``)."""
    hint, feedback, summary = "", list[str](), ""
    for e in events:
        if isinstance(e, ev.SummaryGiven) and e.iteration == iteration + 1:
            summary = e.loop_summary
        if e.iteration != iteration:
            continue
        if isinstance(e, ev.HookDecided):
            hint = e.next_prompt
        elif isinstance(e, ev.SignalResolved):
            feedback = list(e.feedback)
    return Learned(iteration, hint, feedback, summary)


def let_go(events: Iterable[ev.AnyEvent]) -> bool:
    """Whether the latest stop decision of a hook-driven session allowed the stop: a running session
    that did was let go by a person (paused, or ended and then unblocked), and its next stop tells
    the agent its iteration's prompt rather than validating the person's own turn. A stop allowed
    while sub-agents ran (``waiting``) let nothing go: its iteration goes on."""
    allowed = False
    for e in events:
        if isinstance(e, ev.StopDecided) and not e.waiting:
            allowed = e.decision == "allow"
    return allowed


def paused_line(session_id: str, n: int) -> str:
    """What a Claude Code hook prints when it allows a stop because the loop is paused."""
    return (
        f"⏸ Ralph loop paused after iteration {n}: `ralph-ledger resume {session_id}`, then the next "
        f"stop goes on with iteration {n + 1}"
    )


def validated(events: Iterable[ev.AnyEvent], iteration: int) -> bool:
    """Whether iteration ``iteration`` has been validated (a signal resolved for it)."""
    return any(isinstance(e, ev.SignalResolved) and e.iteration == iteration for e in events)
