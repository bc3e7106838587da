"""What a monitor answers: plain msgspec Structs (sessions, fleet totals, iterations, heat,
events, checkpoints, alerts, progress), built from the ledger's view rows, so a front end needs
neither DuckDB nor SQL.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec

from ledger.core.words import plural
from ledger.events import SessionStatus, session_status


class Progress(msgspec.Struct, frozen=True, kw_only=True):
    """How far loading the backlog has come; ``sessions``: those the last batch brought in."""

    files_done: int
    files_total: int
    bytes_done: int
    bytes_total: int
    events: int
    sessions: list[str] = []


class Alert(msgspec.Struct, frozen=True, kw_only=True):
    """A session completed, blocked or escalated (``kind``); the reason of a block or escalation
    names the guard that forced it."""

    session_id: str
    iteration: int
    kind: str
    message: str
    seq: int
    ts: datetime | None = None
    """When the event was recorded."""
    short: str = ""
    """The message in fewer words, for a one-line pop-up: the session, then why it ended (its
    kind is told by the pop-up's symbol and colour)."""


class Update(msgspec.Struct, frozen=True, kw_only=True):
    """What one ``refresh`` ingested: the sessions that changed, their alerts, the events, the bad
    lines (``path:line: reason``), the journals found truncated or rewritten (``reset``: their
    paths; their sessions were read again from the start) and the sources deleted or back."""

    sessions: list[str]
    alerts: list[Alert]
    events: int
    bad_lines: list[str]
    reset: list[str] = []
    vanished: dict[str, list[str]] = {}
    """Each watched source deleted since the last refresh (a home's root, a journal directory, a
    journal) and the sessions it held, which the monitor no longer has."""
    returned: list[str] = []
    """Sources deleted earlier that exist again (their journals are read again as they come)."""

    @property
    def news(self) -> bool:
        """Whether the refresh found anything to show."""
        return bool(self.sessions or self.bad_lines or self.vanished or self.returned)


class SessionRow(msgspec.Struct, frozen=True, kw_only=True):
    """One session as the sessions table shows it; ``scores`` are the last scores, oldest first."""

    session_id: str
    status: SessionStatus
    agent: str
    task: str
    iteration: int
    max_iterations: int
    last_score: float | None
    scores: list[float]
    last_signal: str
    consecutive_failures: int
    tokens: int
    """As the ``turn_tokens`` view defines them (input + output + cache), summed over the session."""
    cost_usd: float | None = None
    """US dollars, as the ``turn_costs`` view defines them, summed (``None``: not known)."""
    started_at: datetime | None
    updated_at: datetime | None
    stop_requested: bool
    worktree: str = ""
    """The git worktree the loop runs in (``run --worktree``), ``""`` for the project's checkout."""
    branch: str = ""
    """That worktree's branch (``ralph/NAME``), ``""`` for the project's checkout."""
    paused: bool = False
    """A person paused the loop (``ralph-ledger pause``) and has not resumed it."""
    source: str = ""
    """The dataset source(s) holding the session (``DatasetMonitor``), ``""`` for a home's."""
    stalled: bool = False
    """Running, but its loop's latest step is a BLOCKED or ESCALATE signal and no iteration has
    started since: nothing drives it (a runner exits when its loop blocks; after an unblock, ``run
    --resume`` or the Claude Code session's next stop goes on). See ``STEP_SQL``."""
    runner: bool = False
    """Driven by ``ralph-ledger run`` (it recorded its agent command): ``run --resume`` goes on with it."""
    tasks_total: int = 0
    """The tasks of a task-list loop's list (0: a loop without one; docs/tasks.md)."""
    tasks_done: int = 0
    """How many of them are done."""
    current_task: str = ""
    """The title of the task under way ("" when none is)."""
    chain_break: str = ""
    """Where its journal's hash chain broke (``"line N: how"``: docs/verify.md), ``""`` while it holds."""
    waiting_until: datetime | None = None
    """Running, and a usage limit stopped its latest turn: when the limit resets (else the end of the
    wait its driver takes); ``None`` once a turn came after it (``STEP_SQL``). ``waiting_at(now)``."""

    def waiting_at(self, now: datetime) -> datetime | None:
        """``waiting_until`` while it is still ahead of ``now``: the loop waits out a usage limit."""
        return ahead(self.waiting_until, now)


class TaskRow(msgspec.Struct, frozen=True, kw_only=True):
    """One task of a task-list loop, as the ``tasks`` view has it: its place in the list, ``status``
    (pending, running, done, blocked or skipped) and what its iterations took."""

    task_no: int
    title: str
    status: str
    iterations: int
    tokens: int
    cost_usd: float | None
    seconds: float | None


class Fleet(msgspec.Struct, frozen=True, kw_only=True):
    """Totals over every session; ``completion_rate`` is complete / ended (``None`` before any ended), as
    ``loop_metrics.completion_rate`` per agent (not ``autonomous_completion_rate``, which leaves out
    the loops a human overrode)."""

    sessions: int
    running: int
    """Running sessions, the stalled ones left out."""
    complete: int
    blocked: int
    escalated: int
    completion_rate: float | None
    stalled: int = 0
    """Running sessions that nothing drives (``SessionRow.stalled``)."""


def fleet_of(counts: Mapping[SessionStatus, int], stalled: int = 0) -> Fleet:
    """Fleet totals from the number of sessions per status and of the running ones ``stalled`` (the
    one place they are added up: the monitor counts with SQL, a screen holding every session's row
    counts its rows)."""
    complete, blocked, escalated = (counts.get(s, 0) for s in ("complete", "blocked", "escalated"))
    ended = complete + blocked + escalated
    return Fleet(
        sessions=sum(counts.values()),
        running=counts.get("running", 0) - stalled,
        complete=complete,
        blocked=blocked,
        escalated=escalated,
        completion_rate=complete / ended if ended else None,
        stalled=stalled,
    )


class RuleCell(msgspec.Struct, frozen=True, kw_only=True):
    """One rule's result in one iteration (its last run there)."""

    rule: str
    passed: bool
    errored: bool
    message: str
    duration_ms: float


class IterationRow(msgspec.Struct, frozen=True, kw_only=True):
    """One row of the iteration timeline; its tokens as the ``turn_tokens`` view defines them
    (``tokens_total`` = input + output + cache, the number shown wherever tokens are)."""

    iteration: int
    started_at: datetime | None
    duration_s: float | None
    score: float | None
    signal: str
    promise: str
    hook_action: str
    stop_decision: str
    guards: list[str]
    files_modified: list[str]
    tokens_input: int
    tokens_output: int
    tokens_cache: int
    tokens_total: int
    rules: list[RuleCell]
    cost_usd: float | None = None
    """US dollars, as the ``turn_costs`` view defines them (``None``: not known)."""
    context_used: float | None = None
    """How full the model's context window was at the iteration's last turn (``None``: not known)."""


class IterationDetail(msgspec.Struct, frozen=True, kw_only=True):
    """What the agent said in one iteration and what it was told next."""

    iteration: int
    output_excerpt: str
    feedback: list[str]
    next_prompt: str
    hook_reason: str
    summary: str = ""  # the summary of the loop its prompt carried (``summary = true``)
    guidance: str = ""
    """What a person steered the loop with, given in this iteration's prompt (``ralph-ledger steer``)."""


class Heat(msgspec.Struct, frozen=True, kw_only=True):
    """Files modified per iteration: ``cells[f][i]`` is whether ``files[f]`` changed in ``iterations[i]``;
    the files most often modified come first."""

    files: list[str]
    iterations: list[int]
    cells: list[list[bool]]


class EventLine(msgspec.Struct, frozen=True, kw_only=True):
    """One event, summarised on one line."""

    seq: int
    ts: datetime
    type: str
    iteration: int
    text: str


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True):
    """A checkpoint of a session."""

    checkpoint_id: str
    iteration: int
    trigger: str
    created_at: datetime | None
    expired: bool


def ahead(until: datetime | None, now: datetime) -> datetime | None:
    """``until`` while it is still ahead of ``now`` (a usage limit's wait not over yet), else None."""
    return until if until is not None and now < until else None


def aware(value: Any) -> datetime | None:
    """DuckDB's naive UTC timestamps as aware datetimes."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return None


def alert_of(r: dict[str, Any]) -> Alert:
    """An ``Alert`` from a row of the alerts query."""
    kind = {"session_completed": "completed", "session_blocked": "blocked"}.get(str(r["type"]), "escalated")
    sid, n = str(r["session_id"]), int(r["iteration"] or 0)
    if kind == "completed":
        what = f"complete after {plural(r['total_iterations'] or n, 'iteration')}"
        message = f"{sid} {what}"
    else:
        what = " ".join(str(r["reason"] or r["guard"] or f"at iteration {n}").split())
        message = f"{sid} {kind} at iteration {n}: {r['reason'] or r['guard'] or ''}".rstrip(": ")
    return Alert(
        session_id=sid,
        iteration=n,
        kind=kind,
        message=message,
        seq=int(r["seq"]),
        ts=aware(r["ts"]),
        short=f"{sid}: {what}",
    )


def session_of(r: dict[str, Any]) -> SessionRow:
    """A ``SessionRow`` from a row of the ``sessions`` view."""
    return SessionRow(
        session_id=str(r["session_id"]),
        status=session_status(r["status"]),
        agent=str(r["agent"] or ""),
        task=str(r["task"] or ""),
        iteration=int(r["iteration"] or 0),
        max_iterations=int(r["max_iterations"] or 0),
        last_score=float(r["last_score"]) if r["last_score"] is not None else None,
        scores=[float(s) for s in r["scores"] or []],
        last_signal=str(r["last_signal"] or ""),
        consecutive_failures=int(r["consecutive_failures"] or 0),
        tokens=int(r["tokens"] or 0),
        cost_usd=_money(r.get("cost_usd")),
        started_at=aware(r["started_at"]),
        updated_at=aware(r["updated_at"]),
        stop_requested=bool(r["stop_requested"]),
        worktree=str(r.get("worktree") or ""),
        branch=str(r.get("branch") or ""),
        paused=bool(r.get("paused")),
        stalled=bool(r.get("stalled")),
        runner=bool(r.get("runner")),
        tasks_total=int(r.get("tasks_total") or 0),
        tasks_done=int(r.get("tasks_done") or 0),
        current_task=str(r.get("current_task") or ""),
        chain_break=str(r.get("chain_break") or ""),
        waiting_until=aware(r.get("waiting_until")),
    )


def task_of(r: dict[str, Any]) -> TaskRow:
    """A ``TaskRow`` from a row of the ``tasks`` view."""
    return TaskRow(
        task_no=int(r["task_no"]),
        title=str(r["title"] or ""),
        status=str(r["status"] or ""),
        iterations=int(r["iterations"] or 0),
        tokens=int(r["tokens"] or 0),
        cost_usd=_money(r.get("cost_usd")),
        seconds=float(r["seconds"]) if r.get("seconds") is not None else None,
    )


def iteration_of(r: dict[str, Any], rules: list[RuleCell]) -> IterationRow:
    """An ``IterationRow`` from a row of the ``iterations`` view and its rule cells."""
    return IterationRow(
        iteration=int(r["iteration"]),
        started_at=aware(r["started_at"]),
        duration_s=float(r["duration_s"]) if r["duration_s"] is not None else None,
        score=float(r["score"]) if r["score"] is not None else None,
        signal=str(r["signal"] or ""),
        promise=str(r["promise"] or ""),
        hook_action=str(r["hook_action"] or ""),
        stop_decision=str(r["stop_decision"] or ""),
        guards=[str(g) for g in r["guards"] or []],
        files_modified=[str(f) for f in r["files_modified"] or []],
        tokens_input=int(r["tokens_input"] or 0),
        tokens_output=int(r["tokens_output"] or 0),
        tokens_cache=int(r["tokens_cache"] or 0),
        tokens_total=int(r["tokens_total"] or 0),
        rules=rules,
        cost_usd=_money(r.get("cost_usd")),
        context_used=_money(r.get("context_used")),
    )


def detail_of(iteration: int, rows: list[dict[str, Any]]) -> IterationDetail:
    """An ``IterationDetail`` from an iteration's ``iteration_started``, ``agent_turn``,
    ``signal_resolved``, ``hook_decided`` and ``summary_given`` rows, in order."""
    output, feedback, prompt, reason, summary, guidance = "", list[str](), "", "", "", ""
    for r in rows:
        if r["type"] == "iteration_started":
            guidance = str(r["guidance"] or "")
        elif r["type"] == "agent_turn":
            output = str(r["output_excerpt"] or "")
        elif r["type"] == "signal_resolved":
            feedback = [str(f) for f in r["feedback"] or []]
        elif r["type"] == "summary_given":
            summary = str(r["loop_summary"] or "")
        else:
            prompt = str(r["next_prompt"] or "") or prompt
            reason = str(r["reason"] or "") or reason
    return IterationDetail(
        iteration=iteration,
        output_excerpt=output,
        feedback=feedback,
        next_prompt=prompt,
        hook_reason=reason,
        summary=summary,
        guidance=guidance,
    )


def _money(value: Any) -> float | None:
    """A nullable number of the views as a float."""
    return None if value is None else float(value)


def _files_and_tools(r: dict[str, Any]) -> str:
    """``2 files, 1 tool``: what a turn changed and used."""
    return f"{plural(len(r['files_modified'] or []), 'file')}, {plural(r['tool_count'] or 0, 'tool')}"


def _until(resets_at: object) -> str:
    """``, until 2026-11-28 17:00 UTC``: when a limit resets (``""`` when it was not said)."""
    at = aware(resets_at) if isinstance(resets_at, datetime) else None
    return f", until {at.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if at is not None else ""


def summary_of(r: dict[str, Any]) -> str:
    """One line saying what an event says."""
    t = str(r["type"])
    parts: dict[str, str] = {
        "session_started": "session started",
        "iteration_started": f"iteration {r['iteration']} started"
        + (f", guided: {r['guidance']}" if r.get("guidance") else ""),
        "agent_turn": f"agent turn: {_files_and_tools(r)}",
        "promise_detected": f"promise {r['promise']} -> {r['signal']}",
        "validation_ran": f"validation {'passed' if r['passed'] else 'failed'}, score {r['score'] or 0:.0f}",
        "hook_decided": f"hook {r['hook_id']}: {r['action']} ({r['reason'] or ''})",
        "guard_tripped": f"guard {r['guard']} tripped: {r['detail'] or ''}",
        "signal_resolved": f"signal {r['signal']}",
        "stop_decided": f"stop {r['decision']}: {r['reason'] or ''}",
        "checkpoint_created": f"checkpoint {r['checkpoint_id']} ({r['trigger']})",
        "session_completed": "session complete after "
        + plural(r["total_iterations"] or r["iteration"] or 0, "iteration"),
        "session_blocked": f"session blocked: {r['reason'] or ''}",
        "session_escalated": f"session escalated: {r['reason'] or r['guard'] or ''}",
        "override": f"override {r['kind']}: {r['reason'] or ''}",
        "error_recorded": f"error in {r['component']}: {r['message'] or ''}",
        "rate_limited": f"rate limited ({r['reason'] or 'limit reached'}): a {r['wait_s'] or 0:.0f} s wait"
        + _until(r.get("resets_at")),
        "summary_given": f"loop summary in the prompt: {r.get('summary_bytes') or 0} bytes",
        "subagent_stopped": f"subagent {r['agent_type'] or r['agent_id'] or ''} stopped: "
        f"{_files_and_tools(r)}",
        "notification_sent": f"notification ({r['notice']}) sent to {plural(r['targets'] or 0, 'URL')}"
        + (f", {r['failed']} failed" if r["failed"] else ""),
    }
    text = " ".join(parts.get(t, t.replace("_", " ")).split()).replace(" ()", "")
    return text.removesuffix(":")
