"""Steering a loop without stopping it (seed 000 §5.4): pause, resume, steer and unblock.

Each is an ``override`` event in the session's journal (``kind`` ``pause``, ``resume``, ``steer``,
``unblock``; the text in ``reason``), and every driver of a loop (the runner, the Claude Code hook
in both modes, the MCP tools) reads them through this module and ``Engine.next``:

- **pause**: the iteration under way finishes (it is validated as usual); then ``Engine.next``
  refuses with ``Paused`` until a ``resume``. The runner waits, polling the journal; the hook
  allows the stop ("paused"); MCP's ``iteration_next`` answers the refusal. A stop requested
  while paused ends the loop there, blocked (:func:`halt`).
- **resume**: the loop goes on from the next iteration.
- **steer**: the text is given once, in the prompt of the next iteration to begin: ``Engine.next``
  records it in that ``iteration_started`` (``guidance``) and returns it, and
  ``ledger.loop.prompts.next_prompt`` adds it after the feedback.
- **unblock**: a blocked or escalated session begins its next iteration at once, with ``N`` more
  iterations than it has used (the maximum is raised; the failure streaks start again) and the
  guidance in that iteration's prompt; a pending stop request and a pause are lifted.

A steering command for a session that has ended (unblock excepted), or that the home does not
hold, is refused with one line (``EngineError``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ledger import events as ev
from ledger.loop.engine_types import EngineError, NextResult, SessionView
from ledger.loop.prompts import next_prompt

if TYPE_CHECKING:
    from ledger.loop.engine import Engine

KINDS: Final = ("pause", "resume", "steer", "unblock")
"""The ``override`` kinds that steer a loop."""

UNBLOCK_ITERATIONS: Final = 5
"""How many more iterations ``unblock`` gives when not told."""


def paused_message(session_id: str) -> str:
    """The one sentence a paused session's refusal says."""
    return f"task {session_id} is paused; resume it with `ralph-ledger resume {session_id}`"


def pending_guidance(events: Iterable[ev.AnyEvent]) -> str:
    """The guidance of the ``steer`` overrides since the latest iteration began (one per line, in
    order; ``""`` when there is none): what the next iteration's prompt will carry."""
    pending: list[str] = []
    for e in events:
        if isinstance(e, ev.IterationStarted):
            pending = []
        elif isinstance(e, ev.Override) and e.kind == "steer" and e.reason.strip():
            pending.append(e.reason.strip())
    return "\n".join(pending)


def iteration_guidance(events: Iterable[ev.AnyEvent], iteration: int) -> str:
    """The guidance iteration ``iteration`` began with (``""``: none)."""
    guidance = ""
    for e in events:
        if isinstance(e, ev.IterationStarted) and e.iteration == iteration:
            guidance = e.guidance
    return guidance


@dataclass(frozen=True, slots=True)
class Learned:
    """What an iteration taught the loop, as read back from the journal (``prompts.Learned``)."""

    iteration: int
    next_prompt: str
    feedback: list[str]


def learned(events: Iterable[ev.AnyEvent], iteration: int) -> Learned:
    """What iteration ``iteration`` taught the loop: the deciding hook's next prompt and the feedback
    of its last validate (nothing for iteration 0, or one not validated)."""
    hint, feedback = "", list[str]()
    for e in events:
        if e.iteration != iteration:
            continue
        if isinstance(e, ev.HookDecided):
            hint = e.next_prompt
        elif isinstance(e, ev.SignalResolved):
            feedback = list(e.feedback)
    return Learned(iteration, hint, feedback)


def prompt_of(task: str, events: Sequence[ev.AnyEvent], iteration: int) -> str:
    """The prompt iteration ``iteration`` was (or is to be) given, from the journal: what resuming
    a loop gives the agent again."""
    return next_prompt(task, learned(events, iteration - 1), guidance=iteration_guidance(events, iteration))


def validated(events: Iterable[ev.AnyEvent], iteration: int) -> bool:
    """Whether iteration ``iteration`` has been validated (a signal resolved for it)."""
    return any(isinstance(e, ev.SignalResolved) and e.iteration == iteration for e in events)


# ----------------------------------------------------------------------------- the overrides
def _live(engine: Engine, session_id: str, verb: str) -> SessionView:
    """The session's view when it is running; else ``EngineError`` saying why it cannot be ``verb``."""
    s = engine.view(session_id)
    if s.status != "running":
        raise EngineError(f"session {session_id!r} is {s.status}; it cannot be {verb}")
    return s


def _override(s: SessionView, session_id: str, kind: str, reason: str, **more: Any) -> ev.Override:
    return ev.Override(session_id=session_id, iteration=s.iteration, kind=kind, reason=reason, **more)


def pause(engine: Engine, session_id: str, reason: str = "") -> int:
    """Pause a running loop after the iteration under way; returns that iteration."""
    s = _live(engine, session_id, "paused")
    if s.paused:
        raise EngineError(f"session {session_id!r} is already paused")
    engine.journal(session_id).append(_override(s, session_id, "pause", reason))
    return s.iteration


def resume(engine: Engine, session_id: str, reason: str = "") -> int:
    """Resume a paused loop; returns its iteration."""
    s = _live(engine, session_id, "resumed")
    if not s.paused:
        raise EngineError(f"session {session_id!r} is not paused")
    engine.journal(session_id).append(_override(s, session_id, "resume", reason))
    return s.iteration


def steer(engine: Engine, session_id: str, guidance: str) -> int:
    """Give a running loop ``guidance`` for its next iteration's prompt; returns the iteration under
    way (the guidance goes to the one after it)."""
    if not guidance.strip():
        raise EngineError("the guidance is empty")
    s = _live(engine, session_id, "steered")
    engine.journal(session_id).append(_override(s, session_id, "steer", guidance.strip()))
    return s.iteration


def unblock(
    engine: Engine, session_id: str, guidance: str = "", iterations: int = UNBLOCK_ITERATIONS
) -> NextResult:
    """Let a blocked or escalated session go on: ``iterations`` more than it has used, beginning the
    next one now, its prompt carrying ``guidance`` (and any pending ``steer``)."""
    if iterations < 1:
        raise EngineError(f"--iterations must be at least 1, got {iterations}")
    s = engine.view(session_id)
    if s.status not in ("blocked", "escalated"):
        raise EngineError(
            f"session {session_id!r} is {s.status}; only a blocked or escalated session is unblocked"
        )
    n, max_it = s.iteration, s.iteration + iterations
    given = "\n".join(g for g in (pending_guidance(s.events), guidance.strip()) if g)
    context: dict[str, Any] = {}
    for e in s.events:
        if isinstance(e, ev.CheckpointCreated):
            context = e.agent_context or context
    cp = f"{session_id}-cp{n + 1}"
    engine.journal(session_id).append(
        _override(s, session_id, "unblock", guidance.strip(), max_iterations=max_it),
        ev.IterationStarted(session_id=session_id, iteration=n + 1, max_iterations=max_it, guidance=given),
        ev.CheckpointCreated(
            session_id=session_id,
            iteration=n + 1,
            checkpoint_id=cp,
            trigger="auto_iteration",
            phase="iteration",
            step=n + 1,
            agent_context=context,
        ),
    )
    return NextResult(session_id, n + 1, max_it, cp, f"Unblocked: iteration {n + 1} of {max_it}", given)


def halt(engine: Engine, session_id: str) -> str:
    """End a paused session that was asked to stop (``ralph-ledger stop``): blocked, as the stop
    would have been at the next validate. Returns the reason recorded."""
    s = engine.view(session_id)
    reason = f"manual stop: {s.stop_requested() or ''}".rstrip(": ")
    engine.journal(session_id).append(
        ev.SessionBlocked(session_id=session_id, iteration=s.iteration, reason=reason)
    )
    return reason
