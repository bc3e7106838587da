"""Replaying recordings side by side (``ledger.monitor.replay``): aligned to a common start by default,
each at its own recorded pace; ``sequential`` keeps the recorded times; the replay's clock."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest

from ledger import events as E
from ledger.monitor.replay import TIME_FIELDS, ReplayClock, replay, shifted
from ledger.storage import chain

SAMPLES = Path(__file__).resolve().parents[2] / "sample_sessions"
FILES = sorted(SAMPLES.glob("*.jsonl"))


def stamps(path: Path) -> list[datetime]:
    """The ``ts`` of each complete line of a journal."""
    return [datetime.fromisoformat(json.loads(line)["ts"]) for line in path.read_bytes().splitlines(True)
            if line.endswith(b"\n")]  # fmt: skip


def played(files: list[Path], out: Path, *, sequential: bool = False) -> list[tuple[float, float, str]]:
    """Replay ``files`` at ×20 with a fake sleep: (seconds of replay slept so far, the line's replayed
    time, its file) for each line, in the order written."""
    slept = [0.0]
    seen: list[tuple[float, float]] = []
    order: list[tuple[float, float, str]] = []

    def on_line(ts: float) -> None:
        seen.append((slept[0], ts))

    def sleep(seconds: float) -> None:
        slept[0] += seconds

    before: dict[str, int] = {}
    for _ in replay(files, out, speed=20, sleep=sleep, on_line=on_line, sequential=sequential):
        now = {p.name: p.read_bytes().count(b"\n") for p in out.glob("*.jsonl")}
        grew = [name for name, n in now.items() if n > before.get(name, 0)]
        before = now
        if grew:  # (the torn tails, written last, add no complete line)
            order.append((*seen[len(order)], grew[0]))
    return order


def test_an_aligned_replay_starts_every_recording_at_once(tmp_path: Path) -> None:
    """The recordings were made half an hour apart; replayed, every one's first line is written in the
    first second of the replay, so all the loops run side by side."""
    order = played(FILES, tmp_path / "out")
    first: dict[str, tuple[float, float]] = {}
    for slept, ts, name in order:
        first.setdefault(name, (slept, ts))
    assert set(first) == {f.name for f in FILES}
    assert max(slept for slept, _ in first.values()) < 1.0
    start = min(stamps(f)[0] for f in FILES).timestamp()
    assert {ts for _, ts in first.values()} == {start}  # every one starts at the earliest start
    # interleaved: before any recording has ended, lines of every recording were written
    last = {name: i for i, (_, _, name) in enumerate(order)}
    assert len({name for _, _, name in order[: min(last.values())]}) == len(FILES)
    # and the whole replay lasts as long as the longest recording, not as their sum
    longest = max((stamps(f)[-1] - stamps(f)[0]).total_seconds() for f in FILES)
    assert order[-1][0] == pytest.approx(longest / 20)


def test_each_aligned_recording_keeps_its_pace_and_only_its_times_move(tmp_path: Path) -> None:
    out = tmp_path / "out"
    order = played(FILES, out)
    start = min(stamps(f)[0] for f in FILES)
    for f in FILES:
        recorded, replayed = stamps(f), stamps(out / f.name)
        shift = start - recorded[0]
        assert replayed == [ts + shift for ts in recorded]  # the same gaps: the recording's own pace
        assert [ts for _, ts, name in order if name == f.name] == [ts.timestamp() for ts in replayed]
        # the events are the recorded ones, their times moved by the same amount
        old = [E.decode(line) for line in f.read_bytes().splitlines(True) if line.endswith(b"\n")]
        new = [
            E.decode(line) for line in (out / f.name).read_bytes().splitlines(True) if line.endswith(b"\n")
        ]
        unlinked = [msgspec.structs.replace(e, prev="") for e in new]
        assert unlinked == [msgspec.structs.replace(moved(e, shift), prev="") for e in old]
        # moved lines are linked again: the replayed journal's chain holds
        assert chain.check_journal(str(out / f.name), (out / f.name).read_bytes()).broken == ""
        torn = f.read_bytes().rpartition(b"\n")[2]
        assert (out / f.name).read_bytes().endswith(torn)  # a torn tail is still written last, as it was
    earliest = min(FILES, key=lambda f: stamps(f)[0])
    assert (out / earliest.name).read_bytes() == earliest.read_bytes()  # nothing to move: byte for byte


def moved(event: E.AnyEvent, by: timedelta) -> E.AnyEvent:
    """``event`` with each of its datetime fields moved by ``by``."""
    changes = {f: getattr(event, f) + by for f in TIME_FIELDS if getattr(event, f, None) is not None}
    return msgspec.structs.replace(event, **changes)


def test_a_sequential_replay_keeps_the_recorded_times_one_recording_after_another(tmp_path: Path) -> None:
    out = tmp_path / "out"
    order = played(FILES, out, sequential=True)
    assert all((out / f.name).read_bytes() == f.read_bytes() for f in FILES)
    names = [name for _, _, name in order]
    runs = [name for i, name in enumerate(names) if i == 0 or names[i - 1] != name]
    assert runs == [f.name for f in sorted(FILES, key=lambda f: stamps(f)[0])]  # one whole loop at a time
    assert [ts for _, ts, _ in order] == sorted(ts.timestamp() for f in FILES for ts in stamps(f))


def test_a_recording_without_any_time_does_not_move_the_others(tmp_path: Path) -> None:
    """A journal whose lines carry no readable time is played at the start, as it is; the others
    still start at the earliest recorded start (not at 1970)."""
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"not json\n{}\n")
    files = [bad, SAMPLES / "tdd-success.jsonl", SAMPLES / "blocked.jsonl"]
    order = played(files, tmp_path / "out")
    assert [name for _, _, name in order[:2]] == ["bad.jsonl"] * 2
    assert (tmp_path / "out" / "bad.jsonl").read_bytes() == bad.read_bytes()
    assert stamps(tmp_path / "out" / "blocked.jsonl")[0] == stamps(SAMPLES / "tdd-success.jsonl")[0]
    assert (tmp_path / "out" / "tdd-success.jsonl").read_bytes() == (
        SAMPLES / "tdd-success.jsonl"
    ).read_bytes()


def test_shifting_a_line_moves_its_times_and_nothing_else() -> None:
    at = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)
    event = E.RateLimited(session_id="s", seq=3, ts=at, reason="usage", resets_at=at + timedelta(hours=1))
    line = E.encode(event)
    assert E.decode(shifted(line, 90)) == E.RateLimited(
        session_id="s",
        seq=3,
        ts=at + timedelta(seconds=90),
        reason="usage",
        resets_at=at + timedelta(hours=1, seconds=90),
    )
    assert shifted(line, 0) is line
    assert shifted(b'{"type":"session_sta', 90) == b'{"type":"session_sta'  # a torn line is left as it is
    assert {"ts", "expires_at", "resets_at"} <= TIME_FIELDS


def test_the_replay_clock_reads_the_replayed_time_and_stands_still_when_paused() -> None:
    ticks = [100.0]
    wall = datetime(2030, 1, 1, tzinfo=UTC)
    clock = ReplayClock(monotonic=lambda: ticks[0], wall=lambda: wall)
    assert clock() == wall  # nothing replayed yet
    at = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)
    clock.mark(at.timestamp())
    ticks[0] += 3
    assert clock() == at + timedelta(seconds=3)  # running on from the last line
    clock.pause()
    ticks[0] += 50
    assert clock() == at + timedelta(seconds=3)
    clock.resume()
    ticks[0] += 1
    assert clock() == at + timedelta(seconds=4)
    clock.mark(at.timestamp() + 20)
    assert clock() == at + timedelta(seconds=20)
