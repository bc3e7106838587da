"""An agent's todo list (Claude Code's ``TodoWrite`` items), for the ``todos`` rule."""

from __future__ import annotations

from typing import Literal

import msgspec


class Todo(msgspec.Struct, frozen=True, kw_only=True):
    """One item of an agent's todo list."""

    content: str
    status: Literal["pending", "in_progress", "completed"]
    activeForm: str = ""  # Claude Code's own key
