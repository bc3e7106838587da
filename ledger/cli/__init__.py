"""``ralph-ledger``: ingest journals, rebuild the ledger, query it.

Every error is one line on stderr and a non-zero exit: 2 for bad usage,
1 for anything else. Journals are never modified by these commands.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from ledger.core import interrupts
from ledger.core.home import Home
from ledger.core.locks import loop_lock
from ledger.storage.journal import JournalError

if TYPE_CHECKING:  # the heavy modules (DuckDB) load only in the commands that use them
    import argparse  # and argparse only when a command line is parsed (not on the Stop hook's fast path)

    from ledger.storage.database import Ledger
    from ledger.storage.ingest import IngestReport

MAX_BAD_SHOWN = 20
DEFAULT_RUN_TIMEOUT_S = 600.0


class CliError(Exception):
    """A one-line error for the user; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


@cache
def _parser_class() -> type[argparse.ArgumentParser]:
    """The ``Parser`` class, defined on first use so that importing this module skips argparse."""
    import argparse

    class Parser(argparse.ArgumentParser):
        """argparse that reports a usage error as one line (exit 2)."""

        def error(self, message: str) -> NoReturn:
            """Raise ``CliError`` (exit status 2) instead of printing usage and exiting."""
            raise CliError(f"{self.prog}: {message} (see --help)", 2)

    return Parser


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


def positive_int(text: str) -> int:
    """argparse type: ``text`` as a whole number >= 1, else ``argparse.ArgumentTypeError``."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {text!r}")
    return value


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
    p = Parser(prog="ralph-ledger", description="Record and query agent iteration loops.")
    p.add_argument("--home", help="ledger home (default: $RALPH_HOME or ./.ralph)")
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
    s = sub.add_parser("show", help="one session, iteration by iteration")
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
    s = sub.add_parser("schema", help="print the views and detectors and their columns")
    s.add_argument(
        "--portable",
        action="store_true",
        help="print the views and detectors as DuckDB SQL for an exported dataset (as in DIR/views/)",
    )
    s = sub.add_parser("hook", help="run as a coding agent's Stop hook (reads the event on stdin)")
    s.add_argument("agent", choices=["claude-code"])
    s.add_argument(
        "--home", dest="hook_home", metavar="DIR", help="ledger home (also accepted before 'hook')"
    )
    s = sub.add_parser("init", help="install the Stop hook into a project's agent settings")
    s.add_argument("agent", choices=["claude-code"])
    s.add_argument("--project", default=".", help="project directory (default: the current one)")
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
    _add_format(s)
    s = sub.add_parser("stop", help="ask a running loop to stop at its next validate")
    s.add_argument("session", help="session id")
    s.add_argument("--reason", default="", help="why (recorded in the ledger)")
    s = sub.add_parser("set", help="change a running loop's settings")
    s.add_argument("session", help="session id")
    s.add_argument("--max-iterations", type=positive_int, required=True, metavar="N")
    s.add_argument("--reason", default="", help="why (recorded in the ledger)")
    s = sub.add_parser("run", help="run an agent command in a loop until the engine stops it")
    s.add_argument("--prompt", metavar="FILE", help="file holding the prompt (default: read stdin)")
    g = s.add_mutually_exclusive_group()
    g.add_argument(
        "--session",
        type=session_id_arg,
        metavar="ID",
        help="id of the new session (default: run-<UTC timestamp>)",
    )
    g.add_argument(
        "--resume",
        type=session_id_arg,
        metavar="ID",
        help="continue this running (e.g. interrupted) session, with its recorded prompt and agent command",
    )
    s.add_argument("--max-iterations", type=positive_int, metavar="N", help="override the configuration")
    s.add_argument(
        "--timeout",
        type=positive_seconds,
        default=DEFAULT_RUN_TIMEOUT_S,
        metavar="SECONDS",
        help=f"kill an iteration's agent after this long (default {DEFAULT_RUN_TIMEOUT_S:g})",
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
        command.add_argument("--home", default=argparse.SUPPRESS, help="ledger home (as before the command)")
        command.add_argument(
            "--wait",
            type=non_negative_float,
            default=argparse.SUPPRESS,
            metavar="SECONDS",
            help="as before the command",
        )
    return p


def _report_ingest(report: IngestReport) -> None:
    for name in report.reset:
        print(f"ralph-ledger: journal {name} was truncated or replaced; re-ingested it", file=sys.stderr)
    for bad in report.bad_lines[:MAX_BAD_SHOWN]:
        print(f"ralph-ledger: skipped bad line {bad}", file=sys.stderr)
    more = len(report.bad_lines) - MAX_BAD_SHOWN
    if more > 0:
        print(f"ralph-ledger: ... and {more} more bad lines (SELECT * FROM ingest_errors)", file=sys.stderr)


def open_current(home: Home, wait: float) -> Ledger:
    """The home's ledger with the journals ingested. If another process holds the file, or the
    home cannot be written, an in-memory ledger read from the journals instead (said in one line on
    stderr); a home that does not exist yet (``./.ralph`` before any loop) is an empty ledger, and
    is not created."""
    from ledger.storage.database import Ledger

    if not home.root.exists():
        return Ledger.memory(None)
    ledger = Ledger.open(home, wait=wait, fallback=True)
    if ledger.path is not None:
        _report_ingest(ledger.ingest())
    return ledger


def emit(text: str) -> None:
    """Write ``text`` to stdout, now: an error writing it (stdout closed, a full disk) raises
    ``CliError`` naming the output; a reader that went away (``| head``) raises ``BrokenPipeError``."""
    out = sys.stdout
    if out is None:
        raise CliError("ralph-ledger: cannot write the output: stdout is closed")
    try:
        out.write(text)
        out.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError) as exc:  # ValueError: the file object is closed
        raise CliError(f"ralph-ledger: cannot write the output to {_stdout_name()}: {_reason(exc)}") from None


def _stdout_name() -> str:
    """``stdout`` and, when it is a file or device, its path (``stdout (/dev/full)``)."""
    try:
        target = os.readlink("/proc/self/fd/1")
    except OSError:
        return "stdout"
    return f"stdout ({target})" if target.startswith("/") else "stdout"


def _reason(exc: BaseException) -> str:
    """An OS error's own words (``No space left on device``), else the error's one line."""
    from ledger.core.errors import one_line

    return getattr(exc, "strerror", None) or one_line(exc)


def cmd_ingest(home: Home, args: argparse.Namespace) -> None:
    """``ingest`` / ``rebuild``: ingest what is new in the journals (``rebuild`` empties the ledger first).

    Prints one summary line (events, journals, seconds, events/s, bad lines); truncated or replaced
    journals and the first ``MAX_BAD_SHOWN`` bad lines go to stderr. Raises ``LedgerLocked`` if
    another process still holds the ledger after ``--wait`` seconds, ``LedgerError`` if it cannot be
    opened.
    """
    from ledger.storage.database import Ledger

    if not home.root.exists():  # the default ./.ralph: nothing ran here; create nothing
        raise CliError(f"ralph-ledger: no ledger home at {home.root} yet: no loop has run here (see --home)")
    with Ledger.open(home, wait=args.wait) as ledger:
        report = ledger.rebuild() if args.command == "rebuild" else ledger.ingest()
    _report_ingest(report)
    rate = report.events / report.seconds if report.seconds else 0.0
    emit(
        f"{args.command}: {report.events} events from {report.journals} journals "
        f"in {report.seconds:.2f} s ({rate:,.0f} events/s); {len(report.bad_lines)} bad lines\n"
    )


def _no_session(session: str, home: Home) -> CliError:
    """The error for a session id the home does not hold, in the user's words."""
    from ledger.core.errors import no_session

    return CliError(f"ralph-ledger: {no_session(session, home.root)}")


def cmd_sessions(home: Home, args: argparse.Namespace) -> None:
    """``sessions``: print each session's current state, latest update first.

    Only sessions with ``--status`` if given; as a table, CSV or JSON. Raises ``LedgerError`` if
    the ledger cannot be opened (a locked one falls back to reading the journals).
    """
    from ledger.core.output import fetch, render
    from ledger.storage.database import interruptible

    with open_current(home, args.wait) as ledger:
        where = "WHERE status = ?" if args.status else ""
        params = [args.status] if args.status else None
        sql = (
            "SELECT session_id, status, agent, task, iteration, max_iterations, last_score, "
            f"last_signal, consecutive_failures, tokens, updated_at FROM sessions {where} "
            "ORDER BY updated_at DESC, session_id"
        )
        rows = interruptible(ledger.con, lambda: fetch(ledger.con, sql, params))
    emit(render(rows, args.fmt))


def cmd_show(home: Home, args: argparse.Namespace) -> None:
    """``show``: print one session iteration by iteration.

    As a table, a summary line comes first; CSV and JSON hold only the iteration rows. Raises
    ``CliError`` (exit 1) if there is no such session, ``LedgerError`` if the ledger cannot be opened.
    """
    from ledger.core.output import cell, fetch, render
    from ledger.storage.database import interruptible

    sql = (
        "SELECT iteration, score, rules_passed, rules_failed, rules_errored, files_modified, "
        "promise, hook_action, signal, guards, duration_s, tokens_total FROM iterations "
        "WHERE session_id = ? ORDER BY iteration"
    )
    with open_current(home, args.wait) as ledger:
        found = interruptible(
            ledger.con,
            lambda: fetch(ledger.con, "SELECT * FROM sessions WHERE session_id = ?", [args.session]),
        )
        if not found.rows:
            raise _no_session(args.session, home)
        s = dict(zip(found.columns, found.rows[0], strict=True))
        rows = interruptible(ledger.con, lambda: fetch(ledger.con, sql, [args.session]))
    if args.fmt == "table":
        emit(
            f"session {s['session_id']}: {s['status']}, iteration {s['iteration']}/"
            f"{s['max_iterations']}, agent {s['agent'] or '-'}, task {cell(s['task'] or '-')}, "
            f"last score {cell(s['last_score'])}, last signal {s['last_signal'] or '-'}, "
            f"{s['tokens']} tokens\n"
        )
    emit(render(rows, args.fmt))


def cmd_sql(home: Home, args: argparse.Namespace) -> None:
    """``sql``: print the result of one read-only query as a table, CSV or JSON.

    Ctrl-C interrupts the query (``KeyboardInterrupt``). Raises ``CliError`` (exit 1) if the query
    is refused or fails, ``LedgerError`` if the ledger cannot be opened.
    """
    from ledger.core.output import render
    from ledger.storage.database import interruptible
    from ledger.storage.query import ReadOnlyViolation, run_readonly

    with open_current(home, args.wait) as ledger:
        try:
            result = interruptible(ledger.con, lambda: run_readonly(ledger.con, args.query))
        except ReadOnlyViolation as exc:
            raise CliError(f"ralph-ledger: {exc}") from None
    emit(render(result, args.fmt))


def cmd_export(home: Home, args: argparse.Namespace) -> None:
    """``export --parquet DIR [--source NAME] [--force]``: replace this home's events under
    ``DIR/events/source=NAME/`` and the views under ``DIR/views/``; print how many events.

    Warns on stderr when other sources of ``DIR`` hold session ids of this home. Raises ``CliError``
    (exit 2) for a bad ``--source``, ``LedgerError`` if ``DIR`` is not a directory of such a dataset,
    its source folder was written by another home (without ``--force``), or the ledger cannot be opened.
    """
    from ledger.core.errors import LedgerError
    from ledger.storage.export import check_source, default_source, export_parquet

    try:
        source = check_source(default_source() if args.source is None else args.source)
    except LedgerError as exc:
        hint = "" if args.source is not None else " (the host name); pass --source NAME"
        raise CliError(f"ralph-ledger export: --source: {exc}{hint}", 2) from None
    with open_current(home, args.wait) as ledger:
        report = export_parquet(ledger, Path(args.parquet), source, force=args.force)
    if report.shared:
        others = sorted({other for _, other in report.shared})
        print(
            f"ralph-ledger: export: {len(report.shared)} session id(s) of source {source} are also in "
            f"source(s) {', '.join(others)} of {args.parquet} (e.g. {report.shared[0][0]!r}); "
            "the views merge sessions by id, so give each home's sessions distinct ids",
            file=sys.stderr,
        )
    print(f"export: {report.events} events of {report.sessions} sessions to {report.folder}")


def cmd_schema(home: Home, args: argparse.Namespace) -> None:
    """``schema``: print every view and detector (with its parameters) and its columns and types.

    Reads them from an in-memory ledger, so the home is not touched; raises nothing of its own.
    With ``--portable``, prints them instead as the DuckDB SQL that ``export`` writes next to a
    Parquet dataset.
    """
    from ledger.storage.database import Ledger
    from ledger.storage.sql import definitions

    if args.portable:
        from ledger.storage.export import portable_sql

        print(portable_sql(), end="")
        return
    ledger = Ledger.memory()
    for d in definitions():
        target = d.name if d.kind == "view" else f"{d.name}()"
        cols = ledger.con.execute(f"DESCRIBE SELECT * FROM {target}").fetchall()
        head = f"{d.kind} {d.name}" + (f"({d.params})" if d.kind == "detector" else "")
        print(head)
        for name, typ, *_ in cols:
            print(f"  {name:<24} {typ}")


def cmd_stats(home: Home, args: argparse.Namespace) -> None:
    """``stats``: print the ``loop_metrics`` view (one row per agent), then ``success_by_iterations``.

    Both in every format: as tables under a title each, as CSV one after the other (each with its
    header, an empty line between), as JSON one object (view name -> rows). Raises ``LedgerError``
    if the ledger cannot be opened.
    """
    from ledger.core.output import fetch, render_many
    from ledger.storage.database import interruptible

    with open_current(home, args.wait) as ledger:
        parts = interruptible(
            ledger.con,
            lambda: [
                (
                    "loop_metrics",
                    "loops per agent",
                    fetch(ledger.con, "SELECT * FROM loop_metrics ORDER BY agent"),
                ),
                (
                    "success_by_iterations",
                    "success rate by iterations used",
                    fetch(ledger.con, "SELECT * FROM success_by_iterations ORDER BY ALL"),
                ),
            ],
        )
    emit(render_many(parts, args.fmt))


def cmd_override(home: Home, args: argparse.Namespace) -> None:
    """``stop`` / ``set``: record an override in a running session's journal and print a confirmation.

    Raises ``CliError`` (exit 1) if the engine refuses it (e.g. no such session, or it is not running).
    """
    from ledger.loop.engine import Engine, EngineError
    from ledger.storage.journal import journal_path

    if not journal_path(home.journals, args.session).exists():  # JournalError for an invalid id
        raise _no_session(args.session, home)
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


def cmd_hook(home: Home, args: argparse.Namespace) -> None:
    """Run the Claude Code Stop hook: prints the decision JSON (or nothing) and
    never fails: internal errors allow the stop with one line on stderr. ``--home`` is honoured
    (``ledger.agents.claude_code.stop_event.hook_home``)."""
    from ledger.agents.claude_code.hook import main as hook_main

    hook_main(home=args.hook_home or args.home)


def hook_command() -> tuple[str, str]:
    """The Stop hook's command line for ``.claude/settings.json``, by the absolute path of this
    installation's ``ralph-ledger`` script (Claude Code's environment may not have it on ``PATH``),
    and a note for the user ("" when ``ralph-ledger`` on ``PATH`` is that same script)."""
    import shlex
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
        command = f"{shlex.quote(str(Path(sys.executable).absolute()))} -m ledger.cli hook claude-code"
        return command, "ralph-ledger is not installed as a script; the hook runs it with this Python"
    on_path = shutil.which("ralph-ledger")
    same = on_path is not None and Path(on_path).resolve() == script.resolve()
    note = "" if same else f"ralph-ledger is not on PATH here; the hook runs it by its absolute path {script}"
    return f"{shlex.quote(str(script))} hook claude-code", note


def _is_plain_hook(command: str) -> bool:
    """Whether ``command`` is this hook as an older ``init`` wrote it (``ralph-ledger hook
    claude-code`` by any path, or ``PYTHON -m ledger.cli hook claude-code``), with no options."""
    import shlex

    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if len(words) == 3 and Path(words[0]).name == "ralph-ledger":
        return words[1:] == ["hook", "claude-code"]
    return len(words) == 5 and words[1:] == ["-m", "ledger.cli", "hook", "claude-code"]


def cmd_init(home: Home, args: argparse.Namespace) -> None:
    """Add the Stop hook to ``.claude/settings.json``, keeping every other setting and hook (an
    older ``ralph-ledger hook claude-code`` entry is updated in place); prints what it did. Raises
    ``CliError`` on a broken file, exit 2 for a ``--project`` that is not an existing directory."""
    from ledger.agents.claude_code.settings import SettingsError, install_hook

    project = Path(args.project)
    if not project.is_dir():
        what = "does not exist" if not project.exists() else "is not a directory"
        raise CliError(f"ralph-ledger init: --project {args.project}: {what}", 2)
    settings = project / ".claude" / "settings.json"
    command, note = hook_command()
    try:
        added = install_hook(settings, command, replaces=_is_plain_hook)
    except SettingsError as exc:
        raise CliError(f"ralph-ledger: {exc}") from None
    print(f"{'installed' if added else 'already installed'}: Stop hook '{command}' in {settings}")
    if note:
        print(f"note: {note}")


def cmd_loop(home: Home, args: argparse.Namespace) -> None:
    """Start a loop for the Stop hook and print how it will stop. Raises ``CliError`` on bad
    arguments or an existing loop.

    ``--mode ledger`` (the default in a project with a ralph configuration) writes
    ``.claude/ralph-ledger.local.json``: the engine drives the loop with the project's rules and
    guards (``ledger.agents.claude_code.native``). ``--mode plugin`` writes the ``ralph-loop`` plugin's
    ``.claude/ralph-loop.local.md``, which the hook honours as a drop-in.
    """
    from ledger.agents.claude_code.native import LoopFile, read_loop_file, write_loop_file
    from ledger.agents.claude_code.plugin import UsageError, new_state, parse_loop_args, write_state
    from ledger.agents.claude_code.stop_event import LOOP_FILE, STATE_FILE
    from ledger.loop.config import has_config

    try:
        words, mode = _loop_mode(args.words)
        loop = parse_loop_args(words)
    except UsageError as exc:
        raise CliError(f"ralph-ledger loop start: {exc}", 2) from None
    if loop.show_help:
        print(LOOP_HELP)
        return
    project = _loop_project(args.project)
    _no_active_loop(project)
    native = mode == "ledger" or (mode is None and has_config(project))
    limit = f"at most {loop.max_iterations} iterations" if loop.max_iterations else "no iteration limit"
    until = (
        f"until the agent outputs <promise>{loop.completion_promise}</promise>"
        if loop.completion_promise
        else "with no completion promise"
    )
    session = os.environ.get("CLAUDE_CODE_SESSION_ID", "")
    state = new_state(loop, session_id=session)
    if native:
        from ledger.agents.claude_code.native import loop_config
        from ledger.agents.claude_code.stop_event import HookInputError

        path = project / LOOP_FILE
        native_loop = LoopFile(
            prompt=loop.prompt,
            claude_session_id=session,
            max_iterations=loop.max_iterations or None,
            completion_promise=loop.completion_promise,
            started_at=state.started_at,
        )
        try:  # the configuration every stop will use: checked now, not at the first stop
            loop_config(project, native_loop)
        except HookInputError as exc:
            raise CliError(f"ralph-ledger loop start: {exc}") from None
        with loop_lock(path.parent):  # not while a stop is changing the loop files
            _no_active_loop(project)
            write_loop_file(path, native_loop)
        read_loop_file(path)
        most = loop.max_iterations
        limit = f"at most {most} iterations" if most else "the configured limits"
        until = f"until the agent outputs <promise>{loop.completion_promise or 'COMPLETE'}</promise>"
        print(f"loop started with the project's rules and guards ({limit}, {until}); state in {path}")
        return
    path = project / STATE_FILE
    with loop_lock(path.parent):  # not while a stop is changing the loop files
        _no_active_loop(project)
        write_state(path, state)
    print(f"loop started ({limit}, {until}); state in {path}")


def _no_active_loop(project: Path) -> None:
    """``CliError`` when the project has a loop file of either kind."""
    from ledger.agents.claude_code.stop_event import LOOP_FILE, STATE_FILE

    for path in (project / LOOP_FILE, project / STATE_FILE):
        if path.exists():
            raise CliError(
                f"ralph-ledger: a loop is already active ({path}); delete that file to start another"
            )


LOOP_HELP = """\
usage: ralph-ledger loop start "PROMPT" [--max-iterations N] [--completion-promise TEXT]
                               [--mode ledger|plugin]

Start a loop in this project that the Claude Code Stop hook (`ralph-ledger hook claude-code`,
installed by `ralph-ledger init claude-code`) drives: every time the agent stops, it is given
PROMPT again, until it outputs the completion promise or a limit ends the loop.

  --max-iterations N          stop after N iterations (0 or absent: no limit in plugin mode,
                              the configured limit in ledger mode)
  --completion-promise TEXT   the loop completes when the agent outputs <promise>TEXT</promise>
                              (and on no other promise)
  --mode ledger|plugin        ledger: the project's ralph.toml rules and guards decide (the default
                              when it has one); plugin: the ralph-loop plugin's state file and rules
  -h, --help                  show this help and start nothing

The loop file is written in the project root: $CLAUDE_PROJECT_DIR when set, else the root of the
git work tree holding the working directory (the working directory outside one)."""


def _loop_project(given: str | None) -> Path:
    """Where ``loop start`` writes its file: ``--project``, else ``$CLAUDE_PROJECT_DIR``, else the
    root of the git work tree holding the working directory (the working directory outside one)."""
    from ledger.agents.claude_code.stop_event import project_root

    if given is not None:
        return Path(given)
    declared = os.environ.get("CLAUDE_PROJECT_DIR", "")
    if declared and Path(declared).is_dir():
        return Path(declared)
    return project_root(Path.cwd())


def _loop_mode(words: list[str]) -> tuple[list[str], str | None]:
    """``loop start``'s words without ``--mode X`` / ``--mode=X``, and X (``None`` when absent)."""
    from ledger.agents.claude_code.plugin import UsageError

    rest: list[str] = []
    mode: str | None = None
    i = 0
    while i < len(words):
        word, i = words[i], i + 1
        if word == "--":
            rest += words[i - 1 :]
            break
        if word != "--mode" and not word.startswith("--mode="):
            rest.append(word)
            continue
        if mode is not None:
            raise UsageError("--mode given twice")
        if "=" in word:
            mode = word.partition("=")[2]
        elif i < len(words):
            mode, i = words[i], i + 1
        else:
            raise UsageError("--mode: expected ledger or plugin")
        if mode not in ("ledger", "plugin"):
            raise UsageError(f"--mode: expected ledger or plugin, got {mode!r}")
    return rest, mode


def _read_prompt(path: str | None, *, required: bool = True) -> str:
    """The prompt from ``--prompt FILE``, else from a piped stdin; ``CliError`` (exit 2) if there is none.

    Unless ``required`` (``--resume`` has the recorded prompt), stdin is not read and ``""`` means
    "none given".
    """
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or exc
            raise CliError(f"ralph-ledger run: --prompt {path}: cannot read: {reason}", 2) from None
    elif not required:
        return ""
    elif sys.stdin is None or sys.stdin.isatty():
        raise CliError("ralph-ledger run: no prompt: pass --prompt FILE or pipe the prompt on stdin", 2)
    else:
        text = sys.stdin.read()
    if not text.strip():
        raise CliError("ralph-ledger run: the prompt is empty", 2)
    return text


def session_id_arg(text: str) -> str:
    """argparse type for ``--session`` / ``--resume``: a valid session id, else
    ``argparse.ArgumentTypeError`` (a usage error)."""
    import argparse

    from ledger.storage.journal import check_session_id

    try:
        return check_session_id(text)
    except JournalError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("invalid session id ")) from None


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


def _check_agent(agent_cmd: list[str], missing: str) -> None:
    """``CliError`` (exit 2) when there is no agent command (``missing`` says why) or its program is
    not found."""
    import shutil

    if not agent_cmd:
        raise CliError(f"ralph-ledger run: {missing} after -- (see --help)", 2)
    if shutil.which(agent_cmd[0]) is None:
        raise CliError(f"ralph-ledger run: agent command not found: {agent_cmd[0]}", 2)


def _detach_hung_up() -> None:
    """Point stdout and stderr at ``/dev/null`` where they are a terminal that hung up (SIGHUP: it
    closed), so the last line and the exit status are not lost to an I/O error."""
    for fd in (1, 2):
        try:
            os.write(fd, b"")
        except OSError:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, fd)
            os.close(null)


def cmd_run(home: Home, args: argparse.Namespace) -> None:
    """``run``: run the agent command in a loop (``ledger.agents.runner``), streaming its output to stdout.

    Prints the outcome on completion; any other outcome raises ``CliError`` with the runner's exit
    code (3 blocked, 4 escalated, 130 / 143 / 129 interrupted by SIGINT / SIGTERM / SIGHUP). With
    ``--resume`` the prompt and the agent command the session recorded are used unless given again.
    Raises ``CliError`` (exit 2) for bad usage (no agent command, no prompt, an agent program not
    found), (exit 1) for a configuration that would fail (checked in full before the agent starts)
    or a session the engine refuses to start or resume.
    """
    from datetime import UTC, datetime

    import msgspec

    from ledger.agents.runner import recorded, run_loop
    from ledger.loop.config import ConfigError, LoopConfig, config_path, load_checked
    from ledger.loop.engine import Engine, EngineError

    engine = Engine(home, work_dir=Path.cwd())
    agent_cmd = list(args.agent_cmd)
    if not args.resume:
        _check_agent(agent_cmd, "missing the agent command")
        prompt = _read_prompt(args.prompt)
    else:  # what is not given again is what the session recorded
        prompt = _read_prompt(args.prompt, required=False)
        try:
            task, command = recorded(engine, args.resume)
        except EngineError as exc:
            raise CliError(f"ralph-ledger run: {exc}") from None
        prompt, agent_cmd = prompt or task, agent_cmd or command
        _check_agent(agent_cmd, f"session {args.resume} recorded no agent command: pass it")
        if not prompt.strip():
            raise CliError(
                f"ralph-ledger run: session {args.resume} recorded no prompt: pass --prompt FILE", 2
            )
    try:
        path = config_path(Path.cwd())
        config = LoopConfig() if path is None else load_checked(path, runner=True)
    except ConfigError as exc:
        raise CliError(f"ralph-ledger run: {exc}") from None
    if args.max_iterations is not None:
        config = msgspec.structs.replace(config, max_iterations=args.max_iterations)
    session = args.resume or args.session or f"run-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    try:
        if args.resume and args.max_iterations is not None:
            engine.set_max_iterations(session, args.max_iterations, "run --resume --max-iterations")
        result = run_loop(
            engine,
            session,
            config,
            agent_cmd,
            prompt,
            iteration_timeout_s=args.timeout,
            out=sys.stdout,
            resume=bool(args.resume),
        )
    except EngineError as exc:
        raise CliError(f"ralph-ledger run: {exc}") from None
    summary = f"{result.session_id}: {result.signal or 'interrupted'} after {result.iterations} iteration(s)"
    if not result.signal:
        _detach_hung_up()
    if result.exit_code != 0:
        raise CliError(f"ralph-ledger run: {summary}: {result.reason}", result.exit_code)
    print(f"ralph-ledger run: {summary}: {result.reason}")


# The commands that read the ledger file: one that finds it damaged moves it aside and runs again.
LEDGER_COMMANDS = ("ingest", "rebuild", "sessions", "show", "sql", "export", "stats")
CLEANING_UP = ("ingest", "rebuild", "export")
"""Commands that clean up their scratch files on Ctrl-C (the others simply end:
``ledger.core.interrupts``)."""
COMMANDS: dict[str, Callable[[Home, argparse.Namespace], None]] = {
    "ingest": cmd_ingest,
    "rebuild": cmd_ingest,
    "sessions": cmd_sessions,
    "show": cmd_show,
    "sql": cmd_sql,
    "export": cmd_export,
    "schema": cmd_schema,
    "stats": cmd_stats,
    "hook": cmd_hook,
    "init": cmd_init,
    "loop": cmd_loop,
    "stop": cmd_override,
    "set": cmd_override,
    "run": cmd_run,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; 0 on success, 1 on errors, 2 on bad usage (never 2
    for ``hook``: Claude Code reads exit code 2 as "block the stop")."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if "hook" in args_list:  # the hot path: no argument parser to build
        home = _hook_home(args_list)
        if home is not None:
            from ledger.agents.claude_code.hook import main as hook_main

            return hook_main(home=home or None)
    code = _main(args_list)
    if code == 2 and _command_of(args_list) == "hook":
        print("ralph-ledger hook: the command line above is wrong; allowing the stop", file=sys.stderr)
        return 0
    return code


def _hook_home(argv: Sequence[str]) -> str | None:
    """For ``[--home DIR] hook claude-code [--home DIR]``: the ``--home`` given ("" when none); None
    for any other command line (then the full parser reads it)."""
    at = [i for i in range(len(argv) - 1) if argv[i : i + 2] == ["hook", "claude-code"]]
    if len(at) != 1:
        return None
    options = [*argv[: at[0]], *argv[at[0] + 2 :]]
    if not options:
        return ""
    if len(options) == 2 and options[0] == "--home":
        return options[1]
    if len(options) == 1 and options[0].startswith("--home="):
        return options[0].partition("=")[2]
    return None


def _command_of(argv: Sequence[str]) -> str:
    """The subcommand word of a command line (after the global options)."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in ("--home", "--wait"):
            i += 2
        elif word.startswith("-"):
            i += 1
        else:
            return word
    return ""


def _main(argv: Sequence[str]) -> int:
    """Run the command line; returns the exit status.

    0 on success (also when stdout is closed early), 2 for bad usage, 1 for a ledger, file or command
    error, 130 when interrupted; each error is printed as one line on stderr. A command that finds
    the ledger file damaged past opening it (a query meets a corrupt block) moves the file aside
    and runs once more, on a ledger rebuilt from the journals.
    """
    from ledger.core.errors import (  # here: the Stop hook's fast path never needs them
        LedgerError,
        LedgerLocked,
    )

    try:
        args = build_parser().parse_args(argv)
        if args.command in CLEANING_UP:
            interrupts.ready()
        home = Home.resolve(args.home)
        _check_home(home, args)
        try:
            COMMANDS[args.command](home, args)
        except Exception as exc:
            if args.command not in LEDGER_COMMANDS:
                raise
            from ledger.storage.database import set_aside

            if not set_aside(home.database, exc):  # a damaged ledger file found by a query
                raise
            COMMANDS[args.command](home, args)  # again, on a ledger rebuilt from the journals
        if args.command not in ("hook", "run"):  # (the runner has exit codes of its own)
            emit("")  # what print() left in the buffer: an error writing it names the output here
    except CliError as exc:
        print(exc, file=sys.stderr)
        return exc.code
    except LedgerLocked as exc:
        print(f"ralph-ledger: {exc}; try again, or pass --wait SECONDS", file=sys.stderr)
        return 1
    except (LedgerError, JournalError) as exc:
        print(f"ralph-ledger: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        _drop_stdout()
        return 0
    except KeyboardInterrupt:
        print("ralph-ledger: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        from ledger.core.errors import os_error

        command = _command_of(argv)
        doing = f"running `ralph-ledger {command}`" if command else "running ralph-ledger"
        print(f"ralph-ledger: {os_error(exc, doing)}", file=sys.stderr)
        return 1
    except Exception as exc:
        if interrupts.interrupted():  # DuckDB reports Ctrl-C during a statement as its own error
            print("ralph-ledger: interrupted", file=sys.stderr)
            return 130
        from ledger.core.errors import one_line

        print(f"ralph-ledger: internal error ({type(exc).__name__}): {one_line(exc, 300)}", file=sys.stderr)
        return 1
    return 0


def _drop_stdout() -> None:
    """Point stdout at /dev/null once its reader went away, so that the interpreter's last flush
    at exit neither fails nor prints a traceback."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


# The commands that read a home: one given with --home or $RALPH_HOME must exist (a typo is not a new,
# empty home). stop and set need the session's journal there.
NEEDS_HOME = (*LEDGER_COMMANDS, "stop", "set")


def _check_home(home: Home, args: argparse.Namespace) -> None:
    """Raise ``CliError`` (exit 2) when a command of ``NEEDS_HOME`` is given a home, on the command
    line or in ``$RALPH_HOME``, that is not a directory (the default ``./.ralph`` may be missing:
    nothing has run there yet)."""
    if args.command not in NEEDS_HOME or home.root.is_dir():
        return
    if args.home is not None:
        given = f"--home {args.home}"
    elif os.environ.get("RALPH_HOME"):
        given = f"RALPH_HOME={os.environ['RALPH_HOME']}"
    else:
        return
    what = "is not a directory" if home.root.exists() else "does not exist"
    raise CliError(f"ralph-ledger: {given}: the ledger home {home.root} {what}", 2)
