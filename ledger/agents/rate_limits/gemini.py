"""Google's Gemini CLI's limit reports (``gemini --output-format stream-json``), as its own source
writes them.

Origin: https://github.com/google-gemini/gemini-cli (Apache-2.0), read at commit
5411f113cafae26161b4969b0237b8e1e024e2c2: ``packages/cli/src/utils/errors.ts`` (``handleError``: a
run that ends on an error writes ``{"type": "result", "status": "error", "error": {"type": ...,
"message": M}, "stats": ...}`` and exits non-zero), ``packages/core/src/utils/errorParsing.ts``
(``parseAndFormatApiError``: M is ``[API Error: ...]`` and, only for HTTP 429, a second line, one
of the three below), ``packages/core/src/utils/googleQuotaErrors.ts`` and its tests (the quota
messages: ``Please retry in 44.097740004s.``, ``Suggested retry after 60s.``, ``You have exhausted
your daily quota on this model.``).

A limit is such a ``result`` whose message has a line that is one of:

- ``Please wait and try again later. To increase your limits, request a quota increase through AI
  Studio, or switch to another /auth method`` (an API key), or the same ``through Vertex``;
- ``Possible quota limitations in place or slow response times detected. Switching to the MODEL
  model for the rest of this session.`` (a Google login);

it resets after the ``Please retry in Ns`` / ``Nms`` or ``Suggested retry after Ns`` the message
gives, if any. Other errors (a context window overflow is ``RESOURCE_EXHAUSTED`` too, without the
429 line) stay failed iterations. Plain ``gemini -p`` prints no such line (the error goes to the
terminal as an object), so a text run of Gemini is not recognised.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ledger.agents.rate_limits.limit import Clock, RateLimit, seconds_from
from ledger.core.errors import one_line

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


def from_message(message: str, clock: Clock) -> RateLimit | None:
    """The limit an error ``result``'s message reports, or ``None``."""
    if _TOO_MANY.search(message) is None:
        return None
    said = one_line(message)
    retry = _RETRY.search(message)
    return RateLimit(said, seconds_from(clock(), retry["amount"], retry["unit"]) if retry else None)


def from_json(data: Mapping[str, object], clock: Clock) -> RateLimit | None:
    """The limit a stream line reports: a ``result`` with ``status`` ``error`` and a 429 message."""
    error = data.get("error")
    if data.get("type") != "result" or data.get("status") != "error" or not isinstance(error, dict):
        return None
    message = error.get("message")
    return from_message(message, clock) if isinstance(message, str) else None


def from_line(text: str, clock: Clock) -> RateLimit | None:
    """Gemini CLI writes no limit report as a line of plain text: always ``None``."""
    return None
