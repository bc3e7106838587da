"""``ralph-tui``'s command line: ``ralph-tui [HOME ...]``, ``--replay FILE_OR_DIR ...``, ``--dataset DIR``."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

from ledger import LedgerError, closest, journals_in, one_line, ready
from ledger.monitor import dataset_sources, resolve_home
from tui.app import RalphApp
from tui.attention import OSC_KINDS, Attention
from tui.commands import MAX_SPEED, MIN_SPEED, valid_speed
from tui.replaying import DEFAULT_SPEED, MAX_GAP_S
from tui.serve import add_options as add_serve_options
from tui.serve import misused, serve


def journal_files(paths: Sequence[Path]) -> list[Path]:
    """The journals named: a directory stands for its ``*.jsonl`` files."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += journals_in(path)
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such journal or directory")
    return files


def _home_dir(text: str) -> Path:
    """``--home``'s value; an empty one (an unset variable) is an error, as in ralph-ledger, not the
    current folder (``Path("")`` is ``.``)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path; give the ledger home's directory")
    return Path(text)


class _Parser(argparse.ArgumentParser):
    """argparse that says a usage error in one line (exit 2), as ralph-ledger does, not after the
    whole usage block, with the option meant (``--hme``: ``did you mean --home?``); options are never
    abbreviated."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Print ``ralph-tui: error: MESSAGE (see --help)`` on stderr and exit 2."""
        if message.startswith("unrecognized arguments: "):
            unknown = next((w for w in message.split()[2:] if w.startswith("-")), "")
            hint = closest(unknown.partition("=")[0], [o for a in self._actions for o in a.option_strings])
            message = f"unrecognized arguments: {unknown}; did you mean {hint}?" if hint else message
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _version() -> str:
    """``ralph-tui`` and the installed ralph-ledger's version."""
    try:
        return f"ralph-tui {metadata.version('ralph-ledger')}"
    except metadata.PackageNotFoundError:
        return "ralph-tui (version unknown: not installed)"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = _Parser(
        prog="ralph-tui",
        description="Watch ralph-ledger loops live, or replay recorded sessions as if live.",
    )
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument(
        "homes",
        nargs="*",
        type=Path,
        metavar="HOME",
        help="ledger homes, journal directories or journals (default: --home)",
    )
    parser.add_argument(
        "--home",
        type=_home_dir,
        metavar="DIR",
        help="the ledger home to watch, as in ralph-ledger (default: $RALPH_HOME, else the project's .ralph, "
        "as ralph-ledger finds it); "
        "it may not exist yet: its first loop shows up as it starts",
    )
    parser.add_argument(
        "--replay",
        nargs="+",
        type=Path,
        metavar="FILE_OR_DIR",
        help="play recorded journals back as if live (e.g. sample_sessions/), all of them starting "
        "together, each at its own recorded pace",
    )
    parser.add_argument(
        "--sequential",
        action="store_true",
        help="with --replay: play the recordings at their recorded times, one after another",
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=DEFAULT_SPEED,
        help=f"replay speed: recorded gaps / N, each at most {MAX_GAP_S:g} s; N from {MIN_SPEED:g} to "
        f"{MAX_SPEED:g}, or 0 = no waiting (default {DEFAULT_SPEED:g}); + / - change it, p pauses",
    )
    parser.add_argument(
        "--dataset",
        type=_home_dir,
        metavar="DIR",
        help="watch a Parquet dataset written by ralph-ledger export --parquet DIR: every source's "
        "sessions, read-only, refreshed as sources are exported again",
    )
    parser.add_argument(
        "--bell",
        action="store_true",
        help="ring the terminal bell at each alert (a loop completes, blocks or escalates)",
    )
    parser.add_argument(
        "--osc-notify",
        type=int,
        choices=OSC_KINDS,
        metavar="9|777",
        help="also send each alert as a desktop notification through the terminal: OSC 9 (iTerm2, WezTerm, "
        "Windows Terminal, kitty, Ghostty) or OSC 777 (VTE terminals such as GNOME Terminal, rxvt-unicode)",
    )
    add_serve_options(parser)
    return parser.parse_args(argv)


def no_terminal() -> str:
    """Why the app cannot draw here ("" when it can): Textual draws on stderr, so a stderr that is no
    terminal (``ralph-tui > log 2>&1``, a job without one) would fill with escapes and never end. A
    browser tab's app (textual-serve names its driver) draws in the page."""
    if os.environ.get("TEXTUAL_DRIVER") or (sys.__stderr__ is not None and sys.__stderr__.isatty()):
        return ""
    return (
        "ralph-tui: the screen needs a terminal, and stderr is not one; run it in a terminal, "
        "serve it to a browser (--serve), or query the ledger with ralph-ledger sql"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``ralph-tui [HOME ...]`` or ``ralph-tui --replay FILE_OR_DIR ... [--speed N] [--sequential]``."""
    ready()  # loaded: Ctrl-C is the app's again
    args = parse_args(argv)
    if not valid_speed(args.speed):
        print(
            f"ralph-tui: --speed {args.speed:g}: expected 0 (no waiting) or {MIN_SPEED:g} to {MAX_SPEED:g}",
            file=sys.stderr,
        )
        return 2
    if args.sequential and not args.replay:
        print("ralph-tui: --sequential goes with --replay FILE_OR_DIR ...", file=sys.stderr)
        return 2
    if wrong := misused(args):
        print(f"ralph-tui: {wrong}", file=sys.stderr)
        return 2
    attention = Attention(bell=args.bell, osc=args.osc_notify)
    if args.dataset is not None:
        if args.homes or args.home or args.replay:
            print("ralph-tui: give either --dataset DIR or HOME ... / --replay, not both", file=sys.stderr)
            return 2
        try:
            dataset_sources(args.dataset)
        except LedgerError as exc:
            print(f"ralph-tui: {exc}", file=sys.stderr)
            return 1
        app = RalphApp(dataset=args.dataset, attention=attention)
    elif args.replay:
        if args.homes or args.home:
            print("ralph-tui: give either HOME ... or --replay FILE_OR_DIR ..., not both", file=sys.stderr)
            return 2
        try:
            files = journal_files(args.replay)
        except FileNotFoundError as exc:
            print(f"ralph-tui: {exc}", file=sys.stderr)
            return 2
        if not files:
            print("ralph-tui: no *.jsonl journals to replay", file=sys.stderr)
            return 2
        app = RalphApp(replay_files=files, speed=args.speed, sequential=args.sequential, attention=attention)
    else:
        sources = list(args.homes)
        missing = [s for s in sources if not s.exists()]
        if missing:
            what = "no such ledger home, journal directory or journal"
            hint = f" (to wait for a home yet to be made: ralph-tui --home {shlex.quote(str(missing[0]))})"
            print(f"ralph-tui: {missing[0]}: {what}{hint}", file=sys.stderr)
            return 1
        try:
            homes = [resolve_home(args.home)] if args.home or not sources else []
        except PermissionError as exc:  # a home another user could have written in (UnsafeHome)
            print(f"ralph-tui: {one_line(exc)}", file=sys.stderr)
            return 1
        if homes and homes[0].exists() and not homes[0].is_dir():  # a file is never a home to wait for
            given = f"--home {args.home}" if args.home else f"RALPH_HOME={os.environ.get('RALPH_HOME', '')}"
            print(f"ralph-tui: {given}: the ledger home {homes[0]} is not a directory", file=sys.stderr)
            return 2
        app = RalphApp(sources, homes=homes, attention=attention)
    if args.serve:  # the arguments are good: each browser tab runs them
        app.cleanup()
        return serve(args.host, args.port, sys.argv[1:] if argv is None else argv)
    if wrong := no_terminal():
        app.cleanup()
        print(wrong, file=sys.stderr)
        return 2
    try:
        app.run()
    finally:
        app.cleanup()
    return 0


if __name__ == "__main__":  # ``python -m tui.main``: what each tab of ``--serve`` runs
    sys.exit(main())
