"""Replays of real Claude Code 2.1.328 Stop and SubagentStop captures (tests/fixtures/clients/
claude-code-2.1.328/, made by tests/clients/test_claude_code_stop.py: see the README there). The
expected numbers come from each capture's ``served.json``: what the mock served."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ledger import events as E
from ledger.drivers.claude_code.stop import block_cap
from ledger.drivers.claude_code.stop.stop_input import parse_input
from ledger.drivers.claude_code.stop.turn_wait import holds_turn
from ledger.drivers.claude_code.transcript.last_todos import find_last_todos
from ledger.drivers.claude_code.transcript.scan import Scan, decode_line, message_texts, scan
from ledger.loop.validate.todos import Todo

CAPTURES = Path(__file__).parents[1] / "fixtures" / "clients" / "claude-code-2.1.328"
MODEL = "claude-sonnet-4-5-20250929"


def inputs(case: str, event: str = "Stop") -> list[dict[str, Any]]:
    lines = (CAPTURES / case / "hook-inputs.jsonl").read_text().splitlines()
    return [d for d in map(json.loads, lines) if d["hook_event_name"] == event]


def served(case: str, agent: str = "main") -> list[E.TokenUsage]:
    turns = json.loads((CAPTURES / case / "served.json").read_text())
    return [
        E.TokenUsage(input=i, output=o, cache_read=r, cache_creation=w)
        for t in turns
        if t["agent"] == agent
        for i, o, r, w in [t["usage"]]
    ]


def total(usages: list[E.TokenUsage]) -> E.TokenUsage:
    return E.TokenUsage(
        input=sum(u.input for u in usages),
        output=sum(u.output for u in usages),
        cache_read=sum(u.cache_read for u in usages),
        cache_creation=sum(u.cache_creation for u in usages),
    )


def landing(path: Path, said: str, after: int) -> tuple[int, int]:
    """The offsets where the main-chain message that says ``said`` (the stop's
    ``last_assistant_message``) begins and ends, after ``after``."""
    offset, begin, end = 0, -1, -1
    for raw in path.read_bytes().splitlines(keepends=True):
        line = decode_line(raw)
        main = line is not None and line.type == "assistant" and not line.is_sidechain
        message = line.message if main and line is not None else None
        if begin < 0 and offset >= after and message is not None and " ".join(message_texts(message)) == said:
            begin = offset
        offset += len(raw)
        if begin >= 0 and end < 0:
            end = offset
    assert begin >= 0, said
    return begin, end


def prefix(path: Path, size: int, tmp_path: Path) -> Path:
    cut = tmp_path / f"{path.parent.name}-{size}.jsonl"
    cut.write_bytes(path.read_bytes()[:size])
    return cut


def test_every_captured_hook_input_decodes_with_its_new_fields() -> None:
    cases = [d.name for d in CAPTURES.iterdir() if (d / "hook-inputs.jsonl").exists()]
    assert len(cases) >= 5
    for case in cases:
        for raw in (CAPTURES / case / "hook-inputs.jsonl").read_text().splitlines():
            data = parse_input(raw.encode())
            assert data.prompt_id and data.background_tasks is not None and data.session_crons == []
            fields = data.stop_fields()
            assert fields["prompt_id"] == data.prompt_id


def test_each_drop_in_turn_is_held_only_once_its_last_message_has_landed(tmp_path: Path) -> None:
    """Read up to where each stop's turn ends, the ranges hold exactly the iterations' served tokens;
    cut just before the turn's last message, the range does not hold the turn (the stop must wait)."""
    transcript = CAPTURES / "drop-in" / "transcript.jsonl"
    m = served("drop-in")
    expected = [total(m[:1]), total(m[1:3]), total(m[3:4]), total(m[4:])]
    start = 0
    for stop, tokens in zip(inputs("drop-in"), expected, strict=True):
        said = stop["last_assistant_message"]
        begin, end = landing(transcript, said, start)
        assert not holds_turn(scan(prefix(transcript, begin, tmp_path), start), said)
        got: Scan = scan(prefix(transcript, end, tmp_path), start)
        assert holds_turn(got, said) and got.tokens == tokens and got.model == MODEL
        start = got.end
    whole = scan(transcript)
    assert whole.tokens == total(m)  # the lines after the last turn carry no tokens


def test_the_drop_in_files_are_read_in_the_iteration_that_wrote_them(tmp_path: Path) -> None:
    transcript = CAPTURES / "drop-in" / "transcript.jsonl"
    stops = inputs("drop-in")
    _, first = landing(transcript, stops[0]["last_assistant_message"], 0)
    _, second = landing(transcript, stops[1]["last_assistant_message"], first)
    files = scan(prefix(transcript, second, tmp_path), first).files_modified
    assert [Path(f).name for f in files] == ["a.txt"]


def test_the_task_list_is_read_and_the_refused_todowrite_is_not(tmp_path: Path) -> None:
    transcript = CAPTURES / "native" / "transcript.jsonl"
    stop1, _ = inputs("native")
    _, end = landing(transcript, stop1["last_assistant_message"], 0)
    assert find_last_todos(prefix(transcript, end, tmp_path)) == [Todo(content="Write b", status="pending")]
    assert find_last_todos(transcript) == [Todo(content="Write b", status="completed")]
    refused = [
        raw for raw in transcript.read_text().splitlines() if "No such tool available: TodoWrite" in raw
    ]
    assert refused  # the client refused the TodoWrite: its pending "Never done" must never count


def test_the_subagent_transcript_holds_its_own_tokens_and_last_message() -> None:
    (stop,) = inputs("native", "SubagentStop")
    got = scan(CAPTURES / "native" / "subagent.jsonl")
    assert got.tokens == total(served("native", "sub"))
    assert holds_turn(got, stop["last_assistant_message"])
    assert (got.model, got.tool_count, [Path(f).name for f in got.files_modified]) == (MODEL, 1, ["notes.md"])


def test_a_stop_while_a_subagent_runs_in_the_background_names_it() -> None:
    first, *rest = inputs("background")
    data = parse_input(json.dumps(first).encode())
    assert [(t["type"], t["status"]) for t in data.running_subagents()] == [("subagent", "running")]
    assert all(not parse_input(json.dumps(s).encode()).running_subagents() for s in rest)
    blocked = inputs("background-blocked")  # a hook that blocked then: the agent went on at once
    assert blocked[1]["background_tasks"] and blocked[1]["stop_hook_active"]


def turn(tools: int = 0) -> E.AgentTurn:
    return E.AgentTurn(session_id="s", iteration=1, tool_count=tools)


def stop(decision: E.StopDecision) -> E.StopDecided:
    return E.StopDecided(session_id="s", iteration=1, decision=decision)


def test_the_client_honours_cap_blocks_and_overrides_the_next_as_the_loop_counts() -> None:
    """With CLAUDE_CODE_STOP_HOOK_BLOCK_CAP=2 and a hook that always blocks, the real client ran 3
    stops and said it overrode the third block; the loop's count agrees."""
    stream = (CAPTURES / "block-cap-raw" / "stream.jsonl").read_text()
    assert "A hook blocked the turn from ending 3 consecutive times" in stream
    assert len(inputs("block-cap-raw")) == 3
    events: list[E.Event] = [turn()]
    for _ in range(2):  # blocks 1 and 2 go through
        assert block_cap.cap_reached(events, 2) == 0
        events += [stop("block"), turn()]
    assert block_cap.cap_reached(events, 2) == 3  # the third would be overridden: the loop ends there


@pytest.mark.parametrize("case", ["drop-in", "native", "background"])
def test_each_transcript_holds_every_served_main_turn_once(case: str) -> None:
    got = scan(CAPTURES / case / "transcript.jsonl")
    assert got.tokens == total(served(case))  # sub-agents' lines are in their own transcript
