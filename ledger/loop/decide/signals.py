"""Signal resolution: what one validate call answers, from everything it saw.

``resolve`` applies the one table (first matching row wins): a manual stop, the guards' trips, a
BLOCKED promise, the hooks, then the promise alone; a COMPLETE passes the completion gate
(``Inputs.refusals``, ``require_passing_validation``). The table, the gate and why the rows are in
this order: docs/design/signals.md. ``tests/unit/test_signals.py`` has a test per row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.events import HookAction, Signal


@dataclass(frozen=True, slots=True)
class Trip:
    """A guard that tripped during this validate call."""

    guard: str
    signal: Signal
    detail: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Resolution:
    """The signal one validate call answers, why, and the table ``row`` that decided it."""

    signal: Signal
    reason: str
    row: int


@dataclass(frozen=True, slots=True)
class Inputs:
    """What signal resolution looks at (all optional but the verdict)."""

    validation_passed: bool
    manual_stop: str | None = None
    trips: Sequence[Trip] = ()
    promise: Signal | None = None
    promise_word: str = ""
    promise_reason: str = ""
    hooks_registered: bool = False
    hook_action: HookAction | None = None
    hook_reason: str = ""
    require_passing_validation: bool = False
    refusals: Sequence[str] = ()  # "name: message" of each failed rule that gates completion


def _gate(inputs: Inputs, reason: str, row: int) -> Resolution:
    if inputs.refusals:
        return Resolution("CONTINUE", f"completion refused ({reason}): {'; '.join(inputs.refusals)}", row)
    if inputs.require_passing_validation and not inputs.validation_passed:
        return Resolution("CONTINUE", f"completion claimed but validation failed ({reason})", row)
    return Resolution("COMPLETE", reason, row)


def resolve(inputs: Inputs) -> Resolution:
    """Apply the table above."""
    if inputs.manual_stop is not None:
        return Resolution("BLOCKED", f"manual stop: {inputs.manual_stop}".rstrip(": "), 1)
    blocked = [t for t in inputs.trips if t.signal == "BLOCKED"]
    if blocked:
        return Resolution("BLOCKED", f"{blocked[0].guard}: {blocked[0].detail}", 2)
    if inputs.trips:
        return Resolution("ESCALATE", f"{inputs.trips[0].guard}: {inputs.trips[0].detail}", 3)
    word = inputs.promise_word or str(inputs.promise)
    if inputs.promise == "BLOCKED":
        why = f": {inputs.promise_reason}" if inputs.promise_reason else ""
        return Resolution("BLOCKED", f"agent promised {word}{why}", 4)
    if inputs.hooks_registered:
        if inputs.hook_action == "escalate":
            return Resolution("ESCALATE", inputs.hook_reason or "hook escalated", 5)
        if inputs.hook_action == "complete":
            return _gate(inputs, inputs.hook_reason or "hook completed", 6)
        return Resolution("CONTINUE", inputs.hook_reason or "hook continued", 7)
    if inputs.promise == "COMPLETE":
        return _gate(inputs, f"agent promised {word}", 8)
    if inputs.promise == "ESCALATE":
        return Resolution("ESCALATE", f"agent promised {word}", 9)
    reason = "validation passed; no completion promise" if inputs.validation_passed else "validation failed"
    return Resolution("CONTINUE", reason, 10)
