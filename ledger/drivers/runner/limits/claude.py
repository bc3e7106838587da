"""Claude Code's limit reports (also Amp's ``--stream-json``, which writes Claude Code's format).

A ``rate_limit_event`` line that is ``rejected``, a ``result`` with ``is_error`` holding a limit
message, a whole line of a failed run holding one, or an HTTP 429 the client gave up on. Each form
and where it was seen: docs/design/agent-formats.md#claude-code-and-amp.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ledger.drivers.runner.limits.limit import Clock, RateLimit, from_epoch, straight

_EPOCH = re.compile(r"^Claude AI usage limit reached\|(\d{9,11})$")
_RESETS = re.compile(
    r"^You've hit your (?:[\w-]+ )?limit · resets (?:(?P<month>[A-Z][a-z]{2}) (?P<day>\d{1,2}) at )?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?(?P<ampm>am|pm)(?: \((?P<zone>[\w/+-]+)\))?$"
)
_REJECTED = re.compile(r"^API Error: Request rejected \(429\)(?: · .*)?$")
_MONTHS: Final = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


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


def from_line(text: str, clock: Clock) -> RateLimit | None:
    """The limit a Claude Code message reports (the whole text, stripped), or ``None``; ``clock`` is
    read only for a reset given as a time of day."""
    said = straight(text)
    if m := _EPOCH.match(said):
        return RateLimit(said, from_epoch(m[1]))
    if m := _RESETS.match(said):
        return RateLimit(said, _resets(m, clock()))
    if _REJECTED.match(said):
        return RateLimit(said)
    return None


def from_json(data: Mapping[str, object], clock: Clock) -> RateLimit | None:
    """The limit a stream line reports: a rejected ``rate_limit_event`` or an error ``result``."""
    if data.get("type") == "rate_limit_event":
        info = data.get("rate_limit_info")
        if isinstance(info, dict) and info.get("status") == "rejected":
            kind = str(info.get("rateLimitType") or "usage")
            resets = info.get("resetsAt")
            at = from_epoch(str(resets)) if isinstance(resets, int | float) else None
            return RateLimit(f"{kind} limit reached", at)
    result = data.get("result")
    if data.get("type") == "result" and data.get("is_error") is True and isinstance(result, str):
        found = from_line(result, clock)
        if found is None and data.get("api_error_status") == 429:
            return RateLimit(result.strip() or "rate limited (HTTP 429)")
        return found
    return None
