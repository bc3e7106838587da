"""Claude Code's own output: ``claude -p --output-format stream-json`` (also ``--verbose``) or
``json``, and Amp's ``--stream-json``, which writes the same messages.

Tokens, tool calls, edited files and the last text come from the one reader of Claude Code's
message format, ``ledger.agents.claude_code.transcript.scan_output`` (tokens once per
``message.id``). Read here besides: the ``result`` line (its ``result`` is the final text, its
``total_cost_usd`` the cost) and the model (the ``system`` ``init`` line's ``model``, else the
last assistant message's).
"""

from __future__ import annotations

from typing import Final

import msgspec

from ledger.agents.claude_code.transcript import scan_output
from ledger.agents.formats.report import AgentReport, Lines

KNOWN: Final = frozenset({"system", "user", "assistant", "result", "stream_event", "rate_limit_event"})
"""The line types of Claude Code's stream; any other is counted as skipped."""


class _Message(msgspec.Struct, gc=False):
    model: str | None = None


class _Line(msgspec.Struct, gc=False):
    type: str = ""
    subtype: str | None = None
    model: str | None = None
    message: _Message | None = None
    result: str | None = None
    total_cost_usd: float | None = None


def parse(output: str) -> AgentReport:
    """The report of a Claude Code (or Amp) stream-json or json output."""
    lines = Lines(output, _Line)
    init_model = last_model = ""
    result: str | None = None
    cost: float | None = None
    for line in lines:
        if line.type not in KNOWN:
            lines.unknown()
        elif line.type == "system" and line.model:
            init_model = init_model or line.model
        elif line.type == "assistant" and line.message is not None and line.message.model:
            last_model = line.message.model
        elif line.type == "result":
            result = line.result if line.result is not None else result
            cost = line.total_cost_usd if line.total_cost_usd is not None else cost
    scanned = scan_output(output.splitlines())
    return AgentReport(
        text=result if result is not None else scanned.last_text,
        tokens=scanned.tokens,
        cost_usd=cost,
        model=init_model or last_model,
        tool_count=scanned.tool_count,
        files_modified=tuple(scanned.files_modified),
        skipped=lines.skipped,
    )
