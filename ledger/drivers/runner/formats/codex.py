"""OpenAI Codex's ``codex exec --json``: one JSON event per line.

``turn.completed`` carries the tokens, ``item.*`` events the tool calls, edited files and the final
text (the last ``agent_message`` with no tool call after it), ``turn.failed`` and ``error`` an error
that ended the run. Each event, as Codex 0.169.0 writes it: docs/design/agent-formats.md#codex.
"""

from __future__ import annotations

from typing import Final

import msgspec

from ledger.drivers.claude_code.transcript.scan import add_usage
from ledger.drivers.runner.formats.report import AgentReport, Lines, uncached
from ledger.events import TokenUsage

TOOL_ITEMS: Final = frozenset({"command_execution", "file_change", "mcp_tool_call", "web_search"})

KNOWN: Final = frozenset(
    {"thread.started", "turn.started", "turn.completed", "turn.failed", "error"}
    | {"item.started", "item.updated", "item.completed"}
)


class _Usage(msgspec.Struct, gc=False):
    input_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0
    output_tokens: int = 0


class _Change(msgspec.Struct, gc=False):
    path: str = ""


class _Item(msgspec.Struct, gc=False):
    id: str | None = None
    type: str = ""
    text: str | None = None
    changes: list[_Change] | None = None


class _Error(msgspec.Struct, gc=False):
    message: str = ""


class _Line(msgspec.Struct, gc=False):
    type: str = ""
    usage: _Usage | None = None
    item: _Item | None = None
    message: str | None = None
    error: _Error | None = None


def parse(output: str) -> AgentReport:
    """The report of a ``codex exec --json`` output."""
    lines = Lines(output, _Line)
    tokens = TokenUsage()
    tools: set[str] = set()
    anonymous_tools = 0
    files: dict[str, None] = {}
    text = error = ""
    for line in lines:
        if line.type not in KNOWN:
            lines.unknown()
        elif line.type == "turn.completed" and line.usage is not None:
            u = line.usage
            turn = TokenUsage(
                input=uncached(u.input_tokens, u.cached_input_tokens + u.cache_write_input_tokens),
                output=u.output_tokens,
                cache_read=u.cached_input_tokens,
                cache_creation=u.cache_write_input_tokens,
            )
            tokens = add_usage(tokens, turn)
        elif line.type == "error":
            error = line.message or "error"
        elif line.type == "turn.failed":
            error = (line.error.message if line.error else "") or error or "turn failed"
        elif line.item is not None:
            item = line.item
            if item.type in TOOL_ITEMS:
                text = ""  # a message before a tool call is commentary, not the answer
                if item.id:
                    tools.add(item.id)
                elif line.type == "item.completed":
                    anonymous_tools += 1
            if item.type == "file_change" and item.changes:
                files.update((c.path, None) for c in item.changes if c.path)
            if item.type == "agent_message" and line.type == "item.completed" and item.text is not None:
                text = item.text
    return AgentReport(
        text=text,
        tokens=tokens,
        tool_count=len(tools) + anonymous_tools,
        files_modified=tuple(files),
        skipped=lines.skipped,
        error=error,
    )
