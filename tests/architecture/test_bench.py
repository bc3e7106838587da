"""Every bench keeps working: each ``bench/bench_*.py`` runs its ``--smoke`` form (its smallest run, still
printing its whole table), found by globbing, so a new bench is tested the day it is added
(docs/design/architecture.md, "Tests and benches"). No time is asserted: the verdicts are the benches'."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
BENCHES = sorted(p.name for p in BENCH.glob("bench_*.py"))
HELPERS = {"tables.py", "run_all.py"}
"""The scripts of ``bench/`` that are not benches: the shared helpers and the one command running all."""
SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+$")


class Smoke(NamedTuple):
    """A bench's ``--smoke`` run: the process and the folder it worked in (``--out``, if it takes one)."""

    proc: subprocess.CompletedProcess[str]
    out: Path


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Smoke]:
    """Runs a bench's ``--smoke`` form once for the module (the tests of one bench share its run)."""
    runs: dict[str, Smoke] = {}

    def run(script: str) -> Smoke:
        if script not in runs:
            out = tmp_path_factory.mktemp(script.removesuffix(".py"))
            takes_out = '"--out"' in (BENCH / script).read_text()
            proc = subprocess.run(
                [sys.executable, str(BENCH / script), "--smoke", *(["--out", str(out)] if takes_out else [])],
                capture_output=True,
                text=True,
                timeout=300,
            )
            runs[script] = Smoke(proc, out)
        return runs[script]

    return run


def tables(stdout: str) -> list[list[list[str]]]:
    """The Markdown tables in ``stdout``: each a list of rows (header first), each row its cells."""
    lines = stdout.splitlines()
    return [
        [[c.strip() for c in row.split("|")[1:-1]] for row in [lines[i - 1], *rows]]
        for i, line in enumerate(lines)
        if i and SEPARATOR.match(line) and lines[i - 1].startswith("|")
        for rows in [list(itertools.takewhile(lambda r: r.startswith("|"), lines[i + 1 :]))]
    ]


def test_the_bench_folder_holds_benches_and_helpers_only() -> None:
    """A new script in ``bench/`` is a bench (``bench_*.py``, run below) or a named helper."""
    assert len(BENCHES) >= 7
    assert {p.name for p in BENCH.glob("*.py")} - set(BENCHES) == HELPERS


@pytest.mark.parametrize("script", BENCHES)
def test_every_bench_runs_its_smoke_form_and_prints_its_table(
    script: str, smoke: Callable[[str], Smoke]
) -> None:
    proc = smoke(script).proc
    assert proc.returncode == 0, f"{script} --smoke exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    found = tables(proc.stdout)
    assert found and all(len(t) >= 2 and len({len(r) for r in t}) == 1 for t in found), proc.stdout


def test_the_table_reader_finds_tables_and_only_them() -> None:
    text = "intro\n| a | b |\n|---|--:|\n| 1 | 2 |\n| 3 | 4 |\nnot a row\n| x |\n"
    assert tables(text) == [[["a", "b"], ["1", "2"], ["3", "4"]]]
    assert tables("| a | b |\n| 1 | 2 |\n") == [] and tables("no table\n") == []


def test_bench_runs_and_both_stores_agree(smoke: Callable[[str], Smoke]) -> None:
    proc = smoke("bench_ledger.py").proc
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| bulk load 2,400 events into a fresh DB" in proc.stdout
    assert "check: SQLite and DuckDB agree on the rows of sessions and all 4 detectors" in proc.stdout


def test_tui_bench_runs_in_quick_mode(smoke: Callable[[str], Smoke]) -> None:
    """bench_tui.py end to end on a tiny home: every scenario reports, every row has a verdict."""
    proc, out_dir = smoke("bench_tui.py")
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
    assert not list(out_dir.glob("tui-home-*")), "the temporary homes are removed"


def test_dataset_bench_runs_on_a_tiny_dataset(smoke: Callable[[str], Smoke]) -> None:
    """bench_dataset.py end to end: three sources exported, both start-ups measured, one verdict."""
    proc, out_dir = smoke("bench_dataset.py")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "600 events, 30 sessions; median of 1 start-ups each" in proc.stdout
    assert "| `ralph-tui --dataset DIR` (3 sources" in proc.stdout
    assert re.search(r"first screen <= 2 s: (PASS|FAIL) \|", proc.stdout)  # the verdict, not a timed test
    assert "| baseline: `ralph-tui` on one home of the same sessions (ingested)" in proc.stdout
    sources = sorted(p.name for p in out_dir.glob("dataset-*/dataset/events/source=*"))
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


def test_the_mcp_bench_prints_its_table_against_the_sdk_baseline(smoke: Callable[[str], Smoke]) -> None:
    """bench/bench_mcp.py starts the installed server, times validate round trips and prints the table
    with the SDK's own echo server as the baseline."""
    proc = smoke("bench_mcp.py").proc
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
