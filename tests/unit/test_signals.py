"""One test per row of the signal table in ledger/loop/decide/signals.py."""

from __future__ import annotations

import pytest

from ledger.loop.decide.signals import Inputs, Trip, resolve

MAX_IT = Trip("max_iterations", "ESCALATE", "iteration 16 exceeds maxIterations (15)")
THRASH = Trip("thrashing", "BLOCKED", "src/a.py modified in 5 iterations")


@pytest.mark.parametrize(
    ("inputs", "signal", "row"),
    [
        # 1: a manual stop wins over everything, even a COMPLETE promise and a guard
        (Inputs(True, manual_stop="going another way", promise="COMPLETE", trips=[MAX_IT]), "BLOCKED", 1),
        # 2: a guard that blocks wins over one that escalates and over promises
        (Inputs(True, trips=[MAX_IT, THRASH], promise="COMPLETE"), "BLOCKED", 2),
        # 3: guards before promises: the guard overrides "Tests passing! <promise>COMPLETE</promise>"
        (Inputs(True, trips=[MAX_IT], promise="COMPLETE", promise_word="COMPLETE"), "ESCALATE", 3),
        # 4: BLOCKED beats COMPLETE (and a hook's continue)
        (Inputs(True, promise="BLOCKED", hooks_registered=True, hook_action="continue"), "BLOCKED", 4),
        # 5: a hook escalates
        (Inputs(True, hooks_registered=True, hook_action="escalate", promise="COMPLETE"), "ESCALATE", 5),
        # 6: a hook completes (here from validation alone, no promise)
        (Inputs(True, hooks_registered=True, hook_action="complete"), "COMPLETE", 6),
        # 7: registered hooks are the policy: their continue beats a COMPLETE promise
        (Inputs(False, hooks_registered=True, hook_action="continue", promise="COMPLETE"), "CONTINUE", 7),
        # 8: no hooks: a COMPLETE promise completes even with failing validation (the default)
        (Inputs(False, promise="COMPLETE"), "COMPLETE", 8),
        # 9: no hooks: an ESCALATE promise (or LOOP_ERROR) escalates
        (Inputs(True, promise="ESCALATE", promise_word="LOOP_ERROR"), "ESCALATE", 9),
        # 10: nothing decided: keep iterating, whether validation passed or not
        (Inputs(True), "CONTINUE", 10),
        (Inputs(False, promise="CONTINUE", promise_word="LOOP_CONTINUE"), "CONTINUE", 10),
    ],
)
def test_signal_table(inputs: Inputs, signal: str, row: int) -> None:
    got = resolve(inputs)
    assert (got.signal, got.row) == (signal, row)
    assert got.reason


@pytest.mark.parametrize(
    ("inputs", "row"),
    [
        (Inputs(False, promise="COMPLETE", require_passing_validation=True), 8),
        (Inputs(False, hooks_registered=True, hook_action="complete", require_passing_validation=True), 6),
    ],
)
def test_validation_gate_turns_complete_into_continue(inputs: Inputs, row: int) -> None:
    got = resolve(inputs)
    assert (got.signal, got.row) == ("CONTINUE", row)
    assert got.reason.startswith("completion claimed but validation failed")


def test_gate_lets_a_passing_completion_through() -> None:
    got = resolve(Inputs(True, promise="COMPLETE", require_passing_validation=True))
    assert got.signal == "COMPLETE"


def test_reasons_name_their_source() -> None:
    assert (
        resolve(Inputs(True, trips=[MAX_IT])).reason
        == "max_iterations: iteration 16 exceeds maxIterations (15)"
    )
    assert resolve(Inputs(True, manual_stop="")).reason == "manual stop"
    assert (
        resolve(Inputs(True, promise="BLOCKED", promise_word="LOOP_BLOCKED")).reason
        == "agent promised LOOP_BLOCKED"
    )
