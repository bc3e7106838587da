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
429 line) stay failed iterations. The reason recorded is the whole ``[API Error: ...]``, its lines
joined (the API's message runs over several lines, the retry advice last).

``--output-format json`` writes no ``result``: a run that ends on an error writes one pretty-printed
object to stderr, ``{"session_id": ..., "error": {"type": ..., "message": M, "code": C}}``
(``JsonFormatter.formatError``), M being the error's own message; C 429 is a limit (seen with Gemini
CLI 0.61.0, ``tests/fixtures/clients/gemini-cli-0.61.0``). Plain ``gemini -p`` prints no such line
(the error goes to the terminal as an object), so a text run of Gemini is not recognised.
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
