"""``ralph-ledger``: ingest journals, rebuild the ledger, query it.

Every error is one line on stderr and a non-zero exit: 2 for bad usage,
1 for anything else. Journals are never modified by these commands.
"""

from __future__ import annotations

import contextlib
import os
import sys
from importlib import import_module

from ledger.core import interrupts

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the Stop hook's fast path never imports typing
if TYPE_CHECKING:  # the heavy modules (DuckDB) load only in the commands that use them
    import argparse  # and argparse only when a command line is parsed (not on the Stop hook's fast path)
    from collections.abc import Callable, Sequence

    from ledger.core.home import Home


# The commands that read the ledger file: one that finds it damaged moves it aside and runs again.
LEDGER_COMMANDS = ("ingest", "rebuild", "sessions", "show", "sql", "export", "stats", "verify")
READING = ("sessions", "show", "sql", "export", "stats", "checkpoint", "verify", "diff")
"""Commands that only read a home: another user's may be read, from its journals (not its ledger file;
``checkpoint prune`` refuses it: ``ledger.storage.ledger_file.unwritable``). Every other command
writes, and refuses a home not this user's (docs/design/homes.md)."""
OWN_HOME = ("hook", "schema", "init")
"""Commands that check no home here: the hook finds and checks its own, the others use none."""
CLEANING_UP = ("ingest", "rebuild", "export")
"""Commands that clean up their scratch files on Ctrl-C (the others simply end:
``ledger.core.interrupts``)."""
COMMANDS: dict[str, tuple[str, str]] = {
    "ingest": ("ledger_commands", "cmd_ingest"),
    "rebuild": ("ledger_commands", "cmd_ingest"),
    "sessions": ("ledger_commands", "cmd_sessions"),
    "show": ("ledger_commands", "cmd_show"),
    "sql": ("ledger_commands", "cmd_sql"),
    "export": ("ledger_commands", "cmd_export"),
    "schema": ("ledger_commands", "cmd_schema"),
    "stats": ("ledger_commands", "cmd_stats"),
    "tasks": ("ledger_commands", "cmd_tasks"),
    "verify": ("verify_commands", "cmd_verify"),
    "hook": ("claude_code_commands", "cmd_hook"),
    "init": ("claude_code_commands", "cmd_init"),
    "loop": ("claude_code_commands", "cmd_loop"),
    "stop": ("loop_commands", "cmd_override"),
    "set": ("loop_commands", "cmd_override"),
    "pause": ("steering_commands", "cmd_steering"),
    "resume": ("steering_commands", "cmd_steering"),
    "steer": ("steering_commands", "cmd_steering"),
    "unblock": ("steering_commands", "cmd_steering"),
    "run": ("loop_commands", "cmd_run"),
    "checkpoint": ("checkpoint_commands", "cmd_checkpoint"),
    "diff": ("snapshot_commands", "cmd_diff"),
    "rollback": ("snapshot_commands", "cmd_rollback"),
    "mcp": ("mcp_commands", "cmd_mcp"),
}
"""Each command's module in ``ledger.cli`` and function, imported when the command runs."""


def command_function(name: str) -> Callable[[Home, argparse.Namespace], None]:
    """The function running the command ``name`` (``home``, parsed arguments)."""
    module, function = COMMANDS[name]
    run: Callable[[Home, argparse.Namespace], None] = getattr(import_module(f"ledger.cli.{module}"), function)
    return run


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; 0 on success, 1 on errors, 2 on bad usage (never 2
    for ``hook``: Claude Code reads exit code 2 as "block the stop")."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if "hook" in args_list:  # the hot path: no argument parser, msgspec only if the warm worker is not there
        home = _hook_home(args_list)
        if home is not None:
            from ledger.drivers.claude_code.stop.warm import hook_main

            return hook_main(home or None)
    if _command_of(args_list) != "hook":
        return _main(args_list)
    import io

    errors = io.StringIO()
    with contextlib.redirect_stderr(errors):
        code = _main(args_list)
    said = errors.getvalue()
    if code == 2:  # a usage error: one line, and the stop is allowed (exit 2 would block it)
        reason = said.strip().splitlines()[-1] if said.strip() else "ralph-ledger hook: bad command line"
        print(f"{reason.removesuffix(' (see --help)')}; allowing the stop", file=sys.stderr)
        return 0
    sys.stderr.write(said)
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
    from ledger.cli.common import CliError, emit  # here: the Stop hook's fast path never needs them
    from ledger.core.errors import LedgerError, LedgerLocked
    from ledger.core.home import Home
    from ledger.storage.journal import JournalError

    try:
        from ledger.cli.parser import build_parser

        args = build_parser().parse_args(argv)
        if args.command in CLEANING_UP:
            interrupts.ready()
        checked = args.command not in OWN_HOME and args.home != ""  # (an empty --home: said below)
        home = Home.resolve(args.home, write=args.command not in READING, check=checked)
        _check_home(home, args)
        try:
            command_function(args.command)(home, args)
        except Exception as exc:
            if args.command not in LEDGER_COMMANDS:
                raise
            from ledger.storage.ledger_file import set_aside

            if not set_aside(home.database, exc):  # a damaged ledger file found by a query
                raise
            command_function(args.command)(home, args)  # again, on a ledger rebuilt from the journals
        if args.command not in ("hook", "run"):  # (the runner has exit codes of its own)
            emit("")  # what print() left in the buffer: an error writing it names the output here
    except CliError as exc:
        _error(exc)
        return exc.code
    except LedgerLocked as exc:
        _error(f"ralph-ledger: {exc}; try again, or pass --wait SECONDS")
        return 1
    except (LedgerError, JournalError) as exc:
        _error(f"ralph-ledger: {exc}")
        return 1
    except BrokenPipeError:
        _drop_stdout()
        return 0
    except KeyboardInterrupt:
        _error("ralph-ledger: interrupted")
        return 130
    except OSError as exc:
        from ledger.core.errors import os_error

        command = _command_of(argv)
        doing = f"running `ralph-ledger {command}`" if command else "running ralph-ledger"
        _error(f"ralph-ledger: {os_error(exc, doing)}")
        return 1
    except Exception as exc:
        if interrupts.interrupted():  # DuckDB reports Ctrl-C during a statement as its own error
            _error("ralph-ledger: interrupted")
            return 130
        from ledger.core.errors import one_line

        _error(f"ralph-ledger: internal error ({type(exc).__name__}): {one_line(exc, 300)}")
        return 1
    return 0


def _drop_stdout(stream: str = "stdout") -> None:
    """Point stdout (or ``stream``, ``"stderr"``) at /dev/null once its reader went away, so that the
    interpreter's last flush at exit neither fails nor prints a traceback."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, getattr(sys, stream).fileno())
        os.close(devnull)


def _error(line: object) -> None:
    """Say ``line`` on stderr; one whose reader went away (``2>&1 | tee`` ended by Ctrl-C) is pointed
    at /dev/null instead, so that the exit status stays the command's (it was 1: an error printing the
    error)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        _drop_stdout("stderr")


# The commands that read a home: one given with --home or $RALPH_HOME must exist (a typo is not a new,
# empty home). stop and set need the session's journal there.
NEEDS_HOME = (*LEDGER_COMMANDS, "stop", "set", "checkpoint", "pause", "resume", "steer", "unblock")


def _check_home(home: Home, args: argparse.Namespace) -> None:
    """Raise ``CliError`` (exit 2) when a command of ``NEEDS_HOME`` is given a home, on the command
    line or in ``$RALPH_HOME``, that is not a directory (the default home may be missing:
    nothing has run there yet). An empty ``--home`` (an unset variable) is an error for every command
    but ``hook``: it would make the working directory a home."""
    from ledger.cli.common import CliError

    if args.home == "" and args.command != "hook":
        raise CliError("ralph-ledger: --home: an empty path; give the ledger home's directory", 2)
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
