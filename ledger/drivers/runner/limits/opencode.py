"""opencode's limit report (``opencode run --format json``), as its own source writes it.

An ``error`` line whose ``APIError`` has ``statusCode`` 429, reset after the response's
``retry-after-ms`` / ``retry-after`` when given. The commits of anomalyco/opencode it was taken
from: docs/design/agent-formats.md#opencode.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from ledger.drivers.runner.limits.limit import Clock, RateLimit, seconds_from


def _retry_after(headers: object, now: datetime) -> datetime | None:
    """The reset a response's ``retry-after-ms`` or ``retry-after`` header gives, as opencode reads it."""
    if not isinstance(headers, dict):
        return None
    if isinstance(ms := headers.get("retry-after-ms"), str) and (at := seconds_from(now, ms, "ms")):
        return at
    after = headers.get("retry-after")
    if not isinstance(after, str):
        return None
    if at := seconds_from(now, after, "s"):
        return at
    try:
        when = parsedate_to_datetime(after)
    except (TypeError, ValueError, IndexError):
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def from_json(data: Mapping[str, object], clock: Clock) -> RateLimit | None:
    """The limit a ``--format json`` line reports: an ``error`` whose ``APIError`` is a 429."""
    error = data.get("error")
    if data.get("type") != "error" or not isinstance(error, dict) or error.get("name") != "APIError":
        return None
    detail = error.get("data")
    if not isinstance(detail, dict) or detail.get("statusCode") != 429:
        return None
    message = detail.get("message")
    said = message.strip() if isinstance(message, str) and message.strip() else "API error 429"
    return RateLimit(said, _retry_after(detail.get("responseHeaders"), clock()))


def from_line(text: str, clock: Clock) -> RateLimit | None:
    """opencode writes no exact limit report as a line of plain text: always ``None``."""
    return None
