"""A session's journal read once: its events and its in-memory ledger, derived incrementally.

:func:`events_of` gives a journal's events and :func:`ledger_of` an in-memory DuckDB ledger over it,
each reading only what was appended since the last call in this process; both are derived and
rebuildable, never a second source of truth (a journal now shorter or whose first line changed is
read again). DuckDB is imported only by :func:`ledger_of`, so the drop-in Stop hook can use
:func:`events_of`. Why: docs/performance.md (The engine reads each event once).
"""

from __future__ import annotations

import contextlib
import os
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

import msgspec

from ledger import events as ev
from ledger.storage.journal import BadLine, Cursor, read_new

if TYPE_CHECKING:
    from ledger.core.home import Home
    from ledger.storage.database import Ledger

T = TypeVar("T")

KEEP: Final = 64
"""Journals whose events a process keeps (the least recently used go first)."""
KEEP_LEDGERS: Final = 8
"""Of those, the most recently used whose in-memory ledger it keeps (each is a DuckDB database)."""
PRICES = True
"""Whether the ledgers made here price the turns' models (``model_prices``). The Stop hook's
processes turn it off: genai-prices takes ~160 ms to import; the ``cost_budget`` guard, when on,
fills the prices itself (``ledger.loop.decide.facts``)."""


class Fold:
    """The events of one journal read so far, and where reading stands."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.cursor = Cursor()
        self.events: list[ev.AnyEvent] = []
        self.bad: list[BadLine] = []
        self.generation = 0  # bumped when the journal is read again from its start
        self.file: tuple[int, int] = (0, 0)  # (device, inode) of the file read so far
        self._ledger: tuple[int, Ledger] | None = None
        self._ingested = -1  # the cursor's offset when the ledger last ingested
        self._home: Home | None = None  # the home the ledger was made for (its scratch files)
        self._memo: dict[str, tuple[tuple[int, int], object]] = {}  # name -> (position, value)
        self._computes: dict[str, tuple[object, Callable[[], object]]] = {}  # name -> (ledger, compute)

    def refresh(self) -> Fold:
        """Read what was appended since the last refresh (everything again when the journal was
        truncated or replaced, or is gone: then no events)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self.cursor.offset or self.events or self.bad:
                self._reset()
            return self
        if (st.st_dev, st.st_ino) != self.file:  # another file now (replaced): read it whole
            if self.cursor.offset:
                self._reset()
            self.file = (st.st_dev, st.st_ino)
        read = read_new(self.path, self.cursor)
        if read.truncated:
            self._reset(keep_cursor=True)
        self.events.extend(read.events)
        self.bad.extend(read.bad)
        return self

    def _reset(self, *, keep_cursor: bool = False) -> None:
        if not keep_cursor:
            self.cursor = Cursor()
        self.events, self.bad = [], []
        self.generation += 1
        self._ledger = None

    def ledger(self, home: Home | None) -> Ledger:
        """An in-memory ledger holding this journal's events (ingesting only the new lines)."""
        from ledger.storage.database import Ledger

        self._home = home
        if self._ledger is None or self._ledger[0] != self.generation:
            self._ledger = (self.generation, Ledger.memory(home, prices=PRICES))
            self._ledger[1].ingest([self.path])
            # from here on it ingests a stop's few lines and answers one session's queries: on one
            # thread, DuckDB spends less on them than on sharing the work (~10% of a warm stop)
            self._ledger[1].con.execute("SET threads = 1")
        elif self._ingested != self.cursor.offset:  # nothing appended since: nothing to ingest
            self._ledger[1].ingest([self.path], live=True)
        self._ingested = self.cursor.offset
        return self._ledger[1]

    @contextlib.contextmanager
    def pending(self, home: Home | None, events: Sequence[ev.Event]) -> Iterator[Ledger]:
        """The ledger with ``events`` in it as if appended next (seqs after the last read), for the
        length of the ``with``: a step reads its guards' facts before its one append
        (docs/design/loop-step.md). They are rolled back after; nothing read meanwhile is kept."""
        ledger = self.ledger(home)
        if not events:
            yield ledger
            return
        last = self.events[-1].seq if self.events else 0
        numbered = [msgspec.structs.replace(e, seq=last + i) for i, e in enumerate(events, 1)]
        ledger.con.execute("BEGIN TRANSACTION")
        try:
            ledger.insert_events(numbered)
            yield ledger
        finally:
            ledger.con.execute("ROLLBACK")
            self._memo.clear()

    def memo(self, name: str, compute: Callable[[], T]) -> T:
        """``compute()``, kept until the journal moves on: the value computed at this position (the
        byte offset read so far, and the generation) is answered again while nothing was appended."""
        position = (self.generation, self.cursor.offset)
        kept = self._memo.get(name)
        if kept is not None and kept[0] == position:
            return kept[1]  # type: ignore[return-value]
        value = compute()
        self._memo[name] = (position, value)
        self._computes[name] = (self._ledger, compute)
        return value

    def kept(self, name: str) -> object | None:
        """The value :meth:`memo` holds for ``name`` at the position read now; None when it holds
        none there (never computed, or the journal moved on since)."""
        kept = self._memo.get(name)
        return kept[1] if kept is not None and kept[0] == (self.generation, self.cursor.offset) else None

    def rememo(self) -> None:
        """Compute again, at the position read now, each value :meth:`memo` was last asked for and
        no longer holds (a worker, between stops: the next stop finds it computed). A value whose
        computation fails, or whose ledger was made again since, is dropped."""
        position = (self.generation, self.cursor.offset)
        for name, (made, compute) in list(self._computes.items()):
            kept = self._memo.get(name)
            if kept is not None and kept[0] == position:
                continue
            if made is None or made is not self._ledger:
                del self._computes[name]
                continue
            try:
                self._memo[name] = (position, compute())
            except Exception:  # the next ask computes it on its own path, and says what failed
                del self._computes[name]


_FOLDS: OrderedDict[Path, Fold] = OrderedDict()


def fold(path: Path) -> Fold:
    """The refreshed :class:`Fold` of the journal at ``path`` (kept for the next call)."""
    key = path.absolute()
    found = _FOLDS.pop(key, None) or Fold(key)
    _FOLDS[key] = found
    while len(_FOLDS) > KEEP:
        _FOLDS.popitem(last=False)
    for i, kept in enumerate(reversed(_FOLDS.values())):
        if i >= KEEP_LEDGERS and kept._ledger is not None:
            kept._ledger[1].close()
            kept._ledger = None
    return found.refresh()


def catch_up() -> None:
    """Bring every kept ledger up to its journal, and its memos (:meth:`Fold.rememo`) (a worker,
    between stops: the next stop then ingests only what was appended after, and finds the values
    it asks for first computed)."""
    for kept in list(_FOLDS.values()):
        if kept._ledger is not None:
            kept.refresh().ledger(kept._home)
            kept.rememo()


def events_of(path: Path) -> list[ev.AnyEvent]:
    """Every event of the journal at ``path`` (none when there is no journal), read incrementally."""
    return fold(path).events


def ledger_of(path: Path, home: Home | None) -> Ledger:
    """An in-memory ledger over the journal at ``path``, up to date, ingesting only new lines."""
    return fold(path).ledger(home)


def forget(path: Path | None = None) -> None:
    """Drop the derived state of ``path`` (of every journal when None)."""
    if path is None:
        _FOLDS.clear()
    else:
        _FOLDS.pop(path.absolute(), None)


def only_errors(path: Path) -> bool:
    """Whether a journal holds only ``error_recorded`` and ``subagent_stopped`` events: a Stop hook
    that failed open before its loop could start (a bad ``ralph.toml``, say) leaves one, and the loop
    must start once mended; a sub-agent that ran before the loop's first stop leaves the other."""
    read = fold(path)
    return not read.bad and all(isinstance(e, ev.ErrorRecorded | ev.SubagentStopped) for e in read.events)
