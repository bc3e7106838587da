"""A user's slips at the command line: each is one line on stderr and the documented exit code."""

from __future__ import annotations

import subprocess

import pytest

from tests.journeys.conftest import Project, clean_env, script


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["sesions"], 2, "invalid choice: 'sesions'"),
        (["show", "nope"], 1, "no session 'nope' in"),
        (["run", "--"], 2, "missing the agent command"),
        (["sql", "SELEC 1"], 1, "ralph-ledger"),
        (["sessions", "--status", "done"], 2, "invalid choice: 'done'"),
    ],
)
def test_a_slip_is_one_line(project: Project, args: list[str], code: int, says: str) -> None:
    project.write("agent.py", "import sys\nsys.stdin.read()\nprint('<promise>COMPLETE</promise>')\n")
    assert project.cli("run", "--session", "one", "--", "python3", "agent.py", input="go").returncode == 0
    proc = project.cli(*args, input="")
    assert proc.returncode == code, proc
    assert len(proc.stderr.splitlines()) == 1 and says in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_ralph_tui_with_a_wrong_option_is_one_line(project: Project) -> None:
    proc = subprocess.run(
        [script("ralph-tui"), "--speed", "fast"], cwd=project.dir, capture_output=True, text=True,
        env=clean_env(), timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2, proc
    assert "Traceback" not in proc.stderr and "--speed" in proc.stderr, proc.stderr


def test_ralph_tui_with_an_empty_home_is_an_error(project: Project) -> None:
    """``ralph-tui --home ""`` (an unset variable) is an error, as in ralph-ledger: the project folder
    is not made a ledger home."""
    proc = subprocess.run(
        [script("ralph-tui"), "--home", ""], cwd=project.dir, capture_output=True, text=True,
        env=clean_env(), timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 2, proc
    assert "ralph-tui: error: argument --home: an empty path; give the ledger home's directory" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in project.dir.iterdir()) == [".git", "README.md"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["hook", "claude-code", "--home"], "--home: expected one argument"),
        (["hook", "claude-code", "--bogus"], "unrecognized arguments: --bogus"),
        (["hook", "claudecode"], "invalid choice: 'claudecode'"),
    ],
)
def test_a_slip_in_the_stop_hook_command_is_one_line_and_allows_the_stop(
    project: Project, args: list[str], says: str
) -> None:
    """Claude Code reads exit 2 as "block": a wrong hook command line allows the stop, in one line."""
    proc = project.cli(*args, input="{}")
    assert proc.returncode == 0 and proc.stdout == "", proc
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert says in proc.stderr and proc.stderr.rstrip().endswith("; allowing the stop"), proc.stderr
