"""Contract: ``ralph-ledger run --tasks TASKS.md -- claude -p ...`` with the real Claude Code 2.1.328
against the Anthropic mock (docs/tasks.md): a three-task Markdown list run to its end, task 1 in
two iterations and the others in one; the file ticked, each task's prompt sent to the model, and
the ``tasks`` view's iterations and cost equal to what the mock served per task."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.clients.claude_code_client import command, env, iteration
from tests.clients.conftest import VENV_BIN
from tests.clients.mocks.anthropic import AnthropicAPI
from tests.clients.mocks.base import Reply, Script, Usage
from tests.clients.test_claude_code_run import SESSION, Loop, priced, project, tokens

pytestmark = pytest.mark.clients

LIST = "# Plan\n\n- [ ] write f1.txt and f2.txt\n- [ ] write f3.txt\n- [ ] write f4.txt\n\nNotes stay.\n"


def run_tasks(
    client_bin: Path, root: Path, work: Path, turns: list[Reply]
) -> tuple[subprocess.CompletedProcess[str], list[Reply], str]:
    """``ralph-ledger run --tasks TASKS.md -- claude -p`` in ``work`` against the mock serving
    ``turns``: the run, the replies served and the request bodies (as one JSON text)."""
    with AnthropicAPI(Script(turns)) as api:
        proc = subprocess.run(
            [str(VENV_BIN / "ralph-ledger"), "run", "--session", SESSION, "--tasks", "TASKS.md", "--",
             *command(client_bin / "claude", "stream-json")],
            env=env(root / "home", api.url),
            cwd=work,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=180,
        )  # fmt: skip
        return proc, api.replies(), json.dumps(api.bodies())


def test_a_three_task_list_with_the_real_client(client_bin: Path, tmp_path: Path) -> None:
    root = tmp_path
    work = project(root / "project")
    (work / "TASKS.md").write_text(LIST)
    turns = [*iteration(work, 1, last=False), *(t for n in (2, 3, 4) for t in iteration(work, n, last=True))]
    proc, served, bodies = run_tasks(client_bin, root, work, turns)
    loop = Loop(proc, served, work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{SESSION}: COMPLETE after 4 iterations" in proc.stdout
    assert (work / "TASKS.md").read_text() == LIST.replace("- [ ]", "- [x]")
    assert all((work / f"f{n}.txt").exists() for n in (1, 2, 3, 4))
    for no, title in ((1, "write f1.txt and f2.txt"), (2, "write f3.txt"), (3, "write f4.txt")):
        assert f"Current task ({no} of 3): {title}" in bodies  # each task's prompt reached the model
    rows = loop.sql(
        "SELECT task_no, status, iterations, cost_usd FROM tasks"
        f" WHERE session_id = '{SESSION}' ORDER BY task_no"
    )
    assert [(r["task_no"], r["status"], r["iterations"]) for r in rows] == [
        (1, "done", 2),
        (2, "done", 1),
        (3, "done", 1),
    ]
    per_iteration = [priced(tokens([a, b])) for a, b in zip(served[::2], served[1::2], strict=True)]
    want = [sum(per_iteration[:2]), per_iteration[2], per_iteration[3]]
    assert [r["cost_usd"] for r in rows] == pytest.approx(want, abs=1e-8)


def test_a_blocked_task_is_skipped_with_the_real_client(client_bin: Path, tmp_path: Path) -> None:
    """Task 2's turn ends BLOCKED: the task is skipped (the default), its box left empty, and task 3
    runs in the same session; the loop ends complete with 2 of 3 done."""
    root = tmp_path
    work = project(root / "project")
    (work / "TASKS.md").write_text(LIST)
    blocked = iteration(work, 2, last=False)
    blocked[-1] = Reply(
        text="I cannot. <promise>BLOCKED</promise>\nReason: f3.txt is read-only", usage=Usage(7, 8)
    )
    turns = [*iteration(work, 1, last=True), *blocked, *iteration(work, 3, last=True)]
    proc, served, _ = run_tasks(client_bin, root, work, turns)
    loop = Loop(proc, served, work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (work / "TASKS.md").read_text() == LIST.replace("- [ ] write f1", "- [x] write f1").replace(
        "- [ ] write f4", "- [x] write f4"
    )
    rows = loop.sql(
        f"SELECT task_no, status, iterations FROM tasks WHERE session_id = '{SESSION}' ORDER BY 1"
    )
    assert [(r["task_no"], r["status"], r["iterations"]) for r in rows] == [
        (1, "done", 1),
        (2, "skipped", 1),
        (3, "done", 1),
    ]
    (session,) = loop.sql(
        f"SELECT status, tasks_done, tasks_total FROM sessions WHERE session_id = '{SESSION}'"
    )
    assert (session["status"], session["tasks_done"], session["tasks_total"]) == ("complete", 2, 3)
