"""Which process runs a session's loop: one ``ralph-ledger run`` at a time per session.

While ``run`` runs a session (started or resumed) it holds an exclusive ``flock`` on
``<home>/runners/<session>.pid`` (owner only), which holds its pid. A second ``run`` of the same
session finds the lock held and is refused with that pid, before any agent starts. The kernel
releases the lock when its holder ends, killed too, so a runner that died never blocks a resume,
and a pid reused by another process cannot be mistaken for a runner: only the lock says one is
alive, the pid only names it (``docs/runner.md``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from ledger.core.errors import operation
from ledger.core.home import Home, make_root

RUNNERS: Final = "runners"
"""The folder of a home holding its runners' pid files."""

BUSY_WAIT: Final = 0.5
"""Seconds a runner retries a held lock before it refuses (another process may hold it for an
instant, e.g. one reading the pid)."""


class SessionBusy(Exception):
    """Another process runs the session: ``pid`` (0 when it could not be read)."""

    def __init__(self, session_id: str, pid: int) -> None:
        named = f"another process (PID {pid})" if pid else "another process"
        super().__init__(f"session {session_id!r} is already running in {named}: one run at a time")
        self.session_id = session_id
        self.pid = pid


def pid_file(home: Home, session_id: str) -> Path:
    """The pid file of ``session_id``'s runner (``session_id`` already checked)."""
    return home.root / RUNNERS / f"{session_id}.pid"


def _pid_in(fd: int) -> int:
    """The pid a runner wrote in its file (0 while it is being written, or unreadable)."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
    except OSError:
        return 0
    return int(text) if text.isdigit() else 0


@contextlib.contextmanager
def running(home: Home, session_id: str) -> Iterator[None]:
    """Hold the session for this process while the block runs; ``SessionBusy`` if another holds it.
    The pid file is removed when the block ends (one a killed runner left is taken over)."""
    path = pid_file(home, session_id)
    with operation(f"making {path.parent}"):
        make_root(home.root)
        path.parent.mkdir(exist_ok=True, mode=0o700)
    deadline = time.monotonic() + BUSY_WAIT
    while True:
        with operation(f"opening {path}"):
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _pid_in(fd)
            os.close(fd)
            if time.monotonic() >= deadline:
                raise SessionBusy(session_id, pid) from None
            time.sleep(0.02)
            continue
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # its runner ended and removed it meanwhile: take the new one
    try:
        with contextlib.suppress(OSError):  # (a full disk: the lock holds all the same, unnamed)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)  # still locked: no one holds a file about to go
        os.close(fd)
