"""Stop-hook registry rules (docs/design/stop-hooks.md), one test each."""

from __future__ import annotations

import pytest

from ledger import events as E
from ledger.loop.decide.stop_policies import (
    NO_HOOKS,
    AgentContext,
    Hook,
    HookResult,
    Registry,
    decided_events,
    default_hook,
    evaluate,
    promise_hook,
    validation_hook,
)

PASS = E.RuleResult(name="tests_pass", type="command", passed=True)
FAIL = E.RuleResult(name="lint_clean", type="command", passed=False, message="3 errors")


def ctx(promises: tuple[E.Signal, ...] = (), results: tuple[E.RuleResult, ...] = ()) -> AgentContext:
    return AgentContext(task_id="t", iteration=2, promises=promises, validation_results=results)


def fixed(action: E.HookAction, reason: str = "") -> Hook:
    return Hook(f"h-{action}-{reason}", "custom", lambda c: HookResult(action, reason or action))


@pytest.mark.parametrize(
    ("hook", "context", "action"),
    [
        # default: promises first (COMPLETE, ESCALATE, BLOCKED), then validation, else continue
        (default_hook, ctx(("COMPLETE",), (FAIL,)), "complete"),
        (default_hook, ctx(("ESCALATE",)), "escalate"),
        (default_hook, ctx(("BLOCKED",)), "escalate"),
        (default_hook, ctx((), (PASS,)), "complete"),
        (default_hook, ctx((), (PASS, FAIL)), "continue"),
        (default_hook, ctx(), "continue"),
        # validation: only rules
        (validation_hook, ctx(("COMPLETE",), (FAIL,)), "continue"),
        (validation_hook, ctx((), (PASS,)), "complete"),
        (validation_hook, ctx(("COMPLETE",)), "continue"),
        # promise: only promises
        (promise_hook, ctx((), (PASS,)), "continue"),
        (promise_hook, ctx(("COMPLETE",)), "complete"),
        (promise_hook, ctx(("BLOCKED",)), "escalate"),
        (promise_hook, ctx(("ESCALATE",)), "escalate"),
    ],
)
def test_presets(hook: object, context: AgentContext, action: str) -> None:
    assert callable(hook)
    assert hook(context).action == action


def test_validation_failure_gives_feedback_as_next_prompt() -> None:
    result = validation_hook(ctx((), (PASS, FAIL)))
    assert result.next_prompt == "Fix the failing validation rules: lint_clean: 3 errors"


def test_registration_order_and_first_complete_wins() -> None:
    evals = evaluate([fixed("continue", "a"), fixed("complete", "b"), fixed("escalate", "c")], ctx())
    assert [e.result.reason for e in evals] == ["a", "b"]


def test_first_escalate_wins() -> None:
    evals = evaluate([fixed("escalate", "a"), fixed("complete", "b")], ctx())
    assert [e.result.reason for e in evals] == ["a"]


def test_all_continue_uses_the_last_result() -> None:
    evals = evaluate([fixed("continue", "a"), fixed("continue", "b")], ctx())
    assert evals[-1].result.reason == "b" and len(evals) == 2


def test_disabled_hooks_are_skipped() -> None:
    off = Hook("off", "custom", lambda c: HookResult("complete", "never"), enabled=False)
    evals = evaluate([off, fixed("continue", "on")], ctx())
    assert [e.hook_id for e in evals] == ["h-continue-on"]


def test_a_raising_hook_escalates() -> None:
    def boom(c: AgentContext) -> HookResult:
        raise ValueError("database is down\nsecond line")

    evals = evaluate([Hook("boom", "custom", boom), fixed("complete")], ctx())
    assert len(evals) == 1
    assert evals[0].result.action == "escalate"
    assert evals[0].result.reason == "Hook evaluation failed: database is down"
    assert evals[0].result.metadata == {"error": "database is down"} and evals[0].error == "database is down"


def test_no_hooks_continue() -> None:
    assert evaluate([], ctx()) == [NO_HOOKS]
    assert NO_HOOKS.result.reason == "No hooks registered for this task"
    assert evaluate([Hook("off", "custom", default_hook, enabled=False)], ctx()) == [NO_HOOKS]


def test_next_prompt_and_checkpoint_data_pass_through() -> None:
    hook = Hook(
        "cp",
        "custom",
        lambda c: HookResult(
            "continue", "halfway", next_prompt="Go on", checkpoint_data={"executionPhase": "midpoint"}
        ),
    )
    (only,) = evaluate([hook], ctx())
    assert only.result.next_prompt == "Go on" and only.result.checkpoint_data == {
        "executionPhase": "midpoint"
    }


def test_registry_replays_declarative_hooks_and_clears() -> None:
    events: list[E.Event] = [
        E.HookRegistered(session_id="s", hook_id="h1", hook_type="validation"),
        E.HookRegistered(session_id="s", hook_id="h2", hook_type="promise", enabled=False),
        E.HookRegistered(session_id="s", hook_id="h3", hook_type="default"),
    ]
    reg = Registry.from_events(events)
    assert [(h.hook_id, h.hook_type, h.enabled) for h in reg.hooks()] == [
        ("h1", "validation", True),
        ("h2", "promise", False),
        ("h3", "default", True),
    ]
    assert reg.evaluate(ctx(("COMPLETE",), (FAIL,)))[-1].hook_id == "h3"
    cleared = Registry.from_events([*events, E.HooksCleared(session_id="s", hook_ids=["h1"])])
    assert [h.hook_id for h in cleared.hooks()] == ["h2", "h3"]
    assert Registry.from_events([*events, E.HooksCleared(session_id="s")]).hooks() == []


def test_custom_hook_of_another_process_escalates_instead_of_vanishing() -> None:
    reg = Registry.from_events([E.HookRegistered(session_id="s", hook_id="mine", hook_type="custom")])
    (only,) = reg.evaluate(ctx())
    assert only.result.action == "escalate" and "not registered in this process" in only.result.reason
    reg = Registry.from_events(
        [E.HookRegistered(session_id="s", hook_id="mine", hook_type="custom")],
        custom={"mine": lambda c: HookResult("complete", "custom ok")},
    )
    assert reg.evaluate(ctx())[0].result.reason == "custom ok"


def test_every_evaluation_becomes_an_event() -> None:
    evals = evaluate([fixed("continue", "a"), fixed("complete", "b")], ctx())
    evs = decided_events(evals, session_id="s", iteration=2)
    assert [(e.hook_id, e.action, e.iteration) for e in evs] == [
        ("h-continue-a", "continue", 2),
        ("h-complete-b", "complete", 2),
    ]
