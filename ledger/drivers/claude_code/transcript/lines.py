"""Reading a transcript's complete lines safely: forwards from an offset, backwards from the end in
blocks that double, skipping (without holding) lines over the size limit; only regular files.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from typing import BinaryIO, Final

MAX_LINE_BYTES: Final = 8 * 1024 * 1024
"""Lines longer than this (newline excluded) are skipped without decoding and counted as bad."""

BACK_BLOCK: Final = 64 * 1024
"""First block read backwards by :func:`find_last_text`; each further block doubles, up to 4 MB."""

MAX_BACK_BLOCK: Final = 4 * 1024 * 1024

DEFAULT_MAX_BYTES: Final = 32 * 1024 * 1024
"""How far back :func:`last_text` reads at most, by default."""

_SKIP_CHUNK: Final = 1024 * 1024  # read size while skipping the rest of an enormous line

READ_BUFFER: Final = 256 * 1024

PathArg = str | os.PathLike[str]


def _skip_rest_of_line(f: BinaryIO) -> int | None:
    """Read to the end of the current line; its length, or ``None`` if the file ends first."""
    skipped = 0
    while True:
        chunk = f.readline(_SKIP_CHUNK)
        if not chunk:
            return None
        skipped += len(chunk)
        if chunk.endswith(b"\n"):
            return skipped


def lines_forward(f: BinaryIO, cap: int) -> Iterator[tuple[bytes | None, int]]:
    """Yield ``(line, size)`` for each complete line from the current position.

    ``line`` is ``None`` for a line longer than ``cap`` (which is never held whole in memory);
    ``size`` counts the newline. A partial last line is not yielded.
    """
    while True:
        raw = f.readline(cap + 1)
        if raw.endswith(b"\n"):
            yield raw, len(raw)
        elif len(raw) <= cap:  # end of file: nothing left, or a partial last line
            return
        else:
            rest = _skip_rest_of_line(f)
            if rest is None:
                return
            yield None, len(raw) + rest


def open_regular(path: PathArg, buffering: int) -> BinaryIO:
    """``path`` opened for reading; ``OSError`` for anything but a regular file, without blocking on
    a FIFO."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fsdecode(path))
        os.set_blocking(fd, True)
        return open(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


class BackwardLines:
    """Complete lines of a file, last first, read in blocks that double in size."""

    def __init__(self, f: BinaryIO, max_bytes: int, cap: int, *, end: int | None = None) -> None:
        self.f = f
        self.max_bytes = max_bytes
        self.cap = cap
        self.end = end  # read the lines before this offset (None: the end of the file)
        self.bytes_read = 0
        self.exhausted = False

    def _ends_with_partial_line(self, size: int) -> bool:
        self.f.seek(size - 1)
        self.bytes_read += 1
        return self.f.read(1) != b"\n"

    def _read(self, pos: int, n: int) -> bytes:
        self.f.seek(pos)
        chunk = self.f.read(n)
        self.bytes_read += len(chunk)
        return chunk

    def __iter__(self) -> Iterator[bytes | None]:
        """Yield each complete line without its newline (``None`` for one longer than ``cap``)."""
        pos = self.f.seek(0, os.SEEK_END) if self.end is None else self.end
        if pos == 0:
            return
        skipping = self._ends_with_partial_line(pos)  # the partial last line is not read
        tail = b""  # the start of the line that ends where the previous block began, newline included
        block = BACK_BLOCK
        while pos > 0:
            budget = self.max_bytes - self.bytes_read
            if budget <= 0:
                self.exhausted = True
                return
            n = min(block, pos, budget)
            block = min(block * 2, MAX_BACK_BLOCK)
            pos -= n
            chunk = self._read(pos, n)
            if len(chunk) != n:  # the file shrank under us
                return
            if skipping:
                cut = chunk.rfind(b"\n")
                if cut < 0:
                    continue
                chunk, skipping = chunk[: cut + 1], False
            parts = (chunk + tail).split(b"\n")  # always ends with b"" after the last newline
            for raw in reversed(parts[1:-1]):
                yield raw if len(raw) <= self.cap else None
            head = parts[0]
            if pos == 0:
                yield head if len(head) <= self.cap else None
            elif len(head) > self.cap:
                yield None
                skipping, tail = True, b""
            else:
                tail = head + b"\n"
