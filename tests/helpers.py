"""Small helpers shared by the engine, checkpoint and runner tests."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledger.loop.engine import Engine
    from ledger.loop.engine_types import ValidateResult

T0 = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)


def ticking(start: datetime = T0, step: timedelta = timedelta(seconds=5)) -> Callable[[], datetime]:
    """A clock that advances ``step`` on every call, from ``start``."""
    ticks = iter(range(1_000_000))
    return lambda: start + step * next(ticks)


def flag_rule(name: str = "tests_pass") -> dict[str, Any]:
    """A command rule that passes when the file ``<name>.ok`` exists in the work dir."""
    code = f"import os, sys; sys.exit(0 if os.path.exists('{name}.ok') else 1)"
    return {"name": name, "type": "command", "argv": [sys.executable, "-c", code], "timeout_s": 30}


AGENT_PREAMBLE = """\
import json, pathlib, subprocess, sys, time
state = pathlib.Path(sys.argv[1])
prompt = sys.stdin.read()
counter = state / "count"
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
"""
"""The start of a scripted agent's program (run as ``python agent.py STATE_DIR``): it reads the prompt
on stdin and counts its runs in ``STATE_DIR/count`` (``n`` is this run's number)."""


def past_loop(
    journals: Path,
    session_id: str,
    iterations: int,
    *,
    agent: str = "",
    kind: str = "",
    end: str = "complete",
) -> None:
    """Write the journal of a past loop of ``agent`` and task ``kind`` that ran ``iterations`` iterations
    and ended ``end`` ("complete", "blocked", "escalated"; "running": not ended), through the journal API."""
    from ledger import events as ev
    from ledger.storage.journal import Journal

    endings: dict[str, list[ev.Event]] = {
        "complete": [
            ev.SessionCompleted(session_id=session_id, iteration=iterations, total_iterations=iterations)
        ],
        "blocked": [ev.SessionBlocked(session_id=session_id, iteration=iterations)],
        "escalated": [ev.SessionEscalated(session_id=session_id, iteration=iterations)],
        "running": [],
    }
    ending = endings[end]
    Journal.for_session(journals, session_id, fsync=False, clock=ticking()).append(
        ev.SessionStarted(session_id=session_id, agent=agent, task_kind=kind, task="t", max_iterations=60),
        *(ev.IterationStarted(session_id=session_id, iteration=n) for n in range(1, iterations + 1)),
        *ending,
    )


def validate(engine: Engine, session_id: str, output: str = "", **fields: Any) -> ValidateResult:
    """Validate one turn and record it, deciding nothing more (``LoopSession.check``, the MCP tools'
    ``iteration_validate``): what a test drives step by step with ``engine.next`` / ``complete``."""
    from ledger.loop.decision import Turn
    from ledger.loop.step import LoopSession

    return LoopSession(engine, session_id, "").check(Turn(output, **fields)).result
