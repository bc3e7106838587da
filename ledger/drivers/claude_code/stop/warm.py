"""The warm stop worker's client: the Stop hook's entry, which hands the stop to a process that stays up.

:func:`hook_main` finds the loop and the home (``ledger.drivers.claude_code.stop.locate``) with the
standard library only, and asks the home's worker (``ledger.drivers.claude_code.stop.warm_worker``,
on ``<home>/stop-worker.sock``) to run the very same stop; a two-step handshake means a stop is run
by the worker or by the hook process, never both, and anything amiss runs it in-process, unchanged.
``RALPH_WARM=0`` turns it off. Why, how it is started and stopped, and its faults:
docs/performance.md (The warm stop worker).
"""

from __future__ import annotations

import _socket  # not ``socket``: its enums and ``selectors`` cost the hook ~3 ms
import contextlib
import os
import sys

from ledger.core.sync import sync_file
from ledger.core.trust import untrusted
from ledger.drivers.claude_code.stop.locate import LOOP_FILE, MAX_STDIN, find_project, has_loop, hook_home

SOCKET = "stop-worker.sock"
LOCK = "stop-worker.lock"
ACCEPT = 0.5  # seconds the hook waits for the worker to take a stop
IDLE = 600.0  # seconds without a stop before the worker exits
MAX_PATH = 100  # AF_UNIX paths are limited to 108 bytes
ENV = "RALPH_WARM"
NATIVE = "--native"
"""The worker's option saying a ledger-native stop started it: it imports DuckDB before listening."""


def _length(n: int) -> bytes:
    """A length as a message or a field starts with: 4 bytes, big-endian."""
    return n.to_bytes(4, "big")


def pack(fields: list[bytes]) -> bytes:
    """Length-prefixed fields, one message's payload (see :func:`unpack`)."""
    return b"".join(_length(len(f)) + f for f in fields)


def unpack(payload: bytes) -> list[bytes]:
    """The fields of a payload made by :func:`pack`; ``ValueError`` when it is not one."""
    fields, at = [], 0
    while at < len(payload):
        if at + 4 > len(payload):
            raise ValueError("a truncated field length")
        n = int.from_bytes(payload[at : at + 4], "big")
        if at + 4 + n > len(payload):
            raise ValueError("a truncated field")
        fields.append(payload[at + 4 : at + 4 + n])
        at += 4 + n
    return fields


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


class Request:
    """A stop handed to the worker: stdin, and the hook process's directory, environment and
    ``--home``, with its :func:`code_stamp`: a worker running other code refuses and exits."""

    __slots__ = ("code", "cwd", "env", "home", "home_arg", "raw")

    def __init__(
        self, raw: bytes, cwd: str, env: dict[str, str], home: str, home_arg: str | None, code: int
    ) -> None:
        self.raw, self.cwd, self.env, self.home = raw, cwd, env, home
        self.home_arg, self.code = home_arg, code

    def encode(self) -> bytes:
        """The request's payload: the code stamp first, so any worker can compare it."""
        arg = b"" if self.home_arg is None else b"=" + os.fsencode(self.home_arg)
        env = [os.fsencode(s) for pair in self.env.items() for s in pair]
        where = [os.fsencode(self.cwd), os.fsencode(self.home), arg]
        return pack([str(self.code).encode(), self.raw, *where, *env])

    @classmethod
    def decode(cls, payload: bytes) -> Request:
        """The request of a payload; ``ValueError`` when it is not one."""
        fields = unpack(payload)
        if len(fields) < 5 or len(fields) % 2 == 0:
            raise ValueError("not a stop request")
        code, raw, cwd, home, arg, *env = fields
        environ = {os.fsdecode(k): os.fsdecode(v) for k, v in zip(env[::2], env[1::2], strict=True)}
        home_arg = os.fsdecode(arg[1:]) if arg else None
        return cls(raw, os.fsdecode(cwd), environ, os.fsdecode(home), home_arg, int(code))


class Reply:
    """The stop's outcome (``ledger.drivers.claude_code.stop.stop_input.HookOutcome``): what to print, the
    exit code, the journals to sync."""

    __slots__ = ("exit_code", "stderr", "stdout", "sync")

    def __init__(
        self, stdout: str = "", stderr: str = "", exit_code: int = 0, sync: tuple[str, ...] = ()
    ) -> None:
        self.stdout, self.stderr, self.exit_code, self.sync = stdout, stderr, exit_code, sync

    def encode(self) -> bytes:
        """The reply's payload."""
        out = [self.stdout.encode("utf-8", "surrogatepass"), self.stderr.encode("utf-8", "surrogatepass")]
        return pack([str(self.exit_code).encode(), *out, *(os.fsencode(p) for p in self.sync)])

    @classmethod
    def decode(cls, payload: bytes) -> Reply:
        """The reply of a payload; ``ValueError`` when it is not one."""
        fields = unpack(payload)
        if len(fields) < 3:
            raise ValueError("not a stop reply")
        code, out, err, *sync = fields
        return cls(_text(out), _text(err), int(code), tuple(os.fsdecode(p) for p in sync))


OFF = ("0", "false", "no", "off")
"""The values of ``RALPH_WARM`` that turn the worker off (any case): every stop runs in-process."""


def wanted(env: dict[str, str] | None = None) -> bool:
    """Whether the hook asks a worker: yes unless ``RALPH_WARM`` is one of :data:`OFF`."""
    return (os.environ if env is None else env).get(ENV, "").strip().lower() not in OFF


def code_stamp() -> int:
    """The latest modification time (ns) of the package's modules: an upgrade changes it, so a
    worker started before the upgrade never serves a hook running after it."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        with os.scandir(here) as entries:
            return max((e.stat().st_mtime_ns for e in entries if e.name.endswith(".py")), default=0)
    except OSError:
        return -1


def socket_path(home: str | os.PathLike[str]) -> str:
    """The worker's socket in the home at ``home``."""
    return os.path.join(home, SOCKET)


def send(sock: _socket.socket, payload: bytes) -> None:
    """Send one message: its length, then the payload."""
    sock.sendall(_length(len(payload)) + payload)


def recv_exact(sock: _socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes; ``ConnectionError`` when the other end closes first."""
    data = bytearray()
    while len(data) < n:
        block = sock.recv(n - len(data))
        if not block:
            raise ConnectionError("the other end closed the connection")
        data += block
    return bytes(data)


def recv(sock: _socket.socket) -> bytes:
    """One message's payload (see :func:`send`)."""
    return recv_exact(sock, int.from_bytes(recv_exact(sock, 4), "big"))


PRINTED = b"P"
"""What the hook sends the worker once it has printed and flushed the answer; a worker that does not
get it records that the answer's delivery was not confirmed (``warm_worker``)."""


class Served:
    """A worker's reply, and the connection that confirms it was printed (:meth:`confirm`)."""

    def __init__(self, reply: Reply, sock: _socket.socket) -> None:
        self.reply = reply
        self.sock = sock

    def confirm(self) -> None:
        """Tell the worker the answer is printed; close the connection."""
        with contextlib.suppress(OSError):
            self.sock.sendall(PRINTED)
        self.sock.close()


def ask(raw: bytes, home: str, home_arg: str | None, *, native: bool = False) -> Served | None:
    """The outcome of this stop run by the worker of the home at ``home``, with the connection to
    confirm it on; None when the hook must run it itself (no worker: one is started, ``native``
    when a ledger-native stop starts it; a broken or slow one)."""
    path = socket_path(home)
    if len(os.fsencode(path)) > MAX_PATH:
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    kept = False
    try:
        sock.settimeout(ACCEPT)
        try:
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError):
            start(home, native=native)
            return None
        send(sock, Request(raw, os.getcwd(), dict(os.environ), home, home_arg, code_stamp()).encode())
        if recv_exact(sock, 1) != b"R":
            return None
        sock.sendall(b"G")  # from here on the worker runs the stop: wait for it, however long
        sock.settimeout(None)
        served = Served(Reply.decode(recv(sock)), sock)
        kept = True
        return served
    except (OSError, ValueError):
        return None
    finally:
        if not kept:
            sock.close()


def start(home: str, *, native: bool = False) -> None:
    """Start the home's worker in the background (it exits at once if one is already there)."""
    import subprocess

    argv = [sys.executable, "-m", "ledger.drivers.claude_code.stop.warm_worker", home]
    with contextlib.suppress(OSError):
        subprocess.Popen(
            argv + ([NATIVE] if native else []),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )


def _stdin_cwd(raw: bytes) -> str:
    """``cwd`` from the Stop event (``ValueError`` when stdin is not a JSON object with a string there)."""
    import json

    cwd = json.loads(raw).get("cwd", "")
    if not isinstance(cwd, str):
        raise ValueError("cwd is not a string")
    return cwd


def served(raw: bytes, home_arg: str | None) -> Served | None:
    """This stop's outcome from the home's worker, when it is :func:`wanted`, the stop finds a loop
    (``ledger.drivers.claude_code.stop.locate``) and the worker takes it; None otherwise (anything
    unexpected included: the hook then runs the stop in-process)."""
    if not wanted() or len(raw) > MAX_STDIN:
        return None
    try:
        project = find_project(lambda: _stdin_cwd(raw))
        if not has_loop(project):
            return None
        home = hook_home(project, home_arg)
        native = os.path.exists(os.path.join(project, LOOP_FILE))
    except Exception:  # stdin or the directories are not what a stop expects: in-process says so
        return None
    if untrusted(home) is not None:  # another user's listener may be there: in-process refuses it
        return None
    return ask(raw, home, home_arg, native=native)


def deliver(served: Served) -> int:
    """Print a worker's reply as the hook process would its own outcome, confirm it to the worker,
    sync its journals; the exit code."""
    reply = served.reply
    sys.stdout.write(reply.stdout)
    sys.stdout.flush()  # the answer first: a kill from here on leaves the agent's decision recorded
    served.confirm()
    sys.stderr.write(reply.stderr)
    for path in reply.sync:
        sync_file(path)
    return reply.exit_code


def hook_main(home_arg: str | None = None) -> int:
    """``ralph-ledger hook claude-code``: read the Stop event, let the warm worker answer it
    (:func:`served`), else run it in this process (``ledger.drivers.claude_code.stop.hook.main``)."""
    raw = sys.stdin.buffer.read(MAX_STDIN + 1)
    answer = served(raw, home_arg)
    if answer is not None:
        return deliver(answer)
    from ledger.drivers.claude_code.stop.hook import main
    from ledger.storage import fold

    fold.PRICES = False  # never the price library on a stop's path (unless a cost guard needs it)

    return main(raw=raw, home=home_arg)
