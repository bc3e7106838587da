"""A session's state derived incrementally (``ledger.storage.fold``) equals a fold from scratch.

Every sample session is written to a journal one line at a time; after each line, the events and
the in-memory ledger kept by ``ledger.storage.fold`` (which read only the new line) are compared with a
journal read from its start and a ledger built from scratch: events, views, detectors, decisions
and the guards' facts. A journal rewritten or replaced is read again from its start. One stop of a
ledger-native loop reads its journal from the start once and builds one ledger.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ledger import events as ev
from ledger.core.home import Home
from ledger.drivers.claude_code.stop.hook import run
from ledger.drivers.claude_code.stop.locate import LOOP_FILE
from ledger.loop.decide.facts import read_facts
from ledger.storage import database as store_module
from ledger.storage import fold as fold_module
from ledger.storage import journal as journal_module
from ledger.storage.database import Ledger
from ledger.storage.fold import events_of, fold, forget, ledger_of
from ledger.storage.journal import Cursor, Journal, read_new
from tests.unit.test_samples import FILES, SAMPLES, guard_config, replay_view

NOW = datetime(2026, 11, 23, tzinfo=UTC)


def state(ledger: Ledger, sid: str) -> dict[str, Any]:
    """Everything a fold yields for ``sid``: its rows, views, detectors, decisions and facts."""
    return {
        "events": ledger.rows("SELECT * FROM events ORDER BY seq"),
        "errors": ledger.rows("SELECT line_no, reason FROM ingest_errors ORDER BY line_no"),
        **replay_view(ledger, sid),
        "facts": msgspec.to_builtins(read_facts(ledger, sid, guard_config(ledger, sid), NOW)),
    }


_SCRATCH: list[Ledger] = []


def head_of_sample(tmp_path: Path, name: str = "loop-done.jsonl", n: int = 6) -> tuple[Path, list[bytes]]:
    """A journal under ``tmp_path/journals`` holding the first ``n`` lines of the sample ``name``,
    and all of the sample's lines."""
    path = tmp_path / "journals" / name
    path.parent.mkdir()
    lines = (SAMPLES / name).read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:n]))
    return path, lines


def scratch(path: Path, sid: str) -> dict[str, Any]:
    """The state of a ledger that holds nothing but ``path`` ingested from its first byte: one
    in-memory ledger emptied each time (creating one costs as much as the comparison itself)."""
    if not _SCRATCH:
        _SCRATCH.append(Ledger.memory())
    ledger = _SCRATCH[0]
    for table in ("events", "ingest_positions", "ingest_errors", "model_prices"):
        ledger.con.execute(f"DELETE FROM {table}")
    ledger.ingest([path])
    return state(ledger, sid)


@pytest.mark.parametrize("name", FILES)
def test_incremental_state_equals_a_fold_from_scratch_after_every_line(tmp_path: Path, name: str) -> None:
    sid = name.removesuffix(".jsonl")
    lines = (SAMPLES / name).read_bytes().splitlines(keepends=True)
    path = tmp_path / "journals" / name
    path.parent.mkdir()
    forget()
    with path.open("ab") as out:
        for n, line in enumerate(lines, 1):
            out.write(line)
            out.flush()
            got = fold(path)
            assert got.events == read_new(path, Cursor()).events, f"{name}: line {n}"
            assert state(ledger_of(path, None), sid) == scratch(path, sid), f"{name}: line {n}"
    fresh = Cursor()
    read_new(path, fresh)
    assert fold(path).cursor == fresh  # where a reader from scratch stands (before a torn last line)
    forget()


def test_a_fold_reads_only_what_was_appended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "journals" / "loop-done.jsonl"
    path.parent.mkdir()
    lines = (SAMPLES / "loop-done.jsonl").read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:5]))
    forget()
    assert len(events_of(path)) == 5
    starts: list[int] = []
    real = journal_module.read_chunk

    def spy(p: Path, offset: int = 0, line_no: int = 0, head: str = "") -> journal_module.Chunk:
        starts.append(offset)
        return real(p, offset, line_no, head)

    monkeypatch.setattr(journal_module, "read_chunk", spy)
    with path.open("ab") as out:
        out.write(b"".join(lines[5:8]))
    assert len(events_of(path)) == 8
    assert starts == [path.stat().st_size - len(b"".join(lines[5:8]))]


def test_a_replaced_or_truncated_journal_is_read_again_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "journals" / "loop-done.jsonl"
    path.parent.mkdir()
    lines = (SAMPLES / "loop-done.jsonl").read_bytes().splitlines(keepends=True)
    other = (SAMPLES / "blocked.jsonl").read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines))
    forget()
    assert len(events_of(path)) == len(lines)
    ledger_of(path, None)
    path.write_bytes(b"".join(lines[:3]))  # truncated in place
    assert events_of(path) == read_new(path, Cursor()).events and len(events_of(path)) == 3
    assert ledger_of(path, None).rows("SELECT count(*) AS n FROM events") == [{"n": 3}]
    # replaced by another file of the same length or longer, with another first line
    tmp = path.with_name("new")
    replaced = [line.replace(b'"blocked"', b'"loop-done"') for line in other]
    tmp.write_bytes(b"".join(replaced))
    os.replace(tmp, path)
    assert events_of(path) == read_new(path, Cursor()).events
    assert state(ledger_of(path, None), "loop-done") == scratch(path, "loop-done")
    path.unlink()
    assert events_of(path) == []


def test_one_native_stop_reads_its_journal_once_and_builds_one_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger-native stop (claim, record, validate, next) reads the journal from its start once and
    builds one in-memory ledger (it read it four times and built three)."""
    project = tmp_path / "p"
    (project / ".git").mkdir(parents=True)
    (project / ".claude").mkdir()
    (project / "ralph.toml").write_text("max_iterations = 50\n")
    (project / LOOP_FILE).write_text(json.dumps({"prompt": "Fix it", "started_at": "2026-11-22T00:00:00Z"}))
    transcript = tmp_path / "t.jsonl"
    home = Home.resolve(tmp_path / "home")
    monkeypatch.chdir(project)
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)

    def stop(n: int) -> str:
        text = [{"type": "text", "text": f"t{n}"}]
        turn = {"type": "assistant", "message": {"id": f"m{n}", "content": text}}
        with transcript.open("a") as f:
            f.write(json.dumps(turn) + "\n")
        event = {"session_id": "abc", "transcript_path": str(transcript), "cwd": str(project)}
        return run(json.dumps(event).encode(), home=home).stdout

    assert '"block"' in stop(1)
    forget()  # a new process: nothing derived yet
    whole: list[Path] = []
    built: list[int] = []
    real_chunk, real_memory = journal_module.read_chunk, store_module.Ledger.memory

    def chunk(p: Path, offset: int = 0, line_no: int = 0, head: str = "") -> journal_module.Chunk:
        if offset == 0 and p.suffix == ".jsonl" and p.parent == home.journals:
            whole.append(p)
        return real_chunk(p, offset, line_no, head)

    def memory(home: Home | None = None, *, prices: bool = True) -> Ledger:
        built.append(1)
        return real_memory(home, prices=prices)

    monkeypatch.setattr(journal_module, "read_chunk", chunk)
    monkeypatch.setattr(store_module.Ledger, "memory", staticmethod(memory))
    assert '"block"' in stop(2)
    assert [p.name for p in whole] == ["cc-abc.jsonl"]
    assert len(built) == 1
    assert (
        fold_module.fold(home.journals / "cc-abc.jsonl").cursor.offset
        == (home.journals / "cc-abc.jsonl").stat().st_size
    )


def test_a_process_keeps_few_ledgers_and_rebuilds_a_dropped_one(tmp_path: Path) -> None:
    """Only the most recently used journals keep their DuckDB ledger; a dropped one is rebuilt whole."""
    (tmp_path / "journals").mkdir()
    forget()
    paths = []
    for name in FILES[: fold_module.KEEP_LEDGERS + 2]:
        path = tmp_path / "journals" / name
        path.write_bytes((SAMPLES / name).read_bytes())
        ledger_of(path, None)
        paths.append(path)
    first = paths[0]
    assert fold_module._FOLDS[first.absolute()]._ledger is None
    assert all(
        fold_module._FOLDS[p.absolute()]._ledger is not None for p in paths[-fold_module.KEEP_LEDGERS :]
    )
    sid = first.stem
    assert state(ledger_of(first, None), sid) == scratch(first, sid)
    forget()


def test_a_ledger_ingests_only_when_its_journal_grew_and_catch_up_brings_it_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, lines = head_of_sample(tmp_path)
    forget()
    ledger_of(path, None)
    ingests: list[int] = []
    real = Ledger.ingest

    def spy(self: Ledger, journals: Any = None, *, live: bool = False) -> Any:
        ingests.append(1)
        return real(self, journals, live=live)

    monkeypatch.setattr(Ledger, "ingest", spy)
    ledger_of(path, None)
    assert ingests == []  # nothing appended: nothing ingested
    with path.open("ab") as out:
        out.write(b"".join(lines[6:]))
    fold_module.catch_up()  # a worker between two stops
    assert ingests == [1]
    assert state(ledger_of(path, None), "loop-done") == scratch(path, "loop-done")
    assert ingests == [1, 1]  # (scratch's own ingest) and none by ledger_of: already level
    forget()


def test_catch_up_computes_again_the_memos_a_stop_asked_for(tmp_path: Path) -> None:
    """A worker between two stops computes each memo the last stop asked for at the journal's new
    position (the ``sessions`` row a stop reads first): the next ask finds it, level with the
    journal. One whose computation fails is dropped, and one of a ledger made again is never run."""
    path, lines = head_of_sample(tmp_path)
    forget()
    read = fold(path)
    ledger = read.ledger(None)
    runs: list[int] = []

    def events() -> int:
        runs.append(1)
        return int(ledger.con.execute("SELECT count(*) FROM events").fetchall()[0][0])

    def broken() -> int:
        runs.append(2)
        if len(runs) > 2:
            raise RuntimeError("gone")
        return 0

    assert read.memo("events", events) == 6
    assert read.memo("broken", broken) == 0
    with path.open("ab") as out:
        out.write(b"".join(lines[6:]))
    fold_module.catch_up()  # a worker between two stops
    assert runs == [1, 2, 1, 2]
    read = fold(path)
    assert read.memo("events", lambda: -1) == len(lines)  # computed by catch_up, at this position
    assert read.memo("broken", lambda: -1) == -1  # dropped: computed on the ask
    fold_module.catch_up()  # nothing appended: nothing computed again
    assert runs == [1, 2, 1, 2]
    forget(path)
    fresh = fold(path)
    fresh.memo("events", events)
    fresh._ledger = None  # dropped (a process keeps few ledgers): its memos are not run on a new one
    with path.open("ab") as out:
        out.write(lines[-1])
    fresh.ledger(None)
    fresh.rememo()
    assert runs == [1, 2, 1, 2, 1]
    forget()


def test_kept_is_a_memo_at_the_position_read_now(tmp_path: Path) -> None:
    """``Fold.kept`` answers what ``memo`` computed at the journal's position read now, and nothing
    once the journal moved on (a step then reads the ``sessions`` row again: ``read_facts``)."""
    path, lines = head_of_sample(tmp_path)
    forget()
    read = fold(path)
    assert read.kept("row") is None
    assert read.memo("row", lambda: {"iteration": 1}) == {"iteration": 1}
    assert read.kept("row") == {"iteration": 1}
    with path.open("ab") as out:
        out.write(lines[6])
    assert fold(path).kept("row") is None
    forget()


def test_a_steps_tentative_rows_are_the_rows_its_append_then_ingests(tmp_path: Path) -> None:
    """``Fold.pending`` puts a step's events in the ledger (``Ledger.insert_events``: one ``COPY``)
    as the rows the journal's ingest gives them once appended: every event of every sample session
    and one of each type no sample holds, in one session."""
    events: list[ev.Event] = [
        msgspec.structs.replace(e, session_id="s")
        for name in FILES
        for e in read_new(SAMPLES / name, Cursor()).events
    ]
    seen = {type(e) for e in events}
    extra = {"checkpoint_id": "s-cp9", "component": "hook", "message": "m\u00e9", "tokens": {"input": 3}}
    for cls in ev.EVENT_TYPES:
        if cls not in seen:
            fields = {f: v for f, v in extra.items() if f in cls.__struct_fields__}
            events.append(msgspec.convert({"session_id": "s", "iteration": 2, "ts": NOW, **fields}, cls))
    assert {type(e) for e in events} == set(ev.EVENT_TYPES)
    path = tmp_path / "s.jsonl"
    Journal(path, fsync=False).append(events[0])
    forget()
    read = fold(path)
    with read.pending(None, events[1:]) as ledger:
        tentative = ledger.rows("SELECT * EXCLUDE (prev) FROM events ORDER BY seq")
    assert ledger.rows("SELECT count(*) AS n FROM events") == [{"n": 1}]  # rolled back
    Journal(path, fsync=False).append(*events[1:])
    # the same rows but for the link to the line before, which only the append computes
    assert ledger_of(path, None).rows("SELECT * EXCLUDE (prev) FROM events ORDER BY seq") == tentative
    assert len(tentative) == len(events)
    forget()
