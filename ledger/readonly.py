"""The read-only query surface shared by the CLI's ``sql`` command and the TUI.

Only one SELECT (or EXPLAIN) statement is accepted; anything that would
write (DDL, DML, COPY, ATTACH, SET, PRAGMA, ...) is refused before it runs,
and file access is switched off on the connection, so a query cannot read or
write files outside the ledger either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import duckdb

ALLOWED: Final = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}


class ReadOnlyViolation(Exception):
    """The query was refused or failed; the message is one line."""


@dataclass(frozen=True, slots=True)
class QueryResult:
    """A read-only query's column names, column types (as text) and rows."""

    columns: list[str]
    types: list[str]
    rows: list[tuple[Any, ...]]


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, or its class name if the message is empty."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def check_readonly(sql: str) -> str:
    """Return the single read-only statement in ``sql`` or raise."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise ReadOnlyViolation(f"SQL error: {first_line(exc)}") from None
    if not statements:
        raise ReadOnlyViolation("empty query: expected one SELECT statement")
    if len(statements) > 1:
        raise ReadOnlyViolation(f"{len(statements)} statements given: expected exactly one SELECT")
    kind = statements[0].type
    if kind not in ALLOWED:
        name = kind.name if hasattr(kind, "name") else str(kind)
        raise ReadOnlyViolation(
            f"refused: {name} statements would change the ledger or files; only SELECT queries are allowed"
        )
    return sql


def lock_down(con: duckdb.DuckDBPyConnection) -> None:
    """Switch off file access for good on this connection's database."""
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def run_readonly(con: duckdb.DuckDBPyConnection, sql: str) -> QueryResult:
    """Check, lock down and run one read-only query, fetching all rows."""
    check_readonly(sql)
    lock_down(con)
    try:
        cur = con.execute(sql)
        desc = cur.description or []
        rows = cur.fetchall()
    except duckdb.Error as exc:
        raise ReadOnlyViolation(f"SQL error: {first_line(exc)}") from None
    return QueryResult([d[0] for d in desc], [str(d[1]) for d in desc], rows)
