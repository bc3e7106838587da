"""Where a ledger lives: ``--home``, else ``$RALPH_HOME``, else the project's ``.ralph``
(:func:`default_home`); a home another user could have written in is refused (:func:`check_home`,
docs/design/homes.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import msgspec

from ledger.core.project import up_to_root
from ledger.core.trust import untrusted

DEFAULT_HOME = ".ralph"
WORKTREES = "worktrees"
"""The folder of a home holding its repository's loop worktrees (``run --worktree NAME``)."""
JOURNAL_SUFFIX = ".jsonl"


def is_journal(path: str | os.PathLike[str]) -> bool:
    """Whether a path names a journal (``*.jsonl``)."""
    return os.fspath(path).endswith(JOURNAL_SUFFIX)


def journals_in(directory: Path) -> list[Path]:
    """The journals of a directory: its ``*.jsonl`` files (not folders), sorted by name; [] when it is
    not a directory. The one listing of journals (a home's, a monitor's, the TUI's replay)."""
    try:
        # names sorted as strings: sorting 10,000 Path objects costs ~0.3 s
        with os.scandir(directory) as it:
            names = sorted(e.name for e in it if is_journal(e.name) and e.is_file())
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [directory / n for n in names]


def default_home(cwd: Path | None = None) -> Path:
    """The home used when none is named: the nearest ``.ralph`` directory at or above ``cwd`` (the
    current directory) up to its project root, as git finds ``.git``; else the project root's
    ``.ralph``, where the Stop hook and ``loop start`` keep it (``./.ralph`` outside a git work tree);
    in a loop's worktree (``<repository>/.ralph/worktrees/NAME``) its repository's ``.ralph``."""
    walk = [Path(d) for d in up_to_root(str((cwd or Path.cwd()).absolute()))]
    root = walk[-1]
    if root.parent.name == WORKTREES and root.parent.parent.name == DEFAULT_HOME:
        fallback = root.parent.parent  # one home for all the loops of a repository
    else:
        fallback = root / DEFAULT_HOME
    return next((d / DEFAULT_HOME for d in walk if (d / DEFAULT_HOME).is_dir()), fallback)


def check_home(root: str | os.PathLike[str], *, write: bool = True) -> None:
    """Raise ``UnsafeHome`` (one line naming the folder) when ``root`` may not be used as a home:
    for writing, one not owned by this user; for anything, one its group or others can write in
    (``ledger.core.trust.untrusted``). Every entry point goes through it (``Home.resolve``), and
    every write that creates or finds a home (``make_root``)."""
    refused = untrusted(root, write=write)
    if refused is not None:
        raise refused


GITIGNORE: Final = "# ralph-ledger's home: local state (journals, ledger), not for git\n*\n"


def make_root(root: Path) -> None:
    """Create a home's root directory (mode 0700) where missing; one there already must be fit to
    write in (``check_home``: ``UnsafeHome`` otherwise). One this call creates gets a ``.gitignore``
    of ``*``, so that ``git add -A`` leaves the home out of the project."""
    try:
        os.mkdir(root, 0o700)
    except FileExistsError:
        check_home(root)
        return
    except FileNotFoundError:
        root.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(root, 0o700)
        except FileExistsError:
            check_home(root)
            return
    try:
        fd = os.open(root / ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:
        return  # (a home is of use without it)
    with os.fdopen(fd, "w") as f:
        f.write(GITIGNORE)


class Home(msgspec.Struct, frozen=True):
    """A ledger home: ``root`` holds ``journals/``, ``ledger.duckdb`` and ``tmp/``."""

    root: Path

    @classmethod
    def resolve(
        cls, home: str | os.PathLike[str] | None = None, *, write: bool = True, check: bool = True
    ) -> Home:
        """``home``, else ``$RALPH_HOME``, else :func:`default_home`, as an absolute path with ``~``
        expanded; checked (unless not ``check``) as fit to ``write`` in, else only to read
        (:func:`check_home`: ``UnsafeHome``)."""
        chosen = home if home is not None else os.environ.get("RALPH_HOME") or default_home()
        resolved = cls(Path(chosen).expanduser().absolute())
        if check:
            check_home(resolved.root, write=write)
        return resolved

    @property
    def journals(self) -> Path:
        """The journals directory, ``<root>/journals``."""
        return self.root / "journals"

    @property
    def database(self) -> Path:
        """The DuckDB ledger file, ``<root>/ledger.duckdb``."""
        return self.root / "ledger.duckdb"

    @property
    def tmp(self) -> Path:
        """Scratch directory for ingest, ``<root>/tmp``."""
        return self.root / "tmp"

    def journal_files(self) -> list[Path]:
        """The ``*.jsonl`` files in the journals directory, sorted by name ([] if none)."""
        return journals_in(self.journals)

    def ensure(self) -> None:
        """Create the root, journals and tmp directories (mode 0700) where missing."""
        make_root(self.root)
        for d in (self.journals, self.tmp):
            d.mkdir(exist_ok=True, mode=0o700)
