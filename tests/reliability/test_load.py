"""Concurrency and load: many Stop hook processes for many sessions in one ledger home while a
reader ingests and queries (the driver is ``tests/load_suite.py``, shared with
``bench/bench_load.py``). Quick form by default; ``pytest --long`` runs 16 processes x 20 sessions
x 100 stops. ``-s`` shows the figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger import events as E
from ledger.core.home import Home
from ledger.storage.database import Ledger
from ledger.storage.journal import Cursor, journal_path, read_new
from tests.load_suite import (
    LONG,
    QUICK,
    ROOT,
    LoadParams,
    LoadReport,
    all_sessions,
    check_answer,
    check_journal,
    expected_tags,
    plugin_session,
    run_load,
    seq_faults,
    stop_in_process,
)


def expected_events(params: LoadParams) -> int:
    """Events every session of a run appends, all stops together."""
    return sum(
        len(expected_tags(k, stops, ending))
        for _, stops, ending in all_sessions(params)
        for k in range(1, stops + 1)
    )


def assert_clean(report: LoadReport, params: LoadParams) -> None:
    """Every stop answered and recorded, seqs whole, the reader never failed."""
    assert report.problems == []
    assert report.stops == params.total_stops
    assert len(report.real_ms) == params.real_sessions * params.real_stops
    assert report.sessions == params.procs * params.sessions + params.real_sessions
    assert report.events == expected_events(params)
    assert (report.journal_gaps, report.journal_duplicates) == (0, 0)
    assert (report.ledger_gaps, report.ledger_duplicates) == (0, 0)
    assert report.reader.errors == [] and report.reader.lock_errors == 0
    assert report.reader.seq_faults == [] and report.reader.bad_lines == []
    assert report.live_ingests >= 2, "the reader ingested while the hooks appended"
    assert report.cli_reads == params.cli_reads


def test_many_hooks_and_a_reader_share_one_home(tmp_path: Path, long_form: bool) -> None:
    """Worker processes' stops, real hook processes and ``ralph-ledger sessions`` against a reader
    that opens, ingests, queries and closes the ledger file in a loop."""
    params = LONG if long_form else QUICK
    report = run_load(params, tmp_path)
    print(f"\n{report.summary()}")
    assert_clean(report, params)


def test_hooks_never_need_the_ledger_file_a_monitor_holds(tmp_path: Path) -> None:
    """A ``Monitor`` keeps the DuckDB file for the whole run: the hooks go on regardless, and
    ``ralph-ledger sessions`` answers from the journals instead, saying so in one line."""
    params = LoadParams(
        procs=2, sessions=4, stops=30, real_sessions=2, real_stops=3, cli_reads=1, reader="monitor"
    )
    report = run_load(params, tmp_path)
    print(f"\n{report.summary()}")
    assert_clean(report, params)
    assert not report.reader.in_memory
    assert report.cli_fallbacks == params.cli_reads


def test_a_ledger_native_stop_while_another_process_holds_the_ledger(tmp_path: Path) -> None:
    """The engine-driven mode reads its facts through an in-memory ledger, never the held file."""
    home = Home.resolve(tmp_path / "home")
    project = tmp_path / "project"
    project.mkdir()
    (project / "ralph.toml").write_text("")
    env = {
        **{k: v for k, v in os.environ.items() if k != "CLAUDE_CODE_SESSION_ID"},
        "RALPH_HOME": str(home.root),
    }
    ralph = [sys.executable, "-m", "ledger.cli"]
    start = [*ralph, "loop", "start", "Fix it", "--completion-promise", "DONE"]
    subprocess.run(start, cwd=project, env=env, check=True, capture_output=True, timeout=60)
    transcript = project / "transcript.jsonl"
    with Ledger.open(home):
        held = subprocess.run(
            [*ralph, "--wait", "0", "ingest"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert held.returncode != 0 and "is in use by" in held.stderr  # the file really is held
        answers = []
        for k, text in enumerate(["Still failing.", "All green. <promise>DONE</promise>"], 1):
            line = {
                "type": "assistant",
                "message": {"id": f"m{k}", "role": "assistant", "content": [{"type": "text", "text": text}]},
            }
            with transcript.open("a") as f:
                f.write(json.dumps({"type": "user", "message": {"content": f"go {k}"}}) + "\n")
                f.write(json.dumps(line) + "\n")
            stdin = {"session_id": "native", "transcript_path": str(transcript), "cwd": str(project)}
            proc = subprocess.run(
                [*ralph, "hook", "claude-code"],
                input=json.dumps(stdin),
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert (proc.returncode, proc.stderr) == (0, "")
            answers.append(proc.stdout)
    assert json.loads(answers[0])["decision"] == "block"
    assert answers[1].startswith("✅ Ralph loop complete after 2 iterations")
    events = read_new(journal_path(home.journals, "cc-native"), Cursor()).events
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert isinstance(events[-1], E.SessionCompleted)


def test_the_checks_catch_a_missing_or_repeated_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The suite's verdicts can fail: a stop's answer or a journal that is not what the stop wrote."""
    home = Home.resolve(tmp_path / "home")
    monkeypatch.setenv("RALPH_HOME", str(home.root))
    session = plugin_session(tmp_path / "projects", "probe", "max", 3)
    assert [stop_in_process(session, k)[1] for k in (1, 2, 3)] == ["", "", ""]
    events = read_new(journal_path(home.journals, "cc-probe"), Cursor()).events
    assert check_journal(events, "probe", 3, "max") == ""
    assert seq_faults([e.seq for e in events]) == (0, 0)
    assert check_journal(events[:4] + events[5:], "probe", 3, "max") != ""  # a stop's decision lost
    assert check_journal([*events[:5], events[4], *events[5:]], "probe", 3, "max") != ""
    assert seq_faults([1, 2, 4, 4]) == (1, 1)
    assert check_answer("", "ralph-ledger hook: boom; allowing the stop\n", 0, 3, 3, "max") != ""
    assert check_answer("", "", 0, 1, 3, "max") != ""  # a stop that should have blocked
    assert check_answer("🛑 Ralph loop: Max iterations (3) reached.\n", "", 0, 3, 3, "max") == ""


def test_the_load_bench_prints_its_table(tmp_path: Path) -> None:
    """``bench/bench_load.py`` on a tiny run: the table, the summary line, exit code 0."""
    small = ["--procs", "2", "--sessions", "2", "--stops", "3", "--real-sessions", "1", "--real-stops", "2"]
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bench_load.py"),
            *small,
            "--cli-reads",
            "1",
            "--keep",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "| stops (in-process hook calls) | 12 in " in proc.stdout
    assert "| seq gaps / duplicates: ledger | 0 / 0 |" in proc.stdout
    assert "load suite: 2 procs x 2 sessions x 3 stops = 12 stops in" in proc.stdout
    assert "2 real hook processes" in proc.stdout and "0 gaps, 0 duplicates" in proc.stdout
