"""Export the ledger's events as a Parquet dataset partitioned by day."""

from __future__ import annotations

from pathlib import Path

from ledger.errors import LedgerError
from ledger.store import Ledger


def export_parquet(ledger: Ledger, dest: Path) -> int:
    """Write ``dest/events/day=YYYY-MM-DD/*.parquet``; returns the event count.

    Any Parquet engine reads it back with hive partitioning; the view files in
    ``ledger/sql`` run unchanged over a view named ``events`` on top of it.
    """
    if dest.exists() and not dest.is_dir():
        raise LedgerError(f"export destination {dest} exists and is not a directory")
    target = (dest / "events").absolute()
    target.mkdir(parents=True, exist_ok=True)
    path = str(target).replace("'", "''")
    ledger.con.execute(
        f"COPY (SELECT *, CAST(ts AS DATE) AS day FROM events ORDER BY session_id, seq) "
        f"TO '{path}' (FORMAT parquet, PARTITION_BY (day), OVERWRITE_OR_IGNORE, "
        "FILENAME_PATTERN 'events_{i}')"
    )
    row = next(iter(ledger.con.execute("SELECT count(*) FROM events").fetchall()), None)
    return int(row[0]) if row else 0
