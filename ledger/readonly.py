"""The read-only query surface shared by the CLI's ``sql`` command and the TUI.

Only one SELECT (or EXPLAIN) statement is accepted; anything that would
write (DDL, DML, COPY, ATTACH, SET, PRAGMA, ...) is refused before it runs.
Its sources are checked on DuckDB's own parse tree (``json_serialize_sql``):
every table it reads must be a table or view of the ledger (or a CTE of the
query), every table function a detector, a ``duckdb_*`` catalog function,
``range``/``generate_series`` or ``unnest``; so ``read_csv('/etc/passwd')``,
``'/etc/passwd'`` as a table and ``glob('*')`` are refused before they run.
The CLI (a process of its own) also switches file access off on its
connection; the TUI cannot (its connection keeps ingesting journals), so the
source check is what guards it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import duckdb

ALLOWED: Final = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
SAFE_TABLE_FUNCTIONS: Final = frozenset({"range", "generate_series", "unnest"})
_EXPLAIN: Final = re.compile(r"^\s*explain\s+(?:analyze\s+|\(.*?\)\s*)?", re.I | re.S)


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


def _nodes(tree: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object in a parse tree, depth first."""
    if isinstance(tree, dict):
        yield tree
        for value in tree.values():
            yield from _nodes(value)
    elif isinstance(tree, list):
        for value in tree:
            yield from _nodes(value)


def _known_names(con: duckdb.DuckDBPyConnection) -> tuple[set[str], set[str]]:
    """(table and view names, table macro names) of the connection's catalog, lower case."""
    tables = {
        str(r[0]).lower()
        for r in con.execute(
            "SELECT table_name FROM duckdb_tables() UNION SELECT view_name FROM duckdb_views()"
        ).fetchall()
    }
    macros = {
        str(r[0]).lower()
        for r in con.execute(
            "SELECT function_name FROM duckdb_functions() WHERE function_type = 'table_macro'"
        ).fetchall()
    }
    return tables, macros


def check_sources(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Refuse a query reading anything but the ledger's tables, views and detectors."""
    inner = _EXPLAIN.sub("", sql, count=1)
    row = next(iter(con.execute("SELECT json_serialize_sql(?::VARCHAR)", [inner]).fetchall()), None)
    tree = json.loads(row[0]) if row else {"error": True}
    if tree.get("error"):
        raise ReadOnlyViolation(f"SQL error: {tree.get('error_message', 'cannot parse the query')}")
    tables, macros = _known_names(con)
    ctes = {
        str(entry.get("key", "")).lower()
        for node in _nodes(tree)
        if isinstance(node.get("cte_map"), dict)
        for entry in node["cte_map"].get("map", [])
        if isinstance(entry, dict)
    }
    for node in _nodes(tree):
        kind = node.get("type")
        if kind == "BASE_TABLE":
            name = str(node.get("table_name", ""))
            if name.lower() not in tables | ctes:
                raise ReadOnlyViolation(f"refused: {name!r} is not a table or view of the ledger")
        elif kind == "TABLE_FUNCTION":
            fn = node.get("function", {})
            name = str(fn.get("function_name", "")) if isinstance(fn, dict) else ""
            low = name.lower()
            if not (low in macros or low in SAFE_TABLE_FUNCTIONS or low.startswith("duckdb_")):
                raise ReadOnlyViolation(
                    f"refused: table function {name}() is not a ledger detector (it could read files)"
                )


def run_readonly(con: duckdb.DuckDBPyConnection, sql: str, *, lock: bool = True) -> QueryResult:
    """Check one read-only query and its sources, lock the connection down (``lock``; see the
    module docstring for why the TUI does not) and run it, fetching all rows."""
    check_readonly(sql)
    check_sources(con, sql)
    if lock:
        lock_down(con)
    try:
        cur = con.execute(sql)
        desc = cur.description or []
        rows = cur.fetchall()
    except duckdb.Error as exc:
        raise ReadOnlyViolation(f"SQL error: {first_line(exc)}") from None
    return QueryResult([d[0] for d in desc], [str(d[1]) for d in desc], rows)
