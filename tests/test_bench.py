"""The benchmark script keeps working (a tiny run; no timing is asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bench_runs_and_both_stores_agree(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bench_ledger.py"),
            "--sessions",
            "40",
            "--events-per-session",
            "60",
            "--repeat",
            "1",
            "--ingest-repeat",
            "1",
            "--appends",
            "20",
            "--sqlite-sample",
            "50",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| bulk load 2,400 events into a fresh DB" in proc.stdout
    assert "check: SQLite and DuckDB agree on the rows of sessions and all 4 detectors" in proc.stdout
