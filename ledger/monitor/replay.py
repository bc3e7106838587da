"""Play recorded journals back as if their loops were running now.

``replay`` copies the lines of recorded journals into a journals directory
(same file names), in the order of their timestamps across all files,
sleeping the recorded gap between two lines divided by ``speed`` (each gap
capped at ``max_gap_s``, so an hour-long pause does not stall a demo). A
watcher on that directory (``ralph-tui --replay``) sees exactly what it would
see from live loops: appends, one line at a time, and a torn last line where
the recording has one (written last, as a crash would leave it).

Lines are copied byte for byte (one ``os.write`` each, ``O_APPEND``), never
re-encoded, so the replayed journals equal the recordings.
"""

from __future__ import annotations

import heapq
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path

import msgspec


class _Stamp(msgspec.Struct):
    ts: datetime | None = None


_STAMP = msgspec.json.Decoder(_Stamp)


def _stamp(line: bytes) -> float | None:
    """The line's ``ts`` as a POSIX timestamp, or ``None`` when it has none (a torn or bad line)."""
    try:
        ts = _STAMP.decode(line).ts
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return ts.timestamp() if ts is not None else None


def _lines(path: Path) -> tuple[list[tuple[float, bytes]], bytes]:
    """A journal's complete lines with their timestamps (a line without one takes the previous
    line's), and its torn tail (``b""`` when it ends with a newline)."""
    complete, newline, tail = path.read_bytes().rpartition(b"\n")
    out: list[tuple[float, bytes]] = []
    last = 0.0
    for raw in complete.split(b"\n") if newline else []:
        ts = _stamp(raw)
        last = ts if ts is not None else last
        out.append((last, raw + b"\n"))
    return out, tail


def replay(
    files: Sequence[Path],
    journals: Path,
    *,
    speed: float = 1.0,
    max_gap_s: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
    stop: threading.Event | None = None,
    on_line: Callable[[float], None] | None = None,
) -> Iterator[int]:
    """Copy ``files`` into ``journals/`` line by line in timestamp order; yields the lines written
    so far after each line. ``speed`` 0 copies without sleeping; ``stop`` ends the replay early;
    ``on_line`` is told each line's recorded time (POSIX seconds) just before it is written."""
    if speed < 0:
        raise ValueError(f"speed must be >= 0, got {speed}")
    journals.mkdir(parents=True, exist_ok=True)
    merged: list[tuple[float, int, int, bytes]] = []
    tails: list[tuple[Path, bytes]] = []
    for index, path in enumerate(files):
        lines, tail = _lines(Path(path))
        merged += [(ts, index, n, raw) for n, (ts, raw) in enumerate(lines)]
        if tail:
            tails.append((Path(path), tail))
    heapq.heapify(merged)
    names = [Path(f).name for f in files]
    written = 0
    previous: float | None = None
    while merged:
        if stop is not None and stop.is_set():
            return
        ts, index, _, raw = heapq.heappop(merged)
        if previous is not None and speed > 0:
            gap = min(max(ts - previous, 0.0) / speed, max_gap_s)
            if gap > 0:
                sleep(gap)
        previous = ts
        if on_line is not None:
            on_line(ts)
        _append(journals / names[index], raw)
        written += 1
        yield written
    for path, tail in tails:
        _append(journals / path.name, tail)
        written += 1
        yield written


def _append(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
