"""The read-only query surface shared by the CLI's ``sql`` command and the TUI.

Only one SELECT (or EXPLAIN) statement is accepted, checked on DuckDB's own parse tree
(``json_serialize_sql``) before it runs: every query node must be a read (``READ_NODES``: a DELETE
or COPY hidden in a CTE is refused), every table a table or view of the ledger or a CTE in scope,
every table function a detector, a ``duckdb_*`` catalog function, ``range``/``generate_series`` or
``unnest`` (so ``read_csv('/etc/passwd')`` and ``glob('*')`` are refused). It runs in a read-only
transaction on a connection locked down by ``lock_down``, the one lockdown of every query path: no
extension installed or loaded, no file touched but in the folders its own ingest needs. Why:
docs/design/query-lockdown.md; what is refused, as a user sees it: docs/cli.md.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import duckdb

from ledger.core.errors import all_lines, one_line
from ledger.core.output import restore, utc, wrap

ALLOWED: Final = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
SAFE_TABLE_FUNCTIONS: Final = frozenset({"range", "generate_series", "unnest"})
READ_NODES: Final = frozenset({"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"})
"""The query nodes that only read; any other (``DELETE_QUERY_NODE``, ``COPY_QUERY_NODE``, ...) is refused."""
# EXPLAIN, then ANALYZE or an options list of words only: a list holding quotes or parentheses is
# left in place, so it is parsed (and refused) as part of the query.
_EXPLAIN: Final = re.compile(r"^\s*explain\s+(?:analyze\s+)?(?:\([\w\s,]*\)\s*)?", re.I)


class ReadOnlyViolation(Exception):
    """The query was refused or failed; the message is one line, ``detail`` the whole of it where
    there is more (DuckDB's hints under its first line: candidate names, the place in the query)."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail or message


_IN_EXTENSION: Final = re.compile(
    r'with name "?([\w.]+)"? is not in the catalog, but it exists in the (\w+) extension'
)
"""DuckDB's error for a function of an extension it may not install or load (``EXTENSIONS_OFF``)."""


def sql_error(exc: BaseException) -> ReadOnlyViolation:
    """A DuckDB error as the one line ``SQL error: ...``, with its whole message as the detail; a
    function of an extension as the refusal it is (DuckDB's hint, to install the extension or to
    switch auto-install on, cannot be followed here)."""
    found = _IN_EXTENSION.search(str(exc))
    if found is not None:
        return ReadOnlyViolation(
            f"refused: {found.group(1)}() is in DuckDB's {found.group(2)} extension, "
            "and queries here install and load no extension"
        )
    return ReadOnlyViolation(f"SQL error: {one_line(exc)}", f"SQL error: {all_lines(exc)}")


@dataclass(frozen=True, slots=True)
class QueryResult:
    """A read-only query's column names, column types (as text) and rows; ``truncated``: the query
    had more rows than were fetched."""

    columns: list[str]
    types: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool = False


def check_readonly(sql: str) -> str:
    """Return the single read-only statement in ``sql`` (without a closing ``;``) or raise."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise sql_error(exc) from None
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
    return statements[0].query.rstrip().rstrip(";")


EXTENSIONS_OFF: Final = (
    "SET autoinstall_known_extensions = false",
    "SET autoload_known_extensions = false",
    "SET allow_community_extensions = false",
)
"""No extension installed or loaded behind a query's back: DuckDB would otherwise fetch one (and
run its native code) for a function it does not know, ``excel_text`` or ``st_point``."""


def lock_down(con: duckdb.DuckDBPyConnection, allowed: Sequence[Path] = (), *, final: bool = True) -> None:
    """Lock down the database of ``con`` (every connection to it: the settings are global) before
    user SQL runs on it: no extension installed or loaded (``EXTENSIONS_OFF``), file access off
    for good but in the folders ``allowed`` (a monitor's own ingest: its scratch files, a
    dataset's Parquet files), and, ``final``, the configuration locked (a connection that keeps
    ingesting changes settings of its own, so a monitor's is not). Again: one look, a no-op
    (docs/design/query-lockdown.md)."""
    row = con.execute(
        "SELECT current_setting('lock_configuration'), current_setting('enable_external_access'),"
        " current_setting('autoinstall_known_extensions') OR current_setting('autoload_known_extensions')"
    ).fetchone()
    locked, external, extensions = row if row is not None else (False, True, True)
    if locked or (not external and not extensions and not final):
        return
    for statement in EXTENSIONS_OFF:
        con.execute(statement)
    if external:
        folders = ", ".join(_literal(str(p)) for p in dict.fromkeys(allowed))
        con.execute(f"SET allowed_directories = [{folders}]")
        con.execute("SET enable_external_access = false")
    if final:
        con.execute("SET lock_configuration = true")


def _literal(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def _scoped(tree: Any, ctes: frozenset[str] = frozenset()) -> Iterator[tuple[dict[str, Any], frozenset[str]]]:
    """Every JSON object in a parse tree, depth first, with the (lower-case) CTE names in scope there:
    a query's CTEs are seen by its body and by the CTEs after them, a recursive CTE by itself."""
    if isinstance(tree, list):
        for value in tree:
            yield from _scoped(value, ctes)
        return
    if not isinstance(tree, dict):
        return
    scope = set(ctes)
    cte_map = tree.get("cte_map")
    entries = cte_map.get("map") if isinstance(cte_map, dict) else None
    if isinstance(entries, list):
        for entry in entries:
            yield from _scoped(entry, frozenset(scope))
            if isinstance(entry, dict):
                scope.add(str(entry.get("key", "")).lower())
    elif cte_map is not None:
        yield from _scoped(cte_map, ctes)
    if tree.get("type") == "RECURSIVE_CTE_NODE":
        scope.add(str(tree.get("cte_name", "")).lower())
    inner = frozenset(scope)
    yield tree, inner
    for key, value in tree.items():
        if key != "cte_map":
            yield from _scoped(value, inner)


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
    try:
        _check_sources(con, sql)
    except RecursionError:
        raise ReadOnlyViolation("refused: the query is nested too deeply to be checked") from None


def _check_sources(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    inner = _EXPLAIN.sub("", sql, count=1)
    row = next(iter(con.execute("SELECT json_serialize_sql(?::VARCHAR)", [inner]).fetchall()), None)
    tree = json.loads(row[0]) if row else {"error": True}
    if tree.get("error"):
        message = str(tree.get("error_message", "cannot parse the query"))
        raise ReadOnlyViolation(f"SQL error: {one_line(message)}", f"SQL error: {all_lines(message)}")
    statements = tree.get("statements")
    if not isinstance(statements, list) or len(statements) != 1:
        raise ReadOnlyViolation("refused: expected one SELECT statement after EXPLAIN")
    tables, macros = _known_names(con)
    for node, ctes in _scoped(tree):
        kind = node.get("type")
        if isinstance(kind, str) and kind.endswith("_NODE") and kind not in READ_NODES:
            what = kind.removesuffix("_NODE").removesuffix("_QUERY").replace("_", " ")
            raise ReadOnlyViolation(
                f"refused: {what} inside a query would change the ledger or files; only SELECT is allowed"
            )
        if kind == "BASE_TABLE":
            name = str(node.get("table_name", ""))
            if name.lower() not in tables | ctes:
                refused = f"refused: {name!r} is not a table or view of the ledger"
                close = difflib.get_close_matches(name.lower(), sorted(tables | ctes), n=3)
                hint = f"\nDid you mean {' or '.join(repr(c) for c in close)}?" if close else ""
                raise ReadOnlyViolation(refused, refused + hint)
        elif kind == "TABLE_FUNCTION":
            fn = node.get("function", {})
            name = str(fn.get("function_name", "")) if isinstance(fn, dict) else ""
            low = name.lower()
            if not (low in macros or low in SAFE_TABLE_FUNCTIONS or low.startswith("duckdb_")):
                raise ReadOnlyViolation(
                    f"refused: table function {name}() is not a ledger detector (it could read files)"
                )


def run_readonly(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    *,
    lock: bool = True,
    allowed: Sequence[Path] = (),
    max_rows: int | None = None,
) -> QueryResult:
    """Check one read-only query and its sources, lock the connection down (``lock_down``: file
    access but in ``allowed``; ``lock``: the configuration too, which a monitor's connection, still
    ingesting, may not) and run it in a read-only transaction, fetching all rows, or at most
    ``max_rows``. Values come as ``ledger.core.output.fetch`` gives them (every DuckDB type,
    ``TIMESTAMPTZ`` as UTC); ``types`` are the query's own."""
    statement = check_readonly(sql)
    utc(con)
    lock_down(con, allowed, final=lock)
    check_sources(con, sql)
    try:
        con.execute("BEGIN TRANSACTION READ ONLY")
        try:
            if _EXPLAIN.match(statement):  # text only, and EXPLAIN ANALYZE must run once
                cur = con.execute(statement)
                columns = [d[0] for d in cur.description or []]
                types = [str(d[1]) for d in cur.description or []]
                rows = cur.fetchall() if max_rows is None else cur.fetchmany(max_rows + 1)
            else:
                rel = con.sql(statement)
                columns, types = list(rel.columns), [str(t) for t in rel.types]
                cur = con.execute(wrap(statement, rel))
                rows = restore(cur.fetchall() if max_rows is None else cur.fetchmany(max_rows + 1), rel.types)
        finally:
            con.execute("ROLLBACK")
    except duckdb.Error as exc:
        raise sql_error(exc) from None
    truncated = max_rows is not None and len(rows) > max_rows
    return QueryResult(columns, types, rows[:max_rows], truncated)
