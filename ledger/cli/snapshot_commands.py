"""``ralph-ledger diff SESSION [N | N..M]`` and ``ralph-ledger rollback SESSION --to N``: a session's
git snapshots (docs/snapshots.md), and the removal of its refs by ``checkpoint prune --snapshots``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.cli.common import CliError, unknown_session

if TYPE_CHECKING:
    import argparse

    from ledger.core.home import Home
    from ledger.events import AnyEvent


def _events(home: Home, session: str) -> list[AnyEvent]:
    """The session's events; ``CliError`` for an unknown session."""
    from ledger.storage.fold import events_of
    from ledger.storage.journal import journal_path

    path = journal_path(home.journals, session)  # JournalError for an invalid id
    if not path.exists():
        raise unknown_session(session, home)
    return events_of(path)


def cmd_diff(home: Home, args: argparse.Namespace) -> None:
    """``diff SESSION [N | N..M]``: what iteration N changed (against the snapshot before it, or the
    session's base for the first), or iterations N to M, as ``git diff`` prints it (colour only on a
    terminal). The files left out of those snapshots for their size are named on stderr."""
    from ledger.core.snapshots import SnapshotError, diff
    from ledger.monitor.snapshots import left_out_line, span

    events = _events(home, args.session)
    try:
        s = span(args.session, events, home.root, args.iterations)
    except ValueError as exc:
        raise CliError(f"ralph-ledger diff: {exc}") from None
    sys.stdout.flush()
    try:
        code = diff(s.root, s.base, s.commit, color=sys.stdout.isatty())
    except SnapshotError as exc:
        raise CliError(f"ralph-ledger diff: {exc}") from None
    if code not in (0, 1):
        raise CliError(f"ralph-ledger diff: git diff failed in {s.root} (exit {code})")
    if note := left_out_line(s):
        print(f"ralph-ledger: {note}", file=sys.stderr)


def cmd_rollback(home: Home, args: argparse.Namespace) -> None:
    """``rollback SESSION --to N``: make the work tree iteration N's snapshot. Refused in one line when
    the work tree holds changes that are in no snapshot of the session (``--force`` overrides);
    records an ``override`` of kind ``rollback``. The branch, ``HEAD`` and the index are untouched."""
    from ledger import events as ev
    from ledger.core import snapshots as git
    from ledger.loop.config.loop_config import LoopConfig
    from ledger.loop.snapshots import left_alone
    from ledger.monitor.snapshots import span, taken, work_tree
    from ledger.storage.journal import Journal, journal_path

    events = _events(home, args.session)
    try:  # the same words as diff's for a session without that snapshot (or without any)
        span(args.session, events, home.root, str(args.to))
    except ValueError as exc:
        raise CliError(f"ralph-ledger rollback: {exc}") from None
    snaps = taken(events)
    target = snaps[args.to]
    started = [e for e in events if isinstance(e, ev.SessionStarted)]
    config = started[-1].config if started else {}
    limit = int(config.get("snapshot_max_bytes", LoopConfig().snapshot_max_bytes))
    root = work_tree(target, home.root)
    alone = left_alone(events, home.root)
    try:
        repo = git.repo_of(root) if root.is_dir() else None
        if repo is None:
            raise git.SnapshotError(f"{root} is no longer a git work tree")
        if not args.force:
            now = git.current_tree(repo, alone, limit)
            commits = [c for s in snaps.values() for c in (s.commit, s.parent) if c]  # the base too
            kept = {s.tree for s in snaps.values()} | git.trees_of(repo.root, commits)
            if now.tree not in kept:
                raise CliError(
                    f"ralph-ledger rollback: {repo.root} has changes that are in no snapshot of session "
                    f"{args.session!r}; commit or stash them, or give --force"
                )
        git.restore(repo, target.tree or f"{target.commit}^{{tree}}", alone, limit, force=args.force)
    except git.SnapshotError as exc:
        raise CliError(f"ralph-ledger rollback: {exc}") from None
    n = max((e.iteration for e in events), default=0)
    reason = f"work tree restored to iteration {args.to}'s snapshot"
    override = ev.Override(
        session_id=args.session, iteration=n, kind="rollback", reason=reason, commit=target.commit
    )
    Journal(journal_path(home.journals, args.session)).append(override)
    print(f"{args.session}: {repo.root} restored to iteration {args.to} ({target.commit[:12]})")


def prune_snapshots(home: Home, session: str) -> list[str]:
    """Remove the session's snapshot refs from every work tree its snapshots were taken in; the refs
    removed. ``CliError`` (one line) when git fails."""
    from ledger.core import snapshots as git
    from ledger.monitor.snapshots import taken, work_tree

    roots = {work_tree(s, home.root) for s in taken(_events(home, session)).values()}
    removed: list[str] = []
    try:
        prefix = git.session_refs(session)
        for root in sorted(roots):
            if Path(root).is_dir():
                removed += git.remove_refs(root, prefix)
    except git.SnapshotError as exc:
        raise CliError(f"ralph-ledger: cannot remove the snapshots of {session!r}: {exc}") from None
    return removed
