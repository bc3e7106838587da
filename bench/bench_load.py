"""Concurrency and load: many Stop hooks for many Claude Code sessions in one ledger home, while a
reader ingests and queries the ledger.

    .venv/bin/python bench/bench_load.py            # 16 processes x 20 sessions x 100 stops
    .venv/bin/python bench/bench_load.py --quick    # 4 x 5 x 30, a smoke run

What it measures, and how: docs/performance.md (How the benches measure).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run the load, print the table."""
    sys.path.insert(0, str(ROOT))  # the driver lives in the tests package
    from tables import parse_with_smoke  # bench/tables.py, beside this script

    from tests.load_suite import LONG, QUICK, LoadParams, run_load

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the test suite's quick form (overridden by options)")
    p.add_argument("--procs", type=int, help=f"worker processes (default {LONG.procs})")
    p.add_argument("--sessions", type=int, help=f"sessions per worker (default {LONG.sessions})")
    p.add_argument("--stops", type=int, help=f"stops per session (default {LONG.stops})")
    p.add_argument(
        "--real-sessions", type=int, help=f"sessions of real hook processes ({LONG.real_sessions})"
    )
    p.add_argument("--real-stops", type=int, help=f"stops per real-process session ({LONG.real_stops})")
    p.add_argument("--cli-reads", type=int, help=f"'ralph-ledger sessions' runs meanwhile ({LONG.cli_reads})")
    p.add_argument("--reader", choices=["ledger", "monitor"], default="ledger", help="the reader (ledger)")
    p.add_argument("--keep", metavar="DIR", help="run in DIR and keep it (default: a temporary directory)")
    smoke = ("--procs", "2", "--sessions", "2", "--stops", "10", "--real-sessions", "1", "--real-stops", "2")
    args = parse_with_smoke(p, argv, (*smoke, "--cli-reads", "1"))
    base = QUICK if args.quick else LONG
    params = LoadParams(
        procs=args.procs or base.procs,
        sessions=args.sessions or base.sessions,
        stops=args.stops or base.stops,
        real_sessions=base.real_sessions if args.real_sessions is None else args.real_sessions,
        real_stops=args.real_stops or base.real_stops,
        cli_reads=base.cli_reads if args.cli_reads is None else args.cli_reads,
        reader=args.reader,
    )
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="ralph-load-"))
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        report = run_load(params, root, log=lambda line: print(f"# {line}", file=sys.stderr))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    cores = len(os.sched_getaffinity(0))
    print(
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()} with {cores} cores, Python "
        f"{platform.python_version()}; whole run {time.perf_counter() - started:.1f} s"
    )
    print(report.table())
    print(report.summary())
    for problem in report.problems:
        print(f"problem: {problem}")
    return 1 if report.problems or report.gaps or report.duplicates else 0


if __name__ == "__main__":
    sys.exit(main())
