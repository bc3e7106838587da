"""Bulk, idempotent ingest of journals into the ledger's ``events`` table: new complete lines from
each journal's stored offset, one INSERT per large scratch file inside one transaction with the new
offsets and bad lines; a fast path checked against the vocabulary, else the exact msgspec path
(README, "The DuckDB ledger", says how and why)."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import queue
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import duckdb
import msgspec

from ledger import events as ev
from ledger.core.atomic import pid_gone
from ledger.core.errors import LedgerError, error_reason, one_line, operation
from ledger.storage import chain
from ledger.storage.journal import (
    MAX_LINE,
    BadLine,
    Span,
    count_lines,
    decode_chunk,
    locate_new,
    open_journal,
    read_range,
    read_span,
    span_has_long_line,
)
from ledger.storage.schema import (
    invalid_rows_predicate,
    lacking_defaults_predicate,
    normalise_select,
    read_json_columns,
)

# New lines go to DuckDB in scratch files of up to this size, one INSERT
# each, while the reader thread prepares the next. Fewer, larger INSERTs are
# faster (measured: 1M events in one INSERT 1.9 s, in five 3.4 s), so a
# typical backlog is a single INSERT; the pipeline only matters beyond this.
BATCH_BYTES: Final = 1024 * 1024 * 1024
MODES: Final = ("fast", "normalise", "exact")
SMALL_FILES: Final = 8
SMALL_BYTES: Final = 64 * 1024
WATCH_S: Final = 0.1
"""How often a running INSERT's progress is looked at, when a caller wants it (``_watched``)."""
EXACT_SLACK: Final = 1024 * 1024
"""What msgspec may add to a line it writes again (the fields a journal line left to their defaults):
the exact path's lines may be this much over ``MAX_LINE``, which the fast paths hold them to."""
SCRATCH_NAME: Final = re.compile(r"ingest-(\d+)-[0-9a-f]{32}\.jsonl")  # see _scratch_path


@dataclass(slots=True)
class Position:
    """How far a journal was ingested (its ``ingest_positions`` row): byte offset, seq of its last
    event and head fingerprint.
    """

    offset: int = 0
    last_seq: int = 0
    head: str = ""
    chain: tuple[str, bool, str] = ("", False, "")  # its hash chain there (chain.check_new)


@dataclass(slots=True)
class IngestReport:
    """What one ingest did: events inserted, journals given, bad lines, journals found truncated or
    replaced (``reset``, re-read from the start), wall-clock seconds, ``exact_batches`` (1 when
    the line-by-line exact path was needed), ``seqs``: for each session that gained events, its
    last seq before and after, and ``notes`` (a model whose price is not known, once)."""

    events: int = 0
    journals: int = 0
    bad_lines: list[BadLine] = field(default_factory=list)
    reset: list[str] = field(default_factory=list)
    seconds: float = 0.0
    exact_batches: int = 0
    seqs: dict[str, tuple[int, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    broken: list[tuple[str, str]] = field(default_factory=list)
    """Journals whose hash chain this ingest found broken, and where (``chain.check_journal``)."""


@dataclass(frozen=True, slots=True)
class Stored:
    """How far an ingest has come, told after each INSERT (its transaction not yet committed):
    journals, new bytes and events stored so far by this attempt (a retry in another mode, when the
    data does not fit the fast path, starts again from zero)."""

    journals: int
    bytes: int
    events: int


@dataclass(slots=True)
class _Work:
    """One journal's new lines."""

    path: Path
    session_id: str
    pos: Position
    span: Span
    end: int = 0  # offset the ingest reached
    last_seq: int = 0  # seq of its last event after the ingest
    chain: tuple[str, bool, str] = ("", False, "")  # its hash chain after the ingest


class _LongLine(Exception):
    """A journal's new lines hold one over ``MAX_LINE``: only the exact path reads past it."""


@dataclass(slots=True)
class _Batch:
    """New lines of several journals, in one scratch file."""

    works: list[_Work]
    tmp: Path
    bad: list[BadLine]
    events: int


def ingest(
    con: duckdb.DuckDBPyConnection,
    files: list[Path],
    tmpdir: Path,
    *,
    live: bool = False,
    batch_bytes: int = BATCH_BYTES,
    progress: Callable[[Stored], None] | None = None,
    settle: Callable[[IngestReport], None] | None = None,
) -> IngestReport:
    """Ingest what is new in ``files`` (journals named ``<session_id>.jsonl``). ``live`` (a tail
    ingesting a few appended lines at a time) takes the exact path straight away when the new
    bytes are few; ``exact_batches`` then stays 0, since no data needed it. The new lines go in
    scratch files of about ``batch_bytes``, one INSERT each, all in one transaction; ``progress``
    is told after each INSERT (an exception it raises undoes the whole ingest), and ``settle``, with
    the report, last before the commit (what the ledger derives from the new events: prices, the
    rows it keeps)."""
    started = time.perf_counter()
    positions = _positions(con, files)
    report = IngestReport(journals=len(files))
    modes = _modes(files, positions) if live else MODES
    for mode in modes:
        report = IngestReport(journals=len(files), exact_batches=int(mode == "exact" and len(modes) > 1))
        if _ingest_all(con, files, positions, mode, report, tmpdir, batch_bytes, progress, settle):
            break
    report.seconds = time.perf_counter() - started
    return report


def insert_events(con: duckdb.DuckDBPyConnection, events: Sequence[ev.Event], tmpdir: Path) -> None:
    """Bulk-insert ``events`` as a journal holds them (one scratch file, one ``COPY``), in the
    caller's transaction: a step's tentative events (``ledger.storage.fold.Fold.pending``). ``COPY``
    reads the lines with the JSON reader and the table's own column types: the rows ``read_json``
    with ``read_json_columns()`` gives (a test holds it), without parsing those types out of its
    argument first, half the time for a few rows (docs/performance.md)."""
    path = _scratch(tmpdir, [ev.encode_lines(list(events))])  # type: ignore[arg-type]
    quoted = str(path).replace("'", "''")
    try:
        con.execute(f"COPY events FROM '{quoted}' (FORMAT json, AUTO_DETECT false, ARRAY false)")
    except duckdb.Error as exc:  # msgspec wrote these lines: only a resource problem refuses them
        raise LedgerError(f"ingest failed, nothing was stored: {one_line(exc)}") from None
    finally:
        path.unlink(missing_ok=True)


def _modes(files: list[Path], positions: dict[str, Position]) -> tuple[str, ...]:
    """The exact path straight away for a small append (a live tail's few lines: decoding them is
    cheaper than a scratch file, ``read_json`` and the verification); else fast, then the others."""
    new = 0
    for f in files[: SMALL_FILES + 1]:
        try:
            new += max(0, f.stat().st_size - positions.get(f.name, Position()).offset)
        except OSError:
            return MODES
    return ("exact",) if len(files) <= SMALL_FILES and new <= SMALL_BYTES else MODES


def _positions(con: duckdb.DuckDBPyConnection, files: list[Path]) -> dict[str, Position]:
    """The stored positions of ``files`` (by journal name): only theirs when they are few, so a
    live tail appending to one journal of thousands does not read every position."""
    sql = (
        "SELECT journal, byte_offset, last_seq, head, chain_last, chain_on, chain_break FROM ingest_positions"
    )
    if len(files) <= 256:
        rows = con.execute(f"{sql} WHERE journal IN (SELECT unnest(?))", [[f.name for f in files]]).fetchall()
    else:
        rows = con.execute(sql).fetchall()
    return {r[0]: Position(r[1], r[2], r[3], (r[4] or "", bool(r[5]), r[6] or "")) for r in rows}


def _ingest_all(
    con: duckdb.DuckDBPyConnection,
    files: list[Path],
    positions: dict[str, Position],
    mode: str,
    report: IngestReport,
    tmpdir: Path,
    batch_bytes: int = BATCH_BYTES,
    progress: Callable[[Stored], None] | None = None,
    settle: Callable[[IngestReport], None] | None = None,
) -> bool:
    """One transaction over every batch; False (rolled back) when the data
    does not fit ``mode`` and the next mode should be tried."""
    feed: queue.Queue[_Batch | BaseException | None] = queue.Queue(maxsize=1)
    reader = threading.Thread(
        target=_read_batches,
        args=(files, positions, mode, report, tmpdir, feed, batch_bytes),
        name="ralph-ingest",
        daemon=True,
    )
    reader.start()
    loaded: list[_Batch] = []
    ok = False
    con.execute("BEGIN TRANSACTION")
    try:
        mark = -1 if mode == "exact" else _scalar(con, "SELECT coalesce(max(rowid), -1) FROM events")
        while (item := feed.get()) is not None:
            if isinstance(item, _LongLine):
                return False
            if isinstance(item, BaseException):
                raise item
            watch = None if progress is None else _partial(loaded, item, progress)
            loaded.append(item)
            if not _insert(con, item, normalise=mode == "normalise", exact=mode == "exact", watch=watch):
                return False
            if progress is not None:
                progress(_stored(loaded))
        works = [w for b in loaded for w in b.works]
        if mode != "exact" and not _verify(con, works, mark, normalised=mode == "normalise"):
            return False
        _store_positions(con, works, [bad for b in loaded for bad in b.bad])
        report.events = sum(b.events for b in loaded)
        report.seqs = {
            w.session_id: (w.pos.last_seq, w.last_seq) for w in works if w.last_seq > w.pos.last_seq
        }
        report.broken = [(w.path.name, w.chain[2]) for w in works if w.chain[2] and not w.pos.chain[2]]
        if settle is not None:
            settle(report)
        con.execute("COMMIT")
        ok = True
        return True
    finally:
        if not ok:
            # a commit that failed (a full disk) has ended the transaction: ROLLBACK would hide why
            with contextlib.suppress(duckdb.TransactionException):
                con.execute("ROLLBACK")
        _drain(feed, reader)
        for b in loaded:
            b.tmp.unlink(missing_ok=True)


def _read_batches(
    files: list[Path],
    positions: dict[str, Position],
    mode: str,
    report: IngestReport,
    tmpdir: Path,
    out: queue.Queue[_Batch | BaseException | None],
    batch_bytes: int = BATCH_BYTES,
) -> None:
    """Reader thread: find each journal's new lines, group them into batches."""
    try:
        batch: list[_Work] = []
        size = 0
        for path in files:
            pos = positions.get(path.name, Position())
            try:
                span = locate_new(path, pos.offset, pos.head)
                long = mode != "exact" and span_has_long_line(span)
            except OSError as exc:
                why = f"cannot read journal: {error_reason(exc)}"
                report.bad_lines.append(BadLine(str(path), 0, why, ""))
                continue
            if span.truncated:
                report.reset.append(path.name)
                pos = Position()
            if span.empty and not span.truncated:
                continue
            if long:
                out.put(_LongLine(path))
                return
            batch.append(_Work(path, path.stem, pos, span))
            size += span.end - span.start
            if size >= batch_bytes:
                out.put(_prepare(batch, mode, report, tmpdir))
                _link(batch)  # while the batch is inserted
                batch, size = [], 0
        if batch:
            out.put(_prepare(batch, mode, report, tmpdir))
            _link(batch)
        out.put(None)
    except BaseException as exc:  # handed over to the loading thread
        out.put(exc)


def _stored(batches: list[_Batch]) -> Stored:
    works = [w for b in batches for w in b.works]
    return Stored(len(works), sum(w.span.end - w.span.start for w in works), sum(b.events for b in batches))


def _partial(
    done: list[_Batch], batch: _Batch, progress: Callable[[Stored], None]
) -> Callable[[float], None]:
    """Tell ``progress`` how far the INSERT of ``batch`` has come (a fraction), after ``done``."""
    before = _stored(done)
    now = _stored([batch])

    def told(fraction: float) -> None:
        progress(
            Stored(
                before.journals + int(now.journals * fraction),
                before.bytes + int(now.bytes * fraction),
                before.events + int(now.events * fraction),
            )
        )

    return told


def _prepare(works: list[_Work], mode: str, report: IngestReport, tmpdir: Path) -> _Batch:
    if mode == "exact":
        good, bad = _decode_exact(works)
        report.bad_lines.extend(bad)
        return _Batch(works, _scratch(tmpdir, [ev.encode_lines(good)]), bad, len(good))
    events = 0
    for w in works:
        w.end = w.span.end
        w.last_seq = _seq_of(w.span.last_line) if not w.span.empty else w.pos.last_seq
        events += w.last_seq - w.pos.last_seq
    return _Batch(works, _copy_spans(tmpdir, [w.span for w in works]), [], events)


def _link(works: list[_Work]) -> None:
    """Check the hash chain of each journal's new lines (docs/design/hash-chain.md)."""
    for w in works:
        read = functools.partial(read_range, w.path)
        w.chain = chain.check_new(str(w.path), read, w.span.start, w.end, w.pos.chain)


def _seq_of(line: bytes) -> int:
    """The seq of a journal line, or -1 if it is not a valid event."""
    try:
        return ev.decode(line).seq
    except (msgspec.DecodeError, msgspec.ValidationError):
        return -1


def _decode_exact(works: list[_Work]) -> tuple[list[ev.AnyEvent], list[BadLine]]:
    """msgspec, line by line: the good events, and each bad line with its reason."""
    good: list[ev.AnyEvent] = []
    bad: list[BadLine] = []
    for w in works:
        first = count_lines(w.path, w.span.start) + 1 if w.span.start else 1
        chunk = read_span(w.span, first)
        events, w_bad = decode_chunk(chunk)
        bad.extend(w_bad)
        expected = w.pos.last_seq + 1
        for line_no, e in events:
            problem = _seq_problem(e, w.session_id, expected)
            if problem:
                bad.append(BadLine(chunk.path, line_no, problem, ""))
                continue
            good.append(e)
            expected = e.seq + 1
        w.end, w.last_seq = chunk.end, expected - 1
    bad.sort(key=lambda b: (b.path, b.line_no))
    return good, bad


def _seq_problem(e: ev.Event, session_id: str, expected: int) -> str:
    if e.session_id != session_id:
        return f"session_id {e.session_id!r} does not match journal {session_id!r}"
    if e.seq < expected:
        return f"seq {e.seq} repeats or goes back (expected {expected})"
    return ""


def sweep_scratch(tmpdir: Path) -> None:
    """Remove from a home's scratch directory the files of ingests whose process is gone (killed
    mid-ingest: nothing else would remove them). Their names carry the pid; a pid in use again
    keeps its files."""
    try:
        names = [m for e in os.scandir(tmpdir) if (m := SCRATCH_NAME.fullmatch(e.name))]
    except OSError:
        return
    for m in names:
        if pid_gone(int(m[1])):
            (tmpdir / m[0]).unlink(missing_ok=True)


def _scratch_path(tmpdir: Path) -> tuple[Path, int]:
    tmpdir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = tmpdir / f"ingest-{os.getpid()}-{uuid.uuid4().hex}.jsonl"
    return path, os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)


def _scratch(tmpdir: Path, parts: Iterable[bytes]) -> Path:
    path, fd = _scratch_path(tmpdir)
    with _removed_on_error(path), operation(f"writing the scratch file {path}"):
        try:
            for data in parts:
                _write_all(fd, data)
        finally:
            os.close(fd)
    return path


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


KERNEL_COPY_REFUSED: Final = frozenset(
    {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EPERM}
)
"""What ``copy_file_range`` answers when the kernel will not copy between these two files (a journal
on another file system than the scratch folder, an old kernel, a sandbox that forbids the call): the
copy is then read and written instead."""
COPY_CHUNK: Final = 4 * 1024 * 1024


def _copy_spans(tmpdir: Path, spans: list[Span]) -> Path:
    """Concatenate journal byte ranges into a scratch file: copied by the kernel where it can, else
    read and written (``KERNEL_COPY_REFUSED``)."""
    path, out = _scratch_path(tmpdir)
    kernel = hasattr(os, "copy_file_range")
    with _removed_on_error(path), operation(f"copying journals into the scratch file {path}"):
        try:
            for span in spans:
                src = open_journal(span.path)
                try:
                    kernel = _copy_span(src, out, span, kernel)
                finally:
                    os.close(src)
        finally:
            os.close(out)
    return path


def _copy_span(src: int, out: int, span: Span, kernel: bool) -> bool:
    """Append ``span`` of ``src`` to ``out``; whether the kernel may still be asked to copy."""
    pos = span.start
    while pos < span.end:
        n = 0
        if kernel:
            try:
                n = os.copy_file_range(src, out, span.end - pos, pos)
            except OSError as exc:
                if exc.errno not in KERNEL_COPY_REFUSED:
                    raise
                kernel = False  # this file pair, and the rest of the ingest: read and written
        if not kernel:
            data = os.pread(src, min(span.end - pos, COPY_CHUNK), pos)
            _write_all(out, data)
            n = len(data)
        if n == 0:
            raise OSError(f"{span.path} shrank while being ingested")
        pos += n
    return kernel


@contextlib.contextmanager
def _removed_on_error(path: Path) -> Iterator[None]:
    """Remove the scratch file ``path`` when the block fails (a full disk: it is of no use)."""
    try:
        yield
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _insert(
    con: duckdb.DuckDBPyConnection,
    batch: _Batch,
    *,
    normalise: bool,
    exact: bool,
    watch: Callable[[float], None] | None = None,
) -> bool:
    """Bulk-insert one scratch file; False if DuckDB cannot read it (``LedgerError`` on the exact
    path, where that can only be a resource problem). ``watch`` is told the INSERT's progress (a
    fraction) while it runs (``_watched``)."""
    for w in batch.works:
        if w.span.truncated:
            con.execute("DELETE FROM events WHERE session_id = ?", [w.session_id])
            con.execute("DELETE FROM ingest_errors WHERE journal = ?", [w.path.name])
    path = str(batch.tmp).replace("'", "''")
    # the fast paths never see a line over MAX_LINE (_LongLine); the exact path's lines were written again
    most = MAX_LINE + EXACT_SLACK if exact else MAX_LINE
    columns = f"columns={read_json_columns()}, maximum_object_size={most}"
    src = f"read_json('{path}', format='newline_delimited', {columns})"
    select = normalise_select(src) if normalise else f"SELECT * FROM {src}"
    try:
        with _watched(con, watch):
            con.execute(f"INSERT INTO events {select}").fetchall()  # complete it before the next statement
    except duckdb.Error as exc:
        if exact:  # msgspec wrote these lines: only a resource problem (memory, disk) can refuse them
            raise LedgerError(f"ingest failed, nothing was stored: {one_line(exc)}") from None
        return False
    finally:
        batch.tmp.unlink(missing_ok=True)
    return True


@contextlib.contextmanager
def _watched(con: duckdb.DuckDBPyConnection, watch: Callable[[float], None] | None) -> Iterator[None]:
    """Tell ``watch`` DuckDB's progress of the statement the block runs (a fraction, every
    ``WATCH_S``) from a thread, so that one large INSERT still moves a progress bar. An exception
    ``watch`` raises interrupts the statement and is raised in its place."""
    if watch is None:
        yield
        return
    stop = threading.Event()
    raised: list[BaseException] = []

    def poll() -> None:
        while not stop.wait(WATCH_S):
            fraction = con.query_progress()
            if fraction < 0:
                continue
            try:
                watch(min(fraction, 100.0) / 100.0)
            except BaseException as exc:
                raised.append(exc)
                con.interrupt()
                return

    con.execute("SET enable_progress_bar = true")
    con.execute("SET enable_progress_bar_print = false")
    watcher = threading.Thread(target=poll, name="ralph-ingest-progress", daemon=True)
    watcher.start()
    try:
        yield
    except duckdb.InterruptException:
        if not raised:
            raise
    finally:
        stop.set()
        watcher.join()
        with contextlib.suppress(duckdb.Error):  # (refused in a transaction the interrupt aborted)
            con.execute("SET enable_progress_bar = false")
    if raised:
        raise raised[0]


def _verify(con: duckdb.DuckDBPyConnection, works: list[_Work], mark: int, *, normalised: bool) -> bool:
    """Would msgspec have accepted every new row, each session's seqs running
    on without gap or repeat to its last line, with every field present (or
    filled in by ``normalised``)? (A row lacking a field with a default fails the
    fast path as an invalid one does: either way the next mode is tried.)"""
    new = f"FROM events WHERE rowid > {int(mark)}"
    rejected = invalid_rows_predicate()
    if not normalised:
        rejected = f"({rejected}) OR ({lacking_defaults_predicate()})"
    if _scalar(con, f"SELECT count(*) {new} AND ({rejected})"):
        return False
    got = {
        r[0]: r[1:]
        for r in con.execute(
            f"SELECT session_id, min(seq), max(seq), count(*), count(DISTINCT seq) {new} GROUP BY ALL"
        ).fetchall()
    }
    want = {
        w.session_id: (
            w.pos.last_seq + 1,
            w.last_seq,
            w.last_seq - w.pos.last_seq,
            w.last_seq - w.pos.last_seq,
        )
        for w in works
        if w.last_seq != w.pos.last_seq
    }
    return got == want


def _store_positions(con: duckdb.DuckDBPyConnection, works: list[_Work], bad: list[BadLine]) -> None:
    rows = [(w.path.name, w.session_id, w.end, w.last_seq, w.span.head, *w.chain) for w in works]
    bulk_insert(
        con,
        "INSERT OR REPLACE INTO ingest_positions",
        rows,
        ["journal", "session_id", "byte_offset", "last_seq", "head", "chain_last", "chain_on", "chain_break"],
    )
    if bad:
        bulk_insert(
            con,
            "INSERT INTO ingest_errors",
            [(Path(b.path).name, b.line_no, b.reason, b.excerpt) for b in bad],
            ["journal", "line_no", "reason", "excerpt"],
        )


def bulk_insert(
    con: duckdb.DuckDBPyConnection, head: str, rows: Iterable[tuple[Any, ...]], names: list[str]
) -> None:
    """Insert many rows in one statement: a multi-row ``VALUES`` list when they are few (a live
    tail's one or two journals), else through an Arrow table (never one INSERT per row)."""
    rows = list(rows)
    if 0 < len(rows) <= 32:
        values = ", ".join(["(" + ", ".join("?" * len(names)) + ")"] * len(rows))
        con.execute(f"{head} ({', '.join(names)}) VALUES {values}", [v for r in rows for v in r])
        return
    import pyarrow as pa

    cols = list(zip(*rows, strict=True)) or [() for _ in names]
    table = pa.table({n: list(c) for n, c in zip(names, cols, strict=True)})
    con.register("_bulk_rows", table)
    try:
        con.execute(f"{head} SELECT * FROM _bulk_rows")
    finally:
        con.unregister("_bulk_rows")


def _scalar(con: duckdb.DuckDBPyConnection, sql: str) -> Any:
    row = next(iter(con.execute(sql).fetchall()), None)
    return row[0] if row else None


def _drain(feed: queue.Queue[Any], reader: threading.Thread) -> None:
    """Let the reader thread finish and remove scratch files it still made."""
    while reader.is_alive() or not feed.empty():
        try:
            item = feed.get(timeout=0.1)
        except queue.Empty:
            continue
        if isinstance(item, _Batch):
            item.tmp.unlink(missing_ok=True)
