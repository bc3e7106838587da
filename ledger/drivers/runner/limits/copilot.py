"""GitHub Copilot CLI's limit reports, as Copilot CLI 1.0.102 wrote them against an OpenAI-compatible
provider answering HTTP 429 with OpenAI's error body (``tests/fixtures/clients/copilot-1.0.102/``).

Copilot retries a 429 by itself (5 times, waiting what the response asks); a run that still ends on
one exits 1 and reports it:

- with ``--output-format json``, as a line ``{"type": "session.error", "data": {"errorType":
  "rate_limit", "message": M, "statusCode": 429, ...}}``;
- in text mode, as a line on stderr: ``Failed to get response from the AI model; retried 5 times
  (total retry wait time: 5.47 seconds) Last error: 429 Rate limit reached for MODEL ... Please try
  again in 1s. Visit https://platform.openai.com/account/rate-limits to learn more.``

M is that same sentence. The limit resets after the ``Please try again in 1s`` / ``20ms`` /
``1m30s`` that OpenAI's message gives, if any. A 429 that is not a rate limit (OpenAI's
``insufficient_quota``: billing) is not reported as ``rate_limit`` and stays a failed iteration.
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
