"""Play recorded journals back as if their loops were running now.

``replay`` copies the lines of recorded journals into a journals directory in the order of their
timestamps, sleeping the recorded gaps divided by ``speed``, so a watcher sees what it would see from
live loops; by default the recordings are aligned to start together (``sequential=True`` keeps the
recorded times). ``ReplayClock`` is a replay's clock. The rules: docs/design/monitor.md#replay.
"""

from __future__ import annotations

import heapq
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final, get_args

import msgspec

from ledger.events import EVENT_TYPES
from ledger.storage import chain
from ledger.storage.journal import utc_now


class _Stamp(msgspec.Struct):
    ts: datetime | None = None


_STAMP = msgspec.json.Decoder(_Stamp)

TIME_FIELDS: Final[frozenset[str]] = frozenset(
    f.encode_name
    for t in EVENT_TYPES
    for f in msgspec.structs.fields(t)
    if f.type is datetime or datetime in get_args(f.type)
)
"""The events' datetime fields: what aligning a recording shifts."""


def _stamp(line: bytes) -> float | None:
    """The line's ``ts`` as a POSIX timestamp, or ``None`` when it has none (a torn or bad line)."""
    try:
        ts = _STAMP.decode(line).ts
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return ts.timestamp() if ts is not None else None


def _lines(path: Path) -> tuple[float | None, list[tuple[float, bytes]], bytes]:
    """A journal's first timestamp (``None`` when no line has one), its complete lines with their
    timestamps (a line without one takes the previous line's, lines before the first stamp take it,
    and 0 in a journal without any), and its torn tail (``b""`` when it ends with a newline)."""
    complete, newline, tail = path.read_bytes().rpartition(b"\n")
    raws = complete.split(b"\n") if newline else []
    stamps = [_stamp(raw) for raw in raws]
    first = next((ts for ts in stamps if ts is not None), None)
    last = first if first is not None else 0.0
    out: list[tuple[float, bytes]] = []
    for raw, ts in zip(raws, stamps, strict=True):
        last = ts if ts is not None else last
        out.append((last, raw + b"\n"))
    return first, out, tail


def shifted(line: bytes, by: float, link: str | None = None) -> bytes:
    """``line`` with every datetime field of its event moved by ``by`` seconds, the rest unchanged
    (key order, numbers and strings as msgspec wrote them); a line that is not a JSON object, or
    ``by`` 0, is returned as it is. A linked line moved (its ``prev`` set) links again, to ``link``
    (the line written before it; ``None``: it is the first), so the copy's hash chain holds
    (docs/design/hash-chain.md)."""
    if not by:
        return line
    try:
        obj = msgspec.json.decode(line)
    except msgspec.DecodeError:
        return line
    if not isinstance(obj, dict):
        return line
    moved = False
    for key in TIME_FIELDS & obj.keys():
        try:
            value = msgspec.convert(obj[key], datetime)
        except msgspec.ValidationError:
            continue
        obj[key] = value + timedelta(seconds=by)
        moved = True
    if moved and obj.get("prev"):
        obj["prev"] = chain.START if link is None else link
    return msgspec.json.encode(obj) + b"\n" if moved else line


def replay(
    files: Sequence[Path],
    journals: Path,
    *,
    speed: float = 1.0,
    max_gap_s: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
    stop: threading.Event | None = None,
    on_line: Callable[[float], None] | None = None,
    sequential: bool = False,
) -> Iterator[int]:
    """Copy ``files`` into ``journals/`` line by line in (replayed) timestamp order; yields the
    lines written so far after each line. The recordings start together (each shifted to the
    earliest one's start) unless ``sequential``, which keeps their recorded times. ``speed`` 0
    copies without sleeping; ``stop`` ends the replay early; ``on_line`` is told each line's
    replayed time (POSIX seconds) just before it is written."""
    if speed < 0:
        raise ValueError(f"speed must be >= 0, got {speed}")
    journals.mkdir(parents=True, exist_ok=True)
    recordings = [_lines(Path(path)) for path in files]
    start = min((first for first, _, _ in recordings if first is not None), default=0.0)
    merged: list[tuple[float, int, int, bytes]] = []
    shifts: list[float] = []
    for index, (first, lines, _) in enumerate(recordings):
        shift = 0.0 if sequential or first is None else start - first
        shifts.append(shift)
        at = start if first is None and not sequential else 0.0  # no stamp at all: at the start
        merged += [(ts + shift + at, index, n, raw) for n, (ts, raw) in enumerate(lines)]
    heapq.heapify(merged)
    names = [Path(f).name for f in files]
    links: list[str | None] = [None] * len(files)  # the link to each copy's last line
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
        line = shifted(raw, shifts[index], links[index])
        links[index] = chain.link_of(line[:-1])
        _append(journals / names[index], line)
        written += 1
        yield written
    for index, (_, _, tail) in enumerate(recordings):
        if tail:
            _append(journals / names[index], tail)
            written += 1
            yield written


def _append(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


class ReplayClock:
    """A replay's clock, for a ``Monitor``'s ``now``: the replayed time of the line written last
    (``mark``), running on from there at the wall clock's pace, standing still between ``pause``
    and ``resume``; before the first line, the wall clock. Thread-safe (the replay marks, a UI reads)."""

    def __init__(
        self, *, monotonic: Callable[[], float] = time.monotonic, wall: Callable[[], datetime] = utc_now
    ) -> None:
        self._monotonic = monotonic
        self._wall = wall
        self._lock = threading.Lock()
        self._marked: tuple[float, float] | None = None  # (replayed time, monotonic) of the last line
        self._paused_at: float | None = None

    def mark(self, replayed: float) -> None:
        """A line replayed at ``replayed`` (POSIX seconds) is being written now."""
        with self._lock:
            self._marked = (replayed, self._paused_at if self._paused_at is not None else self._monotonic())

    def pause(self) -> None:
        """Stop the clock (until ``resume``)."""
        with self._lock:
            if self._paused_at is None:
                self._paused_at = self._monotonic()

    def resume(self) -> None:
        """Run the clock on from where ``pause`` stopped it."""
        with self._lock:
            if self._paused_at is None:
                return
            if self._marked is not None:
                replayed, at = self._marked
                self._marked = (replayed, at + self._monotonic() - self._paused_at)
            self._paused_at = None

    def __call__(self) -> datetime:
        """The replay's time now, in UTC."""
        with self._lock:
            marked, paused_at = self._marked, self._paused_at
        if marked is None:
            return self._wall()
        replayed, at = marked
        now = paused_at if paused_at is not None else self._monotonic()
        return datetime.fromtimestamp(replayed + now - at, UTC)
