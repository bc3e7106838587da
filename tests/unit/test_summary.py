"""The summary of the loop so far (``ledger.loop.prompt.summary``, ``summary = true``): what it says of a
crafted session, its 2 KB bound, compaction after ten iterations, how the next prompt carries it,
and where it is recorded and shown."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion
from textual.widgets import RichLog

from ledger import events as E
from ledger.core.home import Home
from ledger.loop.config.loop_config import ConfigError, LoopConfig, load_toml, recorded_config
from ledger.loop.decide.guards import (
    CircuitBreaker,
    GuardConfig,
    Thrashing,
    TimeLimit,
    TokenBudget,
    ValidationStall,
)
from ledger.loop.engine import Engine
from ledger.loop.prompt import summary
from ledger.loop.prompt.next_prompt import next_prompt
from ledger.loop.prompt.summary import COMPACT_AFTER, FULL_TAIL, MAX_BYTES, summary_for
from ledger.loop.validate.score import validation_score
from ledger.monitor import Monitor
from ledger.storage.journal import Cursor, read_new
from tests.helpers import ticking

RULES = ("tests", "lint", "types")


def craft(
    engine: Engine,
    sid: str,
    failing: Sequence[Sequence[str]],
    files: Sequence[Sequence[str]],
    config: LoopConfig,
    rules: Sequence[str] = RULES,
    message: str = "exited with code 1",
    skipped: Sequence[tuple[int, str]] = (),
) -> None:
    """A session of ``len(failing)`` iterations written straight to its journal, as the engine
    records them: iteration ``i`` fails the rules ``failing[i]`` (with ``message``) and changes
    ``files[i]``, in 100-token turns; the (iteration, rule) pairs in ``skipped`` do not run (cadence)."""
    sid_events: list[E.Event] = [
        E.SessionStarted(
            session_id=sid,
            task="Make the tests pass.",
            max_iterations=config.effective_max_iterations(),
            config=recorded_config(config),
        )
    ]
    for i, (bad, changed) in enumerate(zip(failing, files, strict=True), 1):
        results = [
            E.RuleResult(
                name=r,
                type="command",
                passed=r not in bad,
                message=message.format(rule=r) if r in bad else "",
            )
            for r in rules
            if (i, r) not in skipped
        ]
        sid_events += [
            E.IterationStarted(session_id=sid, iteration=i),
            E.AgentTurn(
                session_id=sid,
                iteration=i,
                files_modified=list(changed),
                tokens=E.TokenUsage(input=90, output=10),
            ),
            E.ValidationRan(
                session_id=sid,
                iteration=i,
                results=results,
                passed=not bad,
                score=validation_score(results),
            ),
            E.SignalResolved(
                session_id=sid,
                iteration=i,
                signal="CONTINUE",
                feedback=[f"{res.name}: {res.message}" for res in results if not res.passed],
            ),
        ]
    engine.journal(sid).append(*sid_events)


GUARDS = GuardConfig(
    circuit_breaker=CircuitBreaker(threshold=6),
    thrashing=Thrashing(min_iterations=10),
    token_budget=TokenBudget(enabled=True, tokens=1000),
    validation_stall=ValidationStall(span=5),
)
CRAFTED = LoopConfig(task="Make the tests pass.", max_iterations=10, summary=True, guards=GUARDS)
FAILING = [["types"], [], ["tests"], ["tests"], ["tests", "types"], ["tests", "lint"]]
FILES = [
    ["app.py"],
    ["app.py", "util.py"],
    ["app.py"],
    ["app.py", "once.py"],
    ["app.py", "util.py"],
    ["app.py"],
]


@pytest.fixture
def crafted(engine: Engine) -> str:
    craft(engine, "crafted", FAILING, FILES, CRAFTED)
    return summary_for(engine, "crafted")


def test_the_summary_says_what_still_fails_and_since_when(crafted: str) -> None:
    """tests failed from iteration 3 on, lint only in 6; types failed in 1 and 5 but passes now."""
    assert "Still failing: tests since iteration 3, lint since iteration 6." in crafted.splitlines()
    assert "types since" not in crafted


def test_a_rule_not_run_in_the_last_iteration_still_fails_since_its_first_failure(engine: Engine) -> None:
    """A coverage rule run every third iteration failed in 1 and 3 and did not run in 2 and 4: it still
    fails, since iteration 1; lint passed in its last run (4) after failing in 3."""
    rules = ("coverage", "lint")
    failing = [["coverage"], [], ["coverage", "lint"], []]
    skipped = [(2, "coverage"), (4, "coverage")]
    craft(engine, "cadence", failing, [["a.py"]] * 4, CRAFTED, rules, skipped=skipped)
    assert "Still failing: coverage since iteration 1." in summary_for(engine, "cadence").splitlines()


def test_the_summary_names_the_files_changed_again_and_again(crafted: str) -> None:
    """app.py in all six iterations, util.py in two; once.py, changed once, is not repeated."""
    assert "Files changed repeatedly: app.py (6 iterations), util.py (2 iterations)." in crafted.splitlines()
    assert "once.py" not in crafted.split("Files changed repeatedly")[1]


def test_the_summary_warns_of_the_guards_close_to_tripping(crafted: str) -> None:
    """Four failed validations of six, app.py in six iterations of ten, 600 tokens of 1,000 and six
    iterations of ten are at least halfway, and no better score than 100 for four iterations is one
    short of the stall's five; the error threshold (no rule errored) is not."""
    near = crafted.split("Close to tripping:\n")[1].split("\nLast feedback")[0].splitlines()
    assert "- circuit_breaker: 4 failed validations in a row, trips at 6" in near
    assert "- thrashing: app.py changed in 6 iterations, trips at 10" in near
    assert "- token_budget: 600 of 1,000 tokens used" in near
    assert "- max_iterations: 6 of 10 iterations used" in near
    assert "- validation_stall: no better score for 4 iterations (best 100), trips at 5" in near
    assert not any("error_threshold" in line for line in near)


def test_the_summary_ends_with_the_last_feedback(crafted: str) -> None:
    assert crafted.endswith(
        "Last feedback (iteration 6):\n- tests: exited with code 1\n- lint: exited with code 1"
    )


def test_the_summary_starts_with_where_the_loop_stands(crafted: str) -> None:
    """The latest score and the best one (iteration 2 passed every rule)."""
    assert (
        crafted.splitlines()[0] == "Loop so far: iteration 6 of 10 done, score 33 (best 100, at iteration 2)."
    )


def test_a_guard_far_from_its_threshold_is_not_mentioned(engine: Engine) -> None:
    """Two failed validations of a breaker that trips at six are not close; nor are two iterations of
    ten, 200 tokens of 1,000, one score that did not beat the best (a stall takes three)."""
    craft(engine, "far", [["tests"], ["tests"]], [["a.py"], ["b.py"]], CRAFTED)
    text = summary_for(engine, "far")
    assert "Close to tripping" not in text and "Files changed repeatedly" not in text


def test_the_summary_of_a_fixed_session(crafted: str, snapshot: SnapshotAssertion) -> None:
    """The whole text, reviewed (snapshots/test_summary.ambr)."""
    assert crafted == snapshot


def test_up_to_ten_iterations_each_is_in_full(engine: Engine) -> None:
    craft(engine, "ten", [["tests"]] * COMPACT_AFTER, [["app.py"]] * COMPACT_AFTER, CRAFTED)
    text = summary_for(engine, "ten")
    assert [line for line in text.splitlines() if line.startswith("Iteration ")] == [
        f"Iteration {n}: score 67" for n in range(1, COMPACT_AFTER + 1)
    ]
    assert "Iterations (score, failing rules):" not in text


def test_after_ten_iterations_the_older_ones_take_one_line_each(engine: Engine) -> None:
    """Iteration 11 ends: 1-8 on one line each, 9-11 in full (score, failing rules, files)."""
    n = COMPACT_AFTER + 1
    failing = [["tests"] if i % 2 else ["lint", "types"] for i in range(1, n + 1)]
    craft(engine, "eleven", failing, [[f"f{i}.py"] for i in range(1, n + 1)], CRAFTED)
    lines = summary_for(engine, "eleven").splitlines()
    title = lines.index("Iterations (score, failing rules):")
    assert lines[title + 1 : title + 1 + n - FULL_TAIL] == [
        f"- {i}: {'67 (tests)' if i % 2 else '33 (lint, types)'}" for i in range(1, n - FULL_TAIL + 1)
    ]
    assert lines[title + 1 + n - FULL_TAIL :][:7] == [
        "Iteration 9: score 67",
        "  failing: tests",
        "  files: f9.py",
        "Iteration 10: score 33",
        "  failing: lint, types",
        "  files: f10.py",
        "Iteration 11: score 67",
    ]


LONG = LoopConfig(
    max_iterations=60,
    summary=True,
    guards=GuardConfig(
        circuit_breaker=CircuitBreaker(threshold=100),
        thrashing=Thrashing(min_iterations=100),
        validation_stall=ValidationStall(enabled=False),
        time_limit=TimeLimit(seconds=7200),
    ),
)
"""A loop allowed fifty iterations and more."""


def test_fifty_iterations_fit_in_two_kilobytes(engine: Engine) -> None:
    """Fifty iterations, every older one on its own line, in at most 2 KB."""
    n = 50
    failing = [[RULES[i % 3]] for i in range(n)]
    craft(engine, "fifty", failing, [["app.py", f"f{i % 4}.py"] for i in range(n)], LONG)
    text = summary_for(engine, "fifty")
    assert len(text.encode()) <= MAX_BYTES
    assert [f"- {i}: 67 ({RULES[(i - 1) % 3]})" for i in range(1, n - FULL_TAIL + 1)] == [
        line for line in text.splitlines() if line.startswith("- ") and "(" in line and ":" in line[:6]
    ]
    assert "Iteration 50: score 67" in text and text.count("Iteration ") == FULL_TAIL


def test_a_wordy_fifty_iteration_session_folds_its_oldest_iterations(engine: Engine) -> None:
    """Eight long-named rules, long messages, files with non-ASCII names: the oldest iterations fold
    into one line of their scores, the newest stay, the text stays within 2 KB of UTF-8."""
    n = 50
    rules = [f"rule_with_a_rather_long_descriptive_name_{k}" for k in range(8)]
    failing = [rules[: 1 + i % 8] for i in range(n)]
    files = [[f"src/módulo_{i % 7}/fichier_é_{k}.py" for k in range(6)] for i in range(n)]
    craft(engine, "wordy", failing, files, LONG, rules, "ünïcode détail " * 30)
    text = summary_for(engine, "wordy")
    assert len(text.encode()) <= MAX_BYTES
    lines = text.splitlines()
    folded = lines[lines.index("Iterations (score, failing rules):") + 1]
    assert folded.startswith("- 1-") and ": scores " in folded, folded
    assert "Iteration 50: score" in text and "Last feedback (iteration 50):" in text


def test_an_iteration_not_validated_says_so(engine: Engine) -> None:
    """An iteration whose agent turn is recorded but not yet validated has no score to show."""
    craft(engine, "mid", FAILING[:2], FILES[:2], CRAFTED)
    engine.journal("mid").append(
        E.IterationStarted(session_id="mid", iteration=3),
        E.AgentTurn(session_id="mid", iteration=3, files_modified=["app.py"]),
    )
    text = summary_for(engine, "mid")
    assert "Iteration 3: not validated\n  files: app.py" in text
    assert "Iteration 2: score 100\n  no rule failed" in text


def test_a_summary_that_cannot_be_made_is_recorded_and_the_loop_goes_on(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error while making the summary gives none and records one ``error_recorded`` line."""
    craft(engine, "broken", FAILING[:2], FILES[:2], CRAFTED)

    def broken(*_: object) -> str:
        raise RuntimeError("Binder Error: no such column\nLINE 1: SELECT ...")

    monkeypatch.setattr(summary, "loop_summary", broken)
    assert summary.summary_to_give(engine, "broken", 2) == ""
    (error,) = [
        e for e in read_new(engine.journal("broken").path, Cursor()).events if isinstance(e, E.ErrorRecorded)
    ]
    assert (error.iteration, error.component, error.message) == (2, "summary", "Binder Error: no such column")


def test_no_summary_before_any_iteration_is_recorded(engine: Engine) -> None:
    engine.journal("empty").append(E.SessionStarted(session_id="empty", config=recorded_config(CRAFTED)))
    assert summary_for(engine, "empty") == ""


# ------------------------------------------------------------------------- the prompt and the record
class Learned:
    def __init__(self, feedback: list[str], hint: str = "") -> None:
        self.iteration, self.next_prompt, self.feedback = 3, hint, feedback


def test_the_next_prompt_carries_the_summary_last_without_repeating_a_line() -> None:
    """A feedback line the summary carries word for word is said once (in the summary); one it does
    not carry stays in the feedback."""
    summary = (
        "Loop so far: iteration 3 of 10 done, score 50.\nLast feedback (iteration 3):\n- tests: 1 failed"
    )
    prompt = next_prompt("Task.", Learned(["tests: 1 failed", "thrashing: app.py"]), summary)
    assert prompt == f"Task.\n\nFeedback from iteration 3:\n- thrashing: app.py\n\n{summary}"
    assert next_prompt("Task.", Learned(["tests: 1 failed"]), summary) == f"Task.\n\n{summary}"
    assert (
        next_prompt("Task.", Learned(["tests: 1 failed"]))
        == "Task.\n\nFeedback from iteration 3:\n- tests: 1 failed"
    )


def test_summary_is_a_boolean_setting(tmp_path: Path) -> None:
    path = tmp_path / "ralph.toml"
    path.write_text('summary = "yes"\n')
    with pytest.raises(ConfigError) as err:
        load_toml(path)
    assert str(err.value) == f"{path}: summary: expected a boolean, got 'yes'"
    path.write_text("summary = true\n")
    assert load_toml(path).summary is True


def test_a_loop_without_summary_records_its_configuration_as_before() -> None:
    """``summary`` is recorded only when on: the records of other loops do not change."""
    assert "summary" not in recorded_config(LoopConfig())
    assert recorded_config(LoopConfig(summary=True))["summary"] is True


def test_an_old_journal_line_decodes_and_a_summary_given_line_with_its_envelope_only() -> None:
    event = E.decode(b'{"type":"summary_given","session_id":"s","seq":9,"iteration":2}')
    assert isinstance(event, E.SummaryGiven) and event.loop_summary == ""


def test_the_monitor_shows_the_summary_an_iteration_was_given(tmp_path: Path) -> None:
    """The iteration detail (the TUI's session screen) holds the summary its prompt carried; the
    event log names it."""
    home = Home.resolve(tmp_path / "home")
    home.ensure()
    engine = Engine(home, work_dir=tmp_path, clock=ticking(), fsync=False)
    craft(engine, "shown", FAILING[:2], FILES[:2], CRAFTED)
    told = summary_for(engine, "shown")
    engine.journal("shown").append(E.SummaryGiven(session_id="shown", iteration=3, loop_summary=told))
    monitor = Monitor([home.root])
    list(monitor.load())
    try:
        assert monitor.detail("shown", 3).summary == told
        assert monitor.detail("shown", 2).summary == ""
        lines = [e.text for e in monitor.events("shown") if e.type == "summary_given"]
        assert lines == [f"loop summary in the prompt: {len(told.encode())} bytes"]
    finally:
        monitor.close()


def test_the_session_screen_shows_what_the_agent_was_told(tmp_path: Path) -> None:
    """``ralph-tui``: the detail of the iteration a summary was given to shows it, line by line; the
    event log names it; the iteration before shows none."""
    import asyncio

    from tests.unit.test_tui_support import fixed_clock, settle
    from tui.app import RalphApp
    from tui.screens.session_screen import SessionScreen

    home = Home.resolve(tmp_path / "home")
    home.ensure()
    engine = Engine(home, work_dir=tmp_path, clock=ticking(), fsync=False)
    craft(engine, "told", FAILING[:2], FILES[:2], CRAFTED)
    told = summary_for(engine, "told")
    engine.journal("told").append(
        E.SummaryGiven(session_id="told", iteration=3, loop_summary=told),
        E.IterationStarted(session_id="told", iteration=3),
    )
    app = RalphApp([tmp_path / "home" / "journals"], now=fixed_clock, watch=False)

    async def scenario() -> None:
        async with app.run_test(size=(120, 60)) as pilot:
            await settle(pilot, lambda: app.feed.loaded)
            app.open_session("told")
            await settle(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.detail)
            screen = app.screen
            assert isinstance(screen, SessionScreen)
            await settle(pilot, lambda: screen.detail is not None and screen.detail.iteration == 3)
            shown = str(screen.query_one("#detail").render())
            assert shown.startswith("summary given with its prompt\n")
            assert all(f"  {line}" in shown for line in told.splitlines())
            events = screen.query_one("#events", RichLog).lines
            assert any(
                line.text.endswith(
                    f"summary_given      loop summary in the prompt: {len(told.encode())} bytes"
                )
                for line in events
            )
            await pilot.press("up")
            await settle(pilot, lambda: screen.detail is not None and screen.detail.iteration == 2)
            assert "summary given" not in str(screen.query_one("#detail").render())

    asyncio.run(scenario())
