"""The ralph-loop plugin's state file, its Stop-hook decisions, ``loop start`` arguments and
``install_hook`` (``ledger.drivers.claude_code.stop.plugin``)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from msgspec.structs import replace

from ledger.drivers.claude_code.install.settings import SettingsError, install_hook
from ledger.drivers.claude_code.stop.plugin import (
    LoopArgs,
    LoopState,
    PluginDecision,
    StateError,
    UsageError,
    apply_decision,
    new_state,
    parse_loop_args,
    parse_state,
    plugin_decision,
    read_state,
    render_state,
    write_state,
)
from ledger.loop.validate.promises import unwrap

ROOT = Path(__file__).resolve().parents[2]

# What the plugin's setup script writes (newer version: with session_id, empty until claimed).
PLUGIN_FILE = """---
active: true
iteration: 1
session_id:\x20
max_iterations: 20
completion_promise: "DONE"
started_at: "2026-01-02T03:04:05Z"
---

Build a todo API
"""

# The older ralph-wiggum layout: no session_id line, no promise.
LEGACY_FILE = """---
active: true
iteration: 4
max_iterations: 0
completion_promise: null
started_at: "2025-12-01T00:00:00Z"
---

Fix the auth bug
"""


def state(**kw: object) -> LoopState:
    base = LoopState(iteration=1, max_iterations=0, completion_promise="DONE", prompt="Build a todo API")
    return replace(base, **kw)


def decide(s: LoopState | None, text: str | None = "working on it", session: str = "") -> PluginDecision:
    return plugin_decision(s, text, hook_session_id=session)


def one_line(err: pytest.ExceptionInfo[Exception]) -> str:
    msg = str(err.value)
    assert "\n" not in msg and msg
    return msg


# --------------------------------------------------------------------------- state file


def test_reads_the_file_the_plugin_setup_writes(tmp_path: Path) -> None:
    path = tmp_path / "ralph-loop.local.md"
    path.write_text(PLUGIN_FILE, encoding="utf-8")
    assert read_state(path) == LoopState(
        active=True,
        iteration=1,
        max_iterations=20,
        completion_promise="DONE",
        session_id="",
        started_at="2026-01-02T03:04:05Z",
        prompt="Build a todo API",
    )


def test_renders_exactly_the_plugin_layout() -> None:
    s = parse_state(PLUGIN_FILE)
    assert render_state(s) == PLUGIN_FILE
    assert "session_id: \n" in render_state(s)  # trailing space: the plugin's claim sed needs it


def test_reads_a_legacy_file_without_session_id() -> None:
    s = parse_state(LEGACY_FILE)
    assert (s.session_id, s.iteration, s.max_iterations, s.completion_promise) == ("", 4, 0, None)
    assert s.prompt == "Fix the auth bug"


def test_write_read_round_trip(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "ralph-loop.local.md"  # folder created
    s = LoopState(
        active=False,
        iteration=7,
        max_iterations=50,
        completion_promise='say "hi"  twice ',
        session_id="0b6f-42",
        started_at="2026-01-02T03:04:05Z",
        prompt="\nLine one\n---\n  indented: not a key\n\nlast",
        extra=(("clear_context", "true"), ("origin_cwd", '"/tmp/x"')),
    )
    write_state(path, s)
    assert read_state(path) == s
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left behind


def test_the_loops_ledger_session_round_trips_and_is_absent_until_named(tmp_path: Path) -> None:
    path = tmp_path / "s.md"
    s = replace(parse_state(PLUGIN_FILE), ledger_session="cc-abc-2")
    write_state(path, s)
    assert read_state(path) == s and "\nledger_session: cc-abc-2\n" in path.read_text(encoding="utf-8")
    assert "ledger_session" not in render_state(parse_state(PLUGIN_FILE))


def test_round_trip_without_optional_fields(tmp_path: Path) -> None:
    path = tmp_path / "s.md"
    s = LoopState(prompt="p")
    write_state(path, s)
    assert read_state(path) == s
    assert "started_at" not in path.read_text(encoding="utf-8")


def test_write_replaces_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "s.md"
    write_state(path, state(iteration=1))
    write_state(path, state(iteration=2))
    assert read_state(path) == state(iteration=2)


def test_absent_file_is_none(tmp_path: Path) -> None:
    assert read_state(tmp_path / "missing.md") is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("null", None),
        ("~", None),
        ("", None),
        ('"DONE"', "DONE"),
        ("DONE", "DONE"),
        ('"TASK COMPLETE"', "TASK COMPLETE"),
        ('"null"', "null"),  # kept; the decision treats it as no promise, like the plugin
        ("'DONE'", "'DONE'"),  # the plugin strips double quotes only
    ],
)
def test_completion_promise_values(raw: str, expected: str | None) -> None:
    text = f"---\niteration: 1\nmax_iterations: 0\ncompletion_promise: {raw}\n---\n\np\n"
    assert parse_state(text).completion_promise == expected


def test_crlf_and_spaces_around_values() -> None:
    text = '---\r\niteration:   3  \r\nmax_iterations: 5\r\nsession_id: "abc"\r\n---\r\n\r\nDo it\r\n'
    s = parse_state(text)
    assert (s.iteration, s.max_iterations, s.session_id, s.prompt) == (3, 5, "abc", "Do it")


def test_new_state_is_iteration_one_in_utc() -> None:
    args = LoopArgs(prompt="p", max_iterations=3, completion_promise="D")
    now = datetime(2026, 5, 6, 7, 8, 9, tzinfo=UTC)
    assert new_state(args, session_id="s1", now=now) == LoopState(
        iteration=1,
        max_iterations=3,
        completion_promise="D",
        session_id="s1",
        started_at="2026-05-06T07:08:09Z",
        prompt="p",
    )


def test_render_flattens_newlines_in_the_promise_and_refuses_multiline_ids() -> None:
    assert 'completion_promise: "A B"' in render_state(state(completion_promise="A\nB"))
    with pytest.raises(ValueError, match="session_id"):
        render_state(state(session_id="a\nb"))
    with pytest.raises(ValueError):
        LoopState(iteration=-1, prompt="p")


MALFORMED = [
    ("---\niteration: x\nmax_iterations: 0\n---\n\np\n", "iteration: expected a whole number, got 'x'"),
    ("---\niteration: -1\nmax_iterations: 0\n---\n\np\n", "iteration: expected a whole number, got '-1'"),
    ("---\niteration: 1.5\nmax_iterations: 0\n---\n\np\n", "iteration: expected a whole number, got '1.5'"),
    ("---\niteration:\nmax_iterations: 0\n---\n\np\n", "iteration: expected a whole number, got ''"),
    ("---\niteration: ٣\nmax_iterations: 0\n---\n\np\n", "iteration: expected a whole number"),
    ("---\nmax_iterations: 0\n---\n\np\n", "iteration: missing"),
    (
        "---\niteration: 1\nmax_iterations: ten\n---\n\np\n",
        "max_iterations: expected a whole number, got 'ten'",
    ),
    ("---\niteration: 1\n---\n\np\n", "max_iterations: missing"),
    (
        "---\nactive: yes\niteration: 1\nmax_iterations: 0\n---\n\np\n",
        "active: expected true or false, got 'yes'",
    ),
    ("---\niteration: 1\niteration: 2\nmax_iterations: 0\n---\n\np\n", "iteration: given twice"),
    ("---\niteration: 1\nmax_iterations: 0\njust words\n---\n\np\n", "line 4: expected 'key: value'"),
    ("iteration: 1\nmax_iterations: 0\n", "expected a '---' line opening the frontmatter"),
    ("", "expected a '---' line opening the frontmatter"),
    ("---\niteration: 1\nmax_iterations: 0\n\np\n", "the frontmatter has no closing '---' line"),
]


@pytest.mark.parametrize(("text", "problem"), MALFORMED)
def test_malformed_state_is_a_one_line_error(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "ralph-loop.local.md"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(StateError) as err:
        read_state(path)
    msg = one_line(err)
    assert msg.startswith(f"{path}: ")
    assert problem in msg


def test_unreadable_state_is_a_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.md"
    bad.write_bytes(b"---\niteration: \xff\n---\n")
    with pytest.raises(StateError) as err:
        read_state(bad)
    assert one_line(err) == f"{bad}: not UTF-8 text"
    with pytest.raises(StateError) as err:
        read_state(tmp_path)  # a folder
    assert one_line(err).startswith(f"{tmp_path}: cannot read: ")


# --------------------------------------------------------------------------- decisions


def test_no_state_file_allows_silently() -> None:
    d = decide(None)
    assert d == PluginDecision(
        action="allow", outcome="no_loop", reason="no loop state file", next_state=None
    )
    assert d.hook_json() is None and not d.ours and d.message_for_user is None


def test_blocks_with_the_prompt_and_increments_iteration() -> None:
    s = state(iteration=2, max_iterations=5)
    d = decide(s)
    assert (d.action, d.outcome, d.ours, d.completed, d.max_reached) == (
        "block",
        "continue",
        True,
        False,
        False,
    )
    assert d.reason == "Build a todo API"
    assert d.system_message == (
        "🔄 Ralph iteration 3 | To stop: output <promise>DONE</promise>"
        " (ONLY when statement is TRUE - do not lie to exit!)"
    )
    assert d.next_state == replace(s, iteration=3)
    assert d.message_for_user is None
    assert d.hook_json() == json.dumps(
        {"decision": "block", "reason": "Build a todo API", "systemMessage": d.system_message},
        indent=2,
        ensure_ascii=False,
    )


@pytest.mark.parametrize(("iteration", "max_iterations"), [(3, 3), (5, 3), (1, 1)])
def test_max_iterations_reached_stops_and_deletes(iteration: int, max_iterations: int) -> None:
    d = decide(state(iteration=iteration, max_iterations=max_iterations), "<promise>DONE</promise>")
    assert d.action == "allow" and d.next_state is None
    assert d.message_for_user == f"🛑 Ralph loop: Max iterations ({max_iterations}) reached."
    assert not d.message_to_stderr
    assert d.max_reached and d.ours and not d.completed
    assert d.reason == f"max iterations ({max_iterations}) reached" and d.system_message == ""


def test_zero_max_iterations_is_unlimited() -> None:
    d = decide(state(iteration=10_000, max_iterations=0))
    assert d.action == "block"
    assert d.next_state is not None and d.next_state.iteration == 10_001


def test_max_n_gives_n_turns(tmp_path: Path) -> None:
    path = tmp_path / "ralph-loop.local.md"
    write_state(path, state(max_iterations=3))
    blocks = 0
    while (current := read_state(path)) is not None:
        d = decide(current, session="S")
        apply_decision(path, d, current=current)
        blocks += d.action == "block"
    assert blocks == 2 and not path.exists()


@pytest.mark.parametrize(
    "text",
    [
        "All done.\n<promise>DONE</promise>",
        "<promise>  DONE\n</promise> trailing words",
        "<promise>\tDONE\t</promise>",
        "first\n\n<promise>DONE</promise>\n<promise>LATER</promise>",
        "DONE",  # quirk: with no tag the plugin compares the whole (normalised) text
        "  DONE \n",
    ],
)
def test_promise_found_stops_and_deletes(text: str) -> None:
    d = decide(state(), text)
    assert d.action == "allow" and d.next_state is None
    assert d.message_for_user == "✅ Ralph loop: Detected <promise>DONE</promise>"
    assert not d.message_to_stderr
    assert d.completed and d.reason == "completion promise detected: DONE"


@pytest.mark.parametrize(
    "text",
    [
        "The task is DONE",  # no tags: not a promise
        "DONE!",
        "<promise>done</promise>",  # case-sensitive
        "<promise>NOT DONE</promise>",
        "<promise>NO</promise> then <promise>DONE</promise>",  # only the first tag counts
        "<promise></promise>",
        "<promise>DONE",  # unclosed
        "",  # a turn of tool calls only
    ],
)
def test_promise_not_found_keeps_looping(text: str) -> None:
    d = decide(state(iteration=4), text)
    assert d.action == "block"
    assert d.next_state is not None and d.next_state.iteration == 5


def test_whitespace_inside_the_promise_is_collapsed() -> None:
    s = state(completion_promise="TASK COMPLETE")
    assert decide(s, "<promise>\n  TASK \t\n COMPLETE  \n</promise>").action == "allow"
    assert decide(s, "<promise>TASK\u00a0COMPLETE</promise>").action == "block"  # ASCII whitespace only
    assert decide(state(completion_promise="TASK  COMPLETE"), "<promise>TASK  COMPLETE</promise>").action == (
        "block"  # the extracted text is collapsed, the promise is not: never matches
    )


def test_promise_is_compared_literally_not_as_a_glob() -> None:
    s = state(completion_promise="a*")
    assert decide(s, "<promise>abc</promise>").action == "block"
    assert decide(s, "<promise>a*</promise>").action == "allow"


@pytest.mark.parametrize("promise", [None, "", "null"])
def test_no_promise_loops_forever(promise: str | None) -> None:
    d = decide(state(completion_promise=promise, iteration=1), "<promise>null</promise>")
    assert d.action == "block"
    assert d.system_message == "🔄 Ralph iteration 2 | No completion promise set - loop runs infinitely"


def test_promise_text_helper() -> None:
    assert unwrap("x <promise> a\n b </promise> y", plugin=True) == "a b"
    assert unwrap("  no tag\there ", plugin=True) == "no tag here"
    assert unwrap("<PROMISE>a</PROMISE>", plugin=True) == "<PROMISE>a</PROMISE>"  # perl: tags as written
    assert unwrap("<promise>a <b> c</promise>", plugin=True) == "a <b> c"


def test_unreadable_transcript_stops_and_deletes() -> None:
    d = decide(state(), None)
    assert d.action == "allow" and d.next_state is None and d.message_to_stderr
    assert d.outcome == "no_transcript" and d.ours
    assert d.message_for_user is not None and d.message_for_user.startswith("⚠️  Ralph loop: ")


def test_max_is_checked_before_the_transcript_and_the_promise() -> None:
    d = decide(state(iteration=2, max_iterations=2), None)
    assert d.message_for_user == "🛑 Ralph loop: Max iterations (2) reached."


@pytest.mark.parametrize("prompt", ["", "\n\n", "---", "\n---\n"])
def test_empty_prompt_stops_and_deletes(prompt: str) -> None:
    d = decide(state(prompt=prompt))
    assert d.action == "allow" and d.next_state is None and d.message_to_stderr
    assert d.outcome == "no_prompt"
    assert d.message_for_user is not None and "No prompt text found" in d.message_for_user


def test_a_promise_still_wins_over_an_empty_prompt() -> None:
    assert decide(state(prompt=""), "<promise>DONE</promise>").message_for_user == (
        "✅ Ralph loop: Detected <promise>DONE</promise>"
    )


def test_whitespace_prompt_is_not_empty() -> None:
    assert decide(state(prompt="   ")).action == "block"


def test_active_false_is_ignored_like_the_plugin() -> None:
    assert decide(state(active=False)).action == "block"


# --------------------------------------------------------------------------- sessions


def test_other_sessions_loop_is_never_blocked_nor_touched() -> None:
    for s in (state(session_id="A"), state(session_id="A", iteration=9, max_iterations=3)):
        for text in ("working", "<promise>DONE</promise>", None):
            d = decide(s, text, session="B")
            assert d == PluginDecision(
                action="allow", outcome="other_session", reason="the loop belongs to session A", next_state=s
            )
            assert d.next_state is s and not d.ours and d.message_for_user is None


def test_empty_hook_session_never_matches_a_claimed_loop() -> None:
    s = state(session_id="A")
    d = decide(s, session="")
    assert (d.action, d.outcome, d.next_state) == ("allow", "other_session", s)


def test_owning_session_is_blocked() -> None:
    d = decide(state(session_id="A"), session="A")
    assert d.action == "block"
    assert d.next_state == state(session_id="A", iteration=2)


def test_unclaimed_loop_is_claimed_by_the_first_stop_then_isolated() -> None:
    d = decide(state(), session="A")
    assert d.action == "block"
    assert d.next_state == state(session_id="A", iteration=2)
    later = decide(d.next_state, session="B")
    assert later.outcome == "other_session" and later.next_state is d.next_state


def test_unclaimed_loop_with_empty_hook_session_stays_unclaimed() -> None:
    d = decide(state(), session="")
    assert d.action == "block"
    assert d.next_state == state(iteration=2)


def test_claim_does_not_survive_a_stop() -> None:
    d = decide(state(iteration=3, max_iterations=3), session="A")
    assert d.action == "allow" and d.next_state is None


# --------------------------------------------------------------------------- applying


def test_apply_block_rewrites_iteration_and_claim(tmp_path: Path) -> None:
    path = tmp_path / "ralph-loop.local.md"
    path.write_text(PLUGIN_FILE, encoding="utf-8")
    current = read_state(path)
    d = decide(current, session="sess-1")
    apply_decision(path, d, current=current)
    assert path.read_text(encoding="utf-8") == PLUGIN_FILE.replace("iteration: 1", "iteration: 2").replace(
        "session_id: \n", "session_id: sess-1\n"
    )


def test_apply_stop_deletes(tmp_path: Path) -> None:
    path = tmp_path / "ralph-loop.local.md"
    write_state(path, state())
    apply_decision(path, decide(read_state(path), "<promise>DONE</promise>"), current=state())
    assert not path.exists()
    apply_decision(path, decide(None), current=None)  # nothing to delete: no error


def test_apply_other_session_leaves_the_file_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "ralph-loop.local.md"
    text = PLUGIN_FILE.replace("session_id: ", "session_id: A").replace("iteration: 1", "iteration:   1")
    path.write_text(text, encoding="utf-8")
    current = read_state(path)
    apply_decision(path, decide(current, session="B"), current=current)
    assert path.read_text(encoding="utf-8") == text


# --------------------------------------------------------------------------- transcripts


def line(role: str, *blocks: dict[str, object]) -> str:
    return json.dumps(
        {"type": role, "message": {"role": role, "content": list(blocks)}}, separators=(",", ":")
    )


def text_block(t: str) -> dict[str, object]:
    return {"type": "text", "text": t}


TOOL: dict[str, object] = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}


def transcript(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------- loop start


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["Build", "a", "todo", "API", "--max-iterations", "3", "--completion-promise", "DONE"],
            LoopArgs(prompt="Build a todo API", max_iterations=3, completion_promise="DONE"),
        ),
        (
            ["--max-iterations=3", "--completion-promise=TASK COMPLETE", "Build it"],
            LoopArgs(prompt="Build it", max_iterations=3, completion_promise="TASK COMPLETE"),
        ),
        (
            ["Fix", "--max-iterations", "10", "the", "auth", "bug"],
            LoopArgs(prompt="Fix the auth bug", max_iterations=10),
        ),
        (["Refactor cache layer"], LoopArgs(prompt="Refactor cache layer")),
        (["p", "--max-iterations", "0"], LoopArgs(prompt="p", max_iterations=0)),
        (["p", "--max-iterations", "007"], LoopArgs(prompt="p", max_iterations=7)),
        (["p", "--completion-promise", "A\nB"], LoopArgs(prompt="p", completion_promise="A B")),
        (["p", "--completion-promise", "-ok-"], LoopArgs(prompt="p", completion_promise="-ok-")),
        (["p", "--completion-promise=a=b"], LoopArgs(prompt="p", completion_promise="a=b")),
        (["--", "-v", "--max-iterations", "3"], LoopArgs(prompt="-v --max-iterations 3")),
        (["say", "-", "hi"], LoopArgs(prompt="say - hi")),
        (["--help"], LoopArgs(prompt="", show_help=True)),
        (["x", "-h", "--bogus"], LoopArgs(prompt="x", show_help=True)),
    ],
)
def test_loop_args(argv: list[str], expected: LoopArgs) -> None:
    assert parse_loop_args(argv) == expected


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        ([], "missing prompt"),
        (["--max-iterations", "3"], "missing prompt"),
        (["", " "], "missing prompt"),
        (["p", "--max-iterations"], "--max-iterations needs a value"),
        (["p", "--max-iterations="], "--max-iterations needs a value"),
        (["p", "--max-iterations", "--completion-promise", "D"], "--max-iterations needs a value"),
        (
            ["p", "--max-iterations", "-5"],
            "--max-iterations: expected a whole number (0 = unlimited), got '-5'",
        ),
        (["p", "--max-iterations=-5"], "got '-5'"),
        (["p", "--max-iterations", "ten"], "got 'ten'"),
        (["p", "--max-iterations", "1.5"], "got '1.5'"),
        (["p", "--max-iterations", "٣"], "expected a whole number"),
        (["p", "--completion-promise"], "--completion-promise needs a value"),
        (["p", "--completion-promise", ""], "--completion-promise needs a value"),
        (["p", "--bogus"], "unknown option '--bogus'"),
        (["p", "--bogus=1"], "unknown option '--bogus'"),
        (["p", "-v"], "unknown option '-v'"),
        (["p", "--max-iterations", "1", "--max-iterations=2"], "--max-iterations given twice"),
    ],
)
def test_loop_args_errors(argv: list[str], problem: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_loop_args(argv)
    assert problem in one_line(err)


# --------------------------------------------------------------------------- settings.json

CMD = "ralph-ledger hook stop"
OURS = {"hooks": [{"type": "command", "command": CMD}]}
INSTALLED = {"Stop": [OURS], "SubagentStop": [OURS], "StopFailure": [OURS], "SessionStart": [OURS]}


def test_install_creates_file_and_folder(tmp_path: Path) -> None:
    path = tmp_path / "proj" / ".claude" / "settings.json"
    assert install_hook(path, CMD) is True
    text = path.read_text(encoding="utf-8")
    assert json.loads(text) == {"hooks": INSTALLED}
    assert text == json.dumps({"hooks": INSTALLED}, indent=2) + "\n"


@pytest.mark.parametrize("content", ["", "  \n", "{}"])
def test_install_into_empty_settings(tmp_path: Path, content: str) -> None:
    path = tmp_path / "settings.json"
    path.write_text(content, encoding="utf-8")
    assert install_hook(path, CMD) is True
    assert json.loads(path.read_text(encoding="utf-8")) == {"hooks": INSTALLED}


def test_install_keeps_every_other_key_and_hook(tmp_path: Path) -> None:
    existing = {
        "model": "opus",
        "permissions": {"allow": ["Bash(git status)"], "deny": []},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": CMD}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "other-stop", "timeout": 30}]}],
            "SessionStart": [],
        },
        "env": {"NAME": "é"},
    }
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(existing), encoding="utf-8")
    assert install_hook(path, CMD) is True  # the same command under another event does not count
    text = path.read_text(encoding="utf-8")
    got = json.loads(text)
    want = json.loads(json.dumps(existing))
    want["hooks"]["Stop"].append(OURS)
    want["hooks"]["SubagentStop"] = [OURS]
    want["hooks"]["StopFailure"] = [OURS]
    want["hooks"]["SessionStart"] = [OURS]  # into the empty list the user had
    assert got == want
    assert list(got) == ["model", "permissions", "hooks", "env"]
    assert list(got["hooks"]) == ["PreToolUse", "Stop", "SessionStart", "SubagentStop", "StopFailure"]
    assert '\n  "model": "opus"' in text and '"NAME": "é"' in text


def test_install_replaces_an_older_form_of_the_same_hook(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    other = {"type": "command", "command": "other-stop"}
    old = {"type": "command", "command": "ralph-ledger hook claude-code", "timeout": 30}
    hooks = {"Stop": [{"hooks": [other, old]}], "SubagentStop": [{"hooks": [old]}]}
    path.write_text(json.dumps({"hooks": hooks}), encoding="utf-8")
    assert install_hook(
        path, "/v/bin/ralph-ledger hook claude-code", replaces=lambda c: c.startswith("ralph-ledger")
    )
    got = json.loads(path.read_text(encoding="utf-8"))["hooks"]
    new = {**old, "command": "/v/bin/ralph-ledger hook claude-code"}
    added = {"hooks": [{"type": "command", "command": new["command"]}]}
    assert got == {
        "Stop": [{"hooks": [other, new]}],
        "SubagentStop": [{"hooks": [new]}],
        "StopFailure": [added],
        "SessionStart": [added],
    }


def test_install_twice_adds_once(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    assert install_hook(path, CMD) is True
    before = path.read_bytes()
    assert install_hook(path, CMD) is False
    assert path.read_bytes() == before


def test_already_installed_leaves_the_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    stop = [{"hooks": [{"type": "command", "command": "x"}, OURS["hooks"][0]]}]
    ours = {"SubagentStop": [OURS], "StopFailure": [OURS], "SessionStart": [OURS]}
    compact = json.dumps({"hooks": {"Stop": stop, **ours}})
    path.write_text(compact, encoding="utf-8")
    assert install_hook(path, CMD) is False
    assert path.read_text(encoding="utf-8") == compact


def test_a_stop_hook_installed_before_subagent_stop_gets_it_added(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    stop = [{"hooks": [{"type": "command", "command": "x"}, OURS["hooks"][0]]}]
    path.write_text(json.dumps({"hooks": {"Stop": stop}}), encoding="utf-8")
    assert install_hook(path, CMD) is True
    rest = {"SubagentStop": [OURS], "StopFailure": [OURS], "SessionStart": [OURS]}
    assert json.loads(path.read_text(encoding="utf-8")) == {"hooks": {"Stop": stop, **rest}}
    assert install_hook(path, CMD) is False


def test_install_keeps_the_file_mode(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("{}", encoding="utf-8")
    os.chmod(path, 0o600)
    install_hook(path, CMD)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]


def test_install_refuses_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"hooks": {,}', encoding="utf-8")
    with pytest.raises(SettingsError) as err:
        install_hook(path, CMD)
    assert one_line(err).startswith(f"{path}: not valid JSON: ")
    assert path.read_text(encoding="utf-8") == '{"hooks": {,}'


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ([], "expected a JSON object, got a list"),
        ({"hooks": []}, "hooks: expected an object, got a list"),
        ({"hooks": {"Stop": {}}}, "hooks.Stop: expected a list, got an object"),
        ({"hooks": {"Stop": ["x"]}}, "hooks.Stop[0]: expected an object, got a string"),
        ({"hooks": {"Stop": [{"hooks": {}}]}}, "hooks.Stop[0].hooks: expected a list, got an object"),
        ({"hooks": {"Stop": [{"hooks": [None]}]}}, "hooks.Stop[0].hooks[0]: expected an object, got null"),
        (
            {"hooks": {"Stop": [OURS, {"hooks": [1]}]}},
            "hooks.Stop[1].hooks[0]: expected an object, got a number",
        ),
        ({"hooks": {"SubagentStop": {}}}, "hooks.SubagentStop: expected a list, got an object"),
    ],
)
def test_install_refuses_the_wrong_shape(tmp_path: Path, settings: object, problem: str) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(settings), encoding="utf-8")
    with pytest.raises(SettingsError) as err:
        install_hook(path, CMD)
    assert one_line(err) == f"{path}: {problem}"
    assert json.loads(path.read_text(encoding="utf-8")) == settings


def test_install_refuses_an_empty_command(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        install_hook(tmp_path / "settings.json", " ")


# --------------------------------------------------------------------------- imports


def test_import_needs_no_duckdb_pyarrow_or_yaml() -> None:
    code = (
        "import sys, ledger.drivers.claude_code.stop.plugin\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'duckdb', 'pyarrow', 'yaml'}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


def test_a_detached_event_gets_its_own_command_once(tmp_path: Path) -> None:
    from ledger.drivers.claude_code.install.settings import DETACH_PREFIX, attached, detached

    path = tmp_path / "settings.json"
    apart = {"StopFailure": detached(CMD)}
    assert install_hook(path, CMD, commands=apart) is True
    hooks = json.loads(path.read_text(encoding="utf-8"))["hooks"]
    assert hooks["StopFailure"] == [{"hooks": [{"type": "command", "command": detached(CMD)}]}]
    assert hooks["Stop"] == hooks["SubagentStop"] == hooks["SessionStart"] == [OURS]
    assert detached(CMD).startswith(DETACH_PREFIX) and detached(CMD).endswith(CMD)
    assert attached(detached(CMD)) == CMD and attached(CMD) == CMD
    before = path.read_bytes()
    assert install_hook(path, CMD, commands=apart) is False  # init run again: nothing changes
    assert path.read_bytes() == before
