"""Tests of ledger.drivers.claude_code.transcript.scan: forward scans and the backward search for the last
text."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.drivers.claude_code.transcript import lines
from ledger.drivers.claude_code.transcript.last_text import find_last_text, last_text
from ledger.drivers.claude_code.transcript.lines import MAX_LINE_BYTES
from ledger.drivers.claude_code.transcript.scan import Scan, add_usage, scan
from ledger.events import TokenUsage
from tests.transcripts import FIXTURE_FILES, FIXTURE_PARAMS, FIXTURES

ROOT = Path(__file__).resolve().parents[2]
Obj = dict[str, Any]


# --- building transcripts -------------------------------------------------------------------------------


def jl(*objs: Obj | bytes) -> bytes:
    """JSON Lines for ``objs`` (bytes are written as they are)."""
    return b"".join(o if isinstance(o, bytes) else json.dumps(o).encode() + b"\n" for o in objs)


def write(path: Path, *objs: Obj | bytes) -> Path:
    path.write_bytes(jl(*objs))
    return path


def usage(i: int = 1, o: int = 2, cc: int = 3, cr: int = 4) -> Obj:
    return {
        "input_tokens": i,
        "output_tokens": o,
        "cache_creation_input_tokens": cc,
        "cache_read_input_tokens": cr,
        "service_tier": "standard",
    }


def text(t: str) -> Obj:
    return {"type": "text", "text": t}


def thinking(t: str = "hmm") -> Obj:
    return {"type": "thinking", "thinking": t, "signature": "sig"}


def tool(name: str, **tool_input: Any) -> Obj:
    return {"type": "tool_use", "id": f"toolu_{name}", "name": name, "input": tool_input}


def assistant(
    mid: str, block: Obj, *, use: Obj | None = None, stop: str | None = None, side: bool = False
) -> Obj:
    message = {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "content": [block],
        "stop_reason": stop,
        "usage": use if use is not None else usage(),
    }
    return {"type": "assistant", "sessionId": "s1", "isSidechain": side, "message": message}


def prompt(t: str, *, meta: bool = False, side: bool = False) -> Obj:
    line: Obj = {"type": "user", "sessionId": "s1", "message": {"role": "user", "content": t}}
    return line | ({"isMeta": True} if meta else {}) | ({"isSidechain": True} if side else {})


def result(tool_id: str = "toolu_x") -> Obj:
    block = {"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}
    return {"type": "user", "sessionId": "s1", "message": {"role": "user", "content": [block]}}


def feedback(t: str = "keep going") -> Obj:
    return prompt(f"Stop hook feedback:\n{t}", meta=True)


# --- an independent oracle (stdlib json) --------------------------------------------------------------


def complete_lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")[:-1]


def json_objects(data: bytes) -> Iterator[Obj]:
    for raw in complete_lines(data):
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield obj


def oracle_tokens(data: bytes) -> tuple[TokenUsage, int]:
    """Usage summed over message ids, each with its last line's usage; and the number of ids."""
    last: dict[str, Any] = {}
    for obj in json_objects(data):
        message = obj.get("message")
        if obj.get("type") == "assistant" and isinstance(message, dict) and message.get("id"):
            last[message["id"]] = message.get("usage")
    total = TokenUsage()
    for u in last.values():
        if isinstance(u, dict):
            total = add_usage(
                total,
                TokenUsage(
                    input=u.get("input_tokens") or 0,
                    output=u.get("output_tokens") or 0,
                    cache_creation=u.get("cache_creation_input_tokens") or 0,
                    cache_read=u.get("cache_read_input_tokens") or 0,
                ),
            )
    return total, len(last)


def oracle_tools(data: bytes) -> tuple[int, list[str]]:
    count, files = 0, []
    for obj in json_objects(data):
        if obj.get("type") != "assistant":
            continue
        for block in obj["message"]["content"]:
            if block.get("type") == "tool_use":
                count += 1
                key = "notebook_path" if block["name"] == "NotebookEdit" else "file_path"
                path = block["input"].get(key)
                if block["name"] in {"Edit", "Write", "MultiEdit", "NotebookEdit"} and path not in files:
                    files.append(path)
    return count, files


def prompt_offsets(data: bytes) -> list[int]:
    """Byte offsets of the user lines whose content is a string (turn boundaries)."""
    offsets, pos = [], 0
    for raw in complete_lines(data):
        obj = json.loads(raw)
        if obj.get("type") == "user" and isinstance(obj["message"]["content"], str):
            offsets.append(pos)
        pos += len(raw) + 1
    return offsets


# --- the shared Claude Code transcripts -------------------------------------------------------------


@pytest.mark.parametrize("path", FIXTURE_PARAMS)
def test_fixture_totals_match_the_json_oracle(path: Path) -> None:
    data = path.read_bytes()
    s = scan(path)
    tokens, messages = oracle_tokens(data)
    assert s.tokens == tokens
    assert s.tokens.output > 0
    assert s.messages == messages
    assert (s.tool_count, s.files_modified) == oracle_tools(data)
    assert s.end == len(data)
    assert s.lines == data.count(b"\n")
    assert s.bad_lines == 0
    assert s.session_id == [o["sessionId"] for o in json_objects(data) if o.get("sessionId")][-1]
    models = [
        o["message"]["model"]
        for o in json_objects(data)
        if o.get("type") == "assistant" and not o.get("isSidechain") and o["message"].get("model")
    ]
    assert s.model == models[-1] and s.model.startswith("claude-")
    usage = [
        o["message"]["usage"]
        for o in json_objects(data)
        if o.get("type") == "assistant" and not o.get("isSidechain") and o["message"].get("usage")
    ][-1]
    context = sum(
        usage.get(k) or 0 for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )
    assert s.context_tokens == context > 0


@pytest.mark.parametrize("path", FIXTURE_PARAMS)
def test_fixture_scanned_in_two_pieces_at_a_turn_boundary(path: Path, tmp_path: Path) -> None:
    data = path.read_bytes()
    whole = scan(path)
    for mid in prompt_offsets(data):
        head = tmp_path / "head.jsonl"
        head.write_bytes(data[:mid])
        first = scan(head)
        second = scan(path, start=first.end)
        assert first.end == mid and second.start == mid and second.end == whole.end
        assert add_usage(first.tokens, second.tokens) == whole.tokens
        assert first.messages + second.messages == whole.messages
        assert first.tool_count + second.tool_count == whole.tool_count
        assert list(dict.fromkeys(first.files_modified + second.files_modified)) == whole.files_modified
        assert first.lines + second.lines == whole.lines
        assert second.last_text == whole.last_text


def assistant_line_ends(data: bytes) -> list[int]:
    """The byte offsets just after each assistant line: where a stop may have read up to."""
    ends, pos = [], 0
    for raw in complete_lines(data):
        pos += len(raw) + 1
        if json.loads(raw).get("type") == "assistant":
            ends.append(pos)
    return ends


@pytest.mark.parametrize("path", FIXTURE_PARAMS)
def test_fixture_split_at_every_assistant_line_counts_each_message_once(path: Path, tmp_path: Path) -> None:
    """Two stops, the first seeing the transcript up to an assistant line (maybe mid-message), the
    second the rest: their tokens add up to one stop's over the whole file, at every boundary."""
    data = path.read_bytes()
    whole = scan(path)
    ends = assistant_line_ends(data)
    inside = [e for e, nxt in itertools.pairwise(ends) if _message_id(data, e) == _message_id(data, nxt)]
    assert inside, "the file should have messages split over several lines"
    head = tmp_path / "growing.jsonl"
    for cut in ends:
        head.write_bytes(data[:cut])
        first = scan(head)
        with head.open("ab") as f:
            f.write(data[cut:])
        second = scan(head, start=first.end)
        assert add_usage(first.tokens, second.tokens) == whole.tokens, cut


def _message_id(data: bytes, end: int) -> str:
    """The message id of the assistant line ending at ``end``."""
    line = data[: end - 1].rsplit(b"\n", 1)[-1]
    return str(json.loads(line)["message"]["id"])


def test_a_message_split_between_two_scans_is_counted_once_with_its_final_usage(tmp_path: Path) -> None:
    path = write(
        tmp_path / "t.jsonl",
        prompt("go"),
        assistant("m1", thinking(), use=usage(100, 1, 5, 7)),
        {"type": "progress", "data": {}},
    )
    first = scan(path)
    assert first.tokens == TokenUsage(input=100, output=1, cache_creation=5, cache_read=7)
    with path.open("ab") as f:
        f.write(jl(assistant("m1", text("done"), use=usage(100, 40, 5, 7)), assistant("m2", text("x"))))
    second = scan(path, start=first.end)
    assert second.tokens == TokenUsage(input=1, output=41, cache_creation=3, cache_read=4)
    assert add_usage(first.tokens, second.tokens) == scan(path).tokens


def test_a_new_message_after_a_scan_is_not_reduced(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", prompt("go"), assistant("m1", text("a"), use=usage(10, 1, 0, 0)))
    first = scan(path)
    with path.open("ab") as f:
        f.write(jl(result(), assistant("m2", text("b"), use=usage(20, 2, 0, 0))))
    assert scan(path, start=first.end).tokens == TokenUsage(input=20, output=2)


@pytest.mark.parametrize("path", FIXTURE_PARAMS)
def test_fixture_last_text_agrees_with_scan(path: Path, tmp_path: Path) -> None:
    data = path.read_bytes()
    ends = [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    step = max(1, len(ends) // 60)
    copy = tmp_path / "prefix.jsonl"
    for end in [*ends[::step], ends[-1]]:
        copy.write_bytes(data[:end])
        found = find_last_text(copy)
        assert found.text == scan(copy).last_text, end
        assert not found.exhausted
    assert last_text(path) == scan(path).last_text


def test_fixture_last_texts() -> None:
    """Spot checks: text blocks around thinking; a last turn with only blank text; Claude Code 1.x."""
    if not FIXTURE_FILES:
        pytest.skip(f"no transcripts in {FIXTURES}")
    assert last_text(FIXTURES / "spotter-short.jsonl").startswith("Let me check the project structure")
    assert last_text(FIXTURES / "spotter-tool_heavy.jsonl") == ""
    big = FIXTURES / "ccv-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
    assert last_text(big).startswith("CLAUDE.md has been created")
    assert find_last_text(big).lines_decoded <= 5


# --- hand-made transcripts --------------------------------------------------------------------------------


def test_tools_files_tokens_and_stop_reason(tmp_path: Path) -> None:
    path = write(
        tmp_path / "t.jsonl",
        prompt("edit things"),
        assistant("m1", thinking(), use=usage(1, 1, 1, 1)),
        assistant("m1", tool("Edit", file_path="/a.py", old_string="x", new_string="y"), use=usage(1, 5)),
        assistant("m1", tool("Read", file_path="/r.py")),  # the last line of m1: its usage counts
        result(),
        assistant("m2", tool("Write", file_path="/b.py", content="...")),
        assistant("m2", tool("MultiEdit", file_path="/a.py", edits=[])),
        assistant("m2", tool("NotebookEdit", notebook_path="/n.ipynb", new_source="")),
        assistant("m2", tool("Bash", command="ls"), stop="tool_use"),
        result(),
        assistant("s9", tool("Write", file_path="/side.py"), side=True, stop="end_turn"),
        assistant("m3", text("All done."), use=usage(10, 20, 30, 40)),
    )
    s = scan(path)
    assert s.tool_count == 7
    assert s.files_modified == ["/a.py", "/b.py", "/n.ipynb", "/side.py"]
    assert s.tokens == TokenUsage(input=13, output=26, cache_creation=39, cache_read=52)
    assert s.messages == 4
    assert s.stop_reason == "tool_use"  # sidechain lines do not count; later null ones neither
    assert s.last_text == "All done."
    assert (s.lines, s.bad_lines, s.session_id) == (12, 0, "s1")


def test_last_text_skips_trailing_tool_use_and_thinking(tmp_path: Path) -> None:
    path = write(
        tmp_path / "t.jsonl",
        prompt("go"),
        assistant("m1", text("Looking around.")),
        assistant("m1", tool("Bash", command="ls")),
        result(),
        assistant("m2", text("\n\n")),
        assistant("m2", text("  First part. ")),
        assistant("m2", thinking()),
        assistant("m2", text("Second part.")),
        assistant("m2", tool("Bash", command="make")),
        result(),
        assistant("m3", thinking()),
        assistant("m3", tool("Read", file_path="/x")),
        result(),
        assistant("m4", tool("Bash", command="true")),
    )
    found = find_last_text(path)
    assert found.text == "First part.\n\nSecond part." == scan(path).last_text
    assert found.lines_decoded == 12  # back to the last line of m1, which ends the search


def test_last_text_is_of_the_current_turn(tmp_path: Path) -> None:
    path = write(
        tmp_path / "t.jsonl",
        prompt("one"),
        assistant("m1", text("Answer one.")),
        prompt("two"),
        assistant("m2", thinking()),
        assistant("m2", tool("Bash", command="ls")),
        result(),
    )
    assert last_text(path) == "" == scan(path).last_text
    assert scan(path, start=0).stop_reason == ""


def test_stop_hook_feedback_and_meta_lines_do_not_start_a_turn(tmp_path: Path) -> None:
    path = write(
        tmp_path / "t.jsonl",
        prompt("task"),
        assistant("m1", text("I think I am done."), stop="end_turn"),
        feedback("tests fail"),
        prompt("<local-command-caveat>Caveat</local-command-caveat>", meta=True),
        prompt("Stop hook feedback: without isMeta"),
        assistant("m2", tool("Bash", command="pytest")),
        result(),
        assistant("m3", tool("Bash", command="pytest -x"), stop="tool_use"),
    )
    assert last_text(path) == "I think I am done." == scan(path).last_text
    assert scan(path).stop_reason == "tool_use"


def test_sidechain_lines_are_not_the_agents_text(tmp_path: Path) -> None:
    path = write(
        tmp_path / "t.jsonl",
        prompt("task"),
        assistant("m1", text("Delegating.")),
        assistant("m1", tool("Task", prompt="sub")),
        prompt("sub", side=True),  # a sub-agent's prompt is not a turn boundary
        assistant("s1", text("Sub-agent report."), side=True, stop="end_turn"),
        result(),
        assistant("m2", tool("TodoWrite", todos=[])),
    )
    assert last_text(path) == "Delegating." == scan(path).last_text
    assert scan(path).stop_reason == ""


# --- bad input ----------------------------------------------------------------------------------------------


def test_garbage_binary_and_unknown_lines_are_skipped(tmp_path: Path) -> None:
    path = write(
        tmp_path / "t.jsonl",
        b"not json\n",
        b"\x00\xff\xfe\x80garbage\x00\n",
        b"[1, 2, 3]\n",
        b'{"type": "assistant", "message": {"content": 5}}\n',
        b'{"type": "assistant", "message": {"id": "bad", "usage": {"input_tokens": "many"}}}\n',
        b"\n",
        b"   \r\n",
        {"type": "some-future-line", "message": {"whatever": [1, 2]}, "sessionId": "s2"},
        {"type": "summary", "summary": "x", "leafUuid": "u"},
        prompt("go"),
        assistant("m1", text("ok"), use=usage(5, 6, 7, 8)),
    )
    s = scan(path)
    assert (s.lines, s.bad_lines) == (11, 5)
    assert s.tokens == TokenUsage(input=5, output=6, cache_creation=7, cache_read=8)
    assert s.last_text == "ok" == last_text(path)
    assert s.session_id == "s1"
    assert find_last_text(path).bad_lines == 0  # stopped at the prompt before reaching the garbage


def test_truncated_last_line_is_left_for_the_next_scan(tmp_path: Path) -> None:
    full = jl(prompt("go"), assistant("m1", text("first")), assistant("m2", text("second"), use=usage(9)))
    cut = len(full) - 20
    path = tmp_path / "t.jsonl"
    path.write_bytes(full[:cut])
    first = scan(path)
    assert first.end == full.rindex(b"\n", 0, cut) + 1
    assert (first.lines, first.bad_lines, first.last_text) == (2, 0, "first")
    assert last_text(path) == "first"
    path.write_bytes(full)
    second = scan(path, start=first.end)
    assert (second.lines, second.bad_lines, second.last_text) == (1, 0, "second")
    assert second.end == len(full)
    assert add_usage(first.tokens, second.tokens) == scan(path).tokens


@pytest.mark.parametrize("block", [1, 16, 64 * 1024])
def test_last_line_without_its_newline_is_not_read_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    monkeypatch.setattr(lines, "BACK_BLOCK", block)
    full = jl(prompt("go"), assistant("m1", text("first")), assistant("m2", text("second")))
    path = tmp_path / "t.jsonl"
    path.write_bytes(full[:-1])  # valid JSON, but the writer has not finished the line
    s = scan(path)
    assert (s.last_text, s.lines, s.end) == ("first", 2, full.rindex(b"\n", 0, -1) + 1)
    assert last_text(path) == "first"


def test_enormous_line_is_skipped_without_decoding(tmp_path: Path) -> None:
    huge = assistant("m9", text("x" * (MAX_LINE_BYTES + 10)), use=usage(1000))
    path = write(tmp_path / "t.jsonl", prompt("go"), assistant("m1", text("before")), huge, result())
    s = scan(path)
    assert (s.lines, s.bad_lines, s.messages, s.end) == (4, 1, 1, path.stat().st_size)
    assert s.last_text == "before" == last_text(path)
    found = find_last_text(path)
    assert (found.bad_lines, found.lines_decoded) == (1, 3)


@pytest.mark.parametrize("cap", [10, 100, 1000])
def test_small_line_caps_agree_forward_and_backward(tmp_path: Path, cap: int) -> None:
    path = write(
        tmp_path / "t.jsonl",
        prompt("go"),
        assistant("m1", text("a" * 300)),
        result(),
        assistant("m2", text("b")),
        b"z" * 5000,  # a partial last line longer than every cap
    )
    s = scan(path, max_line_bytes=cap)
    found = find_last_text(path, max_line_bytes=cap)
    assert found.text == s.last_text
    assert s.lines == 4 and s.end == path.stat().st_size - 5000


def test_empty_and_missing_files(tmp_path: Path) -> None:
    empty = write(tmp_path / "empty.jsonl")
    assert scan(empty) == Scan()
    assert find_last_text(empty) == find_last_text(empty, max_bytes=0)
    assert last_text(empty) == ""
    with pytest.raises(FileNotFoundError):
        scan(tmp_path / "missing.jsonl")
    with pytest.raises(FileNotFoundError):
        last_text(tmp_path / "missing.jsonl")
    with pytest.raises(ValueError, match="start"):
        scan(empty, start=-1)
    assert scan(empty, start=100).end == 100


# --- cost ---------------------------------------------------------------------------------------------------


def synthetic(turns: int, *, tail: list[Obj]) -> bytes:
    """A transcript of ``turns`` ordinary turns (about 20 KB each), then the lines of ``tail``."""
    out = []
    for t in range(turns):
        out.append(prompt(f"turn {t}"))
        for k in range(4):
            out += [assistant(f"m{t}_{k}", text(f"step {k}")), assistant(f"m{t}_{k}", tool("Bash", cmd="ls"))]
            out.append(result() | {"toolUseResult": {"stdout": "o" * 4000}})
        out.append(assistant(f"m{t}_end", text(f"Turn {t} done."), stop="end_turn"))
    return jl(*out, *tail)


def test_last_text_reads_only_the_end_of_a_large_transcript(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    tail = [prompt("last"), assistant("z1", text("Final answer.")), assistant("z1", tool("Bash", cmd="ls"))]
    tail += [assistant("z1", thinking()), assistant("z1", tool("Read", file_path="/f"))]
    path.write_bytes(synthetic(170, tail=tail))
    assert path.stat().st_size > 3_000_000
    found = find_last_text(path)
    assert found.text == "Final answer." == scan(path).last_text
    assert found.lines_decoded == 5
    assert found.bytes_read <= 64 * 1024 + 1


def test_last_text_of_a_long_turn_without_text_stops_at_its_prompt(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    tail: list[Obj] = [prompt("last")]
    for k in range(300):  # ~1.3 MB of tool calls, so the backward blocks double several times
        tail += [assistant(f"z{k}", tool("Bash", cmd="ls")), result() | {"toolUseResult": "o" * 4000}]
    path.write_bytes(synthetic(170, tail=tail))
    found = find_last_text(path)
    assert found.text == "" == scan(path).last_text
    assert found.lines_decoded == 601
    assert found.bytes_read < path.stat().st_size / 2


def test_last_text_stops_at_max_bytes(tmp_path: Path) -> None:
    lines = [prompt("go"), assistant("a", text("early"))]
    lines += [assistant(f"b{k}", tool("Bash", cmd="x" * 1000)) for k in range(200)]
    path = write(tmp_path / "t.jsonl", *lines)
    found = find_last_text(path, max_bytes=50_000)
    assert (found.text, found.exhausted, found.bytes_read) == ("", True, 50_000)
    assert last_text(path) == "early"


def test_transcript_module_imports_neither_duckdb_nor_pyarrow() -> None:
    code = (
        "import sys, ledger.drivers.claude_code.transcript.scan; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('duckdb', 'pyarrow')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert out.strip() == "[]"


# --- properties ---------------------------------------------------------------------------------------------

ids = st.sampled_from(["m1", "m2", "m3"])
words = st.sampled_from(["", " ", "\n\n", "done", " two words ", "ünï"])
line_objs = st.one_of(
    st.builds(lambda m, t: assistant(m, text(t)), ids, words),
    st.builds(lambda m: assistant(m, thinking()), ids),
    st.builds(lambda m, f: assistant(m, tool("Edit", file_path=f)), ids, st.sampled_from(["/a", "/b"])),
    st.builds(lambda m, t: assistant(m, text(t), side=True), ids, words),
    st.builds(
        lambda m, s: assistant(m, tool("Bash"), stop=s, use=usage(3)), ids, st.sampled_from([None, "x"])
    ),
    st.builds(prompt, words),
    st.builds(lambda t: prompt(t, side=True), words),
    st.builds(feedback, words),
    st.just(result()),
    st.just({"type": "progress", "data": {"message": {"id": "m1"}}}),
    st.sampled_from([b"garbage\n", b"\n", b'{"type": "user", "message": 3}\n', b"\xff\n"]),
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(line_objs, max_size=25), st.binary(max_size=40).filter(lambda b: b"\n" not in b))
def test_generated_transcripts_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, objs: list[Obj | bytes], partial: bytes
) -> None:
    data = jl(*objs)
    path = tmp_path / "t.jsonl"
    path.write_bytes(data + partial)
    s = scan(path)
    assert s.end == len(data) and s.lines == len(objs)
    assert (s.tokens, s.messages) == oracle_tokens(data)
    assert find_last_text(path).text == s.last_text
    assert find_last_text(path, max_line_bytes=40).text == scan(path, max_line_bytes=40).last_text
    for block in (1, 7, 100):  # tiny backward blocks: lines straddle block boundaries
        monkeypatch.setattr(lines, "BACK_BLOCK", block)
        monkeypatch.setattr(lines, "MAX_BACK_BLOCK", block * 4)
        assert find_last_text(path).text == s.last_text
        assert find_last_text(path, max_line_bytes=40).text == scan(path, max_line_bytes=40).last_text


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=600), st.integers(min_value=0, max_value=700))
def test_scan_never_raises_on_arbitrary_bytes(tmp_path: Path, data: bytes, start: int) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    s = scan(path)
    assert s.end == data.rfind(b"\n") + 1
    assert s.lines == data.count(b"\n") and 0 <= s.bad_lines <= s.lines
    assert scan(path, start=start).end >= start
    assert isinstance(find_last_text(path).text, str)
    assert find_last_text(path, max_line_bytes=5).text == scan(path, max_line_bytes=5).last_text


def test_scan_output_reads_stream_json_and_result_objects() -> None:
    from ledger.drivers.claude_code.transcript.scan import scan_output

    def assistant(mid: str, usage: dict[str, int], block: dict[str, Any]) -> str:
        return json.dumps({"type": "assistant", "message": {"id": mid, "usage": usage, "content": [block]}})

    edit = {"type": "tool_use", "name": "Write", "input": {"file_path": "/w/a.py"}}
    stream = [
        "plain text is ignored",
        assistant("m1", {"input_tokens": 5, "output_tokens": 1}, {"type": "text", "text": "hi"}),
        assistant("m1", {"input_tokens": 5, "output_tokens": 7}, edit),
        assistant("m2", {"input_tokens": 3, "output_tokens": 2}, {"type": "text", "text": "done"}),
        json.dumps({"type": "result", "usage": {"input_tokens": 999}}),
        "{not json",
    ]
    scanned = scan_output(stream)
    assert (scanned.tokens.input, scanned.tokens.output) == (8, 9)  # each message once, its last usage
    assert (scanned.tool_count, scanned.files_modified) == (1, ["/w/a.py"])
    result = {"type": "result", "result": "ok", "usage": {"output_tokens": 42}}
    only_result = scan_output([json.dumps(result)])
    assert only_result.tokens.output == 42
    assert scan_output(["just text", ""]).tokens == TokenUsage()
