"""Steering a loop from outside it (``ralph-ledger pause`` / ``resume`` / ``steer`` / ``unblock``, and
ralph-tui's keys): the override the loop reads (``ledger.loop.steering.commands``), then what the
loop's driver needs to go on. An unblocked runner loop goes on with ``run --resume``; an unblocked
ledger-native Claude Code loop gets its loop file back in the project, so that the next stop of
its Claude Code session goes on with it (docs/design/loop-step.md, "Steering")."""

from __future__ import annotations

import os
from pathlib import Path

from ledger import events as ev
from ledger.loop.steering import commands
from ledger.storage.fold import events_of

UNBLOCK_ITERATIONS = commands.UNBLOCK_ITERATIONS


def steer_journal(
    journal: Path,
    action: str,
    text: str = "",
    iterations: int = UNBLOCK_ITERATIONS,
    project: Path | None = None,
) -> str:
    """Carry out ``action`` on the session whose journal is ``journal`` (any home or folder of
    journals) and say in one line what happens next; ``EngineError`` (one line) when it cannot be
    done. An unblock also lets the loop's driver go on: the Claude Code loop file is written again
    in ``project`` (by default ``$CLAUDE_PROJECT_DIR``, else the project around the working
    directory)."""
    sid = journal.name.removesuffix(".jsonl")
    line = commands.apply(journal.parent, sid, action, text, iterations)
    if action == "unblock":
        line += _goes_on(journal, project)
    return line


def _goes_on(journal: Path, project: Path | None) -> str:
    """How an unblocked loop goes on: a runner's (it recorded its agent command) with ``run
    --resume``; a ledger-native Claude Code loop at its next stop, its loop file written again."""
    from ledger.core.project import project_root
    from ledger.drivers.claude_code.stop.loop_file import restore

    sid = journal.name.removesuffix(".jsonl")
    started = [e for e in events_of(journal) if isinstance(e, ev.SessionStarted)]
    if started and started[-1].command:
        return f" (continue it with `ralph-ledger run --resume {sid}`)"
    where = project or Path(os.environ.get("CLAUDE_PROJECT_DIR") or project_root(os.getcwd()))
    if restore(where, journal) is not None:
        return "; the next stop of its Claude Code session goes on with it"
    return ""
