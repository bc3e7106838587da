"""Claude Code's own output: ``claude -p --output-format stream-json`` (also ``--verbose``) or
``json``, and Amp's ``--stream-json``, which writes the same messages.

Tool calls, edited files, the last text and the context figure come from the one reader of Claude
Code's message format, ``ledger.drivers.claude_code.transcript.scan.scan_output``; the final text,
cost, tokens (the ``result``'s ``modelUsage``, sub-agents included) and model from the ``result``
and ``system`` lines. What is read, and why: docs/design/agent-formats.md#claude-code-and-amp.
"""

from __future__ import annotations

from typing import Final

import msgspec

from ledger.drivers.claude_code.transcript.scan import add_usage, scan_output
from ledger.drivers.runner.formats.report import AgentReport, Lines
from ledger.events import TokenUsage

KNOWN: Final = frozenset({"system", "user", "assistant", "result", "stream_event", "rate_limit_event"})
"""The line types of Claude Code's stream; any other is counted as skipped."""


class _Message(msgspec.Struct, gc=False):
    model: str | None = None


class _Usage(msgspec.Struct, gc=False):
    input_tokens: int | None = 0
    output_tokens: int | None = 0
    cache_creation_input_tokens: int | None = 0
    cache_read_input_tokens: int | None = 0


class _ModelUsage(msgspec.Struct, gc=False, rename="camel"):
    input_tokens: int | None = 0
    output_tokens: int | None = 0
    cache_read_input_tokens: int | None = 0
    cache_creation_input_tokens: int | None = 0


class _Line(msgspec.Struct, gc=False):
    type: str = ""
    subtype: str | None = None
    model: str | None = None
    message: _Message | None = None
    result: str | None = None
    total_cost_usd: float | None = None
    is_error: bool | None = None
    errors: list[object] | None = None
    usage: _Usage | None = None
    model_usage: dict[str, _ModelUsage] | None = msgspec.field(default=None, name="modelUsage")


def _tokens(usage: _Usage | _ModelUsage) -> TokenUsage:
    return TokenUsage(
        input=usage.input_tokens or 0,
        output=usage.output_tokens or 0,
        cache_creation=usage.cache_creation_input_tokens or 0,
        cache_read=usage.cache_read_input_tokens or 0,
    )


def _run_tokens(line: _Line) -> TokenUsage | None:
    """The tokens a ``result`` line says the run spent: the sum of its ``modelUsage`` (every model,
    sub-agents included), else its ``usage`` (the main thread's only), else ``None``."""
    if line.model_usage:
        total = TokenUsage()
        for usage in line.model_usage.values():
            total = add_usage(total, _tokens(usage))
        return total
    return _tokens(line.usage) if line.usage is not None else None


def parse(output: str) -> AgentReport:
    """The report of a Claude Code (or Amp) stream-json or json output."""
    lines = Lines(output, _Line)
    init_model = last_model = result_model = ""
    result: str | None = None
    cost: float | None = None
    tokens: TokenUsage | None = None
    error = ""
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
            tokens = _run_tokens(line) or tokens
            result_model = next(iter(line.model_usage or ()), result_model)
            said = [e for e in line.errors or () if isinstance(e, str) and e.strip()]
            error = (
                ((line.result or "").strip() or "; ".join(said) or line.subtype or "error")
                if line.is_error
                else ""
            )
    scanned = scan_output(output.splitlines())
    return AgentReport(
        text=result if result is not None else scanned.last_text,
        tokens=scanned.tokens if tokens is None else tokens,
        cost_usd=cost,
        model=init_model or last_model or result_model,
        tool_count=scanned.tool_count,
        files_modified=tuple(scanned.files_modified),
        context_tokens=scanned.context_tokens,
        skipped=lines.skipped,
        error=error,
    )
