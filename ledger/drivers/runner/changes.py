"""The files an iteration changed in a git work tree: a snapshot of content digests before and
after, compared.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path


# ----------------------------------------------------------------------------- files modified
def _git(work_dir: Path, *args: str) -> bytes | None:
    """``git -C work_dir args`` stdout, or ``None`` if git is missing or fails (the snapshots' one git
    runner: never the user's index lock, no prompt)."""
    from ledger.core.snapshots import SnapshotError, git

    try:
        done = git(work_dir, *args, ok=True)
    except SnapshotError:
        return None
    return done.stdout if done.returncode == 0 else None


def _digest(path: Path) -> str:
    """A file's content hash; ``"missing"`` or ``"not-a-file"`` where there is none."""
    try:
        if not path.is_file():
            return "not-a-file" if path.exists() else "missing"
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


def snapshot(work_dir: Path, exclude: Path | None = None) -> dict[str, str] | None:
    """Content hashes of the paths ``git status`` reports (changed from HEAD, or untracked and
    not ignored), relative to the repository root; ``None`` outside a git work tree.

    Paths under ``exclude`` (the ledger home) are left out, unless the work tree itself is inside it
    (a loop's worktree in ``.ralph/worktrees``: all its paths count).
    """
    top = _git(work_dir, "rev-parse", "--show-toplevel")
    if top is None:
        return None
    root = Path(os.fsdecode(top.strip()))
    status = _git(work_dir, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
    if status is None:
        return None
    hashes: dict[str, str] = {}
    skip = exclude.resolve() if exclude is not None else None
    if skip is not None and root.resolve().is_relative_to(skip):
        skip = None
    for entry in status.split(b"\0"):
        if len(entry) < 4:
            continue
        rel = os.fsdecode(entry[3:])
        path = root / rel
        if skip is not None and path.resolve().is_relative_to(skip):
            continue
        hashes[rel] = _digest(path)
    return hashes


def files_changed(before: dict[str, str] | None, after: dict[str, str] | None) -> list[str]:
    """The paths whose content differs between two snapshots, sorted.

    A path missing from a snapshot was unchanged from HEAD then; no snapshot (not a git work
    tree) means no files.
    """
    if before is None or after is None:
        return []
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


def in_project(paths: Iterable[str], project: Path) -> list[str]:
    """``paths`` an agent named (absolute, or relative to ``project``) relative to ``project``, as
    git's are; one outside it stays as given. Agents such as Codex name absolute paths."""
    root = os.path.realpath(project)
    out: list[str] = []
    for name in paths:
        full = os.path.realpath(os.path.join(root, name))
        inside = full.startswith(root + os.sep)
        out.append(Path(os.path.relpath(full, root)).as_posix() if inside else name)
    return out
