"""The MCP tools' schemas come from the engine's own types and vocabularies, never from copies."""

from __future__ import annotations

import json
from typing import get_args, get_type_hints

import msgspec

from ledger import events as ev
from ledger.drivers.mcp import schemas as s
from ledger.drivers.mcp.tools import ToolCallError, decode
from ledger.loop.decide.stop_policies import PRESETS
from ledger.loop.validate.todos import Todo


def test_the_hook_types_are_the_preset_hooks() -> None:
    assert get_args(s.HookType) == PRESETS


def test_results_use_the_engines_types() -> None:
    todo = {"content": "Write the test", "status": "pending"}
    args = decode("iteration_validate", {"taskId": "t", "todos": [todo]})
    assert isinstance(args, s.ValidateArgs) and args.todos is not None
    assert type(args.todos[0]) is Todo
    assert get_args(get_type_hints(s.ValidationReport)["rules"]) == (ev.RuleResult,)
    assert get_type_hints(s.Validated)["completion_signal"] == ev.Signal
    assert get_type_hints(s.Status)["status"] == ev.SessionStatus
    assert get_type_hints(s.HookDecision)["action"] == ev.HookAction


def test_every_tool_takes_a_task_and_has_object_schemas() -> None:
    for name, (args, result, description) in s.TOOLS.items():
        schema = s.json_schema(args)
        assert schema["type"] == "object" and "taskId" in schema["required"], name
        assert s.json_schema(result)["type"] == "object", name
        assert description.endswith("."), name
        json.dumps(schema)  # plain JSON, as tools/list sends it
        refs = json.dumps(schema).count('"$ref"')
        assert refs == 0 or "$defs" in schema, name


def test_decode_names_the_tool_the_argument_and_what_was_expected() -> None:
    assert isinstance(decode("iteration_next", {"taskId": "t", "notes": "n"}), s.NextArgs)
    cases = {
        ("iteration_next", '{"notes": "n"}'): "iteration_next: taskId: missing required key",
        ("iteration_next", '{"taskId": 3}'): "iteration_next: taskId: expected a string, got 3",
        ("hook_register", '{"taskId": "t", "hookType": "x"}'): "hook_register: hookType: expected one of",
        (
            "iteration_next",
            '{"taskId": "t", "note": "n"}',
        ): "iteration_next: note: unknown key; expected one of",
        ("nope", "{}"): "unknown tool 'nope'",
    }
    for (tool, arguments), expected in cases.items():
        try:
            decode(tool, json.loads(arguments))
        except ToolCallError as exc:
            assert str(exc).startswith(expected), (tool, arguments, str(exc))
        else:
            raise AssertionError(f"{tool} {arguments} decoded")


def test_seed_002s_contract_keeps_its_own_names() -> None:
    fields = s.json_schema(s.CompletionArgs)["properties"]
    assert set(fields) == {"taskId", "stop_reason", "tool_count", "retry_count"}
    assert set(s.json_schema(s.CompletionResult)["properties"]) == {"complete", "reason"}
    assert msgspec.convert({"taskId": "t", "retry_count": 2}, s.CompletionArgs).retry_count == 2
