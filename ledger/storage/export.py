"""Export a ledger's events into a hive-partitioned Parquet dataset that many homes share.

A home writes only its own ``events/source=NAME`` folder (one ``day=YYYY-MM-DD/part-0.parquet`` per
UTC day, its manifest ``_export.json``, its prices), so exports of several homes merge; re-exporting
writes only the day partitions whose events changed, each replaced atomically
(``ledger.storage.partitions``), and the views in each engine's SQL under ``views/``. The layout,
what is written when, and what is atomic: docs/fleet.md.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from ledger.core.atomic import sweep_folder, temp_name
from ledger.core.errors import LedgerError, error_reason
from ledger.storage import partitions
from ledger.storage.database import Ledger
from ledger.storage.dialects import DIALECTS, PRICES, PRICES_DIR, dataset_tables, ddl
from ledger.storage.sql import install_order

SOURCE_RE: Final = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")
MANIFEST: Final = "_export.json"
STAGING: Final = ".staging"
VIEW_NAMES: Final = r"[0-9][0-9]-[^/]+\.sql"
"""The view files an export writes (two digits, a dash, the view, .sql), as a regular expression."""
STALE_S: Final = 60.0
"""Seconds after which a temp file of a dead pid is an export's leftover: the dataset may be shared
with other machines, where that pid may be a live export of theirs."""


@dataclass(frozen=True, slots=True)
class ExportReport:
    """What one export did: ``folder`` (``DEST/events/source=NAME``) holds ``events`` rows of
    ``sessions``; the export wrote the day partitions ``written`` (``YYYY-MM-DD``), removed those of
    ``removed`` and wrote the prices file if ``prices``.

    ``shared`` lists (session id, other source) for each of this home's sessions that another
    source of the dataset holds too: the views would merge their events.
    """

    source: str
    folder: Path
    events: int
    sessions: int
    shared: tuple[tuple[str, str], ...]
    written: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    prices: bool = False

    @property
    def changed(self) -> bool:
        """Whether the export wrote or removed anything in ``folder``."""
        return bool(self.written or self.removed or self.prices)


def default_source() -> str:
    """This machine's host name, the default ``source`` of an export."""
    return socket.gethostname() or "localhost"


def check_source(name: str) -> str:
    """``name`` if it can name a ``source=NAME`` folder, else ``LedgerError`` saying what is expected."""
    if not SOURCE_RE.fullmatch(name):
        raise LedgerError(
            f"source name {name!r}: expected 1-128 letters, digits, '.', '_' or '-', not starting with '.'"
        )
    return name


def views_bundle(dialect: str = "duckdb") -> tuple[tuple[str, str], ...]:
    """(file name, SQL) of ``00-events.sql``, ``00-model_prices.sql`` and every view and detector,
    in install order, in ``dialect`` (one of ``DIALECTS``).

    Each view's or detector's file holds one statement, generated from the ``ledger/storage/sql`` file of the
    same name (the ``00-*.sql`` files of Spark and Trino hold two: a table, then its view): run them
    in name order in that engine to get the ledger's views over an exported dataset.
    """
    events, prices = dataset_tables(dialect)
    files = [("00-events.sql", events), ("00-model_prices.sql", prices)]
    for i, d in enumerate(install_order(), start=1):
        folder = "views" if d.kind == "view" else "detectors"
        head = f"-- Generated from ledger/storage/sql/{folder}/{d.name}.sql by ralph-ledger; do not edit.\n"
        if d.kind == "detector" and dialect == "duckdb":
            head += f"-- A table macro: SELECT * FROM {d.name}() (parameters: {d.params}).\n"
        elif d.kind == "detector":
            head += f"-- A view of the table macro at its defaults: SELECT * FROM {d.name} ({d.params}).\n"
        files.append((f"{i:02d}-{d.name}.sql", f"{head}{ddl(d, dialect)};\n"))
    return tuple(files)


def portable_sql(dialect: str = "duckdb") -> str:
    """The whole ``views_bundle`` of ``dialect`` as one script, files in order
    (``ralph-ledger schema --portable --dialect``)."""
    return "\n".join(text for _, text in views_bundle(dialect))


def export_parquet(
    ledger: Ledger, dest: Path, source: str | None = None, *, force: bool = False, full: bool = False
) -> ExportReport:
    """Bring ``dest/events/source=NAME/day=YYYY-MM-DD/part-0.parquet`` up to date with the ledger's
    events, writing only the days that changed since this home's last export there (every day
    with ``full``), and write the views to ``dest/views``.

    ``source`` defaults to the host name. Each partition is replaced atomically (``partitions``),
    under a lock per source; nothing changed, nothing is written. Raises ``LedgerError`` if ``dest``
    is not a directory, holds files of another layout, or its ``source=NAME`` folder was written
    by another home (unless ``force``: then it is rewritten whole).
    """
    name = check_source(default_source() if source is None else source)
    dest = dest.absolute()
    if dest.exists() and not dest.is_dir():
        raise LedgerError(
            f"export destination {dest} is not a directory, expected a directory for the dataset"
        )
    events_dir, staging = dest / "events", dest / STAGING
    try:
        for d in (dest, events_dir, staging):
            d.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LedgerError(
            f"cannot create export destination {exc.filename}: {error_reason(exc)}"
            " (expected a writable directory)"
        ) from None
    _check_layout(events_dir)
    folder = events_dir / f"source={name}"
    rows = ledger.con.execute("SELECT DISTINCT session_id FROM events ORDER BY 1").fetchall()
    sessions = [str(r[0]) for r in rows]
    manifest: dict[str, Any] = {
        "source": name,
        "host": socket.gethostname(),
        "home": str(ledger.home.root) if ledger.home else "",
        "format": partitions.FORMAT,
    }
    with _locked(staging / f"{name}.lock"):
        if not force:
            _check_owner(folder, manifest)
        old = _read_manifest(folder)
        if old is not None and (old.get("host"), old.get("home")) != (manifest["host"], manifest["home"]):
            old = None  # another home's folder, replaced on purpose (--force): rewritten whole
        snap = partitions.snapshot(ledger.con)
        today = datetime.now(UTC).date().isoformat()
        todo = partitions.plan(folder, old, snap, full=full, today=today, prices=folder / PRICES)
        events = sum(s.events for s in snap.days.values())
        if todo.changed:
            manifest |= {"columns": snap.columns, "prices": snap.prices, "events": events}
            _write_partitions(ledger, todo, folder, staging, name, old, manifest | {"sessions": sessions})
        copy = dest / PRICES_DIR / folder.name
        if todo.prices or not (copy / "part-0.parquet").exists():
            _write_prices_copy(ledger, copy)
    _write_views(dest / "views")
    shared = _shared_sessions(events_dir, name, set(sessions))
    return ExportReport(name, folder, events, len(sessions), shared, todo.write, todo.remove, todo.prices)


def _write_partitions(
    ledger: Ledger,
    todo: partitions.Plan,
    folder: Path,
    staging: Path,
    name: str,
    old: dict[str, Any] | None,
    manifest: dict[str, Any],
) -> None:
    """Carry out ``todo`` in ``folder`` (the caller holds the source's lock), then write its manifest.

    Before anything is replaced, the manifest stops vouching for the days about to change, so an
    export killed half-way leaves a folder whose next export writes those days again.
    """
    for leftover in staging.glob(f"{name}~*"):  # of an export of this source that was killed
        shutil.rmtree(leftover, ignore_errors=True)
    stage = Path(tempfile.mkdtemp(prefix=f"{name}~", dir=staging))
    try:
        changing = {*todo.write, *todo.remove}
        kept = {d: r for d, r in partitions.recorded_days(old).items() if d not in changing}
        vouching = manifest | {"exported_at": _now(), "days": kept, "prices": ""}
        if folder.exists():
            _put_manifest(folder, stage, vouching)
        else:  # a new folder appears with its manifest: never one this home would refuse
            fresh = stage / folder.name
            fresh.mkdir()
            _put_manifest(fresh, stage, vouching)
            os.rename(fresh, folder)
        sizes = partitions.write_days(ledger.con, todo, stage, folder)
        partitions.remove_days(folder, todo.remove)
        if todo.prices:
            partitions.write_prices(ledger.con, stage, folder / PRICES)
        days = partitions.day_records(todo, sizes, old)
        _put_manifest(folder, stage, manifest | {"exported_at": _now(), "days": days})
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _put_manifest(folder: Path, stage: Path, manifest: dict[str, Any]) -> None:
    """Write ``folder/_export.json`` atomically (through ``stage``)."""
    staged = stage / MANIFEST
    staged.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    os.replace(staged, folder / MANIFEST)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _check_layout(events_dir: Path) -> None:
    """Refuse a dataset holding anything but ``source=NAME`` folders (e.g. an older day-only layout)."""
    for entry in sorted(events_dir.iterdir()):
        if entry.name.startswith((".", "_")):
            continue
        if not (entry.is_dir() and entry.name.startswith("source=")):
            raise LedgerError(
                f"export destination holds {entry}, expected only source=NAME folders in {events_dir} "
                "(an older ralph-ledger wrote day=... folders there: move them away)"
            )


def _read_manifest(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _check_owner(folder: Path, manifest: dict[str, Any]) -> None:
    """Refuse to replace a source folder that another home (or another tool) wrote."""
    if not folder.exists():
        return
    old = _read_manifest(folder)
    if old is None:
        raise LedgerError(
            f"export: {folder} has no readable {MANIFEST}, expected the folder of an earlier export "
            "of this home; pass --source NAME to export beside it, or --force to replace it"
        )
    if (old.get("host"), old.get("home")) != (manifest["host"], manifest["home"]):
        raise LedgerError(
            f"export: {folder} holds the export of {old.get('host')}:{old.get('home')}, not of "
            f"{manifest['host']}:{manifest['home']}; pass --source NAME to export beside it, "
            "or --force to replace it"
        )


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (one export per source at a time)."""
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _write_prices_copy(ledger: Ledger, folder: Path) -> None:
    """The prices of ``_model_prices.parquet`` again in ``DEST/model_prices/source=NAME/part-0.parquet``,
    replaced atomically: Spark and Trino skip files named ``_*``, and read a table from its own folder."""
    folder.mkdir(parents=True, exist_ok=True)
    sweep_folder(folder, r"part-0(?:\.parquet)?", older_than=STALE_S)  # an export's, killed
    tmp = folder / temp_name("part-0.parquet")
    target = str(tmp).replace("'", "''")
    ledger.con.execute(f"COPY (FROM model_prices ORDER BY model, above) TO '{target}' (FORMAT parquet)")
    os.replace(tmp, folder / "part-0.parquet")


def _write_views(views: Path) -> None:
    """Write ``views_bundle`` of each dialect into ``views/<dialect>``, and DuckDB's into ``views``
    itself too (where earlier releases wrote it): each file replaced atomically, stale ones removed."""
    if views.exists() and not views.is_dir():
        raise LedgerError(f"export destination holds {views}, expected a directory of .sql files")
    for folder, dialect in ((views, "duckdb"), *((views / d, d) for d in DIALECTS)):
        if folder.exists() and not folder.is_dir():
            raise LedgerError(f"export destination holds {folder}, expected a directory of .sql files")
        folder.mkdir(parents=True, exist_ok=True)
        sweep_folder(folder, VIEW_NAMES, older_than=STALE_S)  # of an export that was killed
        bundle = views_bundle(dialect)
        for name, text in bundle:
            tmp = folder / temp_name(name)
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, folder / name)
        keep = {name for name, _ in bundle}
        for old in folder.glob("[0-9][0-9]-*.sql"):
            if old.name not in keep:
                old.unlink(missing_ok=True)


def _shared_sessions(events_dir: Path, name: str, sessions: set[str]) -> tuple[tuple[str, str], ...]:
    """(session id, other source) for this home's sessions that other sources' manifests list too."""
    out: list[tuple[str, str]] = []
    for folder in sorted(events_dir.glob("source=*")):
        other = folder.name.partition("=")[2]
        manifest = _read_manifest(folder) if other != name else None
        if manifest is None:
            continue
        listed = manifest.get("sessions")
        if isinstance(listed, list):
            out += [(sid, other) for sid in sorted(sessions.intersection(map(str, listed)))]
    return tuple(sorted(out))
