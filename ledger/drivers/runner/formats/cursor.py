"""Cursor's agent CLI, ``cursor-agent`` (or ``agent``) ``-p --output-format stream-json`` or
``json``: one JSON event per line, as Cursor documents it (the CLI is not open source and no
captured stream of it was found).

``system`` ``init`` names the model, ``assistant`` and ``result`` carry the text, ``tool_call``
lines the tool calls and edited files; no tokens or cost are documented. Each event:
docs/design/agent-formats.md#cursor.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from ledger.drivers.runner.formats.report import AgentReport, Lines

EDIT_CALLS: Final = frozenset({"writeToolCall", "editToolCall"})

KNOWN: Final = frozenset({"system", "user", "assistant", "thinking", "tool_call", "result"})


class _Block(msgspec.Struct, gc=False):
    type: str = ""
    text: str | None = None


class _Message(msgspec.Struct, gc=False):
    content: list[_Block] | None = None


class _Call(msgspec.Struct, gc=False):
    args: Any = None
    result: Any = None


class _Line(msgspec.Struct, gc=False):
    type: str = ""
    subtype: str | None = None
    model: str | None = None
    message: _Message | None = None
    call_id: str | None = None
    tool_call: dict[str, _Call] | None = None
    result: str | None = None


def _edited(calls: dict[str, _Call]) -> list[str]:
    """The files a completed call's edit tools name (``args.path``), when they succeeded."""
    out = []
    for name, call in calls.items():
        path = call.args.get("path") if isinstance(call.args, dict) else None
        succeeded = isinstance(call.result, dict) and "success" in call.result
        if name in EDIT_CALLS and isinstance(path, str) and path and succeeded:
            out.append(path)
    return out


def parse(output: str) -> AgentReport:
    """The report of a Cursor agent ``stream-json`` or ``json`` output."""
    lines = Lines(output, _Line)
    model, texts, result = "", list[str](), None
    tools: set[str] = set()
    anonymous_tools = 0
    files: dict[str, None] = {}
    for line in lines:
        if line.type not in KNOWN:
            lines.unknown()
        elif line.type == "system" and line.model:
            model = model or line.model
        elif line.type == "assistant" and line.message is not None and line.message.content:
            texts.extend(b.text for b in line.message.content if b.type == "text" and b.text)
        elif line.type == "result" and line.result is not None:
            result = line.result
        elif line.type == "tool_call":
            if line.call_id:
                tools.add(line.call_id)
            elif line.subtype == "completed":
                anonymous_tools += 1
            if line.subtype == "completed" and line.tool_call:
                files.update((path, None) for path in _edited(line.tool_call))
    return AgentReport(
        text=result if result is not None else "".join(texts),
        model=model,
        tool_count=len(tools) + anonymous_tools,
        files_modified=tuple(files),
        skipped=lines.skipped,
    )
