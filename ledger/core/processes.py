"""Child processes (agents, validation commands) that lead a session of their own, end whole, and
never outlive the process that started them.

``start`` makes the leader die with the thread that started it (``PR_SET_PDEATHSIG``, SIGKILL); a
process that is ``watching`` also has a watcher process, which kills the groups still listed when
this process ends however it ends (the pipe to it closes); ``on_groups`` hears the list change (the
runner keeps it in its pid file, for a resume to end a group both missed: ``end_group``).
``kill_group`` ends one group whole. How and what it does not cover: docs/design/child-processes.md.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, Final

PR_SET_PDEATHSIG: Final = 1

_WATCHER: Final = """
import os, signal
for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE):
    signal.signal(s, signal.SIG_IGN)
groups, rest = set(), b""
while True:
    try:
        data = os.read(0, 4096)
    except InterruptedError:
        continue
    except OSError:
        break
    if not data:
        break
    *lines, rest = (rest + data).split(b"\\n")
    for line in lines:
        if line[:1] == b"+" and line[1:].isdigit():
            groups.add(int(line[1:]))
        elif line[:1] == b"-" and line[1:].isdigit():
            groups.discard(int(line[1:]))
for g in groups:
    try:
        os.killpg(g, signal.SIGKILL)
    except OSError:
        pass
"""
"""The watcher's program (standard library only: it starts in milliseconds, ``python -I -S``)."""


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl`` (``None`` off Linux), loaded at the first ``start`` (ctypes is slow to import)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        fn: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return fn


def _dies_with(parent: int) -> Callable[[], None]:
    """The ``preexec_fn`` of a child of ``parent``: SIGKILL when its parent thread ends; a parent
    already gone before that was set (the race of a fork) kills the child at once."""
    prctl = _prctl()  # found before the fork: the child only calls it

    def arm() -> None:
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return arm


class _Watch:
    """This process's watcher and the groups it was told of."""

    def __init__(self) -> None:
        self.lock = threading.RLock()  # a signal's handler may end a child while it is held
        self.pipe: IO[bytes] | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.groups: list[int] = []
        self.listeners: list[Callable[[Sequence[int]], None]] = []
        self.depth = 0  # the ``watching`` blocks running

    def tell(self, line: str) -> None:
        """Write one line to the watcher (a watcher gone: the death signal still holds)."""
        if self.pipe is None:
            return
        try:
            self.pipe.write(line.encode())
            self.pipe.flush()
        except (OSError, ValueError):
            self.pipe = None

    def changed(self) -> None:
        """Tell the listeners the groups now listed."""
        for listener in self.listeners:
            with contextlib.suppress(Exception):  # a pid file that cannot be written: the rest holds
                listener(tuple(self.groups))


_watch = _Watch()


def start(args: str | Sequence[str], **popen: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(args, **popen)`` as the leader of a new session that dies with this
    process (see the module docstring); ``done`` once it has been reaped."""
    with _watch.lock:
        proc: subprocess.Popen[bytes] = subprocess.Popen(
            args, start_new_session=True, preexec_fn=_dies_with(os.getpid()), **popen
        )
        _watch.groups.append(proc.pid)
        _watch.tell(f"+{proc.pid}\n")
        _watch.changed()
    return proc


def done(proc: subprocess.Popen[bytes]) -> None:
    """``proc`` (from ``start``) ended and was reaped: its group is no longer this process's."""
    with _watch.lock:
        if proc.pid in _watch.groups:
            _watch.groups.remove(proc.pid)
            _watch.tell(f"-{proc.pid}\n")
            _watch.changed()


@contextlib.contextmanager
def watching(on_groups: Callable[[Sequence[int]], None] | None = None) -> Iterator[None]:
    """While the block runs, the groups ``start`` makes are killed if this process dies, by a
    watcher started now (when it cannot start, the death signal alone holds); ``on_groups`` hears
    the groups alive after each change."""
    with _watch.lock:
        if on_groups is not None:
            _watch.listeners.append(on_groups)
        _watch.depth += 1
        if _watch.proc is None:
            with contextlib.suppress(OSError):
                _watch.proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", "-c", _WATCHER],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
                _watch.pipe = _watch.proc.stdin
                for group in _watch.groups:
                    _watch.tell(f"+{group}\n")
    try:
        yield
    finally:
        with _watch.lock:
            if on_groups is not None:
                _watch.listeners.remove(on_groups)
            _watch.depth -= 1
            watcher = _watch.proc if _watch.depth == 0 else None
            if watcher is not None:
                pipe, _watch.pipe, _watch.proc = _watch.pipe, None, None
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()  # the watcher ends the groups still listed, then exits
                with contextlib.suppress(subprocess.TimeoutExpired):
                    watcher.wait(timeout=5)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group ``proc`` leads (from ``start``) and reap ``proc``; its pipes stay
    for the caller to drain or close (a descendant that escaped the group may still hold them)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL cannot be ignored: 5 s is plenty
        proc.wait(timeout=5)
    done(proc)


def alive(group: int) -> bool:
    """Whether process group ``group`` still has a member that runs (a zombie waiting for its
    reaper has ended; another user's counts: it is not ours to end)."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    try:
        entries = os.listdir("/proc")
    except OSError:  # no /proc: the kernel's answer stands
        return True
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(group).encode() and fields[0] != b"Z":
            return True
    return False


def end_group(group: int, wait: float = 5.0) -> bool:
    """SIGKILL process group ``group`` and wait up to ``wait`` seconds for it to be gone; whether it is."""
    with contextlib.suppress(OSError):
        os.killpg(group, signal.SIGKILL)
    deadline = time.monotonic() + wait
    while alive(group):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True
