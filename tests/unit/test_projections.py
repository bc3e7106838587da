"""Every view and detector over the hand-written sample home, snapshotted,
plus table-driven checks that each detector fires exactly at its threshold."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from ledger import events as E
from ledger.core.home import Home
from ledger.storage.database import Ledger
from ledger.storage.journal import Journal
from ledger.storage.sql import definitions
from tests.fixtures.scenarios import iteration, start

ORDER = {
    "sessions": "session_id",
    "iterations": "session_id, iteration",
    "iteration_scores": "session_id, iteration",
    "rule_results": "session_id, seq, rule",
    "hook_decisions": "session_id, seq",
    "guard_trips": "session_id, seq",
    "checkpoints": "session_id, seq",
    "failure_streak": "session_id",
    "quality_regression": "session_id, iteration",
    "thrashing": "session_id, file",
    "loop_metrics": "agent",
    "limit_suggestions": "agent, task_kind",
    "success_by_iterations": "agent, iterations",
    "validation_stall": "session_id, iteration",
    "turn_tokens": "session_id, seq",
    "turn_costs": "session_id, seq",
    "session_elapsed": "session_id",
    "tasks": "session_id, task_no",
    "changes": "session_id, iteration, path",
}


@pytest.fixture(scope="module")
def sample() -> Iterator[Ledger]:
    from tests.fixtures.scenarios import HOME

    ledger = Ledger.memory(Home.resolve(HOME))
    ledger.ingest()
    yield ledger
    ledger.close()


def test_every_definition_is_covered() -> None:
    assert sorted(d.name for d in definitions()) == sorted(ORDER)


@pytest.mark.parametrize("name", sorted(ORDER))
def test_projection_snapshot(sample: Ledger, name: str, snapshot: SnapshotAssertion) -> None:
    source = name if any(d.name == name and d.kind == "view" for d in definitions()) else f"{name}()"
    assert sample.rows(f"SELECT * FROM {source} ORDER BY {ORDER[name]}") == snapshot


def test_sessions_statuses(sample: Ledger) -> None:
    got = {r["session_id"]: r["status"] for r in sample.rows("SELECT session_id, status FROM sessions")}
    assert got == {
        "tdd-success": "complete",
        "circuit-breaker": "escalated",
        "quality-regression": "escalated",
        "thrashing": "blocked",
        "stall": "running",
        "blocked-promise": "blocked",
        "manual-stop": "running",
        "legacy": "complete",
        "torn": "running",
    }


def test_manual_overrides_show_in_sessions(sample: Ledger) -> None:
    row = sample.rows("SELECT max_iterations, stop_requested FROM sessions WHERE session_id = 'manual-stop'")
    assert row == [{"max_iterations": 2, "stop_requested": True}]


def test_detectors_narrow_to_one_session(sample: Ledger) -> None:
    whole = sample.rows("SELECT session_id, streak FROM failure_streak() WHERE session_id = 'stall'")
    one = sample.rows("SELECT session_id, streak FROM failure_streak(session := 'stall')")
    assert whole == one == [{"session_id": "stall", "streak": 4}]


# --- thresholds --------------------------------------------------------------


def ledger_with(*sessions: list[E.Event]) -> Ledger:
    ledger = Ledger.memory()
    import tempfile
    from pathlib import Path

    tmp = Path(tempfile.mkdtemp())
    for evs in sessions:
        for e in evs:
            Journal.for_session(tmp, e.session_id, fsync=False).append(e)
    ledger.ingest(sorted(tmp.iterdir()))
    return ledger


def scored(sid: str, outcomes: list[str], files: list[list[str]] | None = None) -> list[E.Event]:
    evs = list(start(sid, "threshold test"))
    for n, outcome in enumerate(outcomes, 1):
        evs += iteration(sid, n, outcome, files[n - 1] if files else [])
    return evs


def first_hit(ledger: Ledger, sql: str) -> Any:
    rows = ledger.con.execute(sql).fetchall()
    return rows[0][0] if rows else None


# outcome letters per iteration -> scores (4 rules): pppp=100, pppf=75, ppff=50, pfff=25, ffff=0
@pytest.mark.parametrize(
    ("outcomes", "fires_at"),
    [
        (["pppp", "pppf", "ppff"], 3),  # 100 > 75 > 50, drop 50
        (["pppp", "pppf"], None),  # only two scores
        (["pppp", "pppf", "pppf"], None),  # not strictly declining
        (["pppp", "ppff", "pppf", "ppff"], None),  # up then down
        (["ppff", "pfff", "ffff", "ffff"], 3),  # 50 > 25 > 0 at 3, then flat
        (["pppe", "pppf", "pppf"], None),  # 50 -> 75: rising
    ],
)
def test_quality_regression_threshold(outcomes: list[str], fires_at: int | None) -> None:
    ledger = ledger_with(scored("s", outcomes))
    assert (
        first_hit(ledger, "SELECT min(iteration) FROM quality_regression() HAVING count(*) > 0") == fires_at
    )


@pytest.mark.parametrize(
    ("scores", "min_drop", "fires"),
    [
        ([30.0, 25.0, 20.0], 10, False),  # drop of exactly 10 is not > 10
        ([30.0, 25.0, 19.0], 10, True),
        ([30.0, 25.0, 20.0], 5, True),
    ],
)
def test_quality_regression_drop_parameter(scores: list[float], min_drop: int, fires: bool) -> None:
    evs: list[E.Event] = [E.SessionStarted(session_id="s")]
    for n, score in enumerate(scores, 1):
        evs.append(E.ValidationRan(session_id="s", iteration=n, score=score))
    ledger = ledger_with(evs)
    hit = ledger.rows(f"SELECT * FROM quality_regression(min_drop := {min_drop})")
    assert bool(hit) is fires


@pytest.mark.parametrize(
    ("times", "threshold", "tripped_at"),
    [
        (4, 5, None),
        (5, 5, 5),
        (7, 5, 5),
        (3, 3, 3),
        (2, 3, None),
    ],
)
def test_thrashing_threshold(times: int, threshold: int, tripped_at: int | None) -> None:
    files = [["hot.py"] for _ in range(times)]
    ledger = ledger_with(scored("s", ["f"] * times, files))
    got = first_hit(ledger, f"SELECT tripped_at FROM thrashing(min_iterations := {threshold})")
    assert got == tripped_at


def test_thrashing_counts_iterations_not_turns() -> None:
    evs: list[E.Event] = [E.SessionStarted(session_id="s")]
    evs += [E.AgentTurn(session_id="s", iteration=1, files_modified=["a.py"]) for _ in range(6)]
    assert ledger_with(evs).rows("SELECT * FROM thrashing()") == []


# 3 rules: ppp=100, ppf=66.7, pff=33.3, fff=0
@pytest.mark.parametrize(
    ("outcomes", "fires_at"),
    [
        (["pff", "pff", "pff", "pff"], 4),  # baseline then 3 without improvement
        (["pff", "pff", "pff"], None),  # only 2 after the baseline
        (["pff", "fff", "pff", "pff"], 4),  # no beat of the best (33.3)
        (["pff", "pff", "ppf", "pff", "pff"], None),  # improvement at 3 resets
        (["pff", "pff", "ppf", "pff", "pff", "pff"], 6),
        (["ppp", "ppp", "ppp", "ppp"], None),  # perfect scores are not a stall
    ],
)
def test_validation_stall_threshold(outcomes: list[str], fires_at: int | None) -> None:
    ledger = ledger_with(scored("s", outcomes))
    assert first_hit(ledger, "SELECT min(iteration) FROM validation_stall() HAVING count(*) > 0") == fires_at


@pytest.mark.parametrize(
    ("outcomes", "streak"),
    [
        (["f", "f", "f"], 3),
        (["f", "p", "f"], 1),
        (["f", "f", "p"], 0),
        ([], None),
        (["p", "f", "f"], 2),
    ],
)
def test_failure_streak(outcomes: list[str], streak: int | None) -> None:
    ledger = ledger_with(scored("s", outcomes))
    assert first_hit(ledger, "SELECT streak FROM failure_streak()") == streak
    assert ledger.rows("SELECT consecutive_failures AS c FROM sessions") == [{"c": streak or 0}]


def test_failure_streak_min_streak_parameter() -> None:
    ledger = ledger_with(scored("a", ["f", "f"]), scored("b", ["f", "f", "f"]))
    rows = ledger.rows("SELECT session_id FROM failure_streak(min_streak := 3)")
    assert rows == [{"session_id": "b"}]


def test_iteration_rows_count_rules_and_tokens() -> None:
    ledger = ledger_with(scored("s", ["pfe"], [["a.py", "b.py"]]))
    row = ledger.rows(
        "SELECT score, rules_passed, rules_failed, rules_errored, files_modified, "
        "tokens_total FROM iterations"
    )[0]
    assert row == {
        "score": 0.0,
        "rules_passed": 1,
        "rules_failed": 1,
        "rules_errored": 1,
        "files_modified": ["a.py", "b.py"],
        "tokens_total": 1250,
    }


@pytest.mark.parametrize(
    ("scores", "span", "fires_at"),
    [
        ([100.0, 75.0], 2, 2),
        ([100.0, 75.0, 50.0], 4, None),
        ([100.0, 75.0, 50.0, 25.0], 4, 4),
        ([100.0, 75.0, 80.0, 25.0], 4, None),
    ],
)
def test_quality_regression_span_parameter(scores: list[float], span: int, fires_at: int | None) -> None:
    evs: list[E.Event] = [E.SessionStarted(session_id="s")]
    for n, score in enumerate(scores, 1):
        evs.append(E.ValidationRan(session_id="s", iteration=n, score=score))
    ledger = ledger_with(evs)
    sql = f"SELECT min(iteration) FROM quality_regression(span := {span}) HAVING count(*) > 0"
    assert first_hit(ledger, sql) == fires_at


def test_loop_metrics_means_print_the_same_on_every_run(sample: Ledger) -> None:
    """A float mean summed in parallel differs in its last digits from run to run; the view rounds
    its means to 4 decimals so one ledger always prints one set of numbers."""
    means = [
        "mean_iterations_to_completion",
        "mean_quality_improvement",
        "mean_first_score",
        "mean_final_score",
    ]
    rows = sample.rows(f"SELECT {', '.join(means)} FROM loop_metrics")
    values = [row[m] for row in rows for m in means if row[m] is not None]
    assert values and any(v != int(v) for v in values)
    assert all(round(v, 4) == v for v in values), values


def test_changes_hold_each_iterations_last_snapshot_and_thrashing_its_lines() -> None:
    def snap(n: int, commit: str, *files: E.FileChange) -> E.SnapshotTaken:
        return E.SnapshotTaken(session_id="s", iteration=n, commit=commit, files=list(files))

    evs = scored("s", ["p"] * 5, [["hot.py"]] * 5)
    evs += [snap(n, f"c{n}", E.FileChange(path="hot.py", added=n, removed=1)) for n in range(1, 6)]
    evs += [snap(5, "c5b", E.FileChange(path="hot.py", added=10, removed=0), E.FileChange(path="img.png"))]
    ledger = ledger_with(evs)
    rows = ledger.rows('SELECT iteration, "commit", path, added, removed FROM changes ORDER BY 1, 3')
    assert rows[-2:] == [
        {"iteration": 5, "commit": "c5b", "path": "hot.py", "added": 10, "removed": 0},
        {"iteration": 5, "commit": "c5b", "path": "img.png", "added": None, "removed": None},
    ]
    assert len(rows) == 6
    assert first_hit(ledger, "SELECT lines FROM thrashing()") == (1 + 2 + 3 + 4 + 4) + 10
