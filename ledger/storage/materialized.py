"""Views a ledger file keeps as tables (``MATERIALIZED``): ``materialized_<view>`` holds the rows
the view's one definition computes, each with the journal position it reflects (``last_seq``), and
the view reads the table. An ingest computes again the rows of the sessions it changed, last in its
own transaction; a file opened for writing under other definitions makes the tables again. In-memory
ledgers, Spark and Trino compute the views. The rules: docs/design/materialized-views.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from functools import cache
from typing import TYPE_CHECKING, Final

from ledger.storage.schema import SCHEMA_VERSION as EVENTS_VERSION
from ledger.storage.sql import Definition, definitions

if TYPE_CHECKING:
    import duckdb

MATERIALIZED: Final = ("sessions",)
"""The views a ledger file keeps as tables (each has a ``session_id`` column: its rows are a
session's)."""

FEW: Final = 4
"""Up to this many sessions are computed again one statement each (a filter on one session reaches
every part of a view; on several it does not): more, and the whole table is."""

_KEY: Final = "materialized"
"""The ``ledger_meta`` key holding the ``VERSION`` the tables were made under."""


def table(view: str) -> str:
    """The table that keeps ``view``'s rows."""
    return f"materialized_{view}"


@cache
def _definitions() -> dict[str, Definition]:
    return {d.name: d for d in definitions()}


@cache
def version() -> str:
    """A digest of every view's and detector's definition, the events table's layout and the
    views kept: tables made under another are made again."""
    text = EVENTS_VERSION + repr(MATERIALIZED) + "".join(d.kind + d.name + d.sql for d in definitions())
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def install(con: duckdb.DuckDBPyConnection, *, writable: bool) -> bool:
    """Point each view of ``MATERIALIZED`` at its table (the definitions are installed already).
    Writable, the tables are made first when missing or made under other definitions, and rows
    that do not reflect their journal's position are computed again. Read-only, tables that
    cannot be used leave the views as defined: False."""
    if writable:
        if _made_under(con) != version():
            _make(con)
        elif stale := _stale(con):
            _in_transaction(con, lambda: refresh(con, stale))
    elif _made_under(con) != version() or _stale(con):
        return False
    point(con)
    return True


def point(con: duckdb.DuckDBPyConnection) -> None:
    """Make each view of ``MATERIALIZED`` on ``con`` read its table (the views that read it too)."""
    for view in MATERIALIZED:
        con.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS SELECT * EXCLUDE (last_seq) FROM {table(view)}")


def refresh(con: duckdb.DuckDBPyConnection, sessions: Iterable[str] | None = None) -> None:
    """Compute again the kept rows of ``sessions`` (every session when None, or when they are more
    than ``FEW``) in the open transaction: a session without events loses its rows."""
    ids = None if sessions is None else sorted(set(sessions))
    if ids is not None and not ids:
        return
    for view in MATERIALIZED:
        rows = (
            f"SELECT v.*, p.last_seq FROM ({_definitions()[view].sql}\n) AS v "
            "LEFT JOIN ingest_positions AS p ON p.session_id = v.session_id"
        )
        if ids is None or len(ids) > FEW:
            con.execute(f"DELETE FROM {table(view)}")
            con.execute(f"INSERT INTO {table(view)} {rows}")
            continue
        for sid in ids:
            con.execute(f"DELETE FROM {table(view)} WHERE session_id = ?", [sid])
            con.execute(f"INSERT INTO {table(view)} {rows} WHERE v.session_id = ?", [sid])


def drop(con: duckdb.DuckDBPyConnection) -> None:
    """Drop the tables (the events they were computed from are dropped): the next writable open
    makes them again."""
    for view in MATERIALIZED:
        con.execute(f"DROP TABLE IF EXISTS {table(view)}")
    con.execute("DELETE FROM ledger_meta WHERE key = ?", [_KEY])


def _made_under(con: duckdb.DuckDBPyConnection) -> str | None:
    rows = con.execute("SELECT value FROM ledger_meta WHERE key = ?", [_KEY]).fetchall()
    if not rows:
        return None
    tables = {str(r[0]) for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    return str(rows[0][0]) if all(table(v) in tables for v in MATERIALIZED) else None


def _make(con: duckdb.DuckDBPyConnection) -> None:
    """Make every table under the current definitions, with every session's rows."""

    def make() -> None:
        drop(con)
        for view in MATERIALIZED:
            # the view's own columns and types (as defined: the definitions are installed), and the
            # position its rows reflect
            columns = f"SELECT *, CAST(NULL AS BIGINT) AS last_seq FROM {view} LIMIT 0"
            con.execute(f"CREATE TABLE {table(view)} AS {columns}")
        refresh(con)
        con.execute("INSERT OR REPLACE INTO ledger_meta VALUES (?, ?)", [_KEY, version()])

    _in_transaction(con, make)


def _stale(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The sessions whose kept rows do not reflect their journal's position (a position without
    rows, rows without a position or at another one)."""
    out: set[str] = set()
    for view in MATERIALIZED:
        rows = con.execute(
            "SELECT coalesce(p.session_id, m.session_id) FROM "
            "(SELECT session_id, last_seq FROM ingest_positions WHERE last_seq > 0) AS p "
            f"FULL JOIN (SELECT DISTINCT session_id, last_seq FROM {table(view)}) AS m "
            "ON m.session_id = p.session_id WHERE p.last_seq IS DISTINCT FROM m.last_seq"
        ).fetchall()
        out.update(str(r[0]) for r in rows)
    return sorted(out)


def _in_transaction(con: duckdb.DuckDBPyConnection, work: Callable[[], None]) -> None:
    con.execute("BEGIN TRANSACTION")
    try:
        work()
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
