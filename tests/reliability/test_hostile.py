"""Hostile input: what an agent, a transcript, a corrupted journal, a careless configuration or a
curious SQL user can throw at ralph-ledger. Every input must give a clear one-line error (never a
traceback), allow the stop where the Stop hook is concerned, lose nothing already recorded, finish
in time, and write no file outside the ledger home.

Quick by default (well under a minute); ``pytest --long`` tries many more generated inputs. With
``-s`` the suite prints what it tried, e.g.
``hostile suite: 4,210 inputs tried, 0 tracebacks, 0 hangs, 0 files outside the home``.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import msgspec
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from ledger import events as E
from ledger.cli import main as cli_main
from ledger.core.home import Home
from ledger.drivers.claude_code.stop.hook import run
from ledger.drivers.claude_code.stop.locate import LOOP_FILE, MAX_STDIN, STATE_FILE, HookInputError
from ledger.drivers.claude_code.stop.stop_input import HookOutcome, parse_input
from ledger.drivers.claude_code.transcript.last_text import find_last_text
from ledger.drivers.claude_code.transcript.scan import scan
from ledger.loop.config.loop_config import ConfigError, load_agent, load_toml
from ledger.loop.engine import Engine
from ledger.loop.validate.promises import VOCABULARY, detect_promises
from ledger.loop.validate.rules import parse_rules
from ledger.storage.database import Ledger
from ledger.storage.journal import Cursor, Journal, read_new
from ledger.storage.query import QueryResult, ReadOnlyViolation, lock_down, run_readonly
from tests.helpers import ticking, validate
from tests.safety import (
    PLUGIN_MESSAGE,
    STATE_TEXT,
    Tally,
    assert_append_only,
    cli_process,
    fingerprint,
    hook_process,
    hypothesis_settings,
    interrupting,
    odd_paths,
    one_line,
    snapshot_journals,
    tree,
)

TALLY = Tally("hostile suite")
Obj = dict[str, Any]


@pytest.fixture(scope="module", autouse=True)
def _summary() -> Iterator[None]:
    """Print the tally once the module's tests have run (visible with ``-s``)."""
    TALLY.started = time.perf_counter()
    yield
    print("\n" + TALLY.line())


# --- generic JSON and text ---------------------------------------------------------------------------

scalars: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
)
json_values: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)


# --- 1. the Stop hook's stdin ------------------------------------------------------------------------


class HookBed:
    """A project with an unclaimed ``ralph-loop`` state file, readable and unreadable transcripts, and
    a home whose journal already holds one recorded stop; ``stop`` runs the hook in-process."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.project = root / "project"
        self.project.mkdir()
        self.home = Home.resolve(root / "home")
        self.transcript = root / "transcript.jsonl"
        self.transcript.write_text(
            json.dumps({"type": "user", "message": {"role": "user", "content": "go"}})
            + "\n"
            + json.dumps(
                {
                    "type": "assistant",
                    "message": {"id": "m1", "content": [{"type": "text", "text": "Working on it."}]},
                }
            )
            + "\n"
        )
        self.paths = {"file": str(self.transcript), **odd_paths(root)}  # transcript paths, readable or not
        self.cwds = [
            str(self.project),
            str(root / "adir"),
            "/nonexistent/dir",
            "relative",
            "",
            str(root / "fifo"),
        ]
        first = self.stop(self.event("recorded-session"))
        assert '"decision": "block"' in first.stdout, first
        self.journals = snapshot_journals(self.home.journals)
        assert self.journals
        self.outside = tree(root, skip=[self.home.root])

    def event(self, session: str, **fields: Any) -> bytes:
        """A well-formed Stop event for ``session`` in the project, with ``fields`` overriding."""
        data = {
            "session_id": session,
            "transcript_path": str(self.transcript),
            "cwd": str(self.project),
            "hook_event_name": "Stop",
            "stop_hook_active": False,
            **fields,
        }
        return json.dumps(data).encode()

    def stop(self, raw: bytes, seconds: float = 20) -> HookOutcome:
        """One stop with ``raw`` on stdin, the loop reset first; checks what every stop must hold."""
        state = self.project / STATE_FILE
        state.parent.mkdir(exist_ok=True)
        state.write_text(STATE_TEXT)
        with TALLY.timed(seconds):
            outcome = run(raw, home=self.home)
        TALLY.no_traceback(outcome.stderr + outcome.stdout)
        assert outcome.exit_code == 0
        if outcome.stdout.startswith("{"):
            block = json.loads(outcome.stdout)
            assert block["decision"] == "block" and block["reason"] == "Fix the tests"
        if outcome.stderr and not outcome.stderr.startswith(PLUGIN_MESSAGE):
            assert one_line(outcome.stderr), outcome.stderr
            assert outcome.stderr.startswith("ralph-ledger hook: ") and outcome.stderr.endswith(
                "; allowing the stop\n"
            ), outcome.stderr
        if hasattr(self, "journals"):
            assert_append_only(self.journals)
            TALLY.no_new_files(self.outside, tree(self.root, skip=[self.home.root]), [str(STATE_FILE)])
        return outcome

    def refused(self, raw: bytes) -> HookOutcome:
        """A stop whose stdin is refused: allowed, nothing on stdout, one line on stderr."""
        outcome = self.stop(raw)
        assert outcome.stdout == "" and one_line(outcome.stderr), outcome
        return outcome


@pytest.fixture
def bed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HookBed:
    monkeypatch.chdir(tmp_path)  # an event without cwd means the hook's own directory
    return HookBed(tmp_path)


def test_hook_refuses_binary_stdin(bed: HookBed, long_form: bool) -> None:
    @hypothesis_settings(long_form, 150)
    @given(st.binary(max_size=4096))
    def check(raw: bytes) -> None:
        bed.refused(raw)

    check()


def test_hook_refuses_json_that_is_not_a_stop_event(bed: HookBed, long_form: bool) -> None:
    @hypothesis_settings(long_form, 150)
    @given(json_values)
    def check(value: Any) -> None:
        raw = json.dumps(value).encode()
        try:
            parse_input(raw)
        except HookInputError:
            bed.refused(raw)
        else:
            bed.stop(raw)

    check()


@st.composite
def mutated_events(draw: st.DrawFn, bed: HookBed) -> bytes:
    """A Stop event with fields dropped, mistyped, added, or pointed at hostile paths."""
    data: Obj = {
        "session_id": draw(
            st.one_of(
                st.sampled_from(["s1", "5c0375b4-57a5", "../../etc", "", " ", "a/b", "x" * 200]), st.text()
            )
        ),
        "transcript_path": draw(st.one_of(st.sampled_from(sorted(bed.paths.values())), st.text(max_size=30))),
        "cwd": draw(st.one_of(st.sampled_from(bed.cwds), st.text(max_size=30))),
        "hook_event_name": "Stop",
        "stop_hook_active": draw(st.booleans()),
        "last_assistant_message": draw(
            st.one_of(
                st.none(), st.text(max_size=200), st.just("<promise>DONE</promise>"), st.just("$(touch x)")
            )
        ),
    }
    for key in draw(st.lists(st.sampled_from(sorted(data)), max_size=3)):
        data.pop(key, None)
    for key in draw(st.lists(st.sampled_from(["session_id", "cwd", "transcript_path", "stop_hook_active"]))):
        data[key] = draw(json_values)
    data.update(draw(st.dictionaries(st.text(max_size=10), json_values, max_size=3)))
    return json.dumps(data).encode()


def test_hook_mutated_events_fail_open(bed: HookBed, long_form: bool) -> None:
    @hypothesis_settings(long_form, 200)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        raw = data.draw(mutated_events(bed))
        try:
            parse_input(raw)
        except HookInputError:
            bed.refused(raw)
            return
        outcome = bed.stop(raw)
        if outcome.stdout.startswith("{"):  # only a stop the loop can read continues it
            event = json.loads(raw)
            assert event.get("last_assistant_message") is not None or event.get("transcript_path") == str(
                bed.transcript
            )

    check()


@pytest.mark.parametrize(
    "kind",
    [
        "directory",
        "fifo",
        "symlink to a fifo",
        "/dev/zero",
        "symlink loop",
        "nonexistent",
        "relative",
        "home-relative",
        "nul byte",
        "too long",
    ],
)
def test_hook_unreadable_transcript_allows_the_stop(bed: HookBed, kind: str) -> None:
    """Drop-in mode does what the plugin does (its own message, the loop ends); nothing hangs."""
    session = "t-" + "".join(c if c.isalnum() else "-" for c in kind.strip("/"))
    outcome = bed.stop(bed.event(session, transcript_path=bed.paths[kind]))
    assert outcome.stdout == "" and outcome.stderr.startswith(PLUGIN_MESSAGE + "Failed to extract")
    assert not (bed.project / STATE_FILE).exists()


def test_hook_huge_stdin(bed: HookBed) -> None:
    outcome = bed.stop(bed.event("huge-text", last_assistant_message="x" * (5 << 20)))
    assert json.loads(outcome.stdout)["decision"] == "block"  # 5 MB of text is a turn like any other
    bed.refused(b'{"session_id": "s", "pad": "' + b"x" * MAX_STDIN + b'"}')
    bed.refused(b'{"a":' * 100_000)
    bed.refused(b"[" * 100_000)


def test_hook_as_a_process_never_exits_2_nor_prints_a_traceback(bed: HookBed) -> None:
    """The real process, as Claude Code runs it: binary, over the size limit, not JSON, deep nesting,
    a FIFO as transcript."""
    cases = [
        os.urandom(1 << 20),
        b"{" * (MAX_STDIN + 10),
        b"not json at all",
        b"[" * 200_000,
        bed.event("proc-fifo", transcript_path=str(bed.root / "fifo")),
    ]
    for raw in cases:
        (bed.project / STATE_FILE).write_text(STATE_TEXT)
        with TALLY.timed(60):
            proc = hook_process(raw, cwd=bed.project, home=bed.home.root)
        TALLY.no_traceback(proc.stderr)
        assert proc.returncode == 0 and '"decision"' not in proc.stdout, proc
        assert one_line(proc.stderr) or proc.stderr.startswith(PLUGIN_MESSAGE), proc.stderr
    assert_append_only(bed.journals)
    TALLY.no_new_files(bed.outside, tree(bed.root, skip=[bed.home.root]), [str(STATE_FILE)])


def test_native_loop_recovers_once_a_bad_configuration_is_mended(tmp_path: Path) -> None:
    """A ledger-native loop whose first stop meets a bad ``ralph.toml`` (broken after ``loop start``,
    which refuses a bad one) fails open (one line, an ``error_recorded``); once mended, the next stop
    starts the loop instead of failing forever."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "ralph.toml").write_text("max_iterations = 'soon'\n")
    assert cli_main(["loop", "--project", str(project), "start", "Do it", "--mode", "ledger"]) == 1
    (project / "ralph.toml").write_text("max_iterations = 3\n")
    assert cli_main(["loop", "--project", str(project), "start", "Do it", "--mode", "ledger"]) == 0
    (project / "ralph.toml").write_text("max_iterations = 'soon'\n")
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(
        json.dumps({"type": "assistant", "message": {"id": "m", "content": [{"type": "text", "text": "hi"}]}})
        + "\n"
    )
    home = Home.resolve(tmp_path / "home")
    raw = json.dumps({"session_id": "s1", "transcript_path": str(transcript), "cwd": str(project)}).encode()
    with TALLY.timed(60):
        bad = run(raw, home=home)
    assert bad.stdout == "" and one_line(bad.stderr) and "ralph.toml: max_iterations" in bad.stderr
    (project / "ralph.toml").write_text("max_iterations = 3\n")
    with TALLY.timed(60):
        good = run(raw, home=home)
    assert json.loads(good.stdout)["decision"] == "block", good
    tags = [str(e.__struct_config__.tag) for e in read_new(home.journals / "cc-s1.jsonl", Cursor()).events]
    assert tags[0] == "error_recorded" and "session_started" in tags
    assert tags[-3:] == ["stop_decided", "iteration_started", "checkpoint_created"]  # one append


def test_native_loop_unreadable_transcript_fails_open_with_one_line(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "ralph.toml").write_text("max_iterations = 3\n")
    assert cli_main(["loop", "--project", str(project), "start", "Do it", "--mode", "ledger"]) == 0
    os.mkfifo(tmp_path / "fifo")
    home = Home.resolve(tmp_path / "home")
    raw = json.dumps({"session_id": "s1", "transcript_path": str(tmp_path / "fifo"), "cwd": str(project)})
    with TALLY.timed(30):
        out = run(raw.encode(), home=home)
    assert out.stdout == "" and one_line(out.stderr) and "is not a readable file" in out.stderr
    assert (project / LOOP_FILE).exists()  # kept: the next stop may read its transcript


# --- 2. transcripts -------------------------------------------------------------------------------------


def _message(draw: st.DrawFn) -> Obj:
    blocks: list[Any] = draw(
        st.lists(
            st.one_of(
                st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=30)),
                st.builds(
                    lambda n, p: {"type": "tool_use", "name": n, "input": {"file_path": p}},
                    st.sampled_from(["Edit", "Write", "Bash", "NotebookEdit"]),
                    st.text(max_size=10),
                ),
                st.just({"type": "thinking", "thinking": "hmm"}),
                json_values,
            ),
            max_size=3,
        )
    )
    usage = draw(
        st.one_of(st.none(), st.fixed_dictionaries({"input_tokens": st.integers(0, 10**6)}), json_values)
    )
    return {"id": draw(st.sampled_from(["m1", "m2", "m3", None])), "content": blocks, "usage": usage}


@st.composite
def transcript_lines(draw: st.DrawFn, cap: int) -> bytes:
    """One line of a hostile transcript (without its newline, except for blank ones)."""
    kind = draw(
        st.sampled_from(
            ["assistant", "user", "prompt", "unknown", "garbage", "truncated", "huge", "blank", "shape"]
        )
    )
    if kind == "assistant":
        line: Any = {"type": "assistant", "isSidechain": draw(st.booleans()), "message": _message(draw)}
    elif kind == "user":
        line = {"type": "user", "isMeta": draw(st.booleans()), "message": {"content": draw(json_values)}}
    elif kind == "prompt":
        line = {"type": "user", "message": {"content": draw(st.text(max_size=20))}}
    elif kind == "unknown":
        line = {
            "type": draw(st.text(max_size=15)),
            "sessionId": draw(st.text(max_size=5)),
            "x": draw(json_values),
        }
    elif kind == "garbage":
        return draw(st.binary(max_size=80)).replace(b"\n", b" ")
    elif kind == "truncated":
        whole = json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": "cut"}]}})
        return whole[: draw(st.integers(1, len(whole) - 1))].encode()
    elif kind == "huge":
        return (
            b'{"type": "assistant", "message": {"content": [{"type": "text", "text": "'
            + b"h" * cap
            + b'"}]}}'
        )
    elif kind == "blank":
        return draw(st.sampled_from([b"", b"   ", b"\t"]))
    else:  # the right keys with the wrong shapes
        line = {"type": "assistant", "message": draw(json_values), "isSidechain": draw(json_values)}
    return json.dumps(line).encode()


def test_transcripts_never_raise_and_both_readers_agree(tmp_path: Path, long_form: bool) -> None:
    """Any content: ``scan`` and ``find_last_text`` return, agree on the last text, and ``scan`` ends
    after the last complete line (a partial last line is left for later)."""
    path = tmp_path / "t.jsonl"
    cap = 256

    @hypothesis_settings(long_form, 150)
    @given(st.lists(transcript_lines(cap), max_size=12), st.binary(max_size=40))
    def check(lines: list[bytes], tail: bytes) -> None:
        data = b"".join(line + b"\n" for line in lines) + tail.replace(b"\n", b"")
        path.write_bytes(data)
        with TALLY.timed(10):
            forward = scan(path, max_line_bytes=cap)
            backward = find_last_text(path, max_line_bytes=cap)
        assert forward.end == data.rfind(b"\n") + 1 and forward.lines == data.count(b"\n")
        assert backward.text == forward.last_text
        cut = sum(len(line) + 1 for line in lines[: len(lines) // 2])
        first = scan(path, 0, max_line_bytes=cap)
        path.write_bytes(data[:cut])
        part = scan(path, 0, max_line_bytes=cap)
        path.write_bytes(data)
        rest = scan(path, part.end, max_line_bytes=cap)
        assert part.tool_count + rest.tool_count == first.tool_count  # incremental reads add up

    check()


def test_enormous_and_binary_transcripts(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    last = json.dumps(
        {"type": "assistant", "message": {"id": "z", "content": [{"type": "text", "text": "end"}]}}
    )
    path.write_bytes(b'{"type": "assistant", "x": "' + b"y" * (9 << 20) + b'"}\n' + last.encode() + b"\n")
    with TALLY.timed(30):
        found = scan(path)
        back = find_last_text(path)
    assert (found.bad_lines, found.last_text, back.text) == (1, "end", "end")
    path.write_bytes(os.urandom(2 << 20))
    with TALLY.timed(30):
        binary = scan(path)
        assert find_last_text(path).text == ""
    assert binary.last_text == "" and binary.end <= path.stat().st_size


def test_a_hostile_transcript_through_the_hook(bed: HookBed, long_form: bool) -> None:
    """The hook reads whatever the transcript holds and records how far it read."""

    counter = iter(range(10**9))

    @hypothesis_settings(long_form, 60)
    @given(st.lists(transcript_lines(64), max_size=10), st.booleans())
    def check(lines: list[bytes], again: bool) -> None:
        data = b"".join(line + b"\n" for line in lines)
        session = f"tr-{next(counter)}"
        if again:  # a longer transcript read first: this one is shorter, so it was rewritten
            bed.transcript.write_bytes(data + b"\n" * 1000)
            bed.stop(bed.event(session))
        bed.transcript.write_bytes(data)
        bed.stop(bed.event(session))  # (the bed resets the state file: with ``again``, a new loop)
        last = bed.home.journals / (f"cc-{session}-2.jsonl" if again else f"cc-{session}.jsonl")
        turns = [e for e in read_new(last, Cursor()).events if isinstance(e, E.AgentTurn)]
        assert turns[-1].transcript_offset == len(data)

    check()


FILLER = st.text(alphabet="abcXYZ019 .,:;!?()[]{}'\"/\\_=+*#@$%^&|\n", max_size=40)
"""Text that opens no comment, code span, fence or tag."""


@st.composite
def hidden_promises(draw: st.DrawFn) -> tuple[str, str]:
    """(a promise tag hidden in a comment, fence or inline code, the same tag in plain sight)."""
    word = draw(st.sampled_from([*VOCABULARY, "DONE ALL"]))
    tag = f"<promise>{word}</promise>"
    inner = draw(FILLER).replace("\n\n", "\n")
    hidden = draw(
        st.sampled_from(
            [
                f"<!-- {inner} {tag} -->",
                f"<!--{tag}",
                f"\n```\n{inner}\n{tag}\n```\n",
                f"\n```python\n{tag}\n",
                f"\n~~~~\n{tag}\n{inner}\n~~~~\n",
                f"`{tag}`",
                f"``x {tag} y``",
                f"\n> ```\n> {tag}\n> ```\n",
            ]
        )
    )
    before, after = draw(FILLER), draw(FILLER)
    return before + hidden + after, f"{before}\n{tag}\n{after}"


def test_promises_hidden_in_comments_and_code_are_not_promises(long_form: bool) -> None:
    @hypothesis_settings(long_form, 300)
    @given(hidden_promises())
    def check(texts: tuple[str, str]) -> None:
        hidden, plain = texts
        TALLY.inputs += 1
        assert detect_promises(hidden, custom=["DONE ALL"]).promises == []
        assert len(detect_promises(plain, custom=["DONE ALL"]).promises) == 1

    check()


def test_a_promise_split_across_content_blocks_is_no_promise(bed: HookBed) -> None:
    blocks = [{"type": "text", "text": "<promise>DO"}, {"type": "text", "text": "NE</promise>"}]
    line = {"type": "assistant", "message": {"id": "m9", "content": blocks}}
    bed.transcript.write_text(
        json.dumps({"type": "user", "message": {"content": "go"}}) + "\n" + json.dumps(line) + "\n"
    )
    text = scan(bed.transcript).last_text
    assert "DONE" not in [p.word for p in detect_promises(text, custom=["DONE"]).promises]
    outcome = bed.stop(bed.event("split-promise"))
    assert json.loads(outcome.stdout)["decision"] == "block"  # not completed


def test_a_hidden_promise_does_not_complete_an_engine_loop(engine: Engine) -> None:
    from ledger.loop.config.loop_config import LoopConfig

    engine.start("hidden", LoopConfig(task="t"))
    result = validate(
        engine,
        "hidden",
        "Still work to do.\n```\n<promise>COMPLETE</promise>\n```\n<!-- <promise>COMPLETE</promise> -->",
    )
    assert (result.signal, result.detected_promise) == ("CONTINUE", "")
    evs = read_new(engine.journal("hidden").path, Cursor()).events
    assert not any(isinstance(e, E.PromiseDetected) for e in evs)


# --- 3. journal lines ------------------------------------------------------------------------------------

GOOD_KINDS = ("good", "future_fields", "no_ts", "no_iteration")
BAD_KINDS = (
    "garbage",
    "wrong_tag",
    "no_session",
    "no_type",
    "no_seq",
    "other_session",
    "mistyped",
    "not_object",
)


def _event_dict(sid: str, seq: int, n: int) -> Obj:
    events: list[E.Event] = [
        E.AgentTurn(session_id=sid, seq=seq, iteration=1, output_excerpt=f"turn {n}", tool_count=n),
        E.StopDecided(session_id=sid, seq=seq, iteration=1, decision="allow", reason="r"),
        E.ErrorRecorded(session_id=sid, seq=seq, component="hook", message="m"),
    ]
    event = events[n % len(events)]
    return dict(json.loads(E.encode(msgspec.structs.replace(event, ts=E.EPOCH.replace(year=2026)))))


@st.composite
def hostile_journal(draw: st.DrawFn, sid: str) -> tuple[list[bytes], int, int, bytes]:
    """(lines, good lines, bad lines, torn tail) for a journal that already holds seq 1..3. Blank
    lines hold no event: they may be skipped or reported ("empty line"), so neither count has them."""
    seq = 3
    lines: list[bytes] = []
    good = bad = 0
    for n, kind in enumerate(draw(st.lists(st.sampled_from(GOOD_KINDS + BAD_KINDS), max_size=12))):
        d = _event_dict(sid, seq + 1, n)
        if kind in GOOD_KINDS:
            seq, good = seq + 1, good + 1
            if kind == "future_fields":
                d.update(
                    {
                        f"future_{k}": v
                        for k, v in draw(
                            st.dictionaries(st.text(max_size=6), json_values, max_size=3)
                        ).items()
                    }
                )
            elif kind != "good":
                d.pop(kind.removeprefix("no_"))
            lines.append(json.dumps(d).encode())
            continue
        bad += 1
        if kind == "garbage":
            raw = draw(st.binary(max_size=60)).replace(b"\n", b"")
            bad -= not raw.strip()
            lines.append(raw)
            continue
        if kind == "wrong_tag":
            d["type"] = draw(st.text(max_size=12).filter(lambda t: t not in E.TAGS))
        elif kind in ("no_session", "no_type", "no_seq"):
            d.pop({"no_session": "session_id", "no_type": "type", "no_seq": "seq"}[kind])
        elif kind == "other_session":
            d["session_id"] = sid + "-other"
        elif kind == "mistyped":
            d[draw(st.sampled_from(["seq", "iteration", "ts", "session_id"]))] = draw(
                st.sampled_from(["x", [1], {"a": 1}])
            )
        else:
            lines.append(json.dumps(draw(st.one_of(st.lists(json_values, max_size=2), scalars))).encode())
            continue
        lines.append(json.dumps(d).encode())
    whole = json.dumps(_event_dict(sid, 999, 0))
    tail = whole[: draw(st.integers(0, len(whole) - 1))].encode() if draw(st.booleans()) else b""
    return lines, good, bad, tail


def test_hostile_journal_lines_are_reported_never_lost(tmp_path: Path, long_form: bool) -> None:
    """Garbage, wrong tags, newer fields and missing envelope fields: every complete line is either
    an event in the ledger or a reported bad line, the events recorded before are all there, and an
    append after the damage still lands."""
    home = Home.resolve(tmp_path / "home")
    ledger = Ledger.memory(home)
    counter = iter(range(10**9))

    @hypothesis_settings(long_form, 40)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        sid = f"j{next(counter):09d}"  # one length: the drawn cut points stay the same
        journal = Journal.for_session(home.journals, sid, fsync=False)
        before = journal.append(*(E.AgentTurn(session_id=sid, output_excerpt=f"kept {i}") for i in range(3)))
        lines, good, bad, tail = data.draw(hostile_journal(sid))
        with journal.path.open("ab") as f:
            f.write(b"".join(line + b"\n" for line in lines) + tail)
        after = journal.append(E.StopDecided(session_id=sid, decision="allow", reason="after the damage"))
        with TALLY.timed(30):
            report = ledger.ingest([journal.path])
        TALLY.inputs += len(lines)
        stored = ledger.rows("SELECT seq, output_excerpt, reason FROM events WHERE session_id = ?", [sid])
        reported = ledger.rows(
            "SELECT line_no, reason FROM ingest_errors WHERE journal = ? AND reason NOT LIKE 'empty line%'",
            [journal.path.name],
        )
        total = sum(1 for line in journal.path.read_bytes().split(b"\n")[:-1] if line.strip())
        assert len(stored) + len(reported) == total
        assert len([b for b in report.bad_lines if not b.reason.startswith("empty line")]) == len(reported)
        assert {e.seq for e in before} <= {r["seq"] for r in stored}
        landed = any(r["reason"] == "after the damage" for r in stored)
        assert len(stored) == 3 + good + landed and len(reported) == bad + bool(tail) + (not landed)
        assert landed or "seq" in reported[-1]["reason"], after  # reported, never silently lost
        assert all(one_line(r["reason"]) for r in reported)
        assert ledger.ingest([journal.path]).events == 0  # idempotent

    check()


# --- 4. configuration ------------------------------------------------------------------------------------


def toml_value(value: Any) -> str:
    """``value`` as a TOML value (inline tables and arrays)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


toml_values: st.SearchStrategy[Any] = st.recursive(
    st.one_of(
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=20),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=8,
)
RULE_KEYS = [
    "name",
    "type",
    "argv",
    "shell",
    "cwd",
    "env",
    "timeout_s",
    "cadence",
    "pattern",
    "target",
    "flags",
    "path",
    "threshold",
    "must_exist",
    "enabled",
    "bogus",
]
TOP_KEYS = [
    "max_iterations",
    "hooks",
    "completion_promises",
    "require_passing_validation",
    "agent",
    "task",
    "max_iteration",
]


@st.composite
def configurations(draw: st.DrawFn) -> Obj:
    """A configuration table: real keys with right or wrong values, unknown keys, bad rules, guards."""
    rule_type = st.sampled_from(["command", "content_pattern", "coverage", "file_exists", "nope"])
    rule = st.dictionaries(
        st.one_of(st.sampled_from(RULE_KEYS), st.text(max_size=6)), toml_values, max_size=5
    ).map(lambda d: {"name": "r", **d})
    rules = st.lists(st.tuples(rule, rule_type).map(lambda t: {**t[0], "type": t[1]}), max_size=3)
    guards = st.dictionaries(
        st.one_of(
            st.sampled_from(["circuit_breaker", "thrashing", "time_limit", "token_budget"]),
            st.text(max_size=6),
        ),
        st.dictionaries(
            st.one_of(
                st.sampled_from(["enabled", "threshold", "min_iterations", "seconds", "limit"]),
                st.text(max_size=6),
            ),
            toml_values,
            max_size=2,
        ),
        max_size=2,
    )
    table: Obj = draw(
        st.dictionaries(st.one_of(st.sampled_from(TOP_KEYS), st.text(max_size=8)), toml_values, max_size=3)
    )
    if draw(st.booleans()):
        table["rules"] = draw(rules)
    if draw(st.booleans()):
        table["guards"] = draw(guards)
    return table


def check_config_outcome(path: Path, load: Any) -> None:
    """``load()`` gives a configuration whose rules decode, or one ``ConfigError`` line naming ``path``."""
    with TALLY.timed(10):
        try:
            config = load()
        except ConfigError as exc:
            message = str(exc)
            assert one_line(message) and message.startswith(str(path)), message
            return
    parse_rules(config.rules, "loaded")  # what loads also starts a loop


def test_hostile_configuration_files(tmp_path: Path, long_form: bool) -> None:
    ralph, pyproject = tmp_path / "ralph.toml", tmp_path / "pyproject.toml"

    unknown_keys = st.dictionaries(st.text(min_size=1, max_size=6), st.integers(0, 9), min_size=1, max_size=2)
    rule_keys = unknown_keys.map(
        lambda d: {"rules": [{"name": "r", "type": "file_exists", "path": "p", **d}]}
    )
    guard_keys = unknown_keys.map(lambda d: {"guards": {"thrashing": d}})

    @hypothesis_settings(long_form, 150)
    @given(st.one_of(configurations(), unknown_keys, rule_keys, guard_keys))
    def check(table: Obj) -> None:
        lines = [f"{json.dumps(k)} = {toml_value(v)}" for k, v in table.items()]
        ralph.write_text("\n".join(lines) + "\n")
        check_config_outcome(ralph, lambda: load_toml(ralph))
        pyproject.write_text("[tool.ralph]\n" + "\n".join(lines) + "\n")
        check_config_outcome(pyproject, lambda: load_toml(pyproject))

    check()


def test_broken_configuration_text(tmp_path: Path, long_form: bool) -> None:
    ralph, pyproject = tmp_path / "ralph.toml", tmp_path / "pyproject.toml"

    @hypothesis_settings(long_form, 100)
    @given(st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
    def check(raw: bytes) -> None:
        for path in (ralph, pyproject):
            path.write_bytes(raw)
            check_config_outcome(path, lambda p=path: load_toml(p))

    check()
    for text in ("tool = 1\n", "[tool]\nralph = 'x'\n", "[tool.ralph]\nrules = 'x'\n"):
        pyproject.write_text(text)
        check_config_outcome(pyproject, lambda: load_toml(pyproject))


def test_bad_rules_are_one_line_through_the_cli(tmp_path: Path) -> None:
    """``ralph-ledger run`` meets the bad rule when it reads ``ralph.toml``: one line, no traceback."""
    (tmp_path / "ralph.toml").write_text(
        "[[rules]]\nname = 't'\ntype = 'command'\nargv = ['true']\ntimeout_s = 'soon'\n"
    )
    (tmp_path / "prompt.txt").write_text("do it\n")
    with TALLY.timed(120):
        proc = cli_process(
            "run", "--prompt", "prompt.txt", "--", "true", cwd=tmp_path, home=tmp_path / "home"
        )
    TALLY.no_traceback(proc.stderr)
    assert proc.returncode == 1 and one_line(proc.stderr)
    assert proc.stderr.strip().endswith("ralph.toml: rules[0].timeout_s: expected a number, got 'soon'")


agent_blocks: st.SearchStrategy[Any] = st.dictionaries(
    st.sampled_from(
        ["enabled", "maxIterations", "completionPromises", "validationRules", "max_iterations", "x"]
    ),
    st.one_of(json_values, st.lists(st.text(max_size=8), max_size=3)),
    max_size=4,
)


def test_hostile_agent_frontmatter(tmp_path: Path, long_form: bool) -> None:
    agent = tmp_path / "agent.md"
    ralph = tmp_path / "ralph.toml"
    ralph.write_text("[[rules]]\nname = 'tests'\ntype = 'file_exists'\npath = 'x'\n")
    base = load_toml(ralph)

    @hypothesis_settings(long_form, 100)
    @given(
        st.one_of(
            st.text(max_size=200).map(lambda t: f"---\n{t}\n---\n"),
            st.builds(lambda name, block: {"name": name, "iteration": block}, json_values, agent_blocks).map(
                lambda d: "---\n" + yaml.safe_dump(d) + "---\n# agent\n"
            ),
        )
    )
    def check(text: str) -> None:
        agent.write_text(text)
        check_config_outcome(agent, lambda: load_agent(agent, base))

    check()


def test_yaml_alias_bomb_in_frontmatter_is_refused_in_time(tmp_path: Path) -> None:
    levels = ["a: &a [" + ", ".join(['"lol"'] * 9) + "]"]
    for prev, cur in zip("abcdefgh", "bcdefghi", strict=True):
        levels.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]")
    for tail in (
        "iteration:\n  completionPromises: [*i]\n",
        "iteration:\n  maxIterations: *i\n",
        "name: *i\n",
    ):
        path = tmp_path / "bomb.md"
        path.write_text("---\n" + "\n".join(levels) + "\n" + tail + "---\n")
        with TALLY.timed(10), pytest.raises(ConfigError) as err:
            load_agent(path)
        assert one_line(str(err.value)) and len(str(err.value)) < 400


# --- 5. SQL in the read-only surface ------------------------------------------------------------------------


class SqlBed:
    """A file-backed ledger with events (the TUI's kind of connection), secret files next to it, and
    the places a write would land."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.marker = "TOPSECRET-7f3a9c"
        (root / "secret.csv").write_text(f"{self.marker}\n{self.marker}\n")
        (root / "secret.txt").write_text(self.marker)
        (root / "secret.json").write_text(json.dumps({"k": self.marker}) + "\n")
        duckdb.sql(f"COPY (SELECT '{self.marker}' AS k) TO '{root / 'secret.parquet'}' (FORMAT parquet)")
        self.home = Home.resolve(root / "home")
        Journal.for_session(self.home.journals, "s1", fsync=False, clock=ticking()).append(
            *(E.AgentTurn(session_id="s1", iteration=i, output_excerpt=f"turn {i}") for i in range(1, 4))
        )
        self.ledger = Ledger.open(self.home)
        self.ledger.ingest()
        lock_down(self.ledger.con, [self.home.tmp], final=False)  # as a Monitor (the TUI's) has it
        self.before = fingerprint(self.ledger.con)
        self.outside = tree(root, skip=[self.home.root])
        self.locked = Ledger.memory(self.home)  # the CLI's kind: locked down at its first query
        self.locked.ingest()
        lock_down(self.locked.con)
        self.locked_before = fingerprint(self.locked.con)

    def query(self, sql: str, *, lock: bool = False) -> QueryResult | ReadOnlyViolation:
        """Run ``sql`` as the TUI (or, ``lock``, the CLI) would; checks what every query must hold."""
        con = (self.locked if lock else self.ledger).con
        with TALLY.timed(20), interrupting(con, 15):
            try:
                result: QueryResult | ReadOnlyViolation = run_readonly(con, sql, lock=lock)
            except ReadOnlyViolation as exc:
                result = exc
        text = str(result) if isinstance(result, ReadOnlyViolation) else repr(result.rows)
        TALLY.no_traceback(text)
        assert self.marker not in text, f"{sql!r} read a file: {text[:300]}"
        if isinstance(result, ReadOnlyViolation):
            assert one_line(str(result)), str(result)
        TALLY.no_new_files(self.outside, tree(self.root, skip=[self.home.root]))
        assert fingerprint(self.ledger.con) == self.before, sql
        assert fingerprint(self.locked.con) == self.locked_before, sql
        return result


@pytest.fixture
def sql_bed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SqlBed]:
    monkeypatch.chdir(tmp_path)  # relative file names resolve next to the secrets
    bed = SqlBed(tmp_path)
    yield bed
    bed.ledger.close()
    bed.locked.close()


SOURCES = [
    "'{p}'",
    '"{p}"',
    "read_csv('{p}')",
    "read_csv_auto('{p}', header = false)",
    "read_csv(['{p}'])",
    "read_text('{p}')",
    "read_blob('{p}')",
    "read_json_auto('{p}')",
    "read_ndjson_objects('{p}')",
    "read_parquet('{p}')",
    "parquet_scan('{p}')",
    "parquet_metadata('{p}')",
    "sniff_csv('{p}')",
    "glob('{d}/*')",
    "read_text('{d}/secret.*')",
    "query('FROM read_text(''{p}'')')",
    "query_table('{p}')",
]
WRAPPERS = [
    "SELECT * FROM {src}",
    "FROM {src}",
    "SELECT * FROM events, {src}",
    "SELECT * FROM events JOIN {src} ON true",
    "SELECT * FROM events WHERE seq IN (SELECT 1 FROM {src})",
    "SELECT (SELECT count(*) FROM {src})",
    "WITH x AS (SELECT * FROM {src}) SELECT * FROM x",
    "WITH x AS MATERIALIZED (FROM {src}) FROM x",
    "SELECT * FROM (FROM {src}) t",
    "SELECT * FROM events UNION ALL BY NAME FROM {src}",
    "SELECT * FROM events, LATERAL (FROM {src})",
    "SELECT max(seq) OVER (PARTITION BY (SELECT count(*) FROM {src})) FROM events",
    "SELECT max(seq) OVER w FROM events WINDOW w AS (ORDER BY (SELECT count(*) FROM {src}))",
    "SELECT * FROM events ORDER BY (SELECT count(*) FROM {src})",
    "SELECT * FROM events QUALIFY (SELECT count(*) FROM {src}) > 0",
    "SELECT list_transform([1], x -> (SELECT count(*) FROM {src}))",
    "DESCRIBE {src}",
    "SUMMARIZE {src}",
    "SELECT * FROM (DESCRIBE {src})",
    "PIVOT {src} ON 1 USING count(*)",
    "SELECT * FROM (SELECT 1) a, (FROM {src}) b WHERE EXISTS (WITH {alias} AS (SELECT 1) FROM {alias})",
    "SELECT * FROM (WITH {alias} AS (SELECT 1) SELECT 1), {src}",
    "SELECT * FROM {src} WHERE EXISTS (WITH {alias} AS (SELECT 1) FROM {alias})",
    "WITH {alias} AS (FROM {src}) FROM {alias}",
    "WITH RECURSIVE r AS (SELECT 1 AS x UNION ALL SELECT x + 1 FROM r, {src} WHERE x < 2) FROM r",
]
PREFIXES = ["", "EXPLAIN ", "EXPLAIN ANALYZE ", "EXPLAIN (FORMAT JSON) ", "explain\n", "/* c */ "]
WRITES = [
    "COPY (SELECT 1) TO '{out}'",
    "COPY events TO '{out}' (FORMAT parquet)",
    "EXPORT DATABASE '{d}/exported'",
    "IMPORT DATABASE '{d}'",
    "ATTACH '{d}/attached.db' AS a",
    "ATTACH '{d}/attached.db' AS a; CREATE TABLE a.t AS SELECT 1",
    "INSTALL httpfs",
    "LOAD httpfs",
    "LOAD '{d}/evil.duckdb_extension'",
    "FORCE INSTALL json",
    "SET enable_external_access = true",
    "RESET enable_external_access",
    "SET threads = 1",
    "PRAGMA enable_profiling = 'json'",
    "PRAGMA profile_output = '{out}'",
    "CALL pragma_version()",
    "CREATE TABLE x AS SELECT 1",
    "CREATE VIEW v AS SELECT 1",
    "CREATE MACRO m() AS 1",
    "DROP TABLE events",
    "DELETE FROM events",
    "UPDATE ledger_meta SET value = 'x'",
    "INSERT INTO ledger_meta VALUES ('k', 'v')",
    "ALTER TABLE events ADD COLUMN x INT",
    "TRUNCATE events",
    "CHECKPOINT",
    "VACUUM",
    "BEGIN TRANSACTION",
    "PREPARE p AS SELECT 1",
    "SET VARIABLE v = 1",
    "CREATE SECRET s (TYPE s3, KEY_ID 'k', SECRET 's')",
    "DETACH ledger",
    "USE memory",
    "SELECT 1; DROP TABLE events",
    "SELECT 1; COPY events TO '{out}'",
    "EXPLAIN ANALYZE COPY (SELECT 1) TO '{out}'",
    "EXPLAIN COPY (SELECT 1) TO '{out}'",
    "WITH d AS (DELETE FROM events RETURNING *) SELECT * FROM d",
    "WITH d AS (UPDATE ledger_meta SET value = 'x' RETURNING *) SELECT * FROM d",
    "WITH d AS (INSERT INTO ledger_meta VALUES ('k', 'v') RETURNING *) SELECT * FROM d",
    "WITH d AS (DELETE FROM ingest_positions RETURNING *) SELECT count(*) FROM events",
    "WITH d AS (COPY events TO '{out}') SELECT 1",
    "SELECT * FROM events WHERE EXISTS (WITH d AS (COPY (SELECT 1) TO '{out}') SELECT 1)",
    "EXPLAIN ANALYZE WITH d AS (COPY events TO '{out}') SELECT 1",
    "SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT 1'))",
    "SELECT * FROM enable_logging()",
    "SELECT * FROM checkpoint()",
]


@st.composite
def hostile_queries(draw: st.DrawFn, root: Path) -> str:
    """A query that reads a file (in any disguise) or writes something."""
    names = ["secret.csv", "secret.txt", "secret.json", "secret.parquet"]
    path = draw(st.sampled_from([*names, *(str(root / n) for n in names), "/etc/passwd"]))
    fields = {"p": path, "d": str(root), "out": str(root / draw(st.sampled_from(["out.csv", "out.parquet"])))}
    if draw(st.integers(0, 3)) == 0:
        sql = draw(st.sampled_from(WRITES)).format(**fields)
    else:
        src = draw(st.sampled_from(SOURCES)).format(**fields)
        template = draw(st.sampled_from(WRAPPERS))
        sql = template.format(src=src, alias=json.dumps(path))
        if draw(st.booleans()):
            sql = f"({sql})"
        sql = draw(st.sampled_from(PREFIXES)) + sql
    spacing = draw(st.sampled_from([" ", "\n", "\t", "  "]))
    sql = re.sub(r"(?<=[A-Z]) (?=[A-Z(*])", spacing, sql) if spacing != " " else sql
    return sql + draw(st.sampled_from(["", ";", " -- trailing", "\n;\n", "; SELECT 1"]))


def test_hostile_sql_is_refused_reads_no_file_and_writes_nothing(sql_bed: SqlBed, long_form: bool) -> None:
    @hypothesis_settings(long_form, 250)
    @given(hostile_queries(sql_bed.root), st.booleans())
    def check(sql: str, lock: bool) -> None:
        result = sql_bed.query(sql, lock=lock)
        assert isinstance(result, ReadOnlyViolation), f"{sql!r} ran: {result}"

    check()


def test_every_listed_write_and_file_read_is_refused(sql_bed: SqlBed) -> None:
    fields = {
        "p": str(sql_bed.root / "secret.csv"),
        "d": str(sql_bed.root),
        "out": str(sql_bed.root / "o.csv"),
    }
    queries = [w.format(**fields) for w in WRITES]
    queries += [f"SELECT * FROM {s.format(**fields)}" for s in SOURCES]
    queries += ["EXPLAIN (SELECT * FROM 'secret.csv')", "SELECT * FROM '/etc/passwd'"]
    queries += ["EXPLAIN (SELECT * FROM 'secret.csv' WHERE 'a' <> ') SELECT 1 --')"]
    queries += ["SELECT * FROM " + "(SELECT * FROM " * 1500 + "events" + ")" * 1500]
    for sql in queries:
        for lock in (False, True):
            assert isinstance(sql_bed.query(sql, lock=lock), ReadOnlyViolation), sql
    assert not (sql_bed.root / "o.csv").exists() and not (sql_bed.root / "attached.db").exists()


def test_hostile_sql_through_the_cli(sql_bed: SqlBed) -> None:
    """``ralph-ledger sql``: exit 1, one line, no traceback, nothing written."""
    sql_bed.ledger.close()
    out = sql_bed.root / "cli-out.csv"
    for sql in (
        f"COPY events TO '{out}'",
        "SELECT * FROM read_text('secret.txt')",
        "ATTACH 'x.db'",
        "INSTALL httpfs",
    ):
        with TALLY.timed(120):
            proc = cli_process("sql", sql, cwd=sql_bed.root, home=sql_bed.home.root)
        TALLY.no_traceback(proc.stderr)
        assert (
            proc.returncode == 1 and one_line(proc.stderr) and sql_bed.marker not in proc.stdout + proc.stderr
        )
        assert proc.stderr.startswith("ralph-ledger: "), proc.stderr
    assert not out.exists() and not (sql_bed.root / "x.db").exists()
    sql_bed.ledger = Ledger.open(sql_bed.home)
