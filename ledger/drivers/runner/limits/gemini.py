"""Google's Gemini CLI's limit reports (``gemini --output-format stream-json`` or ``json``), as its own
source writes them.

A ``result`` (stream-json) or error object (json) whose message carries the line Gemini CLI adds for
HTTP 429; it resets after the retry delay the message gives, if any. Each form, and the commit of
google-gemini/gemini-cli it was taken from: docs/design/agent-formats.md#gemini-cli.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ledger.core.errors import one_line
from ledger.drivers.runner.limits.limit import Clock, RateLimit, seconds_from

_TOO_MANY = re.compile(
    r"^(?:Please wait and try again later\. To increase your limits, request a quota increase through "
    r"(?:AI Studio|Vertex), or switch to another /auth method"
    r"|Possible quota limitations in place or slow response times detected\. Switching to the \S+ "
    r"model for the rest of this session\.)$",
    re.MULTILINE,
)
_RETRY = re.compile(
    r"(?:Please retry in|Suggested retry after) (?P<amount>[0-9]+(?:\.[0-9]+)?)(?P<unit>ms|s)\b"
)


def _limit(said: str, message: str, clock: Clock) -> RateLimit:
    """The limit whose reason is ``said`` (its lines joined), reset when ``message`` says."""
    retry = _RETRY.search(message)
    reset = seconds_from(clock(), retry["amount"], retry["unit"]) if retry else None
    return RateLimit(" ".join(said.split()) or one_line(message), reset)


def from_message(message: str, clock: Clock) -> RateLimit | None:
    """The limit an error ``result``'s message reports, or ``None``: its reason is what precedes
    the 429 line (the whole ``[API Error: ...]``)."""
    found = _TOO_MANY.search(message)
    if found is None:
        return None
    return _limit(message[: found.start()], message, clock)


def from_json(data: Mapping[str, object], clock: Clock) -> RateLimit | None:
    """The limit a JSON object reports: a stream's ``result`` with ``status`` ``error`` and a 429
    message, or ``-o json``'s error object with ``code`` 429."""
    error = data.get("error")
    if not isinstance(error, dict) or not isinstance(message := error.get("message"), str):
        return None
    if data.get("type") == "result" and data.get("status") == "error":
        return from_message(message, clock)
    if "type" not in data and error.get("code") == 429:
        return _limit(message, message, clock)
    return None


def from_line(text: str, clock: Clock) -> RateLimit | None:
    """Gemini CLI writes no limit report as a line of plain text: always ``None``."""
    return None
