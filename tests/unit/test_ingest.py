"""Ingest properties: idempotent, incremental == one-shot, fast path == exact path."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import events as E
from ledger.core.home import Home
from ledger.storage.database import Ledger
from ledger.storage.ingest import Stored
from ledger.storage.journal import Journal
from tests.unit.test_events import event_strategy

SESSIONS = ("alpha", "beta", "gamma")


def with_session(event: E.Event, sid: str) -> E.Event:
    import msgspec

    return msgspec.structs.replace(event, session_id=sid)


def table(ledger: Ledger) -> list[tuple[Any, ...]]:
    return ledger.con.execute("SELECT * FROM events ORDER BY session_id, seq").fetchall()


batches = st.lists(
    st.tuples(st.sampled_from(SESSIONS), st.lists(event_strategy(), min_size=1, max_size=4), st.booleans()),
    min_size=1,
    max_size=8,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches)
def test_incremental_ingest_equals_one_shot_and_is_idempotent(
    plan: list[tuple[str, list[E.Event], bool]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Home.resolve(Path(tmp) / "h")
        home.ensure()
        live = Ledger.memory(home)
        for sid, evs, ingest_now in plan:
            Journal.for_session(home.journals, sid, fsync=False).append(*(with_session(e, sid) for e in evs))
            if ingest_now:
                live.ingest()
        live.ingest()
        live.ingest()
        fresh = Ledger.memory(home)
        fresh.ingest()
        assert table(live) == table(fresh)
        assert len(table(fresh)) == sum(len(evs) for _, evs, _ in plan)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(event_strategy(), min_size=1, max_size=12))
def test_fast_path_and_exact_path_store_the_same_rows(evs: list[E.Event]) -> None:
    import ledger.storage.ingest

    with tempfile.TemporaryDirectory() as tmp:
        home = Home.resolve(Path(tmp) / "h")
        home.ensure()
        Journal.for_session(home.journals, "alpha", fsync=False).append(
            *(with_session(e, "alpha") for e in evs)
        )
        fast = Ledger.memory(home)
        report = fast.ingest()
        assert report.exact_batches == 0
        exact = Ledger.memory(home)
        verify = ledger.storage.ingest._verify
        ledger.storage.ingest._verify = lambda *a, **kw: False
        try:
            assert exact.ingest().exact_batches == 1
        finally:
            ledger.storage.ingest._verify = verify
        assert table(fast) == table(exact)


def test_old_vocabulary_lines_get_defaults_on_the_fast_path(fixture_home: Home) -> None:
    ledger = Ledger.memory(fixture_home)
    report = ledger.ingest([fixture_home.journals / "legacy.jsonl"])
    assert (report.events, report.exact_batches, report.bad_lines) == (8, 0, [])
    row = ledger.rows(
        "SELECT tokens, stop_reason, passed, signal FROM events "
        "WHERE session_id = 'legacy' AND seq IN (3, 4) ORDER BY seq"
    )
    assert row[0]["tokens"] == {"input": 0, "output": 0, "cache_creation": 0, "cache_read": 0}
    assert row[0]["stop_reason"] == "" and row[1]["passed"] is False and row[0]["signal"] is None


def test_bad_lines_are_reported_once_and_kept_in_the_ledger(fixture_home: Home) -> None:
    ledger = Ledger.memory(fixture_home)
    first = ledger.ingest()
    again = ledger.ingest()
    reasons = [(b.line_no, b.reason.split(":")[0]) for b in first.bad_lines]
    assert reasons == [
        (3, "not valid JSON (JSON is malformed"),
        (4, "not a valid event"),
        (5, "not a valid event"),
        (6, "not a valid event"),
        (7, "empty line"),
        (10, "seq 4 repeats or goes back (expected 5)"),
    ]
    assert again.bad_lines == [] and again.events == 0
    stored = ledger.rows("SELECT journal, line_no FROM ingest_errors ORDER BY line_no")
    assert [(r["journal"], r["line_no"]) for r in stored] == [("torn.jsonl", n) for n, _ in reasons]
    torn = ledger.rows("SELECT seq, type FROM events WHERE session_id = 'torn' ORDER BY seq")
    assert [(r["seq"], r["type"]) for r in torn] == [
        (1, "session_started"),
        (2, "iteration_started"),
        (3, "agent_turn"),
        (4, "validation_ran"),
    ]


def test_a_line_of_another_session_is_refused(home: Home) -> None:
    j = Journal.for_session(home.journals, "alpha", fsync=False)
    j.append(E.AgentTurn(session_id="alpha"))
    with open(j.path, "ab") as f:
        f.write(E.encode(E.AgentTurn(session_id="beta", seq=2)))
    report = Ledger.memory(home).ingest()
    assert report.events == 1
    assert [b.reason for b in report.bad_lines] == ["session_id 'beta' does not match journal 'alpha'"]


def test_replaced_journal_of_greater_length_is_reingested(home: Home) -> None:
    j = Journal.for_session(home.journals, "alpha", fsync=False)
    j.append(E.AgentTurn(session_id="alpha", tool_count=1))
    ledger = Ledger.memory(home)
    ledger.ingest()
    j.path.unlink()
    j.append(*(E.AgentTurn(session_id="alpha", tool_count=2, output_excerpt="x" * 50) for _ in range(3)))
    report = ledger.ingest()
    assert report.reset == ["alpha.jsonl"]
    assert ledger.rows("SELECT list(tool_count ORDER BY seq) AS t FROM events")[0]["t"] == [2, 2, 2]


def test_ingest_goes_in_batches(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ledger.storage.ingest.BATCH_BYTES", 1)
    for sid in SESSIONS:
        Journal.for_session(home.journals, sid, fsync=False).append(E.AgentTurn(session_id=sid))
    ledger = Ledger.memory(home)
    assert ledger.ingest().events == 3
    assert ledger.rows("SELECT count(*) AS n FROM ingest_positions")[0]["n"] == 3


def test_unreadable_journal_is_reported_not_raised(home: Home) -> None:
    (home.journals / "ghost.jsonl").symlink_to(home.root / "missing")
    Journal.for_session(home.journals, "alpha", fsync=False).append(E.AgentTurn(session_id="alpha"))
    report = Ledger.memory(home).ingest(list(home.journals.iterdir()))
    assert report.events == 1
    assert [b.reason for b in report.bad_lines] == ["cannot read journal: No such file or directory"]


def test_schema_change_rebuilds_the_table(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    Journal.for_session(home.journals, "alpha", fsync=False).append(E.AgentTurn(session_id="alpha"))
    with Ledger.open(home) as ledger:
        ledger.ingest()
    monkeypatch.setattr("ledger.storage.database.SCHEMA_VERSION", "another-version")
    with Ledger.open(home) as ledger:
        assert ledger.rows("SELECT count(*) AS n FROM events")[0]["n"] == 0
        assert ledger.ingest().events == 1


def test_copied_home_ingests_identically(fixture_home: Home, tmp_path: Path) -> None:
    a = Ledger.memory(fixture_home)
    a.ingest()
    shutil.copytree(fixture_home.root, tmp_path / "copy")
    b = Ledger.memory(Home.resolve(tmp_path / "copy"))
    b.ingest()
    assert table(a) == table(b)


def test_bad_line_after_an_earlier_ingest_is_numbered_in_the_whole_file(home: Home) -> None:
    j = Journal.for_session(home.journals, "alpha", fsync=False)
    j.append(*(E.AgentTurn(session_id="alpha") for _ in range(3)))
    ledger = Ledger.memory(home)
    assert ledger.ingest().events == 3
    with open(j.path, "ab") as f:
        f.write(b"garbage\n")
    j.append(E.AgentTurn(session_id="alpha", tool_count=9))
    report = ledger.ingest()
    assert report.events == 1 and report.exact_batches == 1
    assert [(b.line_no, b.reason.split(" (")[0]) for b in report.bad_lines] == [(4, "not valid JSON")]
    assert ledger.rows("SELECT max(seq) AS s FROM events")[0]["s"] == 4


def test_read_only_open_of_a_missing_ledger_is_a_clear_error(home: Home) -> None:
    from ledger.core.errors import LedgerError

    with pytest.raises(LedgerError, match=r"no ledger at .* yet"):
        Ledger.open(home, read_only=True)


def test_read_only_ledger_refuses_to_ingest(home: Home) -> None:
    from ledger.core.errors import LedgerError

    Journal.for_session(home.journals, "alpha", fsync=False).append(E.AgentTurn(session_id="alpha"))
    with Ledger.open(home) as ledger:
        ledger.ingest()
    with Ledger.open(home, read_only=True) as ledger:
        assert ledger.rows("SELECT count(*) AS n FROM sessions") == [{"n": 1}]
        with pytest.raises(LedgerError, match="read-only"):
            ledger.ingest()


def test_an_ingest_duckdb_cannot_hold_raises_and_stores_nothing(home: Home) -> None:
    """A resource error (here memory) is not mistaken for data the fast path cannot take: it raises
    a one-line LedgerError, nothing is stored, and the next ingest with room stores everything."""
    from ledger.core.errors import LedgerError

    journal = Journal(home.journals / "big.jsonl", fsync=False)
    journal.append(
        *(E.AgentTurn(session_id="big", iteration=i, output_excerpt="x" * 4000) for i in range(3000))
    )
    with Ledger.open(home) as ledger:
        ledger.con.execute("SET memory_limit = '8MB'")
        with pytest.raises(LedgerError, match=r"^ingest failed, nothing was stored: Out of Memory") as info:
            ledger.ingest()
        assert "\n" not in str(info.value)
        assert ledger.rows("SELECT count(*) AS n FROM events") == [{"n": 0}]
        assert ledger.rows("SELECT count(*) AS n FROM ingest_positions") == [{"n": 0}]
        ledger.con.execute("SET memory_limit = '1GB'")
        assert ledger.ingest().events == 3000


@pytest.mark.parametrize("live", [False, True])
def test_the_report_names_each_session_that_gained_events_with_its_seqs(home: Home, live: bool) -> None:
    a = Journal.for_session(home.journals, "a", fsync=False)
    b = Journal.for_session(home.journals, "b", fsync=False)
    a.append(E.SessionStarted(session_id="a", task="t"), E.IterationStarted(session_id="a", iteration=1))
    b.append(E.SessionStarted(session_id="b", task="t"))
    with Ledger.open(home) as ledger:
        assert ledger.ingest(live=live).seqs == {"a": (0, 2), "b": (0, 1)}
        a.append(E.AgentTurn(session_id="a", iteration=1))
        with (home.journals / "b.jsonl").open("a") as f:
            f.write("not json\n")  # a bad line moves no seq
        report = ledger.ingest(live=live)
        assert report.seqs == {"a": (2, 3)} and len(report.bad_lines) == 1
        assert ledger.ingest(live=live).seqs == {}


def _big_home(home: Home, sessions: int = 40, turns: int = 1500) -> int:
    """Journals large enough that one INSERT of them takes a while (tens of ms or more)."""
    for k in range(sessions):
        sid = f"s{k}"
        turn = E.AgentTurn(session_id=sid, output_excerpt="x" * 300, files_modified=["a.py", "b.py"])
        Journal.for_session(home.journals, sid, fsync=False).append(*[turn] * turns)
    return sessions * turns


def test_one_large_insert_tells_its_progress_while_it_runs(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ledger.storage.ingest.WATCH_S", 0.002)
    events = _big_home(home)
    ledger = Ledger.open(home)
    told: list[Stored] = []
    report = ledger.ingest(progress=told.append)
    assert report.events == events
    assert len(told) > 2  # during the one INSERT, not only after it
    assert any(0 < s.events < events for s in told)
    assert [s.bytes for s in told] == sorted(s.bytes for s in told)
    assert told[-1].events == events
    assert ledger.rows("SELECT count(*) AS n FROM events")[0]["n"] == events


def test_progress_that_raises_during_the_insert_undoes_the_ingest(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ledger.storage.ingest.WATCH_S", 0.002)
    _big_home(home)
    ledger = Ledger.open(home)

    def closed(stored: Stored) -> None:
        raise KeyboardInterrupt  # what a load closed early, or Ctrl-C, does to its progress

    with pytest.raises(KeyboardInterrupt):
        ledger.ingest(progress=closed)
    assert ledger.rows("SELECT count(*) AS n FROM events")[0]["n"] == 0
    assert ledger.rows("SELECT count(*) AS n FROM ingest_positions")[0]["n"] == 0
    assert ledger.ingest().events > 0  # the connection still works, and the next ingest stores it all


@pytest.mark.parametrize("refusal", ["EXDEV", "ENOSYS", "EINVAL"])
def test_journals_the_kernel_will_not_copy_are_read_and_written(
    home: Home, monkeypatch: pytest.MonkeyPatch, refusal: str
) -> None:
    """``copy_file_range`` refused (journals on another file system than the scratch folder, an old
    kernel): the ingest copies the journals itself and holds every event, in order."""
    import errno
    import os

    asked: list[int] = []

    def refuse(*args: object) -> int:
        asked.append(1)
        raise OSError(getattr(errno, refusal), os.strerror(getattr(errno, refusal)))

    for sid in SESSIONS:
        journal = Journal.for_session(home.journals, sid, fsync=False)
        journal.append(E.SessionStarted(session_id=sid, task="t" * 100, agent="bot"))
        journal.append(*(E.IterationStarted(session_id=sid, iteration=i) for i in range(1, 40)))
    expected = Ledger.memory(home)
    expected.ingest()
    monkeypatch.setattr(os, "copy_file_range", refuse)
    ledger = Ledger.memory(home)
    ledger.ingest()
    assert asked == [1]  # asked once: the rest of the ingest is read and written
    assert table(ledger) == table(expected) and len(table(ledger)) == 3 * 40
