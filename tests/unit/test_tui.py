"""ralph-tui driven with Textual's Pilot: replay, filter, sort, a session, the SQL console, the palette,
live tail and alerts; plus the pure formatting helpers and the command line."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from rich.text import Text
from textual.widgets import DataTable, Input, RichLog

from ledger import events as E
from ledger.core.home import Home
from ledger.monitor import SessionRow, fleet_of
from ledger.storage.database import Ledger
from ledger.storage.journal import Journal
from tests.unit.test_tui_support import NOW, SAMPLE_FILES, copy_samples, fixed_clock, settle, until
from tui import format as fmt
from tui.app import RalphApp
from tui.main import journal_files, main
from tui.replaying import MAX_GAP_S, count_lines
from tui.screens.help_screen import HelpScreen
from tui.screens.session_screen import SessionScreen
from tui.screens.sessions_screen import COLUMNS, SORTS, SessionsScreen
from tui.widgets.charts import HeatGrid, ScorePlot, TokenBars
from tui.widgets.table import VirtualTable

ESCALATED_SQL = "SELECT session_id, status FROM sessions WHERE status = 'escalated' ORDER BY 1"
ESCALATED = [
    "agent-claude",
    "agent-codex",
    "agent-cursor",
    "agent-gemini",
    "agent-opencode",
    "circuit-breaker",
    "hook-failure",
    "max-iterations",
    "quality-regression",
    "validation-stall",
]


def plain(value: Any) -> str:
    """A table cell as text."""
    return value.plain if isinstance(value, Text) else str(getattr(value, "session_id", value))


def types_of(journal: Path) -> list[str]:
    """The event types of a journal's lines, in order (a torn tail as its first bytes)."""
    return [line.split(b",")[0].decode() for line in journal.read_bytes().splitlines()]


def fleet_tuple(app: RalphApp) -> tuple[int, int, int, int, int]:
    f = app.sessions_screen.fleet
    return (f.sessions, f.running, f.complete, f.blocked, f.escalated)


# -- pure helpers -------------------------------------------------------------------------------------
def test_sparkline_maps_scores_to_eight_blocks() -> None:
    assert fmt.sparkline([0, 50, 100]) == "▁▅█"
    assert fmt.sparkline([100.0] * 30, width=10) == "█" * 10
    assert fmt.sparkline([]) == ""
    assert fmt.block(-5) == "▁" and fmt.block(250) == "█"


def test_status_is_told_by_symbol_and_colour() -> None:
    symbols = {status: fmt.status_text(status).plain.split()[0] for status in fmt.STATUS}
    assert symbols == {"running": "●", "complete": "✔", "blocked": "■", "escalated": "▲"}
    colours = {str(fmt.status_text(status).style) for status in fmt.STATUS}
    assert len(colours) == 4


def test_age_tokens_and_truncation() -> None:
    ages = [fmt.age(NOW - timedelta(seconds=s), NOW) for s in (5, 125, 7300, 200_000)]
    assert ages == ["5s", "2m", "2h", "2d"]
    assert fmt.age(None, NOW) == "-"
    assert [fmt.tokens(n) for n in (950, 12_345, 4_500_000)] == ["950", "12.3k", "4.5M"]
    assert fmt.truncate("a  b\nc", 10) == "a b c" and fmt.truncate("abcdef", 4) == "abc…"
    assert fmt.truncate_left("src/pkg/module.py", 10) == "…module.py"
    assert fmt.percent(None) == "-" and fmt.percent(0.25) == "25%"


def test_journal_files_and_line_counts(tmp_path: Path) -> None:
    files = journal_files([ROOT_SAMPLES])
    assert files == SAMPLE_FILES
    torn = ROOT_SAMPLES / "torn-last-line.jsonl"
    assert count_lines([torn]) == torn.read_bytes().count(b"\n") + 1
    with pytest.raises(FileNotFoundError):
        journal_files([tmp_path / "missing"])


ROOT_SAMPLES = SAMPLE_FILES[0].parent


def test_command_line_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "nowhere")]) == 1
    assert main(["--replay", str(tmp_path / "nowhere")]) == 2
    assert main(["--replay", str(tmp_path)]) == 2  # a directory without journals
    assert main(["--replay", str(ROOT_SAMPLES), "--speed", "-1"]) == 2
    assert main([str(tmp_path), "--replay", str(ROOT_SAMPLES)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 5 and all(line.startswith("ralph-tui: ") for line in lines)


# -- the whole app, step by step ------------------------------------------------------------------------
def test_replay_filter_session_sql_palette(tmp_path: Path) -> None:
    """Replay the samples (a fake sleep records the waits), then filter, sort, open a session, pick an
    iteration, query with SQL (a result, a refusal, an example), use the palette, the theme and help."""
    waits: list[float] = []
    replay_dir = tmp_path / "replay"
    app = RalphApp(
        replay_files=SAMPLE_FILES, replay_dir=replay_dir, speed=20, sleep=waits.append, now=fixed_clock
    )

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            screen = app.sessions_screen
            # 1. replay: the recordings are copied line by line into the watched directory and the
            #    live-tail path shows them
            await until(pilot, lambda: app.replay.done and fleet_tuple(app) == (20, 1, 5, 4, 10))
            assert app.replay.lines == app.replay.total == count_lines(SAMPLE_FILES)
            for f in SAMPLE_FILES:  # the same events (their times aligned: tests/unit/test_replay.py)
                assert types_of(replay_dir / f.name) == types_of(f)
            assert waits and max(waits) <= MAX_GAP_S and min(waits) >= 0
            assert 0.5 in waits  # a recorded 10 s gap at speed 20
            assert "tdd-success complete after 3 iterations" in app.alert_log.alerts
            blocked = "thrashing blocked at iteration 5: thrashing: same files modified again and again"
            assert any(a.startswith(blocked) for a in app.alert_log.alerts)
            assert screen.table.row_count == len(SAMPLE_FILES)
            assert screen.fleet.completion_rate == pytest.approx(5 / (len(SAMPLE_FILES) - 1))  # 1 running
            assert screen.visible_ids()[0] == "thrashing"  # latest activity: the longest loop
            assert plain(screen.table.get_cell("thrashing", "status")) == "■ blocked"
            assert plain(screen.table.get_cell("quality-regression", "trend")) == "█▆▅"  # scores 100, 75, 50

            # 2. sort: status, then session id; reverse
            await pilot.press("o")
            assert [screen.rows[s].status for s in screen.visible_ids()][:1] == ["running"]
            await pilot.press("o")
            assert screen.visible_ids() == sorted(screen.rows)
            await pilot.press("r")
            assert screen.visible_ids() == sorted(screen.rows, reverse=True)

            # 3. filter: "/" then text; Enter returns to the table; Esc clears
            await pilot.press("slash", *"escal", "enter")
            await settle(pilot, lambda: screen.filter_text == "escal")
            assert sorted(screen.visible_ids()) == ESCALATED
            assert app.focused is screen.table
            await pilot.press("escape")
            assert screen.filter_text == "" and screen.table.row_count == len(SAMPLE_FILES)
            await pilot.press("slash", *"thrash", "enter")
            await settle(pilot, lambda: screen.visible_ids() == ["thrashing"])

            # 4. open the session: timeline, guard, heat, plot, detail, events
            await pilot.press("enter")
            await settle(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.detail)
            session = app.screen
            assert isinstance(session, SessionScreen) and session.session_id == "thrashing"
            assert [i.iteration for i in session.iterations] == [1, 2, 3, 4, 5]
            timeline = session.query_one("#timeline", DataTable)
            assert timeline.row_count == 5 and timeline.cursor_row == 4
            assert plain(timeline.get_cell("5", "guards")) == "thrashing"
            assert plain(timeline.get_cell("5", "n")) == "⚠5"
            assert plain(timeline.get_cell("5", "rule:tests_pass")) == "✔"
            assert session.query_one(HeatGrid).heat.cells == [[True] * 5]
            assert session.query_one(ScorePlot).points == [(n, 100.0) for n in range(1, 6)]
            assert session.detail is not None and session.detail.iteration == 5
            assert session.detail.feedback[0].startswith("same files modified again and again: calc.py")
            assert session.last_seq == 33 and len(session.query_one("#events", RichLog).lines) == 33
            await pilot.press("up")
            await settle(pilot, lambda: session.detail is not None and session.detail.iteration == 4)
            assert session.query_one("#detail-box").border_title == "Iteration 4"
            await pilot.press("escape")
            assert app.screen is screen
            await pilot.press("escape")  # clears the filter
            assert screen.table.row_count == len(SAMPLE_FILES)

            # 5. the SQL console: a result, a refusal and a syntax error on one line, an example
            await pilot.press("s")
            sql = app.sql_screen
            assert app.screen.id == sql.id == "sql-screen"
            sql.editor.load_text(ESCALATED_SQL)
            await pilot.press("ctrl+r")
            await settle(pilot, lambda: sql.runs == 1)
            results = sql.query_one("#results", DataTable)
            assert sql.result_columns == ["session_id", "status"] and sql.error == ""
            assert [plain(results.get_row_at(i)[0]) for i in range(results.row_count)] == ESCALATED
            sql.editor.load_text("DELETE FROM events")
            await pilot.press("ctrl+r")
            await settle(pilot, lambda: sql.runs == 2)
            assert sql.error.startswith("refused") and "\n" not in sql.error
            assert results.row_count == 0  # an error clears the last result (it answered another query)
            sql.editor.load_text("SELEC 1")
            await pilot.press("ctrl+r")
            await settle(pilot, lambda: sql.runs == 3)
            assert sql.error.startswith("SQL error") and "\n" not in sql.error
            assert "Traceback" not in sql.error
            await pilot.press("ctrl+l", "enter")  # the first example query
            await settle(pilot, lambda: sql.runs == 4)
            assert (
                sql.error == "" and sql.result_columns[0] == "agent" and sql.result_rows == 8
            )  # me, do, claude-code and the five replayed agents
            await pilot.press("escape")
            assert app.screen is screen

            # 6. the command palette opens a session by id
            await pilot.press("ctrl+p")
            await pilot.press(*"session tdd-suc")
            await until(pilot, lambda: _palette_has(app, "Open session tdd-success"))
            await pilot.press("enter")
            await settle(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.loads > 0)
            assert isinstance(app.screen, SessionScreen) and app.screen.session_id == "tdd-success"
            await pilot.press("escape")

            # 7. theme, replay speed, help
            await pilot.press("t")
            assert app.theme == "textual-light"
            await pilot.press("t")
            assert app.theme == "textual-dark"
            await pilot.press("plus")
            assert app.replay.speed == 40
            await pilot.press("minus", "minus")
            assert app.replay.speed == 10
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape")
            assert isinstance(app.screen, SessionsScreen)

    asyncio.run(scenario())


def _palette_has(app: RalphApp, prompt: str) -> bool:
    from textual.command import CommandList

    try:
        options = app.screen.query_one(CommandList)
    except Exception:
        return False
    highlighted = options.highlighted_option
    return highlighted is not None and prompt in str(highlighted.prompt)


# -- live tail ---------------------------------------------------------------------------------------------
def test_appends_show_up_live_in_the_table_and_the_open_session(tmp_path: Path) -> None:
    journals = copy_samples(tmp_path / "journals", ["tdd-success", "thrashing"])
    app = RalphApp([journals], now=fixed_clock)
    journal = Journal.for_session(journals, "live-one", fsync=False)
    t0 = NOW - timedelta(minutes=5)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30), notifications=True) as pilot:
            await until(pilot, lambda: app.feed.live and len(app.sessions_screen.rows) == 2)
            screen = app.sessions_screen
            thrashing_before = screen.table.get_row("thrashing")

            journal.append(
                E.SessionStarted(session_id="live-one", ts=t0, task="count to three", agent="bot"),
                E.IterationStarted(session_id="live-one", ts=t0, iteration=1, max_iterations=3),
            )
            await until(pilot, lambda: "live-one" in screen.rows)
            assert screen.table.row_count == 3 and screen.visible_ids()[0] == "live-one"
            assert plain(screen.table.get_cell("live-one", "status")) == "● running"
            assert plain(screen.table.get_cell("live-one", "age")) == "5m"
            assert screen.table.get_row("thrashing") == thrashing_before  # untouched rows stay as they were

            app.open_session("live-one")
            await settle(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.loads > 0)
            session = app.screen
            assert isinstance(session, SessionScreen) and session.last_seq == 2

            journal.append(
                E.ValidationRan(session_id="live-one", ts=t0, iteration=1, score=100.0, passed=True),
                E.SessionCompleted(session_id="live-one", ts=t0, iteration=1, total_iterations=1),
            )
            await until(pilot, lambda: screen.rows["live-one"].status == "complete" and session.last_seq == 4)
            assert plain(screen.table.get_cell("live-one", "status")) == "✔ complete"
            assert plain(screen.table.get_cell("live-one", "score")) == "100"
            assert "live-one complete after 1 iteration" in app.alert_log.alerts
            assert any("live-one: complete after 1 iteration" in str(n.message) for n in app._notifications)
            assert [i.score for i in session.iterations] == [100.0]
            assert screen.fleet.complete == 2

    asyncio.run(scenario())


def test_a_bad_source_is_reported_not_raised(tmp_path: Path) -> None:
    app = RalphApp([tmp_path / "nowhere"], now=fixed_clock, watch=False)

    async def scenario() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, lambda: app.errors)
            assert app.errors[0].startswith("cannot open") and "\n" not in app.errors[0]
            assert isinstance(app.screen, SessionsScreen)

    asyncio.run(scenario())


def test_filter_input_is_debounced_and_typing_keys_do_not_trigger_bindings(tmp_path: Path) -> None:
    app = RalphApp([copy_samples(tmp_path / "j")], now=fixed_clock, watch=False)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, lambda: app.feed.loaded)
            await pilot.press("slash", *"stq")  # s, t and q are bindings, but not while typing
            assert app.screen is app.sessions_screen and app.theme == "textual-dark"
            assert app.sessions_screen.query_one("#filter", Input).value == "stq"
            await settle(pilot, lambda: app.sessions_screen.filter_text == "stq")
            assert app.sessions_screen.table.row_count == 0

    asyncio.run(scenario())


def test_a_ledger_home_is_read_through_its_ledger_file(fixture_home: Home) -> None:
    """A home (a directory with journals/) opens its ledger.duckdb and watches journals/."""
    app = RalphApp([fixture_home.root], now=fixed_clock)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: app.feed.live)
            assert app.feed.monitor is not None
            assert app.feed.monitor.watch_paths == [fixture_home.journals.resolve()]
            journals = sorted(p.stem for p in fixture_home.journals.glob("*.jsonl"))
            assert sorted(app.sessions_screen.rows) == journals
            assert app.errors == []

    asyncio.run(scenario())
    assert (fixture_home.root / "ledger.duckdb").exists()


def test_a_replay_runs_on_the_recorded_clock(tmp_path: Path) -> None:
    """Without a fixed clock a replay's ages are measured from the replayed lines' own times, so a
    recording from months ago reads as a loop that ran seconds ago."""
    sample = SAMPLE_FILES[0].parent / "tdd-success.jsonl"
    app = RalphApp(replay_files=[sample], replay_dir=tmp_path / "replay", speed=0, watch=False)
    last = datetime.fromisoformat(json.loads(sample.read_text().splitlines()[-1])["ts"])

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, lambda: app.replay.done)
            assert timedelta(0) <= app.now() - last < timedelta(seconds=60)
            app.feed.mark_dirty(None)  # (no watcher here) read what the replay wrote
            await settle(pilot, lambda: "tdd-success" in app.sessions_screen.rows)
            assert plain(app.sessions_screen.table.get_cell("tdd-success", "age")).endswith("s")

    asyncio.run(scenario())


def many_rows(n: int) -> list[SessionRow]:
    """``n`` running sessions, the first most recently active."""
    return [
        SessionRow(
            session_id=f"s{i:05d}",
            status="running",
            agent="bot",
            task=f"task {i}",
            iteration=1 + i % 9,
            max_iterations=10,
            last_score=float(i % 101),
            scores=[float(i % 101)],
            last_signal="CONTINUE",
            consecutive_failures=0,
            tokens=i,
            started_at=NOW,
            updated_at=NOW - timedelta(seconds=i),
            stop_requested=False,
        )
        for i in range(n)
    ]


def test_ten_thousand_sessions_paint_only_the_rows_in_view(tmp_path: Path) -> None:
    """The table holds every session but turns only the rows on screen into lines; keys, a header
    click and a mouse click work on it."""
    app = RalphApp([tmp_path], now=fixed_clock, watch=False)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, lambda: app.feed.loaded)
            screen = app.sessions_screen
            table = screen.table
            screen.apply(many_rows(10_000))
            await pilot.pause()
            assert table.row_count == 10_000 and screen.visible_ids()[:2] == ["s00000", "s00001"]
            assert 0 < table.painted <= table.size.height  # nothing but what is on screen
            await pilot.press("end")
            await pilot.pause()
            assert table.cursor_key == "s09999" and table.scroll_y > 9_000
            assert table.painted <= 2 * table.size.height
            await pilot.press("home")
            # a few changed rows move into their places: the same order as sorting them all
            rng = random.Random(7)
            for sort_index, descending in ((0, True), (4, True), (4, False), (2, False)):
                screen.sort_index, screen.descending = sort_index, descending
                screen.resort()
                for _ in range(5):
                    changed = [
                        msgspec.structs.replace(
                            screen.rows[f"s{rng.randrange(10_000):05d}"],
                            updated_at=NOW + timedelta(seconds=rng.randrange(-5000, 50)),
                            last_score=float(rng.randrange(101)),
                            status=rng.choice(["running", "complete", "blocked", "escalated"]),
                        )
                        for _ in range(rng.randrange(1, 6))
                    ]
                    screen.apply(changed)
                    assert screen.visible_ids() == screen.ordered()
                    assert screen.fleet == fleet_of(Counter(r.status for r in screen.rows.values()))
            screen.sort_index, screen.descending = 0, True
            screen.resort()
            # a click on the "score" header sorts by score, highest first; a second click reverses
            score_x = 1 + sum(c.width + 1 for c in COLUMNS[:3]) + 1
            await pilot.click(VirtualTable, offset=(score_x, 0))
            assert SORTS[screen.sort_index].name == "score" and screen.descending
            assert screen.rows[screen.visible_ids()[0]].last_score == 100.0
            await pilot.click(VirtualTable, offset=(score_x, 0))
            assert not screen.descending and screen.rows[screen.visible_ids()[0]].last_score == 0.0
            # a click moves the cursor to a row, a second click on it opens the session
            await pilot.click(VirtualTable, offset=(20, 3))
            second = screen.visible_ids()[2]
            assert table.cursor_key == second
            await pilot.click(VirtualTable, offset=(20, 3))
            await settle(pilot, lambda: isinstance(app.screen, SessionScreen))
            assert isinstance(app.screen, SessionScreen) and app.screen.session_id == second

    asyncio.run(scenario())


def test_a_large_ledger_shows_its_latest_sessions_and_totals_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More sessions than the first screen reads: the latest ones come first with the totals of all,
    then every session."""
    monkeypatch.setattr("tui.feed.FIRST_SCREEN", 3)
    home = Home.resolve(tmp_path / "home")
    copy_samples(home.journals)
    with Ledger.open(home) as ledger:
        ledger.ingest()
    app = RalphApp([home.root], now=fixed_clock, watch=False)
    applied: list[tuple[int, int]] = []

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            screen = app.sessions_screen
            original = screen.apply

            def recording(rows: Any, fleet: Any = None) -> int:
                changed = original(rows, fleet)
                applied.append((len(screen.rows), screen.fleet.sessions))
                return changed

            screen.apply = recording  # type: ignore[method-assign]
            await settle(pilot, lambda: app.feed.loaded)
            assert screen.table.row_count == len(SAMPLE_FILES)

    asyncio.run(scenario())
    n = len(SAMPLE_FILES)
    assert applied[0] == (3, n)  # three rows, the totals of all of them
    assert (n, n) in applied


# -- a fresh home, bad lines, rewritten journals, quitting, screenshots -------------------------------------
def started(sid: str, t0: datetime = NOW) -> list[E.Event]:
    """The first two events of a session."""
    return [
        E.SessionStarted(session_id=sid, ts=t0, task="count to three", agent="bot"),
        E.IterationStarted(session_id=sid, ts=t0, iteration=1, max_iterations=3),
    ]


@pytest.mark.parametrize("state", ["missing", "empty"])
def test_a_fresh_home_shows_the_empty_state_then_its_first_session(tmp_path: Path, state: str) -> None:
    """A home that does not exist yet (or an empty folder): the empty state names what is watched and
    how to start a loop; the first journal written there shows up live; nothing is created before."""
    home = tmp_path / "project" / ".ralph"
    if state == "empty":
        home.mkdir(parents=True)
    else:
        (tmp_path / "project").mkdir()
    app = RalphApp(homes=[home], now=fixed_clock)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: app.feed.live)
            screen = app.sessions_screen
            welcome = screen.query_one("#welcome")
            assert welcome.display and welcome.has_class("shown") and not screen.table.display
            text = screen.welcome.plain if screen.welcome else ""
            assert str(home / "journals") in text and "ralph-ledger" in text and "run -- AGENT_CMD" in text
            assert ("does not exist yet" in text) == (state == "missing")
            assert home.exists() == (state == "empty")  # the monitor creates no home
            Journal.for_session(home / "journals", "first", fsync=False).append(*started("first"))
            await until(pilot, lambda: "first" in screen.rows, timeout=5)
            assert not screen.query_one("#welcome").has_class("shown") and screen.table.display
            assert screen.visible_ids() == ["first"]

    asyncio.run(scenario())


def test_the_command_line_watches_the_default_home_or_home_even_before_it_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ralph-tui`` with no ./.ralph, ``--home DIR`` and $RALPH_HOME start the app on that home
    (as ralph-ledger resolves it) instead of exiting 1."""
    opened: list[tuple[list[Path], list[Path]]] = []
    monkeypatch.setattr(
        RalphApp, "run", lambda self, **kw: opened.append((self.feed.sources, self.feed.homes))
    )
    monkeypatch.setattr("tui.main.no_terminal", lambda: "")  # pytest's stderr is no terminal
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RALPH_HOME", raising=False)
    assert main([]) == 0
    assert main(["--home", "elsewhere"]) == 0
    monkeypatch.setenv("RALPH_HOME", str(tmp_path / "env-home"))
    assert main([]) == 0
    assert main(["--home", "~/x"]) == 0
    assert opened == [
        ([], [tmp_path / ".ralph"]),
        ([], [tmp_path / "elsewhere"]),
        ([], [tmp_path / "env-home"]),
        ([], [Path("~/x").expanduser()]),
    ]
    assert not (tmp_path / ".ralph").exists()
    assert main(["--home", "h", "--replay", str(ROOT_SAMPLES)]) == 2
    assert "not both" in capsys.readouterr().err


def test_a_home_that_is_a_file_is_a_usage_error_not_a_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--home FILE`` (or $RALPH_HOME naming a file) can never become a home: one line and exit 2, as
    ralph-ledger says it, instead of an empty state waiting for FILE/journals forever."""
    monkeypatch.setattr(RalphApp, "run", lambda self, **kw: pytest.fail("the app started"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RALPH_HOME", raising=False)
    (tmp_path / "notes.txt").write_text("not a home\n")
    assert main(["--home", "notes.txt"]) == 2
    err = capsys.readouterr().err.splitlines()
    file = tmp_path / "notes.txt"
    assert err == [f"ralph-tui: --home notes.txt: the ledger home {file} is not a directory"]
    monkeypatch.setenv("RALPH_HOME", str(tmp_path / "notes.txt"))
    assert main([]) == 2
    assert capsys.readouterr().err.strip().endswith("is not a directory")


@pytest.mark.parametrize("ingested", [False, True])
def test_bad_lines_found_at_start_up_are_reported(tmp_path: Path, ingested: bool) -> None:
    """Bad lines in the backlog (read now, or by an earlier ingest of the home's ledger) are reported
    at start-up, not only those appended later."""
    home = Home.resolve(tmp_path / "home")
    copy_samples(home.journals, ["tdd-success"])
    with (home.journals / "tdd-success.jsonl").open("a") as f:
        f.write("this is not json\n")
    if ingested:
        with Ledger.open(home) as ledger:
            assert len(ledger.ingest().bad_lines) == 1
    app = RalphApp([home.root], now=fixed_clock, watch=False)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30), notifications=True) as pilot:
            await settle(pilot, lambda: app.feed.loaded)
            journal = home.journals / "tdd-success.jsonl"
            line = journal.read_text().count("\n")
            assert [b.split(": ")[0] for b in app.alert_log.bad_lines] == [f"{journal}:{line}"]
            assert [n.title for n in app._notifications] == ["bad journal line"]

    asyncio.run(scenario())


def test_a_journal_rewritten_or_emptied_while_watched_is_announced(tmp_path: Path) -> None:
    journals = copy_samples(tmp_path / "journals", ["tdd-success", "thrashing"])
    app = RalphApp([journals], now=fixed_clock)
    path = journals / "thrashing.jsonl"

    async def scenario() -> None:
        async with app.run_test(size=(100, 30), notifications=True) as pilot:
            await until(pilot, lambda: app.feed.live and len(app.sessions_screen.rows) == 2)
            screen = app.sessions_screen
            assert screen.rows["thrashing"].status == "blocked"
            lines = path.read_text().splitlines(keepends=True)
            path.write_text("".join(lines[:3]))  # rewritten shorter: the session went back in time
            await until(pilot, lambda: screen.rows["thrashing"].status == "running")
            assert len(app.alert_log.resets) == 1 and app.alert_log.resets[0].startswith(
                f"{path} was truncated or rewritten"
            )
            assert any(n.title == "journal rewritten" and str(path) in n.message for n in app._notifications)
            path.write_text("")  # emptied: the session is gone
            await until(pilot, lambda: "thrashing" not in screen.rows)
            assert len(app.alert_log.resets) == 2 and screen.visible_ids() == ["tdd-success"]

    asyncio.run(scenario())


def test_ctrl_c_quits(tmp_path: Path) -> None:
    app = RalphApp([tmp_path], now=fixed_clock, watch=False)

    async def scenario() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, lambda: app.feed.loaded)
            await pilot.press("ctrl+c")
            await pilot.pause()
            assert not app.is_running

    asyncio.run(scenario())


OPEN = {
    "help": ["question_mark"],
    "palette": ["ctrl+p"],
    "alerts": ["a"],
    "session": ["enter"],
    "sql editor": ["s"],
    "sql results": ["s", "ctrl+r", "ctrl+t"],
    "value viewer": ["s", "ctrl+r", "ctrl+t", "enter"],
    "export dialog": ["s", "ctrl+r", "ctrl+t", "ctrl+s"],
}


COPIES = {"export dialog": "ralph-query-", "sql editor": "SELECT"}


@pytest.mark.parametrize("where", list(OPEN))
def test_ctrl_c_quits_from_every_screen_and_dialog(tmp_path: Path, where: str) -> None:
    """Help, the palette, the SQL console's viewer and export dialog too (a modal screen stops the
    app's ctrl+c: it used to do nothing there)."""
    app = RalphApp([copy_samples(tmp_path / "j", ["thrashing"])], now=fixed_clock, watch=False)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, lambda: app.feed.loaded)
            for key in OPEN[where]:
                await pilot.press(key)
                await settle(pilot, lambda: True)
            assert app.screen is not app.sessions_screen
            if where in COPIES:  # a selection is copied first (the export's file name comes selected)
                if where == "sql editor":
                    await pilot.press("f7")  # select all
                await pilot.press("ctrl+c")
                await pilot.pause()
                assert app.is_running and app.clipboard.startswith(COPIES[where])
                assert "quits" in [n.message for n in app._notifications][-1]
                await pilot.press("end")  # nothing selected
            await pilot.press("ctrl+c")
            await pilot.pause()
            assert not app.is_running, app.screen

    asyncio.run(scenario())


def test_a_screenshot_goes_to_a_folder_that_exists_and_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Textual's default folder (the downloads folder) may not exist: the screenshot then goes to the
    current directory, and a notification names the file."""
    monkeypatch.setattr("tui.app.user_downloads_path", lambda: tmp_path / "no-downloads")
    monkeypatch.chdir(tmp_path)
    app = RalphApp([tmp_path], now=fixed_clock, watch=False)

    async def scenario() -> None:
        async with app.run_test(size=(80, 24), notifications=True) as pilot:
            await settle(pilot, lambda: app.feed.loaded)
            app.action_screenshot()
            await pilot.pause()
            assert len(app.screenshots) == 1 and app.screenshots[0].parent == tmp_path
            assert app.screenshots[0].read_text().startswith("<svg")
            assert any(str(app.screenshots[0]) in n.message for n in app._notifications)

    asyncio.run(scenario())


CC_SAMPLE = "cc-5c0375b4-57a5-4f26-b12d-d022ee4e51b7"


def test_tokens_are_one_number_in_the_chart_the_timeline_the_title_and_the_table(tmp_path: Path) -> None:
    """The Claude Code sample's cache reads are most of its tokens: the per-iteration chart once drew
    input + output only (1.2k) where the timeline said 58.4k. Every place now shows the same total,
    and the chart says what it is made of."""
    app = RalphApp([copy_samples(tmp_path / "j", [CC_SAMPLE])], now=fixed_clock, watch=False)

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, lambda: app.feed.loaded and CC_SAMPLE in app.sessions_screen.rows)
            app.open_session(CC_SAMPLE)
            await settle(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.loads > 0)
            session = app.screen
            assert isinstance(session, SessionScreen)
            timeline = session.query_one("#timeline", DataTable)
            numbers = [it.iteration for it in session.iterations]
            in_timeline = [plain(timeline.get_cell(str(n), "tokens")) for n in numbers]
            bars = session.query_one(TokenBars)
            legend, *lines = bars.render().plain.splitlines()
            assert legend.split() == ["█in", "█out", "█cache", "=", "tokens", "$", "cost"]
            assert [line.split()[-2] for line in lines] == in_timeline == ["58.4k", "220.3k", "97.0k"]
            total = sum(it.tokens_total for it in session.iterations)
            assert total == app.sessions_screen.rows[CC_SAMPLE].tokens
            title = session.query_one("#title").render().plain  # type: ignore[union-attr]
            assert f"{fmt.tokens(total)} tokens" in title
            row = app.sessions_screen.render_row(CC_SAMPLE)
            assert plain(row[COLUMN_KEYS.index("tokens")]) == fmt.tokens(total)
            # and so is the cost: per iteration in the chart and the timeline, summed in the title and table
            costs = [it.cost_usd for it in session.iterations]
            assert all(c is not None and c > 0 for c in costs)
            in_timeline = [plain(timeline.get_cell(str(n), "cost")) for n in numbers]
            assert [line.split()[-1] for line in lines] == in_timeline == [fmt.cost(c) for c in costs]
            spent = app.sessions_screen.rows[CC_SAMPLE].cost_usd
            assert spent == pytest.approx(sum(c for c in costs if c is not None))
            assert plain(row[COLUMN_KEYS.index("cost")]) == fmt.cost(spent) and fmt.cost(spent) in title

    asyncio.run(scenario())


COLUMN_KEYS = [c.key for c in COLUMNS]


def iteration_events(sid: str, n: int, feedback: str = "") -> list[E.Event]:
    """One iteration of a live session: started, the agent's turn, validation, its signal."""
    t = NOW + timedelta(seconds=n)
    return [
        E.IterationStarted(session_id=sid, ts=t, iteration=n),
        E.AgentTurn(session_id=sid, ts=t, iteration=n, output_excerpt=f"turn {n}"),
        E.ValidationRan(session_id=sid, ts=t, iteration=n, score=10.0 * n, passed=False),
        E.SignalResolved(
            session_id=sid, ts=t, iteration=n, signal="CONTINUE", feedback=[feedback] if feedback else []
        ),
    ]


def test_the_session_screen_follows_a_live_session(tmp_path: Path) -> None:
    """New iterations are selected as they come, unless the user moved to another one (and again once
    they move back to the newest); the selected iteration's panel shows its events as they arrive."""
    journals = tmp_path / "journals"
    journal = Journal.for_session(journals, "live", fsync=False)
    journal.append(*started("live"))
    app = RalphApp([journals], now=fixed_clock)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: app.feed.live and "live" in app.sessions_screen.rows)
            app.open_session("live")
            await settle(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.detail)
            session = app.screen
            assert isinstance(session, SessionScreen) and session.selected_iteration == 1

            def detail_of(n: int) -> str:
                d = session.detail
                return "" if d is None or d.iteration != n else " ".join([d.output_excerpt, *d.feedback])

            # the selected (newest) iteration's panel fills in as its events arrive
            journal.append(*iteration_events("live", 1, "tests fail")[1:])
            await until(pilot, lambda: detail_of(1) == "turn 1 tests fail")
            # a new iteration is selected
            journal.append(*iteration_events("live", 2, "still failing"))
            await until(pilot, lambda: detail_of(2) == "turn 2 still failing")
            timeline = session.query_one("#timeline", DataTable)
            assert timeline.cursor_row == 1
            # the user goes back to iteration 1: it stays selected while iteration 3 arrives
            await pilot.press("up")
            await until(pilot, lambda: detail_of(1) != "")
            journal.append(*iteration_events("live", 3))
            await until(pilot, lambda: len(session.iterations) == 3)
            await settle(pilot, lambda: True)
            assert session.selected_iteration == 1 and timeline.cursor_row == 0 and detail_of(1)
            # back on the newest: following again
            await pilot.press("down", "down")
            await until(pilot, lambda: session.selected_iteration == 3)
            journal.append(*iteration_events("live", 4, "four"))
            await until(pilot, lambda: detail_of(4) == "turn 4 four")
            assert timeline.cursor_row == 3

    asyncio.run(scenario())


def test_the_session_panels_grow_with_the_terminal(tmp_path: Path) -> None:
    app = RalphApp([copy_samples(tmp_path / "j", ["thrashing"])], now=fixed_clock, watch=False)

    def sizes(screen: SessionScreen) -> dict[str, tuple[int, int]]:
        return {
            name: (screen.query_one(f"#{name}").size.width, screen.query_one(f"#{name}").size.height)
            for name in ("timeline", "detail-box", "right", "plot", "events")
        }

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, lambda: app.feed.loaded)
            app.open_session("thrashing")
            await settle(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.loads > 0)
            session = app.screen
            assert isinstance(session, SessionScreen)
            small = sizes(session)
            await pilot.resize_terminal(200, 60)
            await settle(pilot, lambda: sizes(session) != small)
            big = sizes(session)
            for name in small:  # every panel is wider and taller (the timeline keeps its columns' width)
                assert big[name][1] > small[name][1], (name, small[name], big[name])
                if name not in ("timeline", "detail-box"):
                    assert big[name][0] > small[name][0], (name, small[name], big[name])
            assert big["detail-box"][0] > small["detail-box"][0]
            plot = session.query_one(ScorePlot)
            assert len(plot.render().plain.splitlines()) == plot.size.height  # the plot is drawn to its size

    asyncio.run(scenario())


def test_a_cost_reads_as_dollars_and_never_as_free_when_it_is_not() -> None:
    assert [fmt.cost(x) for x in (None, 0.0, 0.000085, 0.0005, 0.0347, 12.345, 12_345.0)] == [
        "–",
        "$0.000",
        "<$0.001",
        "$0.001",
        "$0.035",
        "$12.35",
        "$12.3k",
    ]
    assert all(len(fmt.cost(x)) <= 7 for x in (0.000085, 9.999, 999.99, 99_999.0))
