"""Skewed clocks and the time limit, over real journals: the limit counts the time a session ran
by its own clock from its start event (in seq order), and a clock that goes back or jumps ahead is
noted in the trip's evidence, never counted as time worked."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec

from ledger import events as E
from ledger.core.home import Home
from ledger.loop.config.loop_config import LoopConfig
from ledger.loop.decide.guards import GuardConfig, TimeLimit
from ledger.loop.engine import Engine
from ledger.storage.database import Ledger
from ledger.storage.journal import Cursor, Journal, read_new
from tests.helpers import T0, flag_rule, ticking, validate

YEAR = timedelta(days=365)
Y2001 = datetime(2001, 1, 1, tzinfo=UTC)
OFF = GuardConfig(
    **{
        name: msgspec.structs.replace(getattr(GuardConfig(), name), enabled=False)
        for name in GuardConfig.__struct_fields__
    }
)


def only_time_limit(seconds: float) -> LoopConfig:
    """A loop whose one passing rule never ends it, with every guard off but a ``seconds`` limit."""
    guards = msgspec.structs.replace(OFF, time_limit=TimeLimit(seconds=seconds))
    return LoopConfig(rules=[flag_rule()], guards=guards, max_iterations=100)


def engine_at(home: Home, work: Path, start: datetime) -> Engine:
    """An engine whose clock reads ``start`` and then 10 s more at each reading."""
    return Engine(home, work_dir=work, clock=ticking(start, timedelta(seconds=10)), fsync=False)


def trip_evidence(engine: Engine, sid: str) -> dict[str, Any]:
    trips = [e for e in read_new(engine.journal(sid).path, Cursor()).events if isinstance(e, E.GuardTripped)]
    assert [t.guard for t in trips] == ["time_limit"]
    evidence: dict[str, Any] = json.loads(json.dumps(trips[0].evidence))
    return evidence


def test_one_event_dated_2001_mid_session_does_not_trip_the_limit(home: Home, work: Path) -> None:
    (work / "tests_pass.ok").touch()
    engine = engine_at(home, work, T0)
    engine.start("s", only_time_limit(1800))
    assert validate(engine, "s", "one").signal == "CONTINUE"
    # A hook on a machine whose clock was reset to 2001 records an error in the same journal.
    Journal(engine.journal("s").path, fsync=False, clock=lambda: Y2001).append(
        E.ErrorRecorded(session_id="s", iteration=1, component="hook", message="clock reset")
    )
    engine.next("s")
    r = validate(engine, "s", "two")
    assert (r.signal, r.trips) == ("CONTINUE", [])
    status = engine.status("s")
    assert (status["status"], status["started_at"]) == ("running", T0.replace(tzinfo=None))


def test_a_clock_back_and_forth_is_noted_in_the_trip_not_counted(home: Home, work: Path) -> None:
    (work / "tests_pass.ok").touch()
    engine = engine_at(home, work, T0)
    engine.start("s", only_time_limit(60))
    validate(engine, "s", "one")
    Journal(engine.journal("s").path, fsync=False, clock=lambda: Y2001).append(
        E.ErrorRecorded(session_id="s", iteration=1, component="hook", message="clock reset")
    )
    for n in range(2, 20):
        engine.next("s")
        if validate(engine, "s", f"try {n}").signal != "CONTINUE":
            break
    evidence = trip_evidence(engine, "s")
    assert (evidence["clock_steps_back"], evidence["clock_jumps"]) == (1, 1)  # to 2001, and back
    assert float(evidence["clock_skipped_s"]) > 2 * 25 * YEAR.total_seconds() * 0.99
    assert 60 < float(evidence["elapsed_s"]) <= 60 + 10 * 12


def test_a_start_stamped_a_year_ahead_still_trips_after_the_limit(home: Home, work: Path) -> None:
    """The loop's clock was a year ahead for its first iterations, then set right: the time it ran
    before the correction still counts (it was forgotten, the limit restarting at the correction)."""
    (work / "tests_pass.ok").touch()
    ahead = engine_at(home, work, T0 + YEAR)
    ahead.start("s", only_time_limit(120))
    assert validate(ahead, "s", "one").signal == "CONTINUE"
    ahead.next("s")
    before = Ledger.memory(home)
    before.ingest()
    ran_ahead = before.rows("SELECT elapsed_s FROM session_elapsed(session := 's')")[0]["elapsed_s"]
    assert 60 < ran_ahead < 120
    right = engine_at(home, work, T0)  # the same loop once its clock was set back a year
    signals = []
    for n in range(2, 20):
        signals.append(validate(right, "s", f"try {n}").signal)
        if signals[-1] != "CONTINUE":
            break
        right.next("s")
    evidence = trip_evidence(right, "s")
    assert signals == ["CONTINUE", "BLOCKED"]
    assert (evidence["clock_steps_back"], evidence["clock_jumps"]) == (1, 0)
    since_correction = float(evidence["elapsed_s"]) - ran_ahead
    assert 0 < since_correction < 120 < float(evidence["elapsed_s"])


def test_a_clock_jumping_a_year_ahead_is_not_a_year_of_work(home: Home, work: Path) -> None:
    (work / "tests_pass.ok").touch()
    engine = engine_at(home, work, T0)
    engine.start("s", only_time_limit(1800))
    validate(engine, "s", "one")
    engine.next("s")
    later = engine_at(home, work, T0 + YEAR)  # the clock jumps a year ahead and stays there
    assert validate(later, "s", "two").signal == "CONTINUE"
    ledger = Ledger.memory(home)
    ledger.ingest()
    row = ledger.rows("SELECT * FROM session_elapsed(session := 's')")[0]
    assert (row["backward_steps"], row["forward_jumps"]) == (0, 1)
    assert row["elapsed_s"] < 1800 < row["skipped_s"]


def test_sessions_started_and_updated_follow_seq_not_the_clock(tmp_path: Path) -> None:
    home = Home.resolve(tmp_path / "home")
    journal = Journal.for_session(home.journals, "s", fsync=False)
    journal.append(E.SessionStarted(session_id="s", ts=T0 + YEAR))  # started by a clock a year ahead
    journal.append(E.IterationStarted(session_id="s", iteration=1, ts=Y2001))  # then one reset to 2001
    journal.append(E.AgentTurn(session_id="s", iteration=1, ts=T0))
    ledger = Ledger.memory(home)
    ledger.ingest()
    row = ledger.rows("SELECT started_at, updated_at FROM sessions WHERE session_id = 's'")[0]
    assert (row["started_at"], row["updated_at"]) == (
        (T0 + YEAR).replace(tzinfo=None),
        T0.replace(tzinfo=None),
    )


def test_iterations_start_and_end_follow_seq_not_the_clock(tmp_path: Path) -> None:
    """An iteration's first event stamped a year late and its last a year early: ``iterations``
    still takes its start and end from the first and last events by seq."""
    home = Home.resolve(tmp_path / "home")
    journal = Journal.for_session(home.journals, "s", fsync=False)
    stamps = iter([T0, T0 + YEAR, T0 + timedelta(seconds=30), T0 - YEAR, T0 + timedelta(seconds=60)])
    journal.clock = lambda: next(stamps)
    journal.append(E.SessionStarted(session_id="s", task="t", agent="a"))
    journal.append(E.IterationStarted(session_id="s", iteration=1))
    journal.append(E.AgentTurn(session_id="s", iteration=1, output_excerpt="one"))
    journal.append(E.ErrorRecorded(session_id="s", iteration=1, component="c", message="skewed"))
    journal.append(E.StopDecided(session_id="s", iteration=1, decision="block", reason="r"))
    with Ledger.memory(home) as ledger:
        ledger.ingest()
        (row,) = ledger.rows("SELECT started_at, ended_at, duration_s FROM iterations")
    assert row["started_at"].replace(tzinfo=UTC) == T0 + YEAR
    assert row["ended_at"].replace(tzinfo=UTC) == T0 + timedelta(seconds=60)
