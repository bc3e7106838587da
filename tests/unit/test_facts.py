"""The guards' facts (``ledger.loop.decide.facts.read_facts``): what a step takes from the row it
holds, what it asks the ledger, and the windowed detectors counted from an ``unblock``."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import msgspec
import pytest

from ledger import events as E
from ledger.loop.decide.facts import read_facts
from ledger.loop.decide.guards import Facts, GuardConfig, check
from ledger.storage.database import Ledger
from tests.unit.test_guards import ALL_OFF, DEFAULTS, facts_after, only, session, tripped

EVERY_GUARD = GuardConfig(
    **{
        name: msgspec.structs.replace(getattr(DEFAULTS, name), enabled=True)
        for name in GuardConfig.__struct_fields__
    }
)


class Counted:
    """A ledger's connection that keeps the statements it was given."""

    def __init__(self, con: Any) -> None:
        self.con = con
        self.statements: list[str] = []

    def execute(self, sql: str, params: Any = None) -> Any:
        self.statements.append(sql)
        return self.con.execute(sql, params) if params is not None else self.con.execute(sql)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.con, name)


def ledger_of(evs: list[E.Event]) -> Ledger:
    ledger = Ledger.memory()
    ledger.con.execute("BEGIN TRANSACTION")
    ledger.insert_events([msgspec.structs.replace(e, seq=i) for i, e in enumerate(evs, 1)])
    ledger.con.execute("COMMIT")
    return ledger


def row_of(ledger: Ledger) -> dict[str, Any]:
    return ledger.rows("SELECT * FROM sessions WHERE session_id = 's'")[0]


def unblocked(evs: list[E.Event], after: int) -> list[E.Event]:
    """``evs`` with an ``unblock`` recorded after iteration ``after``."""
    at = max(i for i, e in enumerate(evs) if e.iteration == after) + 1
    unblock = E.Override(session_id="s", iteration=after, kind="unblock", ts=evs[at - 1].ts)
    return [*evs[:at], unblock, *evs[at:]]


def test_a_step_takes_the_iteration_and_maximum_from_the_row_it_holds() -> None:
    """With every guard on but the budgets, the facts read with the ``sessions`` row given equal those
    read without it, after every event of a loop whose maximum an override changed."""
    evs = session(["pf", "ff", "pp", "ff"], files=[["a.py"]] * 4, tokens=10)
    evs.insert(
        5, E.Override(session_id="s", iteration=1, kind="max_iterations", max_iterations=9, ts=evs[4].ts)
    )
    cfg = msgspec.structs.replace(
        EVERY_GUARD, token_budget=ALL_OFF.token_budget, cost_budget=ALL_OFF.cost_budget
    )
    for n in range(1, len(evs) + 1):
        ledger = ledger_of(evs[:n])
        now = evs[n - 1].ts + timedelta(seconds=1)
        read = read_facts(ledger, "s", cfg, now)
        given = read_facts(ledger, "s", cfg, now, known=row_of(ledger))
        assert given == dataclasses.replace(read, tokens=0, cost_usd=None), n
        ledger.close()


def test_a_budget_guard_reads_the_ledger_even_with_a_row_given() -> None:
    evs = session(["f", "f"], tokens=300)
    ledger = ledger_of(evs)
    stale = {**row_of(ledger), "tokens": 0}
    cfg = only("token_budget", tokens=500)
    facts = read_facts(ledger, "s", cfg, evs[-1].ts, known=stale)
    assert facts.tokens == 600
    assert [t.guard for t in check(facts, cfg)] == ["token_budget"]


def test_guards_that_are_off_are_not_asked_for() -> None:
    """A step with its row and every guard off asks the ledger nothing; with the defaults, two
    statements: the events' plain facts and the detectors, together."""
    evs = session(["f"] * 6, files=[["hot.py"]] * 6)
    ledger = ledger_of(evs)
    row = row_of(ledger)
    counted = Counted(ledger.con)
    ledger.con = counted  # type: ignore[assignment]
    assert read_facts(ledger, "s", ALL_OFF, evs[-1].ts, known=row) == Facts(iteration=6, max_iterations=15)
    assert counted.statements == []
    facts = read_facts(ledger, "s", DEFAULTS, evs[-1].ts, known=row)
    assert len(counted.statements) == 2
    assert (facts.failure_streak, facts.thrashing) == (6, (("hot.py", 6),))


@pytest.mark.parametrize(
    ("guard", "settings", "outcomes", "files", "first"),
    [
        # a file changed in every iteration: in two of them from the unblock's next one (3) on
        ("thrashing", {"min_iterations": 2}, ["f"] * 6, [["hot.py"]] * 6, 4),
        # scores 100, 75, 50, 25, 0: three falling from iteration 3 on
        ("quality_regression", {}, ["pppp", "pppf", "ppff", "pfff", "ffff"], None, 5),
        # no score beats the first: three flat from iteration 3 on
        ("validation_stall", {}, ["pff"] * 6, None, 5),
    ],
)
def test_windowed_guards_count_from_the_unblock(
    guard: str, settings: dict[str, Any], outcomes: list[str], files: list[list[str]] | None, first: int
) -> None:
    """After an ``unblock`` at iteration 2 a windowed guard trips at the first iteration its window
    fits in the iterations after it, not one before (the detectors are not asked for before);
    without the unblock it trips earlier."""
    cfg = only(guard, **settings)
    evs = session(outcomes, files=files)
    assert tripped(evs[: _end_of(evs, first - 1)], cfg) == [guard]
    again = unblocked(evs, 2)
    for n in range(3, len(outcomes) + 1):
        upto = again[: _end_of(again, n)]
        assert tripped(upto, cfg) == ([guard] if n >= first else []), n
    assert facts_after(again, cfg).iteration == len(outcomes)


def _end_of(evs: list[E.Event], n: int) -> int:
    """How many of ``evs`` there are up to iteration ``n``'s last event."""
    return max(i for i, e in enumerate(evs) if e.iteration == n) + 1
