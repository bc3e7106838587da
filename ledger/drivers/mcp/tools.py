"""What each MCP tool does, on the loop engine: one method per tool, taking its decoded arguments
(``ledger.drivers.mcp.schemas``) and answering its result. Everything is recorded in the task's journal by the
engine, as for the runner and the Claude Code hook; a call that cannot be made raises ``ToolCallError``
(one sentence) before anything is recorded.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

import msgspec

from ledger import events as ev
from ledger.core.errors import explain, printable
from ledger.core.home import Home
from ledger.core.locks import LockBusy, loop_lock
from ledger.core.sync import sync_file
from ledger.drivers.mcp import schemas as s
from ledger.loop import checkpoints
from ledger.loop.config.loop_config import (
    MAX_ITERATIONS_EXPECTED,
    ConfigError,
    LoopConfig,
    agent_config,
    check_config,
    find_config,
    promise_word,
    rules_named,
    source_of,
)
from ledger.loop.decide.stop_policies import NO_HOOKS, AgentContext, Registry, decided_events
from ledger.loop.decision import Turn
from ledger.loop.engine import Engine
from ledger.loop.engine_types import EngineError, SessionView, ValidateResult
from ledger.loop.step import LoopSession
from ledger.loop.validate.completion import (
    ValidationParams,
    ValidationResult,
    decide_stop,
    retry_count_from,
    to_events,
)
from ledger.loop.validate.promises import detect_promises
from ledger.notify import notify_events
from ledger.storage.journal import JournalError, journal_path


class ToolCallError(Exception):
    """A call that cannot be made; the message is one sentence for the agent."""


def decode(name: str, arguments: dict[str, Any]) -> msgspec.Struct:
    """The arguments of tool ``name``, decoded; ``ToolCallError`` naming the tool, the argument and
    what was expected when they do not fit its schema."""
    if name not in s.TOOLS:
        raise ToolCallError(f"unknown tool {name!r}; tools/list names the {len(s.TOOLS)} tools")
    args_type = s.TOOLS[name][0]
    given = _renamed(name, arguments)
    try:
        return msgspec.convert(given, args_type)
    except msgspec.ValidationError as exc:
        where, what = explain(
            str(exc),
            given,
            choices={"hookType": get_args(s.HookType)},
            allowed_keys=lambda _data, _path: list(args_type.__struct_encode_fields__),
        )
        key = where.lstrip(".") or "arguments"
        if key == "maxIterations":  # a number or "auto", as in ralph.toml (not msgspec's union words)
            what = f"{MAX_ITERATIONS_EXPECTED}, got {arguments[key]!r}"
        old = {new: old for old, new in s.ALIASES.get(name, {}).items()}
        if key in old and old[key] in arguments:  # named as the call named it
            key = old[key]
        raise ToolCallError(f"{name}: {key}: {what}") from None


def _renamed(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` with the older names of tool ``name``'s arguments (``schemas.ALIASES``) as they
    are named now; ``ToolCallError`` for an argument given under both names."""
    aliases = s.ALIASES.get(name)
    if not aliases or not isinstance(arguments, dict) or not aliases.keys() & arguments.keys():
        return arguments
    renamed = dict(arguments)
    for old, new in aliases.items():
        if old in renamed:
            if new in renamed:
                raise ToolCallError(f"{name}: {old}: the same argument as {new}; give one of them")
            renamed[new] = renamed.pop(old)
    return renamed


class Tools:
    """The tools of one server: its ledger home and the project whose configuration and files the
    loops use."""

    def __init__(self, home: Home, project: Path) -> None:
        self.project = project
        # synced by ``settle``, after the answer
        self.engine = Engine(home, work_dir=project, fsync=False, notify=notify_events)

    def settle(self, task_id: str) -> None:
        """After a call's answer is out: sync the task's journal, then read the task's state ahead of
        its next call (the agent works meanwhile). Best effort: a task that cannot be read is left."""
        try:
            path = journal_path(self.engine.home.journals, task_id)
        except JournalError:
            return
        sync_file(path)
        if path.exists():
            with contextlib.suppress(EngineError):
                self.engine.view(task_id)

    def call(self, name: str, arguments: dict[str, Any]) -> msgspec.Struct:
        """Decode ``arguments``, run tool ``name`` and answer its result; ``ToolCallError`` for a call
        that cannot be made."""
        args = decode(name, arguments)
        task = getattr(args, "task_id", "")
        try:
            with self._lock(name, task):
                result: msgspec.Struct = getattr(self, name)(args)
        except LockBusy as exc:
            raise ToolCallError(f"{name}: task {task!r} is busy: {printable(str(exc))}") from None
        except (EngineError, ConfigError, JournalError, ToolCallError) as exc:
            raise ToolCallError(f"{name}: {printable(str(exc))}") from None
        return result

    def _lock(self, name: str, task: str) -> contextlib.AbstractContextManager[None]:
        """One call on a task at a time, across servers (two agents, one task): the lock of the task's
        folder in the home's ``tmp``, once the task exists (a call on an unknown task leaves nothing)."""
        journal = journal_path(self.engine.home.journals, task)  # JournalError for a bad id
        if name != "iteration_start" and not journal.exists():
            return contextlib.nullcontext()
        return loop_lock(self.engine.home.tmp / f"task-{task}")

    # -- the loop ------------------------------------------------------------------
    def iteration_start(self, a: s.StartArgs) -> s.Step:
        """Start the task's loop with the project's configuration, the agent's and the call's."""
        started = self.engine.start(a.task_id, self._config(a), prompt=a.task)
        return _step(started)

    def _config(self, a: s.StartArgs) -> LoopConfig:
        """The configuration a call starts: ``ralph.toml``, the agent's frontmatter, then the call."""
        source, prefix = source_of(self.project)
        config = find_config(self.project)
        if a.agent:
            config = agent_config(self.project, a.agent, config)
        rules = config.rules
        if a.validation_rules is not None:
            rules = rules_named(config.rules, a.validation_rules, "validationRules", source)
        promises = config.completion_promises
        if a.completion_promises is not None:
            promises = [promise_word(p) for p in a.completion_promises]
        config = msgspec.structs.replace(
            config,
            task=a.task or config.task,
            kind=a.kind or config.kind,
            max_iterations=a.max_iterations if a.max_iterations is not None else config.max_iterations,
            completion_promises=promises,
            rules=rules,
        )
        check_config(config, source, prefix)
        return config

    def iteration_validate(self, a: s.ValidateArgs) -> s.Validated:
        """Run the iteration's rules and guards on what it produced; the signal to act on."""
        files = _inside(self.project, a.files_modified)
        task = str(self.engine.view(a.task_id).row["task"] or "")
        turn = Turn(a.agent_output, files_modified=files, tool_count=a.tool_count, todos=a.todos)
        checked = LoopSession(self.engine, a.task_id, task).check(turn)
        return _validated(checked.result, checked.prompt, paused=checked.paused)

    def iteration_next(self, a: s.NextArgs) -> s.Step:
        """Begin the next iteration (refused, in one sentence, while a person has paused the loop)."""
        return _step(self.engine.next(a.task_id, a.notes))

    def iteration_complete(self, a: s.CompleteArgs) -> s.Completed:
        """Finish the loop: only after the current iteration validated as COMPLETE."""
        view = self.engine.view(a.task_id)
        n = view.iteration
        last = _resolved(view.events, n)
        signal = last.signal if last else None
        if view.status == "running" and signal != "COMPLETE":
            said = f"its last signal is {signal}" if signal else "it has not been validated"
            raise ToolCallError(
                f"iteration {n} of task {a.task_id!r} did not validate as COMPLETE "
                f"({said}); call iteration_validate with the completion promise, or iteration_next"
            )
        promise = a.completion_promise and promise_word(a.completion_promise)
        done = self.engine.complete(a.task_id, promise or (last.promise if last else ""))
        return s.Completed(
            task_id=a.task_id,
            total_iterations=done.total_iterations,
            final_validation_score=done.final_score,
            iteration_history=[_history(r) for r in done.history],
            completed_at=done.completed_at.isoformat(),
            message=done.message,
        )

    def iteration_status(self, a: s.TaskArgs) -> s.Status:
        """The task's row of the ``sessions`` view."""
        row = self.engine.status(a.task_id)
        return s.Status(
            task_id=a.task_id,
            status=ev.session_status(row["status"]),
            task=str(row["task"] or ""),
            agent=str(row["agent"] or ""),
            iteration_number=int(row["iteration"]),
            max_iterations=int(row["max_iterations"] or 0),
            last_signal=row["last_signal"],
            last_score=row["last_score"],
            consecutive_failures=int(row["consecutive_failures"]),
            stop_requested=bool(row["stop_requested"]),
            paused=bool(row["paused"]),
        )

    # -- checkpoints -----------------------------------------------------------------
    def checkpoint_create(self, a: s.CheckpointArgs) -> s.CheckpointCreated:
        """Record a checkpoint of the running loop's current iteration."""
        view = self._running(a.task_id)
        made = checkpoints.create(
            self.engine,
            a.task_id,
            trigger=a.trigger,
            phase=a.execution_phase,
            step=a.execution_step,
            agent_context=a.agent_context,
        )
        return s.CheckpointCreated(task_id=a.task_id, checkpoint_id=made, iteration_number=view.iteration)

    def checkpoint_resume(self, a: s.ResumeArgs) -> s.Resumed:
        """What to go on with: the checkpoint named, or the latest one not expired."""
        r = checkpoints.resume(self.engine, a.task_id, a.checkpoint_id)
        return s.Resumed(
            task_id=a.task_id,
            checkpoint_id=str(r.checkpoint["checkpoint_id"]),
            iteration_number=r.iteration,
            max_iterations=r.max_iterations,
            status=r.status,
            iteration_config=r.config,
            iteration_history=[_history(h) for h in r.history],
            agent_context=r.agent_context,
            resume_instructions=r.instructions,
        )

    def checkpoint_list(self, a: s.ListArgs) -> s.Checkpoints:
        """The task's checkpoints, oldest first."""
        rows = checkpoints.list_checkpoints(self.engine, a.task_id, include_expired=a.include_expired)
        return s.Checkpoints(task_id=a.task_id, checkpoints=[_checkpoint(r) for r in rows])

    # -- hooks -------------------------------------------------------------------------
    def hook_register(self, a: s.HookArgs) -> s.HookRegistered:
        """Register a preset stop hook (recorded, so it outlives the server)."""
        hook_id = self.engine.hook_register(a.task_id, a.hook_type, enabled=a.enabled, metadata=a.metadata)
        return s.HookRegistered(
            hook_id=hook_id, task_id=a.task_id, hook_type=a.hook_type, enabled=a.enabled, metadata=a.metadata
        )

    def hook_evaluate(self, a: s.EvaluateArgs) -> s.HookDecision:
        """The hooks' decision on an output with the current iteration's latest validation; recorded
        as ``hook_decided`` events."""
        view = self._running(a.task_id)
        n = view.iteration
        ran = [e for e in view.events if isinstance(e, ev.ValidationRan) and e.iteration == n]
        found = detect_promises(
            a.agent_output,
            custom=view.config.completion_promises,
            exclusive=view.config.exclusive_promises,
        ).promises
        ctx = AgentContext(
            task_id=a.task_id,
            iteration=n,
            files_modified=tuple(_inside(self.project, a.files_modified)),
            validation_results=tuple(ran[-1].results if ran else ()),
            promises=tuple(p.signal for p in found),
            promise_words=tuple(p.word for p in found),
            agent_output=a.agent_output,
        )
        evals = Registry.from_events(view.events).evaluate(ctx)
        decided = decided_events([e for e in evals if e is not NO_HOOKS], session_id=a.task_id, iteration=n)
        if decided:
            self.engine.append(a.task_id, *decided)
        last = evals[-1]
        return s.HookDecision(
            hook_id=last.hook_id,
            task_id=a.task_id,
            iteration=n,
            action=last.result.action,
            reason=last.result.reason,
            next_prompt=last.result.next_prompt or None,
            checkpoint_created=False,
            metadata=dict(last.result.metadata),
        )

    def hook_list(self, a: s.TaskArgs) -> s.Hooks:
        """The task's hooks."""
        hooks = [s.HookEntry(**h) for h in self.engine.hook_list(a.task_id)]
        return s.Hooks(task_id=a.task_id, hook_count=len(hooks), hooks=hooks)

    def hook_clear(self, a: s.TaskArgs) -> s.HooksCleared:
        """Clear the task's hooks."""
        return s.HooksCleared(task_id=a.task_id, cleared_count=self.engine.hook_clear(a.task_id))

    # -- the stop contract (docs/design/validation.md#validate_completion) -----------
    def validate_completion(self, a: s.CompletionArgs) -> s.CompletionResult:
        """May the agent stop now: yes once the loop has ended or its iteration validated as COMPLETE,
        BLOCKED or ESCALATE; no while it goes on (the stop contract's fail-open rules apply). Recorded as a
        ``stop_decided`` event while the loop runs."""
        view = self.engine.view(a.task_id)
        n = view.iteration
        retries = a.retry_count if a.retry_count is not None else retry_count_from(view.events)

        def loop_validator(params: ValidationParams) -> ValidationResult:
            if view.status != "running":
                return ValidationResult(complete=True, reason=f"the loop is {view.status}")
            last = _resolved(view.events, n)
            if last is None:
                return ValidationResult(
                    complete=False, reason=f"iteration {n} has not been validated: call iteration_validate"
                )
            if last.signal != "CONTINUE":
                return ValidationResult(complete=True, reason=f"iteration {n} validated as {last.signal}")
            said = "; ".join(last.feedback) or "the loop goes on"
            return ValidationResult(complete=False, reason=f"iteration {n} continues: {said}")

        params = ValidationParams(stop_reason=a.stop_reason, tool_count=a.tool_count, retry_count=retries)
        decision = decide_stop(loop_validator, params)
        if view.status == "running":
            self.engine.append(a.task_id, *to_events(decision, session_id=a.task_id, iteration=n))
        return s.CompletionResult(complete=decision.decision == "allow", reason=decision.reason)

    def _running(self, task_id: str) -> SessionView:
        view = self.engine.view(task_id)
        if view.status != "running":
            raise ToolCallError(f"task {task_id!r} is {view.status}; its loop takes no more calls")
        return view


def _inside(project: Path, files: Sequence[str]) -> list[str]:
    """``files`` relative to the project; ``ToolCallError`` for one outside it (as the hook's checks)."""
    root = os.path.realpath(project)
    out: list[str] = []
    for i, name in enumerate(files):
        if "\0" in name:
            raise ToolCallError(f"filesModified[{i}]: expected a path, got one holding a NUL character")
        full = os.path.realpath(os.path.join(root, name))
        if full != root and not full.startswith(root + os.sep):
            raise ToolCallError(f"filesModified[{i}]: {printable(name)!r} is outside the project {root}")
        out.append(os.path.relpath(full, root))
    return out


def _resolved(events: Sequence[ev.AnyEvent], n: int) -> ev.SignalResolved | None:
    """The signal iteration ``n`` last resolved to, with its promise and feedback (``None`` before it
    was validated)."""
    found = [e for e in events if isinstance(e, ev.SignalResolved) and e.iteration == n]
    return found[-1] if found else None


def _step(r: Any) -> s.Step:
    return s.Step(
        task_id=r.session_id,
        iteration_number=r.iteration,
        max_iterations=r.max_iterations,
        checkpoint_id=r.checkpoint_id,
        message=r.message,
        guidance=r.guidance,
    )


def _validated(r: ValidateResult, prompt: str, *, paused: bool) -> s.Validated:
    results = r.results
    return s.Validated(
        task_id=r.session_id,
        iteration_number=r.iteration,
        validation_passed=r.validation_passed,
        completion_signal=r.signal,
        detected_promise=r.detected_promise or None,
        feedback=list(r.feedback),
        validation_report=s.ValidationReport(
            total_rules=len(results),
            passed_rules=sum(1 for x in results if x.passed and not x.errored),
            failed_rules=sum(1 for x in results if not x.passed and not x.errored),
            errored_rules=sum(1 for x in results if x.errored),
            score=r.score,
            rules=list(results),
        ),
        reason=r.reason,
        next_prompt=prompt,
        guards_tripped=[t.guard for t in r.trips],
        paused=paused,
    )


def _history(row: dict[str, Any]) -> s.HistoryEntry:
    return s.HistoryEntry(
        iteration=int(row["iteration"]),
        signal=row["signal"],
        validation_passed=row["validation_passed"],
        score=row["score"],
        promise=row["promise"],
        files_modified=list(row["files_modified"] or []),
        tool_count=int(row["tool_count"] or 0),
        guards=list(row["guards"] or []),
    )


def _checkpoint(row: dict[str, Any]) -> s.Checkpoint:
    return s.Checkpoint(
        checkpoint_id=str(row["checkpoint_id"]),
        iteration_number=int(row["iteration"]),
        trigger=str(row["trigger"]),
        execution_phase=str(row["phase"] or ""),
        execution_step=row["step"],
        created_at=row["created_at"].isoformat(),
        expired=bool(row["expired"]),
        agent_context=dict(row["agent_context"]),
    )
