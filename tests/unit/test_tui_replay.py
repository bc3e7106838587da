"""``ralph-tui --replay`` as a newcomer first sees it, driven with Textual's Pilot: the recordings start
together, so several loops run side by side, alerts arrive as each one ends, and the ages read from the
replay's clock (seconds, not the half hours between the recordings); ``--sequential`` plays them at
their recorded times, one loop after another."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from rich.text import Text

from tests.unit.test_tui_support import SAMPLE_FILES, until
from tui.app import RalphApp
from tui.main import main

START = min(datetime.fromisoformat(json.loads(f.read_bytes().split(b"\n")[0])["ts"]) for f in SAMPLE_FILES)
"""When the earliest recording starts: where an aligned replay starts every one."""


def ages(app: RalphApp) -> dict[str, str]:
    """The age column of every session in the table, as shown."""
    screen = app.sessions_screen
    out = {}
    for sid in screen.rows:
        cell = screen.table.get_cell(sid, "age")
        out[sid] = cell.plain if isinstance(cell, Text) else str(cell)
    return out


def test_the_replay_runs_every_loop_side_by_side_with_ages_in_seconds(tmp_path: Path) -> None:
    """Two seconds into a ×40 replay (80 s of the recordings) every loop is running at once and every
    age is in seconds; the first alerts come while most loops still run."""
    app = RalphApp(replay_files=SAMPLE_FILES, replay_dir=tmp_path / "replay", speed=40)

    async def scenario() -> None:
        async with app.run_test(size=(120, 30)) as pilot:
            screen = app.sessions_screen
            await until(
                pilot,
                lambda: len(screen.rows) == len(SAMPLE_FILES) and app.now() >= START + timedelta(seconds=40),
            )
            assert not app.replay.done
            running = [r.session_id for r in screen.rows.values() if r.status == "running"]
            assert len(running) >= len(SAMPLE_FILES) - 1, running
            # the ages are measured on the replayed timeline: seconds, for every loop
            assert START <= app.now() < START + timedelta(minutes=1) < datetime.now(UTC)
            shown = ages(app)
            assert all(re.fullmatch(r"\d+s", age) for age in shown.values()), shown
            # the first loops end (the three one-iteration agents, 80 s long): alerts while the others run
            await until(pilot, lambda: len(app.alert_log.alerts) >= 3)
            assert any("agent-claude" in a for a in app.alert_log.alerts), app.alert_log.alerts
            assert screen.fleet.running >= len(SAMPLE_FILES) // 2, screen.fleet
            assert all(re.fullmatch(r"\d+s|1m", age) for age in ages(app).values()), ages(app)

    asyncio.run(scenario())


@pytest.mark.parametrize("sequential", [True, False], ids=["sequential", "aligned"])
def test_the_ages_at_the_end_of_a_sequential_or_an_aligned_replay(tmp_path: Path, sequential: bool) -> None:
    """At the end of a sequential replay (no waiting) the first recording ended hours before the replay's
    clock (``8h``); aligned, every loop ended within minutes of it."""
    app = RalphApp(replay_files=SAMPLE_FILES, replay_dir=tmp_path / "replay", speed=0, sequential=sequential)

    async def scenario() -> None:
        async with app.run_test(size=(120, 30)) as pilot:
            screen = app.sessions_screen
            await until(pilot, lambda: app.replay.done and len(screen.rows) == len(SAMPLE_FILES))
            await until(pilot, lambda: screen.fleet.running == 1)  # the torn recording never ends
            oldest = min(r.updated_at for r in screen.rows.values() if r.updated_at is not None)
            if sequential:
                assert app.now() - oldest > timedelta(hours=8) and ages(app)["tdd-success"] == "8h"
            else:
                assert app.now() - oldest < timedelta(minutes=5), ages(app)
                assert all(re.fullmatch(r"\d+[sm]", age) for age in ages(app).values()), ages(app)

    asyncio.run(scenario())


def test_sequential_without_replay_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--sequential"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "ralph-tui: --sequential goes with --replay FILE_OR_DIR ..."
    ]
