"""Benchmark shipping a home into a Parquet dataset: a full export against an incremental one.

Run from the repository root::

    .venv/bin/python bench/bench_export.py            # 10,000 sessions x 100 events = 1M events
    .venv/bin/python bench/bench_export.py --quick    # 10x smaller

What it measures, and how: docs/performance.md (How the benches measure).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import bench_ledger  # bench/bench_ledger.py, beside this script: the synthetic home
import duckdb
from tables import cpu_model, markdown_table, parse_with_smoke

from ledger import events as ev
from ledger.core.home import Home
from ledger.core.words import plural
from ledger.storage.database import Ledger
from ledger.storage.export import ExportReport, export_parquet

TARGET_RATIO: Final = 0.05
SOURCE: Final = "bench"


def log(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


def scratch_home(source: Home, work: Path) -> Home:
    """A fresh home in ``work`` whose journals are hard links to ``source``'s (never modified: new
    events go to new journals)."""
    shutil.rmtree(work, ignore_errors=True)
    home = Home.resolve(work / "home")
    home.ensure()
    for path in source.journal_files():
        os.link(path, home.journals / path.name)
    return home


def add_session(home: Home, cfg: bench_ledger.Config, index: int, n_events: int) -> None:
    """``n_events`` events of one more synthetic session (numbered after the home's last ones)."""
    events = bench_ledger.generate_session(cfg.seed, index, n_events)
    (home.journals / f"{bench_ledger.session_id(index)}.jsonl").write_bytes(ev.encode_lines(events))


def timed(run: Callable[[], ExportReport]) -> tuple[float, ExportReport]:
    """How long ``run`` took, in seconds, and what it returned."""
    started = time.perf_counter()
    report = run()
    return time.perf_counter() - started, report


def dataset_events(dest: Path) -> int:
    """How many events the dataset's ``source=bench`` folder holds, as DuckDB reads its files."""
    con = duckdb.connect(":memory:")
    glob = str(dest / "events" / f"source={SOURCE}" / "*" / "*.parquet").replace("'", "''")
    row = con.execute(f"SELECT count(*) FROM read_parquet('{glob}')").fetchone()
    return int(row[0]) if row else 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--sessions", type=int, default=10_000, help="sessions of the home (default 10,000)")
    p.add_argument("--events-per-session", type=int, default=100)
    p.add_argument("--quick", action="store_true", help="10x fewer sessions")
    p.add_argument("--new", type=int, default=1_000, help="events added before each incremental export")
    p.add_argument("--repeat", type=int, default=3, help="runs of each export; the median is reported")
    p.add_argument("--out", type=Path, default=bench_ledger.BENCH_DIR / "out")
    smoke = ("--sessions", "50", "--events-per-session", "20", "--new", "50", "--repeat", "1")
    a = parse_with_smoke(p, argv, smoke)
    cfg = bench_ledger.parse_args(
        [
            "--sessions",
            str(a.sessions),
            "--events-per-session",
            str(a.events_per_session),
            "--out",
            str(a.out),
            *(["--quick"] if a.quick else []),
        ]
    )
    cached, how = bench_ledger.ensure_dataset(cfg)
    log(f"home of {cfg.total_events:,} events: {how}")
    work = cfg.out / "export-work"
    home = scratch_home(cached, work)
    dest = work / "dataset"
    started = time.perf_counter()
    with Ledger.open(home) as ledger:
        ledger.ingest()
        log(f"ingested in {time.perf_counter() - started:.1f} s")
        full: list[float] = []
        for _ in range(a.repeat):
            seconds, report = timed(lambda: export_parquet(ledger, dest, SOURCE, full=True))
            full.append(seconds)
            log(f"full export: {seconds:.2f} s, {len(report.written)} day partitions")
        days_full = len(report.written)
        incremental: list[float] = []
        written: list[int] = []
        for r in range(a.repeat):
            add_session(home, cfg, cfg.sessions + r, a.new)
            ledger.ingest()
            seconds, report = timed(lambda: export_parquet(ledger, dest, SOURCE))
            incremental.append(seconds)
            written.append(len(report.written))
            log(f"incremental export: {seconds:.3f} s, {plural(len(report.written), 'day partition')}")
        noop: list[float] = []
        for _ in range(a.repeat):
            seconds, report = timed(lambda: export_parquet(ledger, dest, SOURCE))
            assert not report.written and not report.removed, report
            noop.append(seconds)
        row = ledger.con.execute("SELECT count(*) FROM events").fetchone()
        total = int(row[0]) if row else 0
    shipped = dataset_events(dest)
    if shipped != total:
        print(f"bench_export: the dataset holds {shipped} events, the ledger {total}", file=sys.stderr)
        return 1

    f, i, n = (statistics.median(x) for x in (full, incremental, noop))
    ratio = i / f
    rows = [
        ["export", "median", "runs", "day partitions written", "vs full"],
        ["full (`--full`)", f"{f:.2f} s", str(len(full)), str(days_full), "100%"],
        [
            f"incremental, after {a.new:,} new events",
            f"{i * 1000:.0f} ms",
            str(len(incremental)),
            "/".join(map(str, written)),
            f"{ratio:.1%}",
        ],
        ["nothing new", f"{n * 1000:.0f} ms", str(len(noop)), "0", f"{n / f:.1%}"],
    ]
    print(f"Export of a home of {total:,} events ({cfg.sessions:,} sessions + the new ones) to a Parquet")
    print(f"dataset; {os.cpu_count()} cores ({cpu_model()}), DuckDB {duckdb.__version__}.\n")
    print(markdown_table(rows, right={1, 2, 3, 4}))
    verdict = "PASS" if ratio < TARGET_RATIO else "FAIL"
    if a.quick:
        verdict += " (the target is for 1M events; a quick home has 10x fewer days to leave alone)"
    print(f"\nincremental / full = {ratio:.1%} (target < {TARGET_RATIO:.0%}): {verdict}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
