"""Running one agent iteration as a process: its argv (never a shell) in the work directory with the
prompt on stdin, its stdout and stderr streamed line by line and kept apart, its whole process group
killed on a timeout or an interruption (SIGINT, SIGTERM, SIGHUP), which is re-raised as ``Interrupted``.

Only stdout is the agent's answer: agents echo the prompt, their reasoning and their commands on
stderr, so stderr is shown and recorded but never searched for a promise (``docs/design/clients.md``).
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, Protocol

from ledger.core.processes import done, kill_group, start

INTERRUPTED: Final = "interrupted (Ctrl-C)"

INTERRUPTING: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass(frozen=True, slots=True)
class AgentRun:
    """One run of the agent: its stdout, its exit code (``None`` if it was killed on time-out),
    whether it timed out, how long it took, whether it was interrupted, its stderr, and the time-out
    it had (seconds).
    """

    output: str
    returncode: int | None
    timed_out: bool
    duration_ms: float
    interrupted: bool = False
    stderr: str = ""
    timeout_s: float = 0.0

    @property
    def failure(self) -> str:
        """Why the run failed (``""``: it exited 0): a failed run is a failed iteration."""
        if self.interrupted:
            return ""
        if self.timed_out:
            return f"agent timed out after {self.timeout_s:g} s"
        if self.returncode == 0:
            return ""
        last = next((ln.strip() for ln in reversed(self.stderr.splitlines()) if ln.strip()), "")
        if not last:
            last = next((ln.strip() for ln in reversed(self.output.splitlines()) if ln.strip()), "")
        said = f": {last[:300]}" if last else ""
        return f"agent exited {self.returncode}{said}"


class Writer(Protocol):
    """Where a run's output goes (a text stream: ``sys.stdout``, ``io.StringIO``, ``Output``)."""

    def write(self, text: str, /) -> int:
        """Write ``text``; its length."""
        ...

    def flush(self) -> None:
        """Write out what is buffered."""
        ...


class Output:
    """The runner's output (its stdout): once a write fails because the reader went away (``| head``)
    or the stream was closed, ``gone`` is set and later writes are dropped, so the agent's output is
    still read and recorded and the loop ends after its turn (``ledger.drivers.runner.run``)."""

    def __init__(self, stream: Writer | None) -> None:
        self.stream = stream  # None: nowhere (``sys.stdout`` of a process started with it closed)
        self.gone = False

    def write(self, text: str, /) -> int:
        """Write ``text`` (dropped once the stream is gone); its length."""
        if self.stream is not None and not self.gone:
            try:
                self.stream.write(text)
            except (OSError, ValueError):
                self.gone = True
        return len(text)

    def flush(self) -> None:
        """Flush the stream (nothing once it is gone)."""
        if self.stream is not None and not self.gone:
            try:
                self.stream.flush()
            except (OSError, ValueError):
                self.gone = True


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


def _read(pipe: IO[bytes], lines: queue.Queue[tuple[int, bytes | None]], stream: int) -> None:
    """Put each line of one of the agent's pipes on ``lines`` as ``(stream, line)`` (1 stdout, 2
    stderr), then ``(stream, None)`` at end of file."""
    try:
        for line in iter(pipe.readline, b""):
            lines.put((stream, line))
    except (OSError, ValueError):
        pass
    finally:
        lines.put((stream, None))


def run_agent(
    argv: Sequence[str],
    prompt: str,
    *,
    cwd: Path,
    timeout_s: float,
    out: Writer,
    timer: Callable[[], float] = time.monotonic,
    env: Mapping[str, str] | None = None,
) -> AgentRun:
    """Run ``argv`` once with ``prompt`` on stdin, streaming its stdout and stderr to ``out``, in
    ``cwd`` with the environment ``env`` (``None``: this process's), ``PWD`` naming ``cwd``.

    On time-out the process group is killed and the run says so (``timed_out``, ``failure``).
    On ``KeyboardInterrupt`` (Ctrl-C, or ``Interrupted`` by a signal) the process group is killed
    and ``Interrupted`` raised, carrying the run so far as ``partial``. Raises
    ``OSError`` if the command cannot be started. ``timer`` (seconds) measures the recorded
    ``duration_ms`` only; the time-out always runs on the real monotonic clock.
    """
    started = timer()
    t0 = time.monotonic()
    environ = {**(os.environ if env is None else env), "PWD": str(Path(cwd).absolute())}
    proc = start(  # its group dies with this process (``ledger.core.processes``)
        list(argv),
        cwd=cwd,
        env=environ,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    lines: queue.Queue[tuple[int, bytes | None]] = queue.Queue()
    feeder = threading.Thread(target=_feed, args=(proc.stdin, prompt.encode()), daemon=True)
    readers = [
        threading.Thread(target=_read, args=(pipe, lines, stream), daemon=True)
        for stream, pipe in ((1, proc.stdout), (2, proc.stderr))
    ]
    feeder.start()
    for reader in readers:
        reader.start()
    captured: dict[int, list[str]] = {1: [], 2: []}
    open_pipes = 2

    def emit_out(text: str) -> None:
        out.write(text)
        out.flush()

    def emit(stream: int, raw: bytes) -> None:
        text = raw.decode("utf-8", errors="replace")
        captured[stream].append(text)
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
                stream, item = lines.get(timeout=min(remaining, 0.1))
            except queue.Empty:
                continue
            if item is None:
                open_pipes -= 1
                if open_pipes == 0:
                    break
                continue
            emit(stream, item)
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
        elif proc.returncode is not None:
            done(proc)
        for reader in readers:
            reader.join(timeout=2)
        feeder.join(timeout=2)
        proc.stdout.close()
        proc.stderr.close()
    while True:  # lines read after the time-out or the interruption, before the kill
        try:
            stream, item = lines.get_nowait()
        except queue.Empty:
            break
        if item is not None:
            text = item.decode("utf-8", errors="replace")
            captured[stream].append(text)
            if interrupted is None:
                emit_out(text)
    duration_ms = (timer() - started) * 1000
    stdout, stderr = "".join(captured[1]), "".join(captured[2])
    if interrupted is not None:
        signum = interrupted.signum if isinstance(interrupted, Interrupted) else int(signal.SIGINT)
        partial = AgentRun(stdout, None, False, duration_ms, interrupted=True, stderr=stderr)
        raise Interrupted(signum, partial) from interrupted
    if timed_out:
        run = AgentRun(stdout, None, True, duration_ms, stderr=stderr, timeout_s=timeout_s)
        out.write(f"\n[ralph-ledger] {run.failure}; process group killed\n")
        out.flush()
        return run
    return AgentRun(stdout, proc.returncode, False, duration_ms, stderr=stderr, timeout_s=timeout_s)
