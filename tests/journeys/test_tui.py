"""Journeys through ``ralph-tui``: the installed script runs in a real pseudo-terminal (a tmux pane of
its own server), in a fresh project, while ``ralph-ledger run`` drives a scripted agent next to it;
the tests read the screen as the user sees it, press keys, and read the exit code."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.journeys.conftest import Project, Terminal, clean_env, folded, script

AGENT = 'import sys\nsys.stdin.read()\nprint("all done <promise>COMPLETE</promise>")\n'
"""A scripted agent: reads the prompt, promises completion."""


def tui(
    terminals: list[Terminal], project: Project, *args: str, env: dict[str, str] | None = None
) -> Terminal:
    """``ralph-tui ARGS`` started in the project, as a user types it (TERM set as a terminal has it)."""
    base = env if env is not None else clean_env()
    term = Terminal([script("ralph-tui"), *args], cwd=project.dir, env=base, size=(120, 40))
    terminals.append(term)
    return term


def run_loop(project: Project, session: str, *home: str, env: dict[str, str] | None = None) -> None:
    """A whole loop of the scripted agent with ``ralph-ledger run``."""
    project.write("agent.py", AGENT)
    args = [*home, "run", "--session", session, "--", "python3", "agent.py"]
    proc = project.cli(*args, input="say done", env=env)
    assert proc.returncode == 0, proc.stderr


def test_a_fresh_project_shows_the_empty_state_then_its_first_loop_live_and_ctrl_c_quits(
    project: Project, terminals: list[Terminal]
) -> None:
    """No .ralph yet: ralph-tui waits (it used to exit 1), says what it watches and how to start a
    loop, shows the loop within a second of its journal appearing, and quits on Ctrl-C with 0."""
    term = tui(terminals, project)
    screen = term.wait_for(lambda s: "No sessions yet" in s)
    assert (
        folded(str(project.home / "journals")) in folded(screen) and "ralph-ledger run -- AGENT_CMD" in screen
    )
    assert not project.home.exists()
    run_loop(project, "first-loop")
    done = time.monotonic()
    screen = term.wait_for(lambda s: "first-loop" in s and "complete" in s, timeout=10)
    assert time.monotonic() - done < 1.5, "the session took more than a second to show"
    assert "1 session " in screen and "No sessions yet" not in screen
    term.press("C-c")
    assert term.exit_code() == 0


@pytest.mark.parametrize("how", ["--home", "RALPH_HOME"])
def test_a_home_given_by_option_or_environment_is_watched_before_it_exists(
    project: Project, terminals: list[Terminal], how: str
) -> None:
    home = project.dir.parent / "elsewhere" / "home"
    if how == "--home":
        term = tui(terminals, project, "--home", str(home))
        env = clean_env()
    else:
        env = clean_env(RALPH_HOME=str(home))
        term = tui(terminals, project, env=env)
    screen = term.wait_for(lambda s: "No sessions yet" in s)
    assert folded(str(home / "journals")) in folded(screen)
    run_loop(project, "away", *(["--home", str(home)] if how == "--home" else []), env=env)
    term.wait_for(lambda s: "away" in s and "complete" in s, timeout=10)
    assert not project.home.exists()
    term.press("q")
    assert term.exit_code() == 0


def test_bad_lines_at_start_up_and_a_rewritten_journal_are_on_screen(
    project: Project, terminals: list[Terminal]
) -> None:
    run_loop(project, "good")
    run_loop(project, "other")
    journal = project.home / "journals" / "good.jsonl"
    with journal.open("a") as f:
        f.write("{not json\n")
    term = tui(terminals, project)
    screen = term.wait_for(lambda s: "bad journal line" in s)
    assert f"good.jsonl:{journal.read_text().count(chr(10))}" in folded(screen)
    other = project.home / "journals" / "other.jsonl"
    term.wait_for(lambda s: "other" in s and "complete" in s)
    other.write_text("".join(other.read_text().splitlines(keepends=True)[:2]))  # rewritten, shorter
    term.wait_for(lambda s: "journal rewritten" in s and "running" in s, timeout=10)


def test_a_screenshot_is_saved_where_the_notification_says(
    project: Project, terminals: list[Terminal]
) -> None:
    """With no downloads folder, the palette's screenshot goes to the current directory (it used to
    fail to save), and the notification names the file."""
    user_home = project.dir.parent / "user"
    user_home.mkdir()
    env = clean_env(HOME=str(user_home), XDG_CONFIG_HOME=str(user_home / ".config"))
    run_loop(project, "shot")
    term = tui(terminals, project, env=env)
    term.wait_for(lambda s: "shot" in s and "complete" in s)
    term.press("C-p")
    term.wait_for(lambda s: "Search for commands" in s)
    term.press("screenshot")
    time.sleep(0.3)
    term.press("Enter")
    screen = term.wait_for(lambda s: "saved" in s and ".svg" in s)
    saved = sorted(project.dir.glob("*.svg"))
    assert len(saved) == 1 and saved[0].read_text().startswith("<svg")
    assert saved[0].name[:20] in folded(screen)


COUNTING_AGENT = """import json, pathlib, sys, time
sys.stdin.read()
counter = pathlib.Path("count.txt")
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
time.sleep(1.0)
usage = {"input_tokens": 10, "output_tokens": 20, "cache_creation_input_tokens": 100,
         "cache_read_input_tokens": 5000}
said = f"iteration {n}" + (" <promise>COMPLETE</promise>" if n == 3 else "")
print(said)
print(json.dumps({"type": "result", "result": said, "usage": usage}))
"""
"""A scripted agent in Claude Code's ``--output-format json`` shape: three iterations a second apart,
5,130 tokens each (most of them cache reads), done on the third."""


CLAUDE_FORMAT = ("--agent-format", "claude", "--")
"""The agent is a Python script writing Claude's format: it is read as Claude's (not detected)."""


def test_the_session_screen_follows_a_running_loop_and_counts_tokens_one_way(
    project: Project, terminals: list[Terminal]
) -> None:
    """Opened while the loop runs, the session screen moves to each new iteration, and every token
    count on it (timeline, chart) is input + output + cache: 5.1k per iteration, not 30."""
    project.write("agent.py", COUNTING_AGENT)
    (project.home / "journals").mkdir(parents=True)  # (a home that a loop already made)
    term = tui(terminals, project)
    term.wait_for(lambda s: "0 sessions" in s)
    loop = subprocess.Popen(
        [script("ralph-ledger"), "run", "--session", "live-loop", *CLAUDE_FORMAT, "python3", "agent.py"],
        cwd=project.dir,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=clean_env(),
    )
    try:
        assert loop.stdin is not None
        loop.stdin.write(b"count to three")
        loop.stdin.close()
        term.wait_for(lambda s: "live-loop" in s and "running" in s)
        term.press("Enter")
        term.wait_for(lambda s: "Iteration 1" in s)
        screen = term.wait_for(lambda s: "Iteration 3" in s and "COMPLETE" in s, timeout=30)
        assert loop.wait(timeout=30) == 0
    finally:
        loop.kill()
    screen = term.wait_for(lambda s: s.count("5.1k") >= 6)  # three timeline rows, three bars
    assert "in" in screen and "cache" in screen and "15.4k tokens" in screen


def test_started_in_a_subdirectory_it_watches_the_projects_home(
    project: Project, terminals: list[Terminal]
) -> None:
    """ralph-tui in ``src/`` of a project whose loops record in the root's ``.ralph`` shows them (it
    used to watch an empty ``src/.ralph``)."""
    run_loop(project, "at-the-root")
    sub = project.dir / "src"
    sub.mkdir()
    term = Terminal([script("ralph-tui")], cwd=sub, env=clean_env(), size=(120, 40))
    terminals.append(term)
    term.wait_for(lambda s: "at-the-root" in s and "complete" in s)
    term.press("q")
    assert term.exit_code() == 0
    assert not (sub / ".ralph").exists()
