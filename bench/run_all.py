"""Every figure of the performance tables (docs/performance.md), in one command.

    .venv/bin/python bench/run_all.py            # the full runs (about 15 minutes on 2 cores)
    .venv/bin/python bench/run_all.py --quick    # small runs of each, a minute or two

What it measures, and how: docs/performance.md (How the benches measure).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from tables import cpu_model  # bench/tables.py, beside this script

BENCH: Final = Path(__file__).resolve().parent
RUNS: Final[tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...]] = (
    ("ledger: journal, ingest, views, detectors vs SQLite", "bench_ledger.py", (), ("--quick",)),
    ("Stop hook: whole process, 3 MB transcript", "bench_hook.py", (), ("--runs", "10")),
    ("ralph-tui: start-up, live latency, memory", "bench_tui.py", (), ("--quick",)),
    ("load: hook processes into one home while a reader ingests", "bench_load.py", (), ("--quick",)),
    ("ralph-tui --dataset: start-up, 3 exported sources", "bench_dataset.py", (), ("--quick",)),
    ("MCP server: start, validate round trip", "bench_mcp.py", (), ("--starts", "3", "--calls", "50")),
    ("export: full vs incremental Parquet shipping", "bench_export.py", (), ("--quick",)),
)
"""(title, script, arguments of the full run, arguments of the quick run)."""


def machine() -> str:
    """One line naming the machine the figures come from."""
    cpu = cpu_model()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}; load average before the runs {load}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run every bench script and print its output under a heading."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="small runs of each bench")
    a = p.parse_args(argv)
    print(f"# ralph-ledger performance ({'quick' if a.quick else 'full'} runs)\n")
    print(f"machine: {machine()}\n")
    failed = []
    for title, script, full, quick in RUNS:
        print(f"## {title} (bench/{script})\n", flush=True)
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, str(BENCH / script), *(quick if a.quick else full)],
            capture_output=True,
            text=True,
            check=False,
        )
        print(proc.stdout.rstrip())
        if proc.returncode != 0:
            failed.append(script)
            last = proc.stderr.strip().splitlines()[-1:] or ["(no output)"]
            print(f"\n{script} exited {proc.returncode}: {last[0]}")
        print(f"\n({script}: {time.monotonic() - started:.0f} s)\n", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
