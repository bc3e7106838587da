"""Atomic rewrites of small files (the loop state file, the loop file, agent settings), and the
removal of the temp files that a process killed mid-rewrite leaves behind.

A rewrite writes ``.<name>.ralph-tmp.<pid>.<ns>`` beside the file, fsyncs it and renames it over
the file. A kill before the rename leaves that temp file; nothing else would ever remove it. So
every rewrite of a file first removes the temp files of that same file whose process is gone (the
pid in the name is no longer alive). A live process's temp file is its rewrite in progress and is
kept (a pid in use again keeps its file until that process ends); files that do not have our
pattern are never touched. The pattern of earlier versions (``.<name>.<pid>[.<ns>].tmp``) is
recognised too, so files left by them are removed as well.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from pathlib import Path
from typing import Final

from ledger.core.errors import operation

TMP_MARK: Final = "ralph-tmp"


def temp_name(name: str, pid: int | None = None) -> str:
    """The temp file name of one rewrite of the file ``name`` by process ``pid`` (ours by default)."""
    return f".{name}.{TMP_MARK}.{os.getpid() if pid is None else pid}.{time.monotonic_ns()}"


def _temp_pattern(names: str) -> re.Pattern[str]:
    """Matches the temp files of rewrites of the files whose names match the regular expression
    ``names`` (this version's and earlier ones'); group ``pid`` is the writer's pid."""
    return re.compile(rf"\.(?:{names})\.(?:{TMP_MARK}\.(?P<pid>\d+)\.\d+|(?P<old>\d+)(?:\.\d+)?\.tmp)")


def pid_gone(pid: int) -> bool:
    """Whether no process ``pid`` exists (another user's live process counts as existing; so does
    this process)."""
    if pid <= 0:
        return False
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return False


def sweep_temps(path: Path) -> list[Path]:
    """Remove the temp files of rewrites of ``path`` whose writer is gone; the ones removed."""
    return sweep_folder(path.parent, re.escape(path.name))


def sweep_folder(folder: Path, names: str, *, older_than: float = 0.0) -> list[Path]:
    """Remove the temp files in ``folder`` of rewrites of the files whose names match the regular
    expression ``names``, whose writer is gone (and, with ``older_than``, last written over that many
    seconds ago: a folder that processes of other machines write too); the ones removed."""
    pattern = _temp_pattern(names)
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    removed: list[Path] = []
    now = time.time()
    for entry in entries:
        m = pattern.fullmatch(entry.name)
        if m is None or not pid_gone(int(m["pid"] or m["old"])):
            continue
        if older_than:
            try:
                if now - entry.stat(follow_symlinks=False).st_mtime < older_than:
                    continue
            except OSError:
                continue
        with contextlib.suppress(OSError):
            os.unlink(folder / entry.name)
            removed.append(folder / entry.name)
    return removed


def atomic_write(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace ``path`` by ``data`` at once (readers see the old file or the new one, whole), via a
    temp file beside it; the mode is ``mode``, else the file's own, else 0644. Creates the folder
    if needed, and first removes the temp files that killed rewrites of ``path`` left behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_temps(path)
    if mode is None:
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            mode = 0o644
    tmp = path.with_name(temp_name(path.name))
    with operation(f"writing {path}"):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.chmod(tmp, mode)
            try:
                os.replace(tmp, path)
            except OSError as exc:  # name the file being written, not the temp file beside it
                raise type(exc)(exc.errno, exc.strerror, str(path)) from None
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
