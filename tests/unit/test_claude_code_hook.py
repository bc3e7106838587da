"""The Claude Code Stop hook, run as Claude Code runs it: a process with the
event on stdin and a transcript file on disk."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger import events as E
from ledger.drivers.claude_code.stop.hook import run
from ledger.storage.journal import Cursor, read_new
from tests.transcripts import FIXTURES

SESSION = "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"


def hook(
    project: Path, stdin: bytes | str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``ralph-ledger hook claude-code`` in ``project`` with ``stdin``."""
    data = stdin.encode() if isinstance(stdin, str) else stdin
    full_env = {**os.environ, "RALPH_HOME": str(project / ".ralph"), **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "ledger.cli", "hook", "claude-code"],
        input=data,
        capture_output=True,
        timeout=60,
        env=full_env,
        cwd=project,
        check=False,
    )
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def event(project: Path, transcript: Path, session: str = SESSION, **extra: Any) -> str:
    return json.dumps(
        {
            "session_id": session,
            "transcript_path": str(transcript),
            "cwd": str(project),
            "hook_event_name": "Stop",
            "stop_hook_active": False,
            **extra,
        }
    )


def turn(transcript: Path, n: int, text: str, *, tool: bool = False) -> None:
    """Append one user prompt and the assistant's answer (a text block, maybe a tool call after it)."""
    lines: list[dict[str, Any]] = [
        {"type": "user", "sessionId": SESSION, "message": {"role": "user", "content": f"prompt {n}"}}
    ]
    usage = {
        "input_tokens": 100 * n,
        "output_tokens": 10 * n,
        "cache_creation_input_tokens": 1,
        "cache_read_input_tokens": 2,
    }
    lines.append(
        {
            "type": "assistant",
            "sessionId": SESSION,
            "message": {
                "id": f"msg_{n}",
                "role": "assistant",
                "content": [{"type": "text", "text": text}],
                "usage": usage,
            },
        }
    )
    if tool:
        lines.append(
            {
                "type": "assistant",
                "sessionId": SESSION,
                "message": {
                    "id": f"msg_{n}",
                    "role": "assistant",
                    "usage": usage,
                    "content": [
                        {"type": "tool_use", "name": "Edit", "input": {"file_path": f"/p/src/f{n}.py"}}
                    ],
                },
            }
        )
    with transcript.open("a") as f:
        f.writelines(json.dumps(line) + "\n" for line in lines)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "project"
    p.mkdir()
    return p


def start_loop(project: Path, *args: str) -> None:
    from ledger.cli import main

    cwd = Path.cwd()
    os.chdir(project)
    try:
        assert main(["loop", "start", *args]) == 0
    finally:
        os.chdir(cwd)


def journal(project: Path, session: str = SESSION) -> list[E.AnyEvent]:
    return read_new(project / ".ralph" / "journals" / f"cc-{session}.jsonl", Cursor()).events


def test_a_whole_loop_continue_continue_complete(project: Path) -> None:
    start_loop(project, "Make the tests pass", "--max-iterations", "5", "--completion-promise", "DONE")
    transcript = project / "t.jsonl"
    turn(transcript, 1, "Wrote a test", tool=True)
    first = hook(project, event(project, transcript))
    assert first.returncode == 0 and first.stderr == ""
    decision = json.loads(first.stdout)
    assert decision["decision"] == "block" and decision["reason"] == "Make the tests pass"
    assert decision["systemMessage"].startswith(
        "🔄 Ralph iteration 2 | To stop: output <promise>DONE</promise>"
    )
    turn(transcript, 2, "Implemented it")
    assert json.loads(hook(project, event(project, transcript)).stdout)["systemMessage"].startswith(
        "🔄 Ralph iteration 3"
    )
    turn(transcript, 3, "All green.\n<promise>DONE</promise>")
    last = hook(project, event(project, transcript))
    assert (last.returncode, last.stdout) == (0, "✅ Ralph loop: Detected <promise>DONE</promise>\n")
    assert not (project / ".claude" / "ralph-loop.local.md").exists()
    evs = journal(project)
    tags = [str(e.__struct_config__.tag) for e in evs]
    assert tags == [
        "session_started",
        "iteration_started",
        "agent_turn",
        "stop_decided",
        "iteration_started",
        "agent_turn",
        "stop_decided",
        "iteration_started",
        "agent_turn",
        "promise_detected",
        "stop_decided",
        "session_completed",
    ]
    turns = [e for e in evs if isinstance(e, E.AgentTurn)]
    assert [t.files_modified for t in turns] == [["/p/src/f1.py"], [], []]
    assert [t.tokens.input for t in turns] == [100, 200, 300]
    assert [e.decision for e in evs if isinstance(e, E.StopDecided)] == ["block", "block", "allow"]


def test_max_iterations_ends_the_loop(project: Path) -> None:
    start_loop(project, "Refactor", "--max-iterations", "2")
    transcript = project / "t.jsonl"
    turn(transcript, 1, "step one")
    assert json.loads(hook(project, event(project, transcript)).stdout)["decision"] == "block"
    turn(transcript, 2, "step two")
    out = hook(project, event(project, transcript))
    assert out.stdout == "🛑 Ralph loop: Max iterations (2) reached.\n"
    tags = [str(e.__struct_config__.tag) for e in journal(project)]
    assert tags[-2:] == ["guard_tripped", "session_escalated"]


def test_another_sessions_loop_is_never_blocked_or_touched(project: Path) -> None:
    start_loop(project, "Mine", "--max-iterations", "5")
    transcript = project / "t.jsonl"
    turn(transcript, 1, "work")
    assert hook(project, event(project, transcript)).stdout  # claims the loop
    state = (project / ".claude" / "ralph-loop.local.md").read_text()
    other = hook(project, event(project, transcript, session="other-session"))
    assert (other.returncode, other.stdout, other.stderr) == (0, "", "")
    assert (project / ".claude" / "ralph-loop.local.md").read_text() == state
    assert not (project / ".ralph" / "journals" / "cc-other-session.jsonl").exists()


def test_two_loops_in_two_projects_run_side_by_side(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for p, s in ((a, "sess-a"), (b, "sess-b")):
        p.mkdir()
        start_loop(p, f"task {s}", "--max-iterations", "4")
        turn(p / "t.jsonl", 1, "x")
        assert json.loads(hook(p, event(p, p / "t.jsonl", session=s)).stdout)["reason"] == f"task {s}"
    assert [str(e.__struct_config__.tag) for e in journal(a, "sess-a")][:1] == ["session_started"]
    assert [str(e.__struct_config__.tag) for e in journal(b, "sess-b")][:1] == ["session_started"]


def test_no_loop_allows_silently(project: Path) -> None:
    transcript = project / "t.jsonl"
    turn(transcript, 1, "hello")
    out = hook(project, event(project, transcript))
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")


def test_last_assistant_message_is_preferred(project: Path) -> None:
    start_loop(project, "Go", "--max-iterations", "5", "--completion-promise", "DONE")
    transcript = project / "t.jsonl"
    turn(transcript, 1, "not done yet")
    out = hook(project, event(project, transcript, last_assistant_message="<promise>DONE</promise>"))
    assert out.stdout.startswith("✅")


@pytest.mark.parametrize(
    "stdin",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'{"session_id": 5}',
        b'{"cwd": "/tmp"}',
        b"\xff\xfe\x00garbage",
        b'{"session_id": "../../etc", "cwd": "/"}',
        b'{"session_id": "s", "cwd": "relative/dir"}',
    ],
)
def test_bad_stdin_fails_open_with_one_line(project: Path, stdin: bytes) -> None:
    out = hook(project, stdin)
    assert out.returncode == 0 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and lines[0].startswith("ralph-ledger hook:")
        and lines[0].endswith("allowing the stop")
    )


def test_corrupt_state_file_fails_open_and_is_kept(project: Path) -> None:
    (project / ".claude").mkdir()
    state = project / ".claude" / "ralph-loop.local.md"
    state.write_text("---\niteration: x\n---\nprompt\n")
    transcript = project / "t.jsonl"
    turn(transcript, 1, "hi")
    out = hook(project, event(project, transcript))
    assert out.returncode == 0 and out.stdout == "" and "allowing the stop" in out.stderr
    assert state.exists()
    errors = [e for e in journal(project) if isinstance(e, E.ErrorRecorded)]
    assert len(errors) == 1 and "iteration" in errors[0].message


def test_internal_error_is_recorded_and_allows(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    start_loop(project, "Go", "--max-iterations", "5")
    transcript = project / "t.jsonl"
    turn(transcript, 1, "x")

    def boom(*a: object, **k: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("ledger.drivers.claude_code.stop.dropin.plugin_decision", boom)
    from ledger.core.home import Home

    out = run(event(project, transcript).encode(), home=Home.resolve(project / ".ralph"))
    assert (out.exit_code, out.stdout) == (0, "")
    assert out.stderr == "ralph-ledger hook: disk on fire; allowing the stop\n"
    assert [e.message for e in journal(project) if isinstance(e, E.ErrorRecorded)] == [out.stderr.strip()]


def test_wrong_hook_command_line_never_exits_2(project: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ledger.cli", "hook", "claudecode"],
        input=b"{}",
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and b"allowing the stop" in proc.stderr


def oracle_tokens(path: Path) -> tuple[int, int, int, int]:
    last: dict[str, dict[str, Any]] = {}
    for raw in path.read_text().splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        msg = line.get("message") if isinstance(line, dict) else None
        if isinstance(msg, dict) and msg.get("role") == "assistant" and msg.get("id") and msg.get("usage"):
            last[msg["id"]] = msg["usage"]
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return tuple(sum(int(u.get(k) or 0) for u in last.values()) for k in keys)  # type: ignore[return-value]


@pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared fixtures not present")
@pytest.mark.parametrize(
    "name", sorted(p.name for p in FIXTURES.glob("*.jsonl")) if FIXTURES.is_dir() else []
)
def test_every_shared_transcript_goes_through_the_hook(project: Path, name: str) -> None:
    transcript = project / name
    shutil.copy(FIXTURES / name, transcript)
    start_loop(project, "Carry on", "--max-iterations", "10", "--completion-promise", "NEVER SAID")
    out = hook(project, event(project, transcript))
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert json.loads(out.stdout)["decision"] == "block"
    turns = [e for e in journal(project) if isinstance(e, E.AgentTurn)]
    total = turns[0].tokens
    assert (total.input, total.output, total.cache_creation, total.cache_read) == oracle_tokens(transcript)
    assert turns[0].transcript_offset == transcript.stat().st_size


def _stop_tokens(project: Path, transcript: Path) -> E.TokenUsage:
    """One stop of the hook (in this process) on ``project``'s loop: the tokens it recorded."""
    from ledger.core.home import Home

    before = len(journal(project)) if (project / ".ralph").exists() else 0
    out = run(event(project, transcript).encode(), home=Home(project / ".ralph"))
    assert out.stderr == "" and json.loads(out.stdout)["decision"] == "block", out
    (turn,) = [e for e in journal(project)[before:] if isinstance(e, E.AgentTurn)]
    return turn.tokens


def _plugin_loop(project: Path) -> None:
    from ledger.drivers.claude_code.stop.plugin import LoopArgs, new_state, write_state

    (project / ".git").mkdir(parents=True)  # the walk up for the loop file stops here
    loop = LoopArgs(prompt="Carry on", completion_promise="NEVER SAID")
    write_state(project / ".claude" / "ralph-loop.local.md", new_state(loop))


@pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared fixtures not present")
@pytest.mark.parametrize(
    "name", sorted(p.name for p in FIXTURES.glob("*.jsonl")) if FIXTURES.is_dir() else []
)
def test_every_shared_transcript_split_between_two_stops_at_every_assistant_line_counts_the_same(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two stops of the hook, the first when the transcript ends at an assistant line (often in the
    middle of a message), the second when it is whole: the loop records the tokens that one stop
    over the whole file records, at every assistant line of every shared transcript."""
    from ledger.drivers.claude_code.transcript.scan import add_usage

    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
    monkeypatch.delenv("RALPH_HOME", raising=False)
    data = (FIXTURES / name).read_bytes()
    whole = tmp_path / "whole"
    _plugin_loop(whole)
    (whole / name).write_bytes(data)
    once = _stop_tokens(whole, whole / name)
    assert (once.input, once.output, once.cache_creation, once.cache_read) == oracle_tokens(whole / name)
    ends = _assistant_line_ends(data)
    assert len(ends) > 1
    for cut in ends:
        project = tmp_path / f"cut-{cut}"
        _plugin_loop(project)
        transcript = project / name
        transcript.write_bytes(data[:cut])
        first = _stop_tokens(project, transcript)
        with transcript.open("ab") as f:
            f.write(data[cut:])
        assert add_usage(first, _stop_tokens(project, transcript)) == once, cut


def _assistant_line_ends(data: bytes) -> list[int]:
    """The byte offsets just after each assistant line of a transcript."""
    ends, pos = [], 0
    for raw in data.split(b"\n")[:-1]:
        pos += len(raw) + 1
        if json.loads(raw).get("type") == "assistant":
            ends.append(pos)
    return ends


def test_a_loop_recorded_before_loops_had_their_own_session_carries_on(project: Path) -> None:
    """A loop that an older version was driving (its journal ``cc-<id>``, its file naming no ledger
    session) goes on in that journal; a new loop after it gets its own."""
    from ledger.storage.journal import Journal

    start_loop(project, "Old task", "--max-iterations", "9")
    state_file = project / ".claude" / "ralph-loop.local.md"
    text = (
        state_file.read_text()
        .replace("iteration: 1", "iteration: 2")
        .replace("session_id: ", f"session_id: {SESSION}")
    )
    state_file.write_text(text)
    sid = f"cc-{SESSION}"
    Journal(project / ".ralph" / "journals" / f"{sid}.jsonl").append(
        E.SessionStarted(
            session_id=sid, task="Old task", config={"mode": "ralph-loop", "claude_session_id": SESSION}
        ),
        E.IterationStarted(session_id=sid, iteration=1),
        E.StopDecided(session_id=sid, iteration=1, decision="block"),
        E.IterationStarted(session_id=sid, iteration=2),
    )
    transcript = project / "t.jsonl"
    turn(transcript, 1, "more")
    assert json.loads(hook(project, event(project, transcript)).stdout)["systemMessage"].startswith(
        "🔄 Ralph iteration 3"
    )
    assert [e.iteration for e in journal(project) if isinstance(e, E.AgentTurn)] == [2]
    assert f"ledger_session: {sid}\n" in state_file.read_text()


def test_a_transcript_not_there_yet_lets_the_plugin_loop_go_on_from_the_last_message(project: Path) -> None:
    """Claude Code 2.1.328 may run the first stop before the transcript exists: the stop decides from
    ``last_assistant_message``, waits a bounded time, and says the turn had not landed."""
    start_loop(project, "Go", "--max-iterations", "5")
    missing = project / "missing.jsonl"
    out = hook(
        project, event(project, missing, last_assistant_message="hi"), {"RALPH_TRANSCRIPT_WAIT_MS": "50"}
    )
    assert json.loads(out.stdout)["decision"] == "block" and out.stderr == ""
    assert (project / ".claude" / "ralph-loop.local.md").exists()
    (lag,) = [e for e in journal(project) if isinstance(e, E.ErrorRecorded)]
    assert lag.component == "hook claude-code: transcript" and str(missing) in lag.message


def test_an_unreadable_transcript_ends_the_plugin_loop_in_the_ledger(project: Path) -> None:
    """An older Claude Code, with no ``last_assistant_message``: no way to know the turn."""
    start_loop(project, "Go", "--max-iterations", "5")
    missing = project / "missing.jsonl"
    out = hook(project, event(project, missing))
    assert out.stdout == "" and out.stderr.count("\n") == 1 and str(missing) in out.stderr
    assert out.stderr.startswith("⚠️  Ralph loop: Failed to extract assistant messages: ")
    assert not (project / ".claude" / "ralph-loop.local.md").exists()
    last = journal(project)[-1]
    assert isinstance(last, E.SessionEscalated) and str(missing) in last.reason


@pytest.mark.parametrize("path", [None, ""])
def test_a_stop_naming_no_transcript_ends_the_plugin_loop(project: Path, path: str | None) -> None:
    """``"transcript_path": null`` is no transcript, as an absent or empty one (the plugin reads it
    as the file ``null``, which does not exist, and stops)."""
    start_loop(project, "Go", "--max-iterations", "5")
    out = hook(project, event(project, project / "t.jsonl", transcript_path=path))
    assert out.stdout == "" and out.stderr.count("\n") == 1, out
    assert "names no transcript_path" in out.stderr
    assert not (project / ".claude" / "ralph-loop.local.md").exists()
    assert isinstance(journal(project)[-1], E.SessionEscalated)


@pytest.mark.parametrize("where", ["env", "hook cwd", "walk up"])
def test_the_loop_is_found_from_a_subdirectory(project: Path, tmp_path: Path, where: str) -> None:
    from ledger.drivers.claude_code.stop.locate import find_project

    (project / ".git").mkdir()
    (project / ".claude").mkdir()
    (project / ".claude" / "ralph-loop.local.md").write_text("---\niteration: 1\nmax_iterations: 0\n---\nx\n")
    deep = project / "a" / "b"
    deep.mkdir(parents=True)
    cwd = Path.cwd()
    os.chdir(project if where == "hook cwd" else tmp_path)
    try:
        env = {"CLAUDE_PROJECT_DIR": str(project)} if where == "env" else {}
        assert Path(find_project(lambda: str(deep), env)) == project.resolve()
    finally:
        os.chdir(cwd)


def test_the_home_of_the_hook() -> None:
    from ledger.drivers.claude_code.stop.locate import hook_home

    p = "/p/roj"
    assert hook_home(p, None, {}) == "/p/roj/.ralph"
    assert hook_home(p, None, {"RALPH_HOME": "h"}) == "/p/roj/h"
    assert hook_home(p, "/abs", {"RALPH_HOME": "h"}) == "/abs"
    assert hook_home(p, "rel", {}) == "/p/roj/rel"


def test_the_walk_up_stops_at_the_project_root(project: Path, tmp_path: Path) -> None:
    """A loop file above the git work tree (say in the home folder) is never the project's."""
    from ledger.drivers.claude_code.stop.locate import find_project

    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "ralph-loop.local.md").write_text(
        "---\niteration: 1\nmax_iterations: 0\n---\nx\n"
    )
    (project / ".git").mkdir()
    deep = project / "a"
    deep.mkdir()
    cwd = Path.cwd()
    os.chdir(deep)
    try:
        assert Path(find_project(lambda: str(deep), {})) == project.resolve()
        plain = tmp_path / "plain" / "sub"  # no git work tree: only the directory itself
        plain.mkdir(parents=True)
        os.chdir(plain)
        assert Path(find_project(lambda: str(plain), {})) == plain.resolve()
    finally:
        os.chdir(cwd)


def test_an_error_after_a_loop_ended_is_not_recorded_in_that_loop(project: Path) -> None:
    start_loop(project, "Go", "--max-iterations", "5", "--completion-promise", "DONE")
    transcript = project / "t.jsonl"
    turn(transcript, 1, "<promise>DONE</promise>")
    assert hook(project, event(project, transcript)).stdout.startswith("✅")
    finished = journal(project)
    (project / ".claude" / "ralph-loop.local.md").write_text("---\niteration: x\n---\nprompt\n")
    out = hook(project, event(project, transcript))
    assert "allowing the stop" in out.stderr
    assert journal(project) == finished
    errors = journal(project, f"{SESSION}-2")
    assert [type(e) for e in errors] == [E.ErrorRecorded] and "iteration" in errors[0].message  # type: ignore[union-attr]


# --- a stop while sub-agents run in the background (docs/design/claude-code-stop.md) --------------------

RUNNING = [{"id": "a1", "type": "subagent", "status": "running", "description": "notes", "agent_type": "x"}]


@pytest.mark.parametrize("mode", ["plugin", "ledger"])
def test_a_stop_while_a_subagent_runs_is_allowed_and_the_iteration_goes_on(project: Path, mode: str) -> None:
    if mode == "ledger":
        (project / "ralph.toml").write_text("max_iterations = 5\n")
    start_loop(project, "Go", "--max-iterations", "5", "--completion-promise", "DONE", "--mode", mode)
    transcript = project / "t.jsonl"
    turn(transcript, 1, "<promise>DONE</promise> once the agent is back")
    said = "<promise>DONE</promise> once the agent is back"
    waiting = hook(project, event(project, transcript, last_assistant_message=said, background_tasks=RUNNING))
    assert (waiting.stdout, waiting.stderr) == ("", "")  # allowed, silently: the client wakes the agent
    assert list((project / ".claude").glob("ralph-*.local.*"))  # the loop goes on
    turn(transcript, 2, "Read the notes.")
    block = hook(
        project, event(project, transcript, last_assistant_message="Read the notes.", background_tasks=[])
    )
    assert json.loads(block.stdout)["decision"] == "block"
    events = journal(project)
    decided = [e for e in events if isinstance(e, E.StopDecided)]
    assert [(e.decision, e.waiting, e.iteration) for e in decided] == [
        ("allow", True, 1),
        ("block", False, 1),
    ]
    assert decided[0].background_tasks == RUNNING
    turns = [e for e in events if isinstance(e, E.AgentTurn)]
    assert [(t.iteration, t.tokens.input) for t in turns] == [(1, 100 + 200)]  # both turns, once
    assert not [e for e in events if isinstance(e, E.PromiseDetected)]  # no promise taken while it ran


def test_an_old_stop_decided_line_decodes_with_the_new_fields_empty() -> None:
    import msgspec

    old = b'{"type":"stop_decided","session_id":"s","iteration":1,"decision":"block","reason":"r"}'
    got = msgspec.json.decode(old, type=E.AnyEvent)
    assert isinstance(got, E.StopDecided)
    assert (got.prompt_id, got.background_tasks, got.session_crons, got.waiting) == ("", [], [], False)
