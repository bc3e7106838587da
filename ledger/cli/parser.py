"""The ``ralph-ledger`` command line: the argument parser and the checks of its values."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, NoReturn

from ledger.cli import slips
from ledger.cli.common import CliError
from ledger.core.errors import closest
from ledger.storage.journal import JournalError

if TYPE_CHECKING:  # the heavy modules (DuckDB) load only in the commands that use them
    import argparse  # and argparse only when a command line is parsed (not on the Stop hook's fast path)
    from collections.abc import Sequence


DEFAULT_RUN_TIMEOUT_S = 600.0


@cache
def _parser_class() -> type[argparse.ArgumentParser]:
    """The ``Parser`` class, defined on first use so that importing this module skips argparse."""
    import argparse

    class Parser(argparse.ArgumentParser):
        """argparse that reports a usage error as one line (exit 2), with the word meant when a slip
        is close to one (``did you mean 'sessions'?``). Options are never abbreviated: ``--sess``
        is a slip, not ``--session`` (an option added later would make it ambiguous, or change it)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("allow_abbrev", False)
            super().__init__(*args, **kwargs)

        def error(self, message: str) -> NoReturn:
            """Raise ``CliError`` (exit status 2) instead of printing usage and exiting."""
            raise CliError(f"{self.prog}: {message}{slips.meant_choice(message)} (see --help)", 2)

        def parse_known_args(  # type: ignore[override]
            self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
        ) -> tuple[argparse.Namespace, list[str]]:
            """argparse's, but words left over are refused here, by the command they were given to,
            naming the first option it does not know (and the one meant) rather than every word after
            it (``run --sesion s -- ./agent.sh`` left ``--sesion -- ./agent.sh``)."""
            parsed, extras = super().parse_known_args(args, namespace)
            command = getattr(parsed, "command", None)
            if not extras or self.prog.count(" ") or not isinstance(command, str):
                return parsed, extras  # a command's own parser: its parent says it, as below
            parser = slips.command_parser(self, command)
            unknown = next((w for w in extras if w.startswith("-") and w not in ("-", "--")), "")
            if parser is None or not unknown:
                parser = parser or self
                parser.error(f"unrecognized arguments: {' '.join(extras)}")
            word = unknown.partition("=")[0]
            hint = closest(word, [o for a in slips.all_actions(parser) for o in a.option_strings])
            parser.error(f"unrecognized arguments: {unknown}" + (f"; did you mean {hint}?" if hint else ""))

    return Parser


def agent_format_arg(text: str) -> str:
    """argparse type for ``run --agent-format``: a known format name (``ledger.drivers.runner.formats``),
    else ``argparse.ArgumentTypeError`` naming the choices."""
    import argparse

    from ledger.drivers.runner.formats import UnknownFormat, named

    try:
        return named(text).name
    except UnknownFormat as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def non_negative_float(text: str) -> float:
    """argparse type for ``--wait``: ``text`` as a float number of seconds >= 0.

    Raises ``argparse.ArgumentTypeError`` for anything else (NaN included).
    """
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if value < 0 or value != value:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return value


def positive_int(text: str, least: int = 1) -> int:
    """argparse type: ``text`` as a whole number >= ``least``, else ``argparse.ArgumentTypeError``."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"expected a number >= {least}, got {text!r}")
    return value


def max_iterations_arg(text: str) -> int | str:
    """argparse type for ``run --max-iterations``: a whole number >= 1, or ``auto`` (the limit past
    loops suggest, ``ledger.loop.decide.limits``); else ``argparse.ArgumentTypeError``."""
    import argparse

    if text == "auto":
        return text
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1 or auto, got {text!r}") from None


def kind_arg(text: str) -> str:
    """argparse type for ``--kind``: a task kind named as ``kind`` in ``ralph.toml`` is, else
    ``argparse.ArgumentTypeError``."""
    import argparse

    from ledger.loop.config.loop_config import ConfigError, check_kind

    try:
        return check_kind(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("kind: ")) from None


def count_int(text: str) -> int:
    """argparse type: ``text`` as a whole number >= 0."""
    return positive_int(text, least=0)


def _add_format(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--csv", dest="fmt", action="store_const", const="csv", help="output CSV")
    g.add_argument("--json", dest="fmt", action="store_const", const="json", help="output JSON")
    p.set_defaults(fmt="table")


def build_parser() -> argparse.ArgumentParser:
    """The ``ralph-ledger`` parser: global ``--home`` and ``--wait``, then one command."""
    import argparse

    from ledger.events import SESSION_STATUSES

    Parser = _parser_class()
    p = Parser(
        prog="ralph-ledger",
        description="Record and query agent iteration loops.",
        epilog="The manual: docs/cli.md (every command), docs/runner.md (run), docs/index.md (all pages).",
    )
    p.add_argument("--version", action="version", version=f"ralph-ledger {installed_version()}")
    p.add_argument(
        "--home",
        help="ledger home (default: $RALPH_HOME, else the project's .ralph: the nearest above the "
        "current directory, up to the git root)",
    )
    p.add_argument(
        "--wait",
        type=non_negative_float,
        default=2.0,
        metavar="SECONDS",
        help="how long to wait when another process holds the ledger (default 2)",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    sub.add_parser("ingest", help="ingest what is new in the journals")
    sub.add_parser("rebuild", help="recreate the ledger from the journals")
    s = sub.add_parser("sessions", help="list sessions and their current state")
    s.add_argument("--status", choices=SESSION_STATUSES)
    _add_format(s)
    s = sub.add_parser("verify", help="check the journals' hash chains; name where one breaks")
    s.add_argument("session", nargs="?", help="only this session (default: every one)")
    s = sub.add_parser("show", help="one session, iteration by iteration")
    s.add_argument("session", help="session id")
    _add_format(s)
    s = sub.add_parser("tasks", help="a task-list loop's tasks: status, iterations, tokens, cost, time")
    s.add_argument("session", help="session id")
    _add_format(s)
    s = sub.add_parser("sql", help="run a read-only query against the ledger views")
    s.add_argument("query", help="one SELECT statement")
    _add_format(s)
    s = sub.add_parser("export", help="export the events into a partitioned Parquet dataset")
    s.add_argument(
        "--parquet", required=True, metavar="DIR", help="the dataset's directory (many homes may share it)"
    )
    s.add_argument(
        "--source", metavar="NAME", help="this home's name in the dataset (default: the host name)"
    )
    s.add_argument("--force", action="store_true", help="replace a source folder another home wrote")
    s.add_argument(
        "--full", action="store_true", help="rewrite every day partition, not only the changed ones"
    )
    s.add_argument(
        "--watch",
        type=positive_seconds,
        metavar="SECONDS",
        help=(
            "keep the dataset current: export, wait SECONDS, again, until Ctrl-C "
            "(a line for each round that exported something)"
        ),
    )
    s = sub.add_parser("schema", help="print the views and detectors and their columns")
    s.add_argument(
        "--portable",
        action="store_true",
        help="print the views and detectors as SQL for an exported dataset (as in DIR/views/DIALECT/)",
    )
    s.add_argument(
        "--dialect",
        choices=["duckdb", "spark", "trino"],
        help="the engine the --portable SQL is for (default: duckdb; implies --portable)",
    )
    s = sub.add_parser("hook", help="run as a coding agent's Stop hook (reads the event on stdin)")
    s.add_argument("agent", choices=["claude-code"])
    s.add_argument(
        "--home", dest="hook_home", metavar="DIR", help="ledger home (also accepted before 'hook')"
    )
    s = sub.add_parser("init", help="install the Stop hook into a project's agent settings")
    s.add_argument("agent", choices=["claude-code"])
    s.add_argument(
        "--project",
        default=None,
        help="project directory (default: $CLAUDE_PROJECT_DIR, else the git work tree's root)",
    )
    s.add_argument(
        "--agent",
        dest="agent_name",
        type=agent_name_arg,
        metavar="NAME",
        help="also register the `ralph-ledger mcp` tools in .mcp.json and write .claude/agents/NAME.md",
    )
    s.add_argument(
        "--max-iterations",
        type=max_iterations_arg,
        metavar="N|auto",
        help="the agent's maxIterations (with --agent; auto: what past loops suggest)",
    )
    s.add_argument(
        "--completion-promise",
        dest="completion_promises",
        action="append",
        type=promise_word_arg,
        metavar="TEXT",
        help="a promise that completes the agent's loop (with --agent; repeat for more)",
    )
    s = sub.add_parser("loop", help="start a loop the Stop hook will drive (ralph-loop compatible)")
    s.add_argument("action", choices=["start"])
    s.add_argument(
        "words",
        nargs=argparse.REMAINDER,
        help='"PROMPT" --max-iterations N --completion-promise TEXT [--mode ledger|plugin] (default: '
        "ledger when the project has ralph.toml or [tool.ralph], else plugin)",
    )
    s.add_argument("--project", default=None, help=argparse.SUPPRESS)
    s = sub.add_parser("stats", help="loop metrics per agent (completion rate, iterations, quality)")
    s.add_argument(
        "--suggest",
        action="store_true",
        help="per agent and task kind, the iterations that covered 90%% of completed loops (what "
        'max_iterations = "auto" uses)',
    )
    _add_format(s)
    s = sub.add_parser("stop", help="ask a running loop to stop at its next validate")
    s.add_argument("session", help="session id")
    s.add_argument("--reason", default="", help="why (recorded in the ledger)")
    s = sub.add_parser("set", help="change a running loop's settings")
    s.add_argument("session", help="session id")
    s.add_argument("--max-iterations", type=positive_int, required=True, metavar="N")
    s.add_argument("--reason", default="", help="why (recorded in the ledger)")
    _add_steering(sub)
    _add_snapshots(sub)
    s = sub.add_parser("checkpoint", help="a session's checkpoints: list, show, resume, prune")
    acts = s.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=Parser)
    actions = {
        "list": "the session's checkpoints, oldest first",
        "show": "every field of one checkpoint, its agent context among them",
        "resume": "what resuming from a checkpoint gives the agent",
        "prune": "expire checkpoints past their retention",
    }
    for name, what in actions.items():
        a = acts.add_parser(name, help=what)
        a.add_argument("session", help="session id")
        _add_format(a)
        if name == "list":
            a.add_argument("--all", action="store_true", help="the expired ones too")
        elif name == "show":
            a.add_argument("checkpoint", help="checkpoint id (checkpoint list shows them)")
        elif name == "resume":
            a.add_argument(
                "checkpoint", nargs="?", help="checkpoint id (default: the latest one not expired)"
            )
        else:
            a.add_argument(
                "--keep",
                type=count_int,
                default=3,
                metavar="N",
                help="keep the latest N of each trigger (default 3)",
            )
            a.add_argument(
                "--snapshots",
                action="store_true",
                help="also remove the session's git snapshots (refs/ralph/SESSION/*)",
            )
    sub.add_parser("mcp", help="serve the loop's tools to an agent: an MCP server on stdin / stdout")
    s = sub.add_parser("run", help="run an agent command in a loop until the engine stops it")
    s.add_argument("--prompt", metavar="FILE", help="file holding the prompt (default: read stdin)")
    g = s.add_mutually_exclusive_group()
    g.add_argument(
        "--session",
        type=session_id_arg,
        metavar="ID",
        help="id of the new session (default: run-<UTC time>-<6 random hex digits>; --worktree: NAME-...)",
    )
    g.add_argument(
        "--resume",
        type=session_id_arg,
        metavar="ID",
        help="continue this running (e.g. interrupted) session, with its recorded prompt and agent command",
    )
    s.add_argument(
        "--max-iterations",
        type=max_iterations_arg,
        metavar="N|auto",
        help="override the configuration (auto: what past loops of this agent and kind suggest)",
    )
    s.add_argument(
        "--kind", type=kind_arg, metavar="KIND", help="the kind of task (overrides kind in the configuration)"
    )
    s.add_argument(
        "--worktree",
        type=worktree_name_arg,
        metavar="NAME",
        help="run in the git worktree .ralph/worktrees/NAME on branch ralph/NAME (made from HEAD if missing)",
    )
    s.add_argument(
        "--tasks",
        metavar="FILE",
        help="work through a task list, one task at a time: a Markdown checklist, a prd.json or a JSON "
        "list (docs/tasks.md); the prompt is then optional",
    )
    s.add_argument(
        "--on-task-blocked",
        choices=("skip", "stop"),
        help="a task that is stuck: go on to the next one (skip, the default) or stop the loop "
        "(overrides on_task_blocked in the configuration)",
    )
    s.add_argument(
        "--timeout",
        type=positive_seconds,
        default=DEFAULT_RUN_TIMEOUT_S,
        metavar="SECONDS",
        help=f"kill an iteration's agent after this long (default {DEFAULT_RUN_TIMEOUT_S:g})",
    )
    s.add_argument(
        "--rate-limit-wait",
        type=positive_seconds,
        default=60.0,
        metavar="SECONDS",
        help="after a usage or rate limit with no reset time, wait this long, doubling (default 60)",
    )
    s.add_argument(
        "--agent-format",
        type=agent_format_arg,
        metavar="NAME",
        help="how to read the agent's output (default: detected from the agent command; "
        "the formats: docs/runner.md)",
    )
    s.add_argument(
        "agent_cmd",
        nargs="*",
        metavar="-- AGENT_CMD",
        help="the agent command and its arguments (with --resume: the session's recorded one)",
    )
    for name, command in sub.choices.items():  # the global options are taken after the command too
        if name in ("hook", "loop"):  # (hook has its own --home; loop start passes its words on)
            continue
        nested = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        for parser in [command, *(q for a in nested for q in a.choices.values())]:  # checkpoint's actions
            parser.add_argument(
                "--home", default=argparse.SUPPRESS, help="ledger home (as before the command)"
            )
            parser.add_argument(
                "--wait",
                type=non_negative_float,
                default=argparse.SUPPRESS,
                metavar="SECONDS",
                help="as before the command",
            )
    return p


def installed_version() -> str:
    """The installed ralph-ledger's version (``pyproject.toml``'s), or ``unknown`` when it runs from a
    tree that was not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ralph-ledger")
    except PackageNotFoundError:
        return "unknown"


def session_id_arg(text: str) -> str:
    """argparse type for ``--session`` / ``--resume``: a valid session id, else
    ``argparse.ArgumentTypeError`` (a usage error)."""
    import argparse

    from ledger.storage.journal import check_session_id

    try:
        return check_session_id(text)
    except JournalError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("invalid session id ")) from None


def worktree_name_arg(text: str) -> str:
    """argparse type for ``run --worktree``: a worktree name (``ledger.drivers.runner.worktrees``), else
    ``argparse.ArgumentTypeError``."""
    import argparse

    from ledger.drivers.runner.worktrees import WorktreeError, check_name

    try:
        return check_name(text)
    except WorktreeError as exc:
        raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[1]) from None


def agent_name_arg(text: str) -> str:
    """argparse type for ``--agent``: a safe agent file name, else ``argparse.ArgumentTypeError``."""
    import argparse

    from ledger.loop.config.loop_config import ConfigError, check_agent_name

    try:
        return check_agent_name(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("agent: ")) from None


def promise_word_arg(text: str) -> str:
    """argparse type for ``--completion-promise``: the promise word (``<promise>X</promise>`` or
    ``X``; whitespace folded), else ``argparse.ArgumentTypeError`` for an empty one."""
    import argparse

    from ledger.loop.config.loop_config import promise_word

    word = promise_word(text)
    if not word:
        raise argparse.ArgumentTypeError(f"expected a promise word, got {text!r}")
    return word


def positive_seconds(text: str) -> float:
    """argparse type for ``--timeout``: a finite number of seconds > 0, else
    ``argparse.ArgumentTypeError``."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return value


def _add_snapshots(sub: Any) -> None:
    """``diff`` / ``rollback``: a session's git snapshots (docs/snapshots.md)."""
    s = sub.add_parser("diff", help="what an iteration (or a range N..M) changed, as git prints it")
    s.add_argument("session", help="session id")
    s.add_argument("iterations", nargs="?", metavar="N|N..M", help="iteration or range (default: the last)")
    s = sub.add_parser("rollback", help="restore the work tree to an iteration's snapshot")
    s.add_argument("session", help="session id")
    s.add_argument("--to", type=positive_int, required=True, metavar="N", help="the iteration")
    s.add_argument(
        "--force", action="store_true", help="even over changes that are in no snapshot of the session"
    )


def _add_steering(sub: Any) -> None:
    """``pause`` / ``resume`` / ``steer`` / ``unblock``: a human steering a loop (``loop.steering``)."""
    s = sub.add_parser("pause", help="pause a running loop once its current iteration ends")
    s.add_argument("session", help="session id")
    s.add_argument("--reason", default="", help="why (recorded in the ledger)")
    s = sub.add_parser("resume", help="resume a paused loop from its next iteration")
    s.add_argument("session", help="session id")
    s.add_argument("--reason", default="", help="why (recorded in the ledger)")
    s = sub.add_parser("steer", help="add guidance to the next iteration's prompt of a running loop")
    s.add_argument("session", help="session id")
    s.add_argument("guidance", help="the text the agent is given, once, in its next prompt")
    s = sub.add_parser("unblock", help="give a blocked or escalated loop more iterations, with guidance")
    s.add_argument("session", help="session id")
    s.add_argument("guidance", nargs="?", default="", help="the text its next prompt carries")
    s.add_argument(
        "--iterations", type=positive_int, default=5, metavar="N", help="how many more (default 5)"
    )
