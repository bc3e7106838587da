"""A newcomer doing things twice, or after the end (issue 24, the sweep): a second ``run`` of a
finished session, ``init claude-code`` twice, the run's last line, ``ralph-tui``'s replay at 80x24 left
with ``q`` and with Ctrl-C, commands in a second terminal while a loop runs, and a pause the loop's
completion overtakes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.journeys.conftest import Project, Terminal, clean_env, script

SAMPLES = Path(__file__).resolve().parents[2] / "sample_sessions"
COUNTING = """\
import pathlib, sys
sys.stdin.read()
runs = pathlib.Path(sys.argv[1])
runs.write_text(runs.read_text() + "x" if runs.exists() else "x")
print("<promise>COMPLETE</promise>" if len(runs.read_text()) >= int(sys.argv[2]) else "working")
"""
"""An agent (``agent.py RUNS N``) that counts its runs in the file RUNS and completes at the Nth."""


def counting(project: Project, tmp_path: Path, n: int) -> list[str]:
    """The command of a ``COUNTING`` agent completing at its ``n``th run (its runs in tmp_path/runs)."""
    agent = tmp_path / "agent.py"
    agent.write_text(COUNTING)
    return [sys.executable, str(agent), str(tmp_path / "runs"), str(n)]


def slow_loop(project: Project, tmp_path: Path, says: str, prompt: str) -> subprocess.Popen[str]:
    """``run --session bg`` in the background (``prompt`` on its stdin) around an agent that takes 1.5 s
    and says ``says``; returned once its first turn has begun."""
    agent = tmp_path / "slow.py"
    started = tmp_path / "started"
    agent.write_text(
        "import pathlib, sys, time\nsys.stdin.read()\npathlib.Path(sys.argv[1]).touch()\n"
        f"time.sleep(1.5)\nprint({says!r})\n"
    )
    argv = [script("ralph-ledger"), "run", "--session", "bg", "--", sys.executable, str(agent), str(started)]
    run = subprocess.Popen(
        argv, cwd=project.dir, env=clean_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert run.stdin is not None
    run.stdin.write(prompt + "\n")
    run.stdin.close()
    run.stdin = None
    deadline = time.monotonic() + 30
    while not started.exists():
        if time.monotonic() > deadline or run.poll() is not None:
            run.kill()
            pytest.fail(f"the agent never started: {run.communicate()}")
        time.sleep(0.05)
    return run


def test_a_second_run_of_a_finished_session_is_one_line_and_runs_no_agent(
    project: Project, tmp_path: Path
) -> None:
    """``run --session s1`` again, and ``run --resume s1``, after s1 completed: each one line, exit 1,
    the agent not started again, the journal unchanged."""
    agent = counting(project, tmp_path, 1)
    assert project.cli("run", "--session", "s1", "--", *agent, input="go").returncode == 0
    journal = (project.home / "journals" / "s1.jsonl").read_bytes()
    again = project.cli("run", "--session", "s1", "--", *agent, input="go")
    assert (again.returncode, again.stderr) == (1, "ralph-ledger run: session 's1' already exists\n"), again
    resumed = project.cli("run", "--resume", "s1", input="")
    assert resumed.returncode == 1, resumed
    assert resumed.stderr == "ralph-ledger run: session 's1' is complete; only a running session resumes\n"
    assert (tmp_path / "runs").read_text() == "x"
    assert (project.home / "journals" / "s1.jsonl").read_bytes() == journal


def test_the_runs_last_line_counts_in_words(project: Project, tmp_path: Path) -> None:
    """``COMPLETE after 1 iteration`` and ``after 2 iterations`` (it was ``1 iteration(s)``), and an
    export's ``1 day partition written`` (``partition(s)``)."""
    agent = counting(project, tmp_path, 2)
    proc = project.cli("run", "--session", "two", "--", *agent, input="go")
    assert proc.returncode == 0, proc
    assert (
        proc.stdout.splitlines()[-1]
        == "ralph-ledger run: two: COMPLETE after 2 iterations: agent promised COMPLETE"
    )
    (tmp_path / "runs").unlink()
    agent = counting(project, tmp_path, 1)
    proc = project.cli("run", "--session", "one", "--", *agent, input="go")
    assert (
        proc.stdout.splitlines()[-1]
        == "ralph-ledger run: one: COMPLETE after 1 iteration: agent promised COMPLETE"
    )
    out = project.cli("export", "--parquet", str(tmp_path / "dataset"), "--source", "laptop")
    assert out.returncode == 0, out
    assert out.stdout.endswith(": 1 day partition written, 0 removed\n"), out.stdout
    assert " events of 2 sessions to " in out.stdout, out.stdout


def test_init_claude_code_twice_changes_nothing_the_second_time(project: Project) -> None:
    """The second ``init claude-code`` says the hook is already installed and leaves the settings
    byte for byte, keys of the user's own included."""
    settings = project.dir / ".claude" / "settings.json"
    project.write(".claude/settings.json", json.dumps({"permissions": {"allow": ["Bash(make test)"]}}))
    first = project.cli("init", "claude-code")
    assert first.returncode == 0 and first.stdout.startswith("installed: Stop and SubagentStop hook"), first
    written = settings.read_bytes()
    second = project.cli("init", "claude-code")
    assert second.returncode == 0 and second.stderr == "", second
    assert second.stdout.startswith("already installed: Stop and SubagentStop hook"), second
    assert settings.read_bytes() == written
    data = json.loads(written)
    assert data["permissions"] == {"allow": ["Bash(make test)"]}
    assert [len(data["hooks"][k]) for k in ("Stop", "SubagentStop")] == [1, 1]


@pytest.mark.parametrize("key", ["q", "C-c"])
def test_the_replay_at_80x24_quits_with_q_and_with_ctrl_c(
    project: Project, terminals: list[Terminal], key: str
) -> None:
    """``ralph-tui --replay sample_sessions/`` in an 80x24 terminal: the fleet line, the progress and
    the footer are on screen, every line within 80 columns; ``q`` and Ctrl-C each quit with 0 and give
    the terminal back (the shell's next line is on a clean screen)."""
    shutil.copytree(SAMPLES, project.dir / "sample_sessions")
    term = Terminal(
        [script("ralph-tui"), "--replay", "sample_sessions/"], cwd=project.dir, env=clean_env(), size=(80, 24)
    )
    terminals.append(term)
    screen = term.wait_for(lambda s: "sessions" in s and "replaying" in s and "Help" in s)
    lines = screen.splitlines()
    assert len(lines) <= 24 and all(len(line) <= 80 for line in lines), screen
    progress = next(line for line in lines if "replaying" in line)
    assert re.search(r"\d%$", progress.rstrip()), screen  # the percentage whole, at the line's end
    term.press(key)
    assert term.exit_code() == 0, term.screen()
    assert "sessions" not in term.screen(), term.screen()


def test_a_second_terminal_reads_and_steers_a_running_loop_without_a_word_on_stderr(
    project: Project, tmp_path: Path
) -> None:
    """While ``run`` works in one terminal, ``sessions``, ``show`` and ``sql`` in another answer from
    the journals (nothing on stderr, no lock), and ``stop`` ends the loop at its next validation."""
    run = slow_loop(project, tmp_path, "working", "Keep going.")
    try:
        for words in (
            ["sessions", "--json"],
            ["show", "bg", "--json"],
            ["sql", "SELECT status FROM sessions"],
        ):
            proc = project.cli(*words)
            assert (proc.returncode, proc.stderr) == (0, ""), (words, proc)
        (row,) = project.sessions()
        assert (row["session_id"], row["status"]) == ("bg", "running")
        stop = project.cli("stop", "bg", "--reason", "enough for today")
        assert stop.returncode == 0, stop
        (row,) = project.sessions()
        at_stop = int(row["iteration"])  # the iteration under way once the stop was recorded
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 3, (out, err)  # a manual stop ends the loop blocked
    (row,) = project.sessions()
    assert row["status"] == "blocked" and row["iteration"] in (at_stop, at_stop + 1), (row, at_stop)


def test_a_pause_overtaken_by_the_loops_completion_leaves_a_session_that_is_not_paused(
    project: Project, tmp_path: Path
) -> None:
    """``pause`` while the iteration that completes the loop runs: the loop ends complete (exit 0);
    ``sessions`` then says ``complete`` and ``paused`` false, since nothing waits and ``resume`` is
    refused (``session 'bg' is complete; it cannot be resumed``)."""
    run = slow_loop(project, tmp_path, "<promise>COMPLETE</promise>", "Finish it.")
    try:
        assert project.cli("pause", "bg").returncode == 0
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, (out, err)
    refused = project.cli("resume", "bg")
    assert refused.stderr == "ralph-ledger resume: session 'bg' is complete; it cannot be resumed\n"
    (row,) = project.sessions()
    assert (row["status"], row["paused"]) == ("complete", False), row


@pytest.mark.parametrize("redirect", ["file", "null"])
def test_ralph_tui_without_a_terminal_is_one_line_not_a_stream_of_escapes(
    project: Project, tmp_path: Path, redirect: str
) -> None:
    """``ralph-tui > log 2>&1`` (or in a job with no terminal) filled the file with escapes and never
    ended; it now says in one line that the screen needs a terminal, at once, exit 2."""
    out = tmp_path / "log.txt"
    with open(out if redirect == "file" else "/dev/null", "w") as sink:
        started = time.monotonic()
        proc = subprocess.run(
            [script("ralph-tui"), "--replay", str(SAMPLES)], cwd=project.dir, env=clean_env(),
            stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.PIPE if redirect == "null" else sink,
            timeout=60,
        )  # fmt: skip
    said = out.read_text() if redirect == "file" else proc.stderr.decode()
    assert proc.returncode == 2 and time.monotonic() - started < 30, proc
    assert said == (
        "ralph-tui: the screen needs a terminal, and stderr is not one; run it in a terminal, "
        "serve it to a browser (--serve), or query the ledger with ralph-ledger sql\n"
    ), said
