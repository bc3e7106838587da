"""Journeys of ``summary = true``: ``ralph-ledger run`` with a scripted agent that keeps the prompts it
is given, and the ledger-native Claude Code Stop hook, both tell the agent the loop so far from its
second iteration on, and record what they told it (``summary_given``)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.journeys.conftest import Project, clean_env, script
from tests.journeys.test_claude_code import Claude, block, start
from tests.journeys.test_run import TASK, Loop, wait_for_file

FAILING = (
    "[[rules]]\nname = 'tests'\ntype = 'content_pattern'\npattern = 'tests pass'\n"
    "[guards.circuit_breaker]\nthreshold = 5\n"
)
"""A rule that fails until the agent says ``tests pass``; a breaker that lets three failures by."""


def given(project: Project, session: str) -> dict[int, str]:
    """The summaries the session recorded as given, by the iteration whose prompt carried them."""
    return {
        e["iteration"]: e["loop_summary"] for e in project.journal(session) if e["type"] == "summary_given"
    }


def test_run_gives_the_summary_from_the_second_prompt_on(project: Project, tmp_path: Path) -> None:
    """Iterations 2 and 3 get the task, then the loop so far (scores, what still fails, since when);
    each summary is recorded at the iteration it was given to, word for word as the agent got it."""
    project.write("ralph.toml", "summary = true\nmax_iterations = 8\n" + FAILING)
    loop = Loop(
        project,
        tmp_path,
        "pathlib.Path(f'work{n}.py').write_text('x')\n"
        "print('tests pass <promise>COMPLETE</promise>' if n == 3 else 'not yet')\n",
    )
    proc = loop.run("--session", "s1", "--prompt", "PROMPT.md", "--", *loop.cmd)
    assert proc.returncode == 0, proc.stderr
    prompts = [(loop.state / f"prompt{n}.txt").read_text() for n in (1, 2, 3)]
    assert prompts[0] == TASK
    told = given(project, "s1")
    assert sorted(told) == [2, 3]
    for n, prompt in ((2, prompts[1]), (3, prompts[2])):
        assert prompt.startswith(TASK.rstrip() + "\n\n") and prompt.endswith("\n\n" + told[n])
        assert told[n].startswith(f"Loop so far: iteration {n - 1} of 8 done, score 0.")
        assert "Still failing: tests since iteration 1." in told[n]
    assert "Iteration 2: score 0\n  failing: tests\n  files: work2.py" in told[3]
    assert "- tests: no match for 'tests pass' in agent output" in told[3]
    assert prompts[2].count("no match for 'tests pass'") == 1  # the feedback is not said twice


def test_without_summary_the_prompts_carry_none(project: Project, tmp_path: Path) -> None:
    project.write("ralph.toml", "max_iterations = 8\n" + FAILING)
    loop = Loop(
        project, tmp_path, "print('tests pass <promise>COMPLETE</promise>' if n == 2 else 'not yet')\n"
    )
    assert loop.run("--session", "s1", "--prompt", "PROMPT.md", "--", *loop.cmd).returncode == 0
    assert "Loop so far" not in (loop.state / "prompt2.txt").read_text()
    assert given(project, "s1") == {}


def test_a_resumed_iteration_gets_the_summary_it_was_given(project: Project, tmp_path: Path) -> None:
    """Ctrl-C during iteration 2, then ``run --resume``: the iteration runs again with the prompt it
    had, summary included (read back from its ``summary_given``), and no second summary is recorded."""
    project.write("ralph.toml", "summary = true\n" + FAILING)
    body = (
        "if n == 2:\n    (state / 'waiting').touch()\n    time.sleep(60)\n"
        "print('tests pass <promise>COMPLETE</promise>' if n == 3 else 'not yet')\n"
    )
    loop = Loop(project, tmp_path, body)
    proc = loop.start()
    wait_for_file(loop.state / "waiting", proc)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    resumed = subprocess.run(
        [script("ralph-ledger"), "run", "--resume", "s1"],
        cwd=project.dir,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert resumed.returncode == 0, resumed.stderr
    again = (loop.state / "prompt3.txt").read_text()
    assert again == (loop.state / "prompt2.txt").read_text()
    assert list(given(project, "s1")) == [2] and again.endswith(given(project, "s1")[2])


def test_the_ledger_native_hook_blocks_with_the_summary(project: Project) -> None:
    """Each block's reason is the prompt the runner would give: the task, then the loop so far; the
    journal records it at the iteration the block starts."""
    project.write("ralph.toml", "summary = true\n" + FAILING)
    start(project, TASK.rstrip(), "--mode", "ledger")
    claude = Claude(project)
    claude.prompt(TASK.rstrip())
    claude.text("Not done yet.")
    first = block(claude.stop())["reason"]
    claude.text("Still not.")
    second = block(claude.stop())["reason"]
    sid = f"cc-{claude.session}"
    told = given(project, sid)
    assert sorted(told) == [2, 3]
    assert first == f"{TASK.rstrip()}\n\n{told[2]}" and second == f"{TASK.rstrip()}\n\n{told[3]}"
    assert told[3].startswith("Loop so far: iteration 2 of 15 done, score 0.")
    assert "Still failing: tests since iteration 1." in told[3]


@pytest.mark.parametrize("on", [False, True], ids=["off", "on"])
def test_the_hook_loads_the_summary_only_when_it_is_on(project: Project, on: bool) -> None:
    """A loop without ``summary`` never imports the summary module at a stop (nothing added to a
    stop's time); one with it does."""
    project.write("ralph.toml", ("summary = true\n" if on else "") + FAILING)
    start(project, TASK.rstrip(), "--mode", "ledger")
    claude = Claude(project)
    claude.prompt(TASK.rstrip())
    claude.text("Not done yet.")
    code = (
        "import sys; from ledger.cli import main; rc = main(['hook', 'claude-code']); "
        "print('ledger.loop.prompt.summary' in sys.modules); sys.exit(rc)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=project.dir,
        input=claude.event(),
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    answer, loaded = proc.stdout.splitlines()
    assert json.loads(answer)["decision"] == "block" and loaded == str(on), proc.stdout
    assert ("Loop so far" in json.loads(answer)["reason"]) is on


RUNNER_DOC = Path(__file__).resolve().parents[2] / "docs" / "runner.md"


def test_the_readme_summary_is_what_the_agent_gets(project: Project, tmp_path: Path) -> None:
    """The manual's summary (docs/runner.md: the ```text block that starts ``Loop so far``) ends, byte
    for byte, the third prompt of a loop whose tests fail, with the default hook, an agent that
    changes ``app.py`` each time and at most three iterations."""
    lines = RUNNER_DOC.read_text(encoding="utf-8").splitlines()
    (start,) = [i for i, line in enumerate(lines) if line.startswith("Loop so far:")]
    assert lines[start - 1] == "```text", f"docs/runner.md:{start + 1}"
    shown = "\n".join(lines[start : lines.index("```", start)])
    rule = [sys.executable, "-c", "print('2 failed'); raise SystemExit(1)"]
    rules = f"[[rules]]\nname = 'tests'\ntype = 'command'\nargv = {rule!r}\n"
    project.write("ralph.toml", "summary = true\nhooks = ['default']\n" + rules)
    loop = Loop(project, tmp_path, "with open('app.py', 'a') as f:\n    f.write('x')\n")
    proc = loop.run("--max-iterations", "3", "--prompt", "PROMPT.md", "--", *loop.cmd)
    assert proc.returncode == 4, proc
    third = (loop.state / "prompt3.txt").read_text()
    assert third.endswith("\n\n" + shown), f"docs/runner.md:{start + 1}\n{third}"
