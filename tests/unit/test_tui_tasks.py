"""Task progress in ralph-tui (docs/tasks.md): a task-list loop's row in the sessions table (its task
column) says how many tasks are done and names the current one, so does the session screen's title
line within 80 columns, and ``T`` on its session screen
lists every task with its status, iterations, tokens and cost, all read through ``ledger.monitor``
from a journal the loop step wrote."""

from __future__ import annotations

import asyncio

from ledger.core.home import Home
from ledger.loop.decision import Turn
from ledger.loop.engine import Engine
from ledger.monitor import Monitor
from tests.unit.test_task_step import start
from tests.unit.test_tui_support import fixed_clock, screen_text, settle, until
from tui.app import RalphApp
from tui.screens.session_screen import SessionScreen
from tui.screens.tasks_screen import TasksScreen


def task_loop(engine: Engine, work_dir: object) -> None:
    """A three-task loop (``s``): task 1 done in two iterations, task 2 under way."""
    from pathlib import Path

    session, _ = start(engine, Path(str(work_dir)))
    session.take_turn(Turn("working on it", tokens=None))
    session.take_turn(Turn("done <promise>COMPLETE</promise>"))


def test_the_monitor_reads_a_loops_tasks_and_its_progress(engine: Engine, home: Home, work: object) -> None:
    task_loop(engine, work)
    monitor = Monitor([home.root])
    try:
        list(monitor.load())
        tasks = monitor.tasks("s")
        assert [(t.task_no, t.title, t.status, t.iterations) for t in tasks] == [
            (1, "add the parser", "done", 2),
            (2, "add the CLI", "running", 1),
            (3, "write the docs", "pending", 0),
        ]
        (row,) = monitor.sessions(["s"])
        assert (row.tasks_total, row.tasks_done, row.current_task) == (3, 1, "add the CLI")
        assert monitor.tasks("nothing") == []
    finally:
        monitor.close()


def test_the_fleet_row_shows_task_progress_and_t_lists_the_tasks(
    engine: Engine, home: Home, work: object
) -> None:
    task_loop(engine, work)
    app = RalphApp([home.root], now=fixed_clock)

    async def scenario() -> None:
        async with app.run_test(size=(200, 24)) as pilot:
            screen = app.sessions_screen
            await until(pilot, lambda: app.feed.live and "s" in screen.rows)
            await pilot.pause()
            lines = screen_text(app)
            assert any("☑ 1/3 · add the CLI" in line for line in lines), lines
            await pilot.resize_terminal(80, 24)
            await pilot.press("enter")
            await settle(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.loads > 0)
            await pilot.pause()
            title = screen_text(app)[0]
            assert "it 3/20  ☑ 1/3 add the CLI  score" in title and len(title) <= 80, title
            await pilot.press("T")
            await settle(pilot, lambda: isinstance(app.screen, TasksScreen))
            await pilot.pause()
            shown = "\n".join(screen_text(app))
            assert "s · tasks 1/3 done" in shown
            for mark in ("✔ done", "● running", "· pending"):
                assert mark in shown, shown
            assert "add the parser" in shown and "write the docs" in shown
            await pilot.press("escape")
            await settle(pilot, lambda: isinstance(app.screen, SessionScreen))

    asyncio.run(scenario())
