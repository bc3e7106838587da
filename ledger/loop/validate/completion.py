"""The stop contract ``validate_completion``, as a stop hook's decision: allow or block a stop.

``decide_stop`` asks an optional validator and fails open (a broken validator never traps an
agent); ``to_events`` records a decision as ``StopDecided`` (and ``ErrorRecorded``);
``retry_count_from`` is the one count of stops blocked in a row, which the ``max_stop_retries``
guard uses too. Each case: docs/design/validation.md#validate_completion. Plain Python: this module
imports neither DuckDB nor pyarrow (a test checks it), so a stop hook can use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from ledger import events as ev
from ledger.core.errors import one_line

MAX_STOP_RETRIES: Final = 3
VALIDATE_COMPLETION: Final = "validate_completion"
"""The contract's reserved tool name; also the ``component`` of recorded errors."""


@dataclass(frozen=True, slots=True)
class ValidationParams:
    """Input to the validate_completion tool."""

    stop_reason: str
    """Reason provided by the agent (e.g., 'end_turn', 'max_turns')."""

    tool_count: int
    """Number of tools invoked during this execution."""

    retry_count: int
    """How many times stop has been blocked (0 on first attempt)."""


@dataclass(frozen=True, slots=True)
class ValidationResult:
    """Output from the validate_completion tool."""

    complete: bool
    """True if the task is considered complete."""

    reason: str
    """Human-readable explanation."""

    def render(self) -> str:
        """``"[complete] reason"`` or ``"[incomplete] reason"``."""
        status = "complete" if self.complete else "incomplete"
        return f"[{status}] {self.reason}"


Validator = Callable[[ValidationParams], ValidationResult]


def always_complete(params: ValidationParams) -> ValidationResult:
    """The default validator: every stop is allowed."""
    return ValidationResult(complete=True, reason="No validation configured")


def composite_validator(*validators: Validator) -> Validator:
    """Combine validators with AND logic: the first incomplete result wins
    (later validators are not called); exceptions propagate to the caller."""

    def combined(params: ValidationParams) -> ValidationResult:
        for validator in validators:
            result = validator(params)
            if not result.complete:
                return result
        return ValidationResult(complete=True, reason="All validators passed")

    return combined


@dataclass(frozen=True, slots=True, kw_only=True)
class StopDecision:
    """What the stop hook answers, and why.

    ``retry_count`` is the number of stops blocked in a row *after* this
    decision: ``params.retry_count + 1`` for a block, 0 for an allow (an
    allowed stop resets the count, as ``retry_count_from`` reads it back).
    """

    decision: ev.StopDecision
    reason: str
    warning: str = ""
    retry_count: int
    result: ValidationResult | None = None
    """The validator's answer, when it gave one."""
    error: str = ""
    """``"Type: message"`` (one line) when the validator raised."""

    @property
    def system_message(self) -> str:
        """The warning if any, else the rendered result, else empty."""
        if self.warning:
            return self.warning
        return self.result.render() if self.result is not None else ""


def describe_error(exc: BaseException) -> str:
    """``"Type: the error's one line"`` (``ledger.core.errors.one_line``; just the type when the
    message is empty)."""
    name, line = type(exc).__name__, one_line(exc)
    return name if line == name else f"{name}: {line}"


def _validate(validator: Validator, params: ValidationParams) -> ValidationResult:
    """Call the validator, insisting on a ``ValidationResult``."""
    result = validator(params)
    if not isinstance(result, ValidationResult):
        raise TypeError(f"validator returned {type(result).__name__}, not ValidationResult")
    return result


def _allow(reason: str, *, warning: str = "", error: str = "") -> StopDecision:
    return StopDecision(decision="allow", reason=reason, warning=warning, retry_count=0, error=error)


def decide_stop(
    validator: Validator | None, params: ValidationParams, *, max_stop_retries: int = MAX_STOP_RETRIES
) -> StopDecision:
    """The stop decision as a pure function (docs/design/validation.md#validate_completion).

    Any ``Exception`` from the validator is caught and allows the stop with a
    warning; ``BaseException`` (e.g. ``KeyboardInterrupt``) propagates.
    """
    if validator is None:
        return _allow("No validator attached")
    if params.retry_count >= max_stop_retries:
        warning = f"max stop retries ({max_stop_retries}) reached; allowing stop"
        return _allow(warning, warning=warning)
    try:
        result = _validate(validator, params)
    except Exception as exc:
        error = describe_error(exc)
        warning = f"validator failed: {error}; allowing stop"
        return _allow(warning, warning=warning, error=error)
    if result.complete:
        return StopDecision(decision="allow", reason=result.reason, retry_count=0, result=result)
    return StopDecision(
        decision="block", reason=result.reason, retry_count=params.retry_count + 1, result=result
    )


def to_events(decision: StopDecision, *, session_id: str, iteration: int) -> list[ev.Event]:
    """The journal events recording ``decision`` (unsequenced, for ``Journal.append``)."""
    events: list[ev.Event] = [
        ev.StopDecided(
            session_id=session_id,
            iteration=iteration,
            decision=decision.decision,
            reason=decision.reason,
            system_message=decision.system_message,
        )
    ]
    if decision.error:
        events.append(
            ev.ErrorRecorded(
                session_id=session_id,
                iteration=iteration,
                component=VALIDATE_COMPLETION,
                message=decision.warning,
            )
        )
    return events


def retry_count_from(events: Iterable[ev.Event]) -> int:
    """Stops blocked in a row: the ``StopDecided`` blocks of the latest
    iteration (the highest among ``StopDecided`` events) after the last allow
    (of any iteration). ``events`` are one session's, in journal (seq) order.

    The one implementation of this rule: the engine's ``max_stop_retries``
    guard (``ledger.loop.decide.facts``) and the stop hook both call it.
    """
    latest = 0
    blocks: dict[int, int] = {}  # iteration -> blocks since the last allow
    for e in events:
        if not isinstance(e, ev.StopDecided):
            continue
        latest = max(latest, e.iteration)
        if e.decision == "allow":
            blocks.clear()
        else:
            blocks[e.iteration] = blocks.get(e.iteration, 0) + 1
    return blocks.get(latest, 0)
