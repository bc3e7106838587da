"""One loop step: a driver's turn in, the loop's decision out (docs/design/loop-step.md).

Every driver turns its input into a :class:`Turn` and the :data:`Decision` into its output; what
happens after a turn (validate, steering, the summary, the next prompt, complete or escalate) is
decided here alone, in one all-or-nothing append. Light at import: the drop-in hook, which never
imports DuckDB, asks :func:`steered` how a person steered the block the plugin's rules chose;
:class:`LoopSession` is given its engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ledger import events as ev
from ledger.loop.decide.failures import FailedTurn, failure_events, waiting_line
from ledger.loop.decision import (
    Continue,
    Decision,
    End,
    Lead,
    Turn,
    Wait,
    compose_prompt,
    cut_short,
    lead_of,
    recorded_stop,
    status_line,
    steered,
    turn_of,
    unlanded,
    with_line,
)
from ledger.loop.engine_types import EngineError, Paused
from ledger.loop.prompt.next_prompt import Learned
from ledger.loop.snapshots import turn_snapshot
from ledger.loop.steering.state import (
    is_paused,
    iteration_guidance,
    learned,
    let_go,
    paused_line,
    pending_guidance,
    validated,
)
from ledger.loop.tasks.progress import Fresh, TaskEnd, task_began, task_end, task_opening, task_prompt, tick

if TYPE_CHECKING:
    from ledger.loop.engine import Engine
    from ledger.loop.engine_types import SessionView, ValidateResult

__all__ = ["Continue", "Decision", "End", "Lead", "LoopSession", "Turn", "Wait", "recorded_stop", "steered"]


@dataclass(frozen=True, slots=True)
class Checked:
    """A turn validated on its own (the MCP tools' ``iteration_validate``): the result, the prompt
    of the next iteration when the loop goes on (``""`` otherwise), and whether a person paused it."""

    result: ValidateResult
    prompt: str
    paused: bool


class LoopSession:
    """The steps of one session of ``engine``, whose task (what every prompt starts with) is ``task``."""

    def __init__(self, engine: Engine, session_id: str, task: str) -> None:
        self.engine, self.session_id, self.task = engine, session_id, task

    # -- a turn ----------------------------------------------------------------------------------------
    def take_turn(
        self, turn: Turn, lead: Lead | None = None, *, limit: ev.GuardTripped | None = None
    ) -> Decision:
        """Validate ``turn`` and act on the signal in one append: the next iteration (``Continue``),
        a pause (``Wait``), or the session's end (``End``: completed, blocked or escalated, also when
        the next iteration is refused). ``limit`` is a driver's own limit on going on (Claude Code's
        block cap): a loop that would go on ends escalated with that trip instead. ``lead`` gives the
        driver's events for the decision. ``EngineError`` when the session does not run."""
        s = self.engine.view(self.session_id)
        if s.status != "running":
            raise EngineError(f"session {self.session_id!r} is {s.status}; it takes no more iterations")
        return self._turn(s, turn, lead, limit)

    def _turn(
        self,
        s: SessionView,
        turn: Turn,
        lead: Lead | None,
        limit: ev.GuardTripped | None,
        landed: Sequence[ev.AnyEvent] = (),
    ) -> Decision:
        """``take_turn`` of a running session; ``landed``: the start of this step, which a kill cut
        short (``cut_short``): only what did not land is appended."""
        engine = self.engine
        judged = engine.judge(s, turn, landed, turn_snapshot(engine, s, landed))
        result = judged.result
        ended = self._task_end(s, result, len(landed))
        if ended is not None:
            ended = replace(ended, events=engine.stamp(ended.events))
        own = _with_task_end(judged.events, ended)
        events: list[ev.Event] = unlanded(own, landed)
        decision: Decision
        if ended is not None and ended.go_on:  # the next task begins (docs/design/task-lists.md)
            summary = self._summary(s, result.iteration, events)
            decision, tail = self._advance(s, result, summary, lead, moved=ended.events)
        elif result.signal == "CONTINUE" and limit is not None:
            decision = with_line(
                End(result.iteration, "ESCALATE", limit.detail, "", result, guard=limit.guard)
            )
            escalated = ev.SessionEscalated(
                session_id=self.session_id, iteration=result.iteration, reason=limit.detail, guard=limit.guard
            )
            tail = engine.stamp([*lead_of(lead, decision), limit, escalated])
        elif result.signal == "CONTINUE":
            summary = self._summary(s, result.iteration, events)
            decision, tail = self._advance(s, result, summary, lead)
        elif result.signal == "COMPLETE":
            done, ending = engine.complete_events(s, result.detected_promise, score=result.score)
            decision = with_line(End(result.iteration, "COMPLETE", result.reason, "", result, done))
            tail = [*engine.stamp(lead_of(lead, decision)), *ending]  # its time taken after the ending's
        else:  # BLOCKED / ESCALATE: the validation recorded the session's end
            decision = with_line(End(result.iteration, result.signal, result.reason, "", result))
            tail = engine.stamp(lead_of(lead, decision))
        if landed:  # the tail too may have landed in part (a step that ended the session)
            tail = unlanded([*own, *tail], landed)[len(events) :]
        engine.append(self.session_id, *events, *tail)
        ticked = ended.done if ended is not None else None
        if ticked is not None and (failed := tick(engine.home.root.parent, s.events, ticked)):
            engine.append(self.session_id, *failed)  # the ledger first, then the file
        return decision

    def _task_end(self, s: SessionView, result: ValidateResult, landed: int = 0) -> TaskEnd | None:
        """How ``result`` ends the current task of a task-list loop (``ledger.loop.tasks.progress``),
        from the events before the step (``landed``: how many of the step's a kill let land)."""
        return task_end(
            s.events[: len(s.events) - landed],
            self.session_id,
            result.iteration,
            result.signal,
            result.detected_promise,
            result.reason,
            result.trips,
            on_blocked=s.config.on_task_blocked,
            manual_stop=s.stop_requested() is not None,
        )

    def check(self, turn: Turn) -> Checked:
        """Validate ``turn`` and record it, deciding nothing more: the MCP tools' two-call protocol,
        where the agent then calls ``iteration_next`` or ``iteration_complete`` itself."""
        s = self.engine.view(self.session_id)
        if s.status != "running":
            raise EngineError(f"session {self.session_id!r} is {s.status}; it takes no more iterations")
        judged = self.engine.judge(s, turn, taken=turn_snapshot(self.engine, s))
        self.engine.append(self.session_id, *judged.events)
        result = judged.result
        going = result.signal == "CONTINUE"
        prompt = self._prompt(result, "", pending_guidance(s.events), s.events) if going else ""
        return Checked(result, prompt, is_paused(s.events))

    # -- a person let the loop go on -------------------------------------------------------------------
    def resume(self, lead: Lead | None = None) -> Decision:
        """The step after a person let the loop go (``resume`` after a pause, ``unblock``): still
        paused, ``Wait`` (nothing recorded); asked to stop meanwhile, ``End`` (blocked); else the next
        iteration begins with its prompt (what the last validated iteration taught, the summary,
        the guidance), in one append. A step a kill cut short (its turn recorded, its decision not,
        ``cut_short``) is finished first, as ``take_turn`` would have, from what the journal holds:
        its agent and its rules never run twice."""
        engine = self.engine
        s = engine.view(self.session_id)
        n = s.iteration
        if s.status != "running":
            raise EngineError(f"session {self.session_id!r} is {s.status}; it takes no more iterations")
        landed = cut_short(s.events, n)
        if landed:  # a driver killed while it recorded the turn: the step is finished, never taken again
            return self._turn(s, turn_of(landed), lead, None, landed)
        if s.stop_requested() is not None:
            reason = f"manual stop: {s.row['stop_reason'] or ''}".rstrip(": ")
            end = with_line(End(n, "BLOCKED", reason, ""))
            blocked = ev.SessionBlocked(session_id=self.session_id, iteration=n, reason=reason)
            engine.append(self.session_id, *lead_of(lead, end), blocked)
            return end
        if is_paused(s.events):
            return Wait(n, paused_line(self.session_id, n))
        summary = self._summary(s, n, [])
        decision, tail = self._advance(s, learned(s.events, n), summary, lead, resumed=True)
        engine.append(self.session_id, *tail)
        return decision

    # -- a turn an API error ended (docs/design/claude-code-hooks.md) ---------------------------------
    def turn_failed(self, failed: FailedTurn, component: str) -> Wait | None:
        """Record a turn an API error ended (``ledger.loop.decide.failures``): a usage limit is a
        ``Wait`` at the same iteration (its line says until when), another error is recorded and
        answered ``None``; a session that does not run records nothing (``None``)."""
        s = self.engine.view(self.session_id)
        if s.status != "running":
            return None
        n = s.iteration
        self.engine.append(self.session_id, *failure_events(self.session_id, n, failed, component))
        if not failed.limited:
            return None
        return Wait(n, waiting_line(self.session_id, n, failed, self.engine.clock()))

    # -- what drivers record and read -----------------------------------------------------------------
    def turn_taken(self) -> bool:
        """Whether the current iteration's turn is recorded: validated, or its step cut short by a
        kill (``cut_short``). A driver that resumes the session then calls :meth:`resume`, which
        goes on from it; else it runs the iteration's agent again."""
        s = self.engine.view(self.session_id)
        return validated(s.events, s.iteration) or bool(cut_short(s.events, s.iteration))

    def record(self, *events: ev.Event) -> None:
        """A driver's own facts, which decide nothing (a rate-limited run, an interrupted turn, a stop
        allowed while sub-agents run), appended through the engine in one append."""
        self.engine.append(self.session_id, *events)

    def events(self) -> list[ev.AnyEvent]:
        """The session's events so far; ``EngineError`` (one line) when there is no such session."""
        return self.engine.view(self.session_id).events

    def started(self) -> ev.SessionStarted:
        """The session's (last) ``session_started``: its prompt, agent command, worktree."""
        return [e for e in self.events() if isinstance(e, ev.SessionStarted)][-1]

    def recorded_stop(self, stop_id: str) -> ev.StopDecided | None:
        """The decision already recorded for the driver's stop ``stop_id``: answer with it, take no
        turn (:func:`ledger.loop.decision.recorded_stop`); ``None`` for a new stop."""
        if not stop_id:
            return None
        from ledger.storage.fold import events_of  # the journal's events, as folded for the stop

        return recorded_stop(events_of(self.engine.journal(self.session_id).path), stop_id)

    def let_go(self) -> bool:
        """Whether a person let this hook-driven loop go (paused, or ended and then unblocked): its
        next stop is :meth:`resume`, not a turn (``ledger.loop.steering.state.let_go``)."""
        return let_go(self.engine.view(self.session_id).events)

    def prompt_of(self, iteration: int) -> str:
        """The prompt ``iteration`` was given (or is to be): what resuming a loop gives the agent again."""
        events = self.engine.view(self.session_id).events
        before = learned(events, iteration - 1)
        summary = before.summary
        taught: Learned = Fresh(iteration - 1) if task_began(events, iteration) else before
        return self._prompt(taught, summary, iteration_guidance(events, iteration), events)

    # -- the parts -------------------------------------------------------------------------------------
    def _prompt(
        self, taught: Learned, summary: str, guidance: str, events: Sequence[ev.AnyEvent | ev.Event]
    ) -> str:
        """The next prompt of this session's task (:func:`compose_prompt`), which names the current
        task of a task-list loop and the list's state (``events``: the session's, with the step's)."""
        return compose_prompt(task_prompt(self.task, events), taught, summary, guidance)

    def _summary(self, s: SessionView, n: int, pending: Sequence[ev.Event]) -> str:
        """The summary of the loop after iteration ``n`` ("" unless the loop asked for it), with
        ``pending`` (the step's events so far) in the ledger it reads."""
        if not s.config.summary:
            return ""
        from ledger.loop.prompt.summary import summary_to_give  # only for a loop that asked for it
        from ledger.storage.fold import fold

        with fold(self.engine.journal(self.session_id).path).pending(self.engine.home, pending):
            return summary_to_give(self.engine, self.session_id, n)

    def _advance(
        self,
        s: SessionView,
        taught: Learned,
        summary: str,
        lead: Lead | None,
        *,
        resumed: bool = False,
        moved: Sequence[ev.Event] = (),
    ) -> tuple[Decision, list[ev.Event]]:
        """The next iteration's events and decision (or the pause, or the end when it is refused);
        ``moved``: the step's end of a task, after which the next task begins."""
        engine, sid, n = self.engine, self.session_id, s.iteration
        result = None if resumed else _validated(taught)
        try:
            advanced, begun = engine.next_events(s)
        except Paused:
            wait = Wait(n, paused_line(sid, n), result)
            return wait, engine.stamp(lead_of(lead, wait))
        except EngineError as exc:
            end = with_line(End(n, "ESCALATE", str(exc), "", result), refused=True)
            escalated = ev.SessionEscalated(session_id=sid, iteration=n, reason=str(exc))
            return end, engine.stamp([*lead_of(lead, end), escalated])
        so_far = [*s.events, *moved]
        opening = task_opening(so_far, sid, advanced.iteration)  # a new task: a fresh prompt
        begun = [*begun, *opening]
        fresh: Learned = Fresh(n) if opening else taught
        prompt = self._prompt(fresh, summary, advanced.guidance, [*so_far, *opening])
        status = (
            f"🔄 Ralph iteration {advanced.iteration} of {advanced.max_iterations} | resumed by a person"
            if result is None
            else status_line(result, advanced.iteration, advanced.max_iterations)
        )
        going = Continue(
            advanced.iteration, advanced.max_iterations, prompt, status, result, advanced.guidance
        )
        given = (
            [ev.SummaryGiven(session_id=sid, iteration=advanced.iteration, loop_summary=summary)]
            if summary
            else []
        )
        return going, engine.stamp([*lead_of(lead, going), *given, *begun])


def _with_task_end(events: list[ev.Event], ended: TaskEnd | None) -> list[ev.Event]:
    """The step's judged ``events`` with how the turn ended its task: before the session's end,
    which a skipped task's loop does not have (it goes on)."""
    if ended is None:
        return events
    ends = (ev.SessionBlocked, ev.SessionEscalated, ev.SessionCompleted)
    kept = [e for e in events if not (ended.go_on and isinstance(e, ev.SessionBlocked))]
    at = next((i for i, e in enumerate(kept) if isinstance(e, ends)), len(kept))
    return [*kept[:at], *ended.events, *kept[at:]]


def _validated(taught: Learned) -> ValidateResult | None:
    """``taught`` when it is a validation's result (not what a journal says an iteration taught)."""
    from ledger.loop.engine_types import ValidateResult

    return taught if isinstance(taught, ValidateResult) else None
