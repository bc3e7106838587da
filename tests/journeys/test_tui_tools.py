"""Journeys: the installed ``ralph-tui --replay sample_sessions/`` in a real terminal (tmux), driven by
keys as a user types them: the progress line, pause and resume, speed, the alert history, quitting."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.journeys.conftest import Project, Terminal, clean_env, script

SAMPLES = Path(__file__).resolve().parents[2] / "sample_sessions"
ALL = f"{len(list(SAMPLES.glob('*.jsonl')))} sessions"
"""The fleet's count with every sample loaded."""

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux for a real terminal")


@pytest.fixture
def replay(project: Project, tmp_path: Path) -> Iterator[Terminal]:
    """``ralph-tui --replay sample_sessions/ --speed 100`` running in the project, in a 100x30 terminal."""
    shutil.copytree(SAMPLES, project.dir / "sample_sessions")
    terminal = Terminal(
        [script("ralph-tui"), "--replay", "sample_sessions/", "--speed", "100"], cwd=project.dir
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
    screen = replay.wait_for(lambda s: (p := progress(s)) is not None and p[1] > 0)
    assert "sessions" in screen and "· p pauses" in screen

    replay.press("p")
    replay.wait_for(lambda s: (p := progress(s)) is not None and p[0].startswith("paused"))
    time.sleep(0.3)  # a line on its way when p was pressed lands, and the count it stopped at shows
    paused_at = progress(replay.screen())
    assert paused_at is not None and paused_at[0].startswith("paused")
    time.sleep(1.5)  # at x100 the recorded 10 s gaps take 0.1 s: a running replay would move on
    assert progress(replay.screen()) == paused_at

    replay.press("p", "+")
    screen = replay.wait_for(
        lambda s: (p := progress(s)) is not None and p[0] == "replaying ×200" and p[1] > paused_at[1]
    )

    replay.press("a")
    screen = replay.wait_for(lambda s: "Alerts ·" in s and "since start-up" in s)
    replay.wait_for(lambda s: "complete after" in s or "tripped" in s, timeout=30)
    replay.press("Escape")
    replay.wait_for(lambda s: "sessions" in s and "Alerts ·" not in s)

    replay.press("q")
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
    terminal = Terminal([script("ralph-tui")], cwd=project.dir)
    try:
        terminal.wait_for(lambda s: ALL in s)
        terminal.press("s")
        terminal.wait_for(lambda s: "SQL console" in s)
        terminal.press("-", "-", "q", "t", " ")  # text, not the q (quit) and t (theme) keys
        terminal.wait_for(lambda s: "--qt SELECT agent, sessions" in s)
        terminal.press("C-z")
        terminal.wait_for(lambda s: "--qt" not in s and "SELECT agent, sessions" in s)  # undone
        terminal.press("C-r")
        terminal.wait_for(lambda s: re.search(r"\d+ rows? · 6 columns", s))
        terminal.press("C-s")
        terminal.wait_for(lambda s: "Export the result" in s and "ralph-query-" in s)  # the default name
        terminal.press("C-u")
        terminal.wait_for(lambda s: "Export the result" in s and "ralph-query-" not in s)  # cleared
        terminal.press("agents.csv")
        terminal.wait_for(lambda s: "Export the result" in s and "agents.csv" in s)  # typed in the dialog
        terminal.press("Enter")
        terminal.wait_for(lambda s: "wrote" in s and "agents.csv" in s)
        header = (project.dir / "agents.csv").read_text().splitlines()[0]
        assert header == "agent,sessions,completed,completion_pct,autonomous_pct,mean_iterations"
        terminal.press("Escape")
        terminal.wait_for(lambda s: ALL in s)
        terminal.press("q")
        assert terminal.exit_code() == 0
    finally:
        terminal.close()
