"""The validate_completion stop contract: the stop decision, its events, and
the retry count read back from a journal (checked against the SQL detector)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import events as E
from ledger.loop.validate.completion import (
    MAX_STOP_RETRIES,
    StopDecision,
    ValidationParams,
    ValidationResult,
    Validator,
    always_complete,
    composite_validator,
    decide_stop,
    retry_count_from,
    to_events,
)
from ledger.storage.journal import Journal

DONE = ValidationResult(complete=True, reason="All todos done")
TODO = ValidationResult(complete=False, reason="2 todos remaining")


def params(retry_count: int = 0) -> ValidationParams:
    return ValidationParams(stop_reason="end_turn", tool_count=7, retry_count=retry_count)


def returning(result: ValidationResult, calls: list[str] | None = None, name: str = "") -> Validator:
    def validator(p: ValidationParams) -> ValidationResult:
        if calls is not None:
            calls.append(name)
        return result

    return validator


def raising(exc: Exception) -> Validator:
    def validator(p: ValidationParams) -> ValidationResult:
        raise exc

    return validator


# -- the contract's types ------------------------------------------------------


def test_render() -> None:
    assert DONE.render() == "[complete] All todos done"
    assert TODO.render() == "[incomplete] 2 todos remaining"


def test_always_complete_is_the_seeds_default() -> None:
    assert always_complete(params()) == ValidationResult(True, "No validation configured")


def test_the_default_max_is_three() -> None:
    assert MAX_STOP_RETRIES == 3


# -- the Error Handling table, row by row --------------------------------------


def test_validator_raises_allows_with_a_one_line_warning() -> None:
    got = decide_stop(raising(ValueError("boom")), params())
    assert got == StopDecision(
        decision="allow",
        reason="validator failed: ValueError: boom; allowing stop",
        warning="validator failed: ValueError: boom; allowing stop",
        retry_count=0,
        error="ValueError: boom",
    )


@pytest.mark.parametrize(
    ("exc", "error"),
    [(RuntimeError("first\nsecond"), "RuntimeError: first"), (KeyError(), "KeyError")],
)
def test_a_validators_error_is_named_in_one_line(exc: Exception, error: str) -> None:
    got = decide_stop(raising(exc), params())
    assert got.error == error and "\n" not in got.warning


def test_a_validator_returning_something_else_counts_as_failed() -> None:
    def wrong(p: ValidationParams) -> ValidationResult:
        return True  # type: ignore[return-value]

    got = decide_stop(wrong, params())
    assert got.decision == "allow"
    assert got.warning.startswith("validator failed: TypeError: validator returned bool")


def test_keyboard_interrupt_is_not_swallowed() -> None:
    def interrupted(p: ValidationParams) -> ValidationResult:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        decide_stop(interrupted, params())


def test_complete_allows_with_the_results_reason() -> None:
    got = decide_stop(returning(DONE), params(retry_count=2))
    assert got == StopDecision(decision="allow", reason="All todos done", retry_count=0, result=DONE)
    assert got.system_message == "[complete] All todos done"


@pytest.mark.parametrize("retry_count", [0, 1, 2])
def test_incomplete_blocks_with_the_reason_and_counts_the_retry(retry_count: int) -> None:
    got = decide_stop(returning(TODO), params(retry_count))
    assert got == StopDecision(
        decision="block", reason="2 todos remaining", retry_count=retry_count + 1, result=TODO
    )
    assert got.system_message == "[incomplete] 2 todos remaining"


@pytest.mark.parametrize("retry_count", [3, 4, 10])
def test_max_retries_forces_the_stop_without_calling_the_validator(retry_count: int) -> None:
    calls: list[str] = []
    got = decide_stop(returning(TODO, calls), params(retry_count))
    warning = "max stop retries (3) reached; allowing stop"
    assert got == StopDecision(decision="allow", reason=warning, warning=warning, retry_count=0)
    assert calls == []


def test_max_stop_retries_is_configurable() -> None:
    assert decide_stop(returning(TODO), params(1), max_stop_retries=1).warning == (
        "max stop retries (1) reached; allowing stop"
    )
    assert decide_stop(returning(TODO), params(3), max_stop_retries=5).decision == "block"


def test_no_validator_allows() -> None:
    got = decide_stop(None, params(retry_count=5))
    assert got == StopDecision(decision="allow", reason="No validator attached", retry_count=0)
    assert got.system_message == ""


# -- composite_validator -------------------------------------------------------


def test_composite_stops_at_the_first_incomplete() -> None:
    calls: list[str] = []
    other = ValidationResult(complete=False, reason="tests failing")
    combined = composite_validator(
        returning(DONE, calls, "a"), returning(TODO, calls, "b"), returning(other, calls, "c")
    )
    assert combined(params()) == TODO
    assert calls == ["a", "b"]


def test_composite_passes_when_every_member_passes() -> None:
    calls: list[str] = []
    combined = composite_validator(returning(DONE, calls, "a"), always_complete, returning(DONE, calls, "c"))
    assert combined(params()) == ValidationResult(True, "All validators passed")
    assert calls == ["a", "c"]


def test_an_empty_composite_is_complete() -> None:
    assert composite_validator()(params()) == ValidationResult(True, "All validators passed")


def test_a_failing_member_makes_decide_stop_allow_with_a_warning() -> None:
    calls: list[str] = []
    combined = composite_validator(
        returning(DONE, calls, "a"), raising(ValueError("boom")), returning(TODO, calls, "c")
    )
    got = decide_stop(combined, params())
    assert (got.decision, got.warning) == ("allow", "validator failed: ValueError: boom; allowing stop")
    assert calls == ["a"]


# -- to_events -----------------------------------------------------------------


def test_to_events_records_a_block() -> None:
    got = to_events(decide_stop(returning(TODO), params()), session_id="s", iteration=2)
    assert got == [
        E.StopDecided(
            session_id="s",
            iteration=2,
            decision="block",
            reason="2 todos remaining",
            system_message="[incomplete] 2 todos remaining",
        )
    ]


def test_to_events_records_a_complete_stop() -> None:
    (event,) = to_events(decide_stop(returning(DONE), params()), session_id="s", iteration=1)
    assert event == E.StopDecided(
        session_id="s",
        iteration=1,
        decision="allow",
        reason="All todos done",
        system_message="[complete] All todos done",
    )


def test_to_events_records_a_forced_stop_as_a_warning() -> None:
    (event,) = to_events(decide_stop(returning(TODO), params(3)), session_id="s", iteration=1)
    assert isinstance(event, E.StopDecided)
    assert (event.decision, event.system_message) == ("allow", "max stop retries (3) reached; allowing stop")


def test_to_events_records_a_validators_failure_as_an_error_too() -> None:
    warning = "validator failed: ValueError: boom; allowing stop"
    got = to_events(decide_stop(raising(ValueError("boom")), params()), session_id="s", iteration=4)
    assert got == [
        E.StopDecided(session_id="s", iteration=4, decision="allow", reason=warning, system_message=warning),
        E.ErrorRecorded(session_id="s", iteration=4, component="validate_completion", message=warning),
    ]


def test_a_stop_hook_loop_reads_its_retry_count_back_from_the_journal(tmp_path: Path) -> None:
    """Block, block, block, then the forced stop; the journal carries the count."""
    journal = Journal(tmp_path / "s.jsonl", fsync=False)
    journal.append(E.IterationStarted(session_id="s", iteration=1))
    decisions = []
    for _ in range(4):
        retries = retry_count_from(journal.read_all().events)
        decision = decide_stop(returning(TODO), params(retries))
        journal.append(*to_events(decision, session_id="s", iteration=1))
        assert retry_count_from(journal.read_all().events) == decision.retry_count
        decisions.append(decision.decision)
    assert decisions == ["block", "block", "block", "allow"]


# -- retry_count_from agrees with the SQL detector -----------------------------


def test_retry_count_from_examples() -> None:
    def stop(iteration: int, decision: E.StopDecision) -> E.StopDecided:
        return E.StopDecided(session_id="s", iteration=iteration, decision=decision)

    assert retry_count_from([]) == 0
    assert retry_count_from([stop(1, "block"), stop(2, "block"), stop(2, "block")]) == 2
    assert retry_count_from([stop(1, "block"), stop(1, "block"), stop(1, "allow"), stop(1, "block")]) == 1
    assert retry_count_from([stop(2, "block"), stop(1, "allow")]) == 0
    assert retry_count_from([stop(2, "block"), E.AgentTurn(session_id="s", iteration=3)]) == 1


OTHER_KINDS = ("iteration", "turn", "validation", "error")


def make_event(sid: str, kind: str, iteration: int) -> E.Event:
    """One event of a generated session ``sid``."""
    if kind in ("block", "allow"):
        return E.StopDecided(
            session_id=sid, iteration=iteration, decision="block" if kind == "block" else "allow"
        )
    if kind == "iteration":
        return E.IterationStarted(session_id=sid, iteration=iteration)
    if kind == "turn":
        return E.AgentTurn(session_id=sid, iteration=iteration, tool_count=1)
    if kind == "validation":
        return E.ValidationRan(session_id=sid, iteration=iteration, passed=False, score=0.0)
    return E.ErrorRecorded(session_id=sid, iteration=iteration, component="x", message="y")


STEPS = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["block", "block", "allow"]), st.integers(1, 3)),
        st.tuples(st.sampled_from(OTHER_KINDS), st.integers(0, 4)),
    ),
    max_size=30,
)


def literal_reading(steps: list[tuple[str, int]]) -> int:
    """The rule read word for word, as an oracle: in the latest iteration that
    has a stop decision, the blocks after the last allow of any iteration."""
    stops = [(i, kind, it) for i, (kind, it) in enumerate(steps) if kind in ("block", "allow")]
    if not stops:
        return 0
    latest = max(it for _, _, it in stops)
    last_allow = max((i for i, kind, _ in stops if kind == "allow"), default=-1)
    return sum(1 for i, kind, it in stops if kind == "block" and it == latest and i > last_allow)


@settings(max_examples=200, deadline=None)
@given(steps=STEPS)
def test_retry_count_from_follows_its_definition(
    steps: list[tuple[str, int]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    sid = "s"
    journal = Journal(tmp_path_factory.mktemp("j") / f"{sid}.jsonl", fsync=False)
    journal.append(*(make_event(sid, kind, iteration) for kind, iteration in steps))
    events = journal.read_all().events
    assert len(events) == len(steps)
    assert retry_count_from(events) == literal_reading(steps)


# -- the hot path --------------------------------------------------------------


def test_importing_completion_does_not_import_duckdb_or_pyarrow() -> None:
    code = (
        "import sys, ledger.loop.validate.completion; "
        "print('duckdb' in sys.modules, 'pyarrow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False False"
