"""Append-only per-session journals (JSON Lines), the source of truth.

Appending takes an exclusive ``flock``, finds the next ``seq`` from the last complete line (and from
the last line the link of the first event: ``ledger.storage.chain``), writes
the whole append with one ``os.write`` on an ``O_APPEND`` descriptor (cut back to its old size if
the write fails: all or nothing) and by default fsyncs; a torn last line is first closed with a
newline. Reading is incremental from a byte offset and never raises on bad data (``BadLine``; a line
over ``MAX_LINE`` is one). A journal is opened only as a regular file, never through a symbolic link
(:func:`open_journal`). The rules: docs/ledger.md#journals,
docs/reliability.md#one-append-all-or-nothing, docs/design/homes.md.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import msgspec

from ledger import events as ev
from ledger.core.errors import operation, printable
from ledger.core.home import JOURNAL_SUFFIX, make_root
from ledger.core.trust import unsafe_folder
from ledger.storage import chain

SESSION_ID_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
FIRST_BLOCK: Final = 4096  # most lines are shorter: read that much first
TAIL_CHUNK: Final = 64 * 1024
HEAD_BYTES: Final = 256
FILE_MODE: Final = 0o600
MAX_LINE: Final = 16 * 1024 * 1024
"""The most bytes a journal line holds (its newline not counted): a longer one is a bad line and the
rest is read (DuckDB's JSON reader, at this ``maximum_object_size``, refuses some: docs/design/homes.md)."""
READ: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
APPEND: Final = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The current time as an aware UTC datetime (the default clock)."""
    return datetime.now(UTC)


class JournalError(Exception):
    """A journal cannot be used as asked (bad session id, unreadable file)."""


def check_session_id(session_id: str) -> str:
    """Session ids name files, so they are restricted to a safe alphabet."""
    if not SESSION_ID_RE.match(session_id):
        raise JournalError(
            f"invalid session id {session_id!r}: expected 1-128 characters of "
            "letters, digits, '.', '_' or '-', not starting with a punctuation mark"
        )
    return session_id


def journal_path(journals_dir: Path, session_id: str) -> Path:
    """The journal file of ``session_id`` in ``journals_dir``; raises ``JournalError`` for an invalid id."""
    return journals_dir / f"{check_session_id(session_id)}{JOURNAL_SUFFIX}"


def open_journal(path: str | os.PathLike[str], flags: int = READ) -> int:
    """A descriptor on the journal ``path`` (``flags``: ``READ`` or ``APPEND``), which must be a
    regular file reached without following a symbolic link (``O_NOFOLLOW``; a FIFO is not waited
    on): an ``OSError`` naming the file otherwise (to read, a link to nothing is no journal at all:
    ``FileNotFoundError``)."""
    try:
        fd = os.open(path, flags, FILE_MODE)
    except OSError as exc:
        if exc.errno != errno.ELOOP or not os.path.islink(path):
            raise
        if flags == READ and not os.path.exists(path):  # a dangling link: no journal to read
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), os.fspath(path)) from None
        raise OSError(errno.ELOOP, "refused: a symbolic link, not a journal", os.fspath(path)) from None
    try:
        mode = os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "refused: not a regular file, not a journal", os.fspath(path))
    return fd


def head_hash(data: bytes) -> str:
    """Fingerprint of a journal's first line (``"length:hash"``), which never
    changes once written, so a replaced or rewritten file is noticed."""
    first = data[: data.find(b"\n") + 1] or data[:HEAD_BYTES]
    return f"{len(first)}:{chain.blake2b(first, digest_size=8).hexdigest()}"


class BadLine(msgspec.Struct, frozen=True):
    """A journal line that could not be decoded; nothing is dropped silently."""

    path: str
    line_no: int
    reason: str
    excerpt: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line_no}: {self.reason}"


class Chunk(msgspec.Struct, frozen=True):
    """The complete lines of a journal between two byte offsets."""

    path: str
    start: int
    end: int
    first_line_no: int
    data: bytes
    truncated: bool = False
    line_count: int = 0


class Span(msgspec.Struct, frozen=True):
    """Where a journal's new complete lines are, found without reading them."""

    path: str
    start: int
    end: int
    truncated: bool = False
    head: str = ""
    last_line: bytes = b""

    @property
    def empty(self) -> bool:
        """Whether there are no new complete lines."""
        return self.end <= self.start


def locate_new(path: Path, offset: int = 0, head: str = "") -> Span:
    """The span of complete lines after ``offset`` (a partial last line is
    left for later), the journal's head fingerprint and its last complete line.

    ``truncated`` is set when the file is now shorter than ``offset`` or its
    first line no longer matches ``head``: the span then starts over at 0.
    """
    fd = open_journal(path)
    try:
        size = os.fstat(fd).st_size
        truncated = size < offset
        if offset and head and not truncated:
            length = int(head.split(":", 1)[0])
            truncated = head_hash(os.pread(fd, length, 0)) != head
        if truncated:
            offset = 0
        end = max(offset, _rfind_newline(fd, size) + 1)
        if end == offset:
            return Span(str(path), offset, offset, truncated, "" if truncated else head)
        if offset == 0:
            first = os.pread(fd, min(end, FIRST_BLOCK), 0)
            if b"\n" not in first:
                first = os.pread(fd, min(end, TAIL_CHUNK), 0)
            head = head_hash(first)
        last_start = max(offset, _rfind_newline(fd, end - 1) + 1)
        last = os.pread(fd, end - 1 - last_start, last_start)
        return Span(str(path), offset, end, truncated, head, last)
    finally:
        os.close(fd)


def read_span(span: Span, first_line_no: int) -> Chunk:
    """The bytes of a span, as a chunk whose first line is ``first_line_no``."""
    fd = open_journal(span.path)
    try:
        data = os.pread(fd, span.end - span.start, span.start)
    finally:
        os.close(fd)
    data = data[: data.rfind(b"\n") + 1]  # the file may have been replaced meanwhile
    return Chunk(
        span.path, span.start, span.start + len(data), first_line_no, data, span.truncated, data.count(b"\n")
    )


def count_lines(path: Path | str, end: int) -> int:
    """Newlines in the first ``end`` bytes of a file (line numbers for reports)."""
    fd = open_journal(path)
    try:
        n, pos = 0, 0
        while pos < end:
            block = os.pread(fd, min(1 << 22, end - pos), pos)
            if not block:
                break
            n += block.count(b"\n")
            pos += len(block)
        return n
    finally:
        os.close(fd)


def read_range(path: Path | str, start: int = 0, end: int | None = None) -> bytes:
    """The bytes of a journal from ``start`` to ``end`` (its end when None)."""
    fd = open_journal(path)
    try:
        end = os.fstat(fd).st_size if end is None else end
        parts = []
        while start < end:
            block = os.pread(fd, min(end - start, 1 << 26), start)
            if not block:
                break
            parts.append(block)
            start += len(block)
        return b"".join(parts)
    finally:
        os.close(fd)


def read_chunk(path: Path, offset: int = 0, line_no: int = 0, head: str = "") -> Chunk:
    """Read the complete lines after ``offset`` (``line_no`` lines precede it)."""
    span = locate_new(path, offset, head)
    return read_span(span, 1 if span.truncated else line_no + 1)


def excerpt(line: bytes, limit: int = 120) -> str:
    """``line`` as text (bad UTF-8 replaced), cut to ``limit`` characters plus '…'."""
    text = line.decode("utf-8", "replace")
    return text if len(text) <= limit else text[:limit] + "…"


def bad_reason(line: bytes, exc: Exception) -> str:
    """Why a line is not an event, in words a user can act on."""
    if not line.strip():
        return "empty line: expected one JSON event"
    if isinstance(exc, msgspec.ValidationError):  # it may quote a value: kept on one printable line
        return "not a valid event: " + printable(str(exc))
    if str(exc) == "Input data was truncated":
        return "torn line (incomplete JSON, e.g. a crash mid-append): expected one JSON event"
    return f"not valid JSON ({exc}): expected one JSON event"


def has_long_line(data: bytes) -> bool:
    """Whether a line of ``data`` (complete lines) holds more than ``MAX_LINE`` bytes; a look for a
    newline every ``MAX_LINE`` bytes, not a split."""
    pos, end = 0, len(data)
    while end - pos > MAX_LINE:
        newline = data.rfind(b"\n", pos, pos + MAX_LINE + 1)
        if newline < 0:
            return True
        pos = newline + 1
    return False


def span_has_long_line(span: Span) -> bool:
    """Whether a line of ``span`` (complete lines) holds more than ``MAX_LINE`` bytes: from each
    line start, a newline is looked for backwards from ``MAX_LINE`` bytes on, which reads a few
    kilobytes per 16 MiB of short lines (DuckDB takes some longer lines and not others, depending
    on where they fall: the ingest's fast paths are kept from all of them)."""
    if span.end - span.start <= MAX_LINE + 1:
        return False
    fd = open_journal(span.path)
    try:
        pos = span.start
        while span.end - pos > MAX_LINE + 1:
            newline = _rfind_newline(fd, pos + MAX_LINE + 1, pos)
            if newline < 0:
                return True
            pos = newline + 1
        return False
    finally:
        os.close(fd)


def long_line(line: bytes) -> str:
    """Why a line over ``MAX_LINE`` is not read, or ``""`` for one that is not."""
    if len(line) <= MAX_LINE:
        return ""
    return f"line of {len(line):,} bytes, over the {MAX_LINE:,} a journal line may hold: not read"


def decode_chunk(chunk: Chunk) -> tuple[list[tuple[int, ev.AnyEvent]], list[BadLine]]:
    """Decode every line of a chunk as (line number, event); bad lines (a line over ``MAX_LINE``
    among them) are collected."""
    first = chunk.first_line_no
    long = len(chunk.data) > MAX_LINE and has_long_line(chunk.data)
    if not long:
        try:
            return list(enumerate(ev.decode_lines(chunk.data), first)), []
        except (msgspec.DecodeError, msgspec.ValidationError):
            pass
    good: list[tuple[int, ev.AnyEvent]] = []
    bad: list[BadLine] = []
    for line_no, line in enumerate(chunk.data.split(b"\n")[:-1], first):
        if long and (why := long_line(line)):
            bad.append(BadLine(chunk.path, line_no, why, excerpt(line)))
            continue
        try:
            good.append((line_no, ev.decode(line)))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            bad.append(BadLine(chunk.path, line_no, bad_reason(line, exc), excerpt(line)))
    return good, bad


class Cursor(msgspec.Struct):
    """Where an incremental reader of one journal stands."""

    offset: int = 0
    line_no: int = 0
    head: str = ""


class ReadResult(msgspec.Struct):
    """What ``read_new`` found: the events, the bad lines, and whether the journal was truncated or
    replaced (reading then started over at 0).
    """

    events: list[ev.AnyEvent] = msgspec.field(default_factory=list)
    bad: list[BadLine] = msgspec.field(default_factory=list)
    truncated: bool = False


def read_new(path: Path, cursor: Cursor) -> ReadResult:
    """Read what was appended since ``cursor`` and advance it."""
    chunk = read_chunk(path, cursor.offset, cursor.line_no, cursor.head)
    good, bad = decode_chunk(chunk)
    cursor.offset, cursor.line_no = chunk.end, chunk.first_line_no - 1 + chunk.line_count
    if chunk.start == 0 and chunk.data:
        cursor.head = head_hash(chunk.data)
    return ReadResult([e for _, e in good], bad, chunk.truncated)


def _rfind_newline(fd: int, end: int, floor: int = 0) -> int:
    """Offset of the last b"\\n" before ``end`` (at ``floor`` or after), or -1; reads backwards in
    blocks, small first."""
    block = FIRST_BLOCK
    while end > floor:
        start = max(floor, end - block)
        i = os.pread(fd, end - start, start).rfind(b"\n")
        if i >= 0:
            return start + i
        end, block = start, TAIL_CHUNK
    return -1


def _last_seq(fd: int, size: int) -> tuple[int, bool, bytes | None]:
    """(seq of the last decodable complete line, whether the file ends mid-line, the file's last line
    as the next append leaves it: the link of the next event is its hash; ``None`` when empty)."""
    if size == 0:
        return 0, False, None
    end = _rfind_newline(fd, size) + 1  # just past the last complete line
    torn = end != size
    last: bytes | None = None
    if torn:  # a writer killed just before a line's newline left a whole event: the append ends
        last = os.pread(fd, size - end, end)  # that line, so the event counts (else the next
        try:  # event would repeat its seq)
            return ev.decode(last).seq, torn, last
        except (msgspec.DecodeError, msgspec.ValidationError):
            pass
    while end > 0:
        start = _rfind_newline(fd, end - 1) + 1
        line = os.pread(fd, end - 1 - start, start)
        last = line if last is None else last
        try:
            return ev.decode(line).seq, torn, last
        except (msgspec.DecodeError, msgspec.ValidationError):
            end = start
    return 0, torn, last


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Journal:
    """One session's append-only journal file. ``check``, when given, runs under the lock before each
    append: what it raises aborts the append, nothing written (``Engine.start``: a session is started
    once, however many processes start it at the same time)."""

    def __init__(
        self,
        path: Path,
        *,
        fsync: bool = True,
        clock: Clock = utc_now,
        check: Callable[[], None] | None = None,
    ) -> None:
        self.path = path
        self.fsync = fsync
        self.clock = clock
        self.check = check

    @classmethod
    def for_session(cls, journals_dir: Path, session_id: str, **kw: bool | Clock) -> Journal:
        """The journal of ``session_id`` in ``journals_dir``; ``fsync`` and ``clock`` go to ``Journal``."""
        return cls(journal_path(journals_dir, session_id), **kw)  # type: ignore[arg-type]

    @contextmanager
    def _locked(self) -> Iterator[int]:
        # The journals directory and the home above it (which will hold the ledger), owner only; one
        # there already must be this user's, writable by no one else (docs/design/homes.md).
        folder = self.path.parent
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        except FileNotFoundError:
            make_root(folder.parent)
            folder.mkdir(exist_ok=True, mode=0o700)
        refused = unsafe_folder(os.fspath(folder), os.stat(folder))
        if refused is not None:
            raise refused
        fd = open_journal(self.path, APPEND)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield fd
        finally:
            os.close(fd)  # closing releases the lock

    def append(self, *events: ev.Event) -> list[ev.Event]:
        """Append events with the next seqs, all or none (see the module docstring); returns them as
        written. Raises ``OSError`` when they could not be written; the journal is then unchanged."""
        with operation(f"appending to the journal {self.path}"), self._locked() as fd:
            if self.check is not None:
                self.check()
            rfd = open_journal(self.path)
            try:
                seq, torn, last = _last_seq(rfd, os.fstat(rfd).st_size)
            finally:
                os.close(rfd)
            written: list[ev.Event] = []
            lines: list[bytes] = []
            prev = (chain.START if last is None else chain.link_of(last)) if chain.LINKING else ""
            for e in events:  # each linked to the line before it (docs/design/hash-chain.md)
                seq += 1
                ts = e.ts if e.ts != ev.EPOCH else self.clock()
                e = msgspec.structs.replace(e, seq=seq, ts=ts.astimezone(UTC), prev=prev)
                written.append(e)
                lines.append(ev.encode(e))
                prev = chain.link_of(lines[-1][:-1]) if chain.LINKING else ""
            data = b"".join(lines)
            size = os.fstat(fd).st_size
            try:
                _write_all(fd, (b"\n" if torn else b"") + data)
                if self.fsync:
                    os.fsync(fd)
            except BaseException:  # a short write (full disk), an error, a signal: none of it stays
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                raise
        return written

    def read_all(self) -> ReadResult:
        """Read the whole journal from the start."""
        return read_new(self.path, Cursor())
