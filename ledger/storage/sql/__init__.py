"""Projections (``views/*.sql``) and detectors (``detectors/*.sql``).

Each rule is one file, loaded the same way for the engine, the CLI and the
TUI. A view file holds one SELECT, installed as ``CREATE TEMP VIEW <stem>``.
A detector file holds one SELECT whose first line declares its parameters
(``-- params: session := NULL, window := 3``), installed as a table macro
``<stem>(...)`` so thresholds are arguments and ``session`` narrows it to one
session's events.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Final

import duckdb

PARAMS_RE: Final = re.compile(r"^--\s*params:\s*(.*)$", re.M)


@dataclass(frozen=True, slots=True)
class Definition:
    """One shipped SQL file: a view, or a detector (a table macro taking ``params``)."""

    kind: str  # "view" or "detector"
    name: str
    sql: str
    params: str = ""

    def ddl(self, *, temp: bool = True) -> str:
        """The statement installing it: ``CREATE OR REPLACE TEMP VIEW`` or ``TEMP MACRO ... AS TABLE``
        (without ``TEMP`` when ``temp`` is false: a view or macro stored in the database)."""
        scope = "TEMP " if temp else ""
        if self.kind == "view":
            return f"CREATE OR REPLACE {scope}VIEW {self.name} AS\n{self.sql}"
        return f"CREATE OR REPLACE {scope}MACRO {self.name}({self.params}) AS TABLE\n{self.sql}"


@cache
def definitions() -> tuple[Definition, ...]:
    """Every view and detector shipped with the package, sorted by name."""
    out: list[Definition] = []
    root = resources.files(__package__)
    for kind, folder in (("detector", "detectors"), ("view", "views")):
        for entry in sorted(root.joinpath(folder).iterdir(), key=lambda e: e.name):
            if not entry.name.endswith(".sql"):
                continue
            text = entry.read_text(encoding="utf-8")
            m = PARAMS_RE.search(text)
            params = m.group(1).strip() if m else ""
            out.append(Definition(kind, entry.name[:-4], text.strip().rstrip(";"), params))
    return tuple(out)


READS_RE: Final = re.compile(r"\b(?:FROM|JOIN)\s+(\w+)", re.IGNORECASE)
"""The names a definition reads from (``install_order``)."""

CHAIN_BREAKS: Final = (
    "CREATE OR REPLACE TEMP VIEW chain_breaks AS SELECT session_id, chain_break FROM ingest_positions "
    "WHERE chain_break <> ''"
)
"""The sessions whose journal's hash chain the ingest found broken (``sessions.chain_break``)."""
NO_CHAIN_BREAKS: Final = (
    "CREATE OR REPLACE TEMP VIEW chain_breaks AS "
    "SELECT CAST(NULL AS VARCHAR) AS session_id, CAST(NULL AS VARCHAR) AS chain_break WHERE 1 = 0"
)
"""The same where no journal was read (a connection without ``ingest_positions``): none."""


def load_definitions(con: duckdb.DuckDBPyConnection) -> list[Definition]:
    """Install all views and macros and return them in the order they were installed; a
    definition may use ones installed later in name order, so failures are retried until
    nothing more succeeds. ``chain_breaks`` goes first (``CHAIN_BREAKS``)."""
    try:
        con.execute(CHAIN_BREAKS)
    except duckdb.CatalogException:
        con.execute(NO_CHAIN_BREAKS)
    pending = list(definitions())
    installed: list[Definition] = []
    while pending:
        failed: list[tuple[Definition, duckdb.Error]] = []
        for d in pending:
            try:
                con.execute(d.ddl())
            except duckdb.Error as exc:
                failed.append((d, exc))
            else:
                installed.append(d)
        if len(failed) == len(pending):
            first, error = failed[0]
            raise RuntimeError(f"{first.kind} {first.name}.sql does not load: {error}")
        pending = [d for d, _ in failed]
    return installed


@cache
def install_order() -> tuple[Definition, ...]:
    """Every definition, each after the ones it reads (``FROM name`` / ``JOIN name``): DuckDB binds
    a table macro only when it runs, so its own install order may put a detector before a view it
    reads, which Spark and Trino refuse (``thrashing`` before ``changes``)."""
    from ledger.storage.prices import MODEL_PRICES_TABLE
    from ledger.storage.schema import create_events_sql

    con = duckdb.connect(":memory:")
    try:
        con.execute(create_events_sql())
        con.execute(MODEL_PRICES_TABLE)
        loaded = load_definitions(con)
    finally:
        con.close()
    names = {d.name for d in loaded}
    reads = {d.name: set(READS_RE.findall(re.sub(r"--[^\n]*", "", d.sql))) & names - {d.name} for d in loaded}
    ordered: list[Definition] = []
    placed: set[str] = set()
    while len(ordered) < len(loaded):
        d = next((d for d in loaded if d.name not in placed and reads[d.name] <= placed), None)
        if d is None:  # a cycle: DuckDB installed them, so keep its order for the rest
            d = next(d for d in loaded if d.name not in placed)
        ordered.append(d)
        placed.add(d.name)
    return tuple(ordered)
