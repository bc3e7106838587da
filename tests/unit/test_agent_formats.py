"""The agent output formats (``ledger.drivers.runner.formats``) against real samples of each agent's output
(``tests/fixtures/agents/``, origins in its README): every expected number is computed here from the
sample with plain ``json``, independently of the parsers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ledger.drivers.runner.formats import FORMATS, UnknownFormat, command_model, detect, named, resolve
from ledger.drivers.runner.formats.report import AgentReport
from ledger.events import TokenUsage

AGENTS = Path(__file__).parents[1] / "fixtures" / "agents"
CLAUDE = AGENTS / "claude" / "sample-turns.jsonl"
CODEX = AGENTS / "codex" / "exec-docs.jsonl"
GEMINI_DOCS = AGENTS / "gemini" / "headless-docs.jsonl"
GEMINI_SNAPSHOT = AGENTS / "gemini" / "snapshot-stream.jsonl"
OPENCODE = AGENTS / "opencode" / "run-source.jsonl"
CURSOR = AGENTS / "cursor" / "stream-docs.jsonl"

GARBAGE = ["not json at all", "{broken", '{"type": "mystery-event"}', "[1, 2]", '{"type": 7}']
"""Lines no format reads: plain text, broken JSON, an unknown type, not an object, a wrong type."""


def objects(path: Path) -> list[dict[str, Any]]:
    """The sample's lines that are JSON objects (others are what the parsers must skip)."""
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def expected_claude(path: Path) -> AgentReport:
    events = objects(path)
    usage: dict[str, dict[str, int]] = {}
    tools, files = 0, list[str]()
    model = ""
    for e in events:
        if e["type"] != "assistant":
            continue
        message = e["message"]
        usage[message["id"]] = message["usage"]
        model = message.get("model", model)
        for block in message["content"]:
            if block["type"] == "tool_use":
                tools += 1
                edited = block["input"].get("file_path")
                if block["name"] in ("Edit", "Write", "MultiEdit") and edited not in files:
                    files.append(edited)
    result = [e for e in events if e["type"] == "result"][-1]
    last = list(usage.values())[-1]  # the context: the last request's input, cache included
    context = last["input_tokens"] + last["cache_read_input_tokens"] + last["cache_creation_input_tokens"]
    total = result.get("usage") or {  # the result's usage when it has one, else each message's
        k: sum(u[k] for u in usage.values())
        for k in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    }
    return AgentReport(
        text=result["result"],
        tokens=TokenUsage(
            input=total["input_tokens"],
            output=total["output_tokens"],
            cache_read=total["cache_read_input_tokens"],
            cache_creation=total["cache_creation_input_tokens"],
        ),
        context_tokens=context,
        cost_usd=result["total_cost_usd"],
        model=model,
        tool_count=tools,
        files_modified=tuple(files),
    )


def expected_codex(path: Path) -> AgentReport:
    events = objects(path)
    turns = [e["usage"] for e in events if e["type"] == "turn.completed"]
    items = [e["item"] for e in events if e["type"].startswith("item.")]
    tool_types = ("command_execution", "file_change", "mcp_tool_call", "web_search")
    tool_ids = {i["id"] for i in items if i["type"] in tool_types}
    tools_at = [i for i, e in enumerate(events) if e.get("item", {}).get("type") in tool_types]
    after = events[tools_at[-1] + 1 :] if tools_at else events  # the answer follows the last call
    messages = [e["item"]["text"] for e in after if e["type"] == "item.completed"
                and e["item"]["type"] == "agent_message"]  # fmt: skip
    return AgentReport(
        text=messages[-1] if messages else "",
        tokens=TokenUsage(
            input=sum(
                t["input_tokens"] - t.get("cached_input_tokens", 0) - t.get("cache_write_input_tokens", 0)
                for t in turns
            ),
            output=sum(t["output_tokens"] for t in turns),
            cache_read=sum(t.get("cached_input_tokens", 0) for t in turns),
            cache_creation=sum(t.get("cache_write_input_tokens", 0) for t in turns),
        ),
        tool_count=len(tool_ids),
    )


def expected_gemini(path: Path) -> AgentReport:
    events = objects(path)
    uses = [i for i, e in enumerate(events) if e["type"] == "tool_use"]
    after = events[uses[-1] + 1 :] if uses else events
    text = "".join(e["content"] for e in after if e["type"] == "message" and e["role"] == "assistant")
    results = [e["stats"] for e in events if e["type"] == "result"]
    tokens = TokenUsage()
    if results:
        stats = results[-1]
        cached = stats.get("cached", 0)
        thoughts = stats["total_tokens"] - stats["input_tokens"] - stats["output_tokens"]  # billed as output
        tokens = TokenUsage(
            input=stats.get("input", stats["input_tokens"] - cached),
            output=stats["output_tokens"] + thoughts,
            cache_read=cached,
        )
    init = [e for e in events if e["type"] == "init"]
    return AgentReport(text=text, tokens=tokens, model=init[0]["model"], tool_count=len(uses))


def expected_opencode(path: Path) -> AgentReport:
    events = objects(path)
    steps = [e["part"] for e in events if e["type"] == "step_finish"]
    uses = [i for i, e in enumerate(events) if e["type"] == "tool_use"]
    after = events[uses[-1] + 1 :] if uses else events
    files = list[str]()
    for i in uses:
        part = events[i]["part"]
        edited: str = part["state"]["input"].get("filePath")
        if part["tool"] in ("edit", "write", "multiedit") and part["state"]["status"] == "completed":
            files += [edited] if edited not in files else []
    return AgentReport(
        text="".join(e["part"]["text"] for e in after if e["type"] == "text"),
        tokens=TokenUsage(
            input=sum(s["tokens"]["input"] for s in steps),
            output=sum(s["tokens"]["output"] + s["tokens"]["reasoning"] for s in steps),
            cache_read=sum(s["tokens"]["cache"]["read"] for s in steps),
            cache_creation=sum(s["tokens"]["cache"]["write"] for s in steps),
        ),
        cost_usd=sum(s["cost"] for s in steps),
        tool_count=len({events[i]["part"]["id"] for i in uses}),
        files_modified=tuple(files),
    )


def expected_cursor(path: Path) -> AgentReport:
    events = objects(path)
    calls = [e for e in events if e["type"] == "tool_call"]
    files = list[str]()
    for e in calls:
        write = e["tool_call"].get("writeToolCall", {})
        if e["subtype"] == "completed" and "success" in write.get("result", {}):
            files += [write["args"]["path"]] if write["args"]["path"] not in files else []
    results = [e["result"] for e in events if e["type"] == "result"]
    texts = [b["text"] for e in events if e["type"] == "assistant" for b in e["message"]["content"]]
    init = [e for e in events if e["type"] == "system" and e.get("subtype") == "init"]
    return AgentReport(
        text=results[-1] if results else "".join(texts),
        model=init[0]["model"] if init else "",
        tool_count=len({e["call_id"] for e in calls}),
        files_modified=tuple(files),
    )


def malformed(path: Path) -> int:
    """The sample's own non-blank lines that are not JSON."""
    count = 0
    for line in path.read_text().splitlines():
        try:
            json.loads(line)
        except json.JSONDecodeError:
            count += bool(line.strip())
    return count


CASES = [
    ("claude", CLAUDE, expected_claude),
    ("codex", CODEX, expected_codex),
    ("gemini", GEMINI_DOCS, expected_gemini),
    ("gemini", GEMINI_SNAPSHOT, expected_gemini),
    ("opencode", OPENCODE, expected_opencode),
    ("cursor", CURSOR, expected_cursor),
]


@pytest.mark.parametrize(
    ("name", "path", "expected"), CASES, ids=lambda c: getattr(c, "name", getattr(c, "__name__", str(c)))
)
def test_each_format_reads_its_agents_real_sample(name: str, path: Path, expected: Any) -> None:
    report = FORMATS[name].parse(path.read_text())
    want = expected(path)
    assert report.tokens != TokenUsage() or want.tokens == TokenUsage()
    assert report == AgentReport(
        text=want.text,
        tokens=want.tokens,
        cost_usd=want.cost_usd,
        model=want.model,
        tool_count=want.tool_count,
        files_modified=want.files_modified,
        context_tokens=want.context_tokens,
        skipped=malformed(path),
    )


def test_the_samples_hold_what_the_parsers_read() -> None:
    """The numbers above are not vacuous: the samples carry tokens, tools, a cost and a file."""
    claude = expected_claude(CLAUDE)
    assert claude.cost_usd == 0.0347 and claude.files_modified and claude.tool_count == 3
    assert expected_codex(CODEX).tokens.cache_read == 24448
    assert expected_gemini(GEMINI_DOCS).tokens.output == 200
    assert malformed(GEMINI_SNAPSHOT) == 1  # its result line holds a "<DURATION>" placeholder
    opencode = expected_opencode(OPENCODE)
    assert opencode.cost_usd and opencode.tokens.cache_creation and opencode.tokens.output > 0
    assert len(opencode.files_modified) == 2 and opencode.tool_count == 6 and opencode.text
    cursor = expected_cursor(CURSOR)
    assert cursor.model and cursor.tool_count == 4 and len(cursor.files_modified) == 2 and cursor.text


@pytest.mark.parametrize(
    ("name", "path", "expected"), CASES, ids=lambda c: getattr(c, "name", getattr(c, "__name__", str(c)))
)
def test_unknown_and_malformed_lines_are_skipped_and_counted(name: str, path: Path, expected: Any) -> None:
    lines = path.read_text().splitlines()
    mixed = "\n".join([GARBAGE[0], *lines[:2], *GARBAGE[1:], "", "   ", *lines[2:]]) + "\n"
    clean, report = FORMATS[name].parse(path.read_text()), FORMATS[name].parse(mixed)
    assert report.skipped == clean.skipped + len(GARBAGE)
    assert (report.text, report.tokens, report.tool_count) == (clean.text, clean.tokens, clean.tool_count)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_no_output_never_raises(name: str) -> None:
    for output in ("", "\n\n", "\x00\xff garbage", '{"type": "result", "usage": "not a mapping"}'):
        report = FORMATS[name].parse(output)
        assert report.tokens == TokenUsage() and report.tool_count == 0


def test_plain_text_is_the_whole_output() -> None:
    output = "working...\n<promise>COMPLETE</promise>\n"
    assert FORMATS["text"].parse(output) == AgentReport(text=output)


def test_claude_and_amp_share_one_parser() -> None:
    """Amp writes Claude Code's messages; Claude Code's own reader (scan_output) is the one used."""
    assert FORMATS["amp"].parse is FORMATS["claude"].parse
    assert FORMATS["amp"].parse(CLAUDE.read_text()) == expected_claude(CLAUDE)


def test_a_prompt_echoed_in_a_stream_is_not_the_final_text() -> None:
    """Amp's stream repeats the user's prompt; a promise the prompt asks for is not the answer."""
    prompt = {"type": "user", "message": {"role": "user", "content": [
        {"type": "text", "text": "Say <promise>COMPLETE</promise> when done"}]}}  # fmt: skip
    answer = {"type": "result", "subtype": "success", "result": "Not done yet."}
    report = FORMATS["amp"].parse(json.dumps(prompt) + "\n" + json.dumps(answer) + "\n")
    assert report.text == "Not done yet."


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["claude", "-p", "--output-format", "stream-json", "--verbose"], "claude"),
        (["/usr/local/bin/claude", "-p", "--output-format=json"], "claude"),
        (["claude", "-p", "fix it"], "text"),
        (["codex", "exec", "--json", "fix it"], "codex"),
        (["codex", "exec", "fix it"], "text"),
        (["gemini", "--output-format", "stream-json", "-p", "x"], "gemini"),
        (["gemini", "-o", "stream-json"], "gemini"),
        (["gemini", "--output-format", "json"], "gemini"),
        (["gemini", "-o", "json", "--yolo"], "gemini"),
        (["gemini", "-o", "text", "--yolo"], "text"),
        (["amp", "-x", "fix it", "--stream-json"], "amp"),
        (["amp", "-x", "fix it"], "text"),
        (["copilot", "-p", "fix it", "--allow-all-tools"], "text"),
        (["copilot", "--allow-all-tools", "--output-format", "json"], "copilot"),
        (["/opt/bin/copilot", "--output-format=json", "-p", "fix it"], "copilot"),
        (["copilot", "--output-format", "text"], "text"),
        (["opencode", "run", "--format", "json", "fix it"], "opencode"),
        (["/opt/bin/opencode", "run", "--model", "anthropic/claude-sonnet-4", "--format=json"], "opencode"),
        (["opencode", "run", "fix it"], "text"),
        (["opencode", "--format", "json"], "text"),
        (["cursor-agent", "-p", "--output-format", "stream-json"], "cursor"),
        (["cursor-agent", "--print", "--output-format=json", "fix it"], "cursor"),
        (["cursor-agent", "--output-format", "stream-json"], "cursor"),  # prints: stdout is a pipe
        (["cursor-agent", "-p", "fix it"], "text"),
        (["cursor-agent", "-p", "--output-format", "text"], "text"),
        (["agent", "-p", "--output-format", "stream-json", "fix it"], "cursor"),
        (["agent", "--output-format", "stream-json"], "text"),  # "agent" alone is not clearly Cursor's
        (["agent", "-p", "fix it"], "text"),
        (["python3", "agent.py", "--output-format", "stream-json"], "text"),
        ([], "text"),
    ],
)
def test_the_format_is_detected_from_the_agent_command(argv: list[str], name: str) -> None:
    assert detect(argv).name == name
    assert resolve(None, argv).name == name
    assert resolve("codex", argv).name == "codex"  # a name given wins


def test_an_unknown_name_says_the_choices() -> None:
    with pytest.raises(UnknownFormat) as caught:
        named("claude-code")
    message = str(caught.value)
    assert "'claude-code'" in message and "\n" not in message
    assert all(name in message for name in FORMATS)
    assert all(f.name == key for key, f in FORMATS.items())


def test_opencode_text_chunks_and_failed_edits() -> None:
    """Newer opencode writes one ``text`` event per chunk of a part: the chunks join; text before
    the last tool call is not the final text; a failed edit names no edited file; a ``reasoning``
    part (with ``--thinking``) is not the answer; steps without a cost leave the cost unknown."""

    def event(type_: str, **part: Any) -> str:
        return json.dumps({"type": type_, "timestamp": 1, "sessionID": "ses_1", "part": part})

    failed = {"status": "error", "input": {"filePath": "/w/a.py"}, "error": "oldString not found"}
    output = "\n".join([
        event("text", id="prt_1", type="text", text="Let me look. "),
        event("tool_use", id="prt_2", type="tool", tool="edit", state=failed),
        event("reasoning", id="prt_3", type="reasoning", text="<promise>COMPLETE</promise>?"),
        event("text", id="prt_4", type="text", text="All "),
        event("text", id="prt_4", type="text", text="done."),
        event("step_finish", id="prt_5", type="step-finish", tokens={"input": 5, "output": 1,
              "reasoning": 0, "cache": {"read": 0, "write": 0}}),
    ])  # fmt: skip
    report = FORMATS["opencode"].parse(output)
    assert (report.text, report.tool_count, report.files_modified) == ("All done.", 1, ())
    assert report.tokens == TokenUsage(input=5, output=1) and report.cost_usd is None


def test_cursor_json_output_is_its_result_line_alone() -> None:
    """``--output-format json`` writes only the terminal ``result`` object: its text is the answer."""
    (last,) = [line for line in CURSOR.read_text().splitlines() if json.loads(line)["type"] == "result"]
    report = FORMATS["cursor"].parse(last + "\n")
    assert report == AgentReport(text=json.loads(last)["result"])


def test_cursor_without_a_result_line_joins_the_assistant_messages() -> None:
    """A stream cut short (the agent failed) has no ``result``: its assistant messages are the text;
    the echoed prompt never is; an edit call names its file only when it succeeded."""
    lines = [json.loads(line) for line in CURSOR.read_text().splitlines()]
    cut = [e for e in lines if e["type"] != "result"]
    cut.insert(1, {"type": "user", "message": {"role": "user", "content": [
        {"type": "text", "text": "Say <promise>COMPLETE</promise> when done"}]}})  # fmt: skip
    cut.append({"type": "tool_call", "subtype": "completed", "call_id": "c9", "tool_call": {
        "editToolCall": {"args": {"path": "x.py"}, "result": {"error": {"message": "no"}}}}})  # fmt: skip
    cut.append({"type": "tool_call", "subtype": "completed", "call_id": "c10", "tool_call": {
        "editToolCall": {"args": {"path": "y.py"}, "result": {"success": {}}}}})  # fmt: skip
    report = FORMATS["cursor"].parse("\n".join(json.dumps(e) for e in cut))
    want = expected_cursor(CURSOR)
    assert report.text == "".join(
        b["text"] for e in lines if e["type"] == "assistant" for b in e["message"]["content"]
    )
    assert "promise" not in report.text and report.files_modified == (*want.files_modified, "y.py")
    assert report.tool_count == want.tool_count + 2


def test_unconfirmed_formats_are_marked() -> None:
    """Formats checked against no captured output of their agent say so (the README says so too)."""
    unconfirmed = {name for name, f in FORMATS.items() if not f.confirmed}
    assert unconfirmed == {"amp", "cursor"}


@pytest.mark.parametrize(
    ("argv", "model"),
    [
        (["codex", "exec", "--json", "-m", "gpt-5.5"], "gpt-5.5"),
        (["/usr/bin/codex", "exec", "--model=o3", "fix it"], "o3"),
        (["codex", "exec", "-c", 'model="gpt-5.4"', "fix it"], "gpt-5.4"),
        (["codex", "exec", "-c", "sandbox_mode=read-only"], ""),
        (["codex", "exec", "fix it"], ""),
        (["claude", "-p", "--model", "sonnet"], "sonnet"),  # plain claude -p names no model
        (["claude", "-p", "-c", "model=x"], ""),  # Claude Code's -c is --continue
        ([], ""),
    ],
)
def test_the_model_a_codex_command_asks_for(argv: list[str], model: str) -> None:
    """Codex names no model in its output: the run records the one its command asks for."""
    assert command_model(argv) == model
