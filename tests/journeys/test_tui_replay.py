"""The README's first command, ``ralph-tui --replay sample_sessions/``, in a real terminal (a tmux pane):
within a few seconds several loops run side by side with ages in seconds, the first ones end while
the others run, and ``q`` quits with 0; ``--sequential`` plays one loop at a time."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.journeys.conftest import Project, Terminal, clean_env, script

SAMPLES = Path(__file__).resolve().parents[2] / "sample_sessions"
COUNT = len(list(SAMPLES.glob("*.jsonl")))
FLEET = re.compile(r"(\d+) sessions ● (\d+) running ✔ (\d+) complete ■ (\d+) blocked ▲ (\d+) escalated")


def replaying(project: Project, terminals: list[Terminal], *args: str) -> Terminal:
    """``ralph-tui --replay sample_sessions/ ARGS`` in the project, which holds a copy of the samples."""
    shutil.copytree(SAMPLES, project.dir / "sample_sessions")
    argv = [script("ralph-tui"), "--replay", "sample_sessions/", *args]
    term = Terminal(argv, cwd=project.dir, env=clean_env(), size=(140, 30))
    terminals.append(term)
    return term


def fleet(screen: str) -> tuple[int, ...]:
    """(sessions, running, complete, blocked, escalated) from the fleet line, or () before it shows."""
    m = FLEET.search(screen)
    return tuple(int(n) for n in m.groups()) if m else ()


def test_the_first_command_shows_a_live_fleet(project: Project, terminals: list[Terminal]) -> None:
    term = replaying(project, terminals)
    screen = term.wait_for(lambda s: len(fleet(s)) and fleet(s)[0] == COUNT and fleet(s)[1] >= COUNT - 1)
    rows = [line for line in screen.splitlines() if "● running" in line]
    assert len(rows) >= COUNT - 1, screen
    assert all(re.search(r"\s\d{1,2}s\s", row) for row in rows), screen  # ages in seconds, not "26m"
    assert not re.search(r"\s\d+[hd]\s", screen), screen
    # loops end while others still run: the first alerts, with more than one loop running
    screen = term.wait_for(lambda s: len(fleet(s)) and sum(fleet(s)[2:]) >= 3, timeout=30)
    assert fleet(screen)[1] >= 2, screen
    term.press("q")
    assert term.exit_code() == 0


def test_sequential_plays_one_loop_at_a_time(project: Project, terminals: list[Terminal]) -> None:
    term = replaying(project, terminals, "--sequential", "--speed", "1000")
    seen: list[tuple[int, ...]] = []

    def two_loops(screen: str) -> bool:
        seen.append(fleet(screen))
        return len(seen[-1]) > 0 and seen[-1][0] >= 2

    term.wait_for(two_loops, timeout=30)
    assert all(f[1] <= 1 for f in seen if f), seen  # never two loops running at once
    term.press("q")
    assert term.exit_code() == 0
