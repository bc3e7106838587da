"""The warm stop worker's client: the Stop hook's entry, which hands the stop to a process that stays up.

:func:`hook_main` finds the loop and the home (``locate``) with the standard library only and asks
the home's worker (``warm_worker``, on ``<home>/stop-worker.sock``) to run the very same stop: a
two-step handshake means the worker or the hook process runs it, never both; anything amiss runs it
in-process, as the same stop (a stop already recorded is answered from its journal). Every wait is
bounded (the worker beats while it serves), both ends check the other is the same user, and only
the variables a stop needs are sent. ``RALPH_WARM=0`` turns it off. Why and how:
docs/performance.md (The warm stop worker), docs/design/warm-worker.md.
"""

from __future__ import annotations

import _socket  # not ``socket``: its enums and ``selectors`` cost the hook ~3 ms
import contextlib
import os
import sys

from ledger.core.sync import sync_file
from ledger.core.trust import untrusted
from ledger.drivers.claude_code.stop.locate import (
    LOOP_FILE,
    MAX_STDIN,
    find_project,
    has_loop,
    hook_home,
    new_mark,
)
from ledger.drivers.claude_code.stop.warm_checks import code_stamp as code_stamp  # the tests' too
from ledger.drivers.claude_code.stop.warm_checks import peer, stop_env

SOCKET = "stop-worker.sock"
LOCK = "stop-worker.lock"
ACCEPT = 0.5  # seconds the hook waits for the worker to take a stop
IDLE = 600.0  # seconds without a stop before the worker exits
BEAT = 0.5  # seconds between the bytes a worker serving a stop sends to say it is not stuck
SILENCE = 5.0  # seconds without a byte after which the hook takes its worker for stuck
WATCH = 1.0  # seconds between a worker's checks that its socket is still there
MAX_PATH = 100  # AF_UNIX paths are limited to 108 bytes (104 on macOS): longer ones go by ``address``
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
    """A stop handed to the worker: stdin, and the hook process's directory, the variables of its
    environment a stop needs (:func:`stop_env`) and ``--home``, with its :func:`code_stamp` (a
    worker running other code refuses and exits) and the hook run's ``mark``, the stop's identity
    whoever runs it (``locate.new_mark``)."""

    __slots__ = ("code", "cwd", "env", "home", "home_arg", "mark", "raw")

    def __init__(
        self,
        raw: bytes,
        cwd: str,
        env: dict[str, str],
        home: str,
        home_arg: str | None,
        code: int,
        mark: str = "",
    ) -> None:
        self.raw, self.cwd, self.env, self.home = raw, cwd, env, home
        self.home_arg, self.code, self.mark = home_arg, code, mark

    def encode(self) -> bytes:
        """The request's payload: the code stamp first, so any worker can compare it."""
        arg = b"" if self.home_arg is None else b"=" + os.fsencode(self.home_arg)
        env = [os.fsencode(s) for pair in self.env.items() for s in pair]
        where = [os.fsencode(self.cwd), os.fsencode(self.home), arg, self.mark.encode()]
        return pack([str(self.code).encode(), self.raw, *where, *env])

    @classmethod
    def decode(cls, payload: bytes) -> Request:
        """The request of a payload; ``ValueError`` when it is not one."""
        fields = unpack(payload)
        if len(fields) < 6 or len(fields) % 2:
            raise ValueError("not a stop request")
        code, raw, cwd, home, arg, mark, *env = fields
        environ = {os.fsdecode(k): os.fsdecode(v) for k, v in zip(env[::2], env[1::2], strict=True)}
        home_arg = os.fsdecode(arg[1:]) if arg else None
        return cls(raw, os.fsdecode(cwd), environ, os.fsdecode(home), home_arg, int(code), _text(mark))


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


def socket_path(home: str | os.PathLike[str]) -> str:
    """The worker's socket in the home at ``home``."""
    return os.path.join(home, SOCKET)


def address(path: str) -> tuple[str, int | None]:
    """The AF_UNIX address of the socket at ``path``: ``path`` when it fits (:data:`MAX_PATH`), else
    (Linux) the same file through an open descriptor of its folder, ``/proc/self/fd/N/NAME``, with
    ``N`` to close once connected or bound, so that a home deep in a long path has its worker too;
    ``("", None)`` where neither fits, or the folder is not there (docs/design/warm-worker.md)."""
    if len(os.fsencode(path)) <= MAX_PATH:
        return path, None
    try:  # no O_PATH (macOS): no worker for that home
        fd = os.open(os.path.dirname(path) or ".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except (OSError, AttributeError):
        return "", None
    short = f"/proc/self/fd/{fd}/{os.path.basename(path)}"
    if len(os.fsencode(short)) > MAX_PATH or not os.path.isdir(f"/proc/self/fd/{fd}"):
        os.close(fd)
        return "", None
    return short, fd


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


def ask(
    raw: bytes, home: str, home_arg: str | None, *, native: bool = False, mark: str = ""
) -> Served | None:
    """The outcome of this stop run by the worker of the home at ``home``, with the connection to
    confirm it on; None when the hook must run it itself (no worker: one is started, ``native``
    when a ledger-native stop starts it; a broken, slow or stuck one; a listener that is not this
    user's: it is sent nothing). ``mark`` is the stop's identity (``locate.new_mark``)."""
    where, folder = address(socket_path(home))
    if not where:
        if not os.path.isdir(home):  # a long home's first stop: no folder to reach the socket through
            start(home, native=native)
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    kept = False
    try:
        sock.settimeout(ACCEPT)
        try:
            sock.connect(where)
        except (FileNotFoundError, ConnectionRefusedError):
            start(home, native=native)
            return None
        finally:
            if folder is not None:
                os.close(folder)
        who = peer(sock)
        if who is None or who[1] != os.geteuid():  # not this user's worker: not a byte is sent
            return None
        request = Request(raw, os.getcwd(), stop_env(), home, home_arg, code_stamp(), mark)
        send(sock, request.encode())
        if recv_exact(sock, 1) != b"R":
            return None
        sock.sendall(b"G")  # from here on the worker runs the stop: it beats while it does
        reply = _awaited(sock, who[0], home, native)
        if reply is None:
            return None
        kept = True
        return Served(reply, sock)
    except (OSError, ValueError):
        return None
    finally:
        if not kept:
            sock.close()


BEATING = b"."
"""What a worker serving a stop sends every :data:`BEAT` seconds until its reply (whose length's
first byte is never this one: a reply is under 16 MiB)."""


def _awaited(sock: _socket.socket, pid: int, home: str, native: bool) -> Reply | None:
    """The worker's reply, waited for as long as it beats; None when it went silent for
    :data:`SILENCE` seconds: it is stuck (stopped, hung), so it is ended (it is this user's process,
    ``pid`` from the socket's credentials) and another started; the hook then runs the stop itself,
    answered from the journal if the stuck worker had recorded it (docs/design/warm-worker.md)."""
    sock.settimeout(SILENCE)
    try:
        first = recv_exact(sock, 1)
        while first == BEATING:
            first = recv_exact(sock, 1)
    except TimeoutError:
        if pid > 0 and pid != os.getpid():  # 0: a process this one cannot see (never its own group)
            with contextlib.suppress(OSError):
                os.kill(pid, 9)  # SIGKILL: its locks released, it never appends after the hook's run
        start(home, native=native)
        return None
    size = int.from_bytes(first + recv_exact(sock, 3), "big")
    return Reply.decode(recv_exact(sock, size))


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


def served(raw: bytes, home_arg: str | None, mark: str = "") -> Served | None:
    """This stop's outcome from the home's worker, when it is :func:`wanted`, the stop finds a loop
    (``ledger.drivers.claude_code.stop.locate``) and the worker takes it; None otherwise (anything
    unexpected included: the hook then runs the stop in-process, with the same ``mark``)."""
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
    return ask(raw, home, home_arg, native=native, mark=mark)


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
    (:func:`served`), else run it in this process (``ledger.drivers.claude_code.stop.hook.main``),
    as the same stop (its mark): a stop the worker recorded before it was lost is not decided again."""
    raw = sys.stdin.buffer.read(MAX_STDIN + 1)
    mark = new_mark()
    answer = served(raw, home_arg, mark)
    if answer is not None:
        return deliver(answer)
    from ledger.drivers.claude_code.stop.hook import main
    from ledger.storage import fold

    fold.PRICES = False  # never the price library on a stop's path (unless a cost guard needs it)

    return main(raw=raw, home=home_arg, mark=mark)
