"""``ralph-tui --dataset DIR`` driven with Textual's Pilot: the sessions of three exported homes with
their source, the filter by source, a session screen (read-only), a source exported again showing
up without a restart; and the command line's one-line errors."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from rich.text import Text

from ledger.core.home import Home
from tests.unit.test_monitor_dataset import SOURCES, add_session, export, home_of
from tests.unit.test_tui_support import SAMPLE_FILES, fixed_clock, settle, until
from tui.app import RalphApp
from tui.main import main
from tui.screens.session_screen import SessionScreen
from tui.screens.sessions_screen import COLUMNS


def plain(value: object) -> str:
    return value.plain if isinstance(value, Text) else str(value)


def test_a_dataset_of_three_homes_live(tmp_path: Path) -> None:
    dest = tmp_path / "dataset"
    homes: dict[str, Home] = {name: home_of(tmp_path / name, i) for i, name in enumerate(SOURCES)}
    for name, home in homes.items():
        export(home, dest, name)
    app = RalphApp(dataset=dest, now=fixed_clock)

    async def scenario() -> None:
        async with app.run_test(size=(140, 30)) as pilot:
            screen = app.sessions_screen
            await until(pilot, lambda: app.feed.live and screen.table.row_count == len(SAMPLE_FILES))
            # every source's sessions, each with its source, in a column after the session's id
            assert [c.key for c in screen.table.columns][:3] == ["status", "session", "source"]
            by_source = {name: {f.stem for f in SAMPLE_FILES[i::3]} for i, name in enumerate(SOURCES)}
            for name, ids in by_source.items():
                for sid in ids:
                    assert plain(screen.table.get_cell(sid, "source")) == name
            assert not app.errors

            # the filter matches the source
            await pilot.press("slash", *"gamma", "enter")
            await settle(pilot, lambda: screen.filter_text == "gamma")
            assert set(screen.visible_ids()) == by_source["gamma"]

            # a session screen on a dataset's session; the steering key says it is read-only
            sid = "thrashing" if "thrashing" in by_source["gamma"] else sorted(by_source["gamma"])[0]
            screen.table.move_to(sid)
            await pilot.press("enter")
            await settle(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.iterations)
            session = app.screen
            assert isinstance(session, SessionScreen) and session.session_id == sid
            assert session.iterations and session.last_seq > 0
            # the steering keys (pause, steer, unblock) say in one line where the session's home is
            for n, (key, action) in enumerate((("P", "pause"), ("g", "steer"), ("u", "unblock")), 1):
                await pilot.press(key)
                await until(pilot, lambda: len(app.steering.steered) >= n)  # noqa: B023 (awaited here)
                assert isinstance(app.screen, SessionScreen)  # no dialog: nothing to steer here
                line = app.steering.steered[-1]
                assert "\n" not in line and "steering needs the session's own home" in line
                assert f"ralph-ledger --home {homes['gamma'].root} {action} {sid}" in line
            assert (homes["gamma"].journals / f"{sid}.jsonl").read_bytes() == (
                SAMPLE_FILES[0].parent / f"{sid}.jsonl"
            ).read_bytes()  # nothing written anywhere
            await pilot.press("escape", "escape")

            # a source exported again shows up without a restart
            add_session(homes["beta"], "tdd-success", "beta-late")
            await asyncio.to_thread(export, homes["beta"], dest, "beta")
            await until(pilot, lambda: "beta-late" in screen.rows)
            assert screen.rows["beta-late"].source == "beta"
            assert any(a.startswith("beta-late complete") for a in app.alert_log.alerts)

    try:
        asyncio.run(scenario())
    finally:
        app.cleanup()


def test_a_local_home_has_no_source_column(tmp_path: Path) -> None:
    app = RalphApp([SAMPLE_FILES[0].parent], now=fixed_clock, watch=False)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: app.feed.loaded)
            assert [c.key for c in app.sessions_screen.table.columns] == [c.key for c in COLUMNS]

    try:
        asyncio.run(scenario())
    finally:
        app.cleanup()


def test_dataset_command_line_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--dataset", str(tmp_path / "nowhere")]) == 1
    assert main(["--dataset", str(tmp_path)]) == 1  # not a dataset
    (tmp_path / "events").mkdir()
    assert main(["--dataset", str(tmp_path)]) == 1  # an empty one
    assert main(["--dataset", str(tmp_path), str(tmp_path)]) == 2  # and a home
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 4 and all(line.startswith("ralph-tui: ") for line in lines)
    assert "no such directory" in lines[0] and "not an exported dataset" in lines[1]
    assert "an empty dataset" in lines[2]
