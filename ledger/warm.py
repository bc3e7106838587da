"""The warm stop worker: ledger-native Stop hook stops served by a process that stays up.

A ledger-native stop spends most of its time before it starts: importing DuckDB, creating an
in-memory ledger with its views and detectors, reading the session's journal
(``docs/performance.md``). With ``RALPH_WARM=1`` in the hook's environment, a ledger-native stop
asks the home's worker instead: a process listening on ``<home>/stop-worker.sock`` (owner only),
with DuckDB imported and each session's state kept in memory (``ledger.fold``), so a stop reads only
what was appended since the last one. It is started on demand by the first stop that finds none
(which runs in-process meanwhile) and exits after ``IDLE`` seconds without a stop.

The worker runs the very same stop as the hook process (``ledger.stop_hook.run``), in the hook's
working directory and with its environment (``$CLAUDE_PROJECT_DIR``, ``$RALPH_HOME``, the rules'
environment), one stop at a time, under the same loop lock. The hook process prints the answer
and syncs the journal, as in-process. The hook falls back to in-process work when the worker is
absent, broken, or does not take the stop within ``ACCEPT`` seconds: a two-step handshake (the
worker says it is ready, the hook says go) means a stop is run by the worker or by the hook,
never by both. A worker that dies during a stop leaves what a killed stop leaves, and the hook
then runs the stop in-process, as the next stop would.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import struct
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

if TYPE_CHECKING:
    from ledger.home import Home
    from ledger.stop_hook import HookOutcome

SOCKET: Final = "stop-worker.sock"
LOCK: Final = "stop-worker.lock"
ACCEPT: Final = 0.5  # seconds the hook waits for the worker to take a stop
IDLE: Final = 600.0  # seconds without a stop before the worker exits
MAX_PATH: Final = 100  # AF_UNIX paths are limited to 108 bytes
ENV: Final = "RALPH_WARM"

_serving = False


class Request(msgspec.Struct, frozen=True):
    """A stop handed to the worker: stdin, and the hook process's directory, environment and
    ``--home``."""

    raw: bytes
    cwd: str
    env: dict[str, str]
    home: str
    home_arg: str | None = None
    code: int = 0  # the hook's :func:`code_stamp`: a worker running other code refuses and exits


class Reply(msgspec.Struct, frozen=True):
    """The stop's outcome (see ``ledger.stop_hook.HookOutcome``)."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    sync: tuple[str, ...] = ()


def wanted() -> bool:
    """Whether this hook process should ask a worker (``RALPH_WARM=1``, and not in the worker)."""
    return not _serving and os.environ.get(ENV) == "1"


def code_stamp() -> int:
    """The latest modification time (ns) of the package's modules: an upgrade changes it, so a
    worker started before the upgrade never serves a hook running after it."""
    here = Path(__file__).parent
    try:
        return max((e.stat().st_mtime_ns for e in os.scandir(here) if e.name.endswith(".py")), default=0)
    except OSError:
        return -1


def socket_path(home: Home) -> Path:
    """The worker's socket in ``home``."""
    return home.root / SOCKET


def _send(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(struct.pack(">I", len(payload)) + payload)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        block = sock.recv(n - len(data))
        if not block:
            raise ConnectionError("the other end closed the connection")
        data += block
    return bytes(data)


def _recv(sock: socket.socket) -> bytes:
    (n,) = struct.unpack(">I", _recv_exact(sock, 4))
    return _recv_exact(sock, n)


def ask(raw: bytes, home: Home, home_arg: str | None) -> HookOutcome | None:
    """The outcome of this stop run by the home's worker; None when the hook must run it itself
    (no worker: one is started; a broken or slow one)."""
    from ledger.stop_hook import HookOutcome

    path = socket_path(home)
    if len(os.fsencode(path)) > MAX_PATH:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(ACCEPT)
        try:
            sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError):
            start(home)
            return None
        request = Request(raw, os.getcwd(), dict(os.environ), str(home.root), home_arg, code_stamp())
        _send(sock, msgspec.msgpack.encode(request))
        if _recv_exact(sock, 1) != b"R":
            return None
        sock.sendall(b"G")  # from here on the worker runs the stop: wait for it, however long
        sock.settimeout(None)
        reply = msgspec.msgpack.decode(_recv(sock), type=Reply)
        return HookOutcome(reply.stdout, reply.stderr, reply.exit_code, reply.sync)
    except (OSError, ValueError, msgspec.DecodeError, struct.error):
        return None
    finally:
        sock.close()


def start(home: Home) -> None:
    """Start the home's worker in the background (it exits at once if one is already there)."""
    import subprocess

    with contextlib.suppress(OSError):
        subprocess.Popen(
            [sys.executable, "-m", "ledger.warm", str(home.root)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )


def serve(root: Path, idle: float = IDLE) -> int:
    """Serve the stops of the home at ``root`` until ``idle`` seconds pass without one."""
    global _serving
    _serving = True
    from ledger import hook_loop  # noqa: F401  (DuckDB, the engine: imported once, now)
    from ledger.home import Home
    from ledger.store import Ledger

    home = Home.resolve(root)
    home.root.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock = os.open(home.root / LOCK, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another worker serves this home
    os.ftruncate(lock, 0)
    os.write(lock, f"{os.getpid()}\n".encode())  # who serves (to stop it: SIGTERM that pid)
    Ledger.memory().close()  # the views and detectors, parsed once
    code = code_stamp()
    _warm_up(home)
    path = socket_path(home)
    # bound and listening under a temporary name, then renamed into place: a hook never finds a
    # socket that refuses it (it would start a second worker, which would take over this one's lock)
    fresh = path.with_name(f".{SOCKET}.{os.getpid()}")
    fresh.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o077)
    try:
        server.bind(str(fresh))
    finally:
        os.umask(old)
    os.chmod(fresh, 0o600)
    ident = os.stat(fresh).st_ino
    server.listen(16)
    server.settimeout(idle)
    os.replace(fresh, path)

    def remove_socket() -> None:
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == ident:  # still ours
                path.unlink()

    busy, stopping = [False], [False]

    def on_term(signum: int, frame: object) -> None:
        """SIGTERM: at once when idle; after the stop (and its catch-up) when serving one. Never an
        exception, which DuckDB could turn into an interrupted query caught as an error."""
        stopping[0] = True
        if not busy[0]:
            remove_socket()
            os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    try:
        while not stopping[0]:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                return 0
            busy[0] = True
            with conn:
                if not _serve_one(conn, home, code):
                    return 0  # the package was upgraded: the next stop starts a new worker
            busy[0] = False
        return 0
    finally:
        remove_socket()
        server.close()
        os.close(lock)


def _warm_up(home: Home, within: float = 3600.0) -> None:
    """Fold the journals written in the last ``within`` seconds (the loop whose stop started this
    worker among them), before listening: the first stop served reads only its own appends."""
    import time

    from ledger.fold import KEEP_LEDGERS, fold

    try:
        entries = [
            (e.stat().st_mtime, Path(e.path)) for e in os.scandir(home.journals) if e.name.endswith(".jsonl")
        ]
    except OSError:
        return
    recent = sorted((e for e in entries if e[0] >= time.time() - within), reverse=True)
    for _, path in recent[:KEEP_LEDGERS]:
        with contextlib.suppress(Exception):  # a journal it cannot fold now is folded by its stop
            fold(path).ledger(home)


def _serve_one(conn: socket.socket, home: Home, code: int) -> bool:
    """One stop: the request, the handshake, the stop run as the hook would, the reply. False when
    the hook runs other code than this worker (then it runs the stop itself)."""
    from ledger.stop_hook import run

    try:
        conn.settimeout(5.0)
        request = msgspec.msgpack.decode(_recv(conn), type=Request)
        if request.code != code:
            return False
        if Path(request.home) != home.root:
            return True  # another home's: the hook runs it itself
        conn.sendall(b"R")
        conn.settimeout(ACCEPT * 4)
        if _recv_exact(conn, 1) != b"G":
            return True
    except (OSError, ValueError, msgspec.DecodeError, struct.error):
        return True  # the hook gave up (too slow) or sent nonsense: it runs the stop itself
    here, environ = os.getcwd(), dict(os.environ)
    try:
        os.chdir(request.cwd)
        os.environ.clear()
        os.environ.update(request.env)
        outcome = run(request.raw, home_arg=request.home_arg)
    except OSError as exc:  # the hook's directory is gone: the stop is allowed, as in-process
        from ledger.stop_hook import HookOutcome

        outcome = HookOutcome(stderr=f"ralph-ledger hook: {exc}; allowing the stop\n")
    finally:
        os.environ.clear()
        os.environ.update(environ)
        with contextlib.suppress(OSError):
            os.chdir(here)
    reply = Reply(outcome.stdout, outcome.stderr, outcome.exit_code, outcome.sync)
    with contextlib.suppress(OSError):
        conn.settimeout(5.0)
        _send(conn, msgspec.msgpack.encode(reply))
    from ledger.fold import catch_up

    with contextlib.suppress(Exception):  # off the stop's path: the next stop ingests less
        catch_up()
    return True


def main(argv: list[str] | None = None) -> int:
    """``python -m ledger.warm HOME [IDLE_SECONDS]``: serve that home's ledger-native stops until idle."""
    args = sys.argv[1:] if argv is None else argv
    try:
        idle = float(args[1]) if len(args) == 2 else IDLE
    except ValueError:
        idle = -1.0
    if len(args) not in (1, 2) or idle <= 0:
        print("usage: python -m ledger.warm HOME [IDLE_SECONDS]", file=sys.stderr)
        return 2
    return serve(Path(args[0]), idle)


if __name__ == "__main__":  # run as ``ledger.warm``, not ``__main__``: one copy of ``_serving``
    from ledger import warm

    sys.exit(warm.main())
