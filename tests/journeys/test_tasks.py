"""Journeys of task-list loops (docs/tasks.md): ``ralph-ledger run --tasks FILE`` with the installed
command in a fresh git project, a stand-in agent that speaks Claude Code's stream-json (its cost
and tokens), the file ticked, the ``tasks`` view, ``stats``, a blocked task skipped, a bad file's
one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.helpers import AGENT_PREAMBLE
from tests.journeys.conftest import Project

LIST = """\
# Plan

Some notes that stay as they are.

- [ ] write hello.txt
  It says hello.
- [ ] write world.txt
* [ ] write done.txt

Trailing words.
"""

AGENT = (
    AGENT_PREAMBLE
    + r"""
import re
(state / f"prompt{n}.txt").write_text(prompt)
task = re.search(r"Current task \((\d+) of (\d+)\): (.*)", prompt)
no, title = int(task[1]), task[3]
tries = state / f"tries{no}"
tries.write_text(str(int(tries.read_text()) + 1 if tries.exists() else 1))
BEHAVIOUR
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": text,
                  "total_cost_usd": 0.01 * no, "usage": {"input_tokens": 100, "output_tokens": 10}}))
"""
)

STEADY = """\
if no == 1 and tries.read_text() == "1":
    text = "Started; not done yet."
else:
    pathlib.Path(title.split()[-1]).write_text(title + "\\n")
    text = "Done. <promise>COMPLETE</promise>"
"""
"""Task 1 takes two iterations, the others one."""

STUCK = """\
if no == 2:
    text = "I cannot. <promise>BLOCKED</promise>\\nReason: the disk is read-only"
else:
    text = "Done. <promise>COMPLETE</promise>"
"""
"""Task 2 is blocked."""


def run_tasks(project: Project, tmp: Path, behaviour: str, *args: str) -> tuple[Any, Path]:
    """``ralph-ledger run --session s1 --tasks TASKS.md ARGS -- AGENT`` in the project."""
    state = tmp / "state"
    state.mkdir()
    agent = tmp / "agent.py"
    agent.write_text(AGENT.replace("BEHAVIOUR", behaviour))
    project.write("TASKS.md", LIST)
    cmd = [sys.executable, str(agent), str(state)]
    proc = project.cli(
        "run", "--session", "s1", "--tasks", "TASKS.md", "--agent-format", "claude", *args, "--", *cmd
    )
    return proc, state


def rows(project: Project, sql: str) -> list[dict[str, Any]]:
    proc = project.cli("sql", "--json", sql)
    assert proc.returncode == 0, proc.stderr
    out: list[dict[str, Any]] = json.loads(proc.stdout)
    return out


def test_a_three_task_list_runs_to_its_end(project: Project, tmp_path: Path) -> None:
    proc, state = run_tasks(project, tmp_path, STEADY)
    assert proc.returncode == 0, proc.stderr
    assert "s1: COMPLETE after 4 iterations" in proc.stdout
    said = [line for line in proc.stdout.splitlines() if line.startswith("[ralph-ledger] s1: task ")]
    assert said == [
        "[ralph-ledger] s1: task 1 of 3: write hello.txt",
        "[ralph-ledger] s1: task 1 of 3 done: write hello.txt",
        "[ralph-ledger] s1: task 2 of 3: write world.txt",
        "[ralph-ledger] s1: task 2 of 3 done: write world.txt",
        "[ralph-ledger] s1: task 3 of 3: write done.txt",
        "[ralph-ledger] s1: task 3 of 3 done: write done.txt",
    ]
    lines = proc.stdout.splitlines()
    ended = lines.index("[ralph-ledger] s1: task 1 of 3 done: write hello.txt")
    assert lines[ended - 1].startswith("[ralph-ledger] s1: iteration 2: COMPLETE")  # then its task
    for name in ("hello.txt", "world.txt", "done.txt"):
        assert (project.dir / name).exists()
    ticked = LIST.replace("- [ ] write", "- [x] write").replace("* [ ] write", "* [x] write")
    assert (project.dir / "TASKS.md").read_text() == ticked  # every other line byte for byte
    first, third = (state / "prompt1.txt").read_text(), (state / "prompt3.txt").read_text()
    assert "Current task (1 of 3): write hello.txt\nIt says hello." in first
    assert "Current task (2 of 3): write world.txt" in third and "1 of 3 done, 2 left" in third
    assert "Feedback from iteration" not in third  # a new task's prompt is fresh
    tasks = rows(project, "SELECT task_no, title, status, iterations, cost_usd FROM tasks ORDER BY task_no")
    assert tasks == [
        {"task_no": 1, "title": "write hello.txt", "status": "done", "iterations": 2, "cost_usd": 0.02},
        {"task_no": 2, "title": "write world.txt", "status": "done", "iterations": 1, "cost_usd": 0.02},
        {"task_no": 3, "title": "write done.txt", "status": "done", "iterations": 1, "cost_usd": 0.03},
    ]
    (session,) = rows(project, "SELECT tasks_total, tasks_done, current_task FROM sessions")
    assert session == {"tasks_total": 3, "tasks_done": 3, "current_task": ""}
    (listed_session,) = json.loads(project.cli("sessions", "--json").stdout)
    assert (listed_session["tasks_done"], listed_session["tasks_total"]) == (3, 3)
    show = project.cli("show", "s1")
    assert show.returncode == 0 and ", tasks 3/3 done\n" in show.stdout
    listed = project.cli("tasks", "s1")
    assert listed.returncode == 0, listed.stderr
    table = listed.stdout.splitlines()
    assert table[0].split()[:4] == ["task_no", "title", "status", "iterations"]
    assert [line.split()[0] for line in table[2:5]] == ["1", "2", "3"]
    assert [line.split()[-4] for line in table[2:5]] == ["0.02", "0.02", "0.03"]  # cost_usd
    missing = project.cli("tasks", "nope")
    assert missing.returncode == 1 and "no session 'nope'" in missing.stderr
    stats = project.cli("stats", "--json")
    assert stats.returncode == 0, stats.stderr
    per_task = json.loads(stats.stdout)["tasks"]
    assert [(t["task_no"], t["iterations"], t["cost_usd"]) for t in per_task] == [
        (1, 2, 0.02),
        (2, 1, 0.02),
        (3, 1, 0.03),
    ]
    types = [e["type"] for e in project.journal("s1")]
    assert types.count("task_started") == 3 and types.count("task_completed") == 3


def test_a_blocked_task_is_skipped(project: Project, tmp_path: Path) -> None:
    proc, _ = run_tasks(project, tmp_path, STUCK)
    assert proc.returncode == 0, proc.stderr
    (said,) = [line for line in proc.stdout.splitlines() if "s1: task 2 of 3 blocked" in line]
    assert "read-only" in said and said.endswith("): skipped, the loop goes on")
    statuses = rows(project, "SELECT task_no, status, iterations FROM tasks ORDER BY task_no")
    assert [(r["task_no"], r["status"], r["iterations"]) for r in statuses] == [
        (1, "done", 1),
        (2, "skipped", 1),
        (3, "done", 1),
    ]
    text = (project.dir / "TASKS.md").read_text()
    assert (
        "- [x] write hello.txt" in text and "- [ ] write world.txt" in text and "* [x] write done.txt" in text
    )
    (blocked,) = [e for e in project.journal("s1") if e["type"] == "task_blocked"]
    assert blocked["skipped"] and "read-only" in blocked["reason"]


def test_a_blocked_task_stops_the_loop_when_asked(project: Project, tmp_path: Path) -> None:
    proc, _ = run_tasks(project, tmp_path, STUCK, "--on-task-blocked", "stop")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "s1: task 2 of 3 blocked (" in proc.stdout and "): the loop stops on it\n" in proc.stdout
    statuses = rows(project, "SELECT status FROM tasks ORDER BY task_no")
    assert [r["status"] for r in statuses] == ["done", "blocked", "pending"]
    (session,) = rows(project, "SELECT status, tasks_done FROM sessions")
    assert session == {"status": "blocked", "tasks_done": 1}


def test_a_bad_task_file_is_one_line(project: Project, tmp_path: Path) -> None:
    project.write("tasks.json", '[{"title": "fine"}, {"title": "no", "max_iterations": "many"}]')
    proc = project.cli("run", "--tasks", "tasks.json", "--", sys.executable, "-c", "pass")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"ralph-ledger run: --tasks {project.dir / 'tasks.json'}: [1].max_iterations: "
        "expected an integer of at least 1, got 'many'"
    ]
    assert not (project.home / "journals").exists() or not list((project.home / "journals").iterdir())


def test_a_task_list_loop_resumes_without_a_prompt(project: Project, tmp_path: Path) -> None:
    """``run --resume`` of a task-list loop started without a prompt (its tasks are the work) goes on
    with the list the session recorded, the current task in its prompt."""
    from ledger.core.home import Home
    from ledger.loop.config.loop_config import LoopConfig
    from ledger.loop.engine import Engine
    from ledger.loop.tasks.files import read_tasks
    from ledger.loop.tasks.progress import file_record

    path = project.write("TASKS.md", LIST)
    engine = Engine(Home.resolve(project.home), work_dir=project.dir)
    listed = read_tasks(path)
    engine.start("s1", LoopConfig(), task_list=listed.tasks, task_file=file_record(project.dir, path))
    state = tmp_path / "state"
    state.mkdir()
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT.replace("BEHAVIOUR", 'text = "Done. <promise>COMPLETE</promise>"'))
    proc = project.cli(
        "run", "--resume", "s1", "--agent-format", "claude", "--", sys.executable, str(agent), str(state)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Current task (1 of 3): write hello.txt" in (state / "prompt1.txt").read_text()
    assert (project.dir / "TASKS.md").read_text().count("[x]") == 3


def test_a_task_lists_ticks_are_no_unsaved_change_and_a_rollback_leaves_them(
    project: Project, tmp_path: Path
) -> None:
    """The loop ticks its list after the turn's snapshot: the list file is the loop's own record, left
    out of the snapshots, so a rollback after the loop is not refused over the ticks (it was: "changes
    that are in no snapshot") and does not un-tick them; the agent's files go back to iteration 1."""
    proc, _state = run_tasks(project, tmp_path, STEADY)
    assert proc.returncode == 0, proc.stderr
    ticked = (project.dir / "TASKS.md").read_text()
    diff = project.cli("diff", "s1", "2")
    assert diff.returncode == 0 and "hello.txt" in diff.stdout and "TASKS.md" not in diff.stdout, diff
    back = project.cli("rollback", "s1", "--to", "1")
    assert back.returncode == 0, back.stderr
    assert (project.dir / "TASKS.md").read_text() == ticked
    assert not [n for n in ("hello.txt", "world.txt", "done.txt") if (project.dir / n).exists()]
    project.write("hello.txt", "my own\n")
    refused = project.cli("rollback", "s1", "--to", "2")
    assert refused.returncode == 1 and "in no snapshot of session 's1'" in refused.stderr
