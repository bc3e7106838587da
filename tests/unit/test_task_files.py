"""Task files (docs/tasks.md): the three formats read, a task ticked off atomically with every
other byte kept, and a bad file's one line naming the file, the place and what was expected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.core.errors import TaskFileError
from ledger.events import TaskSpec
from ledger.loop.tasks.files import mark_done, read_tasks

MARKDOWN = (
    b"# Plan\r\n"
    b"\r\n"
    b"Intro with a fake box: - [ ] not at the start\r\n"
    b"- [ ] first task\r\n"
    b"  details of the first\r\n"
    b"    - [ ] a nested box is part of the description\r\n"
    b"- [x] done already\r\n"
    b"+ [ ]   third,   spaced  \r\n"
    b"\xc3\xa9t\xc3\xa9 \xe2\x80\x94 unicode stays\r\n"
    b"- [ ] last, no newline at the end"
)


def test_a_markdown_checklist_reads_its_top_level_items(tmp_path: Path) -> None:
    path = tmp_path / "TASKS.md"
    path.write_bytes(MARKDOWN)
    listed = read_tasks(path)
    assert listed.format == "markdown"
    assert [(t.task_no, t.title, t.done) for t in listed.tasks] == [
        (1, "first task", False),
        (2, "done already", True),
        (3, "third,   spaced", False),
        (4, "last, no newline at the end", False),
    ]
    assert (
        listed.tasks[0].description
        == "  details of the first\n    - [ ] a nested box is part of the description"
    )


@pytest.mark.parametrize("no", [1, 3, 4])
def test_ticking_a_markdown_task_changes_one_byte(tmp_path: Path, no: int) -> None:
    path = tmp_path / "TASKS.md"
    path.write_bytes(MARKDOWN)
    task = read_tasks(path).tasks[no - 1]
    mark_done(path, task)
    after = path.read_bytes()
    changed = [i for i, (a, b) in enumerate(zip(MARKDOWN, after, strict=True)) if a != b]
    assert len(changed) == 1 and after[changed[0] : changed[0] + 1] == b"x"
    assert read_tasks(path).tasks[no - 1].done
    mark_done(path, task)  # again: nothing changes
    assert path.read_bytes() == after


def test_a_moved_task_is_found_by_its_title(tmp_path: Path) -> None:
    path = tmp_path / "TASKS.md"
    path.write_text("- [ ] a\n- [ ] b\n")
    b = read_tasks(path).tasks[1]
    path.write_text("- [ ] new one\n- [ ] a\n- [ ] b\n")
    mark_done(path, b)
    assert path.read_text() == "- [ ] new one\n- [ ] a\n- [x] b\n"


def test_a_task_the_file_lost_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "TASKS.md"
    path.write_text("- [ ] other\n")
    with pytest.raises(TaskFileError) as caught:
        mark_done(path, TaskSpec(task_no=1, title="gone"))
    assert str(caught.value) == f"{path}: task 1: expected a line '- [ ] gone'; the file no longer holds it"


PRD = {
    "name": "demo",
    "branchName": "ralph/demo",
    "userStories": [
        {"id": "US-002", "title": "second", "description": "d2", "acceptanceCriteria": ["a", "b"],
         "priority": 2, "passes": False, "notes": ""},
        {"id": "US-001", "title": "first", "description": "d1", "acceptanceCriteria": [],
         "priority": 1, "passes": True},
        {"id": "US-003", "title": "third", "priority": 2, "passes": False,
         "rules": [{"name": "t", "type": "command", "argv": ["true"]}], "max_iterations": 4},
    ],
}  # fmt: skip


def test_a_prd_json_reads_its_stories_by_priority(tmp_path: Path) -> None:
    path = tmp_path / "prd.json"
    path.write_text(json.dumps(PRD, indent=2))
    listed = read_tasks(path)
    assert listed.format == "prd"
    assert [(t.task_no, t.key, t.title, t.done) for t in listed.tasks] == [
        (1, "US-001", "first", True),
        (2, "US-002", "second", False),
        (3, "US-003", "third", False),
    ]
    assert listed.tasks[1].description == "d2\nAcceptance criteria:\n- a\n- b"
    assert listed.tasks[2].rules == [{"name": "t", "type": "command", "argv": ["true"]}]
    assert listed.tasks[2].max_iterations == 4


def test_ticking_a_story_sets_passes_and_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "prd.json"
    path.write_text(json.dumps(PRD, indent=2) + "\n")
    mark_done(path, read_tasks(path).tasks[1])
    after = json.loads(path.read_text())
    want = json.loads(json.dumps(PRD))
    want["userStories"][0]["passes"] = True
    assert after == want
    assert path.read_text() == json.dumps(want, indent=2) + "\n"  # its layout kept


HAND_WRITTEN_PRD = (
    "\ufeff{\r\n"
    '    "project": "caf\\u00e9",\r\n'
    '    "userStories": [\r\n'
    '        {"id": "US-1", "title": "first", "acceptanceCriteria": ["a", "b"], "passes": false},\r\n'
    "        {\r\n"
    '            "title": "second",\r\n'
    '            "id": "US-2"\r\n'
    "        },\r\n"
    '        {"id": "US-3", "title": "third", "passes" :false, "notes": "x"}\r\n'
    "    ]\r\n"
    "}"
)
"""A prd.json as a person writes it: a BOM, CRLF, four-space indent, compact arrays, keys in their own
order, an escape, a story without ``passes``, a space before a colon, no last newline."""


def test_ticking_a_hand_written_prd_changes_only_what_it_sets(tmp_path: Path) -> None:
    path = tmp_path / "prd.json"
    path.write_bytes(HAND_WRITTEN_PRD.encode())
    listed = read_tasks(path)
    mark_done(path, listed.tasks[0])
    assert path.read_bytes() == HAND_WRITTEN_PRD.replace('"passes": false}', '"passes": true}', 1).encode()
    mark_done(path, listed.tasks[1])  # no passes: one added after its last key, laid out as that one
    mark_done(path, listed.tasks[2])
    want = (
        HAND_WRITTEN_PRD.replace('"passes": false}', '"passes": true}', 1)
        .replace('"id": "US-2"\r\n', '"id": "US-2",\r\n            "passes": true\r\n')
        .replace('"passes" :false', '"passes" :true')
    )
    assert path.read_bytes() == want.encode()
    assert [t.done for t in read_tasks(path).tasks] == [True, True, True]
    mark_done(path, listed.tasks[1])  # again: nothing changes
    assert path.read_bytes() == want.encode()


def test_a_json_list_keeps_its_layout_when_ticked(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    text = '[\n  "one",\n  {"title": "two", "rules": [ ]},\n  {"title": "three", "done": false}\n]\n'
    path.write_text(text)
    listed = read_tasks(path)
    for task in listed.tasks:
        mark_done(path, task)
    assert path.read_text() == (
        '[\n  {"title": "one", "done": true},\n  {"title": "two", "rules": [ ], "done": true},\n'
        '  {"title": "three", "done": true}\n]\n'
    )


def test_a_json_list_of_tasks(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    path.write_text('["one", {"title": "two", "description": "more", "done": true}, {"title": "three"}]')
    listed = read_tasks(path)
    assert [(t.title, t.description, t.done) for t in listed.tasks] == [
        ("one", "", False),
        ("two", "more", True),
        ("three", "", False),
    ]
    mark_done(path, listed.tasks[0])
    mark_done(path, listed.tasks[2])
    assert json.loads(path.read_text()) == [
        {"title": "one", "done": True},
        {"title": "two", "description": "more", "done": True},
        {"title": "three", "done": True},
    ]


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        ("t.md", "# nothing to do\n", "expected at least one task (a line such as '- [ ] write the parser')"),
        ("t.md", "- [ ]  \n", "line 1: expected a title after the box ('- [ ] title')"),
        ("t.json", "[]", "expected at least one task"),
        ("t.json", "[1, 2", "line 1: expected JSON (Expecting ',' delimiter)"),
        ("t.json", '"a task"', "expected a JSON list of tasks or a prd.json object with userStories"),
        ("t.json", "[3]", "[0]: expected a task title or an object, got int"),
        ("t.json", '[{"title": "a", "owner": "me"}]', "[0].owner: unknown key; expected one of "
         "title, description, rules, max_iterations, done"),
        ("t.json", '[{"description": "no title"}]', "[0].title: expected a non-empty string, got None"),
        ("t.json", '[{"title": "a", "max_iterations": 0}]',
         "[0].max_iterations: expected an integer of at least 1, got 0"),
        ("t.json", '[{"title": "a", "done": "yes"}]', "[0].done: expected true or false, got 'yes'"),
        ("t.json", '[{"title": "a", "rules": [{"name": "r", "type": "command", "argv": ["x"], '
         '"timeout_s": "soon"}]}]',
         "[0].rules[0].timeout_s: expected a number, got 'soon'"),
        ("prd.json", '{"name": "x"}', "userStories: expected a list of user stories (ralph-tui's prd.json)"),
        ("prd.json", '{"userStories": [{"title": "a", "passes": "no"}]}',
         "userStories[0].passes: expected true or false, got 'no'"),
        ("prd.json", '{"userStories": [{"title": "a", "priority": "high"}]}',
         "userStories[0].priority: expected a number, got 'high'"),
    ],
)  # fmt: skip
def test_a_bad_file_is_one_line_naming_where(tmp_path: Path, name: str, text: str, line: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(TaskFileError) as caught:
        read_tasks(path)
    assert str(caught.value) == f"{path}: {line}"


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match=r"^.*nope\.md: cannot be read \(.*No such file"):
        read_tasks(tmp_path / "nope.md")
