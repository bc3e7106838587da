"""``ralph-ledger`` end to end: real processes for exit codes and locks."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import events as E
from ledger.cli import ledger_commands, main
from ledger.core.home import Home
from ledger.storage.database import Ledger
from ledger.storage.journal import Journal


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ledger.cli", *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_sessions_table(fixture_home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--home", str(fixture_home.root), "sessions"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["session_id", "status", "paused", "agent"]
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
    from ledger.storage.database import Ledger
    from ledger.storage.query import run_readonly

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


# -- every DuckDB type, in every format (issue 10, 4.1) ------------------------------------------------

Case = tuple[str, str, Any]
"""(DuckDB type, SQL literal, the value expected in JSON: text, number, a datetime for a timestamp)."""

_ORACLE = duckdb.connect()


def _duckdb_text(literal: str) -> str:
    """DuckDB's own text of a value: how an INTERVAL or a BLOB is expected to read."""
    row = _ORACLE.execute(f"SELECT CAST({literal} AS VARCHAR)").fetchone()
    assert row is not None
    return str(row[0])


def _real_expected(literal: str) -> Any:
    """A REAL as DuckDB writes it (``0.1``, not the double ``0.10000000149011612``), as JSON holds it."""
    shown = _duckdb_text(literal)
    special = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
    return special.get(shown, float(shown))


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _scalars() -> st.SearchStrategy[Case]:
    offsets = st.integers(-14 * 60, 14 * 60).map(lambda m: timezone(timedelta(minutes=m)))
    datetimes = st.datetimes(datetime(2, 1, 1), datetime(9998, 12, 31))  # in range in any zone
    infinite = st.sampled_from(["infinity", "-infinity"])
    return st.one_of(
        st.integers(-(2**63), 2**63 - 1).map(lambda n: ("BIGINT", f"({n})::BIGINT", n)),
        st.integers(-(2**127) + 1, 2**127 - 1).map(lambda n: ("HUGEINT", f"({n})::HUGEINT", n)),
        st.floats().map(
            lambda x: (
                "DOUBLE",
                f"'{x!r}'::DOUBLE",
                "NaN" if x != x else ("Infinity" if x > 0 else "-Infinity") if abs(x) == float("inf") else x,
            )
        ),
        st.floats(width=32).map(lambda x: ("REAL", f"'{x!r}'::REAL", _real_expected(f"'{x!r}'::REAL"))),
        st.decimals(min_value=-(10**14), max_value=10**14, places=3, allow_nan=False).map(
            lambda d: ("DECIMAL(18,3)", f"'{d}'::DECIMAL(18,3)", d)
        ),
        st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), max_size=12).map(
            lambda s: ("VARCHAR", _quote(s), s)
        ),
        st.booleans().map(lambda b: ("BOOLEAN", str(b).upper(), b)),
        st.uuids().map(lambda u: ("UUID", f"'{u}'::UUID", str(u))),
        st.dates().map(lambda d: ("DATE", f"DATE '{d.isoformat()}'", d.isoformat())),
        infinite.map(lambda i: ("DATE", f"'{i}'::DATE", i)),
        infinite.map(lambda i: ("TIMESTAMP", f"'{i}'::TIMESTAMP", i)),
        infinite.map(lambda i: ("TIMESTAMPTZ", f"'{i}'::TIMESTAMPTZ", i)),
        st.sampled_from([datetime.min, datetime.max]).map(
            lambda d: ("TIMESTAMP", f"TIMESTAMP '{d.isoformat(sep=' ')}'", d.replace(tzinfo=UTC))
        ),
        st.times().map(lambda t: ("TIME", f"TIME '{t.isoformat()}'", t.isoformat())),
        datetimes.map(lambda d: ("TIMESTAMP", f"TIMESTAMP '{d.isoformat(sep=' ')}'", d.replace(tzinfo=UTC))),
        st.tuples(datetimes, offsets).map(
            lambda p: (
                "TIMESTAMPTZ",
                f"TIMESTAMPTZ '{p[0].replace(tzinfo=p[1]).isoformat(sep=' ')}'",
                p[0].replace(tzinfo=p[1]),
            )
        ),
        st.tuples(st.integers(-1000, 1000), st.integers(-1000, 1000), st.integers(-(10**12), 10**12)).map(
            lambda p: (
                "INTERVAL",
                f"(to_months({p[0]}) + to_days({p[1]}) + to_microseconds({p[2]}))",
                _duckdb_text(f"to_months({p[0]}) + to_days({p[1]}) + to_microseconds({p[2]})"),
            )
        ),
        st.binary(max_size=8).map(
            lambda b: ("BLOB", f"from_hex('{b.hex()}')", _duckdb_text(f"from_hex('{b.hex()}')"))
        ),
        st.sampled_from(["INTEGER", "VARCHAR", "DOUBLE", "TIMESTAMPTZ"]).map(
            lambda t: (t, f"CAST(NULL AS {t})", None)
        ),
    )


def _of_one_type(cases: list[Case]) -> list[Case]:
    """The cases of the first case's type (a list's items, a map's values share one)."""
    return [c for c in cases if c[0] == cases[0][0]]


def _nested(inner: st.SearchStrategy[Case]) -> st.SearchStrategy[Case]:
    def as_list(cases: list[Case]) -> Case:
        cases = _of_one_type(cases)
        return (
            f"{cases[0][0]}[]",
            f"[{', '.join(c[1] for c in cases)}]::{cases[0][0]}[]",
            [c[2] for c in cases],
        )

    def as_array(cases: list[Case]) -> Case:
        cases = _of_one_type(cases)
        kind = f"{cases[0][0]}[{len(cases)}]"
        return (kind, f"[{', '.join(c[1] for c in cases)}]::{kind}", [c[2] for c in cases])

    def as_struct(cases: list[Case]) -> Case:
        kind = "STRUCT(" + ", ".join(f"f{i} {c[0]}" for i, c in enumerate(cases)) + ")"
        literal = "{" + ", ".join(f"'f{i}': {c[1]}" for i, c in enumerate(cases)) + "}"
        return (kind, f"{literal}::{kind}", {f"f{i}": c[2] for i, c in enumerate(cases)})

    def as_map(cases: list[Case]) -> Case:
        cases = _of_one_type(cases)
        kind = f"MAP(VARCHAR, {cases[0][0]})"
        literal = "MAP {" + ", ".join(f"'k{i}': {c[1]}" for i, c in enumerate(cases)) + "}"
        return (kind, f"{literal}::{kind}", {f"k{i}": c[2] for i, c in enumerate(cases)})

    many = st.lists(inner, min_size=1, max_size=3)
    return st.one_of(many.map(as_list), many.map(as_array), many.map(as_struct), many.map(as_map))


VALUES = st.recursive(_scalars(), _nested, max_leaves=6)


def _same(got: Any, expected: Any) -> bool:
    """Whether a JSON value (floats parsed as Decimal) is the value expected."""
    if isinstance(expected, datetime):
        if not isinstance(got, str):
            return False
        shown = datetime.fromisoformat(got)
        return shown.utcoffset() == timedelta(0) and shown == expected
    if isinstance(expected, bool) or expected is None:
        return got is expected
    if isinstance(expected, float):
        return isinstance(got, Decimal | int) and float(got) == expected
    if isinstance(expected, Decimal | int):
        return isinstance(got, Decimal | int) and not isinstance(got, bool) and Decimal(got) == expected
    if isinstance(expected, list):
        return isinstance(got, list) and len(got) == len(expected) and all(map(_same, got, expected))
    if isinstance(expected, dict):
        return (
            isinstance(got, dict)
            and got.keys() == expected.keys()
            and all(_same(got[k], expected[k]) for k in expected)
        )
    return bool(got == expected)


def _run(home: Path, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--home", str(home), *argv])
    return code, out.getvalue(), err.getvalue()


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class _KeptOpen(Ledger):
    """An in-memory ledger that ``with`` does not close: one for every example (opening one loads
    the views, 0.2 s)."""

    def close(self) -> None:
        """Keep the connection open."""


@pytest.fixture(scope="module")
def value_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A home whose ``sql`` runs on one in-memory ledger kept open."""
    home = Home.resolve(tmp_path_factory.mktemp("values"))
    home.ensure()
    kept = _KeptOpen(duckdb.connect(":memory:"), None)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ledger_commands, "open_current", lambda home, wait: kept)
        yield home.root
    kept.con.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=VALUES)
def test_sql_renders_every_duckdb_type_in_every_format(value_home: Path, case: Case) -> None:
    """``ralph-ledger sql "SELECT <value>"``: the table shows one row, CSV one field, and JSON is
    RFC 8259 (no bare NaN) holding the value: numbers exact, timestamps with their zone (UTC)."""
    kind, literal, expected = case
    query = f"SELECT {literal} AS v"
    code, out, err = _run(value_home, "sql", query, "--json")
    assert code == 0, err
    [row] = json.loads(out, parse_float=Decimal, parse_constant=_refuse_constant)
    assert _same(row["v"], expected), (kind, literal, row["v"])

    code, out, err = _run(value_home, "sql", query, "--csv")
    assert code == 0, err
    header, [field] = list(csv.reader(io.StringIO(out)))
    assert header == ["v"]
    if expected is None:
        assert field == ""
    elif isinstance(row["v"], dict | list):
        assert json.loads(field, parse_float=Decimal) == row["v"]
    elif isinstance(row["v"], bool):
        assert field == str(row["v"]).lower()
    elif isinstance(row["v"], Decimal | int):
        assert Decimal(field) == Decimal(row["v"])
    else:
        assert field == row["v"]

    code, out, err = _run(value_home, "sql", query)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "v" and lines[-1] == "(1 row)" and len(lines) == 4


@pytest.mark.parametrize(
    ("literal", "expected"),
    [
        ("MAP {[1]: 'x', [2, 3]: 'y'}", {"[1]": "x", "[2,3]": "y"}),
        ("MAP {{'a': 1}: 2}", {'{"a":1}': 2}),
        ("MAP {[TIMESTAMPTZ '2024-01-01 02:00:00+02']: 1}", {'["2024-01-01T00:00:00+00:00"]': 1}),
        ("MAP {[1]: MAP {[2]: 0.5::REAL}}", {"[1]": {"[2]": 0.5}}),
        ("[MAP {[1]: 'x'}]", [{"[1]": "x"}]),
        ("MAP {}::MAP(INTEGER[], INTEGER)", {}),
        ("NULL::MAP(INTEGER[], INTEGER)", None),
    ],
)
def test_a_map_with_nested_keys_is_keyed_by_their_json_text(
    value_home: Path, literal: str, expected: Any
) -> None:
    """A MAP whose keys are lists or structs (which DuckDB gives Python as ``{"key": [...], "value":
    [...]}``) is one JSON object keyed by each key's JSON text, as a MAP of scalar keys is, in every
    format; timestamps in keys carry their zone."""
    code, out, err = _run(value_home, "sql", f"SELECT {literal} AS v", "--json")
    assert code == 0, err
    assert json.loads(out) == [{"v": expected}]
    code, out, err = _run(value_home, "sql", f"SELECT {literal} AS v", "--csv")
    assert code == 0, err
    [field] = list(csv.reader(io.StringIO(out)))[1]
    assert (json.loads(field) if field else None) == expected


@pytest.mark.parametrize("names", [["a", "a"], ["a", "a", "a_1"], ["a_1", "a", "a"], ["x", "y"]])
def test_json_keeps_every_column_of_a_repeated_name(value_home: Path, names: list[str]) -> None:
    """``--json`` names a repeated column as DuckDB does in a subquery (``a``, ``a_1``, ...): no
    column's value is lost to a later one of the same name."""
    select = ", ".join(f'{i} AS "{name}"' for i, name in enumerate(names))
    code, out, err = _run(value_home, "sql", f"SELECT {select}", "--json")
    assert code == 0, err
    [row] = json.loads(out)
    assert list(row) == _ORACLE.sql(f"SELECT * FROM (SELECT {select})").columns
    assert list(row.values()) == list(range(len(names)))


@pytest.mark.parametrize(
    ("argv", "program"),
    [
        (["/venv/bin/python3.11", "/venv/bin/ralph-tui", "--home", "/x"], "ralph-tui"),
        (
            ["/venv/bin/python3", "-u", "/venv/bin/ralph-ledger", "--home", "/x", "--wait", "3", "sql", "q"],
            "ralph-ledger sql",
        ),
        (["/venv/bin/ralph-ledger", "ingest"], "ralph-ledger ingest"),
        (["python", "-m", "ledger.cli", "stats"], "ralph-ledger stats"),
        (["python", "-X", "dev", "-m", "pytest", "-q"], "python -m pytest"),
        (["/usr/bin/duckdb", "ledger.duckdb"], "duckdb"),
        ([], ""),
    ],
)
def test_program_of_names_the_program_as_a_user_does(argv: list[str], program: str) -> None:
    """The lock message names the holder's program, not its interpreter's cut path."""
    from ledger.storage.ledger_file import program_of

    assert program_of(argv) == program


def test_one_line_is_the_first_printable_line_of_an_error() -> None:
    from ledger.core.errors import one_line

    assert one_line(ValueError("\n  first\tline \nsecond")) == "first\\tline"
    assert one_line(KeyError()) == "KeyError"
    assert one_line("x" * 10, limit=5) == "xxxx…"
    assert one_line("bell\x07") == "bell\\x07"


def test_a_table_cell_stays_on_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Line and record separators in a value (\\x1e, \\u2028, \\r) never break a table row."""
    assert (
        main(["--home", str(tmp_path), "sql", "SELECT 'a' || chr(30) || 'b' || chr(8232) || 'c\rd' AS v"])
        == 0
    )
    assert capsys.readouterr().out.splitlines() == ["v", "-" * 16, "a\\x1eb\\u2028c\\rd", "(1 row)"]


def test_error_text_has_one_home() -> None:
    """Every error shown to a user is worded by ``ledger.core.errors.one_line`` / ``printable``: no module
    of ledger/ or tui/ takes a first line or escapes characters on its own."""
    root = Path(__file__).resolve().parents[2]
    idioms = ("splitlines()[0]", "repr(c)[1:-1]", "def _one_line(exc", "def first_line(", "def _first_line(")
    found = [
        f"{path.relative_to(root)}: {idiom}"
        for folder in ("ledger", "tui")
        for path in sorted((root / folder).rglob("*.py"))
        if path.name != "errors.py"
        for idiom in idioms
        if idiom in path.read_text()
    ]
    assert found == []


def test_one_listing_of_journals(tmp_path: Path) -> None:
    """A home, the monitor and the TUI's replay list the same journals of a folder: its ``*.jsonl``
    files, hidden ones too, never a folder named like one."""
    from ledger.core.home import journals_in
    from ledger.monitor import Monitor
    from tui.main import journal_files

    home = Home.resolve(tmp_path / "home")
    home.ensure()
    for name in ("b.jsonl", "a.jsonl", ".early.jsonl", "notes.txt", "a.jsonl.bak"):
        (home.journals / name).write_text("")
    (home.journals / "dir.jsonl").mkdir()
    expected = [home.journals / n for n in (".early.jsonl", "a.jsonl", "b.jsonl")]
    assert journals_in(home.journals) == home.journal_files() == expected
    assert journal_files([home.journals]) == expected
    monitor = Monitor([home.journals])
    try:
        assert monitor.journal_files() == expected
    finally:
        monitor.close()


def _ended_each_way(home: Home) -> None:
    """Sessions of agent ``bot``: one running, one complete, one complete after a human override,
    one blocked, one escalated."""
    endings: dict[str, list[E.Event]] = {
        "run": [],
        "done": [E.SessionCompleted(session_id="done", iteration=1)],
        "nudged": [
            E.Override(session_id="nudged", iteration=1, kind="max_iterations", max_iterations=9),
            E.SessionCompleted(session_id="nudged", iteration=1),
        ],
        "stuck": [E.SessionBlocked(session_id="stuck", iteration=1)],
        "lost": [E.SessionEscalated(session_id="lost", iteration=1)],
    }
    for sid, ending in endings.items():
        journal = Journal.for_session(home.journals, sid, fsync=False)
        journal.append(
            E.SessionStarted(session_id=sid, agent="bot"), E.IterationStarted(session_id=sid, iteration=1)
        )
        journal.append(*ending)


def test_session_statuses_are_one_literal(home: Home) -> None:
    """The sessions view gives exactly ``SessionStatus``'s values; ``--status`` offers them and the
    TUI's symbols and sort order know each of them."""
    from ledger.cli.common import CliError
    from ledger.cli.parser import build_parser
    from ledger.events import ENDING_STATUS, SESSION_STATUSES
    from tui.format import STATUS
    from tui.screens.sessions_screen import STATUS_ORDER

    _ended_each_way(home)
    with Ledger.open(home) as ledger:
        ledger.ingest()
        got = dict(ledger.con.execute("SELECT session_id, status FROM sessions").fetchall())
    assert sorted(set(got.values())) == sorted(SESSION_STATUSES)
    assert got == {
        "run": "running",
        "done": "complete",
        "nudged": "complete",
        "stuck": "blocked",
        "lost": "escalated",
    }
    assert sorted(ENDING_STATUS.values()) == sorted(set(SESSION_STATUSES) - {"running"})
    with pytest.raises(
        CliError, match=r"'happy' \(choose from 'running', 'complete', 'blocked', 'escalated'\)"
    ):
        build_parser().parse_args(["sessions", "--status", "happy"])
    for value in SESSION_STATUSES:
        assert build_parser().parse_args(["sessions", "--status", value]).status == value
    assert set(STATUS) == set(STATUS_ORDER) == set(SESSION_STATUSES)


def monitor_columns(home: Home) -> list[str]:
    """The columns of ``loop_metrics``."""
    with Ledger.open(home) as ledger:
        return [d[0] for d in ledger.con.execute("SELECT * FROM loop_metrics LIMIT 0").description or []]


def test_completion_rate_has_one_meaning(home: Home) -> None:
    """``completion_rate`` is complete / ended in loop_metrics, in the monitor's fleet line and in the
    example query that shows it; the rate of loops no human overrode has its own name."""
    from ledger.monitor import EXAMPLE_QUERIES, Monitor

    _ended_each_way(home)
    monitor = Monitor([home.root])
    try:
        list(monitor.load())
        fleet = monitor.fleet()
        [metrics] = monitor.query("SELECT * FROM loop_metrics").rows
        example = monitor.query(EXAMPLE_QUERIES["completion rate by agent"])
    finally:
        monitor.close()
    assert fleet.completion_rate is not None and fleet.completion_rate == pytest.approx(2 / 4)
    values = dict(zip(monitor_columns(home), metrics, strict=True))
    assert values["completion_rate"] == pytest.approx(fleet.completion_rate)
    assert values["autonomous_completion_rate"] == pytest.approx(1 / 4)
    shown = dict(zip(example.columns, example.rows[0], strict=True))
    assert shown["completion_pct"] == pytest.approx(100 * fleet.completion_rate)
    assert shown["autonomous_pct"] == pytest.approx(25.0)


def test_the_engine_names_a_missing_session_in_the_users_words(home: Home) -> None:
    """Not the API's "call start first": where the session was looked for and how to list them."""
    from ledger.loop.engine import Engine
    from ledger.loop.engine_types import EngineError

    with pytest.raises(EngineError) as info:
        Engine(home).set_max_iterations("nope", 3, "")
    assert str(info.value) == f"no session 'nope' in {home.root}; `ralph-ledger sessions` lists them"


def test_every_byte_of_a_blob_reads_as_duckdb_writes_it() -> None:
    """Each of the 256 bytes, as a one-byte BLOB, renders as DuckDB's own text of it (printable
    ASCII as is, but the quotes and the backslash, and every other byte, as ``\\xHH``)."""
    import duckdb

    from ledger.core.output import blob_text

    con = duckdb.connect()
    theirs = con.execute(
        "SELECT list(from_hex(lpad(to_hex(b), 2, '0'))::VARCHAR ORDER BY b) FROM range(256) t(b)"
    ).fetchall()[0][0]
    assert [blob_text(bytes([b])) for b in range(256)] == theirs
