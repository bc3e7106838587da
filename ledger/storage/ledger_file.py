"""The ledger file on disk: connecting to it (owner-only, waiting on or naming the process that
holds its lock), creating it whole (``create_file``), telling damage from other errors and moving
a damaged file aside, and answering a Ctrl-C during long DuckDB work."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, TypeVar

import duckdb

from ledger.core.atomic import TMP_MARK, pid_gone, sweep_temps
from ledger.core.errors import LedgerError, LedgerLocked, one_line
from ledger.core.home import Home
from ledger.core.trust import untrusted

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
    """Why nothing can be written in ``home`` (it is not this user's, its file system is read-only,
    or its folder, journals, scratch folder or ledger file may not be written by this user), or
    ``""`` when it can. Another user's home is read from its journals only (docs/design/homes.md)."""
    refused = untrusted(home.root)
    if refused is not None:
        return refused.problem
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


def connect_file(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A connection to the ledger file at ``path``, created owner-only when it is written."""
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


def connect(path: Path | None, *, read_only: bool = False, wait: float = 0.0) -> duckdb.DuckDBPyConnection:
    """Open a DuckDB file (or memory), waiting up to ``wait`` seconds for a lock."""
    if path is None:
        return duckdb.connect(":memory:")
    deadline = time.monotonic() + wait
    while True:
        try:
            return connect_file(path, read_only)  # owner-only permissions
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
