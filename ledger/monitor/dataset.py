"""A read-only ``Monitor`` of an exported Parquet dataset (``ralph-ledger export --parquet DIR``):
every ``events/source=NAME`` folder, loaded into an in-memory ledger with a ``source`` column and
read again whenever its files change (``refresh`` compares each folder's files: names, inodes,
sizes and times, so a partition replaced by rename is noticed). The views and detectors are the
ledger's own, so every answer is the one a local ``Monitor`` gives; steering is not possible
(``steering_hint`` says where the session's own home is).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Final

import duckdb
import msgspec

from ledger.core.errors import LedgerError, one_line
from ledger.monitor.answers import Progress, SessionRow, Update
from ledger.monitor.live import Monitor
from ledger.storage.database import Ledger
from ledger.storage.dialects import PRICES
from ledger.storage.export import MANIFEST
from ledger.storage.ingest import BATCH_BYTES
from ledger.storage.journal import utc_now
from ledger.storage.query import lock_down

SOURCE_PREFIX: Final = "source="
FIRST_BATCH: Final = 200
"""The first source's most recent sessions, read before its others (the first screen)."""
Signature = tuple[tuple[str, int, int, int], ...]
"""A source folder's files: (path relative to it, inode, size, mtime in ns), sorted."""


def dataset_sources(root: Path) -> dict[str, Path]:
    """The ``source=NAME`` folders of the dataset at ``root``, by name; ``LedgerError`` (one line)
    if ``root`` is not a dataset or holds no source yet."""
    hint = f"expected a dataset written by ralph-ledger export --parquet {root}"
    if not root.is_dir():
        raise LedgerError(f"{root}: no such directory; {hint}")
    events = root / "events"
    if not events.is_dir():
        raise LedgerError(f"{root}: not an exported dataset (no events/ folder); {hint}")
    found = {
        p.name.removeprefix(SOURCE_PREFIX): p
        for p in events.iterdir()
        if p.name.startswith(SOURCE_PREFIX) and p.is_dir()
    }
    if not found:
        raise LedgerError(f"{root}: an empty dataset (no events/source=NAME folder); {hint}")
    return dict(sorted(found.items()))


def signature(folder: Path) -> Signature:
    """What ``folder``'s files are now (its day partitions and their Parquet files, the manifest and
    the prices): changes when any is written, replaced or removed."""
    out: list[tuple[str, int, int, int]] = []
    try:
        entries = list(os.scandir(folder))
        for entry in entries:
            st = entry.stat(follow_symlinks=False)
            out.append((entry.name, st.st_ino, st.st_size, st.st_mtime_ns))
            if entry.is_dir(follow_symlinks=False):
                for sub in os.scandir(entry.path):
                    s = sub.stat(follow_symlinks=False)
                    out.append((f"{entry.name}/{sub.name}", s.st_ino, s.st_size, s.st_mtime_ns))
    except OSError:  # being replaced: read again at the next look
        return ()
    return tuple(sorted(out))


class DatasetMonitor(Monitor):
    """A ``Monitor`` over an exported dataset's every source (see the module docstring)."""

    def __init__(self, root: Path, *, now: Callable[[], datetime] = utc_now) -> None:
        self.root = Path(root).expanduser().absolute()
        dataset_sources(self.root)  # one line if it is not a dataset
        self.now = now
        self._lock = threading.RLock()
        self._query_lock = threading.Lock()
        self._query_con: duckdb.DuckDBPyConnection | None = None
        self._dirs: list[Path] = []
        self._files: list[Path] = []
        self.homes: list[Path] = []
        self.ledger = Ledger.memory(None, prices=False)
        self._own_scratch = None
        self.allowed = [self.root / "events"]
        """DuckDB reads files only in the dataset's ``events/`` (``Monitor._lock_down``)."""
        lock_down(self.ledger.con, self.allowed, final=False)
        self.ledger.con.execute("ALTER TABLE events ADD COLUMN source VARCHAR")
        self._columns = {str(r[0]) for r in self.ledger.con.execute("DESCRIBE events").fetchall()}
        self._seen: dict[str, Signature] = {}
        self._manifests: dict[str, dict[str, object]] = {}
        self._errors: list[str] = []
        self._missing: set[str] = set()
        self._high: dict[str, int] = {}
        """The last seq seen of each session: alerts are raised only beyond it, once."""

    # -- what to read ----------------------------------------------------------
    @property
    def watch_paths(self) -> list[Path]:
        """The dataset's ``events/`` folder."""
        return [self.root / "events"]

    def watch_roots(self) -> list[Path]:
        """The dataset's ``events/`` folder."""
        return self.watch_paths

    def journal_files(self) -> list[Path]:
        """None: a dataset holds Parquet files."""
        return []

    def pending(self) -> Progress:
        """The sources to load and the bytes of their Parquet files."""
        sources = dataset_sources(self.root)
        total = sum(_parquet_bytes(f) for f in sources.values())
        return Progress(files_done=0, files_total=len(sources), bytes_done=0, bytes_total=total, events=0)

    def load(self, batch_bytes: int = BATCH_BYTES) -> Iterator[Progress]:
        """Load every source, one at a time, the latest exported first, yielding after each
        (``sessions``: those it holds)."""
        sources = dataset_sources(self.root)
        total = sum(_parquet_bytes(f) for f in sources.values())
        done = events = 0
        latest = sorted(sources.items(), key=lambda item: (-_mtime(item[1] / MANIFEST), item[0]))
        for i, (name, folder) in enumerate(latest, 1):
            changed, _, n = self._load_source(name, folder)
            done += _parquet_bytes(folder)
            events += n
            batches = [sorted(changed)]
            if i == 1 and len(changed) > FIRST_BATCH:  # a first screen sooner: its latest sessions
                with self._lock:
                    rows = self.ledger.con.execute(
                        "SELECT session_id FROM events WHERE source = ? GROUP BY 1"
                        " ORDER BY arg_max(ts, seq) DESC, session_id LIMIT ?",  # as sessions.updated_at
                        [name, FIRST_BATCH],
                    ).fetchall()
                first = {str(r[0]) for r in rows}
                batches = [sorted(first), sorted(changed - first)]
            for ids in batches:
                yield Progress(
                    files_done=i,
                    files_total=len(sources),
                    bytes_done=done,
                    bytes_total=total,
                    events=events,
                    sessions=ids,
                )

    def bad_lines(self) -> list[str]:
        """The sources that could not be read (damaged partitions), one line each."""
        with self._lock:
            errors, self._errors = self._errors, []
        return errors

    def refresh(self, changed: Iterable[Path] | None = None) -> Update:
        """Load again every source whose files changed, drop the sources removed (missing at two
        looks in a row: a source is missing for a moment while an export swaps it in)."""
        try:
            sources = dataset_sources(self.root)
        except LedgerError as exc:
            sources = {}
            if not self.root.is_dir() or not (self.root / "events").is_dir():
                return Update(sessions=[], alerts=[], events=0, bad_lines=[str(exc)], reset=[])
        ids: set[str] = set()
        alerts = []
        events = 0
        missing, self._missing = self._missing, set(self._seen) - set(sources)
        for name in sorted(missing & self._missing):  # gone at two looks: not in the middle of a swap
            with self._lock:
                before = self._maxima(name)
                self.ledger.con.execute("DELETE FROM events WHERE source = ?", [name])
                self._seen.pop(name, None)
            ids |= set(before)
        for name, folder in sources.items():
            if self._seen.get(name) == signature(folder) and name in self._seen:
                continue
            changed_ids, since, n = self._load_source(name, folder)
            ids |= changed_ids
            events += n
            with self._lock:
                alerts += self._alerts({s: since.get(s, 0) for s in sorted(changed_ids)})
        gone = sorted(ids - {r.session_id for r in self.sessions(sorted(ids))}) if ids else []
        return Update(
            sessions=sorted(ids),
            alerts=alerts,
            events=events,
            bad_lines=self.bad_lines(),
            reset=[f"{self.root} (sessions no longer exported: {', '.join(gone)})"] if gone else [],
        )

    def _maxima(self, name: str) -> dict[str, tuple[int, int]]:
        rows = self.ledger.con.execute(
            "SELECT session_id, max(seq), count(*) FROM events WHERE source = ? GROUP BY 1", [name]
        ).fetchall()
        return {str(r[0]): (int(r[1]), int(r[2])) for r in rows}

    def _load_source(self, name: str, folder: Path) -> tuple[set[str], dict[str, int], int]:
        """Replace ``name``'s rows by what ``folder`` holds now: (sessions changed, the last seq seen
        of each before, events read). A folder that cannot be read keeps its rows and is reported once."""
        sig = signature(folder)
        files = sorted(str(p) for p in folder.glob("*/*.parquet"))
        con = self.ledger.con
        with self._lock:
            before = self._maxima(name)
            try:
                con.execute("BEGIN TRANSACTION")
                con.execute("DELETE FROM events WHERE source = ?", [name])
                n = 0
                if files:
                    scan = f"read_parquet({files!r}, hive_partitioning = false, union_by_name = true)"
                    have = {str(r[0]) for r in con.execute(f"DESCRIBE SELECT * FROM {scan}").fetchall()}
                    cols = ", ".join(f'"{c}"' for c in sorted((have & self._columns) - {"source"}))
                    con.execute(f"INSERT INTO events ({cols}, source) SELECT {cols}, ? FROM {scan}", [name])
                    row = con.execute("SELECT count(*) FROM events WHERE source = ?", [name]).fetchone()
                    n = int(row[0]) if row else 0
                prices = folder / PRICES
                if prices.exists():
                    con.execute(
                        "INSERT INTO model_prices BY NAME SELECT *"
                        " FROM read_parquet(?, hive_partitioning = false)"
                        " p WHERE NOT EXISTS (SELECT 1 FROM model_prices m"
                        " WHERE m.model = p.model AND m.above = p.above)",
                        [str(prices)],
                    )
                con.execute("COMMIT")
            except (duckdb.Error, OSError) as exc:
                con.execute("ROLLBACK")
                if signature(folder) == sig:  # damaged, not being replaced: say so once
                    self._seen[name] = sig
                    self._errors.append(f"{folder}: cannot read this source's Parquet files: {one_line(exc)}")
                return set(), {}, 0
            self._seen[name] = sig
            self._manifests[name] = _manifest(folder)
            after = self._maxima(name)
        changed = {s for s in {*before, *after} if before.get(s) != after.get(s)}
        since = {s: self._high.get(s, 0) for s in changed}
        for s, (last, _) in after.items():
            self._high[s] = max(self._high.get(s, 0), last)
        return changed, since, n

    # -- answers -----------------------------------------------------------------
    def sessions(self, ids: Sequence[str] | None = None) -> list[SessionRow]:
        """Sessions (all, or these), most recently active first, each with its ``source``."""
        rows = super().sessions(ids)
        if not rows:
            return rows
        with self._lock:
            found = self.ledger.con.execute(
                "SELECT session_id, string_agg(DISTINCT source, ', ' ORDER BY source) FROM events "
                f"WHERE session_id IN ({', '.join('?' * len(rows))}) GROUP BY 1",
                [r.session_id for r in rows],
            ).fetchall()
        by_id = {str(r[0]): str(r[1] or "") for r in found}
        return [msgspec.structs.replace(r, source=by_id.get(r.session_id, "")) for r in rows]

    def steering_hint(self, session_id: str, action: str = "stop") -> str:
        """One line: this view is read-only, and where the session's own home is (from the manifest
        its source's export wrote), to ``action`` it there (``pause``, ``steer``, ``stop`` ...)."""
        with self._lock:
            row = self.ledger.con.execute(
                "SELECT min(source) FROM events WHERE session_id = ?", [session_id]
            ).fetchone()
        source = str(row[0]) if row and row[0] else ""
        manifest = self._manifests.get(source, {})
        host, home = str(manifest.get("host") or "?"), str(manifest.get("home") or "")
        guidance = ' "GUIDANCE"' if action in ("steer", "unblock") else ""
        command = f"ralph-ledger --home {shlex.quote(home)} {action} {shlex.quote(session_id)}{guidance}"
        where = f"on {host}: {command}" if home else f"on {host}"
        return f"read-only dataset: steering needs the session's own home ({where})"


def _manifest(folder: Path) -> dict[str, object]:
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _parquet_bytes(folder: Path) -> int:
    total = 0
    for p in folder.glob("*/*.parquet"):
        with contextlib.suppress(OSError):
            total += p.stat().st_size
    return total
