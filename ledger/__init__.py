"""ralph-ledger: record, control and query autonomous agent iteration loops.

The public API, which the TUI and other tools use, is the names below. They
are imported lazily so that appending to a journal (the hot path of a stop
hook) never pays for importing DuckDB.
"""

from __future__ import annotations

from ledger.core.interrupts import quiet_start

quiet_start()  # first: in ralph-ledger and ralph-tui, Ctrl-C while they load is one line, not a traceback

import sys  # noqa: E402
from importlib import import_module  # noqa: E402
from typing import Any  # noqa: E402


def _import_msgspec_lean() -> None:
    """Import msgspec without ``typing_extensions`` when nothing has imported that yet.

    msgspec only falls back on it for what Python 3.11's ``typing`` has (``get_type_hints`` with
    extras, ``Required``/``NotRequired``), and importing it (with ``inspect``) costs about 15 ms of a
    Stop hook's 80-100. Code that imports ``typing_extensions`` later still gets it.
    """
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]  # an ImportError for msgspec
    try:
        import msgspec  # noqa: F401
    finally:
        del sys.modules["typing_extensions"]


_import_msgspec_lean()

_EXPORTS = {
    "events": "ledger.events",
    "output": "ledger.core.output",
    "Home": "ledger.core.home",
    "is_journal": "ledger.core.home",
    "journals_in": "ledger.core.home",
    "BadLine": "ledger.storage.journal",
    "Cursor": "ledger.storage.journal",
    "Journal": "ledger.storage.journal",
    "JournalError": "ledger.storage.journal",
    "ReadResult": "ledger.storage.journal",
    "read_new": "ledger.storage.journal",
    "QueryResult": "ledger.storage.query",
    "ReadOnlyViolation": "ledger.storage.query",
    "run_readonly": "ledger.storage.query",
    "validation_score": "ledger.loop.score",
    "IngestReport": "ledger.storage.ingest",
    "Ledger": "ledger.storage.database",
    "LedgerError": "ledger.core.errors",
    "LedgerLocked": "ledger.core.errors",
    "one_line": "ledger.core.errors",
    "error_reason": "ledger.core.errors",
    "Monitor": "ledger.monitor",
    "ready": "ledger.core.interrupts",
    "replay": "ledger.monitor.replay",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ledger' has no attribute {name!r}")
    mod = import_module(module)
    return mod if name in ("events", "output") else getattr(mod, name)
