"""Task files: reading a task list and ticking a task off, atomically (docs/tasks.md).

Three formats: a Markdown checklist (``- [ ] title``; every other line is kept byte for byte), a
``prd.json`` in ralph-tui's shape (``userStories`` with ``id``, ``title``, ``description``,
``acceptanceCriteria``, ``priority``, ``passes``) and a JSON list of tasks (strings, or objects
with ``title`` and optional ``description``, ``rules``, ``max_iterations``, ``done``). A file that
does not read is one ``TaskFileError`` line naming the file, where and what was expected.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from ledger.core.atomic import atomic_write
from ledger.core.errors import TaskFileError, bad_task_file, one_line
from ledger.events import TaskSpec
from ledger.loop.tasks.json_spans import Span, spans, with_member
from ledger.loop.validate.rules import RuleConfigError, parse_rules

Format = Literal["markdown", "prd", "json"]

BOX: Final = re.compile(
    rb"^(?P<lead>[-*+][ \t]+\[)(?P<mark>[ xX])(?P<close>\][ \t]+)(?P<title>.*?)(?P<end>\r?\n|\r)?$"
)
"""A top-level Markdown checklist item: ``- [ ] title`` (``*`` / ``+`` bullets, ``[x]`` / ``[X]`` done)."""

TASK_KEYS: Final = ("title", "description", "rules", "max_iterations", "done")
"""The keys of a task object in a JSON list of tasks."""


@dataclass(frozen=True, slots=True)
class TaskFile:
    """A task file as read: its path, format and tasks (in order; ``task_no`` from 1)."""

    path: Path
    format: Format
    tasks: tuple[TaskSpec, ...]


def file_format(path: Path, data: bytes) -> Format:
    """The format of the task file ``path`` holding ``data``: Markdown unless it is JSON (a
    ``.json`` name, or text starting with ``[`` or ``{``, after a BOM); a JSON object is a prd.json."""
    head = data.removeprefix(codecs.BOM_UTF8).lstrip()[:1]
    if path.suffix.lower() == ".json" or head in (b"[", b"{"):
        return "prd" if head == b"{" else "json"
    return "markdown"


def read_tasks(path: Path) -> TaskFile:
    """The task list in ``path``; ``TaskFileError`` (one line) when it cannot be read or holds none."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise bad_task_file(path, "", f"cannot be read ({one_line(exc)})") from None
    fmt = file_format(path, data)
    tasks = _markdown(path, data) if fmt == "markdown" else _json(path, data, fmt)
    if not tasks:
        expected = "expected at least one task (a line such as '- [ ] write the parser')"
        if fmt != "markdown":
            expected = "expected at least one task" + (" in userStories" if fmt == "prd" else "")
        raise bad_task_file(path, "", expected)
    return TaskFile(path, fmt, tuple(tasks))


def _markdown(path: Path, data: bytes) -> list[TaskSpec]:
    """The checklist's top-level items; the indented lines under an item are its description."""
    tasks: list[TaskSpec] = []
    lines = data.splitlines()
    for i, raw in enumerate(lines):
        m = BOX.match(raw)
        if m is None:
            continue
        title = _text(path, f"line {i + 1}", m["title"]).strip()
        if not title:
            raise bad_task_file(path, f"line {i + 1}", "expected a title after the box ('- [ ] title')")
        below: list[str] = []
        for nxt in lines[i + 1 :]:
            if nxt.strip() and not nxt[:1].isspace():
                break
            below.append(_text(path, f"line {i + 2 + len(below)}", nxt))
        description = "\n".join(below).strip("\n")
        done = m["mark"] in (b"x", b"X")
        tasks.append(TaskSpec(task_no=len(tasks) + 1, title=title, description=description, done=done))
    return tasks


def _text(path: Path, where: str, raw: bytes) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise bad_task_file(path, where, "expected UTF-8 text") from None


def _json(path: Path, data: bytes, fmt: Format) -> list[TaskSpec]:
    try:
        doc = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        line = f"line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else ""
        what = exc.msg if isinstance(exc, json.JSONDecodeError) else "UTF-8 text"
        raise bad_task_file(path, line, f"expected JSON ({what})") from None
    if fmt == "prd":
        return _prd(path, doc)
    if not isinstance(doc, list):
        raise bad_task_file(path, "", "expected a JSON list of tasks or a prd.json object with userStories")
    return [_task(path, f"[{i}]", item, i + 1) for i, item in enumerate(doc)]


def _task(path: Path, where: str, item: object, no: int) -> TaskSpec:
    """One entry of a JSON list of tasks: a title, or an object of ``TASK_KEYS``."""
    if isinstance(item, str):
        if not item.strip():
            raise bad_task_file(path, where, "expected a task title, got an empty string")
        return TaskSpec(task_no=no, title=item.strip())
    if not isinstance(item, dict):
        raise bad_task_file(path, where, f"expected a task title or an object, got {type(item).__name__}")
    unknown = [k for k in item if k not in TASK_KEYS]
    if unknown:
        raise bad_task_file(
            path, f"{where}.{unknown[0]}", f"unknown key; expected one of {', '.join(TASK_KEYS)}"
        )
    return _spec(path, where, item, no, done=_bool(path, f"{where}.done", item.get("done", False)))


def _prd(path: Path, doc: object) -> list[TaskSpec]:
    """A prd.json's user stories, by ``priority`` (lower first; none: last), else in file order."""
    stories = doc.get("userStories") if isinstance(doc, dict) else None
    if not isinstance(stories, list):
        raise bad_task_file(path, "userStories", "expected a list of user stories (ralph-tui's prd.json)")
    read: list[tuple[float, int, dict[str, Any]]] = []
    for i, story in enumerate(stories):
        where = f"userStories[{i}]"
        if not isinstance(story, dict):
            raise bad_task_file(path, where, f"expected an object, got {type(story).__name__}")
        priority = story.get("priority", None)
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, (int, float))):
            raise bad_task_file(path, f"{where}.priority", f"expected a number, got {priority!r}")
        read.append((float("inf") if priority is None else float(priority), i, story))
    tasks = []
    for no, (_, i, story) in enumerate(sorted(read, key=lambda r: r[:2]), 1):
        where = f"userStories[{i}]"
        criteria = story.get("acceptanceCriteria", [])
        if not isinstance(criteria, list) or not all(isinstance(c, str) for c in criteria):
            raise bad_task_file(path, f"{where}.acceptanceCriteria", "expected a list of strings")
        key = story.get("id", "")
        if not isinstance(key, (str, int)) or isinstance(key, bool):
            raise bad_task_file(path, f"{where}.id", f"expected a string, got {key!r}")
        described = str(story.get("description", "") or "")
        if criteria:
            described = "\n".join([described, "Acceptance criteria:", *(f"- {c}" for c in criteria)]).strip()
        fields = {**story, "description": described}
        done = _bool(path, f"{where}.passes", story.get("passes", False))
        tasks.append(_spec(path, where, fields, no, done=done, key=str(key)))
    return tasks


def _spec(path: Path, where: str, item: dict[str, Any], no: int, *, done: bool, key: str = "") -> TaskSpec:
    """A task object's title, description, rules (checked as the loop's are) and max_iterations."""
    title = item.get("title")
    if not isinstance(title, str) or not title.strip():
        raise bad_task_file(path, f"{where}.title", f"expected a non-empty string, got {title!r}")
    description = item.get("description", "")
    if not isinstance(description, str):
        raise bad_task_file(path, f"{where}.description", f"expected a string, got {description!r}")
    rules = item.get("rules", [])
    try:
        parse_rules(rules, str(path), root=f"{where}.rules")
    except RuleConfigError as exc:
        raise TaskFileError(one_line(exc)) from None
    cap = item.get("max_iterations")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
        raise bad_task_file(
            path, f"{where}.max_iterations", f"expected an integer of at least 1, got {cap!r}"
        )
    return TaskSpec(
        task_no=no,
        title=title.strip(),
        description=description,
        key=key,
        rules=list(rules),
        max_iterations=cap,
        done=done,
    )


def _bool(path: Path, where: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise bad_task_file(path, where, f"expected true or false, got {value!r}")
    return value


# -- ticking a task off ----------------------------------------------------------------------------
def mark_done(path: Path, task: TaskSpec) -> None:
    """Record ``task`` as done in the file at ``path``, in one atomic rewrite: its box ticked
    (Markdown: only that byte changes), ``passes: true`` (prd.json) or ``done: true`` (a JSON list).
    The task is found at its place, else by its title (or prd id) where the file moved meanwhile;
    ``TaskFileError`` when the file no longer holds it (the ledger stays the truth)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise bad_task_file(path, "", f"cannot be read ({one_line(exc)})") from None
    fmt = file_format(path, data)
    new = _tick_markdown(path, data, task) if fmt == "markdown" else _tick_json(path, data, fmt, task)
    if new != data:
        try:
            atomic_write(path, new, mode=path.stat().st_mode & 0o7777)
        except OSError as exc:
            raise bad_task_file(path, "", f"cannot be written ({one_line(exc)})") from None


def _tick_markdown(path: Path, data: bytes, task: TaskSpec) -> bytes:
    lines = data.splitlines(keepends=True)
    boxes = [i for i, line in enumerate(lines) if BOX.match(line)]
    at = _find(path, task, [_title(lines[i]) for i in boxes], f"expected a line '- [ ] {task.title}'")
    i = boxes[at]
    m = BOX.match(lines[i])
    assert m is not None
    lines[i] = (
        lines[i][: m.start("mark")] + b"x" + lines[i][m.end("mark") :] if m["mark"] == b" " else lines[i]
    )
    return b"".join(lines)


def _title(line: bytes) -> str:
    m = BOX.match(line)
    return m["title"].decode(errors="replace").strip() if m else ""


def _tick_json(path: Path, data: bytes, fmt: Format, task: TaskSpec) -> bytes:
    """The file with the task's ``passes`` / ``done`` set to true (a title alone becomes
    ``{"title": ..., "done": true}``), edited in place: every other byte stays (json_spans)."""
    bom = codecs.BOM_UTF8 if data.startswith(codecs.BOM_UTF8) else b""
    try:
        text = data[len(bom) :].decode()
        doc = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise bad_task_file(path, "", "expected UTF-8 JSON; it no longer reads") from None
    root = spans(text)
    if fmt == "prd":
        stories = doc.get("userStories") if isinstance(doc, dict) else None
        listed = root.member("userStories")
        if not isinstance(stories, list) or listed is None:
            raise bad_task_file(path, "userStories", "expected a list of user stories")
        ids = [str(s.get("id", "")) if isinstance(s, dict) else "" for s in stories]
        if task.key and task.key in ids:
            at = ids.index(task.key)
        else:
            titles = [str(s.get("title", "")) if isinstance(s, dict) else "" for s in stories]
            at = _find(
                path, task, titles, f"expected a user story {task.key or task.title!r}", by_place=False
            )
        text = _set_true(path, text, listed.items[at], "passes", f"userStories[{at}]")
    else:
        if not isinstance(doc, list):
            raise bad_task_file(path, "", "expected a JSON list of tasks")
        titles = [
            e if isinstance(e, str) else str(e.get("title", "")) if isinstance(e, dict) else "" for e in doc
        ]
        at = _find(path, task, [t.strip() for t in titles], f"expected a task {task.title!r}")
        item = root.items[at]
        if isinstance(doc[at], str):
            whole = json.dumps({"title": doc[at], "done": True}, ensure_ascii=False)
            text = text[: item.start] + whole + text[item.end :]
        else:
            text = _set_true(path, text, item, "done", f"[{at}]")
    return bom + text.encode()


def _set_true(path: Path, text: str, obj: Span, key: str, where: str) -> str:
    if obj.items or not text.startswith("{", obj.start):
        raise bad_task_file(path, where, "expected an object")
    return with_member(text, obj, key, "true")


def _find(path: Path, task: TaskSpec, titles: Sequence[str], expected: str, *, by_place: bool = True) -> int:
    """Where ``task`` is among ``titles``: at its place when the title there is its own, else the
    first with its title; ``TaskFileError`` when none has it."""
    at = task.task_no - 1
    if by_place and 0 <= at < len(titles) and titles[at] == task.title:
        return at
    if task.title in titles:
        return titles.index(task.title)
    raise bad_task_file(path, f"task {task.task_no}", f"{expected}; the file no longer holds it")
