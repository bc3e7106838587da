"""The DuckDB ledger: opening it (locks, fallback, rebuild), and its views.

The ``events`` table is derived from the vocabulary (``ledger.storage.schema``), filled by
``ledger.storage.ingest`` and read through the views and detectors of ``ledger.storage.sql``. The
file can be deleted at any time: it is rebuilt from the journals; a damaged one is moved aside and
rebuilt; a new one is created whole or not at all (``create_file``). The rules:
docs/ledger.md#the-duckdb-ledger, docs/reliability.md#full-disk-during-ingest.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import duckdb

from ledger import events as ev
from ledger.core.atomic import temp_name
from ledger.core.errors import LedgerError, LedgerLocked, one_line, operation
from ledger.core.home import Home
from ledger.storage import materialized
from ledger.storage.ingest import BATCH_BYTES, IngestReport, Stored, ingest, insert_events, sweep_scratch
from ledger.storage.ledger_file import (
    connect,
    connect_file,
    damage_of,
    owner_only,
    set_aside,
    sweep_builds,
    unwritable,
)
from ledger.storage.prices import MODEL_PRICES_TABLE, Priced, fill_prices
from ledger.storage.schema import SCHEMA_VERSION as EVENTS_VERSION
from ledger.storage.schema import create_events_sql
from ledger.storage.sql import load_definitions

TABLES: Final = (
    "CREATE TABLE IF NOT EXISTS ledger_meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
    """CREATE TABLE IF NOT EXISTS ingest_positions (
         journal VARCHAR PRIMARY KEY, session_id VARCHAR, byte_offset BIGINT,
         last_seq BIGINT, head VARCHAR, chain_last VARCHAR, chain_on BOOLEAN, chain_break VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS ingest_errors (
         journal VARCHAR, line_no BIGINT, reason VARCHAR, excerpt VARCHAR)""",
    MODEL_PRICES_TABLE,
)
# A ledger file of another layout is emptied and re-ingested on open.
SCHEMA_VERSION: Final = hashlib.sha256((EVENTS_VERSION + "".join(TABLES)).encode()).hexdigest()[:16]


def create_file(path: Path) -> None:
    """Create an empty ledger file (its tables, checkpointed: no WAL) at ``path``, whole or not at
    all: it is built in a temp file beside it and linked into place once complete, so a failure (a
    full disk) leaves no file that could later be taken for a damaged one. A file another process
    placed meanwhile is kept. Raises ``LedgerError`` (one line, naming ``path``)."""
    sweep_builds(path)
    tmp = path.with_name(temp_name(path.name))
    try:
        try:
            con = connect_file(tmp, read_only=False)
            try:
                Ledger(con, None, path=tmp, views=False).con.execute("CHECKPOINT")
            finally:
                con.close()
            _place(tmp, path)
        finally:
            for p in (tmp, tmp.with_name(f"{tmp.name}.wal")):
                p.unlink(missing_ok=True)
    except (duckdb.Error, OSError) as exc:
        raise LedgerError(f"cannot create ledger {path}: {one_line(exc)}") from None


def _place(tmp: Path, path: Path) -> None:
    """Give the complete file ``tmp`` the name ``path``, unless a file has it already."""
    try:
        os.link(tmp, path)  # never replaces a ledger another process created meanwhile
    except FileExistsError:
        return
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        if not path.exists():  # a file system without hard links
            os.rename(tmp, path)
        return
    with contextlib.suppress(OSError):  # the new name survives a power cut
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class Ledger:
    """A DuckDB ledger over one home's journals (or in memory)."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        home: Home | None,
        *,
        writable: bool = True,
        path: Path | None = None,
        prices: bool = True,
        views: bool = True,
    ) -> None:
        self.con = con
        self.prices = prices
        """Whether an ingest fills ``model_prices`` for new models (``ledger.storage.prices``)."""
        self.home = home
        self.path = path
        self.writable = writable
        self.scratch: Path | None = None
        """Where ingest writes its scratch files (``scratch_dir``: chosen by the first ingest)."""
        self.materialized = False
        """Whether the views of ``materialized.MATERIALIZED`` read the tables this ledger file keeps
        (and its writes keep them in step), or compute as defined (in memory; a file read-only
        whose tables are out of date)."""
        con.execute("SET TimeZone = 'UTC'")  # the ledger's times are UTC, and shown as such
        # Rows are always read back ordered by (session_id, seq), so DuckDB may
        # insert in parallel without keeping file order: ~1.6x faster ingest.
        con.execute("SET preserve_insertion_order = false")
        # DuckDB 2.0's common sub-plan optimizer gives a shared sub-plan the statistics of one of
        # its uses: a UNION ALL of two sessions' rows then fails to cast the other's tokens
        # (``Monitor.sessions``; tests/unit/test_tui_layout.py, four-digit iteration counts).
        con.execute("SET disabled_optimizers = 'common_subplan'")
        if writable:
            with self._private():
                self._ensure_tables()
        if views:  # (not for a file being created: its connection closes at once)
            load_definitions(self.con)
            if path is not None:
                with self._private():
                    self.materialized = materialized.install(con, writable=writable)

    def views_on(self, con: duckdb.DuckDBPyConnection) -> None:
        """Install the views and detectors on another connection to this ledger (a cursor), as
        this ledger reads them."""
        load_definitions(con)
        if self.materialized:
            materialized.point(con)

    # -- opening -----------------------------------------------------------
    @classmethod
    def memory(cls, home: Home | None = None, *, prices: bool = True) -> Ledger:
        """A new, empty in-memory ledger; ``ingest`` reads ``home``'s journals if given, and fills
        ``model_prices`` unless ``prices`` is false (the Stop hook's ledgers: no price library)."""
        return cls(connect(None), home, prices=prices)

    @classmethod
    def open(
        cls, home: Home, *, read_only: bool = False, wait: float = 0.0, fallback: bool = False
    ) -> Ledger:
        """Open ``home``'s ledger file; if another process holds it, wait up to
        ``wait`` seconds, then either raise ``LedgerLocked`` or (``fallback``)
        build an in-memory ledger from the journals, saying so on stderr.

        A file DuckDB cannot read as a database (corrupt, truncated) is moved aside as
        ``ledger.duckdb.corrupt-<timestamp>`` and replaced by an empty ledger, which the next
        ``ingest`` fills from the journals; read-only, it raises ``LedgerError`` instead."""
        if read_only and not home.database.exists():
            raise LedgerError(f"no ledger at {home.database} yet (run 'ralph-ledger ingest')")
        if fallback and not read_only and (why := unwritable(home)):
            return cls._from_journals(home, f"cannot write in {home.root} ({why})")
        try:
            home.ensure()
            try:
                return cls._open_file(home, read_only=read_only, wait=wait)
            except (duckdb.Error, LedgerError) as exc:
                if read_only or not set_aside(home.database, exc):
                    raise
            return cls._open_file(home, wait=wait)
        except LedgerLocked as exc:
            if not fallback:
                raise
            return cls._from_journals(home, str(exc))

    @classmethod
    def _from_journals(cls, home: Home, why: str) -> Ledger:
        """An in-memory ledger holding ``home``'s journals, saying ``why`` in one line on stderr;
        its scratch files go where ``scratch_dir`` says."""
        print(f"ralph-ledger: {why}; reading the journals instead", file=sys.stderr)
        mem = cls.memory(home)
        mem.ingest()
        return mem

    @classmethod
    def _open_file(cls, home: Home, *, read_only: bool = False, wait: float = 0.0) -> Ledger:
        if not read_only and not home.database.exists():
            create_file(home.database)
        con = connect(home.database, read_only=read_only, wait=wait)
        try:
            return cls(con, home, writable=not read_only, path=home.database)
        except BaseException:
            con.close()
            raise

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
            for table in ("events", "ingest_positions", "ingest_errors", "model_prices"):
                self.con.execute(f"DROP TABLE IF EXISTS {table}")
            materialized.drop(self.con)
        for ddl in TABLES[1:]:
            self.con.execute(ddl)
        self.con.execute(create_events_sql())
        self.con.execute("INSERT OR REPLACE INTO ledger_meta VALUES ('schema_version', ?)", [SCHEMA_VERSION])

    # -- ingest ------------------------------------------------------------
    def ingest(
        self,
        journals: Sequence[Path] | None = None,
        *,
        live: bool = False,
        batch_bytes: int = BATCH_BYTES,
        progress: Callable[[Stored], None] | None = None,
    ) -> IngestReport:
        """Ingest what is new in the journals (all of the home's by default); ``live`` for a tail's
        small, frequent appends; ``progress`` told after each INSERT of about ``batch_bytes`` (see
        ``ledger.storage.ingest.ingest``)."""
        files = list(journals) if journals is not None else self._journals()

        def work() -> IngestReport:
            return ingest(
                self.con,
                files,
                self.scratch_dir(),
                live=live,
                batch_bytes=batch_bytes,
                progress=progress,
                settle=self._settle,
            )

        # (a live tail's frequent small ingests leave the scratch sweep to the others)
        return self._write(work, sweep=not live)

    def insert_events(self, events: Sequence[ev.Event]) -> None:
        """Bulk-insert ``events`` in the open transaction (``ledger.storage.ingest.insert_events``)."""
        insert_events(self.con, events, self.scratch_dir())
        if self.materialized:
            materialized.refresh(self.con, {e.session_id for e in events})

    def fill_prices(self) -> IngestReport:
        """Add the prices of the models new to the ledger (``ledger.storage.prices``), of every
        event; the notes on models without a known price go to the report returned. The rows a
        ledger file keeps then cost the turns at them (in one transaction: call it outside one)."""
        report = IngestReport()
        if not self.materialized:
            report.notes.extend(fill_prices(self.con).notes)
            return report
        self.con.execute("BEGIN TRANSACTION")
        try:
            priced = fill_prices(self.con)
            if priced.models:
                materialized.refresh(self.con)
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")
        report.notes.extend(priced.notes)
        return report

    def _settle(self, report: IngestReport) -> None:
        """Last in an ingest's transaction: the prices of the models new to the ledger (of the
        events it added, or of all when a journal was read again from its start), then the kept
        rows of the sessions it changed (of all when it priced a model: their turns' cost)."""
        priced = Priced([], [])
        if self.prices:
            priced = fill_prices(self.con, None if report.reset else report.seqs)
            report.notes.extend(priced.notes)
        if self.materialized:
            changed = {*report.seqs, *(Path(name).stem for name in report.reset)}
            materialized.refresh(self.con, None if priced.models else changed)

    def rebuild(self) -> IngestReport:
        """Forget everything ingested and read every journal again."""

        def empty_then_ingest() -> IngestReport:
            con = self.con
            con.execute("BEGIN TRANSACTION")
            con.execute("DELETE FROM events")
            con.execute("DELETE FROM ingest_positions")
            con.execute("DELETE FROM ingest_errors")
            con.execute("DELETE FROM model_prices")
            if self.materialized:
                materialized.refresh(con)  # (no events: no rows)
            con.execute("COMMIT")
            return ingest(self.con, self._journals(), self.scratch_dir(), settle=self._settle)

        return self._write(empty_then_ingest, sweep=True)

    def _journals(self) -> list[Path]:
        return self.home.journal_files() if self.home else []

    def scratch_dir(self) -> Path:
        """Where ingest writes its scratch files: the home's ``tmp/``, or the system's temporary folder
        for a ledger without a home or of a home nothing may be written in (a read-only home is still
        read: every reading command, ``checkpoint`` among them, goes through here)."""
        if self.scratch is None:
            home = self.home
            writable = home is not None and not unwritable(home)
            self.scratch = home.tmp if home is not None and writable else Path(tempfile.gettempdir())
        return self.scratch

    def _write(self, work: Callable[[], IngestReport], *, sweep: bool) -> IngestReport:
        """Run an ingest: owner-only files, a damaged file mended; first, with ``sweep``, remove
        the scratch files that killed ingests left in the home (and new ledger files that killed
        processes were creating)."""
        if not self.writable:
            raise LedgerError("this ledger was opened read-only; it cannot ingest")
        if self.home and sweep and self.scratch_dir() == self.home.tmp:
            sweep_scratch(self.home.tmp)
            if self.path is not None:
                sweep_builds(self.path)
        where = f"ingesting into {self.path}" if self.path is not None else "ingesting"
        with operation(where), self._private():
            return self._mending(work)

    def _private(self) -> contextlib.AbstractContextManager[None]:
        """``owner_only()`` around writes to a ledger file (they may create its WAL)."""
        return owner_only() if self.path is not None else contextlib.nullcontext()

    def _mending(self, work: Callable[[], IngestReport]) -> IngestReport:
        """``work()``; if it finds the ledger file damaged, move the file aside and ingest every
        journal into a new one. A write DuckDB could not make (a full disk) is ``LedgerError``."""
        try:
            return work()
        except (duckdb.Error, LedgerError) as exc:
            if self.path is None or self.home is None or not damage_of(exc, self.path):
                if isinstance(exc, duckdb.IOException | duckdb.TransactionException):
                    # a write that failed (a full disk): DuckDB undid it; the file is as it was
                    where = f" into {self.path}" if self.path is not None else ""
                    raise LedgerError(f"cannot ingest{where}: {one_line(exc)}") from exc
                raise
            with contextlib.suppress(duckdb.Error):
                self.con.close()
            if not set_aside(self.path, exc):
                raise
            mended = self._open_file(self.home)
            self.con, self.materialized = mended.con, mended.materialized
        return ingest(self.con, self.home.journal_files(), self.home.tmp, settle=self._settle)

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
