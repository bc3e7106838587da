"""A task-list loop's progress, read from its journal, and what the loop step does with it
(docs/design/task-lists.md): which task is current, the prompt part that names it, the rules and
the iteration cap of its own, and how a turn that ends the task (COMPLETE, BLOCKED) moves the list on.

The ledger is the truth: the list is the one ``session_started`` recorded, its state what the
``task_*`` events say; the task file is only ticked after the fact.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

import msgspec

from ledger import events as ev
from ledger.core.words import plural
from ledger.loop.decide.signals import Trip
from ledger.loop.validate.rules import RuleConfig, parse_rules

TaskStatus = Literal["pending", "running", "done", "blocked", "skipped"]
OnBlocked = Literal["skip", "stop"]
TASK_GUARD: Final = "task_max_iterations"
"""The guard that trips when a task used the iterations of its own (its ``max_iterations``)."""
LOOP_DONE: Final = "LOOP_DONE"
"""The promise that ends the whole loop, not only the current task."""


@dataclass(frozen=True, slots=True)
class TaskState:
    """A session's task list and where it stands: each task's status, the current task (the last
    started one still running, or stopped blocked) and the iteration it began at."""

    tasks: tuple[ev.TaskSpec, ...]
    status: dict[int, TaskStatus]
    current: ev.TaskSpec | None = None
    began: int = 0
    file: str = ""

    def open(self) -> list[ev.TaskSpec]:
        """The tasks not started yet, in order."""
        return [t for t in self.tasks if self.status[t.task_no] == "pending"]

    def done(self) -> int:
        """How many tasks are done."""
        return sum(1 for s in self.status.values() if s == "done")


def listed(events: Sequence[ev.AnyEvent | ev.Event]) -> bool:
    """Whether ``events`` are a task-list loop's: its list is recorded in the append that starts it,
    before any turn, so a loop without one is known from its first few events (the step asks on
    every turn: a long journal is not read through for it)."""
    for e in events:
        if isinstance(e, ev.TaskStarted):
            return bool(e.task_list)
        if isinstance(e, ev.AgentTurn) or (isinstance(e, ev.IterationStarted) and e.iteration > 1):
            return False
    return False


def task_state(events: Sequence[ev.AnyEvent | ev.Event]) -> TaskState | None:
    """The task list of the session whose events are ``events`` (None: not a task-list loop)."""
    if not listed(events):
        return None
    tasks: tuple[ev.TaskSpec, ...] = ()
    status: dict[int, TaskStatus] = {}
    current: ev.TaskSpec | None = None
    began, file = 0, ""
    for e in events:
        if isinstance(e, ev.SessionStarted):
            tasks, status, current, began, file = (), {}, None, 0, ""
        if isinstance(e, ev.TaskStarted) and e.task_list:  # the session's first: the list
            tasks, file = tuple(e.task_list), e.task_file
            status = {t.task_no: "done" if t.done else "pending" for t in tasks}
        if isinstance(e, ev.TaskStarted) and e.task_no in status:
            status[e.task_no] = "running"
            current, began = tasks[e.task_no - 1], e.iteration
        elif isinstance(e, ev.TaskCompleted) and e.task_no in status:
            status[e.task_no] = "done"
        elif isinstance(e, ev.TaskBlocked) and e.task_no in status:
            status[e.task_no] = "skipped" if e.skipped else "blocked"
    if not tasks:
        return None
    if current is not None and status[current.task_no] not in ("running", "blocked"):
        current = None
    return TaskState(tasks, status, current, began, file)


# -- the prompt ------------------------------------------------------------------------------------
def task_prompt(task: str, events: Sequence[ev.AnyEvent | ev.Event]) -> str:
    """``task`` (the loop's own prompt) followed by the current task and the list's state: what a
    task-list loop's every prompt starts with; ``task`` itself for other loops."""
    state = task_state(events)
    if state is None or state.current is None:
        return task
    cur, total = state.current, len(state.tasks)
    done = state.done()
    left = sum(1 for s in state.status.values() if s in ("pending", "running"))
    head = f"Task list{f' ({state.file})' if state.file else ''}: {done} of {total} done, {left} left."
    lines = [head, "", f"Current task ({cur.task_no} of {total}): {cur.title}"]
    if cur.description.strip():
        lines += [cur.description.strip()]
    lines.append("")
    marks = {"done": "[x]", "skipped": "[-]", "blocked": "[!]"}
    for t in state.tasks:
        mark = marks.get(state.status[t.task_no], "[ ]")
        lines.append(f"- {mark} {t.task_no}. {t.title}{'  <- current' if t is cur else ''}")
    lines += [
        "",
        "Work on the current task only. When it is done, end your reply with <promise>COMPLETE</promise>;"
        " if it cannot be done, with <promise>BLOCKED</promise> and why.",
    ]
    body = "\n".join(lines)
    return f"{task.rstrip()}\n\n{body}" if task.strip() else body


def task_ends(events: Sequence[ev.AnyEvent | ev.Event], since: int) -> list[str]:
    """One line for each task that ended in ``events[since:]`` (a turn's append): done, skipped
    (blocked, the loop goes on) or blocked (the loop stops on it); what a driver says."""
    state = task_state(events)
    if state is None:
        return []
    total = len(state.tasks)
    said = []
    for e in events[since:]:
        if isinstance(e, ev.TaskCompleted):
            said.append(f"task {e.task_no} of {total} done: {e.title}")
        elif isinstance(e, ev.TaskBlocked):
            after = "skipped, the loop goes on" if e.skipped else "the loop stops on it"
            said.append(f"task {e.task_no} of {total} blocked ({e.reason or 'no reason given'}): {after}")
    return said


def task_began(events: Sequence[ev.AnyEvent], iteration: int) -> bool:
    """Whether a task began at ``iteration``: its prompt is fresh (nothing of the last task's turns)."""
    return any(isinstance(e, ev.TaskStarted) and e.iteration == iteration for e in events)


@dataclass(frozen=True, slots=True)
class Fresh:
    """What a new task's first prompt learned from the iteration before it: nothing."""

    iteration: int
    next_prompt: str = ""
    feedback: tuple[str, ...] = field(default=())


# -- rules and the task's own cap -------------------------------------------------------------------
def task_rules(events: Sequence[ev.AnyEvent]) -> list[RuleConfig]:
    """The current task's own rules, each named ``NAME (task N)``."""
    state = task_state(events)
    if state is None or state.current is None or not state.current.rules:
        return []
    no = state.current.task_no
    rules = parse_rules(state.current.rules, f"task {no} of the recorded list", root=f"tasks[{no - 1}].rules")
    return [msgspec.structs.replace(r, name=f"{r.name} (task {no})") for r in rules]


def task_refusals(events: Sequence[ev.AnyEvent], results: Sequence[ev.RuleResult]) -> list[str]:
    """``name: message`` of each of the current task's own rules that failed: each refuses the
    task's completion, whatever its type."""
    names = {r.name for r in task_rules(events)}
    return [f"{r.name}: {r.message}" for r in results if r.name in names and not (r.passed and not r.errored)]


def task_exhausted(events: Sequence[ev.AnyEvent], iteration: int, signal: ev.Signal) -> Trip | None:
    """At the last iteration the current task may take (its own ``max_iterations``), anything but an
    ending is a trip of ``task_max_iterations``: BLOCKED, so the task is skipped or the loop stops
    as ``on_task_blocked`` says."""
    state = task_state(events)
    if state is None or state.current is None or signal != "CONTINUE":
        return None
    cap, used = state.current.max_iterations, iteration - state.began + 1
    if cap is None or used < cap:
        return None
    detail = f"task {state.current.task_no} used its {plural(cap, 'iteration')} (its max_iterations)"
    return Trip(TASK_GUARD, "BLOCKED", detail, {"task_no": state.current.task_no, "iterations": used})


# -- a turn that ends a task -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TaskEnd:
    """How a turn ended the current task: the events that say so, whether the loop goes on to the
    next task (``go_on``), and the task to tick off in the file (``done``)."""

    events: list[ev.Event]
    go_on: bool
    done: ev.TaskSpec | None = None


def task_end(
    events: Sequence[ev.AnyEvent],
    session_id: str,
    iteration: int,
    signal: ev.Signal,
    promise: str,
    reason: str,
    trips: Sequence[Trip],
    *,
    on_blocked: OnBlocked,
    manual_stop: bool,
) -> TaskEnd | None:
    """What ``signal`` at ``iteration`` does to the current task (None: nothing, or no task list).
    COMPLETE completes it; the loop goes on while a task is left, unless the promise was
    ``LOOP_DONE``. BLOCKED because the task is stuck (the agent said so, or it used its own
    iterations; not a person's stop nor another guard) blocks it: skipped, and the loop goes on,
    when ``on_blocked`` is ``skip`` and a task is left; else the loop stops blocked."""
    state = task_state(events)
    if state is None or state.current is None or state.status[state.current.task_no] != "running":
        return None
    cur, left = state.current, bool(state.open())
    if signal == "COMPLETE":
        done = ev.TaskCompleted(
            session_id=session_id, iteration=iteration, task_no=cur.task_no, title=cur.title, promise=promise
        )
        return TaskEnd([done], left and promise != LOOP_DONE, cur)
    other_guard = any(t.signal == "BLOCKED" and t.guard != TASK_GUARD for t in trips)
    if signal != "BLOCKED" or manual_stop or other_guard:
        return None
    skipped = on_blocked == "skip" and left
    blocked = ev.TaskBlocked(
        session_id=session_id,
        iteration=iteration,
        task_no=cur.task_no,
        title=cur.title,
        reason=reason,
        skipped=skipped,
    )
    return TaskEnd([blocked], skipped)


def task_opening(
    events: Sequence[ev.AnyEvent | ev.Event],
    session_id: str,
    iteration: int,
    task_list: Sequence[ev.TaskSpec] = (),
    task_file: str = "",
) -> list[ev.Event]:
    """The ``task_started`` of an iteration that begins (none when a task is running): the task a
    person let go on after it stopped the loop blocked, else the next one not started. A loop that
    starts gives its ``task_list`` (read from ``task_file``): its first task's event records it."""
    if task_list:
        first = next(t for t in task_list if not t.done)
        return [
            ev.TaskStarted(
                session_id=session_id,
                iteration=iteration,
                task_no=first.task_no,
                title=first.title,
                task_list=list(task_list),
                task_file=task_file,
            )
        ]
    state = task_state(events)
    if state is None or (state.current is not None and state.status[state.current.task_no] == "running"):
        return []
    nxt = state.current if state.current is not None else next(iter(state.open()), None)
    if nxt is None:
        return []
    return [ev.TaskStarted(session_id=session_id, iteration=iteration, task_no=nxt.task_no, title=nxt.title)]


# -- the file ---------------------------------------------------------------------------------------
def file_record(base: Path, path: Path) -> str:
    """``path`` as a session records it: relative to ``base`` (the folder holding the home) when
    inside it, else absolute, as ``work_dir`` is."""
    here = os.path.realpath(path)
    relative = os.path.relpath(here, os.path.realpath(base))
    return here if relative == os.pardir or relative.startswith(os.pardir + os.sep) else relative


def file_of(base: Path, recorded: str) -> Path:
    """The task file a session recorded (``file_record``)."""
    return Path(recorded) if os.path.isabs(recorded) else base / recorded


def tick(base: Path, events: Sequence[ev.AnyEvent | ev.Event], task: ev.TaskSpec) -> list[ev.Event]:
    """Tick ``task`` off in the session's task file (``files.mark_done``): nothing to record when
    that worked, else an ``error_recorded`` (component ``tasks``) saying why in one line; the
    ledger, which holds the task's end already, stays the truth."""
    from ledger.core.errors import one_line
    from ledger.loop.tasks.files import mark_done

    state = task_state(events)
    if state is None or not state.file:
        return []
    session_id = next(e.session_id for e in events)
    try:
        mark_done(file_of(base, state.file), task)
    except (ValueError, OSError) as exc:
        return [ev.ErrorRecorded(session_id=session_id, component="tasks", message=one_line(exc))]
    return []
