"""The agent's current todo list in a Claude Code transcript: the input of its last ``TodoWrite`` call.

A ``TodoWrite`` replaces the whole list, and the list outlives turns and stops, so the current one
is the last call in the whole transcript, not only since the last stop. :func:`find_last_todos`
reads the transcript backwards from its end (as ``last_text`` does) and decodes only the lines that
mention ``TodoWrite``, so it costs little where the list was written recently.

Which calls count: ``tool_use`` blocks named ``TodoWrite`` in assistant lines that are not a
sidechain (a sub-agent's list is its own), whose ``input.todos`` is a list of items of the
:class:`ledger.loop.todos.Todo` shape. A call whose input does not have that shape is skipped, as
Claude Code refuses it and the list before it stays. Imports only the standard library, msgspec and
``ledger.loop.todos``: the Stop hook runs it.
"""

from __future__ import annotations

from typing import Final

import msgspec

from ledger.agents.claude_code.lines import (
    DEFAULT_MAX_BYTES,
    MAX_LINE_BYTES,
    BackwardLines,
    PathArg,
    open_regular,
)
from ledger.loop.todos import Todo

TOOL: Final = "TodoWrite"

_MARK: Final = TOOL.encode()


class _Input(msgspec.Struct, gc=False):
    todos: list[Todo]


class _Block(msgspec.Struct, gc=False):
    type: str | None = None
    name: str | None = None
    input: msgspec.Raw = msgspec.Raw()  # decoded only for a TodoWrite call


class _Message(msgspec.Struct, gc=False):
    content: str | list[_Block] | None = None


class _Line(msgspec.Struct, gc=False, rename="camel"):
    type: str | None = None
    is_sidechain: bool | None = None
    message: _Message | None = None


_line: Final = msgspec.json.Decoder(_Line)
_input: Final = msgspec.json.Decoder(_Input)


def todos_of_line(raw: bytes) -> list[Todo] | None:
    """The list the line's last valid ``TodoWrite`` call writes, or ``None`` when it writes none."""
    if _MARK not in raw:
        return None
    try:
        line = _line.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if line.type != "assistant" or line.is_sidechain or line.message is None:
        return None
    content = line.message.content
    found: list[Todo] | None = None
    for block in content if isinstance(content, list) else []:
        if block.type == "tool_use" and block.name == TOOL:
            try:
                found = _input.decode(block.input).todos
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
    return found


def find_last_todos(
    path: PathArg, *, max_bytes: int = DEFAULT_MAX_BYTES, max_line_bytes: int = MAX_LINE_BYTES
) -> list[Todo] | None:
    """The todo list of the transcript's last valid ``TodoWrite`` call, or ``None`` when there is
    none within the last ``max_bytes``. Raises ``OSError`` (``FileNotFoundError`` if missing) when
    the file cannot be read; never for its content."""
    with open_regular(path, 0) as f:
        for raw in BackwardLines(f, max_bytes, max_line_bytes):
            todos = None if raw is None else todos_of_line(raw)
            if todos is not None:
                return todos
    return None


__all__ = ["TOOL", "find_last_todos", "todos_of_line"]
