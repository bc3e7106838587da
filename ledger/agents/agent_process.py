"""Running one agent iteration as a process: its argv (never a shell) in the work directory with the
prompt on stdin, its output streamed line by line and kept, its whole process group killed on a
timeout or an interruption (SIGINT, SIGTERM, SIGHUP), which is re-raised as ``Interrupted``.
"""

from __future__ import annotations

import contextlib
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, TextIO

from ledger.core.processes import kill_group

INTERRUPTED: Final = "interrupted (Ctrl-C)"

INTERRUPTING: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass(frozen=True, slots=True)
class AgentRun:
    """One run of the agent: its combined output (or the time-out message), its exit code
    (``None`` if it was killed on time-out), whether it timed out, and how long it took.
    """

    output: str
    returncode: int | None
    timed_out: bool
    duration_ms: float
    interrupted: bool = False


class Interrupted(KeyboardInterrupt):
    """The loop was interrupted by ``signum`` (SIGINT, SIGTERM or SIGHUP); ``partial`` is the agent's
    run so far when the agent was running (its process group is already killed)."""

    def __init__(self, signum: int = signal.SIGINT, partial: AgentRun | None = None) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)
        self.partial = partial


def interrupted_reason(signum: int) -> str:
    """The recorded reason of an interruption: ``interrupted (Ctrl-C)``, ``interrupted (SIGTERM)``, ..."""
    return INTERRUPTED if signum == signal.SIGINT else f"interrupted ({signal.Signals(signum).name})"


class _Pending:
    """The signal handlers ``interrupts`` installed; ``close`` makes further signals no-ops."""

    def __init__(self) -> None:
        self.closed = False
        self.signum: int | None = None  # the signal that interrupted the loop, once one has

    def close(self) -> None:
        """From now on the signals are ignored (the interruption is being recorded)."""
        self.closed = True

    def handler(self, signum: int, frame: object) -> None:
        """Raise ``Interrupted(signum)``, once (DuckDB may turn it into its own "Query interrupted"
        error: ``signum`` says which signal it was)."""
        if not self.closed:
            self.closed = True
            self.signum = signum
            raise Interrupted(signum)


@contextlib.contextmanager
def interrupts() -> Iterator[_Pending]:
    """While the loop runs, SIGINT, SIGTERM and SIGHUP raise ``Interrupted`` (a ``KeyboardInterrupt``)
    in the main thread; a signal the process ignores (``nohup``) stays ignored. Outside the main
    thread nothing is installed."""
    pending = _Pending()
    if threading.current_thread() is not threading.main_thread():
        yield pending
        return
    previous: dict[int, Any] = {}
    try:
        for signum in INTERRUPTING:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                previous[signum] = signal.signal(signum, pending.handler)
        yield pending
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


def _feed(stdin: IO[bytes], data: bytes) -> None:
    """Write the prompt to the agent's stdin and close it; an agent that never reads is fine."""
    try:
        stdin.write(data)
    except (BrokenPipeError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError):
            stdin.close()


def _read(stdout: IO[bytes], lines: queue.Queue[bytes | None]) -> None:
    """Put each line of the agent's output on ``lines``, then ``None`` at end of file."""
    try:
        for line in iter(stdout.readline, b""):
            lines.put(line)
    except (OSError, ValueError):
        pass
    finally:
        lines.put(None)


def run_agent(
    argv: Sequence[str],
    prompt: str,
    *,
    cwd: Path,
    timeout_s: float,
    out: TextIO,
    timer: Callable[[], float] = time.monotonic,
    env: Mapping[str, str] | None = None,
) -> AgentRun:
    """Run ``argv`` once with ``prompt`` on stdin, streaming its output to ``out``, in the
    environment ``env`` (``None``: this process's).

    On time-out the process group is killed and the output is ``agent timed out after N s``.
    On ``KeyboardInterrupt`` (Ctrl-C, or ``Interrupted`` by a signal) the process group is killed
    and ``Interrupted`` raised, carrying the run so far as ``partial``. Raises
    ``OSError`` if the command cannot be started. ``timer`` (seconds) measures the recorded
    ``duration_ms`` only; the time-out always runs on the real monotonic clock.
    """
    started = timer()
    t0 = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=None if env is None else dict(env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    lines: queue.Queue[bytes | None] = queue.Queue()
    feeder = threading.Thread(target=_feed, args=(proc.stdin, prompt.encode()), daemon=True)
    reader = threading.Thread(target=_read, args=(proc.stdout, lines), daemon=True)
    feeder.start()
    reader.start()
    captured: list[str] = []

    def emit_out(text: str) -> None:
        out.write(text)
        out.flush()

    def emit(raw: bytes) -> None:
        text = raw.decode("utf-8", errors="replace")
        captured.append(text)
        emit_out(text)

    deadline = t0 + timeout_s
    timed_out = False
    interrupted: KeyboardInterrupt | None = None
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            try:
                item = lines.get(timeout=min(remaining, 0.1))
            except queue.Empty:
                continue
            if item is None:
                break
            emit(item)
        if not timed_out:
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                timed_out = True
    except KeyboardInterrupt as exc:
        interrupted = exc
        kill_group(proc)
    except BaseException:
        kill_group(proc)
        raise
    finally:
        if timed_out:
            kill_group(proc)
        reader.join(timeout=2)
        feeder.join(timeout=2)
        proc.stdout.close()
    while True:  # lines read after the time-out or the interruption, before the kill
        try:
            item = lines.get_nowait()
        except queue.Empty:
            break
        if item is not None:
            text = item.decode("utf-8", errors="replace")
            captured.append(text)
            if interrupted is None:
                emit_out(text)
    duration_ms = (timer() - started) * 1000
    if interrupted is not None:
        signum = interrupted.signum if isinstance(interrupted, Interrupted) else int(signal.SIGINT)
        partial = AgentRun("".join(captured), None, False, duration_ms, interrupted=True)
        raise Interrupted(signum, partial) from interrupted
    if timed_out:
        message = f"agent timed out after {timeout_s:g} s"
        out.write(f"\n[ralph-ledger] {message}; process group killed\n")
        out.flush()
        return AgentRun(message, None, True, duration_ms)
    return AgentRun("".join(captured), proc.returncode, False, duration_ms)
