"""The commands that drive a loop: ``run`` (the classic loop) and ``stop`` / ``set`` (a human's
override of a running session).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.cli.common import CliError, unknown_session
from ledger.core.home import Home
from ledger.core.words import plural

if TYPE_CHECKING:  # the heavy modules (DuckDB) load only in the commands that use them
    import argparse  # and argparse only when a command line is parsed (not on the Stop hook's fast path)

    from ledger.drivers.runner.worktrees import Worktree
    from ledger.loop.engine import Engine
    from ledger.loop.tasks.files import TaskFile


def cmd_override(home: Home, args: argparse.Namespace) -> None:
    """``stop`` / ``set``: record an override in a running session's journal and print a confirmation.

    Raises ``CliError`` (exit 1) if the engine refuses it (e.g. no such session, or it is not running)
    or the home cannot be written (a read-only home).
    """
    from ledger.loop.engine import Engine
    from ledger.loop.engine_types import EngineError
    from ledger.storage.journal import journal_path
    from ledger.storage.ledger_file import unwritable

    if not journal_path(home.journals, args.session).exists():  # JournalError for an invalid id
        raise unknown_session(args.session, home)
    if why := unwritable(home):  # said as the user sees it, not as the first file that failed
        verb = "stop" if args.command == "stop" else "change"
        raise CliError(
            f"ralph-ledger: cannot {verb} session {args.session!r}: cannot write in {home.root} ({why})"
        )
    engine = Engine(home)
    try:
        if args.command == "stop":
            engine.stop(args.session, args.reason)
            print(f"stop requested for {args.session}; the loop stops at its next validate")
        else:
            engine.set_max_iterations(args.session, args.max_iterations, args.reason)
            print(f"{args.session}: max iterations set to {args.max_iterations}")
    except EngineError as exc:
        raise CliError(f"ralph-ledger: {exc}") from None


def _read_prompt(path: str | None, *, required: bool = True) -> str:
    """The prompt from ``--prompt FILE``, else from a piped stdin; ``CliError`` (exit 2) if there is none.

    Unless ``required`` (``--resume`` has the recorded prompt), stdin is not read and ``""`` means
    "none given".
    """
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            from ledger.core.errors import error_reason

            raise CliError(
                f"ralph-ledger run: --prompt {path}: cannot read: {error_reason(exc)}", 2
            ) from None
    elif not required:
        return ""
    elif sys.stdin is None or sys.stdin.isatty():
        raise CliError("ralph-ledger run: no prompt: pass --prompt FILE or pipe the prompt on stdin", 2)
    else:
        text = sys.stdin.read()
    if not text.strip():
        raise CliError("ralph-ledger run: the prompt is empty", 2)
    return text


def _need_agent(agent_cmd: list[str], missing: str) -> None:
    """``CliError`` (exit 2) when there is no agent command (``missing`` says why)."""
    if not agent_cmd:
        raise CliError(f"ralph-ledger run: {missing} after -- (see --help)", 2)


def _check_agent(agent_cmd: list[str], work_dir: Path) -> None:
    """``CliError`` (exit 2) when the agent's program cannot run in ``work_dir``, where it will run
    (``ledger.drivers.runner.agent_path``): not found there, or not executable."""
    from ledger.drivers.runner.agent_path import agent_problem

    if why := agent_problem(agent_cmd[0], work_dir):
        raise CliError(f"ralph-ledger run: {why}", 2)


def _detach_hung_up() -> None:
    """Point stdout and stderr at ``/dev/null`` where they are a terminal that hung up (SIGHUP: it
    closed), so the last line and the exit status are not lost to an I/O error."""
    for fd in (1, 2):
        try:
            os.write(fd, b"")
        except OSError:
            _to_null(fd)


def _to_null(fd: int) -> None:
    """Point the descriptor ``fd`` at ``/dev/null``."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fd)
    os.close(null)


def cmd_run(home: Home, args: argparse.Namespace) -> None:
    """``run``: run the agent command in a loop (``ledger.drivers.runner.run``), streaming its output to
    stdout.

    Prints the outcome on completion; any other outcome raises ``CliError`` with the runner's exit
    code (3 blocked, 4 escalated, 130 / 143 / 129 interrupted by SIGINT / SIGTERM / SIGHUP, 141 when
    stdout was closed). With ``--resume`` the prompt and the agent command the session recorded are
    used unless given again, in the folder it recorded. Raises ``CliError`` (exit 2) for bad usage (no
    agent command, no prompt, an agent program not found or not executable where it will run), (exit
    1) for a configuration that would fail (checked in full before the agent starts), a session the
    engine refuses to start or resume, or one another process runs (``ledger.core.runners``). With
    ``--worktree NAME`` (or resuming a session that ran in one) the loop runs in its own git worktree
    (``ledger.drivers.runner.worktrees``); one that cannot be used is one line (exit 2; exit 1 when
    another loop holds it).
    """
    import msgspec

    from ledger.core.processes import watching
    from ledger.core.runners import SessionBusy, running
    from ledger.drivers.runner.agent_process import Output
    from ledger.drivers.runner.formats import missing_flag, plain_refusal, resolve
    from ledger.drivers.runner.run import EXIT_OUTPUT_CLOSED, recorded, recorded_place, run_loop
    from ledger.drivers.runner.worktrees import WorktreeError, hold
    from ledger.loop.config.loop_config import ConfigError, LoopConfig, config_path, load_checked
    from ledger.loop.engine import Engine
    from ledger.loop.engine_types import EngineError
    from ledger.notify import notify_events

    if args.resume and (args.max_iterations == "auto" or args.kind or args.tasks):  # given at the start
        given = "--kind" if args.kind else "--tasks" if args.tasks else "--max-iterations auto"
        raise CliError(f"ralph-ledger run: {given} applies when a loop starts, not with --resume", 2)
    home = _shared_home(home, args)
    engine = Engine(home, work_dir=Path.cwd(), notify=notify_events)
    agent_cmd = list(args.agent_cmd)
    place = ("", "", "")  # the worktree, branch and folder a resumed session runs in
    tasks = _task_file(args.tasks)
    if not args.resume:
        _need_agent(agent_cmd, "missing the agent command")
        if args.worktree is None:  # found here, where it will run (in a worktree: checked there)
            _check_agent(agent_cmd, engine.work_dir)
        prompt = _read_prompt(args.prompt, required=tasks is None)
    else:  # what is not given again is what the session recorded
        prompt = _read_prompt(args.prompt, required=False)
        try:
            task, command = recorded(engine, args.resume)
            place = recorded_place(engine, args.resume)
        except EngineError as exc:
            raise CliError(f"ralph-ledger run: {exc}") from None
        prompt, agent_cmd = prompt or task, agent_cmd or command
        _need_agent(agent_cmd, f"session {args.resume} recorded no agent command: pass it")
        if not place[0]:  # the project's own checkout: in the folder the session began in, or here
            engine.work_dir = _recorded_folder(place[2]) or engine.work_dir
            _check_agent(agent_cmd, engine.work_dir)
        if not prompt.strip() and not _task_list_loop(engine, args.resume):
            raise CliError(
                f"ralph-ledger run: session {args.resume} recorded no prompt: pass --prompt FILE", 2
            )
    if (refused := plain_refusal(agent_cmd, args.agent_format) or missing_flag(agent_cmd)) is not None:
        raise CliError(f"ralph-ledger run: {refused}", 2)
    try:
        path = config_path(Path.cwd())
        config = LoopConfig() if path is None else load_checked(path, runner=True)
    except ConfigError as exc:
        raise CliError(f"ralph-ledger run: {exc}") from None
    if args.max_iterations is not None:
        config = msgspec.structs.replace(config, max_iterations=args.max_iterations)
    if args.kind:
        config = msgspec.structs.replace(config, kind=args.kind)
    if args.on_task_blocked:
        config = msgspec.structs.replace(config, on_task_blocked=args.on_task_blocked)
    session = args.resume or args.session or _new_id(args.worktree or "run")
    out = Output(sys.stdout)
    try:
        # one run of a session at a time, before anything is made; its agents die with it
        with running(home, session) as claim, watching(claim.note):
            for group in claim.ended:
                left = f"ended process group {group}, left running by a killed run"
                out.write(f"[ralph-ledger] {session}: {left}\n")
            worktree = None
            if found := _worktree(args, place, agent_cmd[0]):
                worktree, engine.work_dir = found
                _check_agent(agent_cmd, engine.work_dir)
                made = worktree.made or "reused"
                where = f"worktree {worktree.path} on branch {worktree.branch}"
                out.write(f"[ralph-ledger] {session}: {where} ({made})\n")
            if args.resume and os.path.realpath(engine.work_dir) != os.path.realpath(Path.cwd()):
                out.write(f"[ralph-ledger] {session}: resuming in {engine.work_dir}, where it ran\n")
            out.flush()
            if args.resume and args.max_iterations is not None:
                engine.set_max_iterations(session, args.max_iterations, "run --resume --max-iterations")
            with hold(worktree.path) if worktree else contextlib.nullcontext():  # one loop per worktree
                result = run_loop(
                    engine,
                    session,
                    config,
                    agent_cmd,
                    prompt,
                    iteration_timeout_s=args.timeout,
                    out=out,
                    resume=bool(args.resume),
                    rate_limit_wait_s=args.rate_limit_wait,
                    agent_format=resolve(args.agent_format, agent_cmd),
                    worktree=worktree,
                    tasks=tasks,
                )
    except SessionBusy as exc:
        raise CliError(f"ralph-ledger run: {exc}") from None
    except EngineError as exc:
        raise CliError(f"ralph-ledger run: {exc}") from None
    except WorktreeError as exc:  # another loop holds the worktree
        raise CliError(f"ralph-ledger run: {exc}", exc.code) from None
    after = plural(result.iterations, "iteration")
    summary = f"{result.session_id}: {result.signal or 'interrupted'} after {after}"
    if out.gone:  # its reader went away (| head): the last flush must not fail
        _to_null(1)
    if not result.signal:
        _detach_hung_up()
    if result.exit_code == EXIT_OUTPUT_CLOSED:
        raise CliError(
            f"ralph-ledger run: {result.session_id}: stopped at iteration {result.iterations}: stdout was "
            f"closed; resume with --resume {result.session_id}",
            result.exit_code,
        )
    if result.exit_code != 0:
        raise CliError(f"ralph-ledger run: {summary}: {result.reason}", result.exit_code)
    print(f"ralph-ledger run: {summary}: {result.reason}")


def _task_file(path: str | None) -> TaskFile | None:
    """The task list of ``run --tasks FILE`` (None without it); a file that does not read is one
    line (exit 2)."""
    if path is None:
        return None
    from ledger.core.errors import TaskFileError
    from ledger.loop.tasks.files import read_tasks

    try:
        return read_tasks(Path(path).absolute())
    except TaskFileError as exc:
        raise CliError(f"ralph-ledger run: --tasks {exc}", 2) from None


def _task_list_loop(engine: Engine, session_id: str) -> bool:
    """Whether the session is a task-list loop (its prompt may be empty: its tasks are the work)."""
    from ledger.loop.step import LoopSession
    from ledger.loop.tasks.progress import task_state

    return task_state(LoopSession(engine, session_id, "").events()) is not None


def _new_id(name: str) -> str:
    """A new session's id when none is given: ``NAME-<UTC time>-<6 random hex digits>``, so that loops
    started in the same second (in one checkout, or in a fleet sharing a home) never take one id."""
    import secrets
    from datetime import UTC, datetime

    return f"{name}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def _recorded_folder(folder: str, inside: Path | None = None) -> Path | None:
    """The folder a resumed session recorded its agent works in, if it is still there (and, for a
    session in a worktree, in the worktree ``inside``); ``None`` otherwise."""
    if not folder or not Path(folder).is_dir():
        return None
    if inside is not None and not Path(os.path.realpath(folder)).is_relative_to(os.path.realpath(inside)):
        return None
    return Path(folder)


# ----------------------------------------------------------------------------- run --worktree
def _shared_home(home: Home, args: argparse.Namespace) -> Home:
    """The home of ``run``: with ``--worktree`` and no home named (``--home``, ``$RALPH_HOME``), the
    repository's main work tree's ``.ralph``, which every loop of the repository shares (from a
    linked worktree too); else ``home``."""
    if args.worktree is None or getattr(args, "home", None) is not None or os.environ.get("RALPH_HOME"):
        return home
    from ledger.core.home import DEFAULT_HOME
    from ledger.drivers.runner.worktrees import WorktreeError, repository_of

    try:
        return Home(repository_of(Path.cwd()) / DEFAULT_HOME)
    except WorktreeError as exc:
        raise CliError(f"ralph-ledger run: {exc}", exc.code) from None


def _worktree(
    args: argparse.Namespace, place: tuple[str, str, str], program: str
) -> tuple[Worktree, Path] | None:
    """The worktree the loop runs in, made or reused (``ledger.drivers.runner.worktrees``): ``--worktree
    NAME``'s, or the one a resumed session recorded; with the folder of it the loop works in (the
    one the session recorded, else the current directory's in its checkout). ``None`` for the
    project's own checkout. A new worktree is not made when the agent's ``program``, a relative
    path, is not an executable file of the commit it would be made from.

    Raises ``CliError`` (exit 2) for a ``--worktree`` a resumed session did not run in, or one
    that cannot be used (``WorktreeError``'s own exit status).
    """
    from ledger.drivers.runner.worktrees import (
        WorktreeError,
        branch_of,
        ensure,
        folder_of,
        repository_of,
        work_dir,
    )

    path, branch, folder = place
    if args.worktree is None and not path:
        return None
    if args.resume and (branch_of(args.worktree) if args.worktree else branch) != branch:
        where = f"worktree {path} (branch {branch})" if path else "the project's own checkout"
        raise CliError(
            f"ralph-ledger run: session {args.resume} ran in {where}: resume it without --worktree", 2
        )
    cwd = Path.cwd()
    try:
        if path:  # where the session ran, made again from its branch if it was removed
            repository = Path(path).parent.parent.parent  # <repository>/.ralph/worktrees/NAME
            made = ensure(repository if repository.is_dir() else cwd, Path(path), branch, create_branch=False)
            if (recorded := _recorded_folder(folder, inside=made.path)) is not None:
                return made, recorded
        else:
            name = args.worktree
            made = ensure(cwd, folder_of(repository_of(cwd), name), branch_of(name), program=program)
        return made, work_dir(cwd, made.path)
    except WorktreeError as exc:
        raise CliError(f"ralph-ledger run: {exc}", exc.code) from None
