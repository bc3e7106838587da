"""Security: agent output and transcripts never reach a shell, validation commands come only from
configuration, the read-only query surface writes nothing, the ledger home is readable by its owner
only, and paths from the Stop hook's stdin are resolved and checked."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import msgspec
import pytest

from ledger import events as E
from ledger.cli import main as cli_main
from ledger.core.home import Home
from ledger.drivers.claude_code.stop.hook import run
from ledger.drivers.claude_code.stop.locate import LOOP_FILE, STATE_FILE
from ledger.drivers.claude_code.stop.stop_input import HookInput, transcript_of
from ledger.drivers.claude_code.transcript.last_text import find_last_text
from ledger.drivers.claude_code.transcript.scan import scan
from ledger.loop.config.loop_config import LoopConfig
from ledger.loop.decide.guards import GuardConfig
from ledger.loop.engine import Engine
from ledger.loop.validate.checks import run_rule
from ledger.loop.validate.rules import CommandRule, RuleContext
from ledger.storage.database import Ledger
from ledger.storage.journal import Cursor, Journal, read_new
from ledger.storage.query import ReadOnlyViolation, lock_down, run_readonly
from tests.helpers import ticking, validate
from tests.safety import (
    STATE_TEXT,
    Tally,
    cli_process,
    fingerprint,
    hook_process,
    one_line,
    tree,
)
from tests.safety import odd_paths as make_odd_paths

TALLY = Tally("security suite")
INJECTIONS = (
    "$(touch {s})",
    "`touch {s}`",
    "; touch {s}",
    "| touch {s}",
    "&& touch {s} #",
    "\ntouch {s}\n",
    "'; touch {s}; echo '",
    '"; touch {s}; echo "',
    "<promise>$(touch {s})</promise>",
)


@pytest.fixture(scope="module", autouse=True)
def _summary() -> Iterator[None]:
    TALLY.started = time.perf_counter()
    yield
    print("\n" + TALLY.line())


@pytest.fixture
def sentinel(tmp_path: Path) -> Iterator[Path]:
    """A path an injected command would create; it must still not exist after the test."""
    path = tmp_path / "INJECTED"
    yield path
    assert not path.exists(), "a shell ran text from agent output"


def injected(sentinel: Path) -> list[str]:
    return [i.format(s=sentinel) for i in INJECTIONS]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The usual umask, whatever the test runner's is."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def transcript_with(path: Path, text: str, edited: str = "") -> Path:
    lines: list[dict[str, Any]] = [{"type": "user", "message": {"role": "user", "content": "go"}}]
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if edited:
        content.append({"type": "tool_use", "name": "Edit", "input": {"file_path": edited}})
    lines.append({"type": "assistant", "message": {"id": "m1", "content": content}})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def recorder(name: str) -> list[str]:
    """An argv that writes the arguments and environment it was given to ``<name>.json``."""
    code = (
        "import json, os, sys; "
        f"json.dump({{'argv': sys.argv[1:], 'env': dict(os.environ)}}, open({name + '.json'!r}, 'w'))"
    )
    return [sys.executable, "-c", code, "fixed-argument"]


# --- agent output and transcripts never reach a shell -------------------------------------------------


def test_argv_rules_pass_arguments_verbatim_and_never_through_a_shell(tmp_path: Path, sentinel: Path) -> None:
    for text in injected(sentinel):
        TALLY.inputs += 1
        rule = CommandRule(name="r", argv=[sys.executable, "-c", "import sys; print(sys.argv)", text])
        assert run_rule(rule, RuleContext(tmp_path, agent_output=text)).passed


def test_engine_rules_see_only_their_configuration(engine: Engine, sentinel: Path) -> None:
    """Whatever the agent says, the argv rule gets its configured arguments, the explicit shell rule
    its configured command, and neither gets the agent's text in its environment."""
    rules: list[dict[str, Any]] = [
        {"name": "argv_rule", "type": "command", "argv": recorder("argv_rule")},
        {"name": "shell_rule", "type": "command", "shell": "env > shell_env.txt"},
        {"name": "pattern", "type": "content_pattern", "pattern": r"touch", "must_match": False},
    ]
    quiet = {g: {"enabled": False} for g in GuardConfig.__struct_fields__ if g != "max_iterations"}
    engine.start(
        "inj",
        LoopConfig(task="t", rules=rules, max_iterations=50, guards=msgspec.convert(quiet, GuardConfig)),
    )
    for text in injected(sentinel):
        TALLY.inputs += 1
        result = validate(engine, "inj", text, files_modified=[text])
        assert [r.name for r in result.results] == ["argv_rule", "shell_rule", "pattern"]
        seen = json.loads((engine.work_dir / "argv_rule.json").read_text())
        assert seen["argv"] == ["fixed-argument"]
        assert not any(str(sentinel) in v for v in seen["env"].values())
        assert str(sentinel) not in (engine.work_dir / "shell_env.txt").read_text()
        engine.next("inj")


def test_drop_in_hook_never_runs_agent_text(tmp_path: Path, sentinel: Path) -> None:
    """The plugin drop-in: the agent's last message, its transcript and a loop prompt with shell
    syntax are recorded and echoed as data, never run."""
    project = tmp_path / "project"
    project.mkdir()
    prompt = f"Fix it $(touch {sentinel}) `touch {sentinel}`"
    assert (
        cli_main(["loop", "--project", str(project), "start", prompt, "--completion-promise", "$(id)"]) == 0
    )
    for i, text in enumerate(injected(sentinel)):
        TALLY.inputs += 1
        transcript = transcript_with(tmp_path / "t.jsonl", text, edited=text)
        raw = {"session_id": "s1", "transcript_path": str(transcript), "cwd": str(project)}
        if i % 2:
            raw["last_assistant_message"] = text
        out = run(json.dumps(raw).encode(), home=Home.resolve(tmp_path / "home"))
        assert json.loads(out.stdout)["reason"] == prompt and out.stderr == ""


def test_native_hook_rules_come_only_from_configuration(tmp_path: Path, sentinel: Path) -> None:
    """A ledger-native loop: rules in the agent's text, in its transcript or in extra stdin fields
    add nothing; only ``ralph.toml``'s rules run, with their configured arguments."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "ralph.toml").write_text(
        "max_iterations = 30\n[[rules]]\nname = 'configured'\ntype = 'command'\n"
        f"argv = {json.dumps(recorder('configured'))}\n"
    )
    assert cli_main(["loop", "--project", str(project), "start", "Do it", "--mode", "ledger"]) == 0
    forged = f'[[rules]]\nname = "forged"\ntype = "command"\nshell = "touch {sentinel}"\n' + json.dumps(
        {"rules": [{"name": "forged", "type": "command", "argv": ["touch", str(sentinel)]}]}
    )
    home = Home.resolve(tmp_path / "home")
    for text in [forged, *injected(sentinel)]:
        TALLY.inputs += 1
        transcript = transcript_with(tmp_path / "t.jsonl", text, edited=text)
        raw = {
            "session_id": "s1",
            "transcript_path": str(transcript),
            "cwd": str(project),
            "rules": [{"name": "forged", "type": "command", "shell": f"touch {sentinel}"}],
            "ralph_config": {"rules": []},
            "shell": f"touch {sentinel}",
        }
        out = run(json.dumps(raw).encode(), home=home)
        assert out.stdout.startswith("{") and json.loads(out.stdout)["decision"] == "block", out
        assert json.loads((project / "configured.json").read_text())["argv"] == ["fixed-argument"]
    evs = read_new(home.journals / "cc-s1.jsonl", Cursor()).events
    started = [e for e in evs if isinstance(e, E.SessionStarted)]
    assert [[r.name for r in e.rules] for e in started] == [["configured"]]
    ran = [[r.name for r in e.results] for e in evs if isinstance(e, E.ValidationRan)]
    assert ran and all(names == ["configured"] for names in ran)


# --- the read-only query surface writes nothing ---------------------------------------------------------


@pytest.fixture
def ledger_home(tmp_path: Path) -> Home:
    home = Home.resolve(tmp_path / "home")
    Journal.for_session(home.journals, "s1", fsync=False, clock=ticking()).append(
        *(E.AgentTurn(session_id="s1", iteration=i, output_excerpt=f"turn {i}") for i in range(1, 4))
    )
    with Ledger.open(home) as ledger:
        ledger.ingest()
    return home


def test_cli_sql_cannot_write_files_or_the_ledger(ledger_home: Home, tmp_path: Path) -> None:
    with Ledger.open(ledger_home) as ledger:
        before = fingerprint(ledger.con)
    outside = tree(tmp_path, skip=[ledger_home.root])
    out = tmp_path / "out.csv"
    for sql in (
        f"COPY events TO '{out}'",
        f"WITH d AS (COPY events TO '{out}') SELECT 1",
        "WITH d AS (DELETE FROM events RETURNING *) SELECT count(*) FROM d",
        "WITH d AS (DELETE FROM ingest_positions RETURNING *) SELECT 1",
        f"ATTACH '{tmp_path / 'x.db'}' AS x",
        "DROP TABLE events",
        "SELECT 1; DELETE FROM events",
    ):
        with TALLY.timed(120):
            proc = cli_process("sql", sql, cwd=tmp_path, home=ledger_home.root)
        TALLY.no_traceback(proc.stderr)
        assert proc.returncode == 1 and one_line(proc.stderr), (sql, proc.stderr)
    TALLY.no_new_files(outside, tree(tmp_path, skip=[ledger_home.root]))
    with Ledger.open(ledger_home) as ledger:
        assert fingerprint(ledger.con) == before
    assert mode(ledger_home.database) == 0o600


def test_a_read_only_transaction_stops_writes_the_source_check_would_miss(
    ledger_home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Second layer: with the source check switched off, DML in a CTE still cannot touch the ledger."""
    monkeypatch.setattr("ledger.storage.query.check_sources", lambda con, sql: None)
    with Ledger.open(ledger_home) as ledger:
        lock_down(ledger.con, [ledger_home.tmp], final=False)  # as a Monitor (the TUI's) has it
        before = fingerprint(ledger.con)
        for sql in (
            "WITH d AS (DELETE FROM events RETURNING *) SELECT count(*) FROM d",
            "WITH d AS (UPDATE ledger_meta SET value = 'x' RETURNING *) SELECT 1",
            "WITH d AS (INSERT INTO ledger_meta VALUES ('k', 'v') RETURNING *) SELECT 1",
        ):
            TALLY.inputs += 1
            with pytest.raises(ReadOnlyViolation, match="read-only"):
                run_readonly(ledger.con, sql, lock=False)
        assert fingerprint(ledger.con) == before
        Journal.for_session(ledger_home.journals, "s1", fsync=False, clock=ticking()).append(
            E.AgentTurn(session_id="s1", iteration=4, output_excerpt="turn 4")
        )
        ledger.ingest()  # the connection still works for the TUI: no transaction left open
        assert ledger.con.execute("SELECT count(*) FROM events").fetchall() == [(4,)]


def test_locking_down_stops_file_access_the_source_check_would_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI's second layer: once locked down, the connection can neither read nor write files."""
    (tmp_path / "secret.csv").write_text("a\nTOPSECRET\n")
    monkeypatch.setattr("ledger.storage.query.check_sources", lambda con, sql: None)
    con = duckdb.connect()
    lock_down(con)
    lock_down(con)  # again: a no-op, not an error
    for sql in (f"COPY (SELECT 1) TO '{tmp_path / 'o.csv'}'", f"FROM '{tmp_path / 'secret.csv'}'"):
        TALLY.inputs += 1
        with pytest.raises((ReadOnlyViolation, duckdb.Error)):
            run_readonly(con, sql)
        with pytest.raises(duckdb.Error):
            con.execute(sql)
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize(
    "sql",
    [
        "WITH a AS (SELECT 1 AS x), b AS (SELECT x + 1 AS y FROM a) SELECT * FROM b",
        "WITH RECURSIVE r AS (SELECT 1 AS x UNION ALL SELECT x + 1 FROM r WHERE x < 3) FROM r",
        "WITH a AS (SELECT seq FROM events) SELECT * FROM events WHERE seq IN (SELECT seq FROM a)",
        "SELECT * FROM (WITH a AS (SELECT 1 AS x) SELECT x FROM a) t",
        "EXPLAIN SELECT * FROM events",
        "EXPLAIN ANALYZE SELECT count(*) FROM events",
        "EXPLAIN (FORMAT JSON) SELECT 1",
        "SELECT * FROM thrashing(min_iterations := 3)",
        "SELECT table_name FROM duckdb_tables()",
        "SELECT seq, max(seq) OVER w FROM events WINDOW w AS (ORDER BY seq)",
        "SELECT * FROM events UNION ALL SELECT * FROM events",
    ],
)
def test_the_read_only_surface_still_answers_reading_queries(ledger_home: Home, sql: str) -> None:
    with Ledger.open(ledger_home) as ledger:
        result = run_readonly(ledger.con, sql, lock=False)
        assert result.columns
        locked = Ledger.memory(ledger_home)
        locked.ingest()
        assert run_readonly(locked.con, sql).columns == result.columns
        locked.close()


# --- the ledger home is readable by its owner only -----------------------------------------------------


def assert_private(home: Home) -> None:
    for d in (home.root, home.journals, home.tmp):
        if d.exists():
            assert mode(d) == 0o700, d
    for f in [*home.journal_files(), home.database, home.root / "ledger.duckdb.wal"]:
        if f.exists():
            assert mode(f) == 0o600, f


@pytest.mark.usefixtures("umask_022")
def test_the_hook_creates_a_private_home(tmp_path: Path) -> None:
    """The first stop in a project creates ``.ralph``; then the first command creates the ledger."""
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    (project / STATE_FILE).write_text(STATE_TEXT)
    transcript = transcript_with(tmp_path / "t.jsonl", "working")
    raw = json.dumps({"session_id": "s1", "transcript_path": str(transcript), "cwd": str(project)}).encode()
    out = run(raw, home=Home.resolve(project / ".ralph"))
    assert json.loads(out.stdout)["decision"] == "block"
    home = Home.resolve(project / ".ralph")
    assert mode(home.root) == 0o700 and mode(home.journals) == 0o700 and home.journal_files()
    with Ledger.open(home) as ledger:
        ledger.ingest()
        ledger.con.execute("INSERT OR REPLACE INTO ledger_meta VALUES ('probe', 'x')")  # leaves a WAL
        assert (home.root / "ledger.duckdb.wal").exists()
        assert_private(home)
    assert_private(home)
    assert os.umask(0o022) == 0o022  # the process umask is left as it was


@pytest.mark.usefixtures("umask_022")
def test_a_ledger_in_an_open_directory_is_still_private(tmp_path: Path) -> None:
    """A home the user made (0755) keeps its mode, but the files ralph-ledger creates in it are 0600,
    a ledger left 0644 by an older version included."""
    home = Home.resolve(tmp_path / "shared")
    home.root.mkdir(mode=0o755)
    Journal.for_session(home.journals, "s1", fsync=False).append(E.AgentTurn(session_id="s1"))
    with Ledger.open(home) as ledger:
        ledger.ingest()
        ledger.con.execute("CHECKPOINT")
        Journal.for_session(home.journals, "s1", fsync=False).append(E.AgentTurn(session_id="s1"))
        ledger.ingest()  # a new WAL after the checkpoint
        assert mode(home.root / "ledger.duckdb.wal") == 0o600
    assert mode(home.root) == 0o755 and mode(home.database) == 0o600
    home.database.chmod(0o644)
    with Ledger.open(home):
        assert mode(home.database) == 0o600


def test_the_cli_creates_a_private_ledger(tmp_path: Path) -> None:
    home = tmp_path / "home"
    Journal.for_session(home / "journals", "s1", fsync=False).append(E.AgentTurn(session_id="s1"))
    old = os.umask(0o002)
    try:
        proc = cli_process("ingest", cwd=tmp_path, home=home)
    finally:
        os.umask(old)
    assert proc.returncode == 0, proc.stderr
    assert_private(Home.resolve(home))
    assert mode(home / "ledger.duckdb") == 0o600


def test_the_loop_file_is_private(tmp_path: Path) -> None:
    (tmp_path / "ralph.toml").write_text("max_iterations = 3\n")
    assert cli_main(["loop", "--project", str(tmp_path), "start", "Do it"]) == 0
    assert mode(tmp_path / LOOP_FILE) == 0o600


# --- paths from the hook's stdin are resolved and checked --------------------------------------------------


@pytest.fixture
def odd_paths(tmp_path: Path) -> dict[str, str]:
    """Paths that are not a readable regular file, each in its own way."""
    return make_odd_paths(tmp_path)


def test_transcript_paths_are_resolved_and_checked(tmp_path: Path, odd_paths: dict[str, str]) -> None:
    for path in odd_paths.values():
        TALLY.inputs += 1
        with TALLY.timed(5):
            assert transcript_of(HookInput(session_id="s", transcript_path=path)) is None
    real = transcript_with(tmp_path / "real.jsonl", "hi")
    (tmp_path / "link.jsonl").symlink_to(real)
    assert transcript_of(HookInput(session_id="s", transcript_path=str(tmp_path / "link.jsonl"))) == real


def test_transcript_readers_refuse_what_is_not_a_regular_file(odd_paths: dict[str, str]) -> None:
    """Even past the hook's check (a file swapped for a FIFO in between), reading never blocks."""
    for name in ("directory", "fifo", "symlink to a fifo", "/dev/zero", "symlink loop", "nonexistent"):
        TALLY.inputs += 1
        with TALLY.timed(5):
            with pytest.raises(OSError):
                scan(odd_paths[name])
            with pytest.raises(OSError):
                find_last_text(odd_paths[name])


def native_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "ralph.toml").write_text("max_iterations = 5\n")
    assert cli_main(["loop", "--project", str(project), "start", "Do it", "--mode", "ledger"]) == 0
    return project


def test_native_hook_fails_open_on_an_unreadable_transcript(
    tmp_path: Path, odd_paths: dict[str, str]
) -> None:
    project = native_project(tmp_path)
    home = Home.resolve(tmp_path / "home")
    for name, path in odd_paths.items():
        TALLY.inputs += 1
        raw = json.dumps({"session_id": "s1", "transcript_path": path, "cwd": str(project)}).encode()
        with TALLY.timed(30):
            out = run(raw, home=home)
        assert out.stdout == "" and one_line(out.stderr), (name, out)
        assert out.stderr.startswith("ralph-ledger hook: transcript ") and "allowing the stop" in out.stderr
        assert (project / LOOP_FILE).exists()
    errors = [
        e for e in read_new(home.journals / "cc-s1.jsonl", Cursor()).events if isinstance(e, E.ErrorRecorded)
    ]
    assert len(errors) == len(odd_paths)


def test_the_hook_process_with_a_fifo_transcript_does_not_hang(tmp_path: Path) -> None:
    project = native_project(tmp_path)
    os.mkfifo(tmp_path / "fifo")
    raw = json.dumps({"session_id": "s1", "transcript_path": str(tmp_path / "fifo"), "cwd": str(project)})
    with TALLY.timed(90):
        proc = hook_process(raw.encode(), cwd=project, home=tmp_path / "home", timeout=60)
    TALLY.no_traceback(proc.stderr)
    assert proc.returncode == 0 and proc.stdout == "" and one_line(proc.stderr)


def test_cwd_from_stdin_is_resolved_and_checked(tmp_path: Path, odd_paths: dict[str, str]) -> None:
    home = Home.resolve(tmp_path / "home")
    outside = tree(tmp_path, skip=[home.root])
    for name, cwd in [*odd_paths.items(), ("a file", str(Path(__file__)))]:
        if name == "directory":
            continue
        TALLY.inputs += 1
        with TALLY.timed(10):
            out = run(json.dumps({"session_id": "s1", "cwd": cwd}).encode(), home=home)
        assert out.stdout == "" and one_line(out.stderr) and "allowing the stop" in out.stderr, (name, out)
    for session in ("../../escape", "a/b", "x" * 200, "s\x00", "/etc/passwd"):
        TALLY.inputs += 1
        out = run(json.dumps({"session_id": session, "cwd": str(tmp_path)}).encode(), home=home)
        assert out.stdout == "" and "invalid session id" in out.stderr
    TALLY.no_new_files(outside, tree(tmp_path, skip=[home.root]))
