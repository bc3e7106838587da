"""The agent's current todo list in a Claude Code transcript: its ``TodoWrite`` list, or its task list.

:func:`find_last_todos` reads backwards from the end of the transcript to the last point that sets
the whole list (an accepted ``TodoWrite`` or a ``TaskList`` result), then replays what came after
it. Which calls count, as the real client writes them: docs/design/transcripts.md#the-todo-list.
Imports only the standard library, msgspec and ``ledger.loop.validate.todos``: the Stop hook runs it.
"""

from __future__ import annotations

from typing import Final

import msgspec

from ledger.drivers.claude_code.transcript.lines import (
    DEFAULT_MAX_BYTES,
    MAX_LINE_BYTES,
    BackwardLines,
    PathArg,
    open_regular,
)
from ledger.loop.validate.todos import Todo, TodoStatus

TOOL: Final = "TodoWrite"
TASK_TOOLS: Final = frozenset({"TaskCreate", "TaskUpdate", "TaskList"})

_MARKS: Final = (b"TodoWrite", b"Task", b"is_error", b"toolUseResult")
_STATUSES: Final[frozenset[str]] = frozenset({"pending", "in_progress", "completed"})


class _Input(msgspec.Struct, gc=False):
    todos: list[Todo]


class _TaskInput(msgspec.Struct, gc=False, omit_defaults=True):
    taskId: str | int | None = None
    subject: str | None = None
    status: str | None = None
    activeForm: str | None = None

    @property
    def deletes(self) -> bool:
        """Whether this ``TaskUpdate`` deletes its task (a task's status, not a session's)."""
        return self.status in _DELETING


class _Block(msgspec.Struct, gc=False):
    type: str | None = None
    name: str | None = None
    id: str | None = None
    tool_use_id: str | None = None
    is_error: bool | None = None
    input: msgspec.Raw = msgspec.Raw()  # decoded only for the tools read here


class _Message(msgspec.Struct, gc=False):
    content: str | list[_Block] | None = None


class _Task(msgspec.Struct, gc=False):
    id: str | int | None = None
    subject: str | None = None
    status: str | None = None


class _Result(msgspec.Struct, gc=False):
    task: _Task | None = None  # TaskCreate
    tasks: list[_Task] | None = None  # TaskList
    success: bool | None = None  # TaskUpdate
    taskId: str | int | None = None


class _Line(msgspec.Struct, gc=False, rename="camel"):
    type: str | None = None
    is_sidechain: bool | None = None
    message: _Message | None = None
    tool_use_result: msgspec.Raw = msgspec.Raw()


_line: Final = msgspec.json.Decoder(_Line)
_input: Final = msgspec.json.Decoder(_Input)
_task_input: Final = msgspec.json.Decoder(_TaskInput)
_result: Final = msgspec.json.Decoder(_Result)


def _decode(raw: bytes) -> _Line | None:
    if not any(mark in raw for mark in _MARKS):
        return None
    try:
        line = _line.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if line.is_sidechain or line.message is None or not isinstance(line.message.content, list):
        return None
    return line if line.type in ("assistant", "user") else None


def todos_of_line(raw: bytes) -> list[Todo] | None:
    """The list the line's last valid ``TodoWrite`` call writes, or ``None`` when it writes none."""
    line = _decode(raw)
    found: list[Todo] | None = None
    for call in _calls(line) if line is not None else []:
        if call.name == TOOL:
            found = _todowrite(call) or found
    return found


def _calls(line: _Line) -> list[_Block]:
    content = line.message.content if line.type == "assistant" and line.message else None
    return [b for b in content if b.type == "tool_use"] if isinstance(content, list) else []


def _results(line: _Line) -> list[_Block]:
    content = line.message.content if line.type == "user" and line.message else None
    return [b for b in content if b.type == "tool_result"] if isinstance(content, list) else []


def _todowrite(call: _Block) -> list[Todo] | None:
    try:
        return _input.decode(call.input).todos
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


_DELETING: Final = frozenset({"deleted"})
"""The ``TaskUpdate`` status that removes a task from the list."""


def _status(raw: str | None) -> TodoStatus:
    return raw if raw in _STATUSES else "pending"  # type: ignore[return-value]


class _Replay:
    """The list as the lines after a point that set it leave it (``None``: no list known)."""

    def __init__(self) -> None:
        self.items: dict[str, Todo] | None = None
        self.calls: dict[str, _Block] = {}  # tool_use id -> the call, for its result
        self.before: dict[str, dict[str, Todo] | None] = {}  # a TodoWrite's id -> the list it replaced

    def line(self, line: _Line) -> None:
        for call in _calls(line):
            if call.id and (call.name == TOOL or call.name in TASK_TOOLS):
                self.calls[call.id] = call
            todos = _todowrite(call) if call.name == TOOL else None
            if todos is not None:
                if call.id:
                    self.before[call.id] = self.items
                self.items = {str(i): t for i, t in enumerate(todos)}
        results = _results(line)
        for block in results:
            known = self.calls.get(block.tool_use_id or "")
            if known is None:  # its call is before the point read back to: a TaskList's snapshot counts
                if not block.is_error:
                    self._task(_Block(name="TaskList"), line.tool_use_result)
                continue
            call = known
            if block.is_error:
                if call.name == TOOL and call.id in self.before:  # refused: the list before it stays
                    self.items = self.before.pop(call.id)
                continue
            if call.name in TASK_TOOLS:
                self._task(call, line.tool_use_result)

    def _task(self, call: _Block, raw: msgspec.Raw) -> None:
        try:
            result = _result.decode(raw) if raw else _Result()
            given = _task_input.decode(call.input) if call.input else _TaskInput()
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        items = dict(self.items or {})
        if call.name == "TaskList" and result.tasks is not None:
            old = items
            items = {}
            for t in result.tasks:
                key = str(t.id)
                form = old[key].activeForm if key in old else ""
                items[key] = Todo(content=t.subject or "", status=_status(t.status), activeForm=form)
        elif call.name == "TaskCreate" and result.task is not None and result.task.id is not None:
            subject = result.task.subject or given.subject or ""
            items[str(result.task.id)] = Todo(
                content=subject, status="pending", activeForm=given.activeForm or ""
            )
        elif call.name == "TaskUpdate" and result.success:
            key = str(result.taskId if result.taskId is not None else given.taskId)
            if given.deletes:
                items.pop(key, None)
            elif key in items:
                was = items[key]
                items[key] = Todo(
                    content=given.subject if given.subject is not None else was.content,
                    status=_status(given.status) if given.status is not None else was.status,
                    activeForm=given.activeForm if given.activeForm is not None else was.activeForm,
                )
        else:
            return
        self.items = items


def _sets_all(line: _Line, refused: set[str]) -> bool:
    """Whether the line sets the whole list (reading backwards: ``refused`` holds the tool_use ids
    whose results, read already, were errors)."""
    for call in _calls(line):
        if call.name == TOOL and call.id not in refused and _todowrite(call) is not None:
            return True
    return False


def _snapshot(line: _Line) -> bool:
    """Whether the line is a ``TaskList`` result that went through: the whole task list."""
    if (
        line.type != "user"
        or b'"tasks"' not in bytes(line.tool_use_result)
        or any(b.is_error for b in _results(line))
    ):
        return False
    try:
        return _result.decode(line.tool_use_result).tasks is not None
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False


def find_last_todos(
    path: PathArg, *, max_bytes: int = DEFAULT_MAX_BYTES, max_line_bytes: int = MAX_LINE_BYTES
) -> list[Todo] | None:
    """The agent's current todo list (see the module docstring), or ``None`` when none is written
    within the last ``max_bytes``. Raises ``OSError`` (``FileNotFoundError`` if missing) when the
    file cannot be read; never for its content."""
    lines: list[_Line] = []
    refused: set[str] = set()
    with open_regular(path, 0) as f:
        for raw in BackwardLines(f, max_bytes, max_line_bytes):
            line = None if raw is None else _decode(raw)
            if line is None:
                continue
            lines.append(line)
            refused.update(b.tool_use_id or "" for b in _results(line) if b.is_error)
            if _sets_all(line, refused) or _snapshot(line):
                break
    replay = _Replay()
    for line in reversed(lines):
        replay.line(line)
    return None if replay.items is None else list(replay.items.values())


__all__ = ["TASK_TOOLS", "TOOL", "find_last_todos", "todos_of_line"]
