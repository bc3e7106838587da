"""Which process runs a session's loop: one ``ralph-ledger run`` at a time per session.

While ``run`` runs a session it holds an exclusive ``flock`` on ``<home>/runners/<session>.pid``
(owner only), which names its pid: a second ``run`` of the session is refused with that pid, before
any agent starts. Only the lock, which the kernel releases when its holder dies, says a runner is
alive. The file also lists the process groups of its agent and rules (``agents G:T``, ``T`` the
leader's start time); the next runner that takes a killed runner's file ends those still alive
before any agent starts. Why: docs/runner.md, docs/design/child-processes.md.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from ledger.core.errors import operation
from ledger.core.home import Home, make_root
from ledger.core.processes import alive, end_group

RUNNERS: Final = "runners"
"""The folder of a home holding its runners' pid files."""

BUSY_WAIT: Final = 0.5
"""Seconds a runner retries a held lock before it refuses (another process may hold it for an
instant, e.g. one reading the pid)."""


class SessionBusy(Exception):
    """Another process runs the session: ``pid`` (0 when it could not be read)."""

    def __init__(self, session_id: str, pid: int, *, agent: bool = False) -> None:
        named = f"another process (PID {pid})" if pid else "another process"
        said = f"session {session_id!r} is already running in {named}: one run at a time"
        if agent:
            said = (
                f"session {session_id!r}: the agent of a run that was killed still runs (process group "
                f"{pid}) and cannot be ended: end it (kill -KILL -{pid}), then resume"
            )
        super().__init__(said)
        self.session_id = session_id
        self.pid = pid


def pid_file(home: Home, session_id: str) -> Path:
    """The pid file of ``session_id``'s runner (``session_id`` already checked)."""
    return home.root / RUNNERS / f"{session_id}.pid"


def _text_of(fd: int) -> str:
    """What a runner wrote in its file (``""`` while it is being written, or unreadable)."""
    try:
        return os.pread(fd, 4096, 0).decode("ascii", errors="replace")
    except OSError:
        return ""


def _pid_in(fd: int) -> int:
    """The pid a runner wrote in its file (0 while it is being written, or unreadable)."""
    lines = _text_of(fd).splitlines()
    first = lines[0].strip() if lines else ""
    return int(first) if first.isdigit() else 0


def _groups_in(text: str) -> list[tuple[int, str]]:
    """The agent groups a runner's file lists: (group, its leader's start time)."""
    out: list[tuple[int, str]] = []
    for line in text.splitlines()[1:]:
        word, _, rest = line.partition(" ")
        if word != "agents":
            continue
        for item in rest.split():
            group, _, started = item.partition(":")
            if group.isdigit() and int(group) > 1:
                out.append((int(group), started))
    return out


def start_time(pid: int) -> str:
    """Process ``pid``'s start time (clock ticks after boot, ``/proc/PID/stat``; ``""``: gone or
    unknown)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("ascii", errors="replace")
        return stat[stat.rindex(")") + 2 :].split()[19]
    except (OSError, ValueError, IndexError):
        return ""


def _left_running(group: int, started: str) -> bool:
    """Whether ``group`` is still the group a killed runner listed: alive, and its leader either
    gone (a group's number is not given to another process while it has members) or the same."""
    if not alive(group):
        return False
    now = start_time(group)
    return not now or now == started


@dataclass(slots=True)
class Claim:
    """A runner's hold on its session: the file it holds, and the groups of agents a killed runner
    left that this one ended when it took the session."""

    session_id: str
    fd: int
    ended: list[int] = field(default_factory=list)

    def note(self, groups: Sequence[int]) -> None:
        """Write the groups this runner's children lead into its file (for ``ledger.core.processes``)."""
        listed = " ".join(f"{g}:{start_time(g)}" for g in groups)
        text = f"{os.getpid()}\n" + (f"agents {listed}\n" if listed else "")
        data = text.encode()
        with contextlib.suppress(OSError):  # the pid first, always there for a runner refused meanwhile
            os.pwrite(self.fd, data, 0)
            os.ftruncate(self.fd, len(data))


def _end_left(claim: Claim, text: str) -> None:
    """End the groups a killed runner's file lists that still run; ``SessionBusy`` naming a group
    that cannot be ended (not ours to kill)."""
    for group, started in _groups_in(text):
        if not _left_running(group, started):
            continue
        if not end_group(group):
            raise SessionBusy(claim.session_id, group, agent=True)
        claim.ended.append(group)


@contextlib.contextmanager
def running(home: Home, session_id: str) -> Iterator[Claim]:
    """Hold the session for this process while the block runs; ``SessionBusy`` if another holds it.
    The pid file is removed when the block ends (one a killed runner left is taken over, and the
    agents it lists that still run are ended first: ``Claim.ended``)."""
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
    claim = Claim(session_id, fd)
    try:
        _end_left(claim, _text_of(fd))
    except BaseException:
        os.close(fd)  # the file keeps naming the group for the next try
        raise
    try:
        claim.note(())  # (a full disk: the lock holds all the same, unnamed)
        yield claim
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)  # still locked: no one holds a file about to go
        os.close(fd)
