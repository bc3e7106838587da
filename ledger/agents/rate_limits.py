"""An agent run that hit a usage or rate limit, told apart from a failed iteration, and how long the
runner waits before running the same iteration again.

What is recognised (Claude Code, as it reports limits; where each form was seen: README, runner
section):

- a ``--output-format stream-json`` line ``{"type": "rate_limit_event", "rate_limit_info":
  {"status": "rejected", "resetsAt": EPOCH, "rateLimitType": ...}}``;
- a ``result`` line with ``"is_error": true`` whose ``result`` is one of the messages below;
- in a run that failed, a whole line that is one of them: ``Claude AI usage limit reached|EPOCH``,
  or ``You've hit your limit · resets 3:30am (Europe/Moscow)`` (also ``resets Apr 23 at 4pm``).

Only these exact forms count: prose that mentions a limit never does (a run that succeeded and
prints such a sentence is an ordinary run). The wait is until the reset time the agent gave, plus a
margin, at most ``MAX_WAIT_S``; without one, a back-off doubling from ``base_s`` up to
``MAX_BACKOFF_S``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

Clock = Callable[[], datetime]

MARGIN_S: Final = 2.0
"""Seconds waited past the reset time the agent gave (its clock and ours differ)."""
MAX_WAIT_S: Final = 6 * 3600.0
"""The longest single wait (a five-hour limit's reset, and some)."""
MAX_BACKOFF_S: Final = 900.0
MAX_LIMITED_RUNS: Final = 12
"""Limited runs in a row after which the loop escalates instead of waiting again."""

_EPOCH = re.compile(r"^Claude AI usage limit reached\|(\d{9,11})$")
_RESETS = re.compile(
    r"^You've hit your (?:[\w-]+ )?limit · resets (?:(?P<month>[A-Z][a-z]{2}) (?P<day>\d{1,2}) at )?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?(?P<ampm>am|pm)(?: \((?P<zone>[\w/+-]+)\))?$"
)
_MONTHS: Final = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


@dataclass(frozen=True, slots=True)
class RateLimit:
    """A limit the agent reported: what it said, and when it resets (``None``: it did not say)."""

    reason: str
    resets_at: datetime | None = None


def _from_epoch(text: str) -> datetime | None:
    try:
        return datetime.fromtimestamp(int(text), UTC)
    except (ValueError, OverflowError, OSError):
        return None


def _resets(m: re.Match[str], now: datetime) -> datetime | None:
    """The next moment after ``now`` matching a "resets 3:30am (Zone)" message."""
    try:
        zone = ZoneInfo(m["zone"]) if m["zone"] else UTC
    except (ZoneInfoNotFoundError, ValueError):
        return None
    hour = int(m["hour"]) % 12 + (12 if m["ampm"] == "pm" else 0)
    local = now.astimezone(zone)
    try:
        when = local.replace(hour=hour, minute=int(m["minute"] or 0), second=0, microsecond=0)
        if m["month"]:
            when = when.replace(month=_MONTHS.index(m["month"]) + 1, day=int(m["day"]))
            if when < local:
                when = when.replace(year=when.year + 1)
        elif when < local:
            when += timedelta(days=1)
    except ValueError:  # an hour past 12, the 31st of a short month
        return None
    return when.astimezone(UTC)


def from_message(text: str, clock: Clock) -> RateLimit | None:
    """The limit a Claude Code message reports (the whole text, stripped), or ``None``; ``clock`` is
    read only for a reset given as a time of day."""
    said = text.strip()
    if m := _EPOCH.match(said):
        return RateLimit(said, _from_epoch(m[1]))
    if m := _RESETS.match(said):
        return RateLimit(said, _resets(m, clock()))
    return None


def _from_json(line: str, clock: Clock) -> RateLimit | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    if data.get("type") == "rate_limit_event":
        info = data.get("rate_limit_info")
        if isinstance(info, dict) and info.get("status") == "rejected":
            kind = str(info.get("rateLimitType") or "usage")
            resets = info.get("resetsAt")
            at = _from_epoch(str(resets)) if isinstance(resets, int | float) else None
            return RateLimit(f"{kind} limit reached", at)
    if data.get("type") == "result" and data.get("is_error") is True and isinstance(data.get("result"), str):
        return from_message(data["result"], clock)
    return None


def rate_limit(output: str, failed: bool, clock: Clock) -> RateLimit | None:
    """The limit an agent run's output reports: a stream's rejected ``rate_limit_event`` or error
    ``result``, or (only when the run ``failed``) a whole line in one of the message forms above."""
    found: RateLimit | None = None
    for line in output.splitlines():
        text = line.strip()
        if text.startswith("{"):
            found = _from_json(text, clock) or found
        elif failed:
            found = from_message(text, clock) or found
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
