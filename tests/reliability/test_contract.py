"""One contract, run against both stores: the journal reader and the ledger.

Each store answers "which events does the session hold, in order" and "which
bad lines were reported"; the contract holds for both.
"""

from __future__ import annotations

import multiprocessing
import os
from abc import ABC, abstractmethod
from pathlib import Path

import pytest

from ledger import events as E
from ledger.core.home import Home
from ledger.storage.database import Ledger
from ledger.storage.journal import BadLine, Cursor, Journal, journal_path, read_new

SID = "contract"


def turn(n: int = 0, sid: str = SID) -> E.AgentTurn:
    return E.AgentTurn(session_id=sid, iteration=n, tool_count=n, output_excerpt=f"turn {n}")


def _append_many(journals: str, worker: int, count: int) -> None:
    j = Journal.for_session(Path(journals), SID)
    for i in range(count):
        j.append(E.AgentTurn(session_id=SID, iteration=worker, tool_count=i))


class StoreContract(ABC):
    @abstractmethod
    def read(self, home: Home) -> tuple[list[tuple[int, str, int]], list[BadLine]]:
        """(seq, type, tool_count) of the session's events so far, and bad lines."""

    def journal(self, home: Home) -> Journal:
        return Journal.for_session(home.journals, SID, fsync=False)

    def test_order_and_seq(self, home: Home) -> None:
        j = self.journal(home)
        for i in range(1, 51):
            j.append(turn(i))
        events, bad = self.read(home)
        assert [e[0] for e in events] == list(range(1, 51))
        assert [e[2] for e in events] == list(range(1, 51))
        assert bad == []

    def test_incremental_reads_return_each_event_once(self, home: Home) -> None:
        j = self.journal(home)
        j.append(turn(1), turn(2))
        first, _ = self.read(home)
        j.append(turn(3))
        second, _ = self.read(home)
        assert [e[0] for e in first] == [1, 2]
        assert [e[0] for e in second] == [1, 2, 3]

    def test_reading_twice_changes_nothing(self, home: Home) -> None:
        self.journal(home).append(*(turn(i) for i in range(10)))
        assert self.read(home) == self.read(home)

    def test_torn_last_line_is_not_read_until_complete(self, home: Home) -> None:
        j = self.journal(home)
        j.append(turn(1))
        line = E.encode(E.AgentTurn(session_id=SID, seq=2, iteration=2))
        with open(j.path, "ab") as f:
            f.write(line[:20])
        events, bad = self.read(home)
        assert [e[0] for e in events] == [1] and bad == []
        with open(j.path, "ab") as f:
            f.write(line[20:])
        events, bad = self.read(home)
        assert [e[0] for e in events] == [1, 2] and bad == []

    def test_torn_line_after_a_crash_is_reported_and_appends_continue(self, home: Home) -> None:
        j = self.journal(home)
        j.append(turn(1))
        with open(j.path, "ab") as f:
            f.write(b'{"type":"agent_turn","session_id":"contract","seq":2,"it')  # crash mid-append
        j.append(turn(3))
        events, bad = self.read(home)
        assert [(e[0], e[2]) for e in events] == [(1, 1), (2, 3)]
        assert [(b.line_no, b.reason.split(" ")[0]) for b in bad] == [(2, "torn")]
        assert bad[0].path.endswith("contract.jsonl")

    def test_truncation_is_noticed(self, home: Home) -> None:
        j = self.journal(home)
        j.append(*(turn(i) for i in range(1, 6)))
        self.read(home)
        j.path.unlink()
        j.append(turn(7), turn(8))
        events, _ = self.read(home)
        assert [(e[0], e[2]) for e in events] == [(1, 7), (2, 8)]

    def test_lines_longer_than_the_read_blocks(self, home: Home) -> None:
        j = self.journal(home)
        big = "x" * 200_000
        j.append(E.AgentTurn(session_id=SID, output_excerpt=big), turn(2))
        self.read(home)
        j.append(E.AgentTurn(session_id=SID, output_excerpt=big, tool_count=3))
        j.append(turn(4))
        with open(j.path, "ab") as f:
            f.write(E.encode(E.AgentTurn(session_id=SID, seq=5, output_excerpt=big))[:150_000])
        events, bad = self.read(home)
        assert [(e[0], e[2]) for e in events] == [(1, 0), (2, 2), (3, 3), (4, 4)] and bad == []

    def test_concurrent_appenders_get_unique_gapless_seqs(self, home: Home) -> None:
        # spawned, not forked: a fork of a test process holding DuckDB's threads may crash (SIGSEGV)
        ctx = multiprocessing.get_context("spawn")
        procs = [ctx.Process(target=_append_many, args=(str(home.journals), w, 500)) for w in range(8)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=120)
            assert p.exitcode == 0
        events, bad = self.read(home)
        assert sorted(e[0] for e in events) == list(range(1, 4001))
        assert [e[0] for e in events] == list(range(1, 4001))
        assert bad == []


class TestJournalContract(StoreContract):
    cursors: dict[str, tuple[Cursor, list[tuple[int, str, int]], list[BadLine]]]

    def read(self, home: Home) -> tuple[list[tuple[int, str, int]], list[BadLine]]:
        if not hasattr(self, "cursors"):
            self.cursors = {}
        cursor, seen, bad = self.cursors.setdefault(str(home.root), (Cursor(), [], []))
        result = read_new(journal_path(home.journals, SID), cursor)
        if result.truncated:
            seen.clear()
            bad.clear()
        seen.extend((e.seq, str(e.__struct_config__.tag), getattr(e, "tool_count", 0)) for e in result.events)
        bad.extend(result.bad)
        return list(seen), list(bad)


class TestLedgerContract(StoreContract):
    def read(self, home: Home) -> tuple[list[tuple[int, str, int]], list[BadLine]]:
        with Ledger.open(home) as ledger:
            ledger.ingest()
            rows = ledger.con.execute(
                "SELECT seq, type, tool_count FROM events WHERE session_id = ? ORDER BY seq", [SID]
            ).fetchall()
            bad = ledger.con.execute(
                "SELECT journal, line_no, reason, excerpt FROM ingest_errors ORDER BY line_no"
            ).fetchall()
        return (
            [(r[0], r[1], r[2]) for r in rows],
            [BadLine(str(home.journals / b[0]), b[1], b[2], b[3]) for b in bad],
        )

    def test_crash_mid_ingest_leaves_nothing_half_done(
        self, home: Home, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        j = self.journal(home)
        j.append(*(turn(i) for i in range(1, 11)))
        expected = self.read(home)
        j.append(*(turn(i) for i in range(11, 21)))
        with Ledger.open(home) as ledger:

            def crash(*args: object, **kw: object) -> None:
                raise KeyboardInterrupt("killed between the rows and the positions")

            monkeypatch.setattr("ledger.storage.ingest.bulk_insert", crash)
            with pytest.raises(KeyboardInterrupt):
                ledger.ingest()
            monkeypatch.undo()
            assert ledger.con.execute("SELECT count(*) FROM events").fetchone() == (len(expected[0]),)
        events, _ = self.read(home)
        assert [e[0] for e in events] == list(range(1, 21))

    def test_rebuild_gives_the_same_tables(self, home: Home) -> None:
        j = self.journal(home)
        j.append(*(turn(i) for i in range(1, 31)))
        with Ledger.open(home) as ledger:
            ledger.ingest()
            before = ledger.con.execute("SELECT * FROM events ORDER BY session_id, seq").fetchall()
            ledger.rebuild()
            after = ledger.con.execute("SELECT * FROM events ORDER BY session_id, seq").fetchall()
        assert before == after and len(after) == 30

    def test_deleted_ledger_file_is_rebuilt_from_journals(self, home: Home) -> None:
        self.journal(home).append(*(turn(i) for i in range(1, 6)))
        first, _ = self.read(home)
        os.remove(home.database)
        assert self.read(home)[0] == first
