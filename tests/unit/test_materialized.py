"""The views a ledger file keeps as tables (``ledger.storage.materialized``) hold the rows their one
definition computes, whatever wrote the file: a bulk ingest, a tail appending a few lines at a
time, a journal truncated, replaced or emptied, prices filled later, a rebuild, tentative events
rolled back, other definitions, rows out of step with their journals. A ledger file reads the
tables; an in-memory one, or a file read-only whose tables are out of date, computes the views."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from ledger import events as ev
from ledger.core.home import Home
from ledger.monitor.live import Monitor
from ledger.storage import materialized
from ledger.storage.database import Ledger
from ledger.storage.materialized import MATERIALIZED, table
from ledger.storage.sql import definitions

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_sessions"
# journals whose sessions end every way (blocked, escalated, complete, stopped, paused, unblocked,
# with a raised limit), written line by line below
TAILS = (
    "manual-stop.jsonl",
    "paused-steered.jsonl",
    "unblocked.jsonl",
    "blocked.jsonl",
    "agent-claude.jsonl",
)


def defined(ledger: Ledger, view: str) -> list[tuple[Any, ...]]:
    """The rows of ``view`` as its definition computes them now, sorted."""
    sql = next(d.sql for d in definitions() if d.name == view)
    return sorted(ledger.con.execute(f"SELECT * FROM ({sql})").fetchall(), key=repr)


def read(ledger: Ledger, view: str) -> list[tuple[Any, ...]]:
    """The rows a query of ``view`` reads, sorted."""
    return sorted(ledger.con.execute(f"SELECT * FROM {view}").fetchall(), key=repr)


def reads_table(ledger: Ledger, view: str) -> bool:
    """Whether ``view`` reads its kept table (its plan scans that table and no events)."""
    plan = str(ledger.con.execute(f"EXPLAIN SELECT * FROM {view}").fetchall())
    return table(view) in plan and "ledger.main.events" not in plan


def assert_in_step(ledger: Ledger) -> None:
    assert ledger.materialized
    for view in MATERIALIZED:
        assert reads_table(ledger, view)
        rows = read(ledger, view)
        assert rows == defined(ledger, view), view


def home_with(root: Path, names: tuple[str, ...] | None = None) -> Home:
    """A home holding the sample sessions ``names`` (all of them by default)."""
    home = Home.resolve(root)
    home.ensure()
    for src in sorted(SAMPLES.glob("*.jsonl")):
        if names is None or src.name in names:
            shutil.copy(src, home.journals / src.name)
    return home


def test_a_ledger_file_reads_the_kept_rows_which_equal_the_definition(tmp_path: Path) -> None:
    home = home_with(tmp_path / "home")
    with Ledger.open(home) as ledger:
        ledger.ingest()
        assert_in_step(ledger)
        sessions = ledger.rows("SELECT count(DISTINCT session_id) AS n FROM events")[0]["n"]
        assert len(read(ledger, "sessions")) == sessions > 10
        # what reads the view reads the table too: a query of one session, the views built on it
        one = ledger.rows("SELECT * FROM sessions WHERE session_id = 'unblocked'")
        assert one and one[0]["status"] == "complete"
        assert ledger.rows("SELECT sum(sessions) AS n FROM loop_metrics")[0]["n"] == len(
            read(ledger, "sessions")
        )
    with Ledger.open(home, read_only=True) as ledger:
        assert_in_step(ledger)


def test_an_in_memory_ledger_computes_the_views(tmp_path: Path) -> None:
    ledger = Ledger.memory(home_with(tmp_path / "home"))
    ledger.ingest()
    assert not ledger.materialized
    assert "ledger.main.events" not in str(ledger.con.execute("EXPLAIN SELECT * FROM sessions").fetchall())
    assert "materialized_sessions" not in {r[0] for r in ledger.con.execute("SHOW TABLES").fetchall()}


def test_a_tail_appending_a_few_lines_at_a_time_keeps_the_rows_in_step(tmp_path: Path) -> None:
    home = Home.resolve(tmp_path / "home")
    home.ensure()
    journals = {name: (SAMPLES / name).read_bytes().splitlines(keepends=True) for name in TAILS}
    with Ledger.open(home) as ledger:
        step = 0
        while any(journals.values()):
            for name, lines in journals.items():  # one journal or two gain lines at each step
                if lines and (step + len(name)) % 2:
                    with (home.journals / name).open("ab") as out:
                        out.write(b"".join(lines[:3]))
                    del lines[:3]
            step += 1
            ledger.ingest(live=True)
            assert_in_step(ledger)


def test_a_journal_truncated_replaced_or_emptied_is_read_again_and_its_rows_follow(tmp_path: Path) -> None:
    home = home_with(tmp_path / "home", TAILS)
    path = home.journals / "unblocked.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    with Ledger.open(home) as ledger:
        ledger.ingest()
        before = ledger.rows("SELECT status, events FROM sessions WHERE session_id = 'unblocked'")
        path.write_bytes(b"".join(lines[:4]))  # truncated
        ledger.ingest()
        assert_in_step(ledger)
        assert ledger.rows("SELECT events FROM sessions WHERE session_id = 'unblocked'") == [{"events": 4}]
        path.write_bytes(b"".join(lines))  # replaced by a longer one with the same first lines
        ledger.ingest()
        assert_in_step(ledger)
        assert ledger.rows("SELECT status, events FROM sessions WHERE session_id = 'unblocked'") == before
        path.write_bytes(b"")  # emptied: the session has no events, and no row
        ledger.ingest()
        assert_in_step(ledger)
        assert ledger.rows("SELECT * FROM sessions WHERE session_id = 'unblocked'") == []


def test_prices_filled_later_cost_the_kept_rows(tmp_path: Path) -> None:
    home = home_with(tmp_path / "home", ("agent-claude.jsonl", "agent-gemini.jsonl", "agent-codex.jsonl"))
    with Ledger.open(home) as ledger:
        ledger.ingest()
        costed = ledger.rows("SELECT session_id, cost_usd FROM sessions ORDER BY 1")
        ledger.con.execute("BEGIN TRANSACTION")
        ledger.con.execute("DELETE FROM model_prices")  # as a ledger that had no prices yet
        materialized.refresh(ledger.con)
        ledger.con.execute("COMMIT")
        assert ledger.rows("SELECT session_id, cost_usd FROM sessions ORDER BY 1") != costed
        ledger.fill_prices()
        assert_in_step(ledger)
        assert ledger.rows("SELECT session_id, cost_usd FROM sessions ORDER BY 1") == costed


def test_a_model_first_named_by_a_tail_is_priced_in_the_same_ingest(tmp_path: Path) -> None:
    home = home_with(tmp_path / "home", ("blocked.jsonl",))
    lines = (SAMPLES / "agent-claude.jsonl").read_bytes().splitlines(keepends=True)
    with Ledger.open(home) as ledger:
        ledger.ingest()
        path = home.journals / "agent-claude.jsonl"
        for line in lines:
            with path.open("ab") as out:
                out.write(line)
            ledger.ingest(live=True)
            assert_in_step(ledger)
        assert ledger.rows("SELECT cost_usd FROM sessions WHERE session_id = 'agent-claude'")[0]["cost_usd"]


def test_a_rebuild_drops_the_rows_of_journals_gone(tmp_path: Path) -> None:
    home = home_with(tmp_path / "home", TAILS)
    with Ledger.open(home) as ledger:
        ledger.ingest()
        (home.journals / "blocked.jsonl").unlink()
        ledger.rebuild()
        assert_in_step(ledger)
        assert ledger.rows("SELECT * FROM sessions WHERE session_id = 'blocked'") == []


def test_tentative_events_are_seen_and_rolled_back_with_their_rows(tmp_path: Path) -> None:
    home = home_with(tmp_path / "home", ("unblocked.jsonl",))
    with Ledger.open(home) as ledger:
        ledger.ingest()
        before = read(ledger, "sessions")
        (last,) = ledger.con.execute("SELECT max(seq) FROM events").fetchone() or (0,)
        ledger.con.execute("BEGIN TRANSACTION")
        ledger.insert_events(
            [
                ev.SessionCompleted(
                    session_id="unblocked", seq=last + 1, iteration=3, promise="DONE", total_iterations=3
                )
            ]
        )
        assert ledger.rows("SELECT status FROM sessions WHERE session_id = 'unblocked'") == [
            {"status": "complete"}
        ]
        assert read(ledger, "sessions") == defined(ledger, "sessions")
        ledger.con.execute("ROLLBACK")
        assert read(ledger, "sessions") == before
        assert_in_step(ledger)


def test_tables_made_under_other_definitions_are_made_again_or_not_read(tmp_path: Path) -> None:
    home = home_with(tmp_path / "home", TAILS)
    with Ledger.open(home) as ledger:
        ledger.ingest()
        ledger.con.execute("UPDATE ledger_meta SET value = 'other' WHERE key = 'materialized'")
        ledger.con.execute("UPDATE materialized_sessions SET status = 'made by other definitions'")
    with Ledger.open(home, read_only=True) as ledger:  # cannot make them again: computes the views
        assert not ledger.materialized
        assert "made by other definitions" not in str(read(ledger, "sessions"))
        assert read(ledger, "sessions") == defined(ledger, "sessions")
    with Ledger.open(home) as ledger:
        assert_in_step(ledger)
        assert ledger.rows("SELECT value FROM ledger_meta WHERE key = 'materialized'") == [
            {"value": materialized.version()}
        ]


@pytest.mark.parametrize(
    "tamper",
    ["UPDATE materialized_sessions SET last_seq = 1, status = 'stale'", "DELETE FROM materialized_sessions"],
)
def test_rows_out_of_step_with_their_journals_are_computed_again_or_not_read(
    tmp_path: Path, tamper: str
) -> None:
    home = home_with(tmp_path / "home", TAILS)
    with Ledger.open(home) as ledger:
        ledger.ingest()
        ledger.con.execute(tamper + " WHERE session_id = 'blocked'")
    with Ledger.open(home, read_only=True) as ledger:
        assert not ledger.materialized
        assert read(ledger, "sessions") == defined(ledger, "sessions")
    with Ledger.open(home) as ledger:
        assert_in_step(ledger)


def test_a_ledger_of_another_layout_makes_its_tables_again(tmp_path: Path) -> None:
    home = home_with(tmp_path / "home", TAILS)
    with Ledger.open(home) as ledger:
        ledger.ingest()
        ledger.con.execute("UPDATE ledger_meta SET value = 'other' WHERE key = 'schema_version'")
    with Ledger.open(home) as ledger:  # emptied (another layout): no events, no rows
        assert read(ledger, "sessions") == []
        ledger.ingest()
        assert_in_step(ledger)


def test_the_monitors_query_console_reads_the_kept_rows(tmp_path: Path) -> None:
    home = home_with(tmp_path / "home", TAILS)
    with Ledger.open(home) as ledger:
        ledger.ingest()
    monitor = Monitor(homes=[home.root])
    try:
        assert monitor.ledger.materialized
        sql = next(d.sql for d in definitions() if d.name == "sessions")
        got = monitor.query("SELECT * FROM sessions ORDER BY session_id")
        assert got.rows == monitor.query(f"SELECT * FROM ({sql}) ORDER BY session_id").rows
        assert "materialized_sessions" in str(monitor.query("EXPLAIN SELECT * FROM sessions").rows)
    finally:
        monitor.close()
