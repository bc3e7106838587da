"""The MCP tools' schemas come from the engine's own types and vocabularies, never from copies."""

from __future__ import annotations

import json
from typing import get_args, get_type_hints

import pytest

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


def test_validate_completion_takes_camel_case_and_seed_002s_names_too() -> None:
    """Every tool's arguments are camelCase, validate_completion's too; the snake_case names of seed
    002's contract, which it took before, still decode (and a call may not give both)."""
    fields = s.json_schema(s.CompletionArgs)["properties"]
    assert set(fields) == {"taskId", "stopReason", "toolCount", "retryCount"}
    assert set(s.json_schema(s.CompletionResult)["properties"]) == {"complete", "reason"}
    new = decode("validate_completion", {"taskId": "t", "retryCount": 2, "toolCount": 1, "stopReason": "x"})
    old = decode(
        "validate_completion", {"taskId": "t", "retry_count": 2, "tool_count": 1, "stop_reason": "x"}
    )
    assert new == old == s.CompletionArgs(task_id="t", retry_count=2, tool_count=1, stop_reason="x")
    for arguments, said in (
        ({"taskId": "t", "retry_count": 1, "retryCount": 1}, "retry_count: the same argument as retryCount"),
        ({"taskId": "t", "retry_count": -1}, "retry_count: expected"),
        ({"taskId": "t", "retryCount": -1}, "retryCount: expected"),
    ):
        with pytest.raises(ToolCallError, match=f"^validate_completion: {said}"):
            decode("validate_completion", arguments)


@pytest.mark.parametrize("tool", ["validate_completion", "hook_register"])
def test_every_argument_of_these_tools_is_described(tool: str) -> None:
    properties = s.json_schema(s.TOOLS[tool][0])["properties"]
    assert all(p.get("description") for p in properties.values()), properties
