"""An agent run that hit a usage or rate limit, told apart from a failed iteration, and how long the
runner waits before running the same iteration again.

One module per agent recognises its own reports (``claude``, ``codex``, ``copilot``, ``gemini``,
``opencode``), chosen by the run's format; only those exact forms count, never prose that mentions
a limit. The wait is until the reset the agent gave, plus a margin, at most ``MAX_WAIT_S``; without
one, a back-off. Which report counts when, and each agent's forms:
docs/design/agent-formats.md#usage-and-rate-limits.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Final

from ledger.drivers.runner.limits import claude, codex, copilot, gemini, opencode
from ledger.drivers.runner.limits.limit import Clock, RateLimit, Recogniser

__all__ = [
    "MARGIN_S",
    "MAX_BACKOFF_S",
    "MAX_LIMITED_RUNS",
    "MAX_WAIT_S",
    "RECOGNISERS",
    "Clock",
    "RateLimit",
    "rate_limit",
    "wait_s",
]

MARGIN_S: Final = 2.0
"""Seconds waited past the reset time the agent gave (its clock and ours differ)."""
MAX_WAIT_S: Final = 6 * 3600.0
"""The longest single wait (a five-hour limit's reset, and some)."""
MAX_BACKOFF_S: Final = 900.0
MAX_LIMITED_RUNS: Final = 12
"""Limited runs in a row after which the loop escalates instead of waiting again."""

RECOGNISERS: Final[Mapping[str, Recogniser]] = MappingProxyType(
    {"claude": claude, "codex": codex, "copilot": copilot, "gemini": gemini, "opencode": opencode}
)
"""Every agent's limit reports, by the name an ``AgentFormat.limits`` gives."""


def _object(line: str) -> dict[str, object] | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _units(output: str) -> list[str]:
    """The output's lines, stripped, except that a pretty-printed JSON object (from a line ``{`` to
    a line ``}``, both unindented: Gemini CLI's ``-o json`` error) is one unit when it decodes."""
    units: list[str] = []
    block: list[str] | None = None
    for line in output.splitlines():
        if block is not None:
            block.append(line)
            if line.rstrip() == "}":
                whole = "\n".join(block)
                units.extend([whole] if _object(whole) is not None else [b.strip() for b in block])
                block = None
        elif line.rstrip() == "{":
            block = [line]
        else:
            units.append(line.strip())
    units.extend(line.strip() for line in block or [])  # an object never closed: its lines
    return units


def rate_limit(output: str, failed: bool, clock: Clock, agent: str | None = None) -> RateLimit | None:
    """The limit an agent run's output reports (the last one), or ``None``: ``agent``'s stream
    events, and its whole-line messages when the run ``failed``; with no ``agent`` (plain text),
    every agent's forms, and only when the run ``failed``. ``KeyError`` for an unknown ``agent``."""
    recognisers = (RECOGNISERS[agent],) if agent is not None else tuple(RECOGNISERS.values())
    if agent is None and not failed:
        return None
    found: RateLimit | None = None
    for text in _units(output):
        data = _object(text) if text.startswith("{") else None
        for recogniser in recognisers:
            if data is not None:
                found = recogniser.from_json(data, clock) or found
            elif failed and text:
                found = recogniser.from_line(text, clock) or found
    return found


def wait_s(limit: RateLimit, now: datetime, attempt: int, base_s: float) -> float:
    """Seconds to wait before running the iteration again: until the reset plus ``MARGIN_S``, or
    ``base_s`` doubled per earlier ``attempt`` (0 for the first) up to ``MAX_BACKOFF_S``; at most
    ``MAX_WAIT_S``."""
    if limit.resets_at is not None:
        wait = (limit.resets_at - now).total_seconds() + MARGIN_S
        return min(max(wait, MARGIN_S), MAX_WAIT_S)
    backoff: float = base_s * 2.0 ** min(attempt, 16)
    return min(backoff, MAX_BACKOFF_S, MAX_WAIT_S)
