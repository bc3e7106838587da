"""GitHub Copilot CLI's limit reports, as Copilot CLI 1.0.102 wrote them against an OpenAI-compatible
provider answering HTTP 429.

A ``session.error`` of ``errorType`` ``rate_limit`` (``--output-format json``), or the stderr line
of a failed text-mode run; it resets after the delay OpenAI's message gives. Each form:
docs/design/agent-formats.md#github-copilot-cli.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta

from ledger.drivers.runner.limits.limit import Clock, RateLimit, plain

_TEXT = re.compile(r"(?:^|\bLast error: )(?P<said>429 Rate limit reached\b.*)$")
_AFTER = re.compile(
    r"[Pp]lease try again in (?:(?P<ms>\d+(?:\.\d+)?)ms"
    r"|(?=\d)(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m(?!s))?(?:(?P<s>\d+(?:\.\d+)?)s)?)"
)


def _reset(message: str, now: datetime) -> datetime | None:
    """The moment the ``Please try again in ...`` of OpenAI's message names (``None``: it names none)."""
    m = _AFTER.search(message)
    if m is None or not m.group(0)[-1].isalpha():
        return None
    if m["ms"]:
        return now + timedelta(milliseconds=float(m["ms"]))
    hours, minutes, seconds = float(m["h"] or 0), float(m["m"] or 0), float(m["s"] or 0)
    return now + timedelta(hours=hours, minutes=minutes, seconds=seconds)


def from_json(data: Mapping[str, object], clock: Clock) -> RateLimit | None:
    """The limit an ``--output-format json`` line reports: a ``session.error`` of type ``rate_limit``."""
    detail = data.get("data")
    if data.get("type") != "session.error" or not isinstance(detail, dict):
        return None
    if detail.get("errorType") != "rate_limit":
        return None
    message = detail.get("message")
    said = message.strip() if isinstance(message, str) and message.strip() else "rate limit (HTTP 429)"
    return RateLimit(said, _reset(said, clock()))


def from_line(text: str, clock: Clock) -> RateLimit | None:
    """The limit a line of a failed text-mode run reports: ``... Last error: 429 Rate limit reached ...``."""
    m = _TEXT.search(plain(text))
    if m is None:
        return None
    said = m["said"].strip()
    return RateLimit(said, _reset(said, clock()))
