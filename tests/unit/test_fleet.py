"""The fleet-scale path: several homes exported into one Parquet dataset give the same answers as
one ledger over all their journals, through the SQL shipped next to the dataset (``docs/fleet.md``)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.dataset as pads
import pytest

from ledger import events as E
from ledger.cli import main
from ledger.core.home import Home
from ledger.loop.config.loop_config import LoopConfig
from ledger.loop.engine import Engine
from ledger.storage.database import Ledger
from ledger.storage.dialects import DIALECTS
from ledger.storage.export import portable_sql, views_bundle
from ledger.storage.journal import Journal
from ledger.storage.sql import definitions
from tests.helpers import flag_rule, validate

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_sessions"
DOC = ROOT / "docs" / "fleet.md"

# Each detector with its defaults, and with other arguments, so parameters reach the dataset too.
DETECTOR_CALLS = (
    "failure_streak()",
    "failure_streak(errors := TRUE)",
    "failure_streak(min_streak := 2)",
    "quality_regression()",
    "quality_regression(span := 2, min_drop := 0)",
    "thrashing()",
    "thrashing(min_iterations := 2)",
    "validation_stall()",
    "validation_stall(span := 2)",
)


def export(home: Home, dest: Path, *extra: str) -> int:
    """``ralph-ledger --home HOME export --parquet DEST ...``; its exit status."""
    return main(["--home", str(home.root), "export", "--parquet", str(dest), *extra])


def sample_home(root: Path) -> Home:
    """The recorded sample sessions as a home, every session id prefixed ``b-`` so that they do not
    collide with the hand-written fixture's (a torn or bad line is copied as it is)."""
    home = Home.resolve(root)
    home.ensure()
    for src in sorted(SAMPLES.glob("*.jsonl")):
        out = []
        for line in src.read_bytes().splitlines(keepends=True):
            try:
                event = json.loads(line)
            except ValueError:
                out.append(line)
                continue
            event["session_id"] = "b-" + event["session_id"]
            out.append(json.dumps(event).encode() + (b"\n" if line.endswith(b"\n") else b""))
        (home.journals / f"b-{src.name}").write_bytes(b"".join(out))
    return home


def engine_home(engine: Engine, work: Path) -> Home:
    """A home written by the engine: a circuit breaker, a completion, a manual stop, a raised limit."""
    cfg = LoopConfig(rules=[flag_rule()])
    engine.start("c-breaker", cfg)
    for n in range(3):
        validate(engine, "c-breaker", f"try {n}", files_modified=["src/app.py"])
        if n < 2:
            engine.next("c-breaker")
    engine.start("c-done", cfg)
    validate(engine, "c-done", "a failing test", files_modified=["tests/test_app.py"])
    engine.next("c-done")
    (work / "tests_pass.ok").touch()
    validate(engine, "c-done", "All green.\n<promise>COMPLETE</promise>", files_modified=["src/app.py"])
    engine.complete("c-done", "COMPLETE")
    engine.start("c-stopped", LoopConfig())
    engine.set_max_iterations("c-stopped", 30, "needs longer")
    engine.stop("c-stopped", "going another way")
    validate(engine, "c-stopped", "<promise>COMPLETE</promise>")
    return engine.home


TASKS_RUN = ROOT / "tests" / "fixtures" / "tasks" / "run-tasks-snapshots.jsonl"
"""A real ``run --tasks`` in a git project (a task done in two iterations, one skipped, one done):
task events and snapshots, for the ``tasks`` and ``changes`` views."""


def tasks_home(root: Path) -> Home:
    """A home holding ``TASKS_RUN``."""
    home = Home.resolve(root)
    home.ensure()
    shutil.copyfile(TASKS_RUN, home.journals / "t-tasks.jsonl")  # a journal is named for its session
    return home


def fleet_homes(fixture_home: Home, tmp_path: Path, engine: Engine, work: Path) -> dict[str, Home]:
    """Four homes, by source name: the hand-written fixture, the recorded samples, an engine's and a
    task-list loop's with snapshots."""
    return {
        "laptop": fixture_home,
        "ci-1": sample_home(tmp_path / "samples"),
        "ci-2": engine_home(engine, work),
        "ci-3": tasks_home(tmp_path / "tasks"),
    }


@pytest.fixture
def homes(fixture_home: Home, tmp_path: Path, engine: Engine, work: Path) -> dict[str, Home]:
    """The fleet's homes (``fleet_homes``)."""
    return fleet_homes(fixture_home, tmp_path, engine, work)


def rows(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names, and rows in a fixed order (sorted by their repr: some columns are lists or maps)."""
    cur = con.execute(sql)
    return [d[0] for d in cur.description or []], sorted(cur.fetchall(), key=repr)


def scalar(con: duckdb.DuckDBPyConnection, sql: str) -> Any:
    """The single value ``sql`` returns."""
    row = con.execute(sql).fetchone()
    assert row is not None
    return row[0]


def dataset(dest: Path, monkeypatch: pytest.MonkeyPatch) -> duckdb.DuckDBPyConnection:
    """A fresh DuckDB that knows only the dataset: the shipped ``views/*.sql`` run verbatim, in name
    order, from the dataset's directory (``00-events.sql`` reads ``events/*/*/*.parquet``)."""
    con = duckdb.connect(":memory:")
    monkeypatch.chdir(dest)
    for path in sorted((dest / "views").glob("*.sql")):
        con.execute(path.read_text(encoding="utf-8"))
    return con


def queries() -> Iterator[str]:
    """Every view, and every detector with a few argument sets."""
    for d in definitions():
        if d.kind == "view":
            yield f"SELECT * FROM {d.name}"
    for call in DETECTOR_CALLS:
        yield f"SELECT * FROM {call}"


def _events(home: Home) -> int:
    """How many events ``home``'s journals hold (read into a fresh in-memory ledger)."""
    with Ledger.memory(home) as ledger:
        return ledger.ingest().events


def test_several_homes_in_one_dataset_answer_like_one_ledger(
    homes: dict[str, Home], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = tmp_path / "fleet"
    for source, home in homes.items():
        assert export(home, dest, "--source", source) == 0
    assert sorted(p.name for p in (dest / "events").iterdir()) == [f"source={s}" for s in sorted(homes)]

    whole = Ledger.memory()
    whole.ingest([j for home in homes.values() for j in home.journal_files()])
    con = dataset(dest, monkeypatch)
    per_source = dict(con.execute("SELECT source, count(*) FROM events GROUP BY source").fetchall())
    assert per_source == {source: _events(home) for source, home in homes.items()}
    assert sum(per_source.values()) == scalar(whole.con, "SELECT count(*) FROM events")

    compared = 0
    for sql in queries():
        local, shipped = rows(whole.con, sql), rows(con, sql)
        assert shipped == local, sql
        compared += len(local[1])
    assert compared > 200
    # the fixture sessions exercise the views: every status and every detector has rows
    statuses = {r[0] for r in con.execute("SELECT DISTINCT status FROM sessions").fetchall()}
    assert statuses == {"running", "complete", "blocked", "escalated"}
    for call in (
        "failure_streak(min_streak := 1)",
        "quality_regression()",
        "thrashing()",
        "validation_stall()",
    ):
        assert scalar(con, f"SELECT count(*) FROM {call}") > 0, call

    # another Parquet reader, knowing only hive partitioning, sees the same rows and skips _export.json
    table = pads.dataset(dest / "events", format="parquet", partitioning="hive").to_table(
        columns=["session_id", "seq", "source"]
    )
    assert table.num_rows == sum(per_source.values())
    counts = table.group_by("source").aggregate([("seq", "count")]).to_pydict()
    assert dict(zip(counts["source"], counts["seq_count"], strict=True)) == per_source


def test_reexport_replaces_its_own_rows_and_leaves_other_sources_alone(
    fixture_home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = tmp_path / "fleet"
    other = sample_home(tmp_path / "samples")
    assert export(fixture_home, dest, "--source", "a") == 0
    assert export(other, dest, "--source", "b") == 0
    b_files = {p: p.stat().st_ino for p in (dest / "events" / "source=b").rglob("*")}
    a_files = sorted(p.relative_to(dest) for p in (dest / "events" / "source=a").rglob("*.parquet"))
    con = dataset(dest, monkeypatch)
    before = rows(con, "SELECT * FROM sessions")

    assert export(fixture_home, dest, "--source", "a") == 0
    assert sorted(p.relative_to(dest) for p in (dest / "events" / "source=a").rglob("*.parquet")) == a_files
    assert rows(con, "SELECT * FROM sessions") == before
    count = scalar(con, "SELECT count(*) FROM events")
    assert count == scalar(con, "SELECT count(DISTINCT (source, session_id, seq)) FROM events")
    assert count == 161 + _events(other)
    assert {p: p.stat().st_ino for p in (dest / "events" / "source=b").rglob("*")} == b_files
    assert sorted(p.name for p in (dest / ".staging").iterdir()) == ["a.lock", "b.lock"]  # nothing left over

    # new events in the home: the next export carries them, once
    Journal.for_session(fixture_home.journals, "late", fsync=False).append(
        E.SessionStarted(session_id="late", task="a late one", agent="me")
    )
    assert export(fixture_home, dest, "--source", "a") == 0
    got = con.execute("SELECT count(*) FROM events WHERE source = 'a'").fetchone()
    assert got == (162,)
    assert con.execute("SELECT status FROM sessions WHERE session_id = 'late'").fetchall() == [("running",)]


def test_an_empty_home_exports_an_empty_but_readable_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = Home.resolve(tmp_path / "empty")
    empty.ensure()  # a home that does not exist is an error (issue 10, 4.4), not an empty one
    dest = tmp_path / "fleet"
    assert export(empty, dest, "--source", "idle") == 0
    assert "export: 0 events of 0 sessions" in capsys.readouterr().out
    assert len(list((dest / "events" / "source=idle").glob("day=*/*.parquet"))) == 1
    con = dataset(dest, monkeypatch)
    for sql in queries():
        assert rows(con, sql)[1] == [], sql
    names = [d[0] for d in con.execute("SELECT * FROM events").description or []]
    assert names[:4] == ["session_id", "seq", "ts", "iteration"] and {"source", "day"} <= set(names)
    # and beside a home with events, it adds nothing
    full = Home.resolve(tmp_path / "full")
    shutil.copytree(ROOT / "tests" / "fixtures" / "home" / "journals", full.journals)
    assert export(full, dest, "--source", "busy") == 0
    assert con.execute("SELECT source, count(*) FROM events GROUP BY ALL").fetchall() == [("busy", 161)]


def test_sources_of_other_homes_are_not_replaced(
    fixture_home: Home, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "fleet"
    other = Home.resolve(tmp_path / "other")
    other.ensure()
    assert export(fixture_home, dest, "--source", "box") == 0
    capsys.readouterr()
    assert export(other, dest, "--source", "box") == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert f"{dest}/events/source=box holds the export of" in err and f"{fixture_home.root}" in err
    assert "--source NAME" in err and "--force" in err
    assert export(other, dest, "--source", "box", "--force") == 0
    assert "export: 0 events" in capsys.readouterr().out


def test_shared_session_ids_are_reported(
    fixture_home: Home, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "fleet"
    twin = Home.resolve(tmp_path / "twin")
    shutil.copytree(fixture_home.journals, twin.journals)
    assert export(fixture_home, dest, "--source", "one") == 0
    assert "session id" not in capsys.readouterr().err
    assert export(twin, dest, "--source", "two") == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "session id" in line]
    assert len(err) == 1
    assert "9 session ids of source two are also in source one" in err[0]


@pytest.mark.parametrize(
    ("setup", "args", "code", "expected"),
    [
        ("file", [], 1, "export destination {dest} is not a directory, expected a directory"),
        ("old-layout", [], 1, "holds {dest}/events/day=2026-01-05, expected only source=NAME folders"),
        ("foreign", [], 1, "{dest}/events/source=x has no readable _export.json"),
        ("none", ["--source", "../up"], 2, "--source: source name '../up': expected 1-128 letters"),
        ("none", ["--source", ".hidden"], 2, "not starting with '.'"),
    ],
)
def test_export_errors_are_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    setup: str,
    args: list[str],
    code: int,
    expected: str,
) -> None:
    dest = tmp_path / "fleet"
    if setup == "file":
        dest.write_text("not a dataset")
    elif setup == "old-layout":
        (dest / "events" / "day=2026-01-05").mkdir(parents=True)
    elif setup == "foreign":
        (dest / "events" / "source=x" / "day=2026-01-05").mkdir(parents=True)
    home = Home.resolve(tmp_path / "home")
    home.ensure()
    assert export(home, dest, *(args or ["--source", "x"])) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected.format(dest=dest) in err[0], err


def test_schema_portable_prints_what_export_ships(
    fixture_home: Home, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["schema", "--portable"]) == 0
    printed = capsys.readouterr().out
    dest = tmp_path / "fleet"
    assert export(fixture_home, dest, "--source", "x") == 0
    shipped = sorted((dest / "views").glob("*.sql"))
    assert [p.name for p in shipped] == [name for name, _ in views_bundle()]
    assert printed == "\n".join(p.read_text(encoding="utf-8") for p in shipped)
    # one statement per definition, generated from its file: the rule text is carried over whole
    for d in definitions():
        assert sum(d.sql in p.read_text(encoding="utf-8") for p in shipped) == 1, d.name
    # each engine's bundle in views/<dialect>/, DuckDB's also in views/ itself (where it always was)
    capsys.readouterr()
    for dialect in DIALECTS:
        assert main(["schema", "--portable", "--dialect", dialect]) == 0
        printed = capsys.readouterr().out
        files = sorted((dest / "views" / dialect).glob("*.sql"))
        assert [p.name for p in files] == [name for name, _ in views_bundle(dialect)]
        assert printed == "\n".join(p.read_text(encoding="utf-8") for p in files)
    assert [p.read_bytes() for p in sorted((dest / "views" / "duckdb").glob("*.sql"))] == [
        p.read_bytes() for p in shipped
    ]
    assert main(["schema", "--dialect", "spark"]) == 0  # a dialect alone implies --portable
    assert capsys.readouterr().out == portable_sql("spark")
    # a stale file of an older bundle is removed on the next export
    (dest / "views" / "99-gone.sql").write_text("SELECT 1;\n")
    (dest / "views" / "spark" / "99-gone.sql").write_text("SELECT 1;\n")
    assert export(fixture_home, dest, "--source", "x") == 0
    assert not (dest / "views" / "99-gone.sql").exists()
    assert not (dest / "views" / "spark" / "99-gone.sql").exists()


# -- one definition, every engine ----------------------------------------------------------------------

# DuckDB constructs that sqlglot does not translate (or translates wrongly) for Spark or Trino: each
# was rewritten once in the definitions, and stays out of them. Label (as in the table of
# docs/fleet.md) -> how to find it in a definition's SQL (comments stripped).
UNPORTABLE = {
    "[x FOR x IN list]": r"\[[^\]]*\bFOR\b",
    "list_bool_or(list)": r"\blist_bool_or\(",
    "len(list)": r"\blen\(",
    "any_value(x)": r"\bany_value\(",
    "list(x ORDER BY y)": r"\blist\([^()]*\bORDER BY\b",
    "GROUP BY ALL": r"\bGROUP BY ALL\b",
    "ASOF LEFT JOIN": r"\bASOF\b",
    "WINDOW w / OVER (w ROWS ...)": r"\bWINDOW\s+\w+\s+AS\b|OVER\s+\(?\s*\w+\s+ROWS\b",
    "epoch_us(ts)": r"\bepoch(?:_\w+)?\(",
    "HUGEINT": r"\bHUGEINT\b",
    "list[i].field on a possibly empty list, unguarded": r"\)\[\w+\]\.(?![^\n]*\bEND\b)",
}


def doc_rewrites() -> set[str]:
    """The constructs the table in docs/fleet.md says were rewritten."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("### Rewritten once in the definitions", 1)[1].split("\n#", 1)[0]
    return {
        line.split("|")[1].strip()[1:-1].replace("\\|", "|")
        for line in section.splitlines()
        if line.startswith("| `")
    }


def test_definitions_hold_no_construct_that_does_not_transpile_and_the_docs_list_them() -> None:
    for d in definitions():
        code = re.sub(r"--(?!\s*params:).*", "", d.sql)
        found = [label for label, pattern in UNPORTABLE.items() if re.search(pattern, code, re.M)]
        assert found == [], d.name
    assert doc_rewrites() == set(UNPORTABLE)


@pytest.mark.parametrize("dialect", ["spark", "trino"])
def test_every_generated_statement_parses_back_in_its_dialect_with_known_functions(dialect: str) -> None:
    """What sqlglot writes for an engine reads back in that engine's grammar, calling only functions
    that grammar knows (no DuckDB name passed through), and no DuckDB-only names remain."""
    import sqlglot
    from sqlglot import exp

    for name, text in views_bundle(dialect):
        statements = [s for s in sqlglot.parse(text, read=dialect) if s is not None]
        assert statements, name
        for statement in statements:
            unknown = {f.name for f in statement.find_all(exp.Anonymous)}
            assert unknown == set(), (name, unknown)
        code = re.sub(r"--.*|/\*.*?\*/", "", text, flags=re.S)
        duckdb_only = r"\b(?:LIST_\w+|ARG_M(?:AX|IN)|EPOCH\w*|STRUCT_PACK|HUGEINT)\b"
        assert not re.search(duckdb_only, code, re.I), name
        if dialect == "trino" and not name.startswith("00-"):  # a ROW's fields are named, by a cast
            assert not re.search(r"(?<!CAST\()\bROW\(", code), name
