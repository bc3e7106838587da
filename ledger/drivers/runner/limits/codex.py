"""OpenAI Codex's limit reports (``codex exec``), as its own source writes them.

A usage limit, a 429 rate limit or an exhausted 429 retry, in an ``--json`` ``error`` or
``turn.failed`` event or a failed plain run's ``ERROR:`` line; the reset time is read from the
message. Each message, and the commits of openai/codex it was taken from: docs/design/agent-formats.md#codex.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Final

from ledger.drivers.runner.limits.limit import Clock, RateLimit, plain, seconds_from, straight

_LIMIT = re.compile(
    r"^(?:You've hit your usage limit\."
    r"|rate limited \(status 429 Too Many Requests\)(?:, retry after (?P<after>\d+)s)?"
    r"|exceeded retry limit, last status: 429 Too Many Requests)"
)
_AT = re.compile(
    r"[Tt]ry again at (?:(?P<month>[A-Z][a-z]{2}) (?P<day>\d{1,2})(?:st|nd|rd|th), (?P<year>\d{4}) )?"
    r"(?P<hour>\d{1,2}):(?P<minute>\d{2}) (?P<ampm>AM|PM)\."
)
_MONTHS: Final = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _at(m: re.Match[str], now: datetime) -> datetime | None:
    """The moment a ``try again at TIME.`` names, in this machine's zone (as Codex wrote it): a time
    without a date more than 12 hours past is tomorrow's (``try again at 1:07 AM.`` said at 11 PM), one
    less past has come already (the limit reset while the run ended)."""
    local = now.astimezone()
    hour = int(m["hour"]) % 12 + (12 if m["ampm"] == "PM" else 0)
    try:
        when = local.replace(hour=hour, minute=int(m["minute"]), second=0, microsecond=0)
        if m["month"]:
            month = _MONTHS.index(m["month"]) + 1
            when = when.replace(year=int(m["year"]), month=month, day=int(m["day"]))
    except ValueError:  # an hour past 12, the 31st of a short month
        return None
    if not m["month"] and when < local - timedelta(hours=12):
        when += timedelta(days=1)
    return when


def from_message(message: str, clock: Clock) -> RateLimit | None:
    """The limit a Codex error message reports (its first line names it), or ``None``."""
    said = straight(message)
    m = _LIMIT.match(said)
    if m is None:
        return None
    if m["after"]:
        return RateLimit(said, seconds_from(clock(), m["after"], "s"))
    at = _AT.search(said)
    return RateLimit(said, _at(at, clock()) if at else None)


def from_json(data: Mapping[str, object], clock: Clock) -> RateLimit | None:
    """The limit an ``exec --json`` line reports: an ``error`` or ``turn.failed`` event's message."""
    kind, message = data.get("type"), None
    if kind == "error":
        message = data.get("message")
    elif kind == "turn.failed" and isinstance(error := data.get("error"), dict):
        message = error.get("message")
    return from_message(message, clock) if isinstance(message, str) else None


def from_line(text: str, clock: Clock) -> RateLimit | None:
    """The limit a whole line ``ERROR: M`` of plain ``codex exec`` reports, or ``None``."""
    said = plain(text)
    return from_message(said[len("ERROR: ") :], clock) if said.startswith("ERROR: ") else None
