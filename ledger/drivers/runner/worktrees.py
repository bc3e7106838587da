"""A loop's own git worktree: ``ralph-ledger run --worktree NAME``.

The worktree is ``<repository>/.ralph/worktrees/NAME`` on the branch ``ralph/NAME``, created from
``HEAD`` the first time and reused afterwards; ``.ralph/worktrees/.gitignore`` keeps it out of the
main checkout; ``hold`` keeps an exclusive ``flock`` on it while a loop runs. Every refusal is a
``WorktreeError``: one line, with the exit status the command should use. The rules:
docs/runner.md (Parallel loops in one repository).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ledger.core.errors import error_reason, printable
from ledger.core.home import DEFAULT_HOME, WORKTREES, make_root
from ledger.core.locks import LockBusy, loop_lock

BRANCH_PREFIX: Final = "ralph/"
"""A worktree NAME's branch is ``ralph/NAME``."""

NAME_MAX: Final = 64

_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*")
"""Letters, digits, ``_``, ``-`` and single dots inside: a folder name and a branch name both."""

GIT_TIMEOUT_S: Final = 60.0


class WorktreeError(Exception):
    """A worktree that cannot be used: one line; ``code`` is the exit status (2: bad usage)."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Worktree:
    """A loop's worktree: its root folder, its branch (``ralph/NAME``), the main work tree of its
    repository, and how this call made it (``"made from HEAD"``, ``"made from branch ralph/NAME"``;
    ``""``: it was there)."""

    path: Path
    branch: str
    repository: Path
    made: str


def check_name(name: str) -> str:
    """``name`` if it can name a worktree folder and the branch ``ralph/NAME``, else
    ``WorktreeError`` saying what is expected."""
    if len(name) > NAME_MAX or not _NAME.fullmatch(name) or name.endswith(".lock"):
        raise WorktreeError(
            f"--worktree: expected a folder and branch name (1-{NAME_MAX} letters, digits, '_', '-', "
            f"single dots inside, not ending in .lock), got {name!r}"
        )
    return name


def branch_of(name: str) -> str:
    """The branch of the worktree ``name``: ``ralph/NAME``."""
    return BRANCH_PREFIX + name


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``git -C cwd args`` (text, captured); ``WorktreeError`` if git is not installed."""
    if shutil.which("git") is None:
        raise WorktreeError("--worktree needs git, which is not installed (not found on PATH)")
    try:
        return subprocess.run(
            ["git", "-C", str(cwd), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WorktreeError(f"git {' '.join(args[:2])} failed: {error_reason(exc)}", 1) from None


def _said(done: subprocess.CompletedProcess[str]) -> str:
    """What a failed git command said, in one line: its last (``fatal: ...`` follows what it was doing)."""
    lines = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
    return printable(lines[-1]) if lines else f"exit status {done.returncode}"


@dataclass(frozen=True, slots=True)
class _Entry:
    """One worktree as ``git worktree list --porcelain`` lists it (``branch``: a full ref, or ``""``
    for a detached ``HEAD``)."""

    path: Path
    branch: str
    bare: bool
    prunable: bool


def _entries(cwd: Path) -> list[_Entry]:
    """The repository's worktrees, the main one first."""
    done = _git(cwd, "worktree", "list", "--porcelain")
    if done.returncode != 0:
        raise WorktreeError(f"git worktree list: {_said(done)}", 1)
    found: list[_Entry] = []
    for block in done.stdout.split("\n\n"):
        fields = {key: value for key, _, value in (line.partition(" ") for line in block.splitlines())}
        if "worktree" in fields:
            found.append(
                _Entry(
                    Path(fields["worktree"]), fields.get("branch", ""), "bare" in fields, "prunable" in fields
                )
            )
    return found


def repository_of(cwd: Path) -> Path:
    """The main work tree of the git repository holding ``cwd`` (from a linked worktree too);
    ``WorktreeError`` outside a repository or for a bare one."""
    done = _git(cwd, "rev-parse", "--show-toplevel")
    if done.returncode != 0:
        raise WorktreeError(f"--worktree: {cwd} is not in a git repository (git init, commit, then run)")
    main = _entries(cwd)[0]
    if main.bare:
        return Path(done.stdout.strip())
    return main.path


def folder_of(repository: Path, name: str) -> Path:
    """Where the worktree ``name`` of ``repository`` lives: ``<repository>/.ralph/worktrees/NAME``."""
    return repository / DEFAULT_HOME / WORKTREES / name


def _same(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _short(ref: str) -> str:
    return ref.removeprefix("refs/heads/") if ref else "a detached HEAD"


def ensure(cwd: Path, path: Path, branch: str, *, create_branch: bool = True) -> Worktree:
    """The worktree at ``path`` on ``branch``, made if it is missing (from ``branch`` if it exists,
    else, if ``create_branch``, as a new branch from ``cwd``'s ``HEAD``).

    Refused (``WorktreeError``, exit 2) when ``path`` is a worktree on another branch, ``branch`` is
    checked out elsewhere, ``path`` holds something else, or the repository has no commit yet;
    without ``create_branch``, a missing branch is refused too (exit 1: its work is gone).
    """
    repository = repository_of(cwd)
    try:
        make_root(repository / DEFAULT_HOME)
        with loop_lock(path.parent):  # one creation at a time (two loops starting together)
            return _ensure(cwd, repository, path, branch, create_branch)
    except LockBusy as exc:
        raise WorktreeError(f"--worktree: {exc}", 1) from None
    except OSError as exc:
        raise WorktreeError(f"--worktree: cannot make {path}: {error_reason(exc)}", 1) from None


def _ensure(cwd: Path, repository: Path, path: Path, branch: str, create_branch: bool) -> Worktree:
    """``ensure``'s work, under the lock of the worktrees' folder."""
    ignore = path.parent / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# ralph-ledger's loop worktrees: never part of the main checkout\n*\n")
    entries = _entries(cwd)
    if any(e.prunable for e in entries):  # a worktree folder deleted by hand: forget it
        _git(cwd, "worktree", "prune")
        entries = _entries(cwd)
    ref = "refs/heads/" + branch
    here = next((e for e in entries if _same(e.path, path)), None)
    if here is not None:
        if here.branch != ref:
            raise WorktreeError(
                f"--worktree: {path} has {_short(here.branch)} checked out, not {branch} "
                f"(git -C {path} switch {branch}, or remove that worktree)"
            )
        return Worktree(path, branch, repository, made="")
    elsewhere = next((e for e in entries if e.branch == ref), None)
    if elsewhere is not None:
        raise WorktreeError(f"--worktree: branch {branch} is checked out in {elsewhere.path}")
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise WorktreeError(f"--worktree: {path} exists and is not a worktree of {repository}")
    has_branch = _git(cwd, "show-ref", "--verify", "--quiet", ref).returncode == 0
    if not has_branch and not create_branch:
        raise WorktreeError(f"--worktree: branch {branch} no longer exists, and its work with it", 1)
    if not has_branch and _git(cwd, "rev-parse", "--verify", "--quiet", "HEAD^{commit}").returncode != 0:
        raise WorktreeError(f"--worktree: {repository} has no commit yet: commit once, then run")
    prefix = _prefix(cwd)  # the loop works in this folder of the worktree: it must have it
    if prefix and _git(cwd, "cat-file", "-e", f"{ref if has_branch else 'HEAD'}:{prefix}").returncode != 0:
        raise WorktreeError(_lacks(path, prefix))
    if has_branch:
        made, done = f"made from branch {branch}", _git(cwd, "worktree", "add", str(path), branch)
    else:
        made, done = "made from HEAD", _git(cwd, "worktree", "add", "-b", branch, str(path), "HEAD")
    if done.returncode != 0:
        raise WorktreeError(f"--worktree: cannot create {path}: {_said(done)}", 1)
    return Worktree(path, branch, repository, made=made)


def work_dir(cwd: Path, worktree: Path) -> Path:
    """The folder of ``worktree`` that is ``cwd``'s in its own checkout (its root when ``cwd`` is
    the checkout's root); ``WorktreeError`` when the worktree does not have it (not committed)."""
    prefix = _prefix(cwd)
    folder = worktree / prefix if prefix else worktree
    if not folder.is_dir():
        raise WorktreeError(_lacks(worktree, prefix))
    return folder


def _prefix(cwd: Path) -> str:
    """``cwd`` relative to the root of its checkout (``""`` at the root)."""
    done = _git(cwd, "rev-parse", "--show-prefix")
    return done.stdout.strip().rstrip("/") if done.returncode == 0 else ""


def _lacks(worktree: Path, prefix: str) -> str:
    """The refusal of a worktree that does not have the folder the loop works in."""
    return f"--worktree: {prefix} is not in {worktree} (not committed): run from a folder HEAD has"


@contextmanager
def hold(worktree: Path) -> Iterator[None]:
    """Hold the worktree for one loop for the block; ``WorktreeError`` (exit 1) when another loop
    holds it."""
    with ExitStack() as stack:
        try:
            stack.enter_context(loop_lock(worktree, wait=0))
        except LockBusy:
            raise WorktreeError(f"--worktree: {worktree} is in use by another running loop", 1) from None
        yield
