"""The loop lock: one stop (or ``loop start``) at a time changes a project's loop files.

Every claim and every rewrite of ``.claude/ralph-loop.local.md`` and
``.claude/ralph-ledger.local.json`` happens while holding an exclusive ``flock`` on the ``.claude``
folder itself: no lock file is left behind, and the kernel releases it when its holder dies. It
binds ralph-ledger's own processes only, not the ``ralph-loop`` plugin's shell hook. Why, and what
it guarantees: docs/reliability.md#the-loop-lock-one-claimant-no-lost-increments.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from ledger.core.errors import operation

LOCK_WAIT: Final = 30.0
"""Seconds a stop waits for the lock before it gives up and allows the stop (under Claude Code's
default hook timeout of 60 s: a stop that waited longer would be killed without a word)."""


class LockBusy(OSError):
    """The loop lock stayed held for longer than a stop may wait; one line naming the folder."""


@contextmanager
def loop_lock(folder: Path, wait: float = LOCK_WAIT) -> Iterator[None]:
    """Hold the exclusive lock on ``folder`` (a project's ``.claude``, created if missing) for the
    block; ``LockBusy`` after ``wait`` seconds of waiting."""
    with operation(f"locking {folder}"):
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        deadline = time.monotonic() + wait
        pause = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockBusy(
                        f"{folder}: another ralph-ledger process has held the loop lock for over {wait:g} s"
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.02)
        yield
    finally:
        os.close(fd)  # closing releases the lock
