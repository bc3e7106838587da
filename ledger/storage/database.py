"""The DuckDB ledger: opening it (locks, fallback, rebuild), and its views.

The ``events`` table is derived from the vocabulary (``ledger.storage.schema``),
filled by ``ledger.storage.ingest``, and read through the views and detectors of
``ledger.storage.sql``. The file can be deleted at any time: it is rebuilt from the
journals. A file DuckDB cannot read (corrupt, truncated) is moved aside as
``ledger.duckdb.corrupt-<timestamp>`` and rebuilt the same way.

A new ledger file is created whole or not at all (``create_file``): a full disk never leaves a
half-made file that the next command would take for a damaged one. A write that fails later (an
ingest's commit on a full disk) is undone by DuckDB and leaves the file as it was.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypeVar

import duckdb

from ledger.core.atomic import TMP_MARK, pid_gone, sweep_temps, temp_name
from ledger.core.errors import LedgerError, LedgerLocked, one_line, operation
from ledger.core.home import Home
from ledger.storage.ingest import IngestReport, ingest, sweep_scratch
from ledger.storage.schema import SCHEMA_VERSION as EVENTS_VERSION
from ledger.storage.schema import create_events_sql
from ledger.storage.sql import load_definitions

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
# What DuckDB says of a file it cannot read as a database (checksum mismatch, truncated, not one).
DAMAGE_SIGNS: Final = ("corrupt database file", "not a valid duckdb database", "could not read enough bytes")


def describe_holder(message: str) -> str:
    """'PID 123 (ralph-tui)' from a DuckDB lock error: the holder's pid and program, as far as known."""
    m = re.search(r"PID (\d+)", message)
    if not m:
        return "another process"
    pid = m.group(1)
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        argv = []
    program = program_of([a for a in argv if a])
    return f"PID {pid}" + (f" ({program})" if program else "")


_PYTHON: Final = re.compile(r"python[0-9.]*")
_PYTHON_OPTIONS_WITH_VALUE: Final = frozenset({"-W", "-X", "--check-hash-based-pycs"})
_LEDGER_OPTIONS_WITH_VALUE: Final = frozenset({"--home", "--wait"})


def program_of(argv: Sequence[str]) -> str:
    """The program a command line runs, as a user names it: ``ralph-tui``, ``ralph-ledger sql``,
    ``python -m pytest``, ``duckdb``; a Python interpreter stands for the script it runs. ``""``
    for an empty command line."""
    if not argv:
        return ""
    words = list(argv)
    program = os.path.basename(words[0])
    rest = words[1:]
    if _PYTHON.fullmatch(program):
        i = 0
        program = "python"
        while i < len(rest):
            word = rest[i]
            if word in ("-m", "-c"):
                module = rest[i + 1] if word == "-m" and i + 1 < len(rest) else ""
                if module == "ledger.cli":
                    program, rest = "ralph-ledger", rest[i + 2 :]
                else:
                    program, rest = f"python {word} {module}".rstrip(), []
                break
            if not word.startswith("-"):
                program, rest = os.path.basename(word), rest[i + 1 :]
                break
            i += 2 if word in _PYTHON_OPTIONS_WITH_VALUE else 1
        else:
            rest = []
    if program == "ralph-ledger":
        i = 0
        while i < len(rest):
            word = rest[i]
            if not word.startswith("-"):
                return f"{program} {word}"
            i += 2 if word in _LEDGER_OPTIONS_WITH_VALUE else 1
    return program


def unwritable(home: Home) -> str:
    """Why nothing can be written in ``home`` (its file system is read-only, or its folder, journals,
    scratch folder or ledger file may not be written by this user), or ``""`` when it can."""
    try:
        if os.statvfs(home.root).f_flag & os.ST_RDONLY:
            return "a read-only file system"
    except OSError:
        return ""  # it does not exist (yet): it is created
    for path in (home.root, home.journals, home.tmp, home.database):
        if path.exists() and not os.access(path, os.W_OK):
            return f"{path} is not writable"
    return ""


T = TypeVar("T")


def interruptible(con: duckdb.DuckDBPyConnection, work: Callable[[], T]) -> T:
    """``work()`` (queries on ``con``) in a worker thread, so that Ctrl-C in the main thread
    interrupts the running query at once (DuckDB holds the main thread while it runs): raises
    ``KeyboardInterrupt`` once the query has stopped (or after 2 s)."""
    done: list[T] = []
    failed: list[BaseException] = []
    finished = threading.Event()  # not Thread.join: a join interrupted by Ctrl-C takes the thread for ended

    def target() -> None:
        try:
            done.append(work())
        except BaseException as exc:
            failed.append(exc)
        finally:
            finished.set()

    threading.Thread(target=target, name="ledger-query", daemon=True).start()
    try:
        while not finished.wait(0.1):  # a signal handler runs between two waits
            pass
    except KeyboardInterrupt:
        con.interrupt()
        finished.wait(2.0)
        raise
    if failed:
        raise failed[0]
    return done[0]


_UMASK_LOCK: Final = threading.RLock()


@contextlib.contextmanager
def owner_only() -> Iterator[None]:
    """While it lasts, files this process creates get no group or other permissions: DuckDB creates
    the ledger, its WAL (anew after every checkpoint) and its spill files with the umask. The umask
    is process-wide, so the changes are serialised and always undone."""
    with _UMASK_LOCK:
        old = os.umask(0o077)
        try:
            yield
        finally:
            os.umask(old)


def restrict(path: Path) -> None:
    """Drop group and other permissions from the ledger file and its WAL (a ledger created by an
    older version has the umask's)."""
    for p in (path, path.with_name(path.name + ".wal")):
        with contextlib.suppress(OSError):
            mode = stat.S_IMODE(os.stat(p).st_mode)
            if mode & 0o077:
                os.chmod(p, mode & 0o700)


def _connect_file(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    with owner_only():
        con = duckdb.connect(str(path), read_only=read_only)
    if not read_only:
        restrict(path)
    return con


def sweep_builds(path: Path) -> None:
    """Remove the new ledger files (and their WALs) that processes killed while creating the ledger
    file ``path`` left beside it (named as ``ledger.core.atomic`` names temp files; a live process's
    build is kept)."""
    sweep_temps(path)
    prefix = f".{path.name}.{TMP_MARK}."
    try:
        names = os.listdir(path.parent)
    except OSError:
        return
    for name in names:
        if not (name.startswith(prefix) and name.endswith(".wal")):
            continue
        pid = name[len(prefix) :].partition(".")[0]
        if pid.isdigit() and pid_gone(int(pid)):
            with contextlib.suppress(OSError):
                os.unlink(path.parent / name)


def create_file(path: Path) -> None:
    """Create an empty ledger file (its tables, checkpointed: no WAL) at ``path``, whole or not at
    all: it is built in a temp file beside it and linked into place once complete, so a failure (a
    full disk) leaves no file that could later be taken for a damaged one. A file another process
    placed meanwhile is kept. Raises ``LedgerError`` (one line, naming ``path``)."""
    sweep_builds(path)
    tmp = path.with_name(temp_name(path.name))
    try:
        try:
            con = _connect_file(tmp, read_only=False)
            try:
                Ledger(con, None, path=tmp).con.execute("CHECKPOINT")
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


def connect(path: Path | None, *, read_only: bool = False, wait: float = 0.0) -> duckdb.DuckDBPyConnection:
    """Open a DuckDB file (or memory), waiting up to ``wait`` seconds for a lock."""
    if path is None:
        return duckdb.connect(":memory:")
    deadline = time.monotonic() + wait
    while True:
        try:
            return _connect_file(path, read_only)  # owner-only permissions
        except duckdb.IOException as exc:
            if not is_lock_error(exc):
                raise LedgerError(f"cannot open ledger {path}: {one_line(exc)}") from None
            if time.monotonic() >= deadline:
                raise LedgerLocked(path, describe_holder(str(exc))) from None
            time.sleep(0.05)
        except duckdb.Error as exc:
            raise LedgerError(
                f"cannot open ledger {path}: {one_line(exc)} "
                "(run 'ralph-ledger rebuild' to recreate it from the journals)"
            ) from None


def is_lock_error(exc: BaseException) -> bool:
    """Whether a DuckDB error says that another process holds the file ("lock", not "block")."""
    return re.search(r"\block", str(exc).lower()) is not None


def damage_of(exc: BaseException, path: Path) -> str:
    """DuckDB's first line if ``exc`` (or an error it was raised from) says that the file ``path``
    cannot be read as a database, else ``""``. A lock error never counts."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, duckdb.Error):
            if is_lock_error(seen):
                return ""
            text = str(seen).strip()
            low = text.lower()
            mentions = "corrupt database file" in low or str(path) in text  # the former names no file
            if mentions and any(sign in low for sign in DAMAGE_SIGNS):
                return one_line(text)
        seen = seen.__cause__ or seen.__context__
    return ""


def set_aside(path: Path, exc: BaseException) -> bool:
    """If ``exc`` says that the ledger file ``path`` cannot be read as a database, move the file
    (and its WAL) to ``<name>.corrupt-<UTC timestamp>`` and say so in one line on stderr. False
    when ``exc`` is another error, or another process holds the file (then it is left alone)."""
    damage = damage_of(exc, path)
    if not damage:
        return False
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return True  # already moved (by another process)
    except OSError:
        return False
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the lock DuckDB takes: nobody has it open
        except OSError:
            return False
        aside = path.with_name(f"{path.name}.corrupt-{datetime.now(UTC):%Y%m%dT%H%M%S.%fZ}")
        os.rename(path, aside)
        with contextlib.suppress(FileNotFoundError):
            os.rename(f"{path}.wal", f"{aside}.wal")
    finally:
        os.close(fd)
    print(
        f"ralph-ledger: ledger {path} cannot be read ({damage}); moved it aside to {aside.name} "
        "and rebuilding it from the journals",
        file=sys.stderr,
    )
    return True


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
        self.scratch: Path | None = None
        """Where ingest writes its scratch files, when not in the home's ``tmp/``."""
        con.execute("SET TimeZone = 'UTC'")  # the ledger's times are UTC, and shown as such
        # Rows are always read back ordered by (session_id, seq), so DuckDB may
        # insert in parallel without keeping file order: ~1.6x faster ingest.
        con.execute("SET preserve_insertion_order = false")
        if writable:
            with self._private():
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
        its scratch files go to the system's temporary folder when the home is not writable."""
        print(f"ralph-ledger: {why}; reading the journals instead", file=sys.stderr)
        mem = cls.memory(home)
        if unwritable(home):
            mem.scratch = Path(tempfile.gettempdir())
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
            for table in ("events", "ingest_positions", "ingest_errors"):
                self.con.execute(f"DROP TABLE IF EXISTS {table}")
        for ddl in TABLES[1:]:
            self.con.execute(ddl)
        self.con.execute(create_events_sql())
        self.con.execute("INSERT OR REPLACE INTO ledger_meta VALUES ('schema_version', ?)", [SCHEMA_VERSION])

    # -- ingest ------------------------------------------------------------
    def ingest(self, journals: Sequence[Path] | None = None, *, live: bool = False) -> IngestReport:
        """Ingest what is new in the journals (all of the home's by default); ``live`` for a tail's
        small, frequent appends (see ``ledger.storage.ingest.ingest``)."""
        files = list(journals) if journals is not None else self._journals()
        # (a live tail's frequent small ingests leave the scratch sweep to the others)
        return self._write(lambda: ingest(self.con, files, self._tmp(), live=live), sweep=not live)

    def rebuild(self) -> IngestReport:
        """Forget everything ingested and read every journal again."""

        def empty_then_ingest() -> IngestReport:
            con = self.con
            con.execute("BEGIN TRANSACTION")
            con.execute("DELETE FROM events")
            con.execute("DELETE FROM ingest_positions")
            con.execute("DELETE FROM ingest_errors")
            con.execute("COMMIT")
            return ingest(self.con, self._journals(), self._tmp())

        return self._write(empty_then_ingest, sweep=True)

    def _journals(self) -> list[Path]:
        return self.home.journal_files() if self.home else []

    def _tmp(self) -> Path:
        if self.scratch is not None:
            return self.scratch
        return self.home.tmp if self.home else Path(tempfile.gettempdir())

    def _write(self, work: Callable[[], IngestReport], *, sweep: bool) -> IngestReport:
        """Run an ingest: owner-only files, a damaged file mended; first, with ``sweep``, remove
        the scratch files that killed ingests left in the home (and new ledger files that killed
        processes were creating)."""
        if not self.writable:
            raise LedgerError("this ledger was opened read-only; it cannot ingest")
        if self.home and sweep and self.scratch is None:
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
            self.con = self._open_file(self.home).con
        return ingest(self.con, self.home.journal_files(), self.home.tmp)

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
