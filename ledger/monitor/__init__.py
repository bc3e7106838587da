"""The headless core of a live monitor (``ralph-tui`` and any other front end): ``live`` holds the
``Monitor``, ``answers`` the plain Structs it answers with, ``replay`` the replay of recorded journals
(side by side, or ``sequential``) and its clock (``ReplayClock``, a ``Monitor``'s ``now`` in a replay),
``dataset`` the read-only twin over an exported Parquet dataset (``DatasetMonitor``).

A ``Monitor`` ingests its sources' backlog in batches, then only what is appended, and answers the
screens' questions with the ledger's views; it is thread-safe. Its sources and answers:
docs/design/monitor.md.
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
    TaskRow,
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
    "TaskRow",
    "Update",
    "dataset_sources",
    "default_home_here",
    "fleet_of",
    "resolve_home",
]
