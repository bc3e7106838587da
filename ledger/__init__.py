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

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the Stop hook's lean path never imports typing
if TYPE_CHECKING:
    from typing import Any


class _LeanMsgspec:
    """In ``sys.meta_path`` until msgspec is imported: whoever imports it first, any module in any
    order, gets it without ``typing_extensions`` (unless something imported that already).

    msgspec only falls back on it for what Python 3.11's ``typing`` has (``get_type_hints`` with
    extras, ``Required``/``NotRequired``), and importing it (with ``inspect``) costs about 15 ms of a
    Stop hook's 80-100. Code that imports ``typing_extensions`` later still gets it. Nothing is
    imported here: a process that never needs msgspec (the Stop hook handing its stop to the warm
    worker, ``ledger.drivers.claude_code.stop.warm``) never pays for it.
    """

    @classmethod
    def find_spec(cls, name: str, path: Any = None, target: Any = None) -> Any:
        """msgspec's spec, found by the finders after this one, with a loader hiding ``typing_extensions``."""
        if name != "msgspec":
            return None
        if cls in sys.meta_path:
            sys.meta_path.remove(cls)  # once
        if "typing_extensions" in sys.modules:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                if hasattr(spec.loader, "exec_module"):
                    spec.loader = _WithoutTypingExtensions(spec.loader)
                return spec
        return None


class _WithoutTypingExtensions:
    """msgspec's loader, run with ``typing_extensions`` unimportable (an ImportError msgspec expects)."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: Any) -> Any:
        """What msgspec's own loader creates."""
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        """Run msgspec's own loader, ``typing_extensions`` hidden meanwhile; the module keeps that loader."""
        module.__spec__.loader = module.__loader__ = self.loader
        sys.modules["typing_extensions"] = None  # type: ignore[assignment]
        try:
            self.loader.exec_module(module)
        finally:
            if sys.modules.get("typing_extensions", 0) is None:
                del sys.modules["typing_extensions"]


sys.meta_path.insert(0, _LeanMsgspec)

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
    "validation_score": "ledger.loop.validate.score",
    "IngestReport": "ledger.storage.ingest",
    "Ledger": "ledger.storage.database",
    "LedgerError": "ledger.core.errors",
    "LedgerLocked": "ledger.core.errors",
    "one_line": "ledger.core.errors",
    "closest": "ledger.core.errors",
    "plural": "ledger.core.words",
    "error_reason": "ledger.core.errors",
    "Monitor": "ledger.monitor",
    "ready": "ledger.core.interrupts",
    "replay": "ledger.monitor.replay",
    "steer_journal": "ledger.drivers.steer",
    "EngineError": "ledger.loop.engine_types",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ledger' has no attribute {name!r}")
    mod = import_module(module)
    return mod if name in ("events", "output") else getattr(mod, name)
