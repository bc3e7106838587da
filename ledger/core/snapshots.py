"""Git snapshots of a work tree: its state stored as a commit under a ref, built in a temporary
index so that the user's branch, index, stash and ``HEAD`` are never touched; the diff between
two snapshots; a work tree restored to one. Few git processes, each with a timeout: the Stop hook
takes a snapshot (docs/design/snapshots.md)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final

GIT_TIMEOUT_S: Final = 20.0
DEFAULT_MAX_BYTES: Final = 5 * 1024 * 1024
REF_ROOT: Final = "refs/ralph"
IDENTITY: Final = ("ralph-ledger", "ralph-ledger@localhost")
LOOP_STATE: Final = (".claude/ralph-ledger.local.json", ".claude/ralph-loop.local.md")
"""The loop files of a Claude Code loop (``ledger.drivers.claude_code.stop.locate``): the loop's own
state, never the work, so never in a snapshot nor restored by a rollback."""
EMPTY_TREES: Final = {
    40: "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    64: "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321",
}
"""The empty tree's id by the length of an id (SHA-1, SHA-256): git knows it without storing it."""
_REF_UNSAFE = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|/\.|\.lock(/|$)|^\.|[./]$")
_CLEARED = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_PREFIX", "GIT_COMMON_DIR")


class SnapshotError(Exception):
    """Git is missing or failed: one line saying why."""


@dataclass(frozen=True, slots=True)
class Repo:
    """A git work tree: its ``root`` (top level), its ``git_dir`` and its ``head`` commit ("" when
    the branch has no commit yet)."""

    root: Path
    git_dir: Path
    head: str


@dataclass(frozen=True, slots=True)
class Tree:
    """The work tree as a git tree: its id, and the files left out for their size."""

    tree: str
    left_out: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A snapshot stored: its commit, tree, parent ("" for none), ref, the files it changed against
    the parent as ``(path, added, removed)`` (``None`` counts for a binary file) and the files
    left out for their size."""

    commit: str
    tree: str
    parent: str
    ref: str
    files: tuple[tuple[str, int | None, int | None], ...]
    left_out: tuple[str, ...]


def ref_name(session_id: str, iteration: int) -> str:
    """``refs/ralph/<session>/<iteration>``; ``SnapshotError`` for a session id git would refuse in a
    ref name (or one that would reach outside the session's folder of refs)."""
    return f"{session_refs(session_id)}{iteration}"


def session_refs(session_id: str) -> str:
    """The prefix of a session's refs (``refs/ralph/<session>/``), the session id checked."""
    if not session_id or "/" in session_id or _REF_UNSAFE.search(session_id):
        raise SnapshotError(f"session id {session_id!r} cannot name a git ref; no snapshot")
    return f"{REF_ROOT}/{session_id}/"


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    env["GIT_OPTIONAL_LOCKS"] = "0"  # never take the user's index lock to refresh it
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.update(extra or {})
    return env


def git(
    cwd: Path, *args: str, stdin: bytes | None = None, env: Mapping[str, str] | None = None, ok: bool = False
) -> subprocess.CompletedProcess[bytes]:
    """``git -C cwd args``, its output captured; ``SnapshotError`` (one line) when git is missing,
    times out or (unless ``ok``) exits non-zero."""
    try:
        done = subprocess.run(
            ["git", "-C", str(cwd), *args],
            input=stdin,
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
            env=_env(env),
        )
    except FileNotFoundError:
        raise SnapshotError("git is not installed (not on PATH)") from None
    except subprocess.TimeoutExpired:
        raise SnapshotError(f"git {args[0]} took longer than {GIT_TIMEOUT_S:.0f} s") from None
    except OSError as exc:
        raise SnapshotError(f"git could not run: {exc}") from None
    if done.returncode != 0 and not ok:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        raise SnapshotError(f"git {args[0]} failed: {said[-1] if said else f'exit {done.returncode}'}")
    return done


_KNOWN: dict[str, tuple[Path, Path]] = {}
"""The work trees this process found, by the folder asked about: a warm worker asks again at every stop."""


def repo_of(work_dir: Path, *, head: bool = True) -> Repo | None:
    """The git work tree holding ``work_dir``; ``None`` outside one (a bare repository, a ``.git``
    folder, no repository). One git process; none when ``head`` is not needed (its ``head`` is then
    "") and this process found the work tree before."""
    known = _KNOWN.get(str(work_dir))
    if not head and known is not None and known[1].is_dir():
        return Repo(known[0], known[1], "")
    done = git(work_dir, "rev-parse", "--show-toplevel", "--absolute-git-dir", "HEAD", ok=True)
    lines = done.stdout.decode(errors="surrogateescape").splitlines()
    if len(lines) < 2:
        return None
    _KNOWN[str(work_dir)] = Path(lines[0]), Path(lines[1])
    return Repo(
        Path(lines[0]), Path(lines[1]), lines[2].strip() if done.returncode == 0 and len(lines) > 2 else ""
    )


@contextmanager
def temporary_index(repo: Repo) -> Iterator[dict[str, str]]:
    """The environment of a private index in the repository's git folder, seeded from the user's
    index (its stat data spares hashing unchanged files again; its time kept, as git's racy-entry
    check compares each file's time with the index's: a file rewritten in the same second as the
    index was, at the same size, is then still hashed); removed afterwards."""
    path = repo.git_dir / f"ralph-index.{os.getpid()}.{uuid.uuid4().hex[:12]}"
    try:
        with suppress(FileNotFoundError):
            shutil.copy2(repo.git_dir / "index", path)
        yield {"GIT_INDEX_FILE": str(path)}
    finally:
        for leftover in (path, path.with_name(path.name + ".lock")):
            with suppress(OSError):
                leftover.unlink()


def _excluded(repo: Repo, exclude: Sequence[Path]) -> list[str]:
    """The pathspecs leaving the loop's own files out: its state files (``LOOP_STATE``) and each of
    ``exclude`` (the ledger home, a task list's file) that lies inside the work tree (a home the work
    tree lies inside is no file of it)."""
    out = [f":(exclude,top){name}" for name in LOOP_STATE]
    root = repo.root.resolve()
    for path in exclude:
        mine = path.resolve()
        if root.is_relative_to(mine) or not mine.is_relative_to(root):
            continue
        out.append(f":(exclude,top){mine.relative_to(root).as_posix()}")
    return out


def write_tree(repo: Repo, env: Mapping[str, str], exclude: Sequence[Path], max_bytes: int) -> Tree:
    """The work tree, as git sees it (ignored files out), staged in the index of ``env`` and written
    as a tree; files over ``max_bytes`` that git would add are left out and named."""
    listed = git(
        repo.root,
        "ls-files",
        "-z",
        "--others",
        "--modified",
        "--exclude-standard",
        "--",
        ":(top)",
        *_excluded(repo, exclude),
        env=env,
    ).stdout
    paths, left_out = [], []
    for raw in dict.fromkeys(listed.split(b"\0")):
        if not raw or raw.endswith(b"/"):  # a nested repository git would only warn about
            continue
        try:
            st = os.lstat(repo.root / os.fsdecode(raw))
        except OSError:
            paths.append(raw)  # gone: removed from the snapshot
            continue
        if max_bytes > 0 and st.st_size > max_bytes and not os.path.isdir(repo.root / os.fsdecode(raw)):
            left_out.append(os.fsdecode(raw))
        else:
            paths.append(raw)
    if paths:
        stdin = b"\0".join(paths) + b"\0"
        git(repo.root, "update-index", "--add", "--remove", "-z", "--stdin", stdin=stdin, env=env)
    tree = git(repo.root, "write-tree", env=env).stdout.decode().strip()
    return Tree(tree, tuple(sorted(left_out)))


def take(
    repo: Repo,
    ref: str,
    parent: str,
    *,
    when: datetime,
    message: str,
    exclude: Sequence[Path] = (),
    max_bytes: int = DEFAULT_MAX_BYTES,
    parent_tree: str = "",
) -> Snapshot:
    """Store the work tree as a commit (its parent ``parent``: "" for none) under ``ref``, and what
    changed against the parent (no diff when the tree is ``parent_tree``, the parent's known tree).
    The diff runs while the commit is made and the ref set: it needs only the two trees."""
    with temporary_index(repo) as env:
        written = write_tree(repo, env, exclude, max_bytes)
    counted: list[tuple[tuple[str, int | None, int | None], ...] | SnapshotError] = [()]
    counting = None
    if written.tree != parent_tree:

        def count() -> None:
            try:
                counted[0] = numstat(repo.root, parent or EMPTY_TREES[len(written.tree)], written.tree)
            except SnapshotError as exc:
                counted[0] = exc

        counting = threading.Thread(target=count, daemon=True)
        counting.start()
    stamp = f"{int(when.timestamp())} +0000"
    who = {
        "GIT_AUTHOR_NAME": IDENTITY[0],
        "GIT_AUTHOR_EMAIL": IDENTITY[1],
        "GIT_COMMITTER_NAME": IDENTITY[0],
        "GIT_COMMITTER_EMAIL": IDENTITY[1],
        "GIT_AUTHOR_DATE": stamp,
        "GIT_COMMITTER_DATE": stamp,
    }
    parents = ["-p", parent] if parent else []
    try:
        made = git(
            repo.root, "commit-tree", "--no-gpg-sign", *parents, "-m", message, written.tree, env=who
        ).stdout
        commit = made.decode().strip()
        git(repo.root, "update-ref", "-m", message, ref, commit)
    finally:
        if counting is not None:
            counting.join()
    if isinstance(counted[0], SnapshotError):
        raise counted[0]
    return Snapshot(commit, written.tree, parent, ref, counted[0], written.left_out)


def numstat(root: Path, base: str, tree: str) -> tuple[tuple[str, int | None, int | None], ...]:
    """Lines added and removed per file from ``base`` to ``tree`` (commits or trees; ``None`` counts
    for a binary file): ``git diff-tree --numstat``."""
    out = git(root, "diff-tree", "-r", "-z", "--numstat", "--no-renames", base, tree).stdout
    fields = out.split(b"\0")
    files = []
    for field in fields:
        parts = field.split(b"\t", 2)
        if len(parts) != 3:
            continue
        added, removed, path = parts
        files.append(
            (
                os.fsdecode(path),
                None if added == b"-" else int(added),
                None if removed == b"-" else int(removed),
            )
        )
    return tuple(files)


def empty_tree(root: Path) -> str:
    """The empty tree's id in the repository's hash."""
    return git(root, "hash-object", "-t", "tree", "--stdin", stdin=b"").stdout.decode().strip()


def diff(root: Path, base: str, commit: str, *, color: bool) -> int:
    """Print ``git diff`` from ``base`` ("" for the empty tree) to ``commit`` on this process's
    standard output, as git prints it (colour only when ``color``); git's exit code."""
    try:
        return subprocess.run(
            [
                "git",
                "-C",
                str(root),
                "--no-pager",
                "diff",
                f"--color={'always' if color else 'never'}",
                base or empty_tree(root),
                commit,
                "--",
            ],
            check=False,
            env=_env(),
        ).returncode
    except OSError as exc:
        raise SnapshotError(f"git could not run: {exc}") from None


def diff_text(root: Path, base: str, commit: str) -> str:
    """``git diff`` from ``base`` ("" for the empty tree) to ``commit``, as text without colour."""
    out = git(root, "--no-pager", "diff", "--color=never", base or empty_tree(root), commit, "--")
    return out.stdout.decode(errors="replace")


def current_tree(repo: Repo, exclude: Sequence[Path], max_bytes: int) -> Tree:
    """The work tree now, as a snapshot would store it (nothing stored under a ref)."""
    with temporary_index(repo) as env:
        return write_tree(repo, env, exclude, max_bytes)


def restore(repo: Repo, target: str, exclude: Sequence[Path], max_bytes: int, *, force: bool) -> None:
    """Make the work tree the tree ``target``: files it lacks removed, the rest written; ignored
    files, and files left out of snapshots, untouched unless the target holds them (``force``:
    overwritten then; else git refuses). The user's index, ``HEAD`` and branch are not touched."""
    with temporary_index(repo) as env:
        now = write_tree(repo, env, exclude, max_bytes)
        how = ["--reset", "-u", target] if force else ["-m", "-u", now.tree, target]
        git(repo.root, "read-tree", *how, env=env)


def remove_refs(root: Path, prefix: str) -> list[str]:
    """Delete every ref under ``prefix`` (one transaction); the refs deleted."""
    listed = git(root, "for-each-ref", "--format=%(refname)", prefix).stdout.decode().split()
    if listed:
        stdin = "".join(f"delete {r}\n" for r in listed).encode()
        git(root, "update-ref", "--stdin", stdin=stdin)
    return listed


def trees_of(root: Path, commits: Sequence[str]) -> set[str]:
    """The trees of ``commits`` that still exist (one git process)."""
    if not commits:
        return set()
    out = git(root, "rev-parse", *(f"{c}^{{tree}}" for c in commits), ok=True).stdout
    return {line for line in out.decode().split() if len(line) >= 40}
