"""Journeys of task-list loops through Claude Code's Stop hook (docs/tasks.md): ``ralph-ledger loop
start --tasks prd.json`` in a fresh git project, then the installed hook run with the JSON Claude
Code writes, a transcript written the way Claude Code writes it; the stand-in finishes task 1 in two
turns and task 2 in one. The prd.json ends with ``passes: true`` for each story, each block names the
next task, and the ``tasks`` view agrees."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from tests.journeys.conftest import Project
from tests.journeys.test_claude_code import CLAUDE, Claude, block, ledger_project, start

PRD = {
    "name": "health",
    "branchName": "ralph/health",
    "userStories": [
        {
            "id": "US-001",
            "title": "Add a /health endpoint",
            "description": "It answers 200.",
            "acceptanceCriteria": ["GET /health is 200"],
            "priority": 1,
            "passes": False,
        },
        {
            "id": "US-002",
            "title": "Document /health",
            "description": "In API.md.",
            "acceptanceCriteria": ["API.md names it"],
            "priority": 2,
            "passes": False,
        },
    ],
}


def written(doc: Mapping[str, object]) -> str:
    """``doc`` as a person lays it out: four-space indents, each story's criteria on one line."""
    text = json.dumps(doc, indent=4)
    return re.sub(r'\[\n\s+("[^"\n]*")\n\s+\]', r"[\1]", text)


def test_a_prd_json_loop_through_the_claude_code_hook(project: Project) -> None:
    ledger_project(project)
    project.write("prd.json", written(PRD))
    assert '"acceptanceCriteria": ["GET /health is 200"],' in written(PRD)
    said = start(project, "Keep the code style.", "--tasks", "prd.json", "--max-iterations", "10")
    assert "work on task 1 of 2 first: Add a /health endpoint" in said
    claude = Claude(project)
    sid = f"cc-{CLAUDE}"
    claude.prompt("go")
    claude.works("Started the endpoint; not done yet.")
    again = block(claude.stop())["reason"]
    assert "Current task (1 of 2): Add a /health endpoint" in again
    claude.works("Done. <promise>COMPLETE</promise>")
    nxt = block(claude.stop())["reason"]
    assert "Current task (2 of 2): Document /health" in nxt and "Keep the code style." in nxt
    stories = json.loads((project.dir / "prd.json").read_text())["userStories"]
    assert [s["passes"] for s in stories] == [True, False]  # ticked when its task ended
    claude.works("Documented. <promise>COMPLETE</promise>")
    out = claude.stop().stdout
    assert out.startswith("✅"), out
    doc = json.loads((project.dir / "prd.json").read_text())
    assert [s["passes"] for s in doc["userStories"]] == [True, True]
    assert doc["name"] == "health" and doc["branchName"] == "ralph/health"  # other keys kept
    ticked = written(PRD).replace('"passes": false', '"passes": true')
    assert (project.dir / "prd.json").read_text() == ticked  # and every other byte: the person's layout
    assert not (project.dir / ".claude" / "ralph-ledger.local.json").exists()  # the loop ended
    proc = project.cli(
        "sql",
        "--json",
        f"SELECT task_no, title, status, iterations FROM tasks WHERE session_id = '{sid}' ORDER BY task_no",
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [(r["task_no"], r["status"], r["iterations"]) for r in rows] == [(1, "done", 2), (2, "done", 1)]
    proc = project.cli("sql", "--json", f"SELECT * FROM sessions WHERE session_id = '{sid}'")
    row = json.loads(proc.stdout)[0]
    assert (row["status"], row["tasks_total"], row["tasks_done"]) == ("complete", 2, 2)


def test_loop_start_tasks_refuses_a_bad_file_and_a_plugin_loop(project: Project) -> None:
    project.write("prd.json", '{"userStories": [{"title": 3}]}')
    ledger_project(project)
    proc = project.cli("loop", "start", "--tasks", "prd.json")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc
    assert proc.stderr.startswith("ralph-ledger loop start: --tasks ") and "prd.json" in proc.stderr
    project.write("TASKS.md", "- [x] done already\n")
    proc = project.cli("loop", "start", "--tasks", "TASKS.md")
    assert proc.returncode == 2 and "every task of" in proc.stderr, proc
    proc = project.cli("loop", "start", "go", "--tasks", "TASKS.md", "--mode", "plugin")
    assert proc.returncode == 2 and "--tasks needs a ledger-mode loop" in proc.stderr, proc
    assert not (project.dir / ".claude" / "ralph-ledger.local.json").exists()
