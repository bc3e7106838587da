"""Journeys of adaptive iteration limits: ``ralph-ledger stats --suggest`` and ``max_iterations =
"auto"`` (``run --max-iterations auto``, ``loop start --max-iterations auto``) in a fresh project whose
home already holds past loops, written through the journal API as the engine writes them."""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from pathlib import Path

from tests.helpers import past_loop
from tests.journeys.conftest import Project
from tests.journeys.test_claude_code import Claude, ledger_project

FIXER = [2, 3, 3, 4, 4, 4, 2, 3, 4, 4, 3, 5]
"""Iterations of the past completed loops of agent ``fixer`` on ``bugfix`` tasks."""

AGENT = """\
import sys
sys.stdin.read()
print("still working" if len(sys.argv) < 2 else "done <promise>COMPLETE</promise>")
"""
"""An agent that never promises (or, given an argument, completes at once)."""


def p90(values: list[int]) -> int:
    """The least N that at least 90% of ``values`` are <= (computed here, not by the ledger)."""
    return sorted(values)[math.ceil(0.9 * len(values)) - 1]


def history(project: Project) -> None:
    """The project's home holds the past loops: 12 completed ``fixer`` / ``bugfix`` loops (FIXER),
    3 of ``fixer`` on ``docs``, loops that did not complete, and one of no agent and no kind."""
    journals = project.home / "journals"
    for i, n in enumerate(FIXER):
        past_loop(journals, f"fix-{i}", n, agent="fixer", kind="bugfix")
    for i, n in enumerate([6, 7, 8]):
        past_loop(journals, f"docs-{i}", n, agent="fixer", kind="docs")
    past_loop(journals, "fix-blocked", 30, agent="fixer", kind="bugfix", end="blocked")
    past_loop(journals, "fix-escalated", 40, agent="fixer", kind="bugfix", end="escalated")
    past_loop(journals, "plain", 5)


def test_stats_suggest_prints_the_view_as_a_table_csv_and_json(project: Project) -> None:
    history(project)
    assert p90(FIXER) == 4
    proc = project.cli("stats", "--suggest")
    assert proc.returncode == 0 and proc.stderr == "", proc
    lines = proc.stdout.splitlines()
    assert lines[0].split() == [
        "agent",
        "task_kind",
        "completed_loops",
        "suggested_max_iterations",
        "fewest_iterations",
        "most_iterations",
        "enough_loops",
    ]
    assert [line.split() for line in lines[2:5]] == [
        ["-", "-", "1", "5", "5", "5", "false"],
        ["fixer", "bugfix", "12", str(p90(FIXER)), "2", "5", "true"],
        ["fixer", "docs", "3", "8", "6", "8", "false"],
    ]
    assert lines[5] == "(3 rows)"

    rows = json.loads(project.cli("stats", "--suggest", "--json").stdout)
    assert rows[1] == {
        "agent": "fixer",
        "task_kind": "bugfix",
        "completed_loops": len(FIXER),
        "suggested_max_iterations": p90(FIXER),
        "fewest_iterations": min(FIXER),
        "most_iterations": max(FIXER),
        "enough_loops": True,
    }
    assert [(r["agent"], r["task_kind"]) for r in rows] == [
        ("-", "-"),
        ("fixer", "bugfix"),
        ("fixer", "docs"),
    ]
    table = list(csv.DictReader(io.StringIO(project.cli("stats", "--suggest", "--csv").stdout)))
    assert [r["suggested_max_iterations"] for r in table] == ["5", str(p90(FIXER)), "8"]
    # without --suggest, stats is as it was: loop metrics and success by iterations
    assert set(json.loads(project.cli("stats", "--json").stdout)) == {"loop_metrics", "success_by_iterations"}


def test_run_with_auto_runs_to_the_limit_past_loops_suggest_and_show_says_why(project: Project) -> None:
    history(project)
    project.write("ralph.toml", 'agent = "fixer"\nkind = "bugfix"\nmax_iterations = "auto"\n')
    project.write("PROMPT.md", "Fix the bug.\n")
    project.write("agent.py", AGENT)
    proc = project.cli("run", "--session", "now", "--prompt", "PROMPT.md", "--", sys.executable, "agent.py")
    assert proc.returncode == 4, proc  # never promised: escalated at its limit
    limit = p90(FIXER)
    why = f"auto: p90 of {len(FIXER)} completed loops (agent fixer, kind bugfix) is {limit}"
    assert f"[ralph-ledger] now: max iterations {limit} ({why})\n" in proc.stdout
    assert f"iteration {limit} of {limit}" in proc.stdout and f"iteration {limit + 1}" not in proc.stdout
    started = project.journal("now")[0]
    assert (started["max_iterations"], started["max_iterations_reason"], started["task_kind"]) == (
        limit,
        why,
        "bugfix",
    )
    assert started["config"]["max_iterations"] == "auto"
    shown = project.cli("show", "now").stdout.splitlines()[0]
    assert shown.startswith(
        f"session now: escalated, iteration {limit}/{limit} ({why}), agent fixer, kind bugfix,"
    )


def test_run_max_iterations_auto_and_kind_on_the_command_line(project: Project) -> None:
    history(project)
    project.write("ralph.toml", 'agent = "fixer"\nmax_iterations = 7\n')
    project.write("PROMPT.md", "Fix the bug.\n")
    project.write("agent.py", AGENT)
    agent = ["--", sys.executable, "agent.py", "done"]
    args = ["run", "--max-iterations", "auto", "--prompt", "PROMPT.md"]
    proc = project.cli(*args, "--kind", "bugfix", "--session", "bug", *agent)
    assert proc.returncode == 0, proc
    assert project.journal("bug")[0]["max_iterations"] == p90(FIXER)
    # a kind with fewer than 10 completed loops: the configured default (ralph.toml's number is
    # replaced by auto, so the agent's default, 15)
    proc = project.cli(*args, "--kind", "docs", "--session", "docs", *agent)
    assert proc.returncode == 0, proc
    started = project.journal("docs")[0]
    assert started["max_iterations"] == 15
    assert started["max_iterations_reason"] == (
        "auto: 3 completed loops (agent fixer, kind docs), too few for a suggestion: the default 15"
    )
    assert "(auto: 3 completed loops" in project.cli("show", "docs").stdout.splitlines()[0]
    # a number as before: no reason recorded or shown
    proc = project.cli("run", "--prompt", "PROMPT.md", "--session", "fixed", *agent)
    assert proc.returncode == 0 and "max iterations" not in proc.stdout, proc
    assert project.journal("fixed")[0]["max_iterations_reason"] == ""
    assert "iteration 1/7, agent fixer, task" in project.cli("show", "fixed").stdout


def test_auto_is_clamped_by_the_configured_floor_and_ceiling(project: Project) -> None:
    history(project)
    project.write("PROMPT.md", "Fix the bug.\n")
    project.write("agent.py", AGENT)
    agent = ["--", sys.executable, "agent.py", "done"]
    for i, (bounds, limit, said) in enumerate(
        [
            ("auto_floor = 6", 6, "raised to auto_floor 6"),
            ("auto_floor = 1\nauto_ceiling = 2", 2, "lowered to auto_ceiling 2"),
        ]
    ):
        project.write("ralph.toml", f'agent = "fixer"\nkind = "bugfix"\nmax_iterations = "auto"\n{bounds}\n')
        proc = project.cli("run", "--prompt", "PROMPT.md", "--session", f"s{i}", *agent)
        assert proc.returncode == 0, proc
        started = project.journal(f"s{i}")[0]
        assert started["max_iterations"] == limit and started["max_iterations_reason"].endswith(said)


def test_bad_adaptive_settings_are_one_line(project: Project) -> None:
    project.write("PROMPT.md", "Fix the bug.\n")
    for toml, line in [
        (
            'max_iterations = "sometimes"',
            'ralph.toml: max_iterations: expected a whole number >= 1 or "auto"',
        ),
        (
            "auto_floor = 9\nauto_ceiling = 4",
            "ralph.toml: auto_ceiling: expected a whole number >= auto_floor (9)",
        ),
        ('kind = "two words"', "ralph.toml: kind: expected a name of letters, digits"),
    ]:
        project.write("ralph.toml", toml + "\n")
        proc = project.cli("run", "--prompt", "PROMPT.md", "--", sys.executable, "-c", "")
        assert proc.returncode == 1 and len(proc.stderr.splitlines()) == 1, proc
        assert line in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    project.write("ralph.toml", "")
    for args, line in [
        (
            ["--max-iterations", "soon"],
            "argument --max-iterations: expected a whole number >= 1 or auto, got 'soon'",
        ),
        (["--kind", "a/b"], "argument --kind: expected a name of letters, digits"),
        (["--resume", "x", "--max-iterations", "auto"], "--max-iterations auto applies when a loop starts"),
    ]:
        proc = project.cli("run", *args, "--prompt", "PROMPT.md", "--", sys.executable, "-c", "")
        assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc
        assert line in proc.stderr, proc.stderr


def test_loop_start_with_auto_starts_the_hook_loop_at_the_suggested_limit(project: Project) -> None:
    """``loop start --max-iterations auto --kind bugfix`` in ledger mode: the first stop starts the loop
    with the suggestion for the hook's agent (``claude-code``) and the kind."""
    journals = project.home / "journals"
    counts = [5, 6, 6, 7, 7, 7, 8, 8, 9, 12]
    for i, n in enumerate(counts):
        past_loop(journals, f"cc-{i}", n, agent="claude-code", kind="bugfix")
    ledger_project(project)
    assert project.cli("init", "claude-code").returncode == 0
    proc = project.cli("loop", "start", "Fix the bug", "--max-iterations", "auto", "--kind", "bugfix")
    assert proc.returncode == 0, proc
    assert "chosen from past loops" in proc.stdout
    loop_file = json.loads((project.dir / ".claude" / "ralph-ledger.local.json").read_text())
    assert (loop_file["max_iterations"], loop_file["kind"]) == ("auto", "bugfix")
    claude = Claude(project)
    claude.prompt("Fix the bug")
    claude.text("Looking into it.")
    claude.stop()
    (row,) = [r for r in project.sessions() if r["status"] == "running"]  # the past loops completed
    assert row["max_iterations"] == p90(counts) == 9
    started = project.journal(row["session_id"])[0]
    assert started["task_kind"] == "bugfix"
    assert (
        started["max_iterations_reason"]
        == "auto: p90 of 10 completed loops (agent claude-code, kind bugfix) is 9"
    )


def test_loop_start_auto_and_kind_need_a_ledger_mode_loop(project: Project) -> None:
    for args in (["--max-iterations", "auto"], ["--kind", "bugfix"]):
        proc = project.cli("loop", "start", "Fix it", *args)
        assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc
        assert f"{args[0]}{' auto' if args[1] == 'auto' else ''} needs a ledger-mode loop" in proc.stderr
    proc = project.cli("loop", "start", "Fix it", "--mode", "ledger", "--kind", "no good")
    assert proc.returncode == 2 and "--kind: expected a name of letters" in proc.stderr, proc
    assert not (project.dir / ".claude").exists()


def test_the_view_is_listed_by_schema_and_exported(project: Project, tmp_path: Path) -> None:
    history(project)
    schema = project.cli("schema").stdout
    assert "view limit_suggestions\n  agent" in schema and "suggested_max_iterations" in schema
    assert "CREATE OR REPLACE VIEW limit_suggestions" in project.cli("schema", "--portable").stdout
    out = tmp_path / "dataset"
    out.mkdir()
    proc = project.cli("export", "--parquet", str(out), "--source", "here")
    assert proc.returncode == 0, proc
    (view,) = [p for p in (out / "views").iterdir() if p.name.endswith("-limit_suggestions.sql")]
    assert "cume_dist() OVER (PARTITION BY agent, task_kind ORDER BY iteration)" in view.read_text()
    (spark,) = (out / "views" / "spark").glob("*-limit_suggestions.sql")
    assert "CUME_DIST() OVER (PARTITION BY agent, task_kind ORDER BY iteration" in " ".join(
        spark.read_text().split()
    )


def test_init_agent_writes_auto_when_the_configuration_asks_for_it(project: Project) -> None:
    ledger_project(project)
    config = project.dir / "ralph.toml"
    config.write_text('max_iterations = "auto"\n' + config.read_text())  # before its [[rules]] table
    proc = project.cli("init", "claude-code", "--agent", "fixer")
    assert proc.returncode == 0, proc
    text = (project.dir / ".claude" / "agents" / "fixer.md").read_text()
    assert "  maxIterations: auto\n" in text
    proc = project.cli("init", "claude-code", "--agent", "other", "--max-iterations", "6")
    assert (
        proc.returncode == 0
        and "  maxIterations: 6\n" in (project.dir / ".claude/agents/other.md").read_text()
    )
    proc = project.cli("init", "claude-code", "--agent", "third", "--max-iterations", "many")
    assert proc.returncode == 2 and "expected a whole number >= 1 or auto, got 'many'" in proc.stderr, proc
