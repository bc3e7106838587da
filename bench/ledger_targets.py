"""Issue 23's ledger targets (item 6), each measured against a baseline run in the same process.

Used by ``bench_ledger.py``; a target's figure and its baseline are timed turn about (figure,
baseline, figure, ...), so that a busy machine slows both alike and their ratio stays meaningful
when the absolute figures do not:

* bulk ingest: ``Ledger.open`` + ``ingest`` + ``close`` of every journal into a fresh file, in
  events/s, against DuckDB alone reading the same lines (the journals concatenated beforehand, as
  the ingest's scratch file is) with ``read_json`` and the ledger's column types into a fresh file;
  ratio = ledger rate / DuckDB rate (1.0: the ledger adds nothing to DuckDB's own JSON reading);
* the ``sessions`` and ``iterations`` views, all columns into Arrow, against the same grouping with
  only ``count(*)`` (one row per session, per iteration): the scan and grouping every projection
  pays; ratio = view time / that floor.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import duckdb
from tables import markdown_table

from ledger.core.home import Home
from ledger.storage.database import Ledger
from ledger.storage.schema import create_events_sql, read_json_columns

INGEST_TARGET_RATE: Final = 500_000.0
SESSIONS_TARGET_MS: Final = 100.0
ITERATIONS_TARGET_MS: Final = 150.0

FLOORS: Final = {
    "sessions": "SELECT session_id, count(*) FROM events GROUP BY session_id",
    "iterations": "SELECT session_id, iteration, count(*) FROM events WHERE iteration > 0 "
    "GROUP BY session_id, iteration",
}
"""The baseline of each target view: its grouping, counting rows only."""


@dataclass(frozen=True, slots=True)
class Target:
    """One target: the median figure, its baseline's median and whether the target is met."""

    name: str
    figure: str
    target: str
    baseline: str
    baseline_figure: str
    ratio: float
    ratio_meaning: str
    passed: bool


def alternate(first: Callable[[], float], second: Callable[[], float], runs: int) -> tuple[float, float]:
    """Median seconds of ``first`` and of ``second``, run turn about ``runs`` times each."""
    a: list[float] = []
    b: list[float] = []
    for _ in range(runs):
        a.append(first())
        b.append(second())
    return statistics.median(a), statistics.median(b)


def _fresh(root: Path) -> Path:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    return root


def ledger_ingest(base: Path, journals: Path) -> float:
    """Seconds to open a fresh ledger over ``journals``, ingest every line and close it."""
    root = _fresh(base / "ledger")
    (root / "journals").symlink_to(journals, target_is_directory=True)
    home = Home.resolve(root)
    started = time.perf_counter()
    ledger = Ledger.open(home)
    ledger.ingest()
    ledger.close()
    seconds = time.perf_counter() - started
    shutil.rmtree(root, ignore_errors=True)
    return seconds


def duckdb_read_json(base: Path, lines: Path) -> float:
    """Seconds for DuckDB alone to read ``lines`` into a fresh file with the ledger's columns."""
    root = _fresh(base / "duckdb")
    started = time.perf_counter()
    con = duckdb.connect(str(root / "plain.duckdb"))
    con.execute("SET preserve_insertion_order = false")  # as the ledger does: DuckDB at its fastest
    con.execute(create_events_sql())
    path = str(lines).replace("'", "''")
    con.execute(
        "INSERT INTO events SELECT * FROM "
        f"read_json('{path}', format='newline_delimited', columns={read_json_columns()})"
    ).fetchall()
    con.close()
    seconds = time.perf_counter() - started
    shutil.rmtree(root, ignore_errors=True)
    return seconds


def concatenate(files: list[Path], out: Path) -> Path:
    """Every journal's bytes, one after another, in ``out`` (what an ingest's scratch file holds)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as dst:
        for f in files:
            with f.open("rb") as src:
                shutil.copyfileobj(src, dst, 1 << 20)
    return out


def ingest_target(home: Home, work: Path, events: int, runs: int) -> Target:
    base = _fresh(work)
    lines = concatenate(home.journal_files(), base / "lines.jsonl")
    try:
        ours, plain = alternate(
            lambda: ledger_ingest(base, home.journals),
            lambda: duckdb_read_json(base, lines),
            runs,
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    rate, plain_rate = events / ours, events / plain
    return Target(
        f"bulk ingest of {events:,} events (open + ingest + close)",
        f"{rate:,.0f} ev/s",
        f">= {INGEST_TARGET_RATE:,.0f} ev/s",
        "DuckDB read_json of the same lines",
        f"{plain_rate:,.0f} ev/s",
        rate / plain_rate,
        "of DuckDB's rate",
        rate >= INGEST_TARGET_RATE,
    )


def _arrow_seconds(con: duckdb.DuckDBPyConnection, sql: str) -> float:
    started = time.perf_counter()
    con.sql(sql).to_arrow_table()
    return time.perf_counter() - started


def view_target(con: duckdb.DuckDBPyConnection, view: str, target_ms: float, runs: int) -> Target:
    _arrow_seconds(con, f"SELECT * FROM {view}")  # warm-up, as every query of the bench
    _arrow_seconds(con, FLOORS[view])
    ours, floor = alternate(
        lambda: _arrow_seconds(con, f"SELECT * FROM {view}"),
        lambda: _arrow_seconds(con, FLOORS[view]),
        runs,
    )
    return Target(
        f"view {view}, every column into Arrow",
        f"{ours * 1000:,.1f} ms",
        f"<= {target_ms:g} ms",
        "its grouping with count(*) only",
        f"{floor * 1000:,.1f} ms",
        ours / floor,
        "x the floor",
        ours * 1000 <= target_ms,
    )


def view_targets(con: duckdb.DuckDBPyConnection, runs: int) -> list[Target]:
    return [
        view_target(con, "sessions", SESSIONS_TARGET_MS, runs),
        view_target(con, "iterations", ITERATIONS_TARGET_MS, runs),
    ]


def load_note() -> str:
    """The machine's load average, and a warning when other work competes for its cores."""
    one, five, _ = os.getloadavg()
    cores = len(os.sched_getaffinity(0))
    busy = (
        f" -- busy: other processes compete for the {cores} cores, so absolute figures are slower "
        "than on an idle machine; the ratios against the same-process baselines hold better"
        if five > cores
        else ""
    )
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {cores} cores{busy}"


def render(targets: list[Target], runs: int) -> str:
    header = ["target (issue 23, item 6)", "median", "target", "baseline", "baseline median", "ratio"]
    header.append("result")
    rows = [
        [
            t.name,
            t.figure,
            t.target,
            t.baseline,
            t.baseline_figure,
            f"{t.ratio:.2f} {t.ratio_meaning}",
            "PASS" if t.passed else "FAIL",
        ]
        for t in targets
    ]
    note = f"medians of {runs} runs each, figure and baseline taken turn about"
    return markdown_table([header, *rows], {1, 4, 5}) + f"\n{note}"
