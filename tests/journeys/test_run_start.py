"""Journeys of how ``ralph-ledger run`` starts (issue 24): sessions started once whoever starts them,
one runner per session, the agent found where it runs, and the task as a clean label."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from tests.journeys.conftest import GIT, Project, clean_env, script, spawn
from tests.journeys.test_run import TASK, Loop, all_dead, wait_for_file

WAIT = """\
(state / f"pid{n}").write_text(str(os.getpid()))
while not (state / "go").exists():
    time.sleep(0.02)
print("<promise>COMPLETE</promise>", flush=True)
"""
"""Agent code that writes its pid, waits for ``STATE/go``, then completes."""

SHELL_AGENT = """\
#!/bin/sh
cat > /dev/null
pwd >> "$STATE/where"
echo "<promise>COMPLETE</promise>"
"""
"""An agent script run by a relative path (``./agent.sh``): it notes where it runs in ``$STATE/where``."""

FIRST_HANGS = """\
#!/bin/sh
cat > /dev/null
pwd >> "$STATE/where"
[ "$(wc -l < "$STATE/where")" -eq 1 ] && sleep 60
echo "<promise>COMPLETE</promise>"
"""
"""As ``SHELL_AGENT``, but its first run hangs."""


def run_at_once(project: Project, argvs: list[list[str]]) -> list[subprocess.CompletedProcess[str]]:
    """Start every ``ralph-ledger ARGV`` together, just after a second begins (so that a clock-made id
    would be the same for all), and wait for them all."""
    time.sleep(1 - time.time() % 1 + 0.01)
    procs = [spawn([script("ralph-ledger"), *argv], project.dir, "") for argv in argvs]
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def started_in(project: Project, session: str) -> int:
    """How many ``session_started`` the session's journal holds."""
    return sum(e["type"] == "session_started" for e in project.journal(session))


# ----------------------------------------------------------------------------- 2.1 session start
def test_runs_started_in_the_same_second_get_ids_of_their_own(project: Project, tmp_path: Path) -> None:
    """Four ``run``s without ``--session`` started together: four sessions, each started once (the
    id was the second: the others exited 1 with "session 'run-…' already exists", an id nobody chose,
    or two of them wrote two ``session_started`` into one journal)."""
    loop = Loop(project, tmp_path, 'print("<promise>COMPLETE</promise>")\n')
    done = run_at_once(project, [["run", "--prompt", "PROMPT.md", "--", *loop.cmd]] * 4)
    assert [d.returncode for d in done] == [0] * 4, [d.stderr for d in done]
    journals = sorted(p.stem for p in (project.home / "journals").glob("*.jsonl"))
    assert len(journals) == 4
    assert all(j.startswith("run-") for j in journals)
    assert [started_in(project, j) for j in journals] == [1] * 4


def test_one_new_session_started_by_several_runs_at_once_starts_once(
    project: Project, tmp_path: Path
) -> None:
    """Four ``run --session s1`` together: one runs the loop; each other one exits 1 with one line
    and starts no agent; the journal holds one ``session_started`` (3 trials in 16 held two)."""
    loop = Loop(project, tmp_path, WAIT)
    (loop.state / "go").touch()
    for trial in range(3):
        session = f"s{trial}"
        argv = ["run", "--session", session, "--prompt", "PROMPT.md", "--", *loop.cmd]
        done = run_at_once(project, [argv] * 4)
        assert sorted(d.returncode for d in done) == [0, 1, 1, 1], [d.stderr for d in done]
        for refused in (d for d in done if d.returncode == 1):
            (line,) = refused.stderr.strip().splitlines()
            assert re.fullmatch(
                f"ralph-ledger run: session '{session}' (is already running in another process "
                r"\(PID \d+\): one run at a time|already exists)",
                line,
            ), line
            assert refused.stdout == ""
        assert started_in(project, session) == 1
    assert (loop.state / "count").read_text() == "3"  # one agent run per session


# ----------------------------------------------------------------------------- 2.2 one runner
def test_resume_while_another_process_runs_the_session_is_refused_naming_its_pid(
    project: Project, tmp_path: Path
) -> None:
    """``run --resume s1`` while ``run`` still runs s1: one line naming the runner's PID, exit 1, no
    second agent (it started one in the same checkout). Once that runner is killed (SIGKILL: its pid
    file stays, and here names a live process, as a reused pid would), the resume goes on."""
    loop = Loop(project, tmp_path, WAIT)
    runner = loop.start()
    wait_for_file(loop.state / "pid1", runner)
    resumed = project.cli("run", "--resume", "s1")
    assert resumed.returncode == 1, resumed.stderr
    assert resumed.stderr.splitlines() == [
        f"ralph-ledger run: session 's1' is already running in another process (PID {runner.pid}): "
        "one run at a time"
    ]
    assert resumed.stdout == "" and (loop.state / "count").read_text() == "1"

    agent = int((loop.state / "pid1").read_text())
    runner.kill()
    runner.communicate(timeout=20)
    with contextlib.suppress(ProcessLookupError):  # it dies with its runner now (issue 25)
        os.killpg(agent, signal.SIGKILL)  # the agent runs in its own process group
    assert all_dead([agent])
    left = project.home / "runners" / "s1.pid"  # what the killed runner left; it names a live process now
    left.parent.mkdir(exist_ok=True)
    left.write_text(f"{os.getpid()}\n")
    (loop.state / "go").touch()
    again = project.cli("run", "--resume", "s1")
    assert again.returncode == 0, again.stderr
    assert (loop.state / "count").read_text() == "2"
    assert project.sessions()[0]["status"] == "complete"


# ----------------------------------------------------------------------------- 2.5 the agent, where it runs
def agent_script(
    project: Project, tmp_path: Path, mode: int = 0o755, text: str = SHELL_AGENT
) -> dict[str, str]:
    """``agent.sh`` (``text``) in the project, not committed, and the environment that runs it."""
    (tmp_path / "state").mkdir(exist_ok=True)
    project.write("agent.sh", text).chmod(mode)
    project.write("PROMPT.md", TASK)
    return clean_env(STATE=str(tmp_path / "state"))


def test_an_untracked_agent_script_is_refused_before_a_worktree_is_made(
    project: Project, tmp_path: Path
) -> None:
    """``run --worktree w -- ./agent.sh`` with ``agent.sh`` not committed: the worktree (made from
    HEAD) would not have it. One line, exit 2, and no worktree, branch or session (they were made,
    then the agent failed with "No such file or directory" and the session stayed running)."""
    env = agent_script(project, tmp_path)
    done = project.cli("run", "--worktree", "w", "--prompt", "PROMPT.md", "--", "./agent.sh", env=env)
    assert done.returncode == 2, (done.stdout, done.stderr)
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("ralph-ledger run: agent command not found: ./agent.sh is not in HEAD")
    assert "commit it" in line
    assert not (project.home / "worktrees" / "w").exists()
    branches = subprocess.run(["git", "branch", "--list", "ralph/w"], cwd=project.dir, capture_output=True)
    assert branches.stdout.strip() == b""
    assert not list(project.home.glob("journals/*.jsonl"))

    subprocess.run([*GIT, "add", "agent.sh"], cwd=project.dir, check=True)  # committed, it runs there
    subprocess.run([*GIT, "commit", "-qm", "agent"], cwd=project.dir, check=True)
    done = project.cli("run", "--worktree", "w", "--prompt", "PROMPT.md", "--", "./agent.sh", env=env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "state" / "where").read_text() == f"{project.home / 'worktrees' / 'w'}\n"


def test_resume_from_a_subfolder_runs_the_agent_where_the_session_began(
    project: Project, tmp_path: Path
) -> None:
    """A session started at the project's root with ``./agent.sh``, interrupted, then resumed from
    ``src/``: the agent is found and runs at the root again (it was looked for in ``src/``: "No such
    file or directory")."""
    env = agent_script(project, tmp_path, text=FIRST_HANGS)
    state = tmp_path / "state"
    project.write("src/app.py", "")
    argv = [script("ralph-ledger"), "run", "--session", "s1", "--prompt", "PROMPT.md", "--", "./agent.sh"]
    runner = subprocess.Popen(
        argv,
        cwd=project.dir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_for_file(state / "where", runner)
    runner.send_signal(signal.SIGTERM)
    assert runner.wait(timeout=20) == 143

    resumed = project.cli("run", "--resume", "s1", cwd=project.dir / "src", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert f"s1: resuming in {project.dir}, where it ran" in resumed.stdout
    assert (state / "where").read_text() == f"{project.dir}\n{project.dir}\n"
    assert project.sessions()[0]["status"] == "complete"


def test_a_non_executable_agent_is_said_to_be_so(project: Project, tmp_path: Path) -> None:
    """``./agent.sh`` without its executable bit: "not executable" and how to mend it, exit 2, nothing
    started (it said "agent command not found", and the file is right there)."""
    env = agent_script(project, tmp_path, mode=0o644)
    done = project.cli("run", "--prompt", "PROMPT.md", "--", "./agent.sh", env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "ralph-ledger run: agent command is not executable: ./agent.sh (make it so: chmod +x ./agent.sh)"
    ]
    assert not list(project.home.glob("journals/*.jsonl"))


# ----------------------------------------------------------------------------- 2.9 the task
def test_the_task_is_the_prompt_without_its_last_newline(project: Project, tmp_path: Path) -> None:
    """``show`` printed ``task Make the tests pass. ,``: the prompt file's newline stayed in the task.
    The agent still gets the prompt as it was written."""
    loop = Loop(project, tmp_path, 'print("<promise>COMPLETE</promise>")\n')
    done = loop.run("--session", "s1", "--prompt", "PROMPT.md", "--", *loop.cmd)
    assert done.returncode == 0, done.stderr
    shown = project.cli("show", "s1")
    assert shown.returncode == 0, shown.stderr
    assert ", task Make the tests pass., last score" in shown.stdout.splitlines()[0]
    assert (loop.state / "prompt1.txt").read_text() == TASK
    started = json.loads((project.home / "journals" / "s1.jsonl").read_text().splitlines()[0])
    assert (started["task"], started["prompt"]) == ("Make the tests pass.", TASK)
