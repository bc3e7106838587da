"""The headless core of a live monitor (``ralph-tui`` and any other front end): ``live`` holds the
``Monitor``, ``answers`` the plain Structs it answers with, ``replay`` the replay of recorded journals
(side by side, or ``sequential``) and its clock (``ReplayClock``, a ``Monitor``'s ``now`` in a replay).

A ``Monitor`` opens one or more sources of journals, ingests their backlog in
batches (reporting progress), then ingests only what is appended
(``refresh``: by byte offset, never re-reading what it read) and answers the
screens' questions with the ledger's views: sessions, fleet totals, the
iteration timeline with one cell per rule, the files-modified heat, an
iteration's feedback and next prompt, checkpoints, the event log, alerts,
and read-only SQL. Every answer is a plain msgspec Struct, so a front end
needs neither DuckDB nor SQL. ``DatasetMonitor`` (``dataset``) answers the same questions, read-only,
over an exported Parquet dataset of many homes, each session with its ``source``.

Sources: a ledger home (a directory holding ``journals/``), a directory of
``*.jsonl`` journals (``sample_sessions/``), or journal files; and ``homes``:
homes named as such (``--home``, ``$RALPH_HOME``, the project's ``.ralph``), which may be
empty or not exist yet (nothing is created: ``watch_roots`` says where to
watch for their ``journals/`` to appear). One home is
read through its ``ledger.duckdb`` (an in-memory copy when another process
holds the file); anything else through an in-memory ledger, so a directory
of samples is never written to.

The monitor is thread-safe: one lock serialises its DuckDB connection, so a
UI may call it from several worker threads.
"""

from ledger.events import SessionStatus
from ledger.monitor.answers import (
    Alert,
    Checkpoint,
    EventLine,
    Fleet,
    Heat,
    IterationDetail,
    IterationRow,
    Progress,
    RuleCell,
    SessionRow,
    Update,
    fleet_of,
)
from ledger.monitor.dataset import DatasetMonitor, dataset_sources
from ledger.monitor.live import EXAMPLE_QUERIES, Monitor, default_home_here, resolve_home

__all__ = [
    "EXAMPLE_QUERIES",
    "Alert",
    "Checkpoint",
    "DatasetMonitor",
    "EventLine",
    "Fleet",
    "Heat",
    "IterationDetail",
    "IterationRow",
    "Monitor",
    "Progress",
    "RuleCell",
    "SessionRow",
    "SessionStatus",
    "Update",
    "dataset_sources",
    "default_home_here",
    "fleet_of",
    "resolve_home",
]
