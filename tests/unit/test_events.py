"""The vocabulary's evolution rules (see ledger/events.py) and round trips."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import events as E
from ledger.storage.schema import EVENT_COLUMNS, SchemaConflict, duckdb_type, event_columns

ROOT = Path(__file__).resolve().parents[2]

# Released tags, in order. Adding a tag appends here; nothing is ever removed.
RELEASED_TAGS = (
    "session_started",
    "hook_registered",
    "hooks_cleared",
    "iteration_started",
    "agent_turn",
    "promise_detected",
    "validation_ran",
    "signal_resolved",
    "hook_decided",
    "guard_tripped",
    "checkpoint_created",
    "checkpoint_expired",
    "override",
    "stop_decided",
    "session_completed",
    "session_blocked",
    "session_escalated",
    "error_recorded",
    "rate_limited",
    "subagent_stopped",
    "notification_sent",
    "summary_given",
    "model_tokens",
    "task_started",
    "task_completed",
    "task_blocked",
)

# Fields without a default, per tag, as first released. A new field must have a
# default, so this set may never grow.
RELEASED_REQUIRED = {
    "session_started": {"session_id"},
    "hook_registered": {"session_id", "hook_id", "hook_type"},
    "hooks_cleared": {"session_id"},
    "iteration_started": {"session_id"},
    "agent_turn": {"session_id"},
    "promise_detected": {"session_id", "promise"},
    "validation_ran": {"session_id"},
    "signal_resolved": {"session_id", "signal"},
    "hook_decided": {"session_id", "hook_id"},
    "guard_tripped": {"session_id", "guard"},
    "checkpoint_created": {"session_id", "checkpoint_id"},
    "checkpoint_expired": {"session_id", "checkpoint_id"},
    "override": {"session_id", "kind"},
    "stop_decided": {"session_id", "decision"},
    "session_completed": {"session_id"},
    "session_blocked": {"session_id"},
    "session_escalated": {"session_id"},
    "error_recorded": {"session_id", "component"},
    "subagent_stopped": {"session_id"},
    "notification_sent": {"session_id"},
}


def required_fields(cls: type[E.Event]) -> set[str]:
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    return {f.name for f in info.fields if f.required}


def test_tags_are_permanent() -> None:
    assert E.TAGS[: len(RELEASED_TAGS)] == RELEASED_TAGS
    assert len(set(E.TAGS)) == len(E.TAGS)


def test_the_manual_names_every_event_type() -> None:
    """docs/ledger.md's table of events has a row for every tag (``rate_limited`` had none)."""
    table = (ROOT / "docs" / "ledger.md").read_text().split("## Events", 1)[1].split("\n### ", 1)[0]
    rows = {
        tag
        for line in table.splitlines()
        if line.startswith("| `")
        for tag in re.findall(r"`(\w+)`", line.split("|")[1])
    }
    assert rows == {str(cls.__struct_config__.tag) for cls in E.EVENT_TYPES}


@pytest.mark.parametrize("cls", E.EVENT_TYPES, ids=lambda c: str(c.__struct_config__.tag))
def test_no_new_required_fields(cls: type[E.Event]) -> None:
    tag = str(cls.__struct_config__.tag)
    assert required_fields(cls) <= RELEASED_REQUIRED.get(tag, {"session_id"})


@pytest.mark.parametrize("cls", E.EVENT_TYPES, ids=lambda c: str(c.__struct_config__.tag))
def test_events_are_frozen_and_tagged(cls: type[E.Event]) -> None:
    cfg = cls.__struct_config__
    assert cfg.frozen and cfg.tag_field == "type"
    with pytest.raises(TypeError):
        cls("positional-session-id")  # type: ignore[call-arg]  # keyword-only


def test_old_journal_lines_decode_with_defaults() -> None:
    line = b'{"type":"agent_turn","session_id":"s","seq":3,"ts":"2025-12-30T10:01:00Z","iteration":1}'
    event = E.decode(line)
    assert isinstance(event, E.AgentTurn)
    assert event.tokens == E.TokenUsage() and event.files_modified == [] and event.stop_reason == ""


def test_a_subagent_stopped_line_with_only_its_envelope_decodes_with_defaults() -> None:
    event = E.decode(b'{"type":"subagent_stopped","session_id":"s","seq":4,"iteration":2}')
    assert isinstance(event, E.SubagentStopped)
    assert (event.agent_id, event.tokens, event.tool_count, event.files_modified) == (
        "",
        E.TokenUsage(),
        0,
        [],
    )


def test_envelope_defaults_decode() -> None:
    event = E.decode(b'{"type":"session_started","session_id":"s"}')
    assert (event.seq, event.iteration, event.ts) == (0, 0, E.EPOCH)


def test_unknown_fields_are_skipped() -> None:
    line = b'{"type":"hooks_cleared","session_id":"s","seq":1,"from_the_future":[1,2],"hook_ids":["h"]}'
    event = E.decode(line)
    assert event == E.HooksCleared(session_id="s", seq=1, hook_ids=["h"])


def test_unknown_tag_is_an_error() -> None:
    with pytest.raises(msgspec.ValidationError, match="teleported"):
        E.decode(b'{"type":"teleported","session_id":"s","seq":1}')


def test_one_field_name_has_one_type() -> None:
    assert EVENT_COLUMNS["files_modified"] == "VARCHAR[]"
    assert EVENT_COLUMNS["tokens"].startswith("STRUCT(")
    assert EVENT_COLUMNS["config"] == "JSON"


def test_conflicting_field_types_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    class Clash(E.Event, frozen=True, kw_only=True, tag="clash_for_test"):
        reason: int = 0

    monkeypatch.setattr("ledger.storage.schema.EVENT_TYPES", (*E.EVENT_TYPES, Clash))
    with pytest.raises(SchemaConflict, match=r"'reason' is VARCHAR in .* but BIGINT in clash_for_test"):
        event_columns()


def test_unmappable_type_is_refused() -> None:
    with pytest.raises(SchemaConflict):
        duckdb_type(mi.type_info(tuple[int, str]))


# --- round trips -------------------------------------------------------------


def strategy_for(t: mi.Type) -> st.SearchStrategy[Any]:
    """A hypothesis strategy producing values of one msgspec type."""
    text = st.text(max_size=20)
    match t:
        case mi.StrType():
            return text
        case mi.LiteralType(values=values):
            return st.sampled_from(values)
        case mi.BoolType():
            return st.booleans()
        case mi.IntType():
            return st.integers(min_value=-(2**53), max_value=2**53)
        case mi.FloatType():
            return st.floats(allow_nan=False, allow_infinity=False)
        case mi.DateTimeType():
            return st.datetimes(
                min_value=datetime(1971, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
            )
        case mi.ListType(item_type=item):
            return st.lists(strategy_for(item), max_size=3)
        case mi.DictType(value_type=mi.StrType()):
            return st.dictionaries(text, text, max_size=3)
        case mi.DictType():
            return st.dictionaries(text, st.one_of(st.integers(), text, st.booleans()), max_size=3)
        case mi.StructType(cls=cls, fields=fields):
            return st.builds(cls, **{f.name: strategy_for(f.type) for f in fields})
        case mi.UnionType(types=types):
            return st.one_of([strategy_for(x) for x in types])
        case mi.NoneType():
            return st.none()
    raise AssertionError(f"no strategy for {t!r}")


def event_strategy() -> st.SearchStrategy[E.Event]:
    return st.one_of([strategy_for(mi.type_info(cls)) for cls in E.EVENT_TYPES])


@settings(max_examples=300, deadline=None)
@given(event_strategy())
def test_encode_decode_round_trip(event: E.Event) -> None:
    line = E.encode(event)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert E.decode(line) == event


@settings(max_examples=50, deadline=None)
@given(st.lists(event_strategy(), max_size=10))
def test_encode_lines_decode_lines_round_trip(events: list[E.AnyEvent]) -> None:
    assert E.decode_lines(E.encode_lines(events)) == events
