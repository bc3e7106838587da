"""Validation score: the one implementation (docs/design/validation.md#score)."""

from __future__ import annotations

from collections.abc import Iterable

from ledger.events import RuleResult


def validation_score(results: Iterable[RuleResult]) -> float:
    """0-100: share of rules passed, minus the share of rules that errored.

    An errored rule counts twice (it did not pass, and it is penalised); with
    no rules the score is 100.
    """
    rules = list(results)
    if not rules:
        return 100.0
    total = len(rules)
    passed = sum(1 for r in rules if r.passed and not r.errored)
    errored = sum(1 for r in rules if r.errored)
    return max(0.0, passed / total * 100 - errored / total * 100)
