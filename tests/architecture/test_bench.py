"""The benchmark script keeps working (a tiny run; no timing is asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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


def test_tui_bench_runs_in_quick_mode(tmp_path: Path) -> None:
    """bench_tui.py end to end on a tiny home: every scenario reports, every row has a verdict."""
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bench_tui.py"),
            "--quick",
            "--sessions",
            "30",
            "--events-per-session",
            "20",
            "--startup-runs",
            "1",
            "--backlog-runs",
            "1",
            "--appends",
            "5",
            "--baseline-runs",
            "1",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "| start-up, ingested (600 events): spawn -> first screen: latest sessions + fleet totals" in out
    assert "|   spawn -> all 30 rows in the table" in out
    assert "| start-up, 600 events to ingest: spawn -> progress bar on screen" in out
    assert "|   ralph-ledger ingest on a copy of the same journals: spawn -> exit (median of 1)" in out
    assert "|   backlog load / ralph-ledger ingest (medians)" in out
    assert "append -> on screen, p50 (5 appends" in out
    assert "one at a time (5 appends 300-400 ms apart): p50 / p95" in out
    assert "| sessions table: rows held / lines rendered by a full repaint" in out
    assert "| baseline: python -c pass" in out
    assert "0 never shown" in out
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in out.splitlines() if line.startswith("| ")]
    verdicts = [row[3] for row in cells[1:] if row[2]]  # the rows with a target
    assert len(verdicts) == 9 and set(verdicts) <= {"PASS", "FAIL"}
    assert not list(tmp_path.glob("tui-home-*")), "the temporary homes are removed"


def test_dataset_bench_runs_on_a_tiny_dataset(tmp_path: Path) -> None:
    """bench_dataset.py end to end: three sources exported, both start-ups measured, one verdict."""
    args = ["--sessions", "30", "--events-per-session", "20", "--runs", "1", "--out", str(tmp_path)]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_dataset.py"), *args],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "600 events, 30 sessions; median of 1 start-ups each" in proc.stdout
    assert "| `ralph-tui --dataset DIR` (3 sources" in proc.stdout
    assert "first screen <= 2 s: PASS" in proc.stdout
    assert "| baseline: `ralph-tui` on one home of the same sessions (ingested)" in proc.stdout
    sources = sorted(p.name for p in tmp_path.glob("dataset-*/dataset/events/source=*"))
    assert sources == ["source=build-01", "source=build-02", "source=laptop"]


def test_one_command_runs_every_bench() -> None:
    """bench/run_all.py runs each bench script (a new one cannot be left out), with arguments the
    script's own parser accepts."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import run_all
    finally:
        sys.path.pop(0)
    scripts = {script for _, script, _, _ in run_all.RUNS}
    assert scripts == {p.name for p in (ROOT / "bench").glob("bench_*.py")}
    for _, script, full, quick in run_all.RUNS:
        for args in (full, quick):
            probe = subprocess.run(
                [sys.executable, str(ROOT / "bench" / script), *args, "--help"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert probe.returncode == 0 and "usage:" in probe.stdout, (script, args, probe.stderr[-300:])


def test_the_mcp_bench_prints_its_table_against_the_sdk_baseline() -> None:
    """bench/bench_mcp.py starts the installed server, times validate round trips and prints the table
    with the SDK's own echo server as the baseline."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_mcp.py"), "--starts", "1", "--calls", "5"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [
        [c.strip() for c in line.split("|")[1:-1]]
        for line in proc.stdout.splitlines()
        if line.startswith("| ")
    ]
    assert rows[0][:3] == ["measure", "baseline (SDK echo server)", "ralph-ledger mcp"]
    measures = [r[0] for r in rows[1:]]
    assert measures[0] == "start to first tools/list, median of 1"
    assert measures[1] == "round trip p50 of 5 (validate / echo)"
    assert [r[5] for r in rows[1:] if r[4]] and all(r[5] in ("PASS", "FAIL") for r in rows[1:] if r[4])
    assert all(r[2].endswith(" ms") for r in rows[1:])
