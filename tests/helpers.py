"""Small helpers shared by the engine, checkpoint and runner tests."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

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
