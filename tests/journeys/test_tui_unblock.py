"""Journey: a ledger-native Claude Code loop blocks; the person unblocks it from ralph-tui (``u``,
with guidance), and the next stop of the Claude Code session goes on with it, as after
``ralph-ledger unblock`` (the TUI's key and the CLI's command take the same path:
``ledger.drivers.steer``)."""

from __future__ import annotations

import asyncio

import pytest

from ledger.loop.prompt.next_prompt import GUIDANCE_HEADING
from tests.journeys.conftest import Project
from tests.journeys.test_claude_code import CLAUDE, block
from tests.journeys.test_steering_claude_code import blocked_native_loop
from tests.unit.test_tui_support import until
from tui.app import RalphApp

SID = f"cc-{CLAUDE}"


def test_unblock_from_ralph_tui_restarts_a_claude_code_loop(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    claude, loop_file = blocked_native_loop(project)

    monkeypatch.chdir(project.dir)  # ralph-tui started in the project, as a person would
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
    app = RalphApp([project.home / "journals"])

    async def unblock() -> None:
        async with app.run_test(size=(100, 30), notifications=True) as pilot:
            screen = app.sessions_screen
            await until(pilot, lambda: SID in screen.rows and screen.rows[SID].status == "blocked")
            await pilot.press("u")  # a dialog asks for optional guidance
            await pilot.press(*"use sqlite", "enter")
            await until(pilot, lambda: len(app.steering.steered) == 1)

    asyncio.run(unblock())
    goes_on = "the next stop of its Claude Code session goes on with it"
    assert app.steering.steered == [f"{SID}: unblocked; iteration 2 of 6 comes next; {goes_on}"]
    assert loop_file.exists()
    claude.prompt("go on")
    claude.text("Alright.")
    answer = block(claude.stop())  # the loop goes on: iteration 2, with the person's guidance
    assert answer["reason"] == f"Pick a database\n\n{GUIDANCE_HEADING}\nuse sqlite"
    claude.text("sqlite it is.\n<promise>COMPLETE</promise>")
    assert claude.stop().stdout.startswith("✅ Ralph loop complete after 2 iteration(s)")
    assert not loop_file.exists()
