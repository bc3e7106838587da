"""Adaptive iteration limits: the ``limit_suggestions`` view, ``max_iterations = "auto"`` (its floor,
ceiling and fallback) and what a loop started with it records."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ledger import events as ev
from ledger.core.home import Home
from ledger.loop.config.loop_config import ConfigError, LoopConfig, load_checked, recorded_config
from ledger.loop.decide.limits import Limit, choose, limit_for, suggestion
from ledger.loop.engine import Engine
from ledger.storage.database import Ledger
from tests.helpers import past_loop, ticking


def p90(values: list[int]) -> int:
    """The least N such that at least 90% of ``values`` are <= N (the nearest-rank percentile)."""
    ordered = sorted(values)
    return ordered[math.ceil(0.9 * len(ordered)) - 1]


def suggestions(home: Home) -> dict[tuple[str, str], dict[str, Any]]:
    with Ledger.memory(home, prices=False) as ledger:
        ledger.ingest()
        return {(r["agent"], r["task_kind"]): r for r in ledger.rows("SELECT * FROM limit_suggestions")}


@pytest.mark.parametrize("n", [20, 23, 10, 11])
def test_the_view_holds_the_iterations_that_covered_90_percent_of_completed_loops(home: Home, n: int) -> None:
    rng = random.Random(n)
    counts = [rng.randint(1, 30) for _ in range(n)]
    for i, count in enumerate(counts):
        past_loop(home.journals, f"fix-{i}", count, agent="claude", kind="bugfix")
    # loops that did not complete, or are of another kind or agent, do not count
    past_loop(home.journals, "blocked", 99, agent="claude", kind="bugfix", end="blocked")
    past_loop(home.journals, "escalated", 98, agent="claude", kind="bugfix", end="escalated")
    past_loop(home.journals, "running", 97, agent="claude", kind="bugfix", end="running")
    past_loop(home.journals, "docs", 40, agent="claude", kind="docs")
    past_loop(home.journals, "other-agent", 41, agent="codex", kind="bugfix")

    rows = suggestions(home)
    row = rows[("claude", "bugfix")]
    expected = p90(counts)
    assert sum(c <= expected for c in counts) >= 0.9 * n > sum(c <= expected - 1 for c in counts)
    assert row["suggested_max_iterations"] == expected
    assert (row["completed_loops"], row["fewest_iterations"], row["most_iterations"]) == (
        n,
        min(counts),
        max(counts),
    )
    assert row["enough_loops"] is True
    assert rows[("claude", "docs")]["suggested_max_iterations"] == 40
    assert rows[("codex", "bugfix")]["enough_loops"] is False
    assert set(rows) == {("claude", "bugfix"), ("claude", "docs"), ("codex", "bugfix")}


def test_loops_without_a_kind_or_agent_group_under_a_dash(home: Home) -> None:
    for i, count in enumerate([2, 4, 6]):
        past_loop(home.journals, f"plain-{i}", count)
    past_loop(home.journals, "kinded", 9, kind="docs")
    rows = suggestions(home)
    assert rows[("-", "-")]["completed_loops"] == 3
    assert rows[("-", "-")]["suggested_max_iterations"] == 6
    assert rows[("-", "docs")]["completed_loops"] == 1
    assert suggestion(home, "", "")["completed_loops"] == 3  # type: ignore[index]


def row(loops: int, p: int) -> dict[str, Any]:
    return {"completed_loops": loops, "suggested_max_iterations": p, "enough_loops": loops >= 10}


AUTO = LoopConfig(max_iterations="auto", agent="claude", kind="bugfix")


def test_auto_uses_the_suggestion_between_the_floor_and_the_ceiling() -> None:
    assert choose(AUTO, row(23, 7)) == Limit(
        7, "auto: p90 of 23 completed loops (agent claude, kind bugfix) is 7"
    )
    assert choose(AUTO, row(12, 1)) == Limit(
        3, "auto: p90 of 12 completed loops (agent claude, kind bugfix) is 1, raised to auto_floor 3"
    )
    assert choose(AUTO, row(12, 80)) == Limit(
        50, "auto: p90 of 12 completed loops (agent claude, kind bugfix) is 80, lowered to auto_ceiling 50"
    )
    narrow = msgspec.structs.replace(AUTO, auto_floor=5, auto_ceiling=6)
    assert [choose(narrow, row(10, p)).number for p in (4, 5, 6, 7)] == [5, 5, 6, 6]


def test_auto_falls_back_to_the_default_with_fewer_than_ten_completed_loops() -> None:
    assert choose(AUTO, row(9, 7)) == Limit(
        15, "auto: 9 completed loops (agent claude, kind bugfix), too few for a suggestion: the default 15"
    )
    assert choose(AUTO, None) == Limit(
        15, "auto: 0 completed loops (agent claude, kind bugfix), too few for a suggestion: the default 15"
    )
    qa = LoopConfig(max_iterations="auto", agent="qa")  # the agent's own default
    assert choose(qa, None) == Limit(
        10, "auto: 0 completed loops (agent qa, kind -), too few for a suggestion: the default 10"
    )
    assert choose(AUTO, row(10, 7)).number == 7


def test_a_number_is_used_as_configured_and_reads_no_ledger(tmp_path: Path) -> None:
    home = Home.resolve(tmp_path / "nowhere")
    assert limit_for(home, LoopConfig(max_iterations=4)) == Limit(4)
    assert limit_for(home, LoopConfig(agent="doc")) == Limit(6)
    assert not home.root.exists()


def test_a_loop_started_with_auto_records_the_limit_and_why(home: Home, tmp_path: Path) -> None:
    counts = [4, 5, 5, 6, 6, 6, 7, 8, 9, 12, 3, 4]
    for i, count in enumerate(counts):
        past_loop(home.journals, f"past-{i}", count, agent="claude", kind="bugfix")
    engine = Engine(home, work_dir=tmp_path, clock=ticking(), fsync=False)
    started = engine.start("now", AUTO)
    assert started.max_iterations == p90(counts) == 9
    first = engine.view("now").events[0]
    assert isinstance(first, ev.SessionStarted)
    why = "auto: p90 of 12 completed loops (agent claude, kind bugfix) is 9"
    assert (first.max_iterations, first.task_kind, first.max_iterations_reason) == (9, "bugfix", why)
    status = engine.status("now")
    assert (status["max_iterations"], status["task_kind"], status["max_iterations_reason"]) == (
        9,
        "bugfix",
        why,
    )
    engine.set_max_iterations("now", 20, "more")  # the limit is no longer the one chosen
    assert engine.status("now")["max_iterations_reason"] is None
    # another kind of task has no history: the default
    other = engine.start("docs-now", msgspec.structs.replace(AUTO, kind="docs"))
    assert other.max_iterations == 15


def test_old_session_started_lines_decode_without_a_kind() -> None:
    event = ev.decode(b'{"type":"session_started","session_id":"s","max_iterations":8}')
    assert isinstance(event, ev.SessionStarted)
    assert (event.task_kind, event.max_iterations_reason) == ("", "")


def test_the_recorded_configuration_holds_only_the_adaptive_settings_given() -> None:
    assert not {"kind", "auto_floor", "auto_ceiling"} & set(recorded_config(LoopConfig()))
    given = recorded_config(LoopConfig(kind="docs", max_iterations="auto", auto_ceiling=20))
    assert (given["kind"], given["max_iterations"], given["auto_ceiling"]) == ("docs", "auto", 20)
    assert "auto_floor" not in given
    assert msgspec.convert(given, LoopConfig).auto_ceiling == 20


@pytest.mark.parametrize(
    ("toml", "error"),
    [
        ('max_iterations = "soon"', "max_iterations: expected a whole number >= 1 or \"auto\", got 'soon'"),
        ("max_iterations = 2.5", 'max_iterations: expected a whole number >= 1 or "auto", got 2.5'),
        ("max_iterations = 0", 'max_iterations: expected a whole number >= 1 or "auto", got 0'),
        ("auto_floor = 0", "auto_floor: expected a whole number >= 1, got 0"),
        ("auto_floor = 'x'", "auto_floor: expected an integer, got 'x'"),
        (
            "auto_floor = 8\nauto_ceiling = 5",
            "auto_ceiling: expected a whole number >= auto_floor (8), got 5",
        ),
        (
            "kind = 'two words'",
            "kind: expected a name of letters, digits, '-' and '_' (at most 64), got 'two words'",
        ),
        ("kind = 3", "kind: expected a string, got 3"),
    ],
)
def test_bad_adaptive_settings_are_one_line_naming_the_key(tmp_path: Path, toml: str, error: str) -> None:
    path = tmp_path / "ralph.toml"
    path.write_text(toml + "\n")
    with pytest.raises(ConfigError) as info:
        load_checked(path)
    assert str(info.value) == f"{path}: {error}"


def test_auto_and_a_kind_load_from_the_configuration(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(
        '[tool.ralph]\nmax_iterations = "auto"\nkind = "bugfix"\nauto_floor = 2\nauto_ceiling = 30\n'
    )
    config = load_checked(path)
    assert (config.max_iterations, config.kind, config.auto_floor, config.auto_ceiling) == (
        "auto",
        "bugfix",
        2,
        30,
    )
    path.write_text('[tool.ralph]\nmax_iterations = "many"\n')
    with pytest.raises(
        ConfigError, match=r'tool\.ralph\.max_iterations: expected a whole number >= 1 or "auto"'
    ):
        load_checked(path)


def test_an_agent_definition_may_ask_for_auto(tmp_path: Path) -> None:
    from ledger.drivers.claude_code.install.agent_def import agent_markdown
    from ledger.loop.config.loop_config import load_agent

    path = tmp_path / "fixer.md"
    text = agent_markdown(
        "fixer", max_iterations="auto", completion_promises=["COMPLETE"], validation_rules=[]
    )
    assert "maxIterations: auto" in text and "as many iterations as past loops suggest (auto)" in text
    path.write_text(text)
    assert load_agent(path, LoopConfig(max_iterations=7)).max_iterations == "auto"
    numbered = agent_markdown(
        "fixer", max_iterations=9, completion_promises=["COMPLETE"], validation_rules=[]
    )
    assert "maxIterations: 9" in numbered and "at most 9 iterations, the promises" in numbered
    path.write_text("---\niteration:\n  maxIterations: lots\n---\n")
    with pytest.raises(ConfigError) as info:
        load_agent(path)
    assert (
        str(info.value)
        == f"{path}: iteration.maxIterations: expected a whole number >= 1 or \"auto\", got 'lots'"
    )


def test_the_mcp_iteration_start_takes_auto_and_a_kind(home: Home, tmp_path: Path) -> None:
    from ledger.drivers.mcp.tools import ToolCallError, Tools, decode

    for i, count in enumerate([2, 3, 3, 4, 4, 4, 5, 5, 6, 6, 7]):
        past_loop(home.journals, f"past-{i}", count, agent="fixer", kind="bugfix")
    tools = Tools(home, tmp_path)
    args = {"taskId": "t1", "task": "Fix it", "agent": "fixer", "maxIterations": "auto", "kind": "bugfix"}
    step = tools.iteration_start(decode("iteration_start", args))  # type: ignore[arg-type]
    assert step.max_iterations == p90([2, 3, 3, 4, 4, 4, 5, 5, 6, 6, 7]) == 6
    assert tools.engine.status("t1")["max_iterations_reason"].startswith("auto: p90 of 11 completed loops")
    with pytest.raises(ToolCallError) as info:
        decode("iteration_start", {"taskId": "t2", "maxIterations": "many"})
    assert (
        str(info.value)
        == "iteration_start: maxIterations: expected a whole number >= 1 or \"auto\", got 'many'"
    )
    bad = {"taskId": "t3", "kind": "two words"}
    with pytest.raises(ConfigError, match="kind: expected a name of letters"):
        tools.iteration_start(decode("iteration_start", bad))  # type: ignore[arg-type]
