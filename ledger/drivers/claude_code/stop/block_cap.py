"""Claude Code's block cap, counted by the loop so that Claude Code never ends a loop silently.

Claude Code ends a turn by itself once the hook has blocked ``CLAUDE_CODE_STOP_HOOK_BLOCK_CAP``
times in a row without progress (default 8; 0: no cap). The loop keeps the same count from its
journal (:func:`blocks_without_progress`, the one definition) and, at the stop Claude Code would
override, allows it, records a ``block_cap`` guard trip and escalates (:func:`cap_reached`); the cap
is read from the hook's environment (:func:`block_cap`). Both modes use it:
docs/design/claude-code-stop.md#3-the-block-cap.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Final

from ledger import events as ev

ENV: Final = "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"
DEFAULT_CAP: Final = 8
GUARD: Final = "block_cap"


def block_cap(env: Mapping[str, str] | None = None) -> tuple[int, str]:
    """The cap Claude Code applies (0: off), and the one line for stderr when the variable is set
    to something else than a whole number >= 0 (the default applies then)."""
    raw = (os.environ if env is None else env).get(ENV)
    if raw is None or not raw.strip():
        return DEFAULT_CAP, ""
    text = raw.strip()
    if text.isascii() and text.isdigit():
        return int(text), ""
    line = f"ralph-ledger hook: {ENV}={raw!r}: expected a whole number >= 0 (0: no cap); using {DEFAULT_CAP}"
    return DEFAULT_CAP, line


def blocks_without_progress(events: Iterable[ev.Event]) -> int:
    """The stops blocked in a row without progress after ``events`` (one loop's, in journal order,
    the stop being decided's ``agent_turn`` last): each ``stop_decided`` block adds one, an allow
    sets the count back to 0, and so does an ``agent_turn`` with a tool call (the continuation
    after a block made progress). Claude Code's own count, as far as the journal can tell."""
    count = 0
    for e in events:
        if isinstance(e, ev.AgentTurn) and e.tool_count > 0:
            count = 0
        elif isinstance(e, ev.StopDecided):
            count = count + 1 if e.decision == "block" else 0
    return count


def cap_reached(events: Iterable[ev.Event], cap: int) -> int:
    """The count a block at this stop would reach when it goes past ``cap`` (Claude Code would
    override it and end the turn), else 0 (also when ``cap`` is 0: no cap)."""
    count = blocks_without_progress(events) + 1
    return count if cap > 0 and count > cap else 0


def trip_reason(count: int, cap: int) -> str:
    """Why the loop stops at the cap: the guard trip's detail and the session's reason."""
    return (
        f"{count - 1} stops blocked in a row without a tool call: Claude Code overrides the next block "
        f"past {ENV} ({cap}) and ends the turn; the loop stops here instead of being ended silently"
    )


def trip(sid: str, iteration: int, count: int, cap: int) -> ev.GuardTripped:
    """The guard trip recorded at the cap (the session then ends escalated, guard ``block_cap``):
    ``count`` is what this stop's block would have made (:func:`cap_reached`), so ``count - 1``
    blocks went through in a row."""
    return ev.GuardTripped(
        session_id=sid,
        iteration=iteration,
        guard=GUARD,
        signal="ESCALATE",
        detail=trip_reason(count, cap),
        evidence={"blocks_without_progress": count - 1, "cap": cap},
    )


def system_message(iteration: int, count: int, cap: int) -> str:
    """The message shown to the user when the loop stops at the cap."""
    return (
        f"🛑 Ralph loop escalated at iteration {iteration}: {trip_reason(count, cap)}. "
        f"Raise {ENV} (0: no cap) or make the agent use its tools, then start the loop again."
    )


def allow_json(message: str) -> str:
    """What the hook prints to allow the stop with ``message`` shown to the user."""
    import msgspec

    return msgspec.json.encode({"systemMessage": message}).decode() + "\n"
