"""The classic loop: run an agent command again and again until the engine says stop.

Each iteration starts the agent (an argv list, never a shell) in the engine's
work directory with the prompt on stdin, streams its stdout and stderr to
``out`` line by line while keeping them, and kills its whole process group if
it runs longer than ``iteration_timeout_s``. The files it changed (in a git
work tree) and its output go to ``Engine.validate``; the signal decides:

| exit | meaning                                                              |
|------|----------------------------------------------------------------------|
| 0    | complete: the engine answered COMPLETE and the session was completed |
| 3    | blocked: the engine answered BLOCKED (a BLOCKED promise, a guard)    |
| 4    | escalated: ESCALATE, or ``next`` refused (e.g. maximum iterations)   |
| 130  | interrupted by Ctrl-C; the session stays running and resumable      |
| 2    | bad usage (the ``run`` command line; see ``ledger.cli``)             |

An agent printing Claude Code's message format (``claude -p --output-format
stream-json`` or ``json``) has its tokens, tool calls and edited files read from
that output (``ledger.transcript.scan_output``).

An interruption is recorded as an ``override`` of kind ``interrupted`` (a
human intervened), not as ``Engine.stop``'s ``manual_stop``: a manual stop is
honoured at the next validate as BLOCKED, which would make the session
impossible to resume. ``run_loop(..., resume=True)`` carries on with the
session's current iteration, running the agent for it again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final, TextIO

from ledger import events as ev
from ledger.config import LoopConfig
from ledger.engine import Engine, EngineError
from ledger.transcript import scan_output

EXIT_COMPLETE: Final = 0
EXIT_USAGE: Final = 2
EXIT_BLOCKED: Final = 3
EXIT_ESCALATED: Final = 4
EXIT_INTERRUPTED: Final = 130
INTERRUPTED: Final = "interrupted (Ctrl-C)"
GIT_TIMEOUT_S: Final = 30.0


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a loop ended: its exit code (table above), the last signal (``""`` if the loop was
    interrupted before validating), the session's iteration when it ended, and why.
    """

    session_id: str
    exit_code: int
    signal: str
    iterations: int
    reason: str


@dataclass(frozen=True, slots=True)
class AgentRun:
    """One run of the agent: its combined output (or the time-out message), its exit code
    (``None`` if it was killed on time-out), whether it timed out, and how long it took.
    """

    output: str
    returncode: int | None
    timed_out: bool
    duration_ms: float


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the agent's process group (it leads its own session), then reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL cannot be ignored: 5 s is plenty
        proc.wait(timeout=5)


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
) -> AgentRun:
    """Run ``argv`` once with ``prompt`` on stdin, streaming its output to ``out``.

    On time-out the process group is killed and the output is ``agent timed out after N s``.
    On ``KeyboardInterrupt`` the process group is killed and the interrupt re-raised. Raises
    ``OSError`` if the command cannot be started. ``timer`` (seconds) measures the recorded
    ``duration_ms`` only; the time-out always runs on the real monotonic clock.
    """
    started = timer()
    t0 = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
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

    def emit(raw: bytes) -> None:
        text = raw.decode("utf-8", errors="replace")
        captured.append(text)
        out.write(text)
        out.flush()

    deadline = t0 + timeout_s
    timed_out = False
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
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        if timed_out:
            _kill_group(proc)
        reader.join(timeout=2)
        feeder.join(timeout=2)
        proc.stdout.close()
    while True:  # lines read after the time-out, before the kill
        try:
            item = lines.get_nowait()
        except queue.Empty:
            break
        if item is not None:
            emit(item)
    duration_ms = (timer() - started) * 1000
    if timed_out:
        message = f"agent timed out after {timeout_s:g} s"
        out.write(f"\n[ralph-ledger] {message}; process group killed\n")
        out.flush()
        return AgentRun(message, None, True, duration_ms)
    return AgentRun("".join(captured), proc.returncode, False, duration_ms)


# ----------------------------------------------------------------------------- files modified
def _git(work_dir: Path, *args: str) -> bytes | None:
    """``git -C work_dir args`` stdout, or ``None`` if git is missing or fails."""
    try:
        done = subprocess.run(
            ["git", "-C", str(work_dir), *args],
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _digest(path: Path) -> str:
    """A file's content hash; ``"missing"`` or ``"not-a-file"`` where there is none."""
    try:
        if not path.is_file():
            return "not-a-file" if path.exists() else "missing"
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


def snapshot(work_dir: Path, exclude: Path | None = None) -> dict[str, str] | None:
    """Content hashes of the paths ``git status`` reports (changed from HEAD, or untracked and
    not ignored), relative to the repository root; ``None`` outside a git work tree.

    Paths under ``exclude`` (the ledger home) are left out.
    """
    top = _git(work_dir, "rev-parse", "--show-toplevel")
    if top is None:
        return None
    root = Path(os.fsdecode(top.strip()))
    status = _git(work_dir, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
    if status is None:
        return None
    hashes: dict[str, str] = {}
    skip = exclude.resolve() if exclude is not None else None
    for entry in status.split(b"\0"):
        if len(entry) < 4:
            continue
        rel = os.fsdecode(entry[3:])
        path = root / rel
        if skip is not None and path.resolve().is_relative_to(skip):
            continue
        hashes[rel] = _digest(path)
    return hashes


def files_changed(before: dict[str, str] | None, after: dict[str, str] | None) -> list[str]:
    """The paths whose content differs between two snapshots, sorted.

    A path missing from a snapshot was unchanged from HEAD then; no snapshot (not a git work
    tree) means no files.
    """
    if before is None or after is None:
        return []
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


# ----------------------------------------------------------------------------- the loop
def run_loop(
    engine: Engine,
    session_id: str,
    config: LoopConfig,
    agent_cmd: list[str],
    prompt: str,
    *,
    iteration_timeout_s: float,
    out: TextIO,
    resume: bool = False,
    timer: Callable[[], float] = time.monotonic,
) -> RunResult:
    """Run the agent until the engine completes, blocks or escalates the session (exit codes above).

    The first iteration gets ``prompt`` on stdin; each later one the engine's ``next_prompt``,
    or ``prompt`` when that is empty. With ``resume`` the session must exist and be running:
    ``start`` is skipped and its current iteration runs again. ``timer`` measures each agent
    run's recorded duration (see ``run_agent``). Raises ``EngineError`` if the session cannot
    be started or resumed, ``OSError`` if the agent command cannot be run.
    """
    if not agent_cmd:
        raise ValueError("run_loop needs an agent command")
    if resume:
        row = engine.status(session_id)
        if row["status"] != "running":
            raise EngineError(f"session {session_id!r} is {row['status']}; only a running session resumes")
        n, max_it = int(row["iteration"]), int(row["max_iterations"] or config.effective_max_iterations())
    else:
        started = engine.start(session_id, config)
        n, max_it = started.iteration, started.max_iterations
    stdin_text = prompt
    while True:
        out.write(f"[ralph-ledger] {session_id}: iteration {n} of {max_it}\n")
        out.flush()
        before = snapshot(engine.work_dir, engine.home.root)
        try:
            run = run_agent(
                agent_cmd,
                stdin_text,
                cwd=engine.work_dir,
                timeout_s=iteration_timeout_s,
                out=out,
                timer=timer,
            )
        except KeyboardInterrupt:
            engine.journal(session_id).append(
                ev.Override(session_id=session_id, iteration=n, kind="interrupted", reason=INTERRUPTED)
            )
            out.write(f"\n[ralph-ledger] {session_id}: {INTERRUPTED}; resume with --resume {session_id}\n")
            out.flush()
            return RunResult(session_id, EXIT_INTERRUPTED, "", n, INTERRUPTED)
        files = files_changed(before, snapshot(engine.work_dir, engine.home.root))
        stop_reason = "timeout" if run.timed_out else f"exit {run.returncode}"
        spoken = scan_output(run.output.splitlines())  # tokens and tools of a stream-json agent
        result = engine.validate(
            session_id,
            run.output,
            files_modified=files or spoken.files_modified,
            tool_count=spoken.tool_count,
            tokens=spoken.tokens,
            stop_reason=stop_reason,
            duration_ms=run.duration_ms,
        )
        out.write(f"[ralph-ledger] {session_id}: iteration {n}: {result.signal} ({result.reason})\n")
        out.flush()
        if result.signal == "COMPLETE":
            engine.complete(session_id, result.detected_promise)
            return RunResult(session_id, EXIT_COMPLETE, result.signal, n, result.reason)
        if result.signal == "BLOCKED":
            return RunResult(session_id, EXIT_BLOCKED, result.signal, n, result.reason)
        if result.signal == "ESCALATE":
            return RunResult(session_id, EXIT_ESCALATED, result.signal, n, result.reason)
        try:
            n = engine.next(session_id).iteration
        except EngineError as exc:
            engine.escalate(session_id, str(exc))
            return RunResult(session_id, EXIT_ESCALATED, "ESCALATE", n, str(exc))
        stdin_text = result.next_prompt or prompt
