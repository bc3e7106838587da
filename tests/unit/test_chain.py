"""The hash chain of journals (ledger.storage.chain): appends link, and a check names where a chain
breaks and how (docs/verify.md)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from ledger import events as ev
from ledger.storage import chain
from ledger.storage.chain import Known, check_journal, follows, link_of
from ledger.storage.journal import Journal


def _journal(tmp_path: Path, n: int = 6, sid: str = "s") -> Path:
    j = Journal.for_session(tmp_path / "journals", sid, fsync=False)
    j.append(ev.SessionStarted(session_id=sid, task="t"))
    for i in range(1, n):
        j.append(ev.IterationStarted(session_id=sid, iteration=i, notes=f"note {i}"))
    return j.path


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1]


def _check(lines: list[bytes], known: Known | None = None) -> str:
    return check_journal("j", b"\n".join(lines) + b"\n", known).broken


def test_every_appended_event_links_to_the_line_before_it(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    lines = _lines(path)
    events = [ev.decode(line) for line in lines]
    assert events[0].prev == chain.START
    assert [e.prev for e in events[1:]] == [link_of(line) for line in lines[:-1]]
    verdict = check_journal(str(path), path.read_bytes())
    assert (verdict.broken, verdict.lines, verdict.linked) == ("", 6, 6)


def test_one_append_of_several_events_links_each_to_the_one_before(tmp_path: Path) -> None:
    j = Journal.for_session(tmp_path, "s", fsync=False)
    j.append(*(ev.ErrorRecorded(session_id="s", component=str(i)) for i in range(4)))
    lines = _lines(j.path)
    assert [ev.decode(x).prev for x in lines[1:]] == [link_of(x) for x in lines[:-1]]


def test_an_edited_line_is_named(tmp_path: Path) -> None:
    lines = _lines(_journal(tmp_path))
    lines[2] = lines[2].replace(b"note 2", b"note X")
    assert _check(lines) == "line 3: edited (line 4 links to other text)"


def test_removed_lines_are_named(tmp_path: Path) -> None:
    lines = _lines(_journal(tmp_path))
    del lines[2:4]
    assert _check(lines) == "line 3: removed before it (2 lines, seq 3-4)"
    assert _check(_lines(_journal(tmp_path / "b"))[1:]).startswith(
        "line 1: removed before it (1 line, seq 1)"
    )


def test_reordered_lines_are_named(tmp_path: Path) -> None:
    lines = _lines(_journal(tmp_path))
    lines[2], lines[3] = lines[3], lines[2]
    assert _check(lines) == "line 3: reordered (it belongs after line 4)"


def test_inserted_lines_are_named(tmp_path: Path) -> None:
    lines = _lines(_journal(tmp_path))
    forged = ev.encode(ev.ErrorRecorded(session_id="s", seq=9, component="x"))[:-1]
    assert (
        _check([*lines[:3], forged, *lines[3:]])
        == "line 4: inserted (a line without a link inside the chain)"
    )
    assert _check([*lines[:3], lines[1], *lines[3:]]) == "line 4: inserted (seq 2 again)"


def test_a_truncated_tail_is_named(tmp_path: Path) -> None:
    data = _journal(tmp_path).read_bytes()
    # a last line cut short is not checked (an append in progress, or a crash's, looks the same)
    assert check_journal("j", data[:-20]).broken == ""
    # a tail cut off: only what the ledger read before can tell
    lines = _lines(tmp_path / "journals" / "s.jsonl")
    full = check_journal("j", data)
    known = Known(len(data), full.last, 6)
    assert check_journal("j", data[:-20], known).broken == (
        "line 6: truncated tail (the ledger read up to seq 6, the journal ends at seq 5)"
    )
    assert _check(lines[:4], known) == (
        "line 5: truncated tail (the ledger read up to seq 6, the journal ends at seq 4)"
    )
    edited = [*lines[:5], lines[5].replace(b"note 5", b"note 6")]
    assert _check(edited) == ""  # the last line: no link after it
    assert _check(edited, known) == "line 6: edited (the ledger read other text there)"


def test_an_old_journal_has_no_links_and_goes_on_linked(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(
        ev.encode_lines(
            [ev.SessionStarted(session_id="s", seq=1), ev.ErrorRecorded(session_id="s", seq=2, component="c")]
        )
    )
    assert check_journal("j", path.read_bytes()).linked == 0
    Journal(path, fsync=False).append(ev.ErrorRecorded(session_id="s", component="d"))
    lines = _lines(path)
    assert ev.decode(lines[2]).prev == link_of(lines[1])
    verdict = check_journal("j", path.read_bytes())
    assert (verdict.broken, verdict.linked) == ("", 1)
    # an unlinked line after the chain began is inserted
    assert _check([*lines, lines[0].replace(b'"seq":1', b'"seq":4')]) == (
        "line 4: inserted (a line without a link inside the chain)"
    )


def test_a_torn_line_the_next_append_closed_keeps_the_chain(tmp_path: Path) -> None:
    path = _journal(tmp_path, 3)
    with path.open("ab") as f:
        f.write(b'{"type":"error_rec')  # a crash mid-append
    Journal(path, fsync=False).append(ev.ErrorRecorded(session_id="s", component="after"))
    assert check_journal("j", path.read_bytes()).broken == ""


@pytest.mark.parametrize("cut", [0, 1, 2, 3])
def test_follows_agrees_with_the_whole_check(tmp_path: Path, cut: int) -> None:
    path = _journal(tmp_path)
    data = path.read_bytes()
    lines = _lines(path)
    head = b"\n".join(lines[:cut]) + b"\n" if cut else b""
    state = follows(head, "", False)
    assert state is not None
    assert follows(data[len(head) :], *state) == (check_journal("j", data).last, True)
    edited = data.replace(b"note 4", b"note X")
    assert follows(edited[len(head) :], *state) is None


def test_follows_an_unlinked_journal_hashes_only_its_last_line(tmp_path: Path) -> None:
    data = ev.encode_lines(
        [ev.SessionStarted(session_id="s", seq=1), ev.ErrorRecorded(session_id="s", seq=2, component="c")]
    )
    assert follows(data, "", False) == (link_of(data.split(b"\n")[1]), False)
    assert follows(data, "", True) is None  # unlinked lines after linked ones


def _append_many(path: str, n: int) -> None:
    j = Journal(Path(path), fsync=False)
    for i in range(n):
        j.append(
            ev.ErrorRecorded(session_id="s", component=f"w{i}"),
            ev.ErrorRecorded(session_id="s", component="x"),
        )


def test_concurrent_appenders_keep_one_valid_chain(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(str(path), 60)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        assert p.exitcode == 0
    verdict = check_journal("j", path.read_bytes())
    assert (verdict.broken, verdict.lines, verdict.linked) == ("", 480, 480)
    assert [ev.decode(x).seq for x in _lines(path)] == list(range(1, 481))


CLAUDE_CODE_JOURNAL = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "clients"
    / "claude-code-2.1.328"
    / "verify"
    / "journal.jsonl"
)


def test_a_journal_the_real_claude_code_hook_wrote_verifies_and_an_edit_is_named() -> None:
    data = CLAUDE_CODE_JOURNAL.read_bytes()
    verdict = check_journal("j", data)
    assert (verdict.broken, verdict.lines, verdict.linked) == ("", 21, 21)
    lines = data.split(b"\n")[:-1]
    lines[6] = lines[6].replace(b'"decision":"block"', b'"decision":"allow"')
    assert _check(lines) == "line 7: edited (line 8 links to other text)"


def test_a_replay_that_moves_a_recordings_times_links_its_lines_again(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from ledger.monitor.replay import replay

    for sid, day in (("a", 1), ("b", 5)):
        j = Journal.for_session(tmp_path / "rec", sid, fsync=False)
        j.append(ev.SessionStarted(session_id=sid, ts=datetime(2026, 1, day, tzinfo=UTC)))
        for i in range(1, 4):
            j.append(
                ev.IterationStarted(
                    session_id=sid, iteration=i, ts=datetime(2026, 1, day, 0, 0, i, tzinfo=UTC)
                )
            )
    list(replay([tmp_path / "rec" / "a.jsonl", tmp_path / "rec" / "b.jsonl"], tmp_path / "out", speed=0))
    moved = (tmp_path / "out" / "b.jsonl").read_bytes()
    assert moved != (tmp_path / "rec" / "b.jsonl").read_bytes()  # its times were moved to a's start
    assert check_journal("b", moved).broken == ""
    assert (tmp_path / "out" / "a.jsonl").read_bytes() == (tmp_path / "rec" / "a.jsonl").read_bytes()


def test_a_bad_last_line_is_a_break_until_a_linked_line_follows_as_a_rebuild_finds(tmp_path: Path) -> None:
    """The ingest checks new lines from where it stopped: a bad line that was the journal's last when
    it read it ("edited (not an event)": nothing links to it yet) is checked again once lines follow,
    so that the ledger says what a rebuild from the journal says at every moment."""
    path = _journal(tmp_path, 3)
    with path.open("ab") as f:
        f.write(b"{not an event\n")  # a bad line another program wrote
    j = Journal.for_session(tmp_path / "journals", "s", fsync=False)

    def read(a: int, b: int) -> bytes:
        return path.read_bytes()[a:b]

    end = path.stat().st_size
    tip = chain.check_new(str(path), read, 0, end, ("", False, ""))
    assert tip[2] == "line 4: edited (not an event)" == check_journal("j", path.read_bytes()).broken
    j.append(ev.IterationStarted(session_id="s", iteration=3))  # links to the bad line
    later = chain.check_new(str(path), read, end, path.stat().st_size, tip)
    whole = check_journal("j", path.read_bytes())
    assert later == (whole.last, whole.on, whole.broken) and later[2] == ""
