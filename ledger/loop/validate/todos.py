"""The agent's own todo list: what the ``todos`` rule checks (docs/design/validation.md).

A :class:`Todo` is one item of Claude Code's ``TodoWrite`` tool input, field for field (an MCP
client passes the same shape); the list an agent wrote last is its current one. Claude Code's
ledger-native hook reads it from the transcript (``ledger.drivers.claude_code.transcript.last_todos``); a
caller that cannot know it passes ``None``. Imports only msgspec: the Stop hook loads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Literal

import msgspec

TodoStatus = Literal["pending", "in_progress", "completed"]

FINISHED: Final[frozenset[TodoStatus]] = frozenset({"completed"})
"""The statuses of a finished item (a todo's status is not a session's)."""

SHOWN: Final = 3
"""How many unfinished items a summary names (the first three)."""

CONTENT_CUT: Final = 60
"""Longest item content a summary shows before an ellipsis."""


class Todo(msgspec.Struct, frozen=True, kw_only=True):
    """One todo item as Claude Code's ``TodoWrite`` writes it."""

    content: str
    status: TodoStatus
    activeForm: str = ""  # Claude Code's field name


def unfinished(todos: Iterable[Todo]) -> list[Todo]:
    """The items not ``completed``, in list order."""
    return [t for t in todos if t.status not in FINISHED]


def _cut(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= CONTENT_CUT else line[: CONTENT_CUT - 1] + "…"


def summary(todos: Sequence[Todo] | None) -> tuple[bool, str]:
    """Whether the list is done, and one line saying so: ``2 todos remaining: Write tests, Fix
    lint`` (the first :data:`SHOWN` items, then ``and N more``), ``all 4 todos completed``, or that
    no list is known (``None``) or the list is empty."""
    if todos is None:
        return True, "no todo list known (none written or passed in)"
    left = unfinished(todos)
    if not left:
        return True, f"all {len(todos)} {_noun(len(todos))} completed" if todos else "the todo list is empty"
    names = ", ".join(_cut(t.content) for t in left[:SHOWN])
    more = f", and {len(left) - SHOWN} more" if len(left) > SHOWN else ""
    return False, f"{len(left)} {_noun(len(left))} remaining: {names}{more}"


def _noun(n: int) -> str:
    return "todo" if n == 1 else "todos"


def todos_wanted(rules: Iterable[object]) -> bool:
    """Whether configured rule tables (``LoopConfig.rules``) enable a ``todos`` rule: a caller reads
    the agent's todo list only then (reading a long transcript for it has a cost)."""
    return any(
        isinstance(r, Mapping) and r.get("type") == "todos" and r.get("enabled", True) is not False
        for r in rules
    )


__all__ = ["FINISHED", "SHOWN", "Todo", "TodoStatus", "summary", "todos_wanted", "unfinished"]
