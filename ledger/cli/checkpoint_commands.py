"""``ralph-ledger checkpoint list|show|resume|prune SESSION``: a session's checkpoints, for people, on
the functions the engine's checkpoint tools use (``ledger.loop.checkpoints``)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from ledger.cli.common import CliError, emit, unknown_session
from ledger.core.words import plural

if TYPE_CHECKING:
    import argparse

    from ledger.core.home import Home
    from ledger.loop.checkpoints import Resume

LISTED = (
    "checkpoint_id",
    "iteration",
    "trigger",
    "phase",
    "created_at",
    "expires_at",
    "expired",
    "expired_reason",
)
"""The columns ``checkpoint list`` shows (``show`` gives every field)."""


def cmd_checkpoint(home: Home, args: argparse.Namespace) -> None:
    """``checkpoint ACTION SESSION``: list a session's checkpoints (``--all``: the expired ones too),
    show one, print what resuming from one (the latest live one by default) gives the agent, or
    expire old ones (``prune``). ``CliError`` (exit 1) for an unknown session or checkpoint."""
    from ledger.core.output import render_rows
    from ledger.loop import checkpoints
    from ledger.loop.engine import Engine
    from ledger.loop.engine_types import EngineError
    from ledger.storage.journal import journal_path
    from ledger.storage.ledger_file import unwritable

    if not journal_path(home.journals, args.session).exists():  # JournalError for an invalid id
        raise unknown_session(args.session, home)
    if args.action == "prune" and (why := unwritable(home)):  # it appends the expiries
        raise CliError(
            f"ralph-ledger: cannot prune session {args.session!r}: cannot write in {home.root} ({why})"
        )
    engine = Engine(home)
    try:
        if args.action == "list":
            rows = checkpoints.list_checkpoints(engine, args.session, include_expired=args.all)
            emit(render_rows(LISTED, [[r[c] for c in LISTED] for r in rows], args.fmt))
        elif args.action == "show":
            row = checkpoints.get(engine, args.session, args.checkpoint)
            emit(render_rows(list(row), [list(row.values())], args.fmt))
        elif args.action == "resume":
            resume = checkpoints.resume(engine, args.session, args.checkpoint)
            emit(_resume_text(resume) if args.fmt == "table" else render_rows(*_resume_row(resume), args.fmt))
        else:
            ids = checkpoints.prune(engine, args.session, keep=args.keep)
            emit(render_rows(["expired"], [[i] for i in ids], args.fmt))
            if args.snapshots:
                from ledger.cli.snapshot_commands import prune_snapshots

                refs = prune_snapshots(home, args.session)
                print(f"ralph-ledger: removed {plural(len(refs), 'snapshot ref')}", file=sys.stderr)
    except EngineError as exc:
        raise CliError(f"ralph-ledger: {exc}") from None


def _resume_row(resume: Resume) -> tuple[list[str], list[list[object]]]:
    """What ``checkpoint_resume`` gives, as one row (CSV / JSON)."""
    columns = ["checkpoint_id", "iteration", "max_iterations", "status", "agent_context", "instructions"]
    values = [
        resume.checkpoint["checkpoint_id"],
        resume.iteration,
        resume.max_iterations,
        resume.status,
        resume.agent_context,
        resume.instructions,
    ]
    return columns, [values]


def _resume_text(resume: Resume) -> str:
    """The resume instructions and the agent context, as a person reads them."""
    return f"{resume.checkpoint['checkpoint_id']} (iteration {resume.iteration}): {resume.instructions}\n"
