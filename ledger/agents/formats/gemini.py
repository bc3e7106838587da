"""Google's Gemini CLI ``gemini --output-format stream-json``: one JSON event per line
(``docs/cli/headless.md`` and ``packages/core/src/output/types.ts`` in google-gemini/gemini-cli).

- ``init`` names the ``model``; ``message`` lines with ``role`` ``assistant`` carry the text (in
  chunks when ``delta`` is true): the final text is the assistant's text after the last tool call;
- ``tool_use`` is one tool call (``tool_name``, ``parameters``); ``write_file`` and ``replace``
  edit the file in ``parameters.file_path``;
- ``result`` carries the run's ``stats``: ``input_tokens`` (cache reads included),
  ``output_tokens``, and in newer versions ``cached`` and ``input`` (the part not cached).
- ``tool_result`` and ``error`` are known and carry nothing read here. No cost is reported.
"""

from __future__ import annotations

from typing import Final

import msgspec

from ledger.agents.formats.report import AgentReport, Lines, uncached
from ledger.events import TokenUsage

EDIT_TOOLS: Final = frozenset({"write_file", "replace"})

KNOWN: Final = frozenset({"init", "message", "tool_use", "tool_result", "error", "result"})


class _Stats(msgspec.Struct, gc=False):
    input_tokens: int = 0
    output_tokens: int = 0
    cached: int = 0
    input: int | None = None


class _Parameters(msgspec.Struct, gc=False):
    file_path: str | None = None


class _Line(msgspec.Struct, gc=False):
    type: str = ""
    model: str | None = None
    role: str | None = None
    content: str | None = None
    tool_name: str | None = None
    parameters: _Parameters | None = None
    stats: _Stats | None = None


def _tokens(stats: _Stats) -> TokenUsage:
    fresh = stats.input if stats.input is not None else uncached(stats.input_tokens, stats.cached)
    return TokenUsage(input=fresh, output=stats.output_tokens, cache_read=stats.cached)


def parse(output: str) -> AgentReport:
    """The report of a ``gemini --output-format stream-json`` output."""
    lines = Lines(output, _Line)
    model, chunks, tools = "", list[str](), 0
    files: dict[str, None] = {}
    tokens = TokenUsage()
    for line in lines:
        if line.type not in KNOWN:
            lines.unknown()
        elif line.type == "init" and line.model:
            model = line.model
        elif line.type == "message" and line.role == "assistant" and line.content:
            chunks.append(line.content)
        elif line.type == "tool_use":
            tools += 1
            chunks = []  # the final text is what follows the last tool call
            path = line.parameters.file_path if line.parameters is not None else None
            if line.tool_name in EDIT_TOOLS and path:
                files[path] = None
        elif line.type == "result" and line.stats is not None:
            tokens = _tokens(line.stats)  # the run's totals: the last result wins
    return AgentReport(
        text="".join(chunks),
        tokens=tokens,
        model=model,
        tool_count=tools,
        files_modified=tuple(files),
        skipped=lines.skipped,
    )
