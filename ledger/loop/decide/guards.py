"""Safety guards: when a loop must stop.

Each guard is one small function of ``Facts`` (a snapshot of the session, read from the ledger by
``ledger.loop.decide.facts.read_facts``: the SQL detectors are the one place regression, thrashing,
stall and streaks are computed) and its settings (``GuardConfig``). A guard that fires returns a
``Trip`` with its evidence and the signal it forces. Every guard, its facts, defaults and signal,
and why: docs/design/guards.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

import msgspec

from ledger.core.money import usd
from ledger.core.words import plural
from ledger.events import Signal
from ledger.loop.decide.signals import Trip

CircuitState = Literal["closed", "open", "half_open"]


class _Guard(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    enabled: bool = True


class CircuitBreaker(_Guard, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Circuit breaker settings: trip after ``threshold`` failed validations in a row, then stay open
    for ``reset_timeout_s`` seconds.
    """

    threshold: int = 3
    reset_timeout_s: float = 300.0


class QualityRegression(_Guard, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Quality regression settings: the last ``span`` scores strictly falling, by more than
    ``min_drop`` points in all.
    """

    span: int = 3
    min_drop: float = 10.0


class Thrashing(_Guard, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Thrashing settings: one file modified in at least ``min_iterations`` iterations."""

    min_iterations: int = 5


class ValidationStall(_Guard, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Validation stall settings: ``span`` scored iterations without beating the best score."""

    span: int = 3


class TimeLimit(_Guard, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Time limit settings: at most ``seconds`` since the loop started."""

    seconds: float = 1800.0


class TokenBudget(_Guard, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Token budget settings: at most ``tokens`` tokens used; off by default."""

    enabled: bool = False
    tokens: int = 0


class CostBudget(_Guard, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Cost budget settings: at most ``max_cost_usd`` US dollars spent (``turn_costs``); off by default."""

    enabled: bool = False
    max_cost_usd: float = 0.0


class ContextWindow(_Guard, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Context window settings: stop before an iteration starts with the model's context window at
    least ``max_fraction`` full (the last request's input tokens, cache included); off by default."""

    enabled: bool = False
    max_fraction: float = 0.9


class Count(_Guard, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Settings of a guard with a count ``limit`` (``max_stop_retries``, ``error_threshold``)."""

    limit: int = 3


class GuardConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Every guard's switch and thresholds (``[guards]`` in ``ralph.toml``)."""

    max_iterations: _Guard = _Guard()
    circuit_breaker: CircuitBreaker = CircuitBreaker()
    quality_regression: QualityRegression = QualityRegression()
    thrashing: Thrashing = Thrashing()
    validation_stall: ValidationStall = ValidationStall()
    time_limit: TimeLimit = TimeLimit()
    token_budget: TokenBudget = TokenBudget()
    cost_budget: CostBudget = CostBudget()
    context_window: ContextWindow = ContextWindow()
    max_stop_retries: Count = Count()
    error_threshold: Count = Count()


@dataclass(frozen=True, slots=True)
class Facts:
    """A session at one validate call, as the guards need it."""

    iteration: int
    max_iterations: int
    failure_streak: int = 0
    error_streak: int = 0
    regression: tuple[float, float] | None = None  # (first score, current score) when declining
    thrashing: tuple[tuple[str, int], ...] = ()  # (file, iterations) at or past the threshold
    stall: tuple[float, float] | None = None  # (score, best before) when stalled
    elapsed_s: float = 0.0  # time worked by the session's own clock (``session_elapsed.sql``)
    clock_skew: tuple[int, int, float] = (0, 0, 0.0)  # (steps back, jumps ahead, seconds set aside)
    tokens: int = 0
    cost_usd: float | None = None  # dollars spent, as far as known (None: no turn's cost is known)
    context: tuple[int, int] | None = None  # the last turn's (context tokens, model's window), if known
    stop_retries: int = 0
    circuit: CircuitState = "closed"
    circuit_open_s: float = 0.0  # seconds since it opened
    evidence: dict[str, Any] = field(default_factory=dict)


def max_iterations(f: Facts, cfg: GuardConfig) -> Trip | None:
    """ESCALATE when the iteration is past the maximum (reaching it is ``exhausted``'s case)."""
    if f.iteration > f.max_iterations:
        return Trip(
            "max_iterations",
            "ESCALATE",
            f"iteration {f.iteration} exceeds maxIterations ({f.max_iterations})",
        )
    return None


def exhausted(f: Facts, cfg: GuardConfig, signal: Signal) -> Trip | None:
    """At the last allowed iteration, anything but an ending is a trip (recorded with the same
    evidence as ``check`` gives the other trips)."""
    if cfg.max_iterations.enabled and f.iteration >= f.max_iterations and signal == "CONTINUE":
        return Trip(
            "max_iterations",
            "ESCALATE",
            f"Max iterations ({f.max_iterations}) reached without completion",
            evidence(f, "max_iterations", cfg),
        )
    return None


def circuit_breaker(f: Facts, cfg: GuardConfig) -> Trip | None:
    """ESCALATE while the breaker is open, on a failure while half-open, or when closed and
    ``threshold`` validations failed in a row.
    """
    cb = cfg.circuit_breaker
    if f.circuit == "open":
        return Trip(
            "circuit_breaker",
            "ESCALATE",
            f"circuit open ({f.circuit_open_s:.0f} s of {cb.reset_timeout_s:.0f} s reset timeout)",
        )
    if f.circuit == "half_open" and f.failure_streak > 0:
        return Trip("circuit_breaker", "ESCALATE", "validation failed again while half-open")
    if f.circuit == "closed" and f.failure_streak >= cb.threshold:
        return Trip(
            "circuit_breaker",
            "ESCALATE",
            f"Circuit breaker tripped after {f.failure_streak} consecutive failures",
        )
    return None


def quality_regression(f: Facts, cfg: GuardConfig) -> Trip | None:
    """ESCALATE when the facts show a score regression (found with ``span`` and ``min_drop``)."""
    if f.regression is None:
        return None
    first, now = f.regression
    span = cfg.quality_regression.span
    return Trip(
        "quality_regression",
        "ESCALATE",
        f"validation score fell {first:g} -> {now:g} over the last {span} iterations",
    )


def thrashing(f: Facts, cfg: GuardConfig) -> Trip | None:
    """BLOCKED when files were modified in too many iterations; the detail names up to three."""
    if not f.thrashing:
        return None
    files = ", ".join(f"{name} ({n} iterations)" for name, n in f.thrashing[:3])
    return Trip("thrashing", "BLOCKED", f"same files modified again and again: {files}")


def validation_stall(f: Facts, cfg: GuardConfig) -> Trip | None:
    """ESCALATE when the facts show a stall (no better score for ``span`` iterations)."""
    if f.stall is None:
        return None
    score, best = f.stall
    return Trip(
        "validation_stall",
        "ESCALATE",
        f"no progress for {cfg.validation_stall.span} iterations (score {score:g}, best {best:g})",
    )


def time_limit(f: Facts, cfg: GuardConfig) -> Trip | None:
    """BLOCKED when the session has run more than ``time_limit.seconds`` seconds by its own clock
    (``Facts.elapsed_s``: steps back and jumps of the clock are left out, and said in the detail)."""
    limit = cfg.time_limit.seconds
    if f.elapsed_s <= limit:
        return None
    detail = f"running for {f.elapsed_s:.0f} s, over the {limit:.0f} s limit"
    back, jumps, _ = f.clock_skew
    if back or jumps:
        detail += (
            f" (clock went back {plural(back, 'time')}, jumped ahead {plural(jumps, 'time')}: not counted)"
        )
    return Trip("time_limit", "BLOCKED", detail)


def token_budget(f: Facts, cfg: GuardConfig) -> Trip | None:
    """ESCALATE when the tokens used reach ``token_budget.tokens``."""
    budget = cfg.token_budget.tokens
    if f.tokens >= budget:
        return Trip("token_budget", "ESCALATE", f"{f.tokens:,} tokens used, budget {budget:,}")
    return None


def cost_budget(f: Facts, cfg: GuardConfig) -> Trip | None:
    """ESCALATE when the dollars spent reach ``cost_budget.max_cost_usd`` (a session whose cost is
    not known at all never trips it)."""
    budget = cfg.cost_budget.max_cost_usd
    if f.cost_usd is not None and f.cost_usd >= budget:
        return Trip("cost_budget", "ESCALATE", f"{usd(f.cost_usd)} spent, budget {usd(budget)}")
    return None


def context_window(f: Facts, cfg: GuardConfig) -> Trip | None:
    """BLOCKED when the last turn left the context window ``max_fraction`` full or more: the next
    iteration would start there (a session whose context or window is not known never trips it)."""
    if f.context is None:
        return None
    used, window = f.context
    limit = cfg.context_window.max_fraction
    if used / window >= limit:
        detail = f"context window {used / window:.0%} full ({used:,} of {window:,} tokens), limit {limit:.0%}"
        return Trip("context_window", "BLOCKED", detail)
    return None


def max_stop_retries(f: Facts, cfg: GuardConfig) -> Trip | None:
    """ESCALATE when the stop was blocked ``limit`` or more times in a row."""
    limit = cfg.max_stop_retries.limit
    if f.stop_retries >= limit:
        return Trip(
            "max_stop_retries", "ESCALATE", f"stop blocked {f.stop_retries} times in a row (max {limit})"
        )
    return None


def error_threshold(f: Facts, cfg: GuardConfig) -> Trip | None:
    """ESCALATE when ``limit`` or more validation runs in a row had an errored rule."""
    limit = cfg.error_threshold.limit
    if f.error_streak >= limit:
        return Trip(
            "error_threshold",
            "ESCALATE",
            f"rules errored in {f.error_streak} validation runs in a row (max {limit})",
        )
    return None


GUARDS: dict[str, Callable[[Facts, GuardConfig], Trip | None]] = {
    "max_iterations": max_iterations,
    "circuit_breaker": circuit_breaker,
    "quality_regression": quality_regression,
    "thrashing": thrashing,
    "validation_stall": validation_stall,
    "time_limit": time_limit,
    "token_budget": token_budget,
    "cost_budget": cost_budget,
    "context_window": context_window,
    "max_stop_retries": max_stop_retries,
    "error_threshold": error_threshold,
}


def _clock_skew(f: Facts) -> dict[str, Any]:
    """The clock's steps back and jumps ahead that the elapsed time left out (none: nothing)."""
    back, jumps, skipped = f.clock_skew
    if not (back or jumps):
        return {}
    return {"clock_steps_back": back, "clock_jumps": jumps, "clock_skipped_s": round(skipped, 3)}


def evidence(f: Facts, guard: str, cfg: GuardConfig) -> dict[str, Any]:
    """What a trip is recorded with: the facts it looked at and its settings."""
    facts: dict[str, dict[str, Any]] = {
        "max_iterations": {"max_iterations": f.max_iterations},
        "circuit_breaker": {
            "failure_streak": f.failure_streak,
            "state": f.circuit,
            "open_s": f.circuit_open_s,
        },
        "quality_regression": {"scores": list(f.regression or ())},
        "thrashing": {"files": [list(t) for t in f.thrashing]},
        "validation_stall": {"score_and_best": list(f.stall or ())},
        "time_limit": {"elapsed_s": round(f.elapsed_s, 3), **_clock_skew(f)},
        "token_budget": {"tokens": f.tokens},
        "cost_budget": {"cost_usd": f.cost_usd},
        "context_window": {"context_tokens_and_window": list(f.context or ())},
        "max_stop_retries": {"stop_retries": f.stop_retries},
        "error_threshold": {"error_streak": f.error_streak},
    }
    settings = msgspec.to_builtins(getattr(cfg, guard))
    return {"iteration": f.iteration, **facts.get(guard, {}), "settings": settings}


def check(f: Facts, cfg: GuardConfig) -> list[Trip]:
    """Every enabled guard that fires, in the table's order, with its evidence."""
    trips = []
    for name, guard in GUARDS.items():
        setting: _Guard = getattr(cfg, name)
        if setting.enabled and (trip := guard(f, cfg)) is not None:
            trips.append(replace(trip, evidence=evidence(f, name, cfg)))
    return trips


def circuit_state(
    trip_times: list[datetime], passed_since_trip: bool, now: datetime, cfg: GuardConfig
) -> tuple[CircuitState, float]:
    """The breaker's state: closed until it trips; then open for the reset
    timeout, half-open after it, closed again once a validation passes."""
    if not trip_times or passed_since_trip:
        return "closed", 0.0
    open_s = (now - trip_times[-1]).total_seconds()
    return ("open" if open_s < cfg.circuit_breaker.reset_timeout_s else "half_open"), open_s
