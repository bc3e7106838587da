"""Each guard fires exactly at its threshold and not one iteration before."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest

from ledger import events as E
from ledger.loop.decide.facts import read_facts
from ledger.loop.decide.guards import (
    ContextWindow,
    CostBudget,
    Facts,
    GuardConfig,
    TokenBudget,
    check,
    circuit_state,
    exhausted,
)
from ledger.loop.validate.score import validation_score
from ledger.storage.database import Ledger
from ledger.storage.journal import Journal

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
DEFAULTS = GuardConfig()
ALL_OFF = GuardConfig(
    **{
        name: msgspec.structs.replace(getattr(DEFAULTS, name), enabled=False)
        for name in GuardConfig.__struct_fields__
    }
)


def rr(outcome: str) -> list[E.RuleResult]:
    return [
        E.RuleResult(name=f"r{i}", type="command", passed=o == "p", errored=o == "e")
        for i, o in enumerate(outcome)
    ]


def session(
    outcomes: list[str],
    *,
    files: list[list[str]] | None = None,
    max_iterations: int = 15,
    tokens: int = 0,
    model: str = "",
    cost: float | None = None,
    context: int = 0,
    step: timedelta = timedelta(minutes=1),
) -> list[E.Event]:
    """A loop whose iteration n validates with outcomes[n-1] ('p'/'f'/'e' per rule)."""
    evs: list[E.Event] = [E.SessionStarted(session_id="s", ts=T0, max_iterations=max_iterations)]
    for n, outcome in enumerate(outcomes, 1):
        ts = T0 + step * n
        evs.append(E.IterationStarted(session_id="s", iteration=n, ts=ts))
        evs.append(
            E.AgentTurn(
                session_id="s",
                iteration=n,
                ts=ts,
                files_modified=(files or [[]] * n)[n - 1],
                tokens=E.TokenUsage(input=tokens),
                model=model,
                cost_usd=cost,
                context_tokens=context,
            )
        )
        results = rr(outcome)
        evs.append(
            E.ValidationRan(
                session_id="s",
                iteration=n,
                ts=ts,
                results=results,
                passed=all(r.passed for r in results),
                score=validation_score(results),
            )
        )
    return evs


def facts_after(evs: list[E.Event], cfg: GuardConfig = DEFAULTS, now: datetime | None = None) -> Facts:
    tmp = Path(tempfile.mkdtemp())
    Journal.for_session(tmp, "s", fsync=False).append(*evs)
    ledger = Ledger.memory()
    ledger.ingest([tmp / "s.jsonl"])
    return read_facts(ledger, "s", cfg, now or evs[-1].ts + timedelta(seconds=1))


def tripped(evs: list[E.Event], cfg: GuardConfig, now: datetime | None = None) -> list[str]:
    return [t.guard for t in check(facts_after(evs, cfg, now), cfg)]


def only(name: str, **settings: object) -> GuardConfig:
    """Every guard off but ``name`` (with ``settings``)."""
    current = getattr(DEFAULTS, name)
    return msgspec.structs.replace(
        ALL_OFF, **{name: msgspec.structs.replace(current, enabled=True, **settings)}
    )


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_circuit_breaker_trips_at_the_third_failure(n: int) -> None:
    assert tripped(session(["p"] + ["f"] * n), only("circuit_breaker")) == (
        ["circuit_breaker"] if n >= 3 else []
    )


def test_circuit_breaker_threshold_is_configurable() -> None:
    cfg = only("circuit_breaker", threshold=2)
    assert tripped(session(["f"]), cfg) == [] and tripped(session(["f", "f"]), cfg) == ["circuit_breaker"]


def test_circuit_breaker_open_half_open_closed() -> None:
    cfg = only("circuit_breaker", reset_timeout_s=600)
    evs = session(["f", "f", "f"])
    tripped_at = evs[-1].ts
    evs.append(E.GuardTripped(session_id="s", iteration=3, ts=tripped_at, guard="circuit_breaker"))
    assert facts_after(evs, cfg).circuit == "open"

    def validated(outcome: str, after_s: int) -> list[E.Event]:
        ts = tripped_at + timedelta(seconds=after_s)
        results = rr(outcome)
        return [
            E.ValidationRan(
                session_id="s",
                iteration=4,
                ts=ts,
                results=results,
                passed=all(r.passed for r in results),
                score=validation_score(results),
            )
        ]

    def at(after_s: int) -> datetime:
        return tripped_at + timedelta(seconds=after_s + 1)

    # open (within the reset timeout): any validation escalates, even a passing one
    assert tripped(evs + validated("p", 60), cfg, at(60)) == ["circuit_breaker"]
    # half-open after the timeout: one failure trips it again, a pass does not
    assert facts_after(evs + validated("f", 700), cfg, at(700)).circuit == "half_open"
    assert tripped(evs + validated("f", 700), cfg, at(700)) == ["circuit_breaker"]
    assert tripped(evs + validated("p", 700), cfg, at(700)) == []
    # closed again once a validation passed after the trip
    healed = evs + validated("p", 700) + validated("f", 760)
    assert facts_after(healed, cfg, at(760)).circuit == "closed"
    assert tripped(healed, cfg, at(760)) == []


def test_circuit_state_function() -> None:
    cfg = GuardConfig()
    assert circuit_state([], False, T0, cfg) == ("closed", 0.0)
    assert circuit_state([T0], False, T0 + timedelta(seconds=10), cfg) == ("open", 10.0)
    assert circuit_state([T0], False, T0 + timedelta(seconds=300), cfg) == ("half_open", 300.0)
    assert circuit_state([T0], True, T0 + timedelta(seconds=10), cfg) == ("closed", 0.0)


@pytest.mark.parametrize(
    ("outcomes", "fires"),
    [
        (["pppp", "pppf"], False),
        (["pppp", "pppf", "ppff"], True),  # 100 > 75 > 50
        (["pppp", "pppf", "pppf"], False),
    ],
)
def test_quality_regression(outcomes: list[str], fires: bool) -> None:
    assert tripped(session(outcomes), only("quality_regression")) == (["quality_regression"] if fires else [])


@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_thrashing_trips_at_the_fifth_iteration_touching_a_file(n: int) -> None:
    evs = session(["f"] * n, files=[["hot.py"]] * n)
    assert tripped(evs, only("thrashing")) == (["thrashing"] if n >= 5 else [])


@pytest.mark.parametrize(
    ("outcomes", "fires"),
    [
        (["pff", "pff", "pff"], False),
        (["pff", "pff", "pff", "pff"], True),
        (["pff", "pff", "ppf", "pff"], False),
    ],
)
def test_validation_stall(outcomes: list[str], fires: bool) -> None:
    assert tripped(session(outcomes), only("validation_stall")) == (["validation_stall"] if fires else [])


@pytest.mark.parametrize(("minutes", "fires"), [(29, False), (30, False), (31, True)])
def test_time_limit(minutes: int, fires: bool) -> None:
    evs = session(["f"])
    got = tripped(evs, only("time_limit"), now=T0 + timedelta(minutes=minutes))
    assert got == (["time_limit"] if fires else [])


@pytest.mark.parametrize(("per_turn", "fires"), [(300, False), (499, False), (500, True)])
def test_token_budget(per_turn: int, fires: bool) -> None:
    cfg = only("token_budget", tokens=1000)
    assert tripped(session(["f", "f"], tokens=per_turn), cfg) == (["token_budget"] if fires else [])


def test_token_budget_is_off_by_default() -> None:
    assert TokenBudget().enabled is False


@pytest.mark.parametrize(("per_turn", "fires"), [(0.2, False), (0.49, False), (0.5, True), (0.75, True)])
def test_cost_budget_counts_the_cost_the_agent_reported(per_turn: float, fires: bool) -> None:
    cfg = only("cost_budget", max_cost_usd=1.0)
    assert tripped(session(["f", "f"], cost=per_turn), cfg) == (["cost_budget"] if fires else [])


@pytest.mark.parametrize(("tokens", "fires"), [(100_000, False), (166_666, False), (166_667, True)])
def test_cost_budget_prices_tokens_when_no_cost_was_reported(tokens: int, fires: bool) -> None:
    """Claude Sonnet 4.5 input costs $3 per million tokens (genai-prices): two turns of 166,667
    input tokens cost just over $1."""
    cfg = only("cost_budget", max_cost_usd=1.0)
    evs = session(["f", "f"], tokens=tokens, model="claude-sonnet-4-5-20250929")
    assert tripped(evs, cfg) == (["cost_budget"] if fires else [])


@pytest.mark.parametrize(("context", "fires"), [(150_000, False), (179_999, False), (180_000, True)])
def test_context_window_trips_when_the_next_iteration_would_start_too_full(context: int, fires: bool) -> None:
    """Claude Sonnet 4.5's window is 200,000 tokens (genai-prices): 90% is 180,000."""
    cfg = only("context_window")
    evs = session(["f", "f"], context=context, model="claude-sonnet-4-5-20250929")
    assert tripped(evs, cfg) == (["context_window"] if fires else [])
    assert facts_after(evs, cfg).context == (context, 200_000)


def test_context_window_is_off_by_default_and_an_unknown_window_never_trips_it() -> None:
    assert ContextWindow().enabled is False and ContextWindow().max_fraction == 0.9
    full = session(["f"], context=10**9, model="nonesuch-9")
    assert tripped(full, only("context_window", max_fraction=0.1)) == []
    assert tripped(session(["f"], context=199_000, model="claude-sonnet-4-5-20250929"), ALL_OFF) == []


def test_cost_budget_is_off_by_default_and_an_unknown_cost_never_trips_it() -> None:
    assert CostBudget().enabled is False
    assert tripped(session(["f"], cost=5.0), ALL_OFF) == []
    unknown = session(["f", "f"], tokens=10**9, model="nonesuch-9")
    assert tripped(unknown, only("cost_budget", max_cost_usd=0.01)) == []
    assert facts_after(unknown, only("cost_budget", max_cost_usd=0.01)).cost_usd is None


@pytest.mark.parametrize(("blocks", "fires"), [(2, False), (3, True)])
def test_max_stop_retries_counts_blocks_within_one_iteration(blocks: int, fires: bool) -> None:
    evs = session(["f", "f"])
    evs.append(
        E.StopDecided(session_id="s", iteration=1, decision="block", ts=evs[-1].ts)
    )  # earlier iteration
    evs += [
        E.StopDecided(session_id="s", iteration=2, decision="block", ts=evs[-1].ts) for _ in range(blocks)
    ]
    assert tripped(evs, only("max_stop_retries")) == (["max_stop_retries"] if fires else [])


def test_an_allowed_stop_resets_stop_retries() -> None:
    evs = session(["f"])
    evs += [
        E.StopDecided(session_id="s", iteration=1, decision=d, ts=evs[-1].ts)
        for d in ("block", "block", "allow", "block")
    ]
    assert facts_after(evs).stop_retries == 1


@pytest.mark.parametrize(
    ("outcomes", "fires"),
    [
        (["pe", "pe"], False),
        (["pe", "pe", "pe"], True),
        (["pe", "pe", "pf", "pe"], False),
        (["e", "e", "e"], True),
    ],
)
def test_error_threshold(outcomes: list[str], fires: bool) -> None:
    assert tripped(session(outcomes), only("error_threshold")) == (["error_threshold"] if fires else [])


@pytest.mark.parametrize(
    ("iteration", "signal", "fires"),
    [
        (14, "CONTINUE", False),
        (15, "CONTINUE", True),
        (15, "COMPLETE", False),
        (15, "BLOCKED", False),
    ],
)
def test_max_iterations_exhausted(iteration: int, signal: E.Signal, fires: bool) -> None:
    f = Facts(iteration=iteration, max_iterations=15)
    assert (exhausted(f, GuardConfig(), signal) is not None) is fires


@pytest.mark.parametrize(("iteration", "fires"), [(15, False), (16, True)])
def test_max_iterations_exceeded(iteration: int, fires: bool) -> None:
    assert [
        t.guard for t in check(Facts(iteration=iteration, max_iterations=15), only("max_iterations"))
    ] == (["max_iterations"] if fires else [])


def test_max_iterations_read_from_the_latest_override() -> None:
    evs = session(["f", "f"])
    evs.append(
        E.Override(session_id="s", iteration=2, kind="max_iterations", max_iterations=2, ts=evs[-1].ts)
    )
    f = facts_after(evs)
    assert (f.iteration, f.max_iterations) == (2, 2)
    assert exhausted(f, GuardConfig(), "CONTINUE") is not None


def test_disabled_guards_never_fire() -> None:
    evs = session(["f"] * 6, files=[["hot.py"]] * 6)
    assert tripped(evs, ALL_OFF) == []
    assert sorted(tripped(evs, GuardConfig())) == ["circuit_breaker", "thrashing", "validation_stall"]


def test_trip_signals() -> None:
    f = Facts(
        iteration=20,
        max_iterations=15,
        failure_streak=5,
        error_streak=5,
        regression=(80, 20),
        thrashing=(("a.py", 5),),
        stall=(20, 80),
        elapsed_s=99999,
        tokens=10,
        cost_usd=2.5,
        context=(95, 100),
        stop_retries=5,
    )
    cfg = GuardConfig(
        token_budget=TokenBudget(enabled=True, tokens=1),
        cost_budget=CostBudget(enabled=True, max_cost_usd=1),
        context_window=ContextWindow(enabled=True),
    )
    assert {t.guard: t.signal for t in check(f, cfg)} == {
        "max_iterations": "ESCALATE",
        "circuit_breaker": "ESCALATE",
        "quality_regression": "ESCALATE",
        "thrashing": "BLOCKED",
        "validation_stall": "ESCALATE",
        "time_limit": "BLOCKED",
        "token_budget": "ESCALATE",
        "cost_budget": "ESCALATE",
        "context_window": "BLOCKED",
        "max_stop_retries": "ESCALATE",
        "error_threshold": "ESCALATE",
    }


def test_trips_carry_their_evidence() -> None:
    evs = session(["f"] * 5, files=[["hot.py"]] * 5)
    trips = {t.guard: t for t in check(facts_after(evs), DEFAULTS)}
    assert trips["thrashing"].evidence == {
        "iteration": 5,
        "files": [["hot.py", 5]],
        "settings": {"enabled": True, "min_iterations": 5},
    }
    assert trips["circuit_breaker"].evidence["failure_streak"] == 5
    assert trips["circuit_breaker"].evidence["settings"]["threshold"] == 3
