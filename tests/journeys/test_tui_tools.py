"""Journeys: the installed ``ralph-tui --replay sample_sessions/`` in a real terminal (tmux), driven by
keys as a user types them: the progress line, pause and resume, speed, the alert history, quitting."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.journeys.conftest import Project, clean_env, script

SAMPLES = Path(__file__).resolve().parents[2] / "sample_sessions"

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux for a real terminal")


class Terminal:
    """One command in a tmux pane of its own server (``cols`` x ``rows``), read and typed into."""

    def __init__(self, socket: Path, cwd: Path, command: str, *, cols: int = 100, rows: int = 30) -> None:
        self.socket = socket
        self.exit_file = cwd / ".exit-code"
        env = clean_env(TERM="xterm-256color")
        shell = f"{command}; echo $? > {self.exit_file}"
        self.tmux(
            "new-session", "-d", "-s", "j", "-x", str(cols), "-y", str(rows), "-c", str(cwd), shell, env=env
        )

    def tmux(self, *args: str, env: dict[str, str] | None = None) -> str:
        out = subprocess.run(
            ["tmux", "-S", str(self.socket), *args], capture_output=True, text=True, env=env, timeout=10
        )
        return out.stdout

    def screen(self) -> str:
        """What the pane shows now."""
        return self.tmux("capture-pane", "-p", "-t", "j")

    def keys(self, *keys: str) -> None:
        """Type keys (tmux names: ``p``, ``+``, ``Escape``)."""
        for key in keys:
            self.tmux("send-keys", "-t", "j", key)

    def wait(self, done: Callable[[str], object], timeout: float = 30.0) -> str:
        """Poll the screen until ``done(screen)`` holds."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if done(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"the terminal never showed what was expected:\n{screen}")
            time.sleep(0.1)

    def exit_code(self, timeout: float = 20.0) -> int:
        """The command's exit code, once it has ended."""
        deadline = time.monotonic() + timeout
        while not self.exit_file.exists() or not self.exit_file.read_text().strip():
            if time.monotonic() > deadline:
                raise AssertionError(f"the command did not end:\n{self.screen()}")
            time.sleep(0.05)
        return int(self.exit_file.read_text())

    def close(self) -> None:
        self.tmux("kill-server")


@pytest.fixture
def replay(project: Project, tmp_path: Path) -> Iterator[Terminal]:
    """``ralph-tui --replay sample_sessions/ --speed 100`` running in the project, in a 100x30 terminal."""
    shutil.copytree(SAMPLES, project.dir / "sample_sessions")
    terminal = Terminal(
        tmp_path / "tmux.sock", project.dir, f"{script('ralph-tui')} --replay sample_sessions/ --speed 100"
    )
    try:
        yield terminal
    finally:
        terminal.close()


def progress(screen: str) -> tuple[str, int, int] | None:
    """(state and speed, lines written, percentage) from the replay's progress line."""
    found = re.search(r"(replaying|paused \(p resumes\)) (×\S+|max): (\d+)/\d+ lines.*?(\d+)%", screen)
    return (f"{found.group(1)} {found.group(2)}", int(found.group(3)), int(found.group(4))) if found else None


def test_a_replay_pauses_resumes_changes_speed_shows_alerts_and_quits(replay: Terminal) -> None:
    screen = replay.wait(lambda s: (p := progress(s)) is not None and p[1] > 0)
    assert "sessions" in screen and "· p pauses" in screen

    replay.keys("p")
    screen = replay.wait(lambda s: (p := progress(s)) is not None and p[0].startswith("paused"))
    paused_at = progress(screen)
    assert paused_at is not None
    time.sleep(1.5)  # at x100 the recorded 10 s gaps take 0.1 s: a running replay would move on
    assert progress(replay.screen()) == paused_at

    replay.keys("p", "+")
    screen = replay.wait(
        lambda s: (p := progress(s)) is not None and p[0] == "replaying ×200" and p[1] > paused_at[1]
    )

    replay.keys("a")
    screen = replay.wait(lambda s: "Alerts ·" in s and "since start-up" in s)
    replay.wait(lambda s: "complete after" in s or "tripped" in s, timeout=30)
    replay.keys("Escape")
    replay.wait(lambda s: "sessions" in s and "Alerts ·" not in s)

    replay.keys("q")
    assert replay.exit_code() == 0


def test_a_replay_speed_out_of_range_is_a_usage_error(project: Project) -> None:
    shutil.copytree(SAMPLES, project.dir / "sample_sessions")
    proc = subprocess.run(
        [script("ralph-tui"), "--replay", "sample_sessions/", "--speed", "5000"],
        cwd=project.dir,
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=30,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "ralph-tui: --speed 5000: expected 0 (no waiting) or 0.25 to 1000"
    ]


def test_the_sql_console_in_a_terminal_types_runs_exports_and_goes_back(
    project: Project, tmp_path: Path
) -> None:
    """``ralph-tui`` on a project's home: ``s`` opens the console with the editor focused (typed keys
    land in it), ``ctrl+r`` runs the query, ``ctrl+s`` exports the result to a CSV file in the folder
    ralph-tui runs in, ``Esc`` goes back, ``q`` quits."""
    shutil.copytree(SAMPLES, project.home / "journals", ignore=shutil.ignore_patterns("*.py", "*.md"))
    terminal = Terminal(tmp_path / "tmux.sock", project.dir, script("ralph-tui"))
    try:
        terminal.wait(lambda s: "13 sessions" in s)
        terminal.keys("s")
        terminal.wait(lambda s: "SQL console" in s)
        terminal.keys("-", "-", "q", "t", " ")  # text, not the q (quit) and t (theme) keys
        terminal.wait(lambda s: "--qt SELECT agent, sessions" in s)
        terminal.keys("C-z")
        terminal.wait(lambda s: "│ SELECT agent, sessions" in s or " SELECT agent, sessions" in s)
        terminal.keys("C-r")
        terminal.wait(lambda s: re.search(r"\d+ row\(s\) · 6 column\(s\)", s))
        terminal.keys("C-s")
        terminal.wait(lambda s: "Export the result" in s)
        terminal.keys("C-u", "agents.csv", "Enter")
        terminal.wait(lambda s: "wrote" in s and "agents.csv" in s)
        header = (project.dir / "agents.csv").read_text().splitlines()[0]
        assert header == "agent,sessions,completed,completion_pct,autonomous_pct,mean_iterations"
        terminal.keys("Escape")
        terminal.wait(lambda s: "13 sessions" in s)
        terminal.keys("q")
        assert terminal.exit_code() == 0
    finally:
        terminal.close()
