"""GitHub Copilot CLI's ``copilot --output-format json``: one JSON event per line, ``{"type", "data",
"id", "timestamp", "parentId", "ephemeral"}``.

``assistant.message`` carries the text and the model (the final text: the last message that calls
no tool, never a sub-agent's), ``tool.execution_complete`` the tool calls and edited files,
``session.error`` an error that ended the run. The stream reports no tokens and no cost
(``ledger.drivers.runner.formats.copilot_usage`` reads them). As Copilot CLI 1.0.102 writes them:
docs/design/agent-formats.md#github-copilot-cli.
"""

from __future__ import annotations

import re
from typing import Final

import msgspec

from ledger.drivers.runner.formats.report import AgentReport, Lines

KIND: Final = re.compile(r"[a-z_]+(?:\.[a-z_]+)+")
"""Copilot's event types (``namespace.kind``: ``schemas/session-events.schema.json`` in its package
lists 150 of them)."""


class _Edit(msgspec.Struct, gc=False):
    path: str = ""


class _Changes(msgspec.Struct, gc=False):
    files_modified: list[str] = msgspec.field(default_factory=list, name="filesModified")


class _Usage(msgspec.Struct, gc=False):
    code_changes: _Changes | None = msgspec.field(default=None, name="codeChanges")


class _Data(msgspec.Struct, gc=False):
    content: str | None = None
    model: str | None = None
    tool_requests: list[object] | None = msgspec.field(default=None, name="toolRequests")
    parent_tool_call_id: str | None = msgspec.field(default=None, name="parentToolCallId")
    tool_call_id: str | None = msgspec.field(default=None, name="toolCallId")
    success: bool = False
    file_edits: list[_Edit] | None = msgspec.field(default=None, name="fileEdits")
    message: str | None = None


class _Line(msgspec.Struct, gc=False):
    type: str = ""
    agent_id: str | None = msgspec.field(default=None, name="agentId")  # a sub-agent's event
    data: _Data | None = None
    usage: _Usage | None = None


def _known(kind: str) -> bool:
    """Whether ``kind`` is one of Copilot's event types (``namespace.kind``, or ``result``)."""
    return kind == "result" or KIND.fullmatch(kind) is not None


def _main(line: _Line, data: _Data) -> bool:
    """Whether an event is the main agent's (a sub-agent's carries ``agentId``, or in its data a
    ``parentToolCallId``)."""
    return not line.agent_id and not data.parent_tool_call_id


def parse(output: str) -> AgentReport:
    """The report of a ``copilot --output-format json`` output."""
    lines = Lines(output, _Line)
    tools: dict[str, None] = {}
    files: dict[str, None] = {}
    text, model, error = "", "", ""
    for line in lines:
        data = line.data
        if not _known(line.type):
            lines.unknown()
        elif line.type == "assistant.message" and data is not None and _main(line, data):
            text = "" if data.tool_requests else (data.content or "")
            model = data.model or model
        elif line.type == "tool.execution_complete" and data is not None:
            if data.tool_call_id:
                tools[data.tool_call_id] = None
            if data.success and data.file_edits:
                files.update((e.path, None) for e in data.file_edits if e.path)
        elif line.type == "session.error" and data is not None:
            error = data.message or "session error"
        elif line.type == "result" and line.usage is not None and line.usage.code_changes is not None:
            files.update((path, None) for path in line.usage.code_changes.files_modified if path)
    return AgentReport(
        text=text,
        model=model,
        tool_count=len(tools),
        files_modified=tuple(files),
        skipped=lines.skipped,
        error=error,
    )
