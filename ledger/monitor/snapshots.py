"""A session's git snapshots as people read them (``ralph-ledger diff``, ralph-tui's ``d``): which
commits an iteration, or a range of them, spans, and their diff as git prints it
(docs/snapshots.md)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger import events as ev
from ledger.core import snapshots as git
from ledger.core.words import plural


@dataclass(frozen=True, slots=True)
class Span:
    """What iterations ``first`` to ``last`` changed: from ``base`` ("" for the empty tree) to
    ``commit``, in the repository whose work tree is ``root``; the files left out of those
    snapshots for their size."""

    root: Path
    base: str
    commit: str
    first: int
    last: int
    left_out: tuple[str, ...]


def taken(events: Sequence[ev.AnyEvent]) -> dict[int, ev.SnapshotTaken]:
    """The snapshot of each iteration (its last one), by iteration."""
    return {e.iteration: e for e in events if isinstance(e, ev.SnapshotTaken)}


def work_tree(snapshot: ev.SnapshotTaken, home_root: Path) -> Path:
    """The work tree a snapshot was taken of (recorded relative to the folder holding the home)."""
    return recorded_tree(snapshot.work_tree, home_root)


def recorded_tree(recorded: str, home_root: Path) -> Path:
    """A ``work_tree`` as recorded (relative to the folder holding the home, or absolute), as a path."""
    return Path(os.path.normpath(os.path.join(home_root.parent, recorded or ".")))


def parse_range(text: str | None, last: int) -> tuple[int, int]:
    """``N`` or ``N..M`` (``None``: the last iteration) as ``(first, last)``; ``ValueError`` (one
    line) for anything else."""
    if text is None:
        return last, last
    first_s, sep, last_s = text.partition("..")
    try:
        first, end = int(first_s), int(last_s) if sep else int(first_s)
    except ValueError:
        raise ValueError(f"expected an iteration N or a range N..M, got {text!r}") from None
    if first < 1 or end < first:
        raise ValueError(f"expected iterations from 1 up, the first not after the last, got {text!r}")
    return first, end


def span(session_id: str, events: Sequence[ev.AnyEvent], home_root: Path, text: str | None) -> Span:
    """The span of ``text`` (``N``, ``N..M``; ``None``: the last snapshot) in the session's snapshots;
    ``ValueError`` (one line) when the session has none, or none of an iteration asked for."""
    snaps = taken(events)
    if not snaps:
        raise ValueError(
            f"session {session_id!r} has no snapshots (not run in a git work tree, or `snapshots = false`)"
        )
    first, last = parse_range(text, max(snaps))
    missing = [n for n in (first, last) if n not in snaps]
    if missing:
        have = ", ".join(str(n) for n in sorted(snaps))
        raise ValueError(
            f"session {session_id!r} has no snapshot of iteration {missing[0]} "
            f"({plural(len(snaps), 'snapshot')}: iterations {have})"
        )
    left = tuple(sorted({p for n, s in snaps.items() if first <= n <= last for p in s.left_out}))
    start, end = snaps[first], snaps[last]
    return Span(work_tree(end, home_root), start.parent, end.commit, first, last, left)


def left_out_line(s: Span, limit_note: str = "over the size limit") -> str:
    """The line naming the files the span's snapshots left out ("" when none)."""
    if not s.left_out:
        return ""
    return f"left out of the snapshots ({limit_note}): {', '.join(s.left_out)}"


def diff_text(s: Span) -> str:
    """The span's diff as git prints it, without colour; ``SnapshotError`` (one line) when git fails
    (a snapshot pruned, the repository gone)."""
    return git.diff_text(s.root, s.base, s.commit)


def iteration_diff(
    session_id: str, iteration: int, row: dict[str, Any] | None, home_root: Path | None
) -> str:
    """What ralph-tui shows for ``d``: iteration ``iteration``'s diff as git prints it (``row``: its
    ``snapshot_taken`` as the ledger holds it: ``commit``, ``parent``, ``work_tree``, ``left_out``),
    the files left out named after it; else one line saying why there is none."""
    if row is None or home_root is None:
        return (
            f"iteration {iteration} of {session_id} has no snapshot (not run in a git work tree, "
            "`snapshots = false`, or its journal is not in a home)"
        )
    try:
        text = git.diff_text(
            recorded_tree(str(row["work_tree"] or ""), home_root), row["parent"] or "", row["commit"]
        )
    except git.SnapshotError as exc:
        return f"no diff of iteration {iteration}: {exc}"
    left = [str(p) for p in row.get("left_out") or []]
    note = f"\nleft out of the snapshot (over the size limit): {', '.join(left)}\n" if left else ""
    return (text or f"iteration {iteration} changed nothing\n") + note
