"""The warm stop worker: ledger-native Stop hook stops served by a process that stays up.

A ledger-native stop spends most of its time before it starts: importing DuckDB, creating an
in-memory ledger with its views and detectors, reading the session's journal
(``docs/performance.md``). With ``RALPH_WARM=1`` in the hook's environment, a ledger-native stop
asks the home's worker instead: a process listening on ``<home>/stop-worker.sock`` (owner only),
with DuckDB imported and each session's state kept in memory (``ledger.storage.fold``), so a stop reads only
what was appended since the last one. It is started on demand by the first stop that finds none
(which runs in-process meanwhile) and exits after ``IDLE`` seconds without a stop.

The worker runs the very same stop as the hook process (``ledger.agents.claude_code.hook.run``), in the hook's
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
import os
import socket
import struct
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

if TYPE_CHECKING:
    from ledger.agents.claude_code.stop_event import HookOutcome
    from ledger.core.home import Home

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
    """The stop's outcome (see ``ledger.agents.claude_code.stop_event.HookOutcome``)."""

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
    from ledger.agents.claude_code.stop_event import HookOutcome

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
            [sys.executable, "-m", "ledger.agents.claude_code.warm_worker", str(home.root)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
