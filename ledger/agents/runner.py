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
| 130  | interrupted by Ctrl-C (SIGINT); the session stays running, resumable |
| 143  | interrupted by SIGTERM (128 + 15), likewise                          |
| 129  | interrupted by SIGHUP (128 + 1: the terminal closed), likewise       |
| 2    | bad usage (the ``run`` command line; see ``ledger.cli``)             |
| 1    | a configuration that would fail, a session that cannot start/resume  |

An agent printing Claude Code's message format (``claude -p --output-format
stream-json`` or ``json``) has its tokens, tool calls and edited files read from
that output (``ledger.agents.claude_code.transcript.scan_output``).

Every iteration's prompt is the task plus what the previous iteration taught
the loop (``ledger.loop.prompts.next_prompt``, shared with the Claude Code hook).

An interruption (SIGINT, SIGTERM or SIGHUP) kills the agent's process group,
or the running validation rule's, records the agent's turn so far (its output,
``stop_reason`` ``interrupted``) unless the engine already has, then an
``override`` of kind ``interrupted`` (a human intervened), not
``Engine.stop``'s ``manual_stop``: a manual stop is honoured at the next
validate as BLOCKED, which would make the session impossible to resume.
``run_loop(..., resume=True)`` carries on with the session's current
iteration, running the agent for it again with the prompt it had; the
session recorded its prompt and agent command when it started (``recorded``).
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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, TextIO

import msgspec

from ledger import events as ev
from ledger.agents.claude_code.transcript import scan_output
from ledger.loop.config import LoopConfig
from ledger.loop.engine import Engine, EngineError
from ledger.loop.prompts import next_prompt
from ledger.storage.journal import Cursor, read_new

EXIT_COMPLETE: Final = 0
EXIT_USAGE: Final = 2
EXIT_BLOCKED: Final = 3
EXIT_ESCALATED: Final = 4
EXIT_INTERRUPTED: Final = 130
INTERRUPTED: Final = "interrupted (Ctrl-C)"
INTERRUPTING: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
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

    def close(self) -> None:
        """From now on the signals are ignored (the interruption is being recorded)."""
        self.closed = True

    def handler(self, signum: int, frame: object) -> None:
        """Raise ``Interrupted(signum)``, once."""
        if not self.closed:
            self.closed = True
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
        _kill_group(proc)
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        if timed_out:
            _kill_group(proc)
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
def recorded(engine: Engine, session_id: str) -> tuple[str, list[str]]:
    """The prompt and the agent command the session recorded when it started (a session that
    recorded no prompt answers its task; no command, ``[]``). Raises ``EngineError`` when there is
    no such session."""
    path = engine.journal(session_id).path
    if not path.exists():
        raise EngineError(
            f"no session {session_id!r} in {engine.home.root}; `ralph-ledger sessions` lists them"
        )
    started = [e for e in read_new(path, Cursor()).events if isinstance(e, ev.SessionStarted)]
    if not started:
        raise EngineError(f"session {session_id!r} has no session_started event")
    return started[-1].prompt or started[-1].task, list(started[-1].command)


@dataclass(frozen=True, slots=True)
class _Learned:
    """What an iteration taught the loop, as read back from the journal (``ledger.loop.prompts.Learned``)."""

    iteration: int
    next_prompt: str
    feedback: list[str]


def _learned(engine: Engine, session_id: str, iteration: int) -> _Learned:
    """What iteration ``iteration`` of the session taught the loop: the deciding hook's next prompt
    and the feedback of its last validate (nothing for iteration 0)."""
    hint, feedback = "", list[str]()
    for e in read_new(engine.journal(session_id).path, Cursor()).events:
        if e.iteration != iteration:
            continue
        if isinstance(e, ev.HookDecided):
            hint = e.next_prompt
        elif isinstance(e, ev.SignalResolved):
            feedback = list(e.feedback)
    return _Learned(iteration, hint, feedback)


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

    A new session records ``prompt``, the agent command, ``prompt`` as its task and the command's
    program as its agent (unless the configuration names them). Every iteration gets the prompt composed by
    ``ledger.loop.prompts.next_prompt``: ``prompt`` then what the previous iteration taught the loop.
    With ``resume`` the session must exist and be running: ``start`` is skipped and its current
    iteration runs again, with the prompt it had. SIGINT, SIGTERM and SIGHUP (in the main thread)
    end the loop as described above. ``timer`` measures each agent run's recorded duration (see
    ``run_agent``). Raises ``EngineError`` if the session cannot be started or resumed, ``OSError``
    if the agent command cannot be run.
    """
    if not agent_cmd:
        raise ValueError("run_loop needs an agent command")
    if resume:
        row = engine.status(session_id)
        if row["status"] != "running":
            raise EngineError(f"session {session_id!r} is {row['status']}; only a running session resumes")
        n, max_it = int(row["iteration"]), int(row["max_iterations"] or config.effective_max_iterations())
        stdin_text = next_prompt(prompt, _learned(engine, session_id, n - 1))
    else:
        config = msgspec.structs.replace(
            config,
            task=config.task or prompt,
            agent=config.agent or Path(agent_cmd[0]).name,
            max_iterations=config.effective_max_iterations(),  # the default of the configured agent
        )
        started = engine.start(session_id, config, prompt=prompt, command=agent_cmd)
        n, max_it = started.iteration, started.max_iterations
        stdin_text = prompt
    loop = _Loop(engine, session_id, out)
    with interrupts() as pending:
        try:
            return loop.iterate(n, max_it, stdin_text, prompt, agent_cmd, iteration_timeout_s, timer)
        except KeyboardInterrupt as exc:
            pending.close()  # a second signal must not cut the recording short
            return loop.interrupted(exc)


class _Loop:
    """One ``run_loop``: the iterations, and what an interruption records at each step."""

    def __init__(self, engine: Engine, session_id: str, out: TextIO) -> None:
        self.engine, self.session_id, self.out = engine, session_id, out
        self.n = 0
        self.before: dict[str, str] | None = None  # the work tree before the agent's run
        self.unrecorded: tuple[AgentRun, list[str]] | None = None  # the agent's run and files, until
        # the engine has recorded them
        self.journal_size = 0

    def say(self, text: str) -> None:
        """Write one ``[ralph-ledger]`` line to ``out`` (a terminal gone after SIGHUP is ignored)."""
        with contextlib.suppress(OSError, ValueError):
            self.out.write(text)
            self.out.flush()

    def iterate(
        self,
        n: int,
        max_it: int,
        stdin_text: str,
        prompt: str,
        agent_cmd: list[str],
        timeout_s: float,
        timer: Callable[[], float],
    ) -> RunResult:
        """The iterations from ``n`` on, until a signal other than CONTINUE."""
        engine, sid = self.engine, self.session_id
        while True:
            self.n = n
            self.say(f"[ralph-ledger] {sid}: iteration {n} of {max_it}\n")
            self.before = before = snapshot(engine.work_dir, engine.home.root)
            run = run_agent(
                agent_cmd, stdin_text, cwd=engine.work_dir, timeout_s=timeout_s, out=self.out, timer=timer
            )
            self.unrecorded, self.journal_size = (run, []), _size(engine.journal(sid).path)
            files = files_changed(before, snapshot(engine.work_dir, engine.home.root))
            spoken = scan_output(run.output.splitlines())  # tokens and tools of a stream-json agent
            self.unrecorded = run, files or list(spoken.files_modified)
            result = engine.validate(
                sid,
                run.output,
                files_modified=files or spoken.files_modified,
                tool_count=spoken.tool_count,
                tokens=spoken.tokens,
                stop_reason=_stop_reason(run),
                duration_ms=run.duration_ms,
            )
            self.unrecorded = None
            self.say(f"[ralph-ledger] {sid}: iteration {n}: {result.signal} ({result.reason})\n")
            if result.signal == "COMPLETE":
                engine.complete(sid, result.detected_promise)
                return RunResult(sid, EXIT_COMPLETE, result.signal, n, result.reason)
            if result.signal == "BLOCKED":
                return RunResult(sid, EXIT_BLOCKED, result.signal, n, result.reason)
            if result.signal == "ESCALATE":
                return RunResult(sid, EXIT_ESCALATED, result.signal, n, result.reason)
            try:
                n = engine.next(sid).iteration
            except EngineError as exc:
                engine.escalate(sid, str(exc))
                return RunResult(sid, EXIT_ESCALATED, "ESCALATE", n, str(exc))
            stdin_text = next_prompt(prompt, result)

    def interrupted(self, exc: KeyboardInterrupt) -> RunResult:
        """Record an interruption: the agent's (partial) turn if the engine has not recorded it, then
        an ``interrupted`` override; the session stays running and resumable."""
        engine, sid, n = self.engine, self.session_id, self.n
        signum = exc.signum if isinstance(exc, Interrupted) else int(signal.SIGINT)
        reason = interrupted_reason(signum)
        journal = engine.journal(sid)
        events: list[ev.Event] = []
        turn: tuple[AgentRun, list[str]] | None = None
        if isinstance(exc, Interrupted) and exc.partial is not None:  # the agent was running
            after = snapshot(engine.work_dir, engine.home.root)
            turn = exc.partial, files_changed(self.before, after)
        elif self.unrecorded is not None and _size(journal.path) == self.journal_size:  # rules running
            turn = self.unrecorded
        if turn is not None:
            run, files = turn
            spoken = scan_output(run.output.splitlines())  # what a stream-json agent spent so far
            events.append(
                ev.AgentTurn(
                    session_id=sid,
                    iteration=n,
                    output_excerpt=run.output[-2000:],
                    files_modified=files or list(spoken.files_modified),
                    tool_count=spoken.tool_count,
                    stop_reason=_stop_reason(run),
                    tokens=spoken.tokens,
                    duration_ms=run.duration_ms,
                )
            )
        if n and engine.status(sid)["status"] == "running":
            events.append(ev.Override(session_id=sid, iteration=n, kind="interrupted", reason=reason))
        if events:
            journal.append(*events)
        self.say(f"\n[ralph-ledger] {sid}: {reason}; resume with --resume {sid}\n")
        return RunResult(sid, 128 + signum, "", n, reason)


def _stop_reason(run: AgentRun) -> str:
    """How the agent's run ended, as ``AgentTurn.stop_reason`` records it."""
    if run.interrupted:
        return "interrupted"
    return "timeout" if run.timed_out else f"exit {run.returncode}"


def _size(path: Path) -> int:
    """A journal's size in bytes (0 when it does not exist)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0
