"""The warm stop worker's process: it serves a home's stops (drop-in and ledger-native) over the
socket ``ledger.drivers.claude_code.stop.warm`` (the hook's side) connects to, until idle. DuckDB and the
engine are imported when a ledger-native stop needs them: before listening when such a stop started
the worker or a recent journal is a ledger-native loop's, else by the first such stop it serves."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import socket
import stat
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ledger import events as ev
from ledger.core.atomic import pid_gone
from ledger.core.home import make_root
from ledger.drivers.claude_code.stop.requester import served_for
from ledger.drivers.claude_code.stop.warm import (
    ACCEPT,
    BEAT,
    BEATING,
    IDLE,
    LOCK,
    NATIVE,
    PRINTED,
    SOCKET,
    WATCH,
    Reply,
    Request,
    code_stamp,
    is_sent,
    peer,
    recv,
    recv_exact,
    send,
    socket_path,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledger.core.home import Home
    from ledger.drivers.claude_code.stop.stop_input import HookOutcome


def _sweep_sockets(path: Path) -> None:
    """Remove the temporary sockets (``.stop-worker.sock.PID``) of workers killed while starting;
    the caller holds the home's worker lock, so no live worker is binding one."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.(\d+)")
    with contextlib.suppress(OSError):
        for entry in os.scandir(path.parent):
            m = pattern.fullmatch(entry.name)
            if m and pid_gone(int(m[1])):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def _lock(path: Path) -> int | None:
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


class _Listener:
    """The worker's socket, bound and listening under a temporary name, then renamed into place: a
    hook never finds a socket that refuses it (it would start a second worker, which would take
    over this one's lock). Owner-only from its creation (umask), never ``chmod``-ed by name."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        fresh = path.with_name(f".{SOCKET}.{os.getpid()}")
        fresh.unlink(missing_ok=True)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            server.bind(str(fresh))
        finally:
            os.umask(old)
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
        self.server.close()


def serve(root: Path, idle: float = IDLE, *, native: bool = False, code: int | None = None) -> int:
    """Serve the stops of the home at ``root`` until ``idle`` seconds pass without one; ``native``:
    a ledger-native stop started it (see :func:`_warm_up`); ``code``: the package's stamp when the
    process started (``warm.code_stamp``)."""
    from ledger.core.home import Home

    code = code_stamp() if code is None else code
    from ledger.drivers.claude_code.stop import hook  # noqa: F401  (the stop's modules: imported once, now)

    home = Home.resolve(root)
    make_root(home.root)
    lock = _lock(home.root / LOCK)
    if lock is None:
        return 0  # another worker serves this home, or its lock file is not to be trusted
    _warm_up(home, native)
    path = Path(socket_path(home.root))
    _sweep_sockets(path)
    listener = _Listener(path, min(idle, REFOLD))
    busy, stopping = [False], [False]
    retired = [False]

    def retire() -> None:
        """Give the home up at once (the package changed): the socket and the lock, so the worker
        the next stop starts takes over."""
        if not retired[0]:
            retired[0] = True
            listener.remove()
            os.close(lock)

    def on_term(signum: int, frame: object) -> None:
        """SIGTERM: at once when idle; after the stop (and its catch-up) when serving one. Never an
        exception, which DuckDB could turn into an interrupted query caught as an error."""
        stopping[0] = True
        if not busy[0]:
            listener.remove()
            os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    beats = _Beats()
    try:
        last = time.monotonic()
        served = False
        while not stopping[0]:
            try:
                conn, _ = listener.server.accept()
            except TimeoutError:
                waited = time.monotonic() - last
                if waited >= idle:
                    return 0
                there = listener.here()
                if there is None:  # its socket was removed: in place again, or every stop starts
                    listener.close()  # a worker that exits at once (this one holds the lock)
                    listener = _Listener(path, REFOLD)
                elif not there:
                    return 0  # something else has the socket's name: leave it, and the home
                early = not served and waited < WARMING
                if early:  # the stop that started this worker may still be writing its journal
                    _warm_up(home, native)
                listener.server.settimeout(min(idle - waited, REFOLD if early else WATCH))
                continue
            if not _trusted(conn):
                conn.close()  # another user's process: nothing read, nothing run
                continue
            busy[0] = True
            served = True
            with conn:
                if not _serve_one(conn, home, code, beats, retire):
                    return 0  # the package was upgraded: the next stop starts a new worker
            busy[0] = False
            last = time.monotonic()
            listener.server.settimeout(min(idle, WATCH))
        return 0
    finally:
        if not retired[0]:
            listener.remove()
            os.close(lock)
        listener.close()


def _trusted(conn: socket.socket) -> bool:
    """Whether the process at the other end of ``conn`` is this user's (``SO_PEERCRED``)."""
    try:
        who = peer(conn)
    except OSError:
        return False
    return who is not None and who[1] == os.geteuid()


class _Beats:
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


REFOLD = 0.25
WARMING = 10.0
"""For its first ``WARMING`` seconds without a stop, the worker warms up again every ``REFOLD``
seconds: the journal of the stop that started it is folded (and its ledger built) as that stop
writes it, not by the next stop."""


def _warm_up(home: Home, native: bool, within: float = 3600.0) -> None:
    """Fold the journals written in the last ``within`` seconds (the loop whose stop started this
    worker among them), before listening and while waiting for its first stop (``REFOLD``): the
    first stop served reads only its own appends. The ledger-native loops' ledgers too, DuckDB and
    the engine imported, when ``native`` (a ledger-native stop started the worker) or one of them
    is a ledger-native loop's: a home with drop-in loops only never gets a process with DuckDB."""
    from ledger.storage.fold import KEEP_LEDGERS, fold

    if native:
        _import_engine()

    try:
        files = home.journal_files()
    except OSError:  # an unreadable journals directory: nothing to warm
        return
    entries: list[tuple[float, Path]] = []
    for path in files:
        with contextlib.suppress(OSError):  # removed meanwhile
            entries.append((path.stat().st_mtime, path))
    recent = sorted((e for e in entries if e[0] >= time.time() - within), reverse=True)
    for _, path in recent[:KEEP_LEDGERS]:
        with contextlib.suppress(Exception):  # a journal it cannot fold now is folded by its stop
            kept = fold(path)
            started = [e for e in kept.events if isinstance(e, ev.SessionStarted)]
            if any(e.config.get("mode") != DROP_IN for e in started):
                _import_engine()
                kept.ledger(home)
                _prime(home, started[-1].session_id, kept.cursor.offset)


def _prime(home: Home, session_id: str, offset: int) -> None:
    """Ask a ledger-native loop's session what its next stop asks first, once per journal position:
    its view (the ``sessions`` row, kept for the stop: ``ledger.storage.fold``) and its guards' facts
    (DuckDB's first run of their queries is the slowest): the worker's first stop costs as much as
    the next ones."""
    if _PRIMED.get(session_id) == offset:
        return
    from datetime import UTC, datetime

    from ledger.loop.decide.facts import read_facts
    from ledger.loop.engine import Engine

    view = Engine(home).view(session_id)
    read_facts(view.ledger, session_id, view.config.guards, datetime.now(UTC))
    _PRIMED[session_id] = offset


_PRIMED: dict[str, int] = {}
"""The journal offset each session was last primed at (:func:`_prime`)."""

DROP_IN = "ralph-loop"
"""The ``mode`` a drop-in loop records in its ``session_started`` config (``dropin._events``)."""


def _import_engine() -> None:
    """Import DuckDB and the engine, and parse the views and detectors, once (a ledger-native stop's
    floor, paid here rather than by a stop)."""
    if _ENGINE:
        return
    from ledger.drivers.claude_code.stop import native  # noqa: F401
    from ledger.storage.database import Ledger

    Ledger.memory().close()
    _ENGINE.append(True)


_ENGINE: list[bool] = []


def _waiting(conn: socket.socket) -> bool:
    """Whether the hook at the other end of ``conn`` still waits for its answer (not killed: a
    killed process's end of the socket is closed, and reads as end of file)."""
    try:
        conn.settimeout(0)
        return conn.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True  # nothing to read, still connected
    except OSError:
        return False


def _serve_one(
    conn: socket.socket,
    home: Home,
    code: int,
    beats: _Beats | None = None,
    retire: Callable[[], None] | None = None,
) -> bool:
    """One stop: the request, the handshake, the stop run as the hook would (beating meanwhile), the
    reply. False when the hook runs other code than this worker: it is ``retire``-d first (socket and
    lock given up), then the connection closed, and the hook runs the stop itself."""
    from ledger.drivers.claude_code.stop.error_sink import allowing
    from ledger.drivers.claude_code.stop.hook import run

    try:
        conn.settimeout(5.0)
        request = Request.decode(recv(conn))
        if request.code != code:
            if retire is not None:
                retire()
            return False
        if Path(request.home) != home.root:
            return True  # another home's: the hook runs it itself
        conn.sendall(b"R")
        conn.settimeout(ACCEPT * 4)
        if recv_exact(conn, 1) != b"G":
            return True
    except (OSError, ValueError):
        return True  # the hook gave up (too slow) or sent nonsense: it runs the stop itself
    here, environ = os.getcwd(), dict(os.environ)
    if beats is not None:
        beats.serving(conn)
    try:
        os.chdir(request.cwd)
        os.environ.clear()  # this worker's own environment, with the stop's variables in place
        os.environ.update({k: v for k, v in environ.items() if not is_sent(k)})
        os.environ.update({k: v for k, v in request.env.items() if is_sent(k)})
        with served_for(lambda: _waiting(conn)):
            outcome = run(request.raw, home_arg=request.home_arg, mark=request.mark)
    except OSError as exc:  # the hook's directory is gone: the stop is allowed, as in-process
        from ledger.drivers.claude_code.stop.stop_input import HookOutcome

        outcome = HookOutcome(stderr=allowing(exc) + "\n")
    finally:
        if beats is not None:
            beats.serving(None)
        os.environ.clear()
        os.environ.update(environ)
        with contextlib.suppress(OSError):
            os.chdir(here)
    reply = Reply(outcome.stdout, outcome.stderr, outcome.exit_code, outcome.sync)
    confirmed = False
    with contextlib.suppress(OSError, ValueError):
        conn.settimeout(5.0)
        send(conn, reply.encode())
        confirmed = recv_exact(conn, 1) == PRINTED
    if outcome.stdout and not confirmed:
        _unconfirmed(outcome)
    from ledger.storage.fold import catch_up

    with contextlib.suppress(Exception):  # off the stop's path: the next stop ingests less
        catch_up()
    return True


UNCONFIRMED: Final = "hook claude-code: delivery"
"""The ``component`` of the ``error_recorded`` a worker appends when the hook it served ended before
confirming it printed the answer."""


def _unconfirmed(outcome: HookOutcome) -> None:
    """Record in the stop's journal that the hook process ended before confirming it printed the
    answer (killed between the worker's reply and its print): the decision recorded just before
    may not have reached the agent. In-process, a hook killed there leaves no such word."""
    from ledger.storage.fold import events_of
    from ledger.storage.journal import Journal, JournalError

    for name in outcome.sync:
        path = Path(name)
        with contextlib.suppress(OSError, JournalError, ValueError):
            last = events_of(path)[-1]
            said = "a block" if '"block"' in outcome.stdout else "an answer"
            Journal(path).append(
                ev.ErrorRecorded(
                    session_id=last.session_id,
                    iteration=last.iteration,
                    component=UNCONFIRMED,
                    message=f"the hook process ended before confirming it printed {said}; the agent "
                    "may not have received it",
                )
            )


def main(argv: list[str] | None = None) -> int:
    """``python -m ledger.drivers.claude_code.stop.warm_worker HOME [IDLE_SECONDS] [--native]``: serve that
    home's stops until idle (``--native``: a ledger-native stop started it)."""
    args = sys.argv[1:] if argv is None else argv
    native = NATIVE in args
    args = [a for a in args if a != NATIVE]
    try:
        idle = float(args[1]) if len(args) == 2 else IDLE
    except ValueError:
        idle = -1.0
    if len(args) not in (1, 2) or idle <= 0:
        print(
            f"usage: python -m ledger.drivers.claude_code.stop.warm_worker HOME [IDLE_SECONDS] [{NATIVE}]",
            file=sys.stderr,
        )
        return 2
    code = code_stamp()  # the code this process runs: stamped before the stop's modules are imported
    from ledger.storage import fold

    fold.PRICES = False  # never the price library on a stop's path (unless a cost guard needs it)
    return serve(Path(args[0]), idle, native=native, code=code)


if __name__ == "__main__":
    sys.exit(main())
