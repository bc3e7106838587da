"""``ralph-ledger`` end to end: real processes for exit codes and locks."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from ledger import events as E
from ledger.cli import main
from ledger.home import Home
from ledger.journal import Journal


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ledger.cli", *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_sessions_table(fixture_home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--home", str(fixture_home.root), "sessions"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["session_id", "status", "agent"]
    assert "(9 rows)" in out
    assert err.count("skipped bad line") == 6 and "torn.jsonl:3:" in err


def test_sessions_status_filter_and_json(fixture_home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--home", str(fixture_home.root), "sessions", "--status", "escalated", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert sorted(r["session_id"] for r in data) == ["circuit-breaker", "quality-regression"]


def test_show_session(fixture_home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--home", str(fixture_home.root), "show", "tdd-success"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("session tdd-success: complete, iteration 3/15")
    assert "(3 rows)" in out


def test_show_unknown_session(fixture_home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--home", str(fixture_home.root), "show", "nope"]) == 1
    err = capsys.readouterr().err
    assert "no session 'nope'" in err


def test_sql_csv(fixture_home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    q = "SELECT session_id, file, times FROM thrashing() ORDER BY 1"
    assert main(["--home", str(fixture_home.root), "sql", q, "--csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows == [["session_id", "file", "times"], ["thrashing", "src/config.py", "5"]]


@pytest.mark.parametrize(
    "query",
    [
        "DROP TABLE events",
        "INSERT INTO events (session_id) VALUES ('x')",
        "DELETE FROM events",
        "CREATE TABLE t AS SELECT 1",
        "COPY events TO '/tmp/ralph-ledger-leak.csv'",
        "ATTACH '/tmp/other.duckdb' AS other",
        "SELECT 1; DROP TABLE events",
        "SET threads = 1",
        "PRAGMA version",
    ],
)
def test_sql_refuses_writes(fixture_home: Home, capsys: pytest.CaptureFixture[str], query: str) -> None:
    assert main(["--home", str(fixture_home.root), "sql", query]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len([e for e in err if "skipped bad line" not in e]) == 1
    assert main(["--home", str(fixture_home.root), "sql", "SELECT count(*) AS n FROM events", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 161}]


def test_sql_cannot_read_files(fixture_home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--home", str(fixture_home.root), "sql", "SELECT * FROM read_csv('/etc/passwd')"]) == 1
    assert "table function read_csv() is not a ledger detector" in capsys.readouterr().err
    assert main(["--home", str(fixture_home.root), "sql", "SELECT * FROM '/etc/passwd'"]) == 1
    assert "'/etc/passwd' is not a table or view of the ledger" in capsys.readouterr().err


def test_sql_connection_is_also_locked_down(fixture_home: Home) -> None:
    from ledger.readonly import run_readonly
    from ledger.store import Ledger

    with Ledger.open(fixture_home) as ledger:
        run_readonly(ledger.con, "SELECT 1")  # the CLI's path: checked, then locked down
        with pytest.raises(duckdb.Error, match=r"disabled|Permission"):
            ledger.con.execute("SELECT * FROM read_csv('/etc/passwd')")
        with pytest.raises(duckdb.Error):
            ledger.con.execute("SET enable_external_access = true")


def test_sql_error_is_one_line(fixture_home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--home", str(fixture_home.root), "sql", "SELEC nonsense"]) == 1
    err = [e for e in capsys.readouterr().err.splitlines() if "skipped" not in e]
    assert len(err) == 1 and err[0].startswith("ralph-ledger: SQL error:")


@pytest.mark.parametrize(
    "argv",
    [
        ["--wait", "soon", "sessions"],
        ["--wait", "-1", "sessions"],
        ["sessions", "--status", "happy"],
        ["sessions", "--limit", "3"],
        ["sql"],
        ["show"],
        ["frobnicate"],
        ["sql", "SELECT 1", "--csv", "--json"],
    ],
)
def test_bad_usage_is_one_line_exit_2(argv: list[str], tmp_path: Path) -> None:
    proc = run("--home", str(tmp_path), *argv)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("ralph-ledger")


def test_help_for_every_command() -> None:
    for cmd in ["ingest", "rebuild", "sessions", "show", "sql", "export", "schema", "stats", "stop", "set"]:
        proc = run(cmd, "--help")
        assert proc.returncode == 0 and "usage: ralph-ledger" in proc.stdout


def test_ingest_and_rebuild(fixture_home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--home", str(fixture_home.root), "ingest"]) == 0
    assert "ingest: 161 events from 9 journals" in capsys.readouterr().out
    assert main(["--home", str(fixture_home.root), "ingest"]) == 0
    assert "ingest: 0 events" in capsys.readouterr().out
    assert main(["--home", str(fixture_home.root), "rebuild"]) == 0
    assert "rebuild: 161 events" in capsys.readouterr().out


def test_home_from_environment(
    fixture_home: Home, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RALPH_HOME", str(fixture_home.root))
    assert main(["sessions", "--csv"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 10


def test_schema_lists_views_and_detectors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    out = capsys.readouterr().out
    assert "view sessions" in out and "detector thrashing(session := NULL, min_iterations := 5)" in out
    assert "  consecutive_failures     BIGINT" in out


def test_export_parquet_round_trip(
    fixture_home: Home, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "pq"
    assert main(["--home", str(fixture_home.root), "export", "--parquet", str(dest)]) == 0
    assert "export: 161 events" in capsys.readouterr().out
    con = duckdb.connect()
    n = con.execute(
        f"SELECT count(*), count(DISTINCT day) FROM read_parquet('{dest}/events/*/*/*.parquet', "
        "hive_partitioning = true)"
    ).fetchone()
    assert n == (161, 3)


def test_locked_ledger_falls_back_to_journals(fixture_home: Home) -> None:
    fixture_home.ensure()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
            "print('ready', flush=True); time.sleep(60)",
            str(fixture_home.database),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        t0 = time.monotonic()
        proc = run("--home", str(fixture_home.root), "--wait", "0.2", "sessions", "--csv")
        assert time.monotonic() - t0 < 30
        assert proc.returncode == 0, proc.stderr
        assert len(proc.stdout.splitlines()) == 10
        notice = [line for line in proc.stderr.splitlines() if "in use by" in line]
        assert len(notice) == 1 and notice[0].startswith(f"ralph-ledger: ledger {fixture_home.database}")
        assert f"PID {holder.pid}" in notice[0] and "reading the journals instead" in notice[0]
        busy = run("--home", str(fixture_home.root), "--wait", "0", "ingest")
        assert busy.returncode == 1 and "Traceback" not in busy.stderr
        assert f"is in use by PID {holder.pid}" in busy.stderr
    finally:
        holder.kill()
        holder.wait()


def test_journal_writes_are_private(home: Home) -> None:
    j = Journal.for_session(home.journals, "private")
    j.append(E.SessionStarted(session_id="private"))
    assert j.path.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    "argv", [["stop", "bad/id"], ["set", "../x", "--max-iterations", "3"], ["show", "a b"]]
)
def test_bad_session_ids_are_one_line_errors(tmp_path: Path, argv: list[str]) -> None:
    proc = run("--home", str(tmp_path), *argv)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_usage_errors_of_other_commands_keep_exit_2_even_with_the_word_hook(tmp_path: Path) -> None:
    assert run("--home", str(tmp_path), "run", "--timeout", "x", "--", "mytool", "hook").returncode == 2
    assert run("--home", str(tmp_path), "hook", "nope").returncode == 0
