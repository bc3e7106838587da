"""A turn that an API error ended instead of the agent (Claude Code's ``StopFailure``): what the loop
records of it. A usage or rate limit is the runner's wait (``rate_limited`` at the current iteration:
never an iteration, never a failed validation, the reset time when the agent gave one); any other API
error is an ``error_recorded`` naming it. Either way the iteration stays where it is: the next turn the
agent ends is that iteration's turn. The rule: docs/design/claude-code-hooks.md."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import msgspec

from ledger import events as ev


class FailedTurn(msgspec.Struct, frozen=True, kw_only=True):
    """A turn an API error ended, as a driver read it: the client's kind of ``error``, what it said
    (``message``), and, for a usage or rate limit (``limited``), its reason, its reset time
    (``None``: not given) and the wait the driver computed."""

    error: str
    message: str = ""
    limited: bool = False
    reason: str = ""
    resets_at: datetime | None = None
    wait_s: float = 0.0


def limited_in_a_row(events: Sequence[ev.AnyEvent], iteration: int) -> int:
    """How many ``rate_limited`` events the current ``iteration`` has had since its last turn (the
    back-off's attempt count)."""
    count = 0
    for e in reversed(events):
        if isinstance(e, ev.RateLimited) and e.iteration == iteration:
            count += 1
        elif isinstance(e, ev.AgentTurn | ev.IterationStarted):
            break
    return count


def failure_events(sid: str, iteration: int, failed: FailedTurn, component: str) -> list[ev.Event]:
    """What the loop records of ``failed`` at ``iteration`` (by ``component``, for an error)."""
    if failed.limited:
        reason = failed.reason or failed.message or failed.error
        return [
            ev.RateLimited(
                session_id=sid,
                iteration=iteration,
                reason=reason,
                resets_at=failed.resets_at,
                wait_s=failed.wait_s,
            )
        ]
    said = " ".join(failed.message.split())[:500]
    message = f"the turn ended on an API error ({failed.error})" + (f": {said}" if said else "")
    return [ev.ErrorRecorded(session_id=sid, iteration=iteration, component=component, message=message)]


def waiting_line(sid: str, iteration: int, failed: FailedTurn, now: datetime) -> str:
    """The line that says a loop waits out a limit (until its reset, when known)."""
    if failed.resets_at is not None:
        until = failed.resets_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    else:
        until = f"about {failed.wait_s:.0f} s from {now.astimezone(UTC).strftime('%H:%M UTC')}"
    return (
        f"⏳ {sid}: usage limit ({failed.reason or failed.error}); waiting until {until}, then "
        f"iteration {iteration} goes on (not counted as an iteration)"
    )
