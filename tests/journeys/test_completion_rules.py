"""Journeys of the todo and work-done validators as rules: a ledger-native Claude Code loop kept going
while the agent's own todo list (its last ``TodoWrite`` in the transcript) has unfinished items, and a
completion promise with no work behind it refused, through the Stop hook and ``ralph-ledger run``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.journeys.conftest import Project
from tests.journeys.test_claude_code import CLAUDE, Claude, block, by_id, start
from tests.journeys.test_run import Loop

COMPLETE = "All done.\n<promise>COMPLETE</promise>"


def todo_write(*items: tuple[str, str], n: int = 1) -> dict[str, Any]:
    """A ``TodoWrite`` tool call as Claude Code writes it."""
    todos = [{"content": c, "status": s, "activeForm": f"Working on {c}"} for c, s in items]
    return {"type": "tool_use", "id": f"toolu_todo{n}", "name": "TodoWrite", "input": {"todos": todos}}


def rule_results(project: Project, session: str) -> list[tuple[str, bool, str]]:
    """Every recorded result of the session's rules, in order: name, passed, message."""
    return [
        (r["name"], r["passed"], r["message"])
        for e in project.journal(session)
        if e["type"] == "validation_ran"
        for r in e["results"]
    ]


def test_a_ledger_loop_goes_on_while_todos_remain_and_completes_once_they_are_done(project: Project) -> None:
    """Each refused stop is a failed validation run, so the circuit breaker (3 in a row by default)
    is given room for a list worked through over several stops."""
    breaker = "[guards.circuit_breaker]\nthreshold = 5\n"
    project.write("ralph.toml", "[[rules]]\ntype = 'todos'\nname = 'todos'\n" + breaker)
    claude = Claude(project)
    start(project, "Ship the feature", "--max-iterations", "6")
    claude.prompt("Ship the feature")
    claude.says(todo_write(("Write tests", "in_progress"), ("Fix lint", "pending"), ("Ship", "pending")))
    claude.text(COMPLETE)
    first = block(claude.stop())
    assert first["reason"] == (
        "Ship the feature\n\nFeedback from iteration 1:\n"
        "- todos: 3 todos remaining: Write tests, Fix lint, Ship"
    )
    assert "failing: todos" in first["systemMessage"]

    claude.says(
        todo_write(("Write tests", "completed"), ("Fix lint", "completed"), ("Ship", "in_progress"), n=2)
    )
    claude.text(COMPLETE)
    assert "todos: 1 todo remaining: Ship" in block(claude.stop())["reason"]

    claude.text(COMPLETE)  # no TodoWrite this turn: the list written before still stands
    assert "todos: 1 todo remaining: Ship" in block(claude.stop())["reason"]

    claude.says(
        todo_write(("Write tests", "completed"), ("Fix lint", "completed"), ("Ship", "completed"), n=3)
    )
    claude.text(COMPLETE)
    done = claude.stop()
    assert done.stdout == "✅ Ralph loop complete after 4 iterations: agent promised COMPLETE\n"
    assert done.stderr == ""
    sid = f"cc-{CLAUDE}"
    assert (by_id(project)[sid]["status"], by_id(project)[sid]["iteration"]) == ("complete", 4)
    assert rule_results(project, sid) == [
        ("todos", False, "3 todos remaining: Write tests, Fix lint, Ship"),
        ("todos", False, "1 todo remaining: Ship"),
        ("todos", False, "1 todo remaining: Ship"),
        ("todos", True, "all 3 todos completed"),
    ]
    assert not (project.dir / ".claude" / "ralph-ledger.local.json").exists()
    query = f"SELECT iteration, rule_type, passed FROM rule_results WHERE session_id = '{sid}' ORDER BY seq"
    proc = project.cli("sql", query, "--json")
    assert proc.returncode == 0, proc.stderr
    assert [(r["iteration"], r["rule_type"], r["passed"]) for r in json.loads(proc.stdout)] == [
        (1, "todos", False),
        (2, "todos", False),
        (3, "todos", False),
        (4, "todos", True),
    ]


def test_a_loop_without_a_todo_list_is_not_held_by_the_todos_rule(project: Project) -> None:
    project.write("ralph.toml", "[[rules]]\ntype = 'todos'\nname = 'todos'\n")
    claude = Claude(project)
    start(project, "Tidy up")
    claude.prompt("Tidy up")
    claude.text(COMPLETE)
    assert claude.stop().stdout.startswith("✅ Ralph loop complete after 1 iteration")
    assert rule_results(project, f"cc-{CLAUDE}") == [
        ("todos", True, "no todo list known (none written or passed in)")
    ]


def test_a_ledger_loop_refuses_a_completion_with_no_work_behind_it(project: Project) -> None:
    project.write("ralph.toml", "[[rules]]\ntype = 'work_done'\nname = 'work_done'\n")
    claude = Claude(project)
    start(project, "Fix the bug", "--max-iterations", "4")
    claude.prompt("Fix the bug")
    claude.text("Looks fine to me.\n<promise>COMPLETE</promise>")
    refused = block(claude.stop())
    assert refused["reason"] == (
        "Fix the bug\n\nFeedback from iteration 1:\n"
        "- work_done: completion promised, but this iteration made no tool call and changed no file"
    )
    path = str(project.dir / "bug.py")
    claude.says({"type": "tool_use", "id": "toolu_e1", "name": "Edit", "input": {"file_path": path}})
    claude.text(COMPLETE)
    assert claude.stop().stdout.startswith("✅ Ralph loop complete after 2 iterations")
    assert rule_results(project, f"cc-{CLAUDE}") == [
        ("work_done", False, "completion promised, but this iteration made no tool call and changed no file"),
        ("work_done", True, "completion promised after 1 tool call, 1 file changed"),
    ]


def test_the_runner_refuses_a_completion_with_no_file_changed(project: Project, tmp_path: Path) -> None:
    project.write("ralph.toml", "[[rules]]\ntype = 'work_done'\nname = 'work_done'\n")
    project.write(".gitignore", ".ralph/\n")
    loop = Loop(
        project,
        tmp_path,
        "if n == 2: pathlib.Path('fix.py').write_text('x = 1\\n')\nprint('<promise>COMPLETE</promise>')\n",
    )
    proc = loop.run("--session", "wd", "--prompt", "PROMPT.md", "--", *loop.cmd)
    assert proc.returncode == 0, proc.stderr
    assert (loop.state / "prompt2.txt").read_text() == (
        "Make the tests pass.\n\nFeedback from iteration 1:\n"
        "- work_done: completion promised, but this iteration made no tool call and changed no file"
    )
    assert rule_results(project, "wd") == [
        ("work_done", False, "completion promised, but this iteration made no tool call and changed no file"),
        ("work_done", True, "completion promised after 0 tool calls, 1 file changed"),
    ]
    assert json.loads(project.cli("sessions", "--json").stdout)[0]["status"] == "complete"
