"""The warm worker's hold on its home (docs/design/warm-worker.md): its lock (:func:`hold`), its
socket (:class:`Listener`), who may talk to it (:func:`trusted`), and the beats that tell the hook
waiting for a stop that the worker is not stuck (:class:`Beats`)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import socket
import stat
import time
from pathlib import Path

from ledger.core.atomic import pid_gone
from ledger.drivers.claude_code.stop.warm import BEAT, BEATING, address
from ledger.drivers.claude_code.stop.warm_checks import peer


def sweep_sockets(path: Path) -> None:
    """Remove the temporary sockets (``.stop-worker.sock.PID``) of workers killed while starting;
    the caller holds the home's worker lock, so no live worker is binding one."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.(\d+)")
    with contextlib.suppress(OSError):
        for entry in os.scandir(path.parent):
            m = pattern.fullmatch(entry.name)
            if m and pid_gone(int(m[1])):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def hold(path: Path) -> int | None:
    """The home's worker lock, held (its file says which process serves); None when another worker
    holds it, or the file is not this user's own plain file: a symlink is never followed (a planted
    one must not truncate what it points at), nor another user's file or a hard link written to."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except OSError:  # a symlink (ELOOP), a folder, no permission
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_nlink != 1:
        os.close(fd)
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())  # who serves (to stop it: SIGTERM that pid)
    return fd


class Listener:
    """The worker's socket, bound and listening under a temporary name, then renamed into place: a
    hook never finds a socket that refuses it (it would start a second worker, which would take
    over this one's lock). Owner-only from its creation (umask), never ``chmod``-ed by name."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        fresh = path.with_name(f".{path.name}.{os.getpid()}")
        fresh.unlink(missing_ok=True)
        where, folder = address(str(fresh))  # (a long home's: through its folder's descriptor)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            if not where:
                raise OSError(f"{fresh}: too long a path for a socket")
            server.bind(where)
        finally:
            os.umask(old)
            if folder is not None:
                os.close(folder)
        self.ident = os.lstat(fresh).st_ino
        server.listen(16)
        server.settimeout(timeout)
        os.replace(fresh, path)
        self.server = server

    def here(self) -> bool | None:
        """Whether the socket is still in place: True; None when it is gone (removed: bind it
        again); False when something else took its name (leave it)."""
        try:
            return os.lstat(self.path).st_ino == self.ident
        except FileNotFoundError:
            return None
        except OSError:
            return False

    def remove(self) -> None:
        """Remove the socket if it is still this one's."""
        with contextlib.suppress(OSError):
            if self.here():
                self.path.unlink()

    def close(self) -> None:
        """Stop listening (the socket's file is left to :meth:`remove`)."""
        self.server.close()


def trusted(conn: socket.socket) -> bool:
    """Whether the process at the other end of ``conn`` is this user's (``SO_PEERCRED``)."""
    try:
        who = peer(conn)
    except OSError:
        return False
    return who is not None and who[1] == os.geteuid()


class Beats:
    """A thread that sends :data:`warm.BEATING` every :data:`warm.BEAT` seconds on the connection of
    the stop being served, until its reply: the hook waiting for it tells a slow stop (a long rule)
    from a stuck worker (stopped, hung), which goes silent (``warm._awaited``)."""

    def __init__(self) -> None:
        import threading

        self.lock = threading.Lock()
        self.conn: socket.socket | None = None
        self.active = threading.Event()
        threading.Thread(target=self._run, name="stop-beats", daemon=True).start()

    def serving(self, conn: socket.socket | None) -> None:
        """Beat on ``conn`` from now on (None: stop beating; once this returns, no beat follows)."""
        with self.lock:
            self.conn = conn
            if conn is None:
                self.active.clear()
            else:
                self.active.set()

    def _run(self) -> None:
        while True:
            self.active.wait()
            time.sleep(BEAT)
            with self.lock:
                if self.conn is not None:
                    with contextlib.suppress(OSError):
                        self.conn.send(BEATING, socket.MSG_DONTWAIT)
