"""opencode's ``opencode run --format json``: one JSON event per line, ``{"type", "timestamp",
"sessionID", ...}``.

``step_finish`` carries each model request's cost and tokens (summed), ``tool_use`` the tool calls
and edited files, ``text`` the final text (written after the last tool call), ``error`` an error
that ended the run. Each event, as opencode 1.18.33 writes it: docs/design/agent-formats.md#opencode.
"""

from __future__ import annotations

from typing import Final

import msgspec

from ledger.drivers.claude_code.transcript.scan import add_usage
from ledger.drivers.runner.formats.report import AgentReport, Lines
from ledger.events import TokenUsage

EDIT_TOOLS: Final = frozenset({"edit", "write", "multiedit"})

KNOWN: Final = frozenset({"step_start", "text", "reasoning", "tool_use", "step_finish", "error", "done"})


class _Cache(msgspec.Struct, gc=False):
    read: int = 0
    write: int = 0


class _Tokens(msgspec.Struct, gc=False):
    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache: _Cache = msgspec.field(default_factory=_Cache)


class _Input(msgspec.Struct, gc=False):
    file_path: str | None = msgspec.field(default=None, name="filePath")


class _State(msgspec.Struct, gc=False):
    outcome: str = msgspec.field(default="", name="status")  # a tool's, not a session's
    input: _Input | None = None


class _Part(msgspec.Struct, gc=False):
    id: str | None = None
    text: str | None = None
    tool: str | None = None
    state: _State | None = None
    cost: float | None = None
    tokens: _Tokens | None = None


class _ErrorData(msgspec.Struct, gc=False):
    message: str | None = None


class _Error(msgspec.Struct, gc=False):
    name: str | None = None
    data: _ErrorData | None = None


class _Line(msgspec.Struct, gc=False):
    type: str = ""
    part: _Part | None = None
    error: _Error | None = None


def _tokens(t: _Tokens) -> TokenUsage:
    return TokenUsage(
        input=t.input, output=t.output + t.reasoning, cache_read=t.cache.read, cache_creation=t.cache.write
    )


def parse(output: str) -> AgentReport:
    """The report of an ``opencode run --format json`` output."""
    lines = Lines(output, _Line)
    tokens, cost = TokenUsage(), None
    tools: set[str] = set()
    anonymous_tools = 0
    files: dict[str, None] = {}
    chunks: list[str] = []
    error = ""
    for line in lines:
        part = line.part
        if line.type not in KNOWN:
            lines.unknown()
        elif line.type == "error":
            e = line.error
            error = (e.data.message if e and e.data else None) or (e.name if e else None) or "error"
        elif part is None:
            continue
        elif line.type == "step_finish":
            if part.tokens is not None:
                tokens = add_usage(tokens, _tokens(part.tokens))
            if part.cost is not None:
                cost = (cost or 0.0) + part.cost
        elif line.type == "tool_use":
            if part.id:
                tools.add(part.id)
            else:
                anonymous_tools += 1
            chunks = []  # the final text is what follows the last tool call
            state = part.state
            path = state.input.file_path if state is not None and state.input is not None else None
            if part.tool in EDIT_TOOLS and state is not None and state.outcome == "completed" and path:
                files[path] = None
        elif line.type == "text" and part.text:
            chunks.append(part.text)
    if cost == 0.0 and tokens != TokenUsage():
        cost = None  # opencode knows no price for the model: unknown, priced by the ledger if it can
    return AgentReport(
        text="".join(chunks),
        tokens=tokens,
        cost_usd=cost,
        tool_count=len(tools) + anonymous_tools,
        files_modified=tuple(files),
        skipped=lines.skipped,
        error=error,
    )
