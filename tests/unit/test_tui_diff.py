"""ralph-tui's ``d`` on the session screen: the diff of the iteration under the cursor, read from its
git snapshot through ``ledger.monitor`` (docs/snapshots.md)."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from textual.widgets import TextArea

from ledger.core.home import Home
from ledger.loop.config.loop_config import LoopConfig
from ledger.loop.decision import Turn
from ledger.loop.engine import Engine
from ledger.loop.step import LoopSession
from tests.unit.test_tui_support import fixed_clock, settle, until
from tui.app import RalphApp
from tui.screens.session_screen import SessionScreen
from tui.screens.value_viewer import ValueViewer

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


def _loop(repo: Path) -> Path:
    """Two iterations of a loop in the git project ``repo`` (its home ``.ralph``), each editing app.py."""
    repo.mkdir()
    subprocess.run([*GIT, "init", "-q"], cwd=repo, check=True)
    (repo / "app.py").write_text("v0\n")
    subprocess.run([*GIT, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*GIT, "commit", "-qm", "init"], cwd=repo, check=True)
    home = Home.resolve(repo / ".ralph")
    engine = Engine(home, work_dir=repo, fsync=False)
    engine.start("s", LoopConfig(max_iterations=5))
    session = LoopSession(engine, "s", "task")
    for n in (1, 2):
        (repo / "app.py").write_text(f"v{n}\n")
        session.take_turn(Turn(f"turn {n}"))
    return home.journals


def test_d_shows_the_diff_of_the_iteration_under_the_cursor(tmp_path: Path) -> None:
    app = RalphApp([_loop(tmp_path / "repo")], now=fixed_clock)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: app.feed.live and "s" in app.sessions_screen.rows)
            app.open_session("s")
            await settle(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.detail)
            session = app.screen
            assert isinstance(session, SessionScreen)
            await pilot.press("up")  # iteration 1 of the 3 (the third has begun)
            await pilot.press("up")
            await until(pilot, lambda: session.selected_iteration == 1)
            await pilot.press("d")
            await until(pilot, lambda: isinstance(app.screen, ValueViewer))
            text = app.screen.query_one("#value", TextArea).text
            assert "-v0" in text and "+v1" in text and "v2" not in text
            await pilot.press("escape")
            await pilot.press("down")
            await until(pilot, lambda: session.selected_iteration == 2)
            await pilot.press("d")
            await until(pilot, lambda: isinstance(app.screen, ValueViewer))
            text = app.screen.query_one("#value", TextArea).text
            assert "-v1" in text and "+v2" in text
            await pilot.press("escape", "down", "d")  # iteration 3: no turn yet, no snapshot
            await until(pilot, lambda: isinstance(app.screen, ValueViewer))
            assert "iteration 3 of s has no snapshot" in app.screen.query_one("#value", TextArea).text

    asyncio.run(scenario())
