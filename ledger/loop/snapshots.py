"""The snapshot an iteration's turn ends with (``ledger.core.snapshots``), as the loop step records
it: a ``snapshot_taken``, or one ``error_recorded`` line when git is missing or failed, or nothing
(snapshots off, outside git). Rules: docs/design/snapshots.md."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ledger import events as ev

if TYPE_CHECKING:
    from ledger.loop.engine import Engine
    from ledger.loop.engine_types import SessionView

COMPONENT: Final = "snapshot"
"""The ``error_recorded`` component of a snapshot that could not be taken."""


def turn_snapshot(engine: Engine, s: SessionView, landed: Sequence[ev.AnyEvent] = ()) -> list[ev.Event]:
    """The events recording the snapshot of the turn ending iteration ``s.iteration`` (none when one
    ``landed`` already, when the loop's ``snapshots`` is off, or outside a git work tree). Never
    raises: a failure is one ``error_recorded`` line (once per session and message)."""
    if not s.config.snapshots or any(isinstance(e, ev.SnapshotTaken) for e in landed):
        return []
    from ledger.core import snapshots as git  # git's processes: only for a turn that takes one

    sid, n = s.session_id, s.iteration
    try:
        ref = git.ref_name(sid, n)
        parent, parent_tree = base_of(s.events, n)
        repo = git.repo_of(engine.work_dir, head=not parent)
        if repo is None:
            return []
        taken = git.take(
            repo,
            ref,
            parent or repo.head,
            when=s.events[-1].ts if s.events else engine.clock(),  # the last event's time: no clock read
            message=f"ralph-ledger: session {sid}, iteration {n}",
            exclude=left_alone(s.events, engine.home.root),
            max_bytes=s.config.snapshot_max_bytes,
            parent_tree=parent_tree,
        )
    except (git.SnapshotError, OSError) as exc:
        message = f"no snapshot of iteration {n}: {exc}"
        said = any(
            isinstance(e, ev.ErrorRecorded)
            and e.component == COMPONENT
            and e.message.split(": ", 1)[-1] == str(exc)
            for e in s.events
        )
        error = ev.ErrorRecorded(session_id=sid, iteration=n, component=COMPONENT, message=message)
        return [] if said else [error]
    return [
        ev.SnapshotTaken(
            session_id=sid,
            iteration=n,
            commit=taken.commit,
            parent=taken.parent,
            tree=taken.tree,
            ref=taken.ref,
            work_tree=recorded_path(repo.root, engine.home.root),
            files=[ev.FileChange(path=p, added=a, removed=r) for p, a, r in taken.files],
            left_out=list(taken.left_out),
        )
    ]


def left_alone(events: Sequence[ev.AnyEvent], home: Path) -> list[Path]:
    """What a session's snapshots leave out, and so its rollback never rewinds: the ledger home and
    a task list's file, whose ticks are the loop's own record (the ledger holds the tasks' state;
    docs/design/snapshots.md)."""
    from ledger.loop.tasks.progress import file_of, task_state

    state = task_state(events)
    return [home, file_of(home.parent, state.file)] if state is not None and state.file else [home]


def base_of(events: Sequence[ev.AnyEvent], n: int) -> tuple[str, str]:
    """The parent of iteration ``n``'s snapshot and its tree ("" when unknown): the last snapshot of
    an earlier iteration, or the one a later rollback restored; ``("", "")`` before any."""
    parent, tree = "", ""
    trees: dict[str, str] = {}
    for e in events:
        if isinstance(e, ev.SnapshotTaken):
            trees[e.commit] = e.tree
            if e.iteration < n:
                parent, tree = e.commit, e.tree
        elif isinstance(e, ev.Override) and e.kind == "rollback" and e.commit:
            parent, tree = e.commit, trees.get(e.commit, "")
    return parent, tree


def recorded_path(path: Path, home: Path) -> str:
    """``path`` as a session records it: relative to the folder holding the home, absolute outside
    (``ledger.loop.tasks.progress.file_record``, as ``work_dir`` is)."""
    from ledger.loop.tasks.progress import file_record

    return file_record(home.parent, path)


def left_out_note(events: Sequence[ev.AnyEvent], n: int) -> str:
    """One line naming the files iteration ``n``'s snapshot left out for their size and the one
    before did not ("" when none): what a driver says, so that a large file never stays out of the
    snapshots unseen (said once, not at every iteration it stays out)."""
    last: dict[int, ev.SnapshotTaken] = {e.iteration: e for e in events if isinstance(e, ev.SnapshotTaken)}
    if n not in last:
        return ""
    before = set(last[max(i for i in last if i < n)].left_out) if any(i < n for i in last) else set()
    new = [p for p in last[n].left_out if p not in before]
    if not new:
        return ""
    return f"iteration {n}: left out of its git snapshot (over the size limit): {', '.join(new)}"
