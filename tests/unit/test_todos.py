"""The todo and work-done validators as rules: ``todos`` (the agent's own todo list) and ``work_done`` (no
completion without work), their gate on completion, and the todo list read from real Claude Code
transcripts."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ledger import events as E
from ledger.core.home import Home
from ledger.drivers.claude_code.stop import native as native_module
from ledger.drivers.claude_code.stop.hook import run
from ledger.drivers.claude_code.stop.locate import LOOP_FILE
from ledger.drivers.claude_code.transcript.last_todos import find_last_todos
from ledger.events import Signal
from ledger.loop.config.loop_config import LoopConfig
from ledger.loop.decide.signals import Inputs, resolve
from ledger.loop.engine import Engine
from ledger.loop.validate.checks import run_rule
from ledger.loop.validate.rules import RuleConfigError, RuleContext, TodosRule, WorkDoneRule, parse_rules
from ledger.loop.validate.todos import Todo, summary, todos_wanted, unfinished
from ledger.storage.journal import Cursor, read_new
from tests.helpers import validate
from tests.transcripts import FIXTURE_PARAMS

COMPLETE = "Done.\n<promise>COMPLETE</promise>"


def todo(content: str, status: Any = "pending") -> Todo:
    return Todo(content=content, status=status, activeForm=f"Doing: {content}")


# --- the todo list ----------------------------------------------------------------------------------


def test_unfinished_keeps_the_pending_and_in_progress_items_in_order() -> None:
    items = [todo("a", "completed"), todo("b", "in_progress"), todo("c"), todo("d", "completed")]
    assert [t.content for t in unfinished(items)] == ["b", "c"]


@pytest.mark.parametrize(
    ("todos", "done", "line"),
    [
        (
            [todo("Write tests"), todo("Fix lint", "in_progress")],
            False,
            "2 todos remaining: Write tests, Fix lint",
        ),
        ([todo("Ship", "in_progress"), todo("Plan", "completed")], False, "1 todo remaining: Ship"),
        ([todo(c) for c in "abcde"], False, "5 todos remaining: a, b, c, and 2 more"),
        ([todo("x" * 80)], False, "1 todo remaining: " + "x" * 59 + "…"),
        ([todo("two\n  lines")], False, "1 todo remaining: two lines"),
        ([todo("a", "completed"), todo("b", "completed")], True, "all 2 todos completed"),
        ([], True, "the todo list is empty"),
        (None, True, "no todo list known (none written or passed in)"),
    ],
)
def test_summary_says_what_is_left(todos: list[Todo] | None, done: bool, line: str) -> None:
    assert summary(todos) == (done, line)


def test_todo_is_claude_codes_todowrite_item() -> None:
    raw = b'{"content": "Run tests", "status": "in_progress", "activeForm": "Running tests", "id": "1"}'
    assert msgspec.json.decode(raw, type=Todo) == Todo(
        content="Run tests", status="in_progress", activeForm="Running tests"
    )
    assert msgspec.json.decode(b'{"content": "x", "status": "pending"}', type=Todo).activeForm == ""
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"content": "x", "status": "done"}', type=Todo)


def test_todos_wanted_only_for_an_enabled_todos_rule() -> None:
    assert todos_wanted([{"type": "command"}, {"type": "todos", "name": "t"}])
    assert not todos_wanted([{"type": "todos", "name": "t", "enabled": False}, {"type": "work_done"}])
    assert not todos_wanted([])


# --- the two rules ----------------------------------------------------------------------------------


def test_both_rules_decode_from_ralph_toml_and_take_no_command() -> None:
    data = tomllib.loads(
        '[[rules]]\ntype = "todos"\nname = "todos"\n[[rules]]\ntype = "work_done"\nname = "w"\n'
    )
    assert parse_rules(data["rules"], "ralph.toml") == [TodosRule(name="todos"), WorkDoneRule(name="w")]
    with pytest.raises(RuleConfigError) as info:
        parse_rules([{"type": "todos", "name": "t", "argv": ["rm", "-rf", "/"]}], "ralph.toml")
    assert str(info.value) == (
        "ralph.toml: rules[0].argv: unknown key; expected one of cadence, enabled, name, type"
    )
    with pytest.raises(RuleConfigError) as info:  # a skipped iteration would let a completion through
        parse_rules([{"type": "work_done", "name": "w", "cadence": "expensive"}], "ralph.toml")
    assert str(info.value) == (
        "ralph.toml: rules[0]: a work_done rule can refuse any completion, so it runs every iteration: "
        "cadence must be 'cheap', not 'expensive'"
    )


def test_the_todos_rule_fails_while_items_are_unfinished(tmp_path: Path) -> None:
    rule = TodosRule(name="todos")
    left = run_rule(rule, RuleContext(tmp_path, todos=(todo("Write tests"), todo("Fix lint", "in_progress"))))
    assert (left.type, left.passed, left.errored) == ("todos", False, False)
    assert left.message == "2 todos remaining: Write tests, Fix lint"
    done = run_rule(rule, RuleContext(tmp_path, todos=(todo("Write tests", "completed"),)))
    assert (done.passed, done.message) == (True, "all 1 todo completed")
    unknown = run_rule(rule, RuleContext(tmp_path, agent_output=COMPLETE))
    assert unknown.passed and unknown.message.startswith("no todo list known")


@pytest.mark.parametrize(
    ("output", "tools", "files", "promises", "passed", "message"),
    [
        (
            COMPLETE,
            0,
            (),
            None,
            False,
            "completion promised, but this iteration made no tool call and changed no file",
        ),
        (COMPLETE, 2, (), None, True, "completion promised after 2 tool calls, 0 files changed"),
        (COMPLETE, 0, ("a.py",), None, True, "completion promised after 0 tool calls, 1 file changed"),
        ("<promise>LOOP_DONE</promise>", 0, (), None, False, None),  # LOOP_DONE is a completion too
        ("Nothing to do.", 0, (), None, True, "no completion promise (0 tool calls, 0 files changed)"),
        ("<promise>BLOCKED</promise>\nReason: no access", 0, (), None, True, None),  # not a completion
        ("```\n<promise>COMPLETE</promise>\n```", 0, (), None, True, None),  # a quoted tag is no promise
        # the caller's detection (the loop's own vocabulary: a custom phrase) is the one used
        ("<promise>ALL GREEN</promise>", 0, (), ("COMPLETE",), False, None),
        (COMPLETE, 0, (), (), True, None),  # e.g. COMPLETE not a completion with exclusive promises
    ],
)
def test_the_work_done_rule_refuses_a_promise_with_no_work_behind_it(
    tmp_path: Path,
    output: str,
    tools: int,
    files: tuple[str, ...],
    promises: tuple[Signal, ...] | None,
    passed: bool,
    message: str | None,
) -> None:
    ctx = RuleContext(tmp_path, output, tool_count=tools, files_modified=files, promises=promises)
    result = run_rule(WorkDoneRule(name="work_done"), ctx)
    assert (result.type, result.passed, result.errored) == ("work_done", passed, False)
    if message is not None:
        assert result.message == message


# --- the gate on completion -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("inputs", "row"),
    [
        (Inputs(False, promise="COMPLETE", refusals=["todos: 1 todo remaining: Ship"]), 8),
        (
            Inputs(
                False,
                hooks_registered=True,
                hook_action="complete",
                refusals=["todos: 1 todo remaining: Ship"],
            ),
            6,
        ),
    ],
)
def test_a_refusing_rule_turns_complete_into_continue_without_require_passing_validation(
    inputs: Inputs, row: int
) -> None:
    got = resolve(inputs)
    assert (got.signal, got.row) == ("CONTINUE", row)
    assert got.reason.startswith("completion refused (") and got.reason.endswith(
        "todos: 1 todo remaining: Ship"
    )


def test_a_refusal_never_turns_a_block_or_an_escalation_into_continue() -> None:
    refused = ["work_done: completion promised, but ..."]
    assert resolve(Inputs(False, promise="BLOCKED", refusals=refused)).signal == "BLOCKED"
    assert resolve(Inputs(False, promise="ESCALATE", refusals=refused)).signal == "ESCALATE"


def events_of(engine: Engine, sid: str) -> list[E.AnyEvent]:
    return read_new(engine.journal(sid).path, Cursor()).events


def test_the_engine_keeps_a_loop_going_while_todos_remain_and_records_the_rule(engine: Engine) -> None:
    """require_passing_validation is off (the default), so only the gate refuses the promise."""
    engine.start("t", LoopConfig(task="ship", rules=[{"type": "todos", "name": "todos"}]))
    r1 = validate(
        engine, "t", COMPLETE, tool_count=3, todos=[todo("Ship", "in_progress"), todo("Plan", "completed")]
    )
    assert (r1.signal, r1.validation_passed) == ("CONTINUE", False)
    assert r1.reason == "completion refused (agent promised COMPLETE): todos: 1 todo remaining: Ship"
    assert r1.feedback == ["todos: 1 todo remaining: Ship"]
    engine.next("t")
    r2 = validate(
        engine, "t", COMPLETE, tool_count=1, todos=[todo("Ship", "completed"), todo("Plan", "completed")]
    )
    assert (r2.signal, r2.validation_passed, r2.reason) == ("COMPLETE", True, "agent promised COMPLETE")
    ran = [e for e in events_of(engine, "t") if isinstance(e, E.ValidationRan)]
    assert [(r.name, r.type, r.passed, r.message) for v in ran for r in v.results] == [
        ("todos", "todos", False, "1 todo remaining: Ship"),
        ("todos", "todos", True, "all 2 todos completed"),
    ]
    decided = [
        (e.signal, e.promise, e.feedback) for e in events_of(engine, "t") if isinstance(e, E.SignalResolved)
    ]
    assert decided == [
        ("CONTINUE", "COMPLETE", ["todos: 1 todo remaining: Ship"]),
        ("COMPLETE", "COMPLETE", []),
    ]


def test_the_engine_refuses_a_completion_with_no_work_in_the_loops_own_vocabulary(engine: Engine) -> None:
    rules = [{"type": "work_done", "name": "work_done"}]
    engine.start(
        "w", LoopConfig(task="t", rules=rules, completion_promises=["ALL GREEN"], exclusive_promises=True)
    )
    r1 = validate(engine, "w", "<promise>ALL GREEN</promise>")
    assert r1.signal == "CONTINUE"
    assert r1.feedback == [
        "work_done: completion promised, but this iteration made no tool call and changed no file"
    ]
    engine.next("w")
    r2 = validate(engine, "w", "<promise>ALL GREEN</promise>", files_modified=["app.py"])
    assert (r2.signal, r2.detected_promise) == ("COMPLETE", "ALL GREEN")


def test_an_old_style_journal_without_the_new_rules_still_completes_on_a_promise(engine: Engine) -> None:
    engine.start("o", LoopConfig(task="t"))
    assert validate(engine, "o", COMPLETE).signal == "COMPLETE"  # no gate without a gating rule


# --- the todo list of real transcripts --------------------------------------------------------------


def independent_last_todos(lines: list[bytes]) -> list[dict[str, Any]] | None:
    """The input todos of the last TodoWrite tool_use of a main-chain assistant line, read with json."""
    found = None
    for raw in lines:
        line = json.loads(raw)
        content = (line.get("message") or {}).get("content")
        if line.get("type") != "assistant" or line.get("isSidechain") or not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_use" and block.get("name") == "TodoWrite":
                found = block["input"]["todos"]
    return found


@pytest.mark.parametrize("path", FIXTURE_PARAMS)
def test_the_last_todowrite_of_every_shared_transcript_and_of_each_prefix(path: Path, tmp_path: Path) -> None:
    """At the end of each transcript and just before each of its TodoWrite calls, the list found is
    the one a plain json reading of the lines gives (sub-agents' sidechain lists left out)."""
    lines = path.read_bytes().splitlines(keepends=True)
    cuts = [i for i, raw in enumerate(lines) if b'"TodoWrite"' in raw] + [len(lines)]
    for cut in cuts:
        prefix = tmp_path / f"{path.stem}-{cut}.jsonl"
        prefix.write_bytes(b"".join(lines[:cut]))
        found = find_last_todos(prefix)
        expected = independent_last_todos(lines[:cut])
        got = None if found is None else [msgspec.to_builtins(t) for t in found]
        assert got == expected, (path.name, cut)


# Checked by hand against the files (the line numbers are 0-based): the unfinished items the rule
# names at the end of each transcript, and just before its last TodoWrite.
BY_HAND: dict[str, tuple[list[str] | None, list[str] | None]] = {
    "ccv-1af7fc5e-8455-4414-9ccd-011d40f70b2a": ([], ["Create CLAUDE.md with essential information"]),
    "ccv-5c0375b4-57a5-4f26-b12d-d022ee4e51b7": ([], ["Update CLAUDE.md with latest project information"]),
    # before line 430 the last main-chain TodoWrite is line 223; lines 255-426 are a sub-agent's
    "ccv-fe5e1c67-53e7-4862-81ae-d0e013e3270b": (
        [],
        [
            "Implement state management and CRUD operations",
            "Create main page layout and integrate components",
        ],
    ),
    "spotter-short": (None, None),
    "spotter-tool_heavy": (None, None),
}


@pytest.mark.parametrize("path", FIXTURE_PARAMS)
def test_the_unfinished_items_found_in_every_shared_transcript(path: Path, tmp_path: Path) -> None:
    at_end, before_last = BY_HAND[path.stem]
    found = find_last_todos(path)
    assert (None if found is None else [t.content for t in unfinished(found)]) == at_end
    lines = path.read_bytes().splitlines(keepends=True)
    last = max((i for i, raw in enumerate(lines) if b'"TodoWrite"' in raw), default=len(lines))
    prefix = tmp_path / "prefix.jsonl"
    prefix.write_bytes(b"".join(lines[:last]))
    found = find_last_todos(prefix)
    assert (None if found is None else [t.content for t in unfinished(found)]) == before_last
    assert summary(found)[0] == (not before_last)


def test_a_todowrite_claude_code_would_refuse_leaves_the_list_before_it(tmp_path: Path) -> None:
    def write(todos: Any, *, sidechain: bool = False) -> bytes:
        block = {"type": "tool_use", "id": "t", "name": "TodoWrite", "input": {"todos": todos}}
        line = {"type": "assistant", "isSidechain": sidechain, "message": {"id": "m", "content": [block]}}
        return json.dumps(line).encode() + b"\n"

    path = tmp_path / "t.jsonl"
    path.write_bytes(
        write([{"content": "Ship", "status": "pending"}])
        + write([{"content": "Ship", "status": "done"}])  # not a status: refused
        + write("not a list")
        + write([{"content": "Sub", "status": "completed"}], sidechain=True)
        + b"not json TodoWrite\n"
        + b'{"type": "user", "message": {"content": "TodoWrite said so"}}\n'
        + write([{"content": "Half", "status": "pending"}])[:-5]  # a partial last line: not read yet
    )
    assert find_last_todos(path) == [Todo(content="Ship", status="pending")]
    assert find_last_todos(tmp_path / "t.jsonl", max_bytes=100) is None  # beyond reach: not known


@pytest.mark.parametrize("with_rule", [True, False])
def test_the_hook_reads_the_todo_list_only_for_a_todos_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_rule: bool
) -> None:
    """Reading a long transcript back for a TodoWrite has a cost: a loop without a todos rule never
    pays it, and one with it gets the list the transcript holds."""
    project = tmp_path / "p"
    (project / ".git").mkdir(parents=True)
    (project / ".claude").mkdir()
    rule = "[[rules]]\ntype = 'todos'\nname = 'todos'\n" if with_rule else ""
    (project / "ralph.toml").write_text("max_iterations = 5\n" + rule)
    (project / LOOP_FILE).write_text(json.dumps({"prompt": "Fix it", "started_at": "2026-11-22T00:00:00Z"}))
    transcript = tmp_path / "t.jsonl"
    call = {
        "type": "tool_use",
        "id": "t1",
        "name": "TodoWrite",
        "input": {"todos": [{"content": "A", "status": "pending"}]},
    }
    lines = [
        {"type": "assistant", "message": {"id": "m1", "content": [call]}},
        {"type": "assistant", "message": {"id": "m2", "content": [{"type": "text", "text": COMPLETE}]}},
    ]
    transcript.write_text("".join(json.dumps(line) + "\n" for line in lines))
    monkeypatch.chdir(project)
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
    reads: list[Path] = []

    def counted(path: Path) -> list[Todo] | None:
        reads.append(path)
        return find_last_todos(path)

    monkeypatch.setattr(native_module, "find_last_todos", counted)
    event = {"session_id": "abc", "transcript_path": str(transcript), "cwd": str(project)}
    out = run(json.dumps(event).encode(), home=Home.resolve(tmp_path / "home")).stdout
    assert reads == ([transcript] if with_rule else [])
    if with_rule:
        assert json.loads(out)["reason"].endswith("- todos: 1 todo remaining: A")
    else:
        assert out.startswith("✅ Ralph loop complete after 1 iteration")


# --- Claude Code 2.1.328's task tools (the shapes of tests/fixtures/clients/claude-code-2.1.328/) -----


def _assistant(*calls: tuple[str, str, dict[str, Any]], sidechain: bool = False) -> dict[str, Any]:
    blocks = [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
    return {"type": "assistant", "isSidechain": sidechain, "message": {"id": "m", "content": blocks}}


def _result(tool_id: str, result: Any, *, error: bool = False, sidechain: bool = False) -> dict[str, Any]:
    block = {
        "type": "tool_result",
        "tool_use_id": tool_id,
        "content": "",
        **({"is_error": True} if error else {}),
    }
    return {
        "type": "user",
        "isSidechain": sidechain,
        "toolUseResult": result,
        "message": {"content": [block]},
    }


def test_the_task_list_follows_create_update_delete_and_list(tmp_path: Path) -> None:
    rows = [
        _assistant(("t1", "TaskCreate", {"subject": "A", "description": "a", "activeForm": "Doing A"})),
        _result("t1", {"task": {"id": "1", "subject": "A"}}),
        _assistant(("t2", "TaskCreate", {"subject": "B", "description": "b"})),
        _result("t2", {"task": {"id": "2", "subject": "B"}}),
        _assistant(("t3", "TaskCreate", {"subject": "C", "description": "c"})),
        _result("t3", {"task": {"id": "3", "subject": "C"}}),
        _assistant(("u1", "TaskUpdate", {"taskId": "1", "status": "in_progress", "subject": "A!"})),
        _result("u1", {"success": True, "taskId": "1", "updatedFields": ["status", "subject"]}),
        _assistant(("u2", "TaskUpdate", {"taskId": "2", "status": "deleted"})),
        _result("u2", {"success": True, "taskId": "2"}),
        _assistant(("u3", "TaskUpdate", {"taskId": "3", "status": "completed"})),
        _result("u3", "Error: no such task", error=True),  # refused: C stays pending
        _assistant(("s1", "TaskCreate", {"subject": "Sub", "description": "x"}), sidechain=True),
        _result("s1", {"task": {"id": "9", "subject": "Sub"}}, sidechain=True),  # a sub-agent's own
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert find_last_todos(path) == [
        Todo(content="A!", status="in_progress", activeForm="Doing A"),
        Todo(content="C", status="pending"),
    ]
    listed = [{"id": "3", "subject": "C", "status": "completed", "blockedBy": []}]
    with path.open("a") as f:  # TaskList's result is the whole list as the client holds it
        f.write(json.dumps(_assistant(("l1", "TaskList", {}))) + "\n")
        f.write(json.dumps(_result("l1", {"tasks": listed})) + "\n")
    assert find_last_todos(path) == [Todo(content="C", status="completed")]  # read back to the snapshot only


def test_a_todowrite_the_client_refused_does_not_count(tmp_path: Path) -> None:
    first = {"todos": [{"content": "Ship", "status": "completed"}]}
    second = {"todos": [{"content": "Never", "status": "pending"}]}
    rows = [
        _assistant(("w1", "TodoWrite", first)),
        _result("w1", "Todos have been modified successfully"),
        _assistant(("w2", "TodoWrite", second)),
        _result("w2", "No such tool available: TodoWrite", error=True),
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert find_last_todos(path) == [Todo(content="Ship", status="completed")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[2:]))
    assert find_last_todos(path) is None  # the only list written was refused
