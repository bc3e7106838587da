"""Read a session's ``guards.Facts`` from the ledger: views and detectors only."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ledger import events as ev
from ledger.loop.decide.guards import Facts, GuardConfig, circuit_state
from ledger.loop.validate.completion import retry_count_from
from ledger.storage.database import Ledger


def _one(ledger: Ledger, sql: str, params: list[Any] | dict[str, Any]) -> tuple[Any, ...] | None:
    row: tuple[Any, ...] | None = next(iter(ledger.con.execute(sql, params).fetchall()), None)
    return row


def _naive_utc(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(tzinfo=None) if now.tzinfo else now


def read_facts(ledger: Ledger, session_id: str, cfg: GuardConfig, now: datetime) -> Facts:
    """The session as the guards see it, after its latest recorded events."""
    sid = [session_id]
    if cfg.cost_budget.enabled or cfg.context_window.enabled:  # the library only then (hook ledgers)
        ledger.fill_prices()
    row = _one(
        ledger, "SELECT iteration, max_iterations, tokens, cost_usd FROM sessions WHERE session_id = ?", sid
    )
    if row is None:
        raise LookupError(f"no session {session_id!r} in the ledger")
    iteration, max_iterations, tokens, cost_usd = row
    clock = _one(
        ledger,
        "SELECT elapsed_s, backward_steps, forward_jumps, skipped_s "
        "FROM session_elapsed(session := ?, now := ?)",
        [session_id, _naive_utc(now)],
    )
    elapsed_s, back, jumps, skipped_s = clock or (0.0, 0, 0, 0.0)
    streak = _one(ledger, "SELECT streak FROM failure_streak(session := ?)", sid)
    errors = _one(ledger, "SELECT streak FROM failure_streak(session := ?, errors := TRUE)", sid)
    qr = cfg.quality_regression
    since = _unblocked(ledger, session_id)  # the windowed detectors look only from there on
    regression = _one(
        ledger,
        "SELECT first_score, score FROM quality_regression(session := ?, span := ?, "
        "min_drop := ?) WHERE iteration = ? AND iteration - ? >= ?",
        [session_id, qr.span, qr.min_drop, iteration, qr.span - 1, since],
    )
    thrash = ledger.con.execute(
        "SELECT file, len(list_filter(iterations, lambda i: i >= $since)) AS n "
        "FROM thrashing(session := $s, min_iterations := $m) WHERE tripped_at <= $i AND n >= $m "
        "ORDER BY n DESC, file",
        {"s": session_id, "m": cfg.thrashing.min_iterations, "i": iteration, "since": since},
    ).fetchall()
    span = cfg.validation_stall.span
    stall = _one(
        ledger,
        "SELECT score, best_before FROM validation_stall(session := ?, span := ?) "
        "WHERE iteration = ? AND iteration - ? >= ?",
        [session_id, span, iteration, span - 1, since],
    )
    context = None
    if cfg.context_window.enabled:
        context = _one(
            ledger,
            "SELECT context_tokens, context_window FROM turn_costs WHERE session_id = ? "
            "AND context_tokens IS NOT NULL AND context_window > 0 ORDER BY seq DESC LIMIT 1",
            sid,
        )
    stops = ledger.con.execute(
        "SELECT iteration, decision FROM events WHERE session_id = ? AND type = 'stop_decided' ORDER BY seq",
        sid,
    ).fetchall()
    retries = retry_count_from(
        ev.StopDecided(session_id=session_id, iteration=i, decision=d) for i, d in stops
    )
    state, open_s = _circuit(ledger, session_id, cfg, _naive_utc(now))
    return Facts(
        iteration=int(iteration),
        max_iterations=int(max_iterations or 0),
        failure_streak=int(streak[0]) if streak else 0,
        error_streak=int(errors[0]) if errors else 0,
        regression=(float(regression[0]), float(regression[1])) if regression else None,
        thrashing=tuple((str(f), int(n)) for f, n in thrash),
        stall=(float(stall[0]), float(stall[1])) if stall else None,
        elapsed_s=float(elapsed_s),
        clock_skew=(int(back), int(jumps), float(skipped_s)),
        tokens=int(tokens),
        cost_usd=None if cost_usd is None else float(cost_usd),
        context=(int(context[0]), int(context[1])) if context else None,
        stop_retries=retries,
        circuit=state,
        circuit_open_s=open_s,
    )


def _circuit(ledger: Ledger, session_id: str, cfg: GuardConfig, now: datetime) -> tuple[Any, float]:
    """The breaker's state before the latest validation run (an ``unblock`` closes it)."""
    trips = [
        r[0]
        for r in ledger.con.execute(
            "SELECT ts FROM guard_trips WHERE session_id = $s AND guard = 'circuit_breaker' AND seq > "
            "coalesce((SELECT max(seq) FROM events WHERE session_id = $s AND type = 'override' "
            "AND kind = 'unblock'), 0) ORDER BY seq",
            {"s": session_id},
        ).fetchall()
    ]
    if not trips:
        return "closed", 0.0
    row = _one(
        ledger,
        """
        SELECT count(*) FILTER (WHERE passed AND seq > (SELECT max(seq) FROM guard_trips
                                                        WHERE session_id = $s AND guard = 'circuit_breaker')
                                         AND seq < (SELECT max(seq) FROM events
                                                    WHERE session_id = $s AND type = 'validation_ran'))
        FROM events WHERE session_id = $s AND type = 'validation_ran'""",
        {"s": session_id},
    )
    return circuit_state(trips, bool(row and row[0]), now, cfg)


def _unblocked(ledger: Ledger, session_id: str) -> int:
    """The first iteration after the session's latest ``unblock`` (0: never unblocked): the guards
    that count failures, stalls, regressions or edits over a window count from there."""
    row = _one(
        ledger,
        "SELECT max(iteration) FROM events WHERE session_id = ? AND type = 'override' AND kind = 'unblock'",
        [session_id],
    )
    return int(row[0]) + 1 if row and row[0] is not None else 0
