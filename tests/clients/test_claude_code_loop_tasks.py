"""Contract: ``ralph-ledger loop start --tasks prd.json`` with the real Claude Code 2.1.328 against the
Anthropic mock (docs/tasks.md, With Claude Code): the Stop hook drives a two-story ralph-tui
``prd.json``; the mock serves turns that finish story 1, then story 2 (each writes its file, then
promises COMPLETE). The block after story 1 hands the model story 2's prompt, the file ends with
``passes: true`` for each story, and the ``tasks`` view agrees with what the mock served."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clients.mocks.base import Reply, Script, Usage
from tests.clients.test_claude_code_stop import Run, claude_run, recorded, usage_of, write

pytestmark = pytest.mark.clients

PRD = {
    "name": "notes",
    "userStories": [
        {"id": "US-001", "title": "Write f1.txt", "description": "Any text.", "priority": 1, "passes": False},
        {"id": "US-002", "title": "Write f2.txt", "description": "Any text.", "priority": 2, "passes": False},
    ],
}
TOML = "max_iterations = 6\n"


@pytest.fixture(scope="module")
def prd_loop(client_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Run, Path]]:
    root = tmp_path_factory.mktemp("prd")
    prd = root / "prd.json"  # beside the project: claude_run makes the project folder itself
    prd.write_text(json.dumps(PRD, indent=2) + "\n")
    work = root / "project"
    main = [
        Reply(text="Writing f1.", tool_calls=(write(work / "f1.txt"),), usage=Usage(100, 10, 500, 5)),
        Reply(text="f1 done. <promise>COMPLETE</promise>", usage=Usage(101, 11, 510, 6)),  # stop 1
        Reply(text="Writing f2.", tool_calls=(write(work / "f2.txt"),), usage=Usage(102, 12, 520, 7)),
        Reply(text="f2 done. <promise>COMPLETE</promise>", usage=Usage(103, 13, 530, 8)),  # stop 2
    ]
    run = claude_run(
        client_bin,
        root,
        Script(main),
        mode="ledger",
        loop=("--tasks", str(prd)),
        toml=TOML,
        tools="Write,Read",
    )
    yield run, prd


def test_a_prd_json_loop_with_the_real_client_ends_with_every_story_passing(
    prd_loop: tuple[Run, Path],
) -> None:
    run, prd = prd_loop
    doc = json.loads(prd.read_text())
    assert [s["passes"] for s in doc["userStories"]] == [True, True]
    assert doc["name"] == "notes"
    assert (run.project / "f1.txt").exists() and (run.project / "f2.txt").exists()
    (row,) = run.sql("select status, iteration, tasks_total, tasks_done from sessions")
    assert (row["status"], row["iteration"], row["tasks_total"], row["tasks_done"]) == ("complete", 2, 2, 2)
    assert not (run.project / ".claude" / "ralph-ledger.local.json").exists()
    bodies = json.dumps(run.api.bodies())
    assert "Current task (2 of 2): Write f2.txt" in bodies  # the block handed the model story 2


def test_the_tasks_view_agrees_with_what_the_mock_served(prd_loop: tuple[Run, Path]) -> None:
    run, _ = prd_loop
    rows = run.sql("select task_no, title, status, iterations, tokens from tasks order by task_no")
    assert [(r["task_no"], r["title"], r["status"], r["iterations"]) for r in rows] == [
        (1, "Write f1.txt", "done", 1),
        (2, "Write f2.txt", "done", 1),
    ]
    served = [usage_of(run.main[:2]), usage_of(run.main[2:])]
    assert [recorded(run, f"iteration = {n}") for n in (1, 2)] == served
    assert [r["tokens"] for r in rows] == [sum(u.values()) for u in served]
