"""The monitor's headless core (``ledger.monitor``) and replay (``ledger.monitor.replay``), on the recorded
sample sessions."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ledger import events as E
from ledger.core.home import Home
from ledger.monitor import EXAMPLE_QUERIES, Monitor, fleet_of
from ledger.monitor.replay import replay
from ledger.storage.journal import Journal
from ledger.storage.query import ReadOnlyViolation

SAMPLES = Path(__file__).resolve().parents[2] / "sample_sessions"
FILES = sorted(SAMPLES.glob("*.jsonl"))


def lines(name: str) -> int:
    return (SAMPLES / name).read_bytes().count(b"\n")


@pytest.fixture
def samples(tmp_path: Path) -> Path:
    d = tmp_path / "samples"
    d.mkdir()
    for f in FILES:
        shutil.copy(f, d / f.name)
    return d


def test_load_reports_progress_in_batches_and_ingests_everything(samples: Path) -> None:
    m = Monitor([samples])
    before = m.pending()
    assert (before.files_total, before.bytes_total) == (len(FILES), sum(f.stat().st_size for f in FILES))
    steps = list(m.load(batch_bytes=20_000))
    assert len(steps) > 2
    assert [s.bytes_done for s in steps] == sorted(s.bytes_done for s in steps)
    assert steps[-1].events == sum(lines(f.name) for f in FILES) and steps[-1].files_done == len(FILES)
    after = m.pending()
    torn = (SAMPLES / "torn-last-line.jsonl").read_bytes().rpartition(b"\n")[2]
    assert after.bytes_total == len(torn)  # only the torn tail is left, never lost


def test_fleet_and_sessions(samples: Path) -> None:
    m = Monitor([samples])
    list(m.load())
    fleet = m.fleet()
    assert (fleet.sessions, fleet.running, fleet.complete, fleet.blocked, fleet.escalated) == (
        20,
        1,
        5,
        4,
        10,
    )
    assert fleet.completion_rate == pytest.approx(5 / 19)  # 5 complete of the 19 that ended
    rows = {r.session_id: r for r in m.sessions()}
    assert rows["quality-regression"].scores == [100.0, 75.0, 50.0]
    assert rows["tdd-success"].status == "complete" and rows["tdd-success"].last_score == 100.0
    assert [r.session_id for r in m.sessions(["thrashing", "blocked"])] == sorted(
        ["thrashing", "blocked"],
        key=lambda s: -rows[s].updated_at.timestamp(),  # type: ignore[union-attr]
    )


def test_recent_sessions_are_the_head_of_all_sessions_and_batches_name_theirs(samples: Path) -> None:
    m = Monitor([samples])
    steps = list(m.load(batch_bytes=20_000))
    assert sorted(s for step in steps for s in step.sessions) == sorted(f.stem for f in FILES)
    everything = m.sessions()
    assert m.recent_sessions(4) == everything[:4]
    assert m.recent_sessions(100) == everything
    assert m.fleet() == fleet_of(Counter(r.status for r in everything))


def test_session_screens_answers(samples: Path) -> None:
    m = Monitor([samples])
    list(m.load())
    timeline = m.iterations("thrashing")
    assert [i.iteration for i in timeline] == [1, 2, 3, 4, 5]
    assert timeline[-1].guards == ["thrashing"] and timeline[-1].signal == "BLOCKED"
    assert all(len(i.rules) == 1 and i.rules[0].passed for i in timeline)
    heat = m.heat("thrashing")
    assert heat.files == ["calc.py"] and heat.cells == [[True] * 5]
    detail = m.detail("tdd-success", 1)
    assert "red phase" in detail.output_excerpt and detail.feedback[0].startswith("tests_pass:")
    assert detail.next_prompt.startswith("Fix the failing validation rules")
    assert [c.checkpoint_id for c in m.checkpoints("tdd-success")][:2] == [
        "tdd-success-cp1",
        "tdd-success-cp2",
    ]
    log = m.events("circuit-breaker", limit=3)
    assert [e.type for e in log] == ["guard_tripped", "signal_resolved", "session_escalated"]
    assert log[0].text.startswith("guard circuit_breaker tripped: Circuit breaker tripped after 3")


def test_refresh_reads_only_what_was_appended_and_raises_alerts(tmp_path: Path) -> None:
    journals = tmp_path / "live"
    source = [SAMPLES / "circuit-breaker.jsonl"]
    player = replay(source, journals, speed=0)
    list(itertools.islice(player, 10))
    m = Monitor([journals])
    first = m.refresh()
    assert (first.sessions, first.events, first.alerts) == (["circuit-breaker"], 10, [])
    assert m.refresh([journals / "circuit-breaker.jsonl"]).events == 0  # nothing new: nothing read
    list(player)
    update = m.refresh([journals / "circuit-breaker.jsonl", journals / "not-a-journal.txt"])
    assert update.sessions == ["circuit-breaker"] and update.events == lines("circuit-breaker.jsonl") - 10
    # the guard trip and the escalation it forces are one alert, which names the guard
    assert [(a.kind, a.iteration) for a in update.alerts] == [("escalated", 3)]
    assert "circuit_breaker" in update.alerts[0].message
    assert m.sessions(["circuit-breaker"])[0].status == "escalated"


def test_a_new_journal_in_a_watched_directory_is_picked_up(tmp_path: Path) -> None:
    journals = tmp_path / "live"
    journals.mkdir()
    m = Monitor([journals])
    # (an empty folder is also watched as a home before its first loop: its journals/)
    assert m.watch_paths == [journals.resolve(), journals.resolve() / "journals"]
    assert m.refresh().sessions == []
    list(replay([SAMPLES / "tdd-success.jsonl"], journals, speed=0))
    update = m.refresh([journals / "tdd-success.jsonl"])
    assert update.sessions == ["tdd-success"] and [a.kind for a in update.alerts] == ["completed"]


def test_queries_are_read_only_and_ingest_keeps_working(tmp_path: Path) -> None:
    journals = tmp_path / "live"
    player = replay([SAMPLES / "tdd-success.jsonl"], journals, speed=0)
    list(itertools.islice(player, 5))
    m = Monitor([journals])
    m.refresh()
    for sql in EXAMPLE_QUERIES.values():
        m.query(sql)
    refused = [
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM '/etc/passwd'",
        "SELECT count(*) FROM glob('/*')",
        "EXPLAIN ANALYZE SELECT * FROM read_text('/etc/hostname')",
        "COPY events TO '/tmp/x.csv'",
        "ATTACH '/tmp/other.duckdb'",
        "DELETE FROM events",
        "SELECT 1; SELECT 2",
    ]
    for sql in refused:
        with pytest.raises(ReadOnlyViolation) as info:
            m.query(sql)
        assert "\n" not in str(info.value)
    assert m.query("SELECT count(*) FROM events").rows == [(5,)]
    list(player)
    assert m.refresh().events == lines("tdd-success.jsonl") - 5  # the connection was not locked down


def test_one_home_uses_its_ledger_file_and_falls_back_when_locked(tmp_path: Path, samples: Path) -> None:
    home = Home.resolve(tmp_path / "home")
    home.ensure()
    shutil.copy(samples / "blocked.jsonl", home.journals / "blocked.jsonl")
    m = Monitor([home.root])
    list(m.load())
    assert m.ledger.path == home.database and m.sessions()[0].session_id == "blocked"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, time; c = duckdb.connect({str(home.database)!r}); "
            "print('held', flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        m.close()
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        fallback = Monitor([home.root])
        assert fallback.ledger.path is None and fallback.sessions()[0].status == "blocked"
    finally:
        holder.kill()
        holder.wait()


def test_replay_copies_bytes_in_timestamp_order_with_the_torn_tail_last(tmp_path: Path) -> None:
    out = tmp_path / "out"
    files = [SAMPLES / "tdd-success.jsonl", SAMPLES / "torn-last-line.jsonl", SAMPLES / "blocked.jsonl"]
    order: list[str] = []
    for _ in replay(files, out, speed=0, sequential=True):
        order.append(max(out.iterdir(), key=lambda p: p.stat().st_mtime_ns).name)
    assert all((out / f.name).read_bytes() == f.read_bytes() for f in files)
    assert len(order) == sum(f.read_bytes().count(b"\n") for f in files) + 1
    assert order[-1] == "torn-last-line.jsonl"


def test_replay_sleeps_the_recorded_gaps_scaled_and_capped(tmp_path: Path) -> None:
    slept: list[float] = []
    list(replay([SAMPLES / "tdd-success.jsonl"], tmp_path / "a", speed=10, max_gap_s=1.5, sleep=slept.append))
    assert slept and max(slept) <= 1.5 and min(slept) > 0
    slow: list[float] = []
    list(replay([SAMPLES / "tdd-success.jsonl"], tmp_path / "s", speed=1, max_gap_s=1.5, sleep=slow.append))
    assert set(slow) == {1.5}  # 10 s gaps capped
    assert 1.0 in slept  # the sample's 10 s steps at speed 10
    stop = threading.Event()
    player = replay([SAMPLES / "tdd-success.jsonl"], tmp_path / "b", speed=0, stop=stop)
    next(player)
    stop.set()
    assert list(player) == []
    with pytest.raises(ValueError):
        list(replay([], tmp_path / "c", speed=-1))


def test_replay_tells_each_lines_recorded_time_before_writing_it(tmp_path: Path) -> None:
    seen: list[tuple[float, int]] = []
    out = tmp_path / "out"
    sample = SAMPLES / "tdd-success.jsonl"

    def on_line(ts: float) -> None:
        written = (out / sample.name).read_bytes().count(b"\n") if (out / sample.name).exists() else 0
        seen.append((ts, written))

    list(replay([sample], out, speed=0, on_line=on_line))
    lines = sample.read_text().splitlines()
    stamps = [datetime.fromisoformat(json.loads(line)["ts"]).timestamp() for line in lines]
    assert [ts for ts, _ in seen] == stamps
    assert [n for _, n in seen] == list(range(len(stamps)))  # told before the line is written


SLOW_SQL = "SELECT sum(a.range * b.range) FROM range(200000) a, range(200000) b"


def test_query_caps_its_rows_and_stops_at_its_time_limit_without_blocking_ingest(tmp_path: Path) -> None:
    journals = tmp_path / "j"
    shutil.copytree(SAMPLES, journals, ignore=shutil.ignore_patterns("*.py", "*.md"))
    m = Monitor([journals])
    list(m.load())
    capped = m.query("SELECT * FROM range(5000)", max_rows=100)
    assert len(capped.rows) == 100 and capped.truncated
    whole = m.query("SELECT * FROM range(50)", max_rows=100)
    assert len(whole.rows) == 50 and not whole.truncated

    outcome: list[str] = []

    def slow() -> None:
        try:
            m.query(SLOW_SQL, timeout_s=1.5)
            outcome.append("finished")
        except ReadOnlyViolation as exc:
            outcome.append(str(exc))

    runner = threading.Thread(target=slow)
    started = time.monotonic()
    runner.start()
    time.sleep(0.2)  # the query is running now
    Journal.for_session(journals, "while-querying", fsync=False).append(
        E.SessionStarted(session_id="while-querying", task="t", agent="a")
    )
    update = m.refresh()
    refreshed = time.monotonic() - started
    runner.join(30)
    assert update.sessions == ["while-querying"] and refreshed < 1.5  # not held up by the query
    assert outcome == ["query stopped after 1.5 s (time limit)"]
    assert time.monotonic() - started < 15


def test_a_home_that_does_not_exist_yet_is_watched_from_its_nearest_folder(tmp_path: Path) -> None:
    """A home named as one (not found yet, or empty) is neither created nor mistaken for a journal
    directory: its journals/ is watched through the nearest existing folder until it appears."""
    home = tmp_path / "project" / ".ralph"
    m = Monitor(homes=[home])
    assert m.homes == [home] and m.watch_paths == [home / "journals"]
    assert m.watch_roots() == [tmp_path] and not home.exists()
    assert m.awaited(tmp_path / "project") and not m.awaited(tmp_path / "other")
    assert list(m.load()) == [] and m.sessions() == []
    Journal.for_session(home / "journals", "first", fsync=False).append(
        E.SessionStarted(session_id="first", task="t", agent="a")
    )
    assert m.watch_roots() == [home / "journals"]
    assert m.refresh().sessions == ["first"] and [s.session_id for s in m.sessions()] == ["first"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert Monitor(homes=[empty]).watch_paths == [empty / "journals"]  # not a directory of journals


def test_bad_lines_and_rewritten_journals_are_told(tmp_path: Path) -> None:
    d = tmp_path / "j"
    d.mkdir()
    shutil.copy(SAMPLES / "tdd-success.jsonl", d / "tdd-success.jsonl")
    (d / "x.jsonl").write_text("not json\n")
    m = Monitor([d])
    list(m.load())
    bad = m.bad_lines()
    assert len(bad) == 1 and bad[0].startswith(f"{d / 'x.jsonl'}:1: ")
    path = d / "tdd-success.jsonl"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:2]))
    update = m.refresh([path])
    assert update.reset == [str(path)] and update.sessions == ["tdd-success"]
    assert m.refresh([path]).reset == []


def test_tokens_have_one_definition_the_views_and_the_monitor_share(samples: Path) -> None:
    """tokens = input + output + cache_creation + cache_read of each agent turn (``turn_tokens``),
    summed per iteration and per session the same way: the sessions' totals are their iterations'."""
    m = Monitor([samples])
    list(m.load())
    turns = m.query(
        "SELECT sum(tokens.input + tokens.output + tokens.cache_creation + tokens.cache_read) FROM events"
    ).rows[0][0]
    sessions = m.sessions()
    assert turns > 0 and sum(s.tokens for s in sessions) == turns
    for s in sessions:
        its = m.iterations(s.session_id)
        assert sum(i.tokens_total for i in its) == s.tokens
        assert all(i.tokens_total == i.tokens_input + i.tokens_output + i.tokens_cache for i in its)
    cc = next(s for s in sessions if s.session_id.startswith("cc-"))
    assert [i.tokens_total for i in m.iterations(cc.session_id)] == [58433, 220342, 96989]


def test_a_rate_limited_run_reads_as_one_line_in_the_event_log(tmp_path: Path) -> None:
    journals = tmp_path / "journals"
    journals.mkdir()
    Journal(journals / "limited.jsonl").append(
        E.SessionStarted(session_id="limited", task="t"),
        E.IterationStarted(session_id="limited", iteration=1),
        E.RateLimited(session_id="limited", iteration=1, reason="five_hour limit reached", wait_s=3602.4),
    )
    m = Monitor([journals])
    list(m.load())
    last = m.events("limited")[-1]
    assert (last.type, last.text) == ("rate_limited", "rate limited (five_hour limit reached): a 3602 s wait")


def test_a_limit_with_a_reset_time_says_until_when_the_loop_waits(tmp_path: Path) -> None:
    journals = tmp_path / "journals"
    journals.mkdir()
    resets = datetime(2026, 11, 28, 17, 0, tzinfo=UTC)
    Journal(journals / "limited.jsonl").append(
        E.SessionStarted(session_id="limited", task="t"),
        E.IterationStarted(session_id="limited", iteration=2),
        E.RateLimited(
            session_id="limited", iteration=2, reason="You've hit your limit", resets_at=resets, wait_s=62
        ),
    )
    m = Monitor([journals])
    list(m.load())
    last = m.events("limited")[-1]
    assert last.text == "rate limited (You've hit your limit): a 62 s wait, until 2026-11-28 17:00 UTC"
