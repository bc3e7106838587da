"""Checkpoints: create, list, resume, expire and prune.

A checkpoint is a ``checkpoint_created`` event in the session's journal, expired by a later
``checkpoint_expired`` event; nothing is ever deleted or rewritten. Every function takes the
``Engine`` of the loop (its home, clock and journals); like the engine, it keeps no state: it reads
the ``checkpoints`` view (the one definition of "expired") and appends. Triggers, ids, what a resume
carries, expiry and pruning: docs/design/checkpoints.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from ledger import events as ev
from ledger.core.errors import no_session
from ledger.loop.engine import Engine
from ledger.loop.engine_types import EngineError
from ledger.storage.database import Ledger
from ledger.storage.journal import journal_path

DEFAULT_RETENTION: Final = timedelta(days=7)

# Retention per trigger (docs/design/checkpoints.md#triggers), the engine's own triggers too: an
# ``auto_iteration`` checkpoint is the per-iteration one (24 h), a ``hook``
# checkpoint is kept like the other coarse ones (7 days).
RETENTION: Final[dict[str, timedelta]] = {
    "iteration_start": timedelta(days=7),
    "iteration_checkpoint": timedelta(hours=24),
    "iteration_milestone": timedelta(days=7),
    "iteration_error": timedelta(days=7),
    "iteration_complete": timedelta(days=7),
    "auto_iteration": timedelta(hours=24),
    "hook": timedelta(days=7),
}

CONTEXT_VALUE_CHARS: Final = 60


class CheckpointError(EngineError):
    """A checkpoint call that cannot be made; the message is one line."""


@dataclass(frozen=True, slots=True)
class Resume:
    """What ``checkpoint_resume`` gives back."""

    checkpoint: dict[str, Any]
    iteration: int
    max_iterations: int
    status: ev.SessionStatus
    config: dict[str, Any]
    history: list[dict[str, Any]]
    agent_context: dict[str, Any]
    instructions: str


# -- reading ------------------------------------------------------------------
@contextmanager
def _session(engine: Engine, session_id: str) -> Iterator[tuple[Ledger, dict[str, Any]]]:
    """An in-memory ledger of one session's journal and its ``sessions`` row."""
    path = journal_path(engine.home.journals, session_id)
    if not path.exists():
        raise CheckpointError(no_session(session_id, engine.home.root))
    with Ledger.memory(engine.home) as ledger:
        ledger.ingest([path])
        rows = ledger.rows("SELECT * FROM sessions WHERE session_id = ?", [session_id])
        if not rows:
            raise CheckpointError(f"session {session_id!r} has no events")
        yield ledger, rows[0]


def _utc(ts: datetime) -> datetime:
    """The ledger stores naive UTC; callers get aware UTC."""
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


def _json_dict(value: object) -> dict[str, Any]:
    """A JSON column (a string) or an already-decoded value, as a dict."""
    decoded = json.loads(value) if isinstance(value, str) else value
    return dict(decoded) if isinstance(decoded, dict) else {}


def _row(raw: dict[str, Any]) -> dict[str, Any]:
    """A ``checkpoints`` view row with aware timestamps and a decoded context."""
    row = dict(raw)
    row["created_at"] = _utc(raw["created_at"])
    row["expires_at"] = _utc(raw["expires_at"]) if raw["expires_at"] is not None else None
    row["agent_context"] = _json_dict(raw["agent_context"])
    return row


def _checkpoints(ledger: Ledger, session_id: str) -> list[dict[str, Any]]:
    raw = ledger.rows("SELECT * FROM checkpoints WHERE session_id = ? ORDER BY seq", [session_id])
    return [_row(r) for r in raw]


def _find(session_id: str, rows: Sequence[dict[str, Any]], checkpoint_id: str) -> dict[str, Any]:
    """The (latest) checkpoint with this id."""
    found = [r for r in rows if r["checkpoint_id"] == checkpoint_id]
    if not found:
        raise CheckpointError(f"no checkpoint {checkpoint_id!r} in session {session_id!r}")
    return found[-1]


def list_checkpoints(
    engine: Engine, session_id: str, *, include_expired: bool = False
) -> list[dict[str, Any]]:
    """The session's checkpoints in journal order (rows of the ``checkpoints``
    view; ``created_at`` / ``expires_at`` aware UTC, ``agent_context`` a dict)."""
    with _session(engine, session_id) as (ledger, _):
        rows = _checkpoints(ledger, session_id)
    return rows if include_expired else [r for r in rows if not r["expired"]]


def get(engine: Engine, session_id: str, checkpoint_id: str) -> dict[str, Any]:
    """One checkpoint of the session, expired or not (a row of :func:`list_checkpoints`);
    ``CheckpointError`` when there is none by that id."""
    return _find(session_id, list_checkpoints(engine, session_id, include_expired=True), checkpoint_id)


# -- creating and expiring ------------------------------------------------------
def _next_id(session_id: str, iteration: int, taken: set[str]) -> str:
    """``<session>-cp<iteration>.<j>`` with the first ``j`` not yet taken."""
    j = 1
    while f"{session_id}-cp{iteration}.{j}" in taken:
        j += 1
    return f"{session_id}-cp{iteration}.{j}"


def _carried_context(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The latest non-empty agent context (the rule ``Engine.next`` follows)."""
    context: dict[str, Any] = {}
    for r in rows:
        context = r["agent_context"] or context
    return context


def create(
    engine: Engine,
    session_id: str,
    *,
    trigger: str = "iteration_checkpoint",
    phase: str = "",
    step: int | None = None,
    agent_context: Mapping[str, Any] | None = None,
    draft: str = "",
    draft_type: str = "",
) -> str:
    """Record a checkpoint at the session's current iteration; returns its id.

    ``step`` defaults to the iteration number; ``agent_context`` defaults to
    the latest non-empty one, as ``Engine.next`` carries it over."""
    if not trigger:
        raise CheckpointError("a checkpoint needs a trigger, e.g. 'iteration_checkpoint'")
    with _session(engine, session_id) as (ledger, session):
        rows = _checkpoints(ledger, session_id)
    n = int(session["iteration"])
    checkpoint_id = _next_id(session_id, n, {r["checkpoint_id"] for r in rows})
    engine.journal(session_id).append(
        ev.CheckpointCreated(
            session_id=session_id,
            iteration=n,
            checkpoint_id=checkpoint_id,
            trigger=trigger,
            phase=phase,
            step=n if step is None else step,
            agent_context=dict(agent_context) if agent_context is not None else _carried_context(rows),
            draft=draft,
            draft_type=draft_type,
        )
    )
    return checkpoint_id


def _expire_events(session_id: str, iteration: int, ids: Sequence[str], reason: str) -> list[ev.Event]:
    return [
        ev.CheckpointExpired(session_id=session_id, iteration=iteration, checkpoint_id=i, reason=reason)
        for i in ids
    ]


def expire(engine: Engine, session_id: str, checkpoint_id: str, reason: str = "manual") -> None:
    """Expire one checkpoint so that it can no longer be resumed (a person's escape hatch)."""
    with _session(engine, session_id) as (ledger, session):
        target = _find(session_id, _checkpoints(ledger, session_id), checkpoint_id)
    if target["expired"]:
        raise CheckpointError(
            f"checkpoint {checkpoint_id!r} of session {session_id!r} is already expired "
            f"({target['expired_reason'] or 'no reason given'})"
        )
    events = _expire_events(session_id, int(session["iteration"]), [checkpoint_id], reason)
    engine.journal(session_id).append(*events)


# -- pruning --------------------------------------------------------------------
def _prunable(
    rows: Sequence[dict[str, Any]], now: datetime, retention: Mapping[str, timedelta], keep: int
) -> list[str]:
    """Ids of live checkpoints beyond the latest ``keep`` of their trigger and
    older than its retention, in journal order."""
    by_trigger: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_trigger.setdefault(r["trigger"], []).append(r)
    old = [r for group in by_trigger.values() for r in group[: max(len(group) - keep, 0)]]
    due = [
        r
        for r in sorted(old, key=lambda r: r["seq"])
        if now - r["created_at"] > retention.get(r["trigger"], DEFAULT_RETENTION)
    ]
    return list(dict.fromkeys(r["checkpoint_id"] for r in due))


def prune(
    engine: Engine,
    session_id: str,
    now: datetime | None = None,
    retention: Mapping[str, timedelta] = RETENTION,
    keep: int = 3,
) -> list[str]:
    """Expire (reason ``"pruned"``) old checkpoints past their retention,
    keeping the latest ``keep`` per trigger; returns the ids expired."""
    if keep < 0:
        raise CheckpointError(f"keep must be at least 0, got {keep}")
    with _session(engine, session_id) as (ledger, session):
        live = [r for r in _checkpoints(ledger, session_id) if not r["expired"]]
    running = ev.session_status(session["status"]) == "running"
    protected = {live[-1]["checkpoint_id"]} if live and running else set()
    when = _utc(now if now is not None else engine.clock())
    ids = [i for i in _prunable(live, when, retention, keep) if i not in protected]
    if ids:
        engine.journal(session_id).append(
            *_expire_events(session_id, int(session["iteration"]), ids, "pruned")
        )
    return ids


# -- resuming -------------------------------------------------------------------
def _choose(session_id: str, rows: Sequence[dict[str, Any]], checkpoint_id: str | None) -> dict[str, Any]:
    """The named checkpoint (refused if expired), or the latest live one."""
    if checkpoint_id is not None:
        chosen = _find(session_id, rows, checkpoint_id)
        if chosen["expired"]:
            raise CheckpointError(
                f"checkpoint {checkpoint_id!r} of session {session_id!r} is expired "
                f"({chosen['expired_reason'] or 'no reason given'}); it cannot be resumed"
            )
        return chosen
    live = [r for r in rows if not r["expired"]]
    if not live:
        raise CheckpointError(f"session {session_id!r} has no unexpired checkpoint to resume")
    return live[-1]


def _config(ledger: Ledger, session_id: str) -> dict[str, Any]:
    rows = ledger.rows(
        "SELECT config FROM events WHERE session_id = ? AND type = 'session_started' "
        "ORDER BY seq DESC LIMIT 1",
        [session_id],
    )
    return _json_dict(rows[0]["config"]) if rows else {}


def _failing_rules(ledger: Ledger, session_id: str, iteration: int) -> list[str]:
    """Rules that failed or errored in the last validation of ``iteration``."""
    rows = ledger.rows(
        """SELECT r.rule FROM rule_results r
           JOIN iteration_scores s ON s.session_id = r.session_id AND s.validation_seq = r.seq
           WHERE s.session_id = ? AND s.iteration = ? AND (NOT r.passed OR r.errored)
           ORDER BY r.rule""",
        [session_id, iteration],
    )
    return [str(r["rule"]) for r in rows]


def _format_value(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= CONTEXT_VALUE_CHARS else text[: CONTEXT_VALUE_CHARS - 1] + "…"


def instructions(
    task: str,
    iteration: int,
    max_iterations: int,
    status: ev.SessionStatus,
    last_score: float | None,
    failing: Sequence[str],
    agent_context: Mapping[str, Any],
) -> str:
    """The human-readable resume summary, e.g. ``Resume iteration 3 of 15 of
    POST /login: last score 50, 1 rule failing (lint_clean). Agent context:
    lastError=lint.``"""
    if last_score is None:
        state = "no validation yet"
    elif failing:
        plural = "rule" if len(failing) == 1 else "rules"
        state = f"last score {round(last_score, 1):g}, {len(failing)} {plural} failing ({', '.join(failing)})"
    else:
        state = f"last score {round(last_score, 1):g}, all rules passing"
    task = " ".join(task.split())  # one line, whatever the prompt's own lines
    text = f"Resume iteration {iteration} of {max_iterations} of {task}: {state}."
    if agent_context:
        text += (
            " Agent context: " + ", ".join(f"{k}={_format_value(v)}" for k, v in agent_context.items()) + "."
        )
    if status != "running":
        text += f" The session is {status}: it takes no more iterations."
    return text


def resume(engine: Engine, session_id: str, checkpoint_id: str | None = None) -> Resume:
    """``checkpoint_resume``: the latest unexpired checkpoint, or the one named."""
    with _session(engine, session_id) as (ledger, session):
        chosen = _choose(session_id, _checkpoints(ledger, session_id), checkpoint_id)
        n = int(chosen["iteration"])
        history = ledger.rows(
            "SELECT * FROM iterations WHERE session_id = ? AND iteration <= ? ORDER BY iteration",
            [session_id, n],
        )
        scored = [h for h in history if h["score"] is not None]
        failing = _failing_rules(ledger, session_id, int(scored[-1]["iteration"])) if scored else []
        config = _config(ledger, session_id)
    max_it = int(session["max_iterations"] or 0)
    status = ev.session_status(session["status"])
    last_score = float(scored[-1]["score"]) if scored else None
    task = str(session["task"] or "") or f"session {session_id}"
    text = instructions(task, n, max_it, status, last_score, failing, chosen["agent_context"])
    return Resume(chosen, n, max_it, status, config, history, dict(chosen["agent_context"]), text)
