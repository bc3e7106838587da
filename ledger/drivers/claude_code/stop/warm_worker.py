"""The warm stop worker's process: it serves a home's stops (drop-in and ledger-native) over the
socket ``ledger.drivers.claude_code.stop.warm`` (the hook's side) connects to, until idle. DuckDB and the
engine are imported when a ledger-native stop needs them: before listening when such a stop started
the worker or a recent journal is a ledger-native loop's, else by the first such stop it serves."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ledger import events as ev
from ledger.core.home import make_root
from ledger.drivers.claude_code.stop.loop_sessions import DROP_IN
from ledger.drivers.claude_code.stop.requester import served_for
from ledger.drivers.claude_code.stop.warm import (
    ACCEPT,
    IDLE,
    LOCK,
    NATIVE,
    PRINTED,
    WATCH,
    Reply,
    Request,
    recv,
    recv_exact,
    send,
    socket_path,
)
from ledger.drivers.claude_code.stop.warm_checks import code_stamp, is_sent
from ledger.drivers.claude_code.stop.warm_home import Beats, Listener, hold, sweep_sockets, trusted

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledger.core.home import Home
    from ledger.drivers.claude_code.stop.stop_input import HookOutcome


def serve(root: Path, idle: float = IDLE, *, native: bool = False, code: int | None = None) -> int:
    """Serve the stops of the home at ``root`` until ``idle`` seconds pass without one; ``native``:
    a ledger-native stop started it (see :func:`_warm_up`); ``code``: the package's stamp when the
    process started (``warm.code_stamp``)."""
    from ledger.core.home import Home

    code = code_stamp() if code is None else code
    from ledger.drivers.claude_code.stop import hook  # noqa: F401  (the stop's modules: imported once, now)

    home = Home.resolve(root)
    make_root(home.root)
    lock = hold(home.root / LOCK)
    if lock is None:
        return 0  # another worker serves this home, or its lock file is not to be trusted
    _warm_up(home, native)
    path = Path(socket_path(home.root))
    sweep_sockets(path)
    listener = Listener(path, min(idle, REFOLD))
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
    beats = Beats()
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
                    listener = Listener(path, REFOLD)
                elif not there:
                    return 0  # something else has the socket's name: leave it, and the home
                early = not served and waited < WARMING
                if early:  # the stop that started this worker may still be writing its journal
                    _warm_up(home, native)
                listener.server.settimeout(min(idle - waited, REFOLD if early else WATCH))
                continue
            if not trusted(conn):
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
    beats: Beats | None = None,
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
