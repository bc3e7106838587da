"""The DuckDB ledger: opening it (locks, fallback, rebuild), and its views.

The ``events`` table is derived from the vocabulary (``ledger.schema``),
filled by ``ledger.ingest``, and read through the views and detectors of
``ledger.sql``. The file can be deleted at any time: it is rebuilt from the
journals.
"""

from __future__ import annotations

import hashlib
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import duckdb

from ledger.errors import LedgerError, LedgerLocked
from ledger.home import Home
from ledger.ingest import IngestReport, ingest
from ledger.schema import SCHEMA_VERSION as EVENTS_VERSION
from ledger.schema import create_events_sql
from ledger.sql import load_definitions

TABLES: Final = (
    "CREATE TABLE IF NOT EXISTS ledger_meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
    """CREATE TABLE IF NOT EXISTS ingest_positions (
         journal VARCHAR PRIMARY KEY, session_id VARCHAR, byte_offset BIGINT,
         last_seq BIGINT, head VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS ingest_errors (
         journal VARCHAR, line_no BIGINT, reason VARCHAR, excerpt VARCHAR)""",
)
# A ledger file of another layout is emptied and re-ingested on open.
SCHEMA_VERSION: Final = hashlib.sha256((EVENTS_VERSION + "".join(TABLES)).encode()).hexdigest()[:16]


def describe_holder(message: str) -> str:
    """'PID 123 (python3 -m ...)' from a DuckDB lock error, as far as known."""
    m = re.search(r"PID (\d+)", message)
    if not m:
        return "another process"
    pid = m.group(1)
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        cmd = ""
    return f"PID {pid}" + (f" ({cmd[:80]})" if cmd else "")


def connect(path: Path | None, *, read_only: bool = False, wait: float = 0.0) -> duckdb.DuckDBPyConnection:
    """Open a DuckDB file (or memory), waiting up to ``wait`` seconds for a lock."""
    if path is None:
        return duckdb.connect(":memory:")
    deadline = time.monotonic() + wait
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise LedgerError(f"cannot open ledger {path}: {str(exc).splitlines()[0]}") from None
            if time.monotonic() >= deadline:
                raise LedgerLocked(path, describe_holder(str(exc))) from None
            time.sleep(0.05)
        except duckdb.Error as exc:
            raise LedgerError(
                f"cannot open ledger {path}: {str(exc).splitlines()[0]} "
                "(run 'ralph-ledger rebuild' to recreate it from the journals)"
            ) from None


class Ledger:
    """A DuckDB ledger over one home's journals (or in memory)."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        home: Home | None,
        *,
        writable: bool = True,
        path: Path | None = None,
    ) -> None:
        self.con = con
        self.home = home
        self.path = path
        self.writable = writable
        # Rows are always read back ordered by (session_id, seq), so DuckDB may
        # insert in parallel without keeping file order: ~1.6x faster ingest.
        con.execute("SET preserve_insertion_order = false")
        if writable:
            self._ensure_tables()
        load_definitions(self.con)

    # -- opening -----------------------------------------------------------
    @classmethod
    def memory(cls, home: Home | None = None) -> Ledger:
        """A new, empty in-memory ledger; ``ingest`` reads ``home``'s journals if given."""
        return cls(connect(None), home)

    @classmethod
    def open(
        cls, home: Home, *, read_only: bool = False, wait: float = 0.0, fallback: bool = False
    ) -> Ledger:
        """Open ``home``'s ledger file; if another process holds it, wait up to
        ``wait`` seconds, then either raise ``LedgerLocked`` or (``fallback``)
        build an in-memory ledger from the journals, saying so on stderr."""
        if read_only and not home.database.exists():
            raise LedgerError(f"no ledger at {home.database} yet (run 'ralph-ledger ingest')")
        try:
            home.ensure()
            con = connect(home.database, read_only=read_only, wait=wait)
        except LedgerLocked as exc:
            if not fallback:
                raise
            print(f"ralph-ledger: {exc}; reading the journals instead", file=sys.stderr)
            mem = cls.memory(home)
            mem.ingest()
            return mem
        return cls(con, home, writable=not read_only, path=home.database)

    def close(self) -> None:
        """Close the DuckDB connection."""
        self.con.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema ------------------------------------------------------------
    def _ensure_tables(self) -> None:
        self.con.execute(TABLES[0])
        rows = self.con.execute("SELECT value FROM ledger_meta WHERE key = 'schema_version'").fetchall()
        row = rows[0] if rows else None
        if row is not None and row[0] != SCHEMA_VERSION:
            for table in ("events", "ingest_positions", "ingest_errors"):
                self.con.execute(f"DROP TABLE IF EXISTS {table}")
        for ddl in TABLES[1:]:
            self.con.execute(ddl)
        self.con.execute(create_events_sql())
        self.con.execute("INSERT OR REPLACE INTO ledger_meta VALUES ('schema_version', ?)", [SCHEMA_VERSION])

    # -- ingest ------------------------------------------------------------
    def ingest(self, journals: Sequence[Path] | None = None, *, live: bool = False) -> IngestReport:
        """Ingest what is new in the journals (all of the home's by default); ``live`` for a tail's
        small, frequent appends (see ``ledger.ingest.ingest``)."""
        if not self.writable:
            raise LedgerError("this ledger was opened read-only; it cannot ingest")
        files = list(journals) if journals is not None else (self.home.journal_files() if self.home else [])
        tmp = self.home.tmp if self.home else Path(tempfile.gettempdir())
        return ingest(self.con, files, tmp, live=live)

    def rebuild(self) -> IngestReport:
        """Forget everything ingested and read every journal again."""
        con = self.con
        con.execute("BEGIN TRANSACTION")
        con.execute("DELETE FROM events")
        con.execute("DELETE FROM ingest_positions")
        con.execute("DELETE FROM ingest_errors")
        con.execute("COMMIT")
        return self.ingest()

    # -- queries -----------------------------------------------------------
    def query(
        self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None
    ) -> duckdb.DuckDBPyRelation:
        """``sql`` (with optional parameters) as a DuckDB relation."""
        return self.con.sql(sql, params=params)

    def rows(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Result rows as dicts (column name -> value)."""
        cur = self.con.execute(sql, params) if params is not None else self.con.execute(sql)
        names = [d[0] for d in cur.description or []]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
