"""Where each value of a JSON text is: its span, and an object's members (key, where its key starts and
ends, value) or an array's items in file order. Ticking a task off in a JSON file edits only the value
it sets, so the rest of the user's file keeps its bytes: its indents, compact arrays, key order, escapes."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from json.decoder import scanstring  # type: ignore[attr-defined]  # (the stdlib's, untyped)

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class Span:
    """One JSON value of a text: ``text[start:end]``; an object's members (key, where its key
    starts and ends, its value) and an array's items, in file order."""

    start: int
    end: int
    members: list[tuple[str, int, int, Span]] = field(default_factory=list)
    items: list[Span] = field(default_factory=list)

    def member(self, key: str) -> Span | None:
        """The value of ``key`` (the last one, as ``json.loads`` reads a repeated key)."""
        found = [value for name, _, _, value in self.members if name == key]
        return found[-1] if found else None


def spans(text: str) -> Span:
    """The spans of ``text``, a JSON document that ``json.loads`` has read."""
    return _value(text, _skip(text, 0))


def _skip(text: str, i: int) -> int:
    m = _WS.match(text, i)
    assert m is not None
    return m.end()


def _value(text: str, i: int) -> Span:
    if text[i] == "{":
        members: list[tuple[str, int, int, Span]] = []
        j = _skip(text, i + 1)
        while text[j] != "}":
            start = j
            key, j = scanstring(text, j + 1)
            value = _value(text, _skip(text, _skip(text, j) + 1))  # past the colon
            members.append((key, start, j, value))
            j = _skip(text, value.end)
            if text[j] == ",":
                j = _skip(text, j + 1)
        return Span(i, j + 1, members=members)
    if text[i] == "[":
        items: list[Span] = []
        j = _skip(text, i + 1)
        while text[j] != "]":
            item = _value(text, j)
            items.append(item)
            j = _skip(text, item.end)
            if text[j] == ",":
                j = _skip(text, j + 1)
        return Span(i, j + 1, items=items)
    _, end = _DECODER.raw_decode(text, i)
    return Span(i, end)


def with_member(text: str, obj: Span, key: str, literal: str) -> str:
    """``text`` with the member ``key`` of the object at ``obj`` set to ``literal`` (JSON text): its
    value replaced, else a member added after the last one, spaced as that one is."""
    value = obj.member(key)
    if value is not None:
        return text[: value.start] + literal + text[value.end :]
    if not obj.members:
        return f"{text[: obj.start]}{{{json.dumps(key)}: {literal}}}{text[obj.end :]}"
    _, start, key_end, last = obj.members[-1]
    before = obj.members[-2][3].end if len(obj.members) > 1 else obj.start + 1
    space = text[before:start].rpartition(",")[2]  # from the comma (or the brace) to the last key
    colon = text[key_end : last.start]
    added = f",{space}{json.dumps(key, ensure_ascii=False)}{colon}{literal}"
    return text[: last.end] + added + text[last.end :]
