"""``fsync`` of a file written without one, after the fact (standard library only: the Stop hook
syncs the journal it or the warm worker appended to once the answer is out)."""

from __future__ import annotations

import contextlib
import os


def sync_file(path: str | os.PathLike[str]) -> None:
    """fsync ``path`` (appends made with ``fsync=False``), best effort: a file that cannot be synced
    now keeps what the kernel holds."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # (a journal: never a link or a FIFO)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
