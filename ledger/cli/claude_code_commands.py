"""The Claude Code commands: ``hook claude-code`` (the Stop hook), ``init`` (install it into
``.claude/settings.json``) and ``loop start`` (a plugin or ledger-native loop).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.cli.common import CliError
from ledger.core.home import Home
from ledger.core.locks import loop_lock

if TYPE_CHECKING:  # the heavy modules (DuckDB) load only in the commands that use them
    import argparse

    from ledger.loop.config.loop_config import (
        LoopConfig,
    )  # and argparse only when a command line is parsed (not on the Stop hook's fast path)


def cmd_hook(home: Home, args: argparse.Namespace) -> None:
    """Run the Claude Code Stop hook: prints the decision JSON (or nothing) and
    never fails: internal errors allow the stop with one line on stderr. ``--home`` is honoured
    (``ledger.drivers.claude_code.stop.locate.hook_home``)."""
    from ledger.drivers.claude_code.stop.warm import hook_main

    hook_main(args.hook_home or args.home)


def ralph_command(*args: str) -> tuple[list[str], str]:
    """The command line that runs ``ralph-ledger ARGS`` in this installation, by the absolute path of
    its ``ralph-ledger`` script (Claude Code's environment may not have it on ``PATH``; without it
    this Python runs ``-m ledger.cli``), and a note for the user ("" when ``ralph-ledger`` on ``PATH``
    is that same script). Used for the Stop hook and for the MCP server in ``.mcp.json``."""
    import shutil
    import sysconfig

    here = Path(sys.argv[0]) if Path(sys.argv[0]).name == "ralph-ledger" else None
    candidates = [
        here,
        Path(sysconfig.get_path("scripts")) / "ralph-ledger",
        Path(sys.executable).parent / "ralph-ledger",
    ]
    script = next((p.absolute() for p in candidates if p is not None and p.is_file()), None)
    if script is None:  # not installed as a script (e.g. run from a checkout): the interpreter runs it
        python = str(Path(sys.executable).absolute())
        return [
            python,
            "-m",
            "ledger.cli",
            *args,
        ], "ralph-ledger is not installed as a script; it runs with this Python"
    on_path = shutil.which("ralph-ledger")
    same = on_path is not None and Path(on_path).resolve() == script.resolve()
    note = "" if same else f"ralph-ledger is not on PATH here; it runs by its absolute path {script}"
    return [str(script), *args], note


def hook_command() -> tuple[str, str]:
    """The Stop hook's command line for ``.claude/settings.json`` (``ralph_command``), and its note."""
    import shlex

    argv, note = ralph_command("hook", "claude-code")
    return shlex.join(argv), note


def _is_plain_hook(command: str) -> bool:
    """Whether ``command`` is this hook as an older ``init`` wrote it (``ralph-ledger hook
    claude-code`` by any path, or ``PYTHON -m ledger.cli hook claude-code``), with no options,
    detached or not (``settings.detached``)."""
    import shlex

    from ledger.drivers.claude_code.install.settings import attached

    try:
        words = shlex.split(attached(command))
    except ValueError:
        return False
    if len(words) == 3 and Path(words[0]).name == "ralph-ledger":
        return words[1:] == ["hook", "claude-code"]
    return len(words) == 5 and words[1:] == ["-m", "ledger.cli", "hook", "claude-code"]


def cmd_init(home: Home, args: argparse.Namespace) -> None:
    """Add the hook (Stop, SubagentStop, StopFailure, SessionStart) to the project's
    ``.claude/settings.json`` (the project ``loop start`` writes its loop in: :func:`_loop_project`),
    keeping every other setting and hook (an older ``ralph-ledger hook claude-code`` entry is updated
    in place); prints what it did. Raises ``CliError`` on a broken file, exit 2 for a ``--project``
    that is not an existing directory."""
    from ledger.drivers.claude_code.install.settings import DETACHED, SettingsError, detached, install_hook

    project = _loop_project(args.project)
    if not project.is_dir():
        what = "does not exist" if not project.exists() else "is not a directory"
        raise CliError(f"ralph-ledger init: --project {args.project}: {what}", 2)
    if not args.agent_name and (args.max_iterations or args.completion_promises):
        raise CliError("ralph-ledger init: --max-iterations and --completion-promise need --agent NAME", 2)
    agent = _agent_plan(project, args) if args.agent_name else None  # checked before anything is written
    settings = project / ".claude" / "settings.json"
    command, note = hook_command()
    try:
        apart = {event: detached(command) for event in DETACHED}
        added = install_hook(settings, command, replaces=_is_plain_hook, commands=apart)
    except SettingsError as exc:
        raise CliError(f"ralph-ledger: {exc}") from None
    what = "Stop and SubagentStop hook, with StopFailure and SessionStart,"
    print(f"{'installed' if added else 'already installed'}: {what} '{command}' in {settings}")
    if note:
        print(f"note: {note}")
    if agent is not None:
        _write_agent(project, args.agent_name, *agent)


def _agent_plan(project: Path, args: argparse.Namespace) -> tuple[dict[str, Any] | None, str]:
    """``init --agent``'s changes, checked: the merged ``.mcp.json`` (``None``: already registered)
    and the agent definition's text. ``CliError`` (exit 1) for a broken ``.mcp.json``, another
    ``ralph-ledger`` server in it, a different ``.claude/agents/NAME.md`` or a broken configuration."""
    from ledger.drivers.claude_code.install.agent_def import (
        MCP_FILE,
        agent_markdown,
        check_agent,
        plan_server,
    )
    from ledger.drivers.claude_code.install.settings import SettingsError
    from ledger.loop.config.loop_config import ConfigError, LoopConfig, agent_path, find_config

    try:
        config = find_config(project)
        command, _ = ralph_command("mcp")
        mcp = plan_server(project / MCP_FILE, command)
        path = agent_path(project, args.agent_name)
        defaults = LoopConfig(agent=args.agent_name, max_iterations=config.max_iterations)
        text = agent_markdown(
            args.agent_name,
            max_iterations=args.max_iterations
            or ("auto" if config.max_iterations == "auto" else defaults.effective_max_iterations()),
            completion_promises=args.completion_promises or config.completion_promises,
            validation_rules=[str(rule.get("name")) for rule in config.rules],
        )
        check_agent(path, text)
        return mcp, text
    except (ConfigError, SettingsError) as exc:
        raise CliError(f"ralph-ledger init: {exc}") from None


def _write_agent(project: Path, name: str, mcp: dict[str, Any] | None, text: str) -> None:
    """Write what ``_agent_plan`` planned and say what was done."""
    import shlex

    from ledger.drivers.claude_code.install.agent_def import MCP_FILE, SERVER, write_agent, write_json
    from ledger.drivers.claude_code.install.settings import SettingsError
    from ledger.loop.config.loop_config import agent_path

    path = project / MCP_FILE
    if mcp is not None:
        write_json(path, mcp)
    command, note = ralph_command("mcp")
    done = "registered" if mcp is not None else "already registered"
    print(f"{done}: MCP server '{shlex.join(command)}' as {SERVER!r} in {path}")
    if note:
        print(f"note: {note}")
    path = agent_path(project, name)
    try:
        written = write_agent(path, text)
    except SettingsError as exc:  # changed since it was checked
        raise CliError(f"ralph-ledger init: {exc}") from None
    print(f"{'written' if written else 'already written'}: agent {name!r} in {path}")


def cmd_loop(home: Home, args: argparse.Namespace) -> None:
    """Start a loop for the Stop hook and print how it will stop. Raises ``CliError`` on bad
    arguments or an existing loop.

    ``--mode ledger`` (the default in a project with a ralph configuration) writes
    ``.claude/ralph-ledger.local.json``: the engine drives the loop with the project's rules and
    guards (``ledger.drivers.claude_code.stop.native``). ``--mode plugin`` writes the ``ralph-loop`` plugin's
    ``.claude/ralph-loop.local.md``, which the hook honours as a drop-in.
    """
    from ledger.drivers.claude_code.stop.locate import LOOP_FILE, STATE_FILE
    from ledger.drivers.claude_code.stop.loop_file import LoopFile, read_loop_file, write_loop_file
    from ledger.drivers.claude_code.stop.plugin import UsageError, new_state, parse_loop_args, write_state
    from ledger.loop.config.loop_config import has_config

    try:
        words, mode = _loop_mode(args.words)
        words, agent = _loop_agent(words)
        words, kind, auto = _loop_adaptive(words)
        words, tasks_path = _take_option(words, "--tasks", "a task file")
        loop = parse_loop_args(words, prompt_optional=tasks_path is not None)
    except UsageError as exc:
        raise CliError(f"ralph-ledger loop start: {exc}", 2) from None
    if loop.show_help:
        print(LOOP_HELP)
        return
    project = _loop_project(args.project)
    _no_active_loop(project)
    native = mode == "ledger" or (mode is None and has_config(project))
    ledger_only = (
        "--agent"
        if agent
        else "--kind"
        if kind
        else "--max-iterations auto"
        if auto
        else "--tasks"
        if tasks_path is not None
        else ""
    )
    if ledger_only and not native:
        why = "--mode plugin" if mode == "plugin" else "this project has no ralph.toml or [tool.ralph]"
        raise CliError(f"ralph-ledger loop start: {ledger_only} needs a ledger-mode loop ({why})", 2)
    limit = f"at most {loop.max_iterations} iterations" if loop.max_iterations else "no iteration limit"
    until = (
        f"until the agent outputs <promise>{loop.completion_promise}</promise>"
        if loop.completion_promise
        else "with no completion promise"
    )
    session = os.environ.get("CLAUDE_CODE_SESSION_ID", "")
    state = new_state(loop, session_id=session)
    if native:
        from ledger.drivers.claude_code.stop.locate import HookInputError
        from ledger.drivers.claude_code.stop.native import loop_config

        path = project / LOOP_FILE
        native_loop = LoopFile(
            prompt=loop.prompt,
            claude_session_id=session,
            max_iterations="auto" if auto else loop.max_iterations or None,
            completion_promise=loop.completion_promise,
            started_at=state.started_at,
            agent=agent or "",
            kind=kind or "",
            tasks=_loop_tasks(tasks_path),
        )
        try:  # the configuration every stop will use: checked now, not at the first stop
            config = loop_config(project, native_loop)
        except HookInputError as exc:
            raise CliError(f"ralph-ledger loop start: {exc}") from None
        with loop_lock(path.parent):  # not while a stop is changing the loop files
            _no_active_loop(project)
            write_loop_file(path, native_loop)
        read_loop_file(path)
        most = loop.max_iterations
        limit = f"at most {most} iterations" if most else "the configured limits"
        if (
            config.max_iterations == "auto"
        ):  # chosen by the engine when the loop starts (ledger.loop.decide.limits)
            limit = "an iteration limit chosen from past loops when it starts (max_iterations auto)"
        until = f"until the agent outputs <promise>{loop.completion_promise or 'COMPLETE'}</promise>"
        print(f"loop started with the project's rules and guards ({limit}, {until}); state in {path}")
        if agent:
            print(_agent_line(project, agent, config))
        if native_loop.tasks:
            print(_first_task_line(Path(native_loop.tasks)))
        return
    path = project / STATE_FILE
    with loop_lock(path.parent):  # not while a stop is changing the loop files
        _no_active_loop(project)
        write_state(path, state)
    print(f"loop started ({limit}, {until}); state in {path}")


def _no_active_loop(project: Path) -> None:
    """``CliError`` when the project has a loop file of either kind."""
    from ledger.drivers.claude_code.stop.locate import LOOP_FILE, STATE_FILE

    for path in (project / LOOP_FILE, project / STATE_FILE):
        if path.exists():
            raise CliError(
                f"ralph-ledger: a loop is already active ({path}); delete that file to start another"
            )


LOOP_HELP = """\
usage: ralph-ledger loop start "PROMPT" [--max-iterations N|auto] [--completion-promise TEXT]
                               [--mode ledger|plugin] [--agent NAME] [--kind KIND]
                               [--tasks FILE]

Start a loop in this project that the Claude Code Stop hook (`ralph-ledger hook claude-code`,
installed by `ralph-ledger init claude-code`) drives: every time the agent stops, it is given
PROMPT again, until it outputs the completion promise or a limit ends the loop.

  --max-iterations N          stop after N iterations (0 or absent: no limit in plugin mode,
                              the configured limit in ledger mode)
  --completion-promise TEXT   the loop completes when the agent outputs <promise>TEXT</promise>
                              (and on no other promise)
  --mode ledger|plugin        ledger: the project's ralph.toml rules and guards decide (the default
                              when it has one); plugin: the ralph-loop plugin's state file and rules
  --agent NAME                ledger mode: apply .claude/agents/NAME.md's iteration: block (its
                              limit, promises and rule names; the options above still win)
  --kind KIND                 ledger mode: the kind of task (as kind in ralph.toml), grouping loops
                              for --max-iterations auto: the iterations that covered 90% of past
                              completed loops of this agent and kind (ralph-ledger stats --suggest)
  --tasks FILE                ledger mode: work through a task list (a Markdown checklist, a
                              ralph-tui prd.json or a JSON list), one task at a time; PROMPT is
                              then optional and starts every prompt (docs/tasks.md)
  -h, --help                  show this help and start nothing

The loop file is written in the project root: $CLAUDE_PROJECT_DIR when set, else the root of the
git work tree holding the working directory (the working directory outside one)."""


def _agent_line(project: Path, agent: str, config: LoopConfig) -> str:
    """What ``loop start --agent`` applies: the agent's file and its settings, or that it has none."""
    from ledger.loop.config.loop_config import agent_path

    path = agent_path(project, agent)
    if not path.is_file():
        return f"agent {agent!r}: no {path}: the configuration's settings apply"
    rules = ", ".join(str(r.get("name")) for r in config.rules) or "none"
    most = "auto" if config.max_iterations == "auto" else config.effective_max_iterations()
    return f"agent {agent!r} from {path}: at most {most} iterations, rules: {rules}"


def _loop_tasks(path: str | None) -> str:
    """The task file of ``loop start --tasks FILE``, absolute ("" without it), checked now: a file
    that does not read, or whose tasks are all done, is one line (exit 2)."""
    if path is None:
        return ""
    from ledger.core.errors import TaskFileError
    from ledger.loop.tasks.files import read_tasks

    where = Path(path).absolute()
    try:
        tasks = read_tasks(where)
    except TaskFileError as exc:
        raise CliError(f"ralph-ledger loop start: --tasks {exc}", 2) from None
    if all(t.done for t in tasks.tasks):
        raise CliError(f"ralph-ledger loop start: every task of {where} is done already: nothing to start", 2)
    return str(where)


def _first_task_line(path: Path) -> str:
    """What ``loop start --tasks`` tells the agent to work on first: the list's first task not done."""
    from ledger.loop.tasks.files import read_tasks

    tasks = read_tasks(path).tasks
    first = next(t for t in tasks if not t.done)
    return f"task list {path.name}: work on task {first.task_no} of {len(tasks)} first: {first.title}"


def _loop_agent(words: list[str]) -> tuple[list[str], str | None]:
    """``loop start``'s words without ``--agent NAME`` / ``--agent=NAME``, and NAME (``None`` when
    absent); ``UsageError`` for a name that is not a safe file name."""
    from ledger.drivers.claude_code.stop.plugin import UsageError
    from ledger.loop.config.loop_config import ConfigError, check_agent_name

    rest, agent = _take_option(words, "--agent", "an agent name")
    if agent is not None:
        try:
            check_agent_name(agent)
        except ConfigError as exc:
            raise UsageError(f"--agent: {str(exc).removeprefix('agent: ')}") from None
    return rest, agent


def _loop_adaptive(words: list[str]) -> tuple[list[str], str | None, bool]:
    """``loop start``'s words without ``--kind KIND`` and ``--max-iterations auto``, KIND (``None``
    when absent) and whether ``auto`` was asked for (a number stays for ``parse_loop_args``);
    ``UsageError`` for a kind that is not a name."""
    from ledger.drivers.claude_code.stop.plugin import UsageError
    from ledger.loop.config.loop_config import ConfigError, check_kind

    words, kind = _take_option(words, "--kind", "a kind of task")
    if kind is not None:
        try:
            check_kind(kind)
        except ConfigError as exc:
            raise UsageError(f"--kind: {str(exc).removeprefix('kind: ')}") from None
    rest, most = _take_option(words, "--max-iterations", "a whole number or auto")
    return (rest, kind, True) if most == "auto" else (words, kind, False)


def _loop_project(given: str | None) -> Path:
    """Where ``loop start`` writes its file: ``--project``, else ``$CLAUDE_PROJECT_DIR``, else the
    root of the git work tree holding the working directory (the working directory outside one)."""
    from ledger.core.project import project_root

    if given is not None:
        return Path(given)
    declared = os.environ.get("CLAUDE_PROJECT_DIR", "")
    if declared and Path(declared).is_dir():
        return Path(declared)
    return Path(project_root(os.getcwd()))


def _loop_mode(words: list[str]) -> tuple[list[str], str | None]:
    """``loop start``'s words without ``--mode X`` / ``--mode=X``, and X (``None`` when absent)."""
    from ledger.drivers.claude_code.stop.plugin import UsageError

    rest, mode = _take_option(words, "--mode", "ledger or plugin")
    if mode is not None and mode not in ("ledger", "plugin"):
        raise UsageError(f"--mode: expected ledger or plugin, got {mode!r}")
    return rest, mode


def _take_option(words: list[str], flag: str, expected: str) -> tuple[list[str], str | None]:
    """``words`` without ``FLAG X`` / ``FLAG=X`` (up to a ``--``), and X (``None`` when absent);
    ``UsageError`` when it is given twice or without a value (``expected`` says what it takes)."""
    from ledger.drivers.claude_code.stop.plugin import UsageError

    rest: list[str] = []
    value: str | None = None
    i = 0
    while i < len(words):
        word, i = words[i], i + 1
        if word == "--":
            rest += words[i - 1 :]
            break
        if word != flag and not word.startswith(f"{flag}="):
            rest.append(word)
            continue
        if value is not None:
            raise UsageError(f"{flag} given twice")
        if "=" in word:
            value = word.partition("=")[2]
        elif i < len(words):
            value, i = words[i], i + 1
        else:
            raise UsageError(f"{flag}: expected {expected}")
    return rest, value
