"""Validation score (docs/design/validation.md#score)."""

from __future__ import annotations

import pytest

from ledger.events import RuleResult
from ledger.loop.validate.score import validation_score


def r(passed: bool, errored: bool = False) -> RuleResult:
    return RuleResult(name="r", type="command", passed=passed, errored=errored)


@pytest.mark.parametrize(
    ("results", "score"),
    [
        ([], 100.0),
        ([r(True)] * 4, 100.0),
        ([r(True), r(True), r(True), r(False)], 75.0),
        ([r(True), r(False)], 50.0),
        ([r(True), r(False, errored=True)], 0.0),  # 50 passed - 50 penalty
        ([r(True), r(True), r(True), r(False, True)], 50.0),  # 75 - 25
        ([r(False, True)] * 2, 0.0),  # never below 0
        ([r(True, errored=True)], 0.0),  # an errored rule never counts as passed
    ],
)
def test_validation_score(results: list[RuleResult], score: float) -> None:
    assert validation_score(results) == pytest.approx(score)
