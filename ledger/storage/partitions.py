"""The day partitions of one home's folder in an exported dataset, written incrementally.

The folder's manifest records the state (event count, digest of their keys) each day's file was
written from; an export writes again only the days whose state differs, removes days with no events
left, and rewrites everything when asked or when the manifest or the columns changed. Each file is
written under ``.staging/`` and renamed into place. The rules: docs/fleet.md (What is written, and
when; What is atomic).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import duckdb

FORMAT: Final = 2
"""The manifest's layout: 2 records each day's state (version 1 manifests had none)."""
PART: Final = "part-0.parquet"
DAY_RE: Final = re.compile(r"\d{4}-\d{2}-\d{2}")
_DAY_STATES: Final = (  # grouped by the date first: formatting each row's date costs 5x the scan
    "SELECT strftime(day, '%Y-%m-%d'), n, CAST(digest AS VARCHAR) FROM ("
    "SELECT CAST(ts AS DATE) AS day, count(*) AS n, "
    "sum(hash(session_id, seq, ts, iteration, type)) AS digest FROM events GROUP BY day) ORDER BY 1"
)


@dataclass(frozen=True, slots=True)
class DayState:
    """One day's events as the ledger holds them: how many, and a digest of their keys."""

    events: int
    digest: str


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The ledger's days, and digests of the events' columns and of the model prices."""

    days: dict[str, DayState]
    columns: str
    prices: str


@dataclass(frozen=True, slots=True)
class Plan:
    """What an export writes: ``days`` is every day the folder must hold (a day without events
    stands for an empty home); ``write`` the days to write, ``remove`` the day folders to remove."""

    days: dict[str, DayState]
    write: tuple[str, ...]
    remove: tuple[str, ...]
    prices: bool

    @property
    def changed(self) -> bool:
        """Whether the export writes or removes anything."""
        return bool(self.write or self.remove or self.prices)


def snapshot(con: duckdb.DuckDBPyConnection) -> Snapshot:
    """The state of every day of the ledger on ``con`` (a scan of five columns: cheap)."""
    days = {str(d): DayState(int(n), str(h)) for d, n, h in con.execute(_DAY_STATES).fetchall()}
    cols = con.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_name = 'events' ORDER BY ordinal_position"
    ).fetchall()
    prices = con.execute("SELECT count(*), CAST(sum(hash(p)) AS VARCHAR) FROM model_prices AS p").fetchone()
    return Snapshot(days, _digest(cols), _digest(prices))


def _digest(value: object) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:32]


def recorded_days(manifest: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The days a manifest of this layout records, each ``{"events", "digest", "bytes"}``; entries
    of another shape are left out (their days are written again)."""
    days = manifest.get("days") if manifest else None
    if not isinstance(days, dict):
        return {}
    out: dict[str, dict[str, Any]] = {}
    for day, rec in days.items():
        if (
            DAY_RE.fullmatch(str(day))
            and isinstance(rec, dict)
            and isinstance(rec.get("events"), int)
            and isinstance(rec.get("digest"), str)
            and isinstance(rec.get("bytes"), int)
        ):
            out[str(day)] = rec
    return out


def plan(
    folder: Path, old: dict[str, Any] | None, snap: Snapshot, *, full: bool, today: str, prices: Path
) -> Plan:
    """What to write into ``folder`` so that it holds ``snap``, given its manifest ``old`` (None,
    or ``full``: everything), and whether to write the ``prices`` file. An empty ledger keeps one
    day without events: the one already there, else ``today``."""
    usable = (
        not full and old is not None and old.get("format") == FORMAT and old.get("columns") == snap.columns
    )
    recorded = recorded_days(old) if usable else {}
    on_disk = {p.name[4:] for p in folder.glob("day=*") if p.is_dir()} if folder.is_dir() else set()
    days = dict(snap.days)
    if not days:
        kept = [d for d, rec in sorted(recorded.items()) if rec["events"] == 0 and d in on_disk]
        days = {kept[0] if kept else today: DayState(0, "0")}
    write = tuple(d for d, state in sorted(days.items()) if not _holds(folder, d, recorded.get(d), state))
    same_prices = usable and old is not None and old.get("prices") == snap.prices and prices.is_file()
    return Plan(days, write, tuple(sorted(on_disk - days.keys())), not same_prices)


def _holds(folder: Path, day: str, rec: dict[str, Any] | None, state: DayState) -> bool:
    """Whether ``folder``'s partition of ``day`` is the one written from ``state``."""
    if rec is None or (rec["events"], rec["digest"]) != (state.events, state.digest):
        return False
    try:
        return (folder / f"day={day}" / PART).stat().st_size == int(rec["bytes"])
    except OSError:
        return False


def write_days(con: duckdb.DuckDBPyConnection, todo: Plan, stage: Path, folder: Path) -> dict[str, int]:
    """Write the days of ``todo.write`` under ``stage``, then rename each over its partition in
    ``folder``; returns each day's file size. Other ``part-*.parquet`` files of those days (of
    earlier layouts) are removed after."""
    with_events = [d for d in todo.write if todo.days[d].events]
    if with_events:
        where = ""
        if len(with_events) < sum(1 for s in todo.days.values() if s.events):
            where = "WHERE " + " OR ".join(map(_on_day, with_events))
        con.execute(
            f"COPY (SELECT *, CAST(ts AS DATE) AS day FROM events {where} ORDER BY session_id, seq) "
            f"TO '{_quoted(stage)}' (FORMAT parquet, PARTITION_BY (day), FILENAME_PATTERN 'part-{{i}}')"
        )
    for day in with_events:  # DuckDB splits a partition into several files when it holds many open:
        files = sorted((stage / f"day={day}").glob("*.parquet"))  # one file a day, or no atomic swap
        if [f.name for f in files] != [PART]:
            for f in files:
                f.unlink()
            target = _quoted(stage / f"day={day}" / PART)
            con.execute(
                f"COPY (SELECT * FROM events WHERE {_on_day(day)} ORDER BY session_id, seq) "
                f"TO '{target}' (FORMAT parquet)"
            )
    for day in todo.write:
        if not todo.days[day].events:
            (stage / f"day={day}").mkdir(parents=True, exist_ok=True)
            target = _quoted(stage / f"day={day}" / PART)
            con.execute(f"COPY (SELECT * FROM events LIMIT 0) TO '{target}' (FORMAT parquet)")
    sizes: dict[str, int] = {}
    for day in todo.write:
        staged, into = stage / f"day={day}" / PART, folder / f"day={day}"
        sizes[day] = staged.stat().st_size
        into.mkdir(exist_ok=True)
        os.replace(staged, into / PART)
        for other in into.glob("part-*.parquet"):
            if other.name != PART:
                other.unlink(missing_ok=True)
    return sizes


def remove_days(folder: Path, days: Sequence[str]) -> None:
    """Remove the partitions of ``days`` (their Parquet files, then the folder if left empty)."""
    for day in days:
        into = folder / f"day={day}"
        for part in into.glob("*.parquet"):
            part.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # something else lives there: left, readers skip it
            into.rmdir()


def write_prices(con: duckdb.DuckDBPyConnection, stage: Path, target: Path) -> None:
    """Write the ledger's ``model_prices`` to ``target`` (through the folder ``stage``)."""
    staged = stage / target.name
    con.execute(f"COPY (FROM model_prices ORDER BY model, above) TO '{_quoted(staged)}' (FORMAT parquet)")
    os.replace(staged, target)


def day_records(todo: Plan, sizes: dict[str, int], old: dict[str, Any] | None) -> dict[str, Any]:
    """The manifest's ``days`` after writing ``todo``: the days written, with their sizes, and the
    others as ``old`` recorded them."""
    before = recorded_days(old)
    out: dict[str, Any] = {}
    for day, state in sorted(todo.days.items()):
        if day in sizes:
            out[day] = {"events": state.events, "digest": state.digest, "bytes": sizes[day]}
        elif day in before:
            out[day] = before[day]
    return out


def _on_day(day: str) -> str:
    """The SQL condition of the events of ``day`` (``YYYY-MM-DD``, UTC)."""
    return f"(ts >= TIMESTAMP '{day}' AND ts < TIMESTAMP '{day}' + INTERVAL 1 DAY)"


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")
