"""The DuckDB ledger: bulk, idempotent ingest of journals; views and detectors.

Ingest reads each journal from the byte offset stored in
``ingest_positions`` and hands all new complete lines to DuckDB's
``read_json`` in one statement (never one INSERT per event). The new rows,
the new positions and any bad lines are written in one transaction, so
ingesting twice, or again after a crash mid-ingest, gives the same tables.

Fast path: DuckDB parses the raw lines; a generated check (from the event
vocabulary) plus a per-session seq count confirm that msgspec would have
accepted every line. Any doubt sends the batch down the exact path: msgspec
decodes line by line, reports each bad line, and re-encodes the good events.
"""

from __future__ import annotations

import os
import queue
import re
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import duckdb

from ledger import events as ev
from ledger.home import Home
from ledger.journal import BadLine, Chunk, decode_chunk, head_hash, read_chunk
from ledger.schema import (
    SCHEMA_VERSION,
    create_events_sql,
    defaulted_columns,
    invalid_rows_predicate,
    normalise_select,
    read_json_columns,
)
from ledger.sql import load_definitions

# New lines go to DuckDB in scratch files of about this size, one INSERT each,
# while the reader thread prepares the next (64 MB measured best here).
BATCH_BYTES: Final = 64 * 1024 * 1024
LOCK_RE: Final = re.compile(r"Could not set lock on file .*?(?:PID (\d+))?", re.S)

TABLES: Final = (
    "CREATE TABLE IF NOT EXISTS ledger_meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
    """CREATE TABLE IF NOT EXISTS ingest_positions (
         journal VARCHAR PRIMARY KEY, session_id VARCHAR, byte_offset BIGINT,
         line_no BIGINT, last_seq BIGINT, head VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS ingest_errors (
         journal VARCHAR, line_no BIGINT, reason VARCHAR, excerpt VARCHAR)""",
)


class LedgerError(Exception):
    """A ledger could not be opened or used; the message is one clear line."""


class LedgerLocked(LedgerError):
    def __init__(self, path: Path, holder: str) -> None:
        super().__init__(f"ledger {path} is in use by {holder}")
        self.path = path
        self.holder = holder


@dataclass(slots=True)
class Position:
    offset: int = 0
    line_no: int = 0
    last_seq: int = 0
    head: str = ""


@dataclass(slots=True)
class IngestReport:
    events: int = 0
    journals: int = 0
    bad_lines: list[BadLine] = field(default_factory=list)
    reset: list[str] = field(default_factory=list)
    seconds: float = 0.0
    exact_batches: int = 0


@dataclass(slots=True)
class _Batch:
    """New lines of several journals, written to one scratch file."""

    works: list[_Work]
    tmp: Path
    last: dict[str, int]
    bad: list[BadLine]
    events: int


def _drain(feed: queue.Queue[Any], reader: threading.Thread) -> None:
    """Let the reader thread finish and remove scratch files it still made."""
    while reader.is_alive() or not feed.empty():
        try:
            item = feed.get(timeout=0.1)
        except queue.Empty:
            continue
        if isinstance(item, _Batch):
            item.tmp.unlink(missing_ok=True)


@dataclass(slots=True)
class _Work:
    """One journal's new lines within a batch."""

    path: Path
    session_id: str
    pos: Position
    chunk: Chunk


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
        return cls(connect(None), home)

    @classmethod
    def open(
        cls, home: Home, *, read_only: bool = False, wait: float = 0.0, fallback: bool = False
    ) -> Ledger:
        """Open ``home``'s ledger file; if another process holds it, wait up to
        ``wait`` seconds, then either raise ``LedgerLocked`` or (``fallback``)
        build an in-memory ledger from the journals, saying so on stderr."""
        try:
            if read_only and not home.database.exists():
                raise LedgerLocked(home.database, "nobody: it does not exist yet")
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
        self.con.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema ------------------------------------------------------------
    def _ensure_tables(self) -> None:
        for ddl in TABLES:
            self.con.execute(ddl)
        row = self.con.execute("SELECT value FROM ledger_meta WHERE key = 'schema_version'").fetchone()
        if row is not None and row[0] != SCHEMA_VERSION:
            self.con.execute("DROP TABLE IF EXISTS events")
            self.con.execute("DELETE FROM ingest_positions")
            self.con.execute("DELETE FROM ingest_errors")
        self.con.execute(create_events_sql())
        self.con.execute("INSERT OR REPLACE INTO ledger_meta VALUES ('schema_version', ?)", [SCHEMA_VERSION])

    # -- ingest ------------------------------------------------------------
    def _positions(self) -> dict[str, Position]:
        rows = self.con.execute(
            "SELECT journal, byte_offset, line_no, last_seq, head FROM ingest_positions"
        ).fetchall()
        return {r[0]: Position(r[1], r[2], r[3], r[4]) for r in rows}

    def ingest(self, journals: Sequence[Path] | None = None) -> IngestReport:
        """Ingest what is new in the journals (all of the home's by default).

        Everything goes in one transaction. A reader thread reads the journals
        and writes batches of new lines to scratch files while DuckDB loads
        the previous batch (DuckDB runs without the GIL). If DuckDB's reading
        does not check out, the transaction is redone with defaults filled in,
        then if need be with msgspec line by line (the exact path).
        """
        if not self.writable:
            raise LedgerError("this ledger was opened read-only; it cannot ingest")
        started = time.perf_counter()
        files = list(journals) if journals is not None else (self.home.journal_files() if self.home else [])
        positions = self._positions()
        for mode in ("fast", "normalise", "exact"):
            report = IngestReport(journals=len(files), exact_batches=int(mode == "exact"))
            if self._ingest_all(files, positions, mode, report):
                break
        report.seconds = time.perf_counter() - started
        return report

    def _batches(
        self,
        files: list[Path],
        positions: dict[str, Position],
        mode: str,
        report: IngestReport,
        out: queue.Queue[_Batch | BaseException | None],
    ) -> None:
        """Reader thread: read new lines, group them into scratch files."""
        try:
            batch: list[_Work] = []
            size = 0
            for path in files:
                pos = positions.get(path.name, Position())
                try:
                    chunk = read_chunk(path, pos.offset, pos.line_no, pos.head)
                except OSError as exc:
                    report.bad_lines.append(BadLine(str(path), 0, f"cannot read journal: {exc.strerror}", ""))
                    continue
                if chunk.truncated:
                    report.reset.append(path.name)
                    pos = Position()
                if chunk.data or chunk.truncated:
                    batch.append(_Work(path, path.stem, pos, chunk))
                    size += len(chunk.data)
                if size >= BATCH_BYTES:
                    out.put(self._prepare(batch, mode, report))
                    batch, size = [], 0
            if batch:
                out.put(self._prepare(batch, mode, report))
            out.put(None)
        except BaseException as exc:  # handed over to the loading thread
            out.put(exc)

    def _prepare(self, works: list[_Work], mode: str, report: IngestReport) -> _Batch:
        if mode != "exact":
            last = {w.session_id: w.pos.last_seq + w.chunk.line_count for w in works}
            events = sum(w.chunk.line_count for w in works)
            return _Batch(works, self._tmpfile(*(w.chunk.data for w in works)), last, [], events)
        good, last, bad = self._decode_exact(works)
        report.bad_lines.extend(bad)
        return _Batch(works, self._tmpfile(ev.encode_lines(good)), last, bad, len(good))

    def _ingest_all(
        self, files: list[Path], positions: dict[str, Position], mode: str, report: IngestReport
    ) -> bool:
        """One transaction over all batches; False (rolled back) when the data
        does not fit ``mode`` and the next mode should be tried."""
        feed: queue.Queue[_Batch | BaseException | None] = queue.Queue(maxsize=1)
        reader = threading.Thread(
            target=self._batches,
            args=(files, positions, mode, report, feed),
            name="ralph-ingest",
            daemon=True,
        )
        reader.start()
        con = self.con
        loaded: list[_Batch] = []
        ok = False
        con.execute("BEGIN TRANSACTION")
        try:
            mark_row = con.execute("SELECT coalesce(max(rowid), -1) FROM events").fetchone()
            mark = mark_row[0] if mark_row else -1
            while (item := feed.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                loaded.append(item)
                if not self._insert(item, normalise=mode == "normalise"):
                    return False
            works = [w for b in loaded for w in b.works]
            if mode != "exact" and not self._verify(works, mark, normalised=mode == "normalise"):
                return False
            for b in loaded:
                self._store_positions(b.works, b.last, b.bad)
            con.execute("COMMIT")
            ok = True
            report.events = sum(b.events for b in loaded)
            return True
        finally:
            if not ok:
                con.execute("ROLLBACK")
            _drain(feed, reader)
            for b in loaded:
                b.tmp.unlink(missing_ok=True)

    def _insert(self, batch: _Batch, *, normalise: bool) -> bool:
        """Bulk-insert one scratch file; False if DuckDB cannot read it."""
        con = self.con
        for w in batch.works:
            if w.chunk.truncated:
                con.execute("DELETE FROM events WHERE session_id = ?", [w.session_id])
                con.execute("DELETE FROM ingest_errors WHERE journal = ?", [w.path.name])
        path = _sql_str(str(batch.tmp))
        src = f"read_json('{path}', format='newline_delimited', columns={read_json_columns()})"
        select = normalise_select(src) if normalise else f"SELECT * FROM {src}"
        try:
            con.execute(f"INSERT INTO events {select}")
        except duckdb.Error:
            return False
        finally:
            batch.tmp.unlink(missing_ok=True)
        return True

    def _tmpfile(self, *parts: bytes) -> Path:
        tmpdir = self.home.tmp if self.home else Path(os.environ.get("TMPDIR", "/tmp"))
        tmpdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = tmpdir / f"ingest-{os.getpid()}-{uuid.uuid4().hex}.jsonl"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            for data in parts:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        return path

    def _decode_exact(self, batch: list[_Work]) -> tuple[list[ev.AnyEvent], dict[str, int], list[BadLine]]:
        """Decode line by line with msgspec: the good events, each session's
        last seq, and every bad line with its reason."""
        good: list[ev.AnyEvent] = []
        last: dict[str, int] = {}
        bad: list[BadLine] = []
        for w in batch:
            events, w_bad = decode_chunk(w.chunk)
            bad.extend(w_bad)
            expected = w.pos.last_seq + 1
            for line_no, e in events:
                problem = _seq_problem(e, w.session_id, expected)
                if problem:
                    bad.append(BadLine(w.chunk.path, line_no, problem, ""))
                    continue
                good.append(e)
                expected = e.seq + 1
            last[w.session_id] = expected - 1
        bad.sort(key=lambda b: (b.path, b.line_no))
        return good, last, bad

    def _verify(self, works: list[_Work], mark: int, *, normalised: bool) -> bool:
        """Would msgspec have accepted every new row, in seq order, with all
        its fields present (or filled in by ``normalised``)?"""
        new = f"FROM events WHERE rowid > {int(mark)}"
        bad = self.con.execute(f"SELECT count(*) {new} AND ({invalid_rows_predicate()})").fetchone()
        if bad is None or bad[0]:
            return False
        got = {
            r[0]: r[1:]
            for r in self.con.execute(
                f"SELECT session_id, min(seq), max(seq), count(*), count(DISTINCT seq) {new} GROUP BY ALL"
            ).fetchall()
        }
        want = {
            w.session_id: (
                w.pos.last_seq + 1,
                w.pos.last_seq + w.chunk.line_count,
                w.chunk.line_count,
                w.chunk.line_count,
            )
            for w in works
            if w.chunk.line_count
        }
        return got == want and (normalised or not self._lacks_defaults(new))

    def _lacks_defaults(self, new_rows: str) -> bool:
        per_tag = defaulted_columns()
        cols = sorted({c for cs in per_tag.values() for c in cs})
        counts = ", ".join(f'count("{c}")' for c in cols)
        for tag, n, *present in self.con.execute(
            f'SELECT "type", count(*), {counts} {new_rows} GROUP BY ALL'
        ).fetchall():
            have = dict(zip(cols, present, strict=True))
            if any(have[c] != n for c in per_tag.get(tag, [])):
                return True
        return False

    def _store_positions(self, batch: list[_Work], last: dict[str, int], bad: list[BadLine]) -> None:
        rows = [
            (
                w.path.name,
                w.session_id,
                w.chunk.end,
                w.chunk.first_line_no - 1 + w.chunk.line_count,
                last.get(w.session_id, w.pos.last_seq),
                head_hash(w.chunk.data) if w.chunk.start == 0 and w.chunk.data else w.pos.head,
            )
            for w in batch
        ]
        _bulk_insert(
            self.con,
            "INSERT OR REPLACE INTO ingest_positions",
            rows,
            ["journal", "session_id", "byte_offset", "line_no", "last_seq", "head"],
        )
        if bad:
            _bulk_insert(
                self.con,
                "INSERT INTO ingest_errors",
                [(Path(b.path).name, b.line_no, b.reason, b.excerpt) for b in bad],
                ["journal", "line_no", "reason", "excerpt"],
            )

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
        return self.con.sql(sql, params=params)

    def rows(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Result rows as dicts (column name -> value)."""
        cur = self.con.execute(sql, params) if params is not None else self.con.execute(sql)
        names = [d[0] for d in cur.description or []]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def _sql_str(text: str) -> str:
    return text.replace("'", "''")


def _seq_problem(e: ev.Event, session_id: str, expected: int) -> str:
    if e.session_id != session_id:
        return f"session_id {e.session_id!r} does not match journal {session_id!r}"
    if e.seq < expected:
        return f"seq {e.seq} repeats or goes back (expected {expected})"
    return ""


def _bulk_insert(
    con: duckdb.DuckDBPyConnection, head: str, rows: Iterable[tuple[Any, ...]], names: list[str]
) -> None:
    """Insert many rows at once through an Arrow table (no per-row INSERT)."""
    import pyarrow as pa

    cols = list(zip(*rows, strict=True)) or [() for _ in names]
    table = pa.table({n: list(c) for n, c in zip(names, cols, strict=True)})
    con.register("_bulk_rows", table)
    try:
        con.execute(f"{head} SELECT * FROM _bulk_rows")
    finally:
        con.unregister("_bulk_rows")
