"""Incremental export (``ledger.storage.partitions``): which day partitions an export writes, and
what an export that fails half-way leaves for the next one."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ledger import events as E
from ledger.core.home import Home
from ledger.storage import partitions
from ledger.storage.database import Ledger
from ledger.storage.export import export_parquet
from ledger.storage.journal import Journal


def day_rows(folder: Path) -> dict[str, int]:
    """Rows per day partition of a source folder."""
    return {
        p.parent.name.removeprefix("day="): pq.read_metadata(p).num_rows
        for p in sorted(folder.glob("day=*/*.parquet"))
    }


def manifest(folder: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((folder / "_export.json").read_text())
    return data


def test_a_change_of_columns_or_an_older_manifest_rewrites_every_day(
    fixture_home: Home, tmp_path: Path
) -> None:
    dest = tmp_path / "fleet"
    with Ledger.memory(fixture_home) as ledger:
        ledger.ingest()
        first = export_parquet(ledger, dest, "a")
        assert len(first.written) == 3 and first.prices
        assert not export_parquet(ledger, dest, "a").changed
        folder = first.folder
        # the events' columns changed (a newer ralph-ledger): every day again, with the new columns
        data = manifest(folder) | {"columns": "of another version"}
        (folder / "_export.json").write_text(json.dumps(data))
        assert export_parquet(ledger, dest, "a").written == first.written
        # a manifest of the earlier layout (no day states) is this home's: rewritten once, no --force
        data = {k: v for k, v in manifest(folder).items() if k not in ("format", "days", "columns")}
        (folder / "_export.json").write_text(json.dumps(data))
        assert export_parquet(ledger, dest, "a").written == first.written
        assert not export_parquet(ledger, dest, "a").changed
        assert sum(day_rows(folder).values()) == 161


def test_an_empty_home_keeps_its_empty_partition_until_events_come(tmp_path: Path) -> None:
    home = Home.resolve(tmp_path / "home")
    home.ensure()
    dest = tmp_path / "fleet"
    with Ledger.memory(home) as ledger:
        first = export_parquet(ledger, dest, "idle")
        assert len(first.written) == 1 and day_rows(first.folder) == {first.written[0]: 0}
        assert not export_parquet(ledger, dest, "idle").changed  # the same empty day, not today's again
        Journal.for_session(home.journals, "s", fsync=False).append(
            E.SessionStarted(session_id="s", task="t", ts=E.EPOCH.replace(year=2026))
        )
        ledger.ingest()
        second = export_parquet(ledger, dest, "idle")
        assert second.written == ("2026-01-01",) and second.removed == first.written
        assert day_rows(first.folder) == {"2026-01-01": 1}


def test_an_export_that_fails_half_way_is_finished_by_the_next(
    fixture_home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The manifest stops vouching for the days being written before they are replaced: an export
    that dies after writing them (here: writing the prices fails) makes the next one write them again."""
    dest = tmp_path / "fleet"
    with Ledger.memory(fixture_home) as ledger:
        ledger.ingest()
        first = export_parquet(ledger, dest, "a")
        Journal.for_session(fixture_home.journals, "late", fsync=False).append(
            E.SessionStarted(session_id="late", task="a late one", ts=E.EPOCH.replace(year=2027))
        )
        ledger.ingest()

        def fail(*args: object) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(partitions, "write_prices", fail)
        with pytest.raises(OSError):
            export_parquet(ledger, dest, "a", full=True)
        days = manifest(first.folder)["days"]
        assert isinstance(days, dict) and days == {}  # nothing vouched for: all being rewritten
        assert manifest(first.folder)["prices"] == ""
        monkeypatch.undo()
        again = export_parquet(ledger, dest, "a")
        assert len(again.written) == 4 and again.prices
        assert sum(day_rows(first.folder).values()) == 162
        assert sorted(p.name for p in (dest / ".staging").iterdir()) == ["a.lock"]
        assert not export_parquet(ledger, dest, "a").changed


def test_a_day_duckdb_splits_into_several_files_is_written_as_one(tmp_path: Path) -> None:
    """With many partitions open at once DuckDB writes a day as several files (``part-0``,
    ``part-1``, ...): each day must still become one file, renamed over its place whole."""
    home = Home.resolve(tmp_path / "home")
    home.ensure()
    for n in range(40):  # sessions alternating between three days: the rows of a day come in bursts
        start = datetime(2026, 1, 5 + n % 3, 8, tzinfo=UTC)
        events: list[E.AnyEvent] = [E.SessionStarted(session_id=f"s{n:02d}", seq=1, ts=start, task="t")]
        events += [
            E.IterationStarted(session_id=f"s{n:02d}", seq=i, ts=start + timedelta(seconds=i), iteration=1)
            for i in range(2, 201)
        ]
        (home.journals / f"s{n:02d}.jsonl").write_bytes(E.encode_lines(events))
    dest = tmp_path / "fleet"
    with Ledger.memory(home) as ledger:
        ledger.ingest()
        ledger.con.execute("SET partitioned_write_max_open_files = 1")
        ledger.con.execute("SET partitioned_write_flush_threshold = 100")
        report = export_parquet(ledger, dest, "a")
        files = sorted(p.relative_to(report.folder) for p in report.folder.glob("day=*/*.parquet"))
        assert [str(f) for f in files] == [f"day={d}/part-0.parquet" for d in report.written]
        assert day_rows(report.folder) == {"2026-01-05": 2800, "2026-01-06": 2600, "2026-01-07": 2600}
