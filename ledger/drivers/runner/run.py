"""The classic loop: run an agent command again and again until the loop says stop.

Each iteration starts the agent (an argv list, never a shell) in the work directory with the prompt
on stdin, streams and keeps its output, kills its whole process group past ``iteration_timeout_s``,
and hands the turn (read in the agent's format, ``ledger.drivers.runner.formats``) to the loop step
(``ledger.loop.step``), which decides. A pause waits, polling the journal; a signal kills the agent,
records its turn so far and an ``interrupted`` override, and leaves the session resumable
(``resume=True`` carries on with its current iteration); a reader of its output that went away
(``| head``) ends it after the turn under way is recorded. Exit codes, prompts, signals and limits:
docs/runner.md.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, timedelta
from pathlib import Path
from typing import Final

import msgspec

from ledger import events as ev
from ledger.core.errors import one_line
from ledger.core.words import plural
from ledger.drivers.runner.agent_process import (
    AgentRun,
    Interrupted,
    Output,
    Writer,
    interrupted_reason,
    interrupts,
    run_agent,
)
from ledger.drivers.runner.changes import files_changed, in_project, snapshot
from ledger.drivers.runner.formats import AgentFormat, command_model, detect
from ledger.drivers.runner.formats.report import AgentReport, by_model
from ledger.drivers.runner.limits import MAX_LIMITED_RUNS, RateLimit, rate_limit, wait_s
from ledger.drivers.runner.worktrees import Worktree
from ledger.loop.config.loop_config import LoopConfig
from ledger.loop.decision import Turn
from ledger.loop.engine import Engine
from ledger.loop.engine_types import EngineError
from ledger.loop.snapshots import left_out_note
from ledger.loop.step import Continue, Decision, End, LoopSession, Wait
from ledger.loop.tasks.files import TaskFile
from ledger.loop.tasks.progress import file_record, listed, task_ends, task_state
from ledger.notify import reporting

EXIT_COMPLETE: Final = 0

EXIT_USAGE: Final = 2

EXIT_BLOCKED: Final = 3

EXIT_ESCALATED: Final = 4

EXIT_INTERRUPTED: Final = 130

EXIT_OUTPUT_CLOSED: Final = 128 + signal.SIGPIPE

OUTPUT_CLOSED: Final = "interrupted (stdout closed)"
"""The reason recorded when the loop ended because its output was closed (``| head``)."""

PAUSE_POLL_S: Final = 0.5
"""How often a paused loop reads its journal for a resume or a stop, in seconds."""


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


# ----------------------------------------------------------------------------- the loop
def recorded(engine: Engine, session_id: str) -> tuple[str, list[str]]:
    """The prompt and the agent command the session recorded when it started (a session that
    recorded no prompt answers its task; no command, ``[]``). Raises ``EngineError`` when there is
    no such session."""
    started = LoopSession(engine, session_id, "").started()
    return started.prompt or started.task, list(started.command)


def recorded_place(engine: Engine, session_id: str) -> tuple[str, str, str]:
    """The git worktree (its root) and branch the session recorded it runs in, ``("", "")`` for
    one in the project's own checkout, and the folder its agent works in, absolute (``""``: not
    recorded). Raises ``EngineError`` when there is no such session."""
    started = LoopSession(engine, session_id, "").started()
    folder = os.path.join(engine.home.root.parent, started.work_dir) if started.work_dir else ""
    return started.worktree, started.branch, os.path.normpath(folder) if folder else ""


def work_dir_record(engine: Engine) -> str:
    """The engine's work folder as a session records it: relative to the folder holding the home
    (the project, for its own ``.ralph``: a project moved with its home resumes where it ran),
    absolute when outside that folder."""
    return file_record(engine.home.root.parent, engine.work_dir)


def run_loop(
    engine: Engine,
    session_id: str,
    config: LoopConfig,
    agent_cmd: list[str],
    prompt: str,
    *,
    iteration_timeout_s: float,
    out: Writer,
    resume: bool = False,
    timer: Callable[[], float] = time.monotonic,
    rate_limit_wait_s: float = 60.0,
    agent_format: AgentFormat | None = None,
    worktree: Worktree | None = None,
    tasks: TaskFile | None = None,
) -> RunResult:
    """Run the agent until the engine completes, blocks or escalates the session (exit codes above).

    A new session records ``prompt``, the agent command, ``prompt`` as its task and the command's
    program as its agent (unless the configuration names them). Every iteration gets the prompt composed by
    ``ledger.loop.prompt.next_prompt.next_prompt``: ``prompt`` then what the previous iteration taught the
    loop.
    With ``resume`` the session must exist and be running: ``start`` is skipped and its current
    iteration runs again, with the prompt it had, unless its turn was recorded (``LoopSession.turn_taken``:
    the loop then goes on from it). SIGINT, SIGTERM and SIGHUP (in the main thread)
    end the loop as described above. ``timer`` measures each agent run's recorded duration (see
    ``run_agent``). A run that hit a usage or rate limit (``ledger.drivers.runner.limits``) is not an
    iteration: it is recorded (``rate_limited``), the loop waits until the limit resets (or
    ``rate_limit_wait_s``, doubling) and runs the same iteration again. Raises ``EngineError`` if
    the session cannot be started or resumed, ``OSError`` if the agent command cannot be run.
    ``agent_format`` reads the agent's output (``None``: detected from ``agent_cmd``). A loop in a
    ``worktree`` (``ledger.drivers.runner.worktrees``; the engine's ``work_dir`` is in it) records it when it
    starts, and its agent runs with ``RALPH_HOME`` naming the engine's home, so a Stop hook or a
    ``ralph-ledger`` the agent runs records there too, never in a home of the worktree's own.
    A new session records the engine's ``work_dir`` (``work_dir_record``), where a resume works
    again. Once ``out`` is
    gone (``Output``: its reader went away), the turn under way runs to its end and is recorded, and
    the loop ends there (``EXIT_OUTPUT_CLOSED``) unless that turn ended it. A new session with
    ``tasks`` (``run --tasks``) works through that list, one task at a time (docs/tasks.md): each
    prompt is ``prompt`` (which may be empty) with the current task and the list's state.
    """
    if not agent_cmd:
        raise ValueError("run_loop needs an agent command")
    if resume:
        row = engine.status(session_id)
        if ev.session_status(row["status"]) != "running":
            raise EngineError(f"session {session_id!r} is {row['status']}; only a running session resumes")
        n, max_it = int(row["iteration"]), int(row["max_iterations"] or config.effective_max_iterations())
        session = LoopSession(engine, session_id, prompt)
        stdin_text = session.prompt_of(n)  # with its summary and guidance
        advance = session.turn_taken()  # validated and paused, or killed recording it: the loop goes on
    else:
        config = msgspec.structs.replace(
            config,
            task=config.task or prompt.strip() or _list_label(tasks),  # a label: not the file's last newline
            agent=config.agent or Path(agent_cmd[0]).name,
            # the default of the configured agent; "auto" is chosen by the engine (ledger.loop.decide.limits)
            max_iterations="auto" if config.max_iterations == "auto" else config.effective_max_iterations(),
        )
        where = (str(worktree.path), worktree.branch) if worktree else ("", "")
        started = engine.start(
            session_id,
            config,
            prompt=prompt,
            command=agent_cmd,
            worktree=where,
            work_dir=work_dir_record(engine),
            task_list=tasks.tasks if tasks else (),
            task_file=file_record(engine.home.root.parent, tasks.path) if tasks else "",
        )
        n, max_it = started.iteration, started.max_iterations
        stdin_text, advance = prompt, False
        if tasks is not None:  # the first prompt names the first task
            stdin_text = LoopSession(engine, session_id, prompt).prompt_of(1)
    output = out if isinstance(out, Output) else Output(out)
    loop = _Loop(engine, session_id, output, rate_limit_wait_s, agent_format or detect(agent_cmd))
    loop.session = LoopSession(engine, session_id, prompt)
    loop.agent_cmd = agent_cmd
    loop.listed = listed(loop.session.events())
    if not resume and config.max_iterations == "auto":  # say how the limit was chosen
        loop.say(
            f"[ralph-ledger] {session_id}: max iterations {max_it} ({_limit_reason(engine, session_id)})\n"
        )
    if worktree is not None:
        loop.env = {**os.environ, "RALPH_HOME": str(engine.home.root)}
    with reporting(), interrupts() as pending:  # notifications: failures on stderr, awaited at the end
        try:
            if advance:  # the iteration's turn was recorded: the loop goes on from it, never runs it again
                decision = loop.session.resume()
                if (done := decision.result) is not None:  # a step a kill cut short, finished now
                    loop.say(f"[ralph-ledger] {session_id}: iteration {n}: {done.signal} ({done.reason})\n")
                going = loop.went_on(n, decision)
                if isinstance(going, RunResult):
                    return going
                n, max_it, stdin_text = going
            return loop.iterate(n, max_it, stdin_text, agent_cmd, iteration_timeout_s, timer)
        except KeyboardInterrupt as exc:
            pending.close()  # a second signal must not cut the recording short
            return loop.interrupted(exc)
        except Exception:
            if pending.signum is None:
                raise
            pending.close()  # a signal during a DuckDB statement comes back as DuckDB's own error
            return loop.interrupted(Interrupted(pending.signum))


def _list_label(tasks: TaskFile | None) -> str:
    """A task-list loop's task label when no prompt names it: ``tasks.md (3 tasks)``."""
    return f"{tasks.path.name} ({plural(len(tasks.tasks), 'task')})" if tasks else ""


def _limit_reason(engine: Engine, session_id: str) -> str:
    """Why the session's limit is what it is, as its ``session_started`` recorded it."""
    return str(engine.status(session_id)["max_iterations_reason"] or "")


class _Loop:
    """One ``run_loop``: the iterations, and what an interruption records at each step."""

    def __init__(
        self, engine: Engine, session_id: str, out: Output, rate_limit_wait_s: float, fmt: AgentFormat
    ) -> None:
        self.engine, self.session_id, self.out, self.fmt = engine, session_id, out, fmt
        self.sidecar = fmt.sidecar()  # what the format reads beside stdout, for this loop
        self.rate_limit_wait_s = rate_limit_wait_s  # the back-off's first wait, when no reset is given
        self.n = 0
        self.before: dict[str, str] | None = None  # the work tree before the agent's run
        self.unrecorded: tuple[AgentRun, list[str], AgentReport | None] | None = None  # the agent's
        # run, files and report, until the engine has recorded them
        self.mark = 0  # the session's events when its turn was about to be taken
        self.env: dict[str, str] | None = None  # the agent's environment (None: this process's)
        self.agent_cmd: list[str] = []  # the agent's command (its model, when its output names none)
        self.session = LoopSession(engine, session_id, "")  # the loop's steps (``ledger.loop.step``)
        self.listed = False  # a task-list loop: each task's start is said

    def say_task(self, n: int) -> None:
        """Say which task iteration ``n`` works on, when it is the first of that task's iterations."""
        state = task_state(self.session.events())
        if state is not None and state.current is not None and state.began == n:
            cur = state.current
            self.say(
                f"[ralph-ledger] {self.session_id}: task {cur.task_no} of {len(state.tasks)}: {cur.title}\n"
            )

    def say(self, text: str) -> None:
        """Write one ``[ralph-ledger]`` line to ``out`` (a terminal gone after SIGHUP is ignored)."""
        self.out.write(text)
        self.out.flush()

    def iterate(
        self,
        n: int,
        max_it: int,
        stdin_text: str,
        agent_cmd: list[str],
        timeout_s: float,
        timer: Callable[[], float],
    ) -> RunResult:
        """The iterations from ``n`` on, until a signal other than CONTINUE."""
        engine, sid = self.engine, self.session_id
        limited = 0  # rate-limited runs in a row
        while True:
            self.n = n
            if self.out.gone:  # nobody reads what the next iteration would say
                return self.output_closed()
            self.say(f"[ralph-ledger] {sid}: iteration {n} of {max_it}\n")
            if self.listed:
                self.say_task(n)
            self.before = before = snapshot(engine.work_dir, engine.home.root)
            with self.sidecar.run(agent_cmd) as side:  # e.g. Copilot's usage file
                run = run_agent(
                    side.command,
                    stdin_text,
                    cwd=engine.work_dir,
                    timeout_s=timeout_s,
                    out=self.out,
                    timer=timer,
                    env=self.env,
                )
                spoken = side.read(self.fmt.parse(run.output))  # what the agent reported, in its format
            failed = run.returncode != 0 or run.timed_out
            said = f"{run.output}\n{run.stderr}"  # a limit may be reported on either stream
            limit = rate_limit(said, failed, engine.clock, self.fmt.limits)  # as its agent reports
            if limit is not None:  # not an iteration: wait, then run the same one again
                limited += 1
                if limited > MAX_LIMITED_RUNS:
                    reason = f"rate limited {MAX_LIMITED_RUNS} runs in a row ({limit.reason})"
                    engine.escalate(sid, reason)
                    return RunResult(sid, EXIT_ESCALATED, "ESCALATE", n, reason)
                self.wait_out(limit, limited - 1, spoken, command_model(agent_cmd))
                continue
            limited = 0
            self.unrecorded, self.mark = (run, [], spoken), len(self.session.events())
            files = files_changed(before, snapshot(engine.work_dir, engine.home.root))
            files = files or in_project(spoken.files_modified, engine.work_dir)
            self.unrecorded = run, files, spoken
            own, others = by_model(spoken)  # each model's tokens priced at that model
            turn = Turn(
                spoken.text,  # promises count in the agent's final text only
                files_modified=files,
                tool_count=spoken.tool_count,
                tokens=own,
                stop_reason=_stop_reason(run),
                duration_ms=run.duration_ms,
                model=spoken.model or command_model(agent_cmd),
                other_models=others,
                cost_usd=spoken.cost_usd,
                context_tokens=spoken.context_tokens,
                failure=_failure(run, spoken.error),
                stderr=run.stderr,
            )
            decision = self.session.take_turn(turn)
            self.unrecorded = None
            if note := left_out_note(self.session.events(), n):
                self.say(f"[ralph-ledger] {sid}: {note}\n")
            result = decision.result
            if result is not None:
                self.say(f"[ralph-ledger] {sid}: iteration {n}: {result.signal} ({result.reason})\n")
            for line in task_ends(self.session.events(), self.mark):  # what the iteration's end did
                self.say(f"[ralph-ledger] {sid}: {line}\n")
            going = self.went_on(n, decision)
            if isinstance(going, RunResult):
                return going
            n, max_it, stdin_text = going

    def went_on(self, n: int, decision: Decision) -> tuple[int, int, str] | RunResult:
        """Act on a step's decision after iteration ``n``: the next iteration's number, maximum and
        prompt, or how the loop ended. While the session is paused, wait, polling the journal, for a
        resume (or a stop: the loop ends blocked)."""
        sid = self.session_id
        if isinstance(decision, Wait) and self.out.gone:  # no one would see the pause, nor resume it
            self.n = n
            return self.output_closed()
        if isinstance(decision, Wait):
            self.say(
                f"[ralph-ledger] {sid}: paused after iteration {n}; resume it with "
                f"`ralph-ledger resume {sid}` (Ctrl-C stops; --resume goes on)\n"
            )
            while isinstance(decision, Wait):
                time.sleep(PAUSE_POLL_S)
                decision = self.session.resume()
            if isinstance(decision, Continue):
                self.say(f"[ralph-ledger] {sid}: resumed\n")
        if isinstance(decision, Continue):
            return decision.iteration, decision.max_iterations, decision.prompt
        assert isinstance(decision, End)
        code = {"COMPLETE": EXIT_COMPLETE, "BLOCKED": EXIT_BLOCKED}.get(decision.signal, EXIT_ESCALATED)
        return RunResult(sid, code, decision.signal, n, decision.reason)

    def wait_out(self, limit: RateLimit, attempt: int, spoken: AgentReport, named: str) -> None:
        """Record a rate-limited run (what it spent, by model; ``named``: the command's model) and
        sleep until the limit resets (or a back-off); a signal meanwhile interrupts the loop as
        anywhere else."""
        now = self.engine.clock()
        wait = wait_s(limit, now, attempt, self.rate_limit_wait_s)
        sid, n = self.session_id, self.n
        own, others = by_model(spoken)
        self.session.record(
            ev.RateLimited(
                session_id=sid,
                iteration=n,
                reason=limit.reason,
                resets_at=limit.resets_at,
                wait_s=wait,
                tokens=own,
                model=spoken.model or named,
            ),
            *(ev.ModelTokens(session_id=sid, iteration=n, model=m, tokens=t) for m, t in others),
        )
        until = (now + timedelta(seconds=wait)).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        self.say(
            f"[ralph-ledger] {self.session_id}: rate limited ({limit.reason}); waiting {wait:.0f} s, "
            f"until {until}, then iteration {self.n} again (Ctrl-C stops; --resume goes on)\n"
        )
        time.sleep(wait)

    def output_closed(self) -> RunResult:
        """End the loop after its output was closed: an ``interrupted`` override at the current
        iteration (its turn, if it ran, is recorded); the session stays running and resumable."""
        sid, n = self.session_id, self.n
        if ev.session_status(self.engine.status(sid)["status"]) == "running":
            override = ev.Override(session_id=sid, iteration=n, kind="interrupted", reason=OUTPUT_CLOSED)
            self.session.record(override)
        return RunResult(sid, EXIT_OUTPUT_CLOSED, "", n, OUTPUT_CLOSED)

    def interrupted(self, exc: KeyboardInterrupt) -> RunResult:
        """Record an interruption: the agent's (partial) turn if the engine has not recorded it, then
        an ``interrupted`` override; the session stays running and resumable."""
        engine, sid, n = self.engine, self.session_id, self.n
        signum = exc.signum if isinstance(exc, Interrupted) else int(signal.SIGINT)
        reason = interrupted_reason(signum)
        events: list[ev.Event] = []
        turn: tuple[AgentRun, list[str], AgentReport | None] | None = None
        if isinstance(exc, Interrupted) and exc.partial is not None:  # the agent was running
            after = snapshot(engine.work_dir, engine.home.root)
            turn = exc.partial, files_changed(self.before, after), None
        elif self.unrecorded is not None and len(self.session.events()) == self.mark:  # rules running
            turn = self.unrecorded
        if turn is not None:
            run, files, report = turn
            spoken = report or self.fmt.parse(run.output)  # what the agent spent so far, priced as any turn
            own, others = by_model(spoken)
            events.append(
                ev.AgentTurn(
                    session_id=sid,
                    iteration=n,
                    output_excerpt=run.output[-2000:],
                    files_modified=files or in_project(spoken.files_modified, engine.work_dir),
                    tool_count=spoken.tool_count,
                    stop_reason=_stop_reason(run),
                    tokens=own,
                    duration_ms=run.duration_ms,
                    model=spoken.model or command_model(self.agent_cmd),
                    cost_usd=spoken.cost_usd,
                    context_tokens=spoken.context_tokens,
                    stderr_excerpt=run.stderr[-2000:],
                )
            )
            events.extend(ev.ModelTokens(session_id=sid, iteration=n, model=m, tokens=t) for m, t in others)
        if n and ev.session_status(engine.status(sid)["status"]) == "running":
            events.append(ev.Override(session_id=sid, iteration=n, kind="interrupted", reason=reason))
        if events:
            self.session.record(*events)
        self.say(f"\n[ralph-ledger] {sid}: {reason}; resume with --resume {sid}\n")
        return RunResult(sid, 128 + signum, "", n, reason)


def _failure(run: AgentRun, error: str) -> str:
    """Why the run failed (``""``: it did not): how it ended, and the error its own stream reported
    (a run that exited 0 after reporting one failed too)."""
    if not error or run.interrupted:
        return run.failure
    said = one_line(error, 300)
    if run.timed_out:
        return f"{run.failure}: {said}"
    return f"agent exited {run.returncode}: {said}" if run.returncode else f"agent reported: {said}"


def _stop_reason(run: AgentRun) -> str:
    """How the agent's run ended, as ``AgentTurn.stop_reason`` records it."""
    if run.interrupted:
        return "interrupted"
    return "timeout" if run.timed_out else f"exit {run.returncode}"
