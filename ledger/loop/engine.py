"""The loop engine: start / validate / next / complete / status. It keeps no state of
its own: each step folds what the journal gained since it last read (``ledger.storage.fold``), decides
and appends events, so a process that dies between two steps loses nothing; a new ``Engine`` on the
same home carries on where the last one stopped."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import astuple, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from ledger import events as ev
from ledger.core.errors import no_session
from ledger.core.home import Home
from ledger.core.words import plural
from ledger.loop.config.loop_config import LoopConfig, recorded_config
from ledger.loop.decide.facts import read_facts
from ledger.loop.decide.guards import check, exhausted
from ledger.loop.decide.limits import limit_for
from ledger.loop.decide.signals import Inputs, resolve
from ledger.loop.decide.stop_policies import NO_HOOKS, PRESET_FNS, AgentContext, Evaluation, HookFn, Registry
from ledger.loop.decision import Turn, unlanded
from ledger.loop.engine_types import (
    CompleteResult,
    EngineError,
    Judged,
    NextResult,
    Paused,
    SessionView,
    ValidateResult,
)
from ledger.loop.steering.state import is_paused, paused_message, pending_guidance
from ledger.loop.tasks.progress import task_exhausted, task_opening, task_refusals, task_rules
from ledger.loop.validate.checks import agent_failed, refusals, run_rules
from ledger.loop.validate.promises import detect_promises, strongest, to_event
from ledger.loop.validate.rules import CustomRule, Rule, RuleContext, parse_rules, spec
from ledger.loop.validate.score import validation_score
from ledger.loop.validate.validation_events import validation_events
from ledger.storage.database import Ledger
from ledger.storage.fold import fold, only_errors
from ledger.storage.journal import Journal, journal_path, utc_now

Notify = Callable[[Path, Sequence[ev.Event], Path], None]
"""Called after each append with the journal, the events appended and the work directory (a driver
passes ``ledger.notify.notify_events``: the loop layer never imports notification)."""


class Engine:
    """Lifecycle calls for the sessions of one ledger home.

    ``clock`` stamps the events it appends (and is "now" for the guards); ``timer`` is the
    monotonic clock, in seconds, that times the validation rules. Inject both for a
    reproducible journal. ``notify`` hears of every append (none: nothing is sent). Drivers take a
    turn through ``ledger.loop.step.LoopSession``, which decides what comes next in one append.
    """

    def __init__(
        self,
        home: Home,
        *,
        work_dir: Path | None = None,
        clock: Callable[[], datetime] = utc_now,
        fsync: bool = True,
        custom_hooks: dict[str, HookFn] | None = None,
        custom_rules: Sequence[CustomRule] = (),
        timer: Callable[[], float] = time.perf_counter,
        notify: Notify | None = None,
    ) -> None:
        self.home = home
        self.work_dir = work_dir or Path.cwd()
        self.clock = clock
        self.fsync = fsync
        self.custom_hooks = dict(custom_hooks or {})
        self.custom_rules = list(custom_rules)
        self.timer = timer  # times the validation rules (``RuleResult.duration_ms``)
        self.notify = notify

    # -- reading -------------------------------------------------------------
    def journal(self, session_id: str) -> Journal:
        """The session's journal; raises ``JournalError`` for an invalid session id."""
        return Journal(journal_path(self.home.journals, session_id), fsync=self.fsync, clock=self.clock)

    def append(self, session_id: str, *events: ev.Event, check: Callable[[], None] | None = None) -> None:
        """Append ``events`` to the session's journal, all or none, then tell ``notify``; ``check`` runs
        under the journal's lock first (``Journal``)."""
        journal = self.journal(session_id)
        journal.check = check
        journal.append(*events)
        if self.notify is not None:
            self.notify(journal_path(self.home.journals, session_id), events, self.work_dir)

    def stamp(self, events: Sequence[ev.Event]) -> list[ev.Event]:
        """``events`` with their times taken now, in order, as an append would take them: a step that
        decides before it appends reads the same clock in the same order (docs/design/loop-step.md)."""
        return [
            e if e.ts != ev.EPOCH else msgspec.structs.replace(e, ts=self.clock().astimezone(UTC))
            for e in events
        ]

    def view(self, session_id: str) -> SessionView:
        """The session as a call sees it: its events, configuration, rules and ``sessions`` row."""
        path = journal_path(self.home.journals, session_id)
        if not path.exists():
            raise EngineError(no_session(session_id, self.home.root))
        read = fold(path)  # only what was appended since this process last read the journal
        events = list(read.events)
        started = [e for e in events if isinstance(e, ev.SessionStarted)]
        if not started:
            raise EngineError(no_session(session_id, self.home.root, path))
        try:
            config = msgspec.convert(started[-1].config, LoopConfig)
        except msgspec.ValidationError as exc:
            raise EngineError(
                f"session {session_id!r}: its recorded configuration is invalid: {exc}"
            ) from None
        rules: list[Rule] = [
            *parse_rules(config.rules, f"session {session_id} configuration"),
            *task_rules(events),  # the current task's own (docs/design/task-lists.md)
            *self.custom_rules,
        ]
        ledger = read.ledger(self.home)
        row = read.memo(
            "sessions", lambda: ledger.rows("SELECT * FROM sessions WHERE session_id = ?", [session_id])[0]
        )
        return SessionView(events, config, rules, dict(row), ledger)

    def _ledger(self, session_id: str) -> Ledger:
        """The session's in-memory ledger, up to date (``ledger.storage.fold``: only new lines ingested)."""
        return fold(journal_path(self.home.journals, session_id)).ledger(self.home)

    def _running(self, session_id: str) -> SessionView:
        s = self.view(session_id)
        if s.status != "running":
            raise EngineError(f"session {session_id!r} is {s.status}; it takes no more iterations")
        return s

    def start(
        self,
        session_id: str,
        config: LoopConfig,
        *,
        prompt: str = "",
        command: Sequence[str] = (),
        worktree: tuple[str, str] = ("", ""),
        work_dir: str = "",
        task_list: Sequence[ev.TaskSpec] = (),
        task_file: str = "",
    ) -> NextResult:
        """iteration_start: record the configuration, what a runner runs and where; begin iteration 1.
        A task-list loop records its list (``task_list``, read from ``task_file``) and starts its
        first task not done (docs/design/task-lists.md).
        Exclusive: of two processes starting one session at once, one starts it and the other gets
        ``EngineError`` (the check runs again under the journal's lock)."""
        path = journal_path(self.home.journals, session_id)

        def unstarted() -> None:
            if path.exists() and path.stat().st_size and not only_errors(path):
                raise EngineError(f"session {session_id!r} already exists")

        unstarted()
        if task_list and all(t.done for t in task_list):
            raise EngineError(f"every task of {task_file or 'the list'} is done already: nothing to start")
        rules = [*parse_rules(config.rules, "configuration"), *self.custom_rules]
        max_it, why = astuple(limit_for(self.home, config))
        hooks = [
            ev.HookRegistered(session_id=session_id, hook_id=f"{name}-{i}", hook_type=name)
            for i, name in enumerate(config.hooks, 1)
        ]
        hooks += [
            ev.HookRegistered(session_id=session_id, hook_id=hook_id, hook_type="custom")
            for hook_id in self.custom_hooks
        ]
        started = ev.SessionStarted(
            session_id=session_id,
            task=config.task,
            task_kind=config.kind,
            agent=config.agent,
            max_iterations_reason=why,
            prompt=prompt,
            command=list(command),
            max_iterations=max_it,
            completion_promises=config.completion_promises,
            rules=[spec(r) for r in rules],
            config=recorded_config(config),
            worktree=worktree[0],
            branch=worktree[1],
            work_dir=work_dir,
        )
        self.append(
            session_id,
            started,
            *hooks,
            ev.IterationStarted(session_id=session_id, iteration=1, max_iterations=max_it),
            *task_opening([started], session_id, 1, task_list, task_file),
            ev.CheckpointCreated(
                session_id=session_id,
                iteration=1,
                checkpoint_id=f"{session_id}-cp1",
                trigger="iteration_start",
                phase="iteration",
                step=1,
            ),
            check=unstarted,
        )
        return NextResult(session_id, 1, max_it, f"{session_id}-cp1", f"Started iteration 1 of {max_it}")

    def judge(
        self, s: SessionView, turn: Turn, landed: Sequence[ev.AnyEvent] = (), taken: Sequence[ev.Event] = ()
    ) -> Judged:
        """iteration_validate, for ``ledger.loop.step`` (its one caller): run the rules, detect
        promises, evaluate guards and hooks, resolve the signal; the result and the events that
        record it (stamped, not appended; the step appends them with what it decides). The guards
        read their facts from the session's ledger with these events in it, tentatively
        (``Fold.pending``). ``landed``: the start of this turn's step, which a kill cut short
        (``ledger.loop.decision.cut_short``); its rules' results are used again when they landed,
        never run twice. ``taken``: what the turn left, recorded after the turn (its snapshot,
        ``ledger.loop.snapshots``), which the guards see."""
        session_id, n = s.session_id, s.iteration
        agent_output, files_modified = turn.output, turn.files_modified
        record = ev.AgentTurn(
            session_id=session_id,
            iteration=n,
            output_excerpt=agent_output[-2000:],
            files_modified=list(files_modified),
            tool_count=turn.tool_count,
            stop_reason=turn.stop_reason,
            tokens=turn.tokens or ev.TokenUsage(),
            duration_ms=turn.duration_ms,
            transcript_offset=turn.transcript_offset,
            model=turn.model,
            cost_usd=turn.cost_usd,
            context_tokens=turn.context_tokens,
            failure=turn.failure,
            stderr_excerpt=turn.stderr[-2000:],
        )
        detection = detect_promises(
            agent_output, custom=s.config.completion_promises, exclusive=s.config.exclusive_promises
        )
        promise = strongest(detection.promises)
        todo_list = None if turn.todos is None else tuple(turn.todos)
        signals = tuple(p.signal for p in detection.promises)
        did = (turn.tool_count, tuple(files_modified), todo_list, signals)  # what the iteration did
        context = RuleContext(self.work_dir, agent_output, n, turn.final, self.timer, *did)
        ran = [e for e in landed if isinstance(e, ev.ValidationRan)]
        if ran:
            results = list(ran[0].results)
        else:
            results = run_rules(s.rules, context)
            results = agent_failed(turn.failure) + results  # a failed run fails its iteration
        passed = all(r.passed and not r.errored for r in results)
        score = validation_score(results)
        first = self.stamp(
            [
                record,
                *(
                    ev.ModelTokens(session_id=session_id, iteration=n, model=m, tokens=t)
                    for m, t in turn.other_models
                ),
                *taken,
                *(to_event(p, session_id=session_id, iteration=n) for p in detection.promises),
                ev.ValidationRan(
                    session_id=session_id, iteration=n, results=results, passed=passed, score=score
                ),
            ]
        )
        read = fold(self._path(session_id))
        pending = unlanded(first, landed)  # what of them the journal does not hold yet
        with read.pending(self.home, pending) as ledger:  # the row, if the journal did not move since
            row = read.kept("sessions")
            known = row if isinstance(row, dict) else None
            facts = read_facts(ledger, session_id, s.config.guards, self.clock(), known=known)
        trips = check(facts, s.config.guards)
        evals = self._hooks(s, session_id, n, files_modified, results, detection.promises, agent_output)
        decision = evals[-1]
        inputs = Inputs(
            passed,
            manual_stop=s.stop_requested(),
            trips=trips,
            promise=promise.signal if promise else None,
            promise_word=promise.word if promise else "",
            promise_reason=promise.reason if promise else "",
            hooks_registered=decision is not NO_HOOKS,
            hook_action=decision.result.action,
            hook_reason=decision.result.reason,
            require_passing_validation=s.config.require_passing_validation,
            refusals=refusals(results) + task_refusals(s.events, results),
        )
        resolution = resolve(inputs)
        late = exhausted(facts, s.config.guards, resolution.signal) or task_exhausted(
            s.events, n, resolution.signal
        )
        if late is not None:
            trips = [*trips, late]
            resolution = resolve(replace(inputs, trips=trips))
        feedback = [t.detail for t in trips] + [f"{r.name}: {r.message}" for r in results if not r.passed]
        wanted = any(e.result.checkpoint_data is not None for e in evals)
        made = self._hook_checkpoints(session_id) if wanted else 0
        word = promise.word if promise else ""
        then = validation_events(session_id, n, evals, trips, resolution, passed, word, feedback, made)
        said = (resolution.signal, word, feedback, results, score, resolution.reason)
        result = ValidateResult(session_id, n, passed, *said, decision.result.next_prompt, trips)
        return Judged(result, [*first, *self.stamp(then)])

    def _path(self, session_id: str) -> Path:
        return journal_path(self.home.journals, session_id)

    def _hooks(
        self,
        s: SessionView,
        session_id: str,
        n: int,
        files: Sequence[str],
        results: list[ev.RuleResult],
        promises: Sequence[Any],
        output: str,
    ) -> list[Evaluation]:
        registry = Registry.from_events(s.events, self.custom_hooks)
        ctx = AgentContext(
            task_id=session_id,
            iteration=n,
            files_modified=tuple(files),
            validation_results=tuple(results),
            promises=tuple(p.signal for p in promises),
            promise_words=tuple(p.word for p in promises),
            agent_output=output,
        )
        return registry.evaluate(ctx)

    def _hook_checkpoints(self, session_id: str) -> int:
        events = fold(journal_path(self.home.journals, session_id)).events
        return sum(1 for e in events if isinstance(e, ev.CheckpointCreated) and e.trigger == "hook")

    def next(
        self,
        session_id: str,
        notes: str = "",
        lead: Callable[[int, int], Sequence[ev.Event]] | None = None,
    ) -> NextResult:
        """iteration_next: advance, refusing past the maximum (``Paused``: while paused); the agent context
        and a human's pending guidance carry over, validation state does not. ``lead`` gives the events
        (e.g. the stop decision) landing first in the same append, from the iteration and maximum."""
        advanced, events = self.next_events(self._running(session_id), notes, lead)
        self.append(session_id, *events)
        return advanced

    def next_events(
        self,
        s: SessionView,
        notes: str = "",
        lead: Callable[[int, int], Sequence[ev.Event]] | None = None,
    ) -> tuple[NextResult, list[ev.Event]]:
        """What ``next`` appends (stamped) and answers; ``Paused`` or ``EngineError`` when refused."""
        session_id = s.session_id
        if is_paused(s.events):
            raise Paused(paused_message(session_id))
        n = s.iteration
        max_it = int(s.row["max_iterations"] or s.config.effective_max_iterations())
        if n >= max_it:
            raise EngineError(
                f"Maximum iterations ({max_it}) reached. Task should be marked as blocked or escalated."
            )
        context: dict[str, Any] = {}
        for e in s.events:
            if isinstance(e, ev.CheckpointCreated):
                context = e.agent_context or context
        cp, guidance = f"{session_id}-cp{n + 1}", pending_guidance(s.events)
        events = [
            *(lead(n + 1, max_it) if lead is not None else ()),
            ev.IterationStarted(session_id=session_id, iteration=n + 1, notes=notes, guidance=guidance),
            ev.CheckpointCreated(
                session_id=session_id,
                iteration=n + 1,
                checkpoint_id=cp,
                trigger="auto_iteration",
                phase="iteration",
                step=n + 1,
                agent_context=context,
            ),
        ]
        message = f"Advanced to iteration {n + 1} of {max_it}"
        return NextResult(session_id, n + 1, max_it, cp, message, guidance), self.stamp(events)

    def complete(self, session_id: str, promise: str = "", lead: Sequence[ev.Event] = ()) -> CompleteResult:
        """iteration_complete: finish the loop and clear its hooks; ``lead`` lands first, same append."""
        done, events = self.complete_events(self._running(session_id), promise, lead)
        self.append(session_id, *events)
        return done

    def complete_events(
        self, s: SessionView, promise: str = "", lead: Sequence[ev.Event] = (), *, score: float | None = None
    ) -> tuple[CompleteResult, list[ev.Event]]:
        """What ``complete`` appends (stamped) and answers; ``score`` is the last iteration's when it
        is not in the ledger yet (judged in the same append)."""
        session_id = s.session_id
        history = _history(s.ledger, session_id)
        final = history[-1]["score"] if history else None
        if score is not None:
            final = score
        now = self.clock()
        hook_ids = [h.hook_id for h in Registry.from_events(s.events).hooks()]
        events: list[ev.Event] = [
            *lead,
            *(
                [ev.HooksCleared(session_id=session_id, iteration=s.iteration, hook_ids=hook_ids, ts=now)]
                if hook_ids
                else []
            ),
            ev.SessionCompleted(
                session_id=session_id,
                iteration=s.iteration,
                promise=promise,
                total_iterations=s.iteration,
                score=final,
                ts=now,
            ),
        ]
        message = f"Completed after {plural(s.iteration, 'iteration')}"
        return CompleteResult(session_id, s.iteration, final, history, now, message), events

    # -- hooks (hook_register / hook_list / hook_clear: docs/design/stop-hooks.md) --
    def hook_register(
        self, session_id: str, hook_type: str, *, enabled: bool = True, metadata: dict[str, Any] | None = None
    ) -> str:
        """Register a preset hook or this Engine's custom callable by id, recorded: presets persist."""
        if hook_type not in PRESET_FNS and hook_type not in self.custom_hooks:
            known = ", ".join([*PRESET_FNS, *self.custom_hooks])
            raise EngineError(f"unknown hook {hook_type!r}: expected one of {known}")
        s = self._running(session_id)
        hook_id = f"{hook_type}-{len(Registry.from_events(s.events).hooks()) + 1}"
        kind = hook_type if hook_type in PRESET_FNS else "custom"
        if kind == "custom":
            hook_id = hook_type
        self.append(
            session_id,
            ev.HookRegistered(
                session_id=session_id,
                iteration=s.iteration,
                hook_id=hook_id,
                hook_type=kind,
                enabled=enabled,
                metadata=metadata or {},
            ),
        )
        return hook_id

    def hook_list(self, session_id: str) -> list[dict[str, Any]]:
        """The session's hooks in evaluation order."""
        registry = Registry.from_events(self.view(session_id).events, self.custom_hooks)
        return [{"id": h.hook_id, "type": h.hook_type, "enabled": h.enabled} for h in registry.hooks()]

    def hook_clear(self, session_id: str) -> int:
        """Clear every hook of the session; returns how many there were."""
        s = self.view(session_id)
        ids = [h.hook_id for h in Registry.from_events(s.events).hooks()]
        if ids:
            self.append(
                session_id, ev.HooksCleared(session_id=session_id, iteration=s.iteration, hook_ids=ids)
            )
        return len(ids)

    # -- overrides (a person's stop, pause and steering: docs/steering.md) ------
    def escalate(self, session_id: str, reason: str, guard: str = "", lead: Sequence[ev.Event] = ()) -> None:
        """End a running session as escalated (e.g. ``next`` refused); ``lead`` lands first, same append."""
        s = self._running(session_id)
        end = ev.SessionEscalated(session_id=session_id, iteration=s.iteration, reason=reason, guard=guard)
        self.append(session_id, *lead, end)

    def stop(self, session_id: str, reason: str = "") -> None:
        """Ask a running loop to stop; honoured at its next validate."""
        s = self._running(session_id)
        stop = ev.Override(session_id=session_id, iteration=s.iteration, kind="manual_stop", reason=reason)
        self.append(session_id, stop)

    def set_max_iterations(self, session_id: str, max_iterations: int, reason: str = "") -> None:
        """Change a running loop's maximum iterations, recorded as an ``override`` event. Raises
        ``EngineError`` if ``max_iterations`` < 1 or the session is not running."""
        if max_iterations < 1:
            raise EngineError(f"max iterations must be at least 1, got {max_iterations}")
        s = self._running(session_id)
        self.append(
            session_id,
            ev.Override(
                session_id=session_id,
                iteration=s.iteration,
                kind="max_iterations",
                max_iterations=max_iterations,
                reason=reason,
            ),
        )

    # -- reading state ---------------------------------------------------------
    def status(self, session_id: str) -> dict[str, Any]:
        """iteration_status: the session's row of the ``sessions`` view."""
        return self.view(session_id).row

    def history(self, session_id: str) -> list[dict[str, Any]]:
        """One row of the ``iterations`` view per iteration."""
        return _history(self._ledger(session_id), session_id)


def _history(ledger: Ledger, session_id: str) -> list[dict[str, Any]]:
    """The ``iterations`` rows of one session, in order."""
    return ledger.rows("SELECT * FROM iterations WHERE session_id = ? ORDER BY iteration", [session_id])
