"""OpenAI Codex's limit reports (``codex exec``), as its own source writes them.

Origin: https://github.com/openai/codex (Apache-2.0), ``codex-rs/core/src/error.rs`` at commits
001cb8e233f250c7086c791c51390286c087faea and edb4efee49ae9f130636fab25f2e398a931dd987 (the
``Display`` of ``UsageLimitReachedError``, ``RateLimitedError`` and ``RetryLimitReachedError``, and
the tests asserting them), ``codex-rs/exec/src/event_processor_with_jsonl_output.rs`` at commit
029bf4d55c5d33e77bdbdfaec25d06836ae9e213 (how ``--json`` reports an error) and
``codex-rs/exec/src/event_processor_with_human_output.rs`` at commit
00155cc658605491df534df102dab5ceb204f531 (how plain ``codex exec`` prints one: ``ERROR: ...``).

A limit message is one of (its quotes straightened: Codex 0.169.0 writes ``You’ve``, with a
typographic apostrophe, as ``tests/fixtures/clients/codex-0.169.0/`` shows):

- ``You've hit your usage limit.`` and what the plan adds, ending ``Try again later.``, ``or try
  again later.``, or ``[Tt]ry again at TIME.`` where TIME is the local reset time (``1:00 AM`` the
  same day, else ``Jan 3rd, 2024 3:05 AM``: ``format_retry_timestamp``, in this machine's zone);
- ``rate limited (status 429 Too Many Requests)``, with ``, retry after 30s`` when the server said;
- ``exceeded retry limit, last status: 429 Too Many Requests`` (Codex gave up retrying on 429s).

It counts in an ``--json`` line ``{"type": "error", "message": M}`` or ``{"type": "turn.failed",
"error": {"message": M}}`` (newer versions may add `` (details)`` to M), and in a failed run as a
whole line ``ERROR: M`` (on stderr). The reset time is read from M: Codex 0.169.0 writes the
429's structured ``usage_limit_reached`` error (``resets_at``) into neither stream, only into M.
``Quota exceeded. Check your plan and billing details.`` is not a limit that resets (billing), so
it stays a failed iteration; an ``agent_message`` never counts.
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
