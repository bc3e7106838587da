"""Read a session's ``guards.Facts`` from the ledger: views and detectors only.

At most three statements: the session's ``sessions`` row (only when the caller holds none, or a
budget guard is on: a step holds it already), what its events say plainly (the latest ``unblock``,
the stop decisions, the circuit breaker's trips, the validation runs), and the enabled guards'
detectors as the scalar subqueries of one statement. A guard that is off is not asked for (its
facts keep their defaults), nor a windowed detector whose window cannot fit since the latest
``unblock``. DuckDB spends a statement's time binding and planning its views, not running it on
one session's events: docs/performance.md, "The guards' facts".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ledger import events as ev
from ledger.loop.decide.guards import CircuitState, Facts, GuardConfig, circuit_state
from ledger.loop.validate.completion import retry_count_from
from ledger.storage.database import Ledger


def _one(ledger: Ledger, sql: str, params: list[Any] | dict[str, Any]) -> tuple[Any, ...] | None:
    row: tuple[Any, ...] | None = next(iter(ledger.con.execute(sql, params).fetchall()), None)
    return row


def _naive_utc(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(tzinfo=None) if now.tzinfo else now


_PLAIN = """
SELECT
  max(iteration) FILTER (WHERE type = 'override' AND kind = 'unblock') AS unblocked,
  coalesce(max(seq) FILTER (WHERE type = 'override' AND kind = 'unblock'), 0) AS unblocked_seq,
  list(iteration ORDER BY seq) FILTER (WHERE type = 'stop_decided') AS stop_iterations,
  list(decision ORDER BY seq) FILTER (WHERE type = 'stop_decided') AS stop_decisions,
  list((seq, ts) ORDER BY seq) FILTER (WHERE type = 'guard_tripped' AND guard = 'circuit_breaker') AS trips,
  list((seq, passed) ORDER BY seq) FILTER (WHERE type = 'validation_ran') AS runs
FROM events
WHERE session_id = $s AND type IN ('override', 'stop_decided', 'guard_tripped', 'validation_ran')
"""
"""What the session's events say plainly, in one pass: its latest ``unblock`` (iteration and seq),
its stop decisions, the circuit breaker's trips and its validation runs (seq and whether it passed),
in order."""

_DETECTORS = {
    "clock": "SELECT (elapsed_s, backward_steps, forward_jumps, skipped_s) "
    "FROM session_elapsed(session := $s, now := $now)",
    "streak": "SELECT streak FROM failure_streak(session := $s)",
    "errors": "SELECT streak FROM failure_streak(session := $s, errors := TRUE)",
    "regression": "SELECT (first_score, score) FROM quality_regression(session := $s, "
    "span := $qr_span, min_drop := $qr_drop) WHERE iteration = $i",
    "thrash": "SELECT list((file, n) ORDER BY n DESC, file) FROM ("
    "SELECT file, len(list_filter(iterations, lambda i: i >= $since)) AS n "
    "FROM thrashing(session := $s, min_iterations := $th_min) WHERE tripped_at <= $i AND n >= $th_min)",
    "stall": "SELECT (score, best_before) FROM validation_stall(session := $s, span := $vs_span) "
    "WHERE iteration = $i",
    "context": "SELECT (context_tokens, context_window) FROM turn_costs WHERE session_id = $s "
    "AND context_tokens IS NOT NULL AND context_window > 0 ORDER BY seq DESC",
}
"""Each detector a guard reads, as the one row (a tuple) or list it gives for the session."""
_PARAM = re.compile(r"\$(\w+)")


def read_facts(
    ledger: Ledger,
    session_id: str,
    cfg: GuardConfig,
    now: datetime,
    *,
    known: Mapping[str, Any] | None = None,
) -> Facts:
    """The session as the enabled guards see it, after its latest recorded events. ``known`` is the
    session's ``sessions`` row when the caller holds it and the events recorded since do not move
    its iteration or maximum (a step's turn and its validation, ``Fold.pending``): those two are
    taken from it. The facts of a guard that is off keep their defaults (``Facts``)."""
    if cfg.cost_budget.enabled or cfg.context_window.enabled:  # the library only then (hook ledgers)
        ledger.fill_prices()
    tokens, cost_usd = 0, None  # read only for the guards on them
    if known is None or cfg.token_budget.enabled or cfg.cost_budget.enabled:
        row = _one(
            ledger,
            "SELECT iteration, max_iterations, tokens, cost_usd FROM sessions WHERE session_id = ?",
            [session_id],
        )
        if row is None:
            raise LookupError(f"no session {session_id!r} in the ledger")
        iteration, max_iterations, tokens, cost_usd = row
    else:
        iteration, max_iterations = known["iteration"], known["max_iterations"]
    n = int(iteration)
    windowed = cfg.quality_regression.enabled or cfg.thrashing.enabled or cfg.validation_stall.enabled
    plain = None
    if windowed or cfg.max_stop_retries.enabled or cfg.circuit_breaker.enabled:
        plain = _one(ledger, _PLAIN, {"s": session_id})
    unblocked, unblocked_seq, stop_iterations, stop_decisions, trips, runs = plain or (None, 0, *[None] * 4)
    since = int(unblocked) + 1 if unblocked is not None else 0  # the windowed detectors look from there
    found = _detect(ledger, session_id, cfg, now, n, since)
    clock = found.get("clock") or (0.0, 0, 0, 0.0)
    regression, stall, context = found.get("regression"), found.get("stall"), found.get("context")
    retries = 0
    if cfg.max_stop_retries.enabled and stop_iterations:
        stops = zip(stop_iterations, stop_decisions or [], strict=True)
        retries = retry_count_from(
            ev.StopDecided(session_id=session_id, iteration=i, decision=d) for i, d in stops
        )
    circuit: tuple[CircuitState, float] = ("closed", 0.0)
    if cfg.circuit_breaker.enabled:
        circuit = _circuit(trips or [], runs or [], unblocked_seq, _naive_utc(now), cfg)
    return Facts(
        iteration=n,
        max_iterations=int(max_iterations or 0),
        failure_streak=int(found.get("streak") or 0),
        error_streak=int(found.get("errors") or 0),
        regression=(float(regression[0]), float(regression[1])) if regression else None,
        thrashing=tuple((str(f), int(k)) for f, k in found.get("thrash") or ()),
        stall=(float(stall[0]), float(stall[1])) if stall else None,
        elapsed_s=float(clock[0]),
        clock_skew=(int(clock[1]), int(clock[2]), float(clock[3])),
        tokens=int(tokens or 0),
        cost_usd=None if cost_usd is None else float(cost_usd),
        context=(int(context[0]), int(context[1])) if context else None,
        stop_retries=retries,
        circuit=circuit[0],
        circuit_open_s=circuit[1],
    )


def _detect(
    ledger: Ledger, session_id: str, cfg: GuardConfig, now: datetime, n: int, since: int
) -> dict[str, Any]:
    """The detectors the enabled guards read at iteration ``n`` (counting from iteration ``since``),
    in one statement: name -> its value (None: no row). A windowed detector holds at ``n`` only
    when its window fits in the iterations from ``since`` on, so it is not asked for before."""
    qr, th, vs = cfg.quality_regression, cfg.thrashing, cfg.validation_stall
    wanted = {
        "clock": cfg.time_limit.enabled,
        "streak": cfg.circuit_breaker.enabled,
        "errors": cfg.error_threshold.enabled,
        "regression": qr.enabled and n - (qr.span - 1) >= since,
        # the iterations a file was changed in, from ``since`` to ``n``, are at most that many
        "thrash": th.enabled and (th.min_iterations < 1 or n - max(since, 1) + 1 >= th.min_iterations),
        "stall": vs.enabled and n - (vs.span - 1) >= since,
        "context": cfg.context_window.enabled,
    }
    names = [name for name, on in wanted.items() if on]
    if not names:
        return {}
    params = {
        "s": session_id,
        "now": _naive_utc(now),
        "i": n,
        "since": since,
        "qr_span": qr.span,
        "qr_drop": qr.min_drop,
        "th_min": th.min_iterations,
        "vs_span": vs.span,
    }
    sql = "SELECT " + ", ".join(f"({_DETECTORS[name]} LIMIT 1) AS {name}" for name in names)
    used = {k: params[k] for k in set(_PARAM.findall(sql))}  # DuckDB refuses a parameter not used
    row = _one(ledger, sql, used)
    return dict(zip(names, row or (), strict=True))


def _circuit(
    trips: list[tuple[int, datetime]],
    runs: list[tuple[int, bool]],
    unblocked_seq: int,
    now: datetime,
    cfg: GuardConfig,
) -> tuple[CircuitState, float]:
    """The breaker's state before the latest validation run, from its trips and the validation runs
    (seq and time; seq and whether it passed, in order): its trips since the latest ``unblock``
    (which closes it), and whether a run passed between its latest trip and the latest run."""
    since_unblock = [ts for seq, ts in trips if seq > unblocked_seq]
    if not since_unblock:
        return "closed", 0.0
    last_trip, last_run = trips[-1][0], runs[-1][0] if runs else None
    passed = last_run is not None and any(ok and last_trip < seq < last_run for seq, ok in runs)
    return circuit_state(since_unblock, passed, now, cfg)
