"""``pause`` / ``resume`` / ``steer`` / ``unblock``: a human steering a loop without stopping it
(``ledger.loop.steering.commands``), each recorded as an ``override`` event in the session's journal."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.cli.common import CliError, unknown_session
from ledger.core.home import Home

if TYPE_CHECKING:
    import argparse


def cmd_steering(home: Home, args: argparse.Namespace) -> None:
    """Record the override and print one line saying what happens next.

    Raises ``CliError``: exit 2 for empty guidance, exit 1 for a session the home does not hold,
    one that has ended (for ``unblock``: one that is not blocked or escalated), or a home that
    cannot be written.
    """
    from ledger.drivers.steer import steer_journal
    from ledger.loop.engine_types import EngineError
    from ledger.storage.journal import journal_path
    from ledger.storage.ledger_file import unwritable

    sid, command = args.session, args.command
    guidance = getattr(args, "guidance", "") or ""
    if command == "steer" and not guidance.strip():
        raise CliError("ralph-ledger steer: the guidance is empty: give the text for the next prompt", 2)
    if not journal_path(home.journals, sid).exists():  # JournalError for an invalid id
        raise unknown_session(sid, home)
    if why := unwritable(home):
        raise CliError(f"ralph-ledger: cannot {command} session {sid!r}: cannot write in {home.root} ({why})")
    if command == "unblock" and _plugin_loop(home, sid):
        raise CliError(
            f"ralph-ledger unblock: session {sid!r} is a ralph-loop plugin loop, which unblock cannot "
            "restart: start it again with /ralph-loop"
        )
    try:
        text = guidance or getattr(args, "reason", "")
        print(steer_journal(journal_path(home.journals, sid), command, text, getattr(args, "iterations", 5)))
    except EngineError as exc:
        raise CliError(f"ralph-ledger {command}: {exc}") from None


def _plugin_loop(home: Home, sid: str) -> bool:
    """Whether the session is a ``ralph-loop`` plugin loop the drop-in hook records (its state file
    is gone once it ended: ``unblock`` cannot bring it back)."""
    from ledger import events as ev
    from ledger.storage.fold import events_of
    from ledger.storage.journal import journal_path

    started = [e for e in events_of(journal_path(home.journals, sid)) if isinstance(e, ev.SessionStarted)]
    return bool(started) and started[-1].config.get("mode") == "ralph-loop"
