"""Claude Code's SubagentStop (``ledger.drivers.claude_code.stop.subagent``): recorded for the parent loop,
never blocking, its tokens counted once; run in-process as the warm worker runs a stop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ledger import events as E
from ledger.cli import main
from ledger.core.home import Home
from ledger.drivers.claude_code.stop.hook import run
from ledger.drivers.claude_code.stop.locate import LOOP_FILE, STATE_FILE
from ledger.drivers.claude_code.stop.loop_file import read_loop_file
from ledger.drivers.claude_code.stop.plugin import read_state
from ledger.storage.journal import Cursor, read_new

CLAUDE = "3a9e5d10-0000-4000-8000-00000000dddd"
OTHER = "3a9e5d10-0000-4000-8000-00000000eeee"
AGENT = "a1b2c3d4"


class Session:
    """A project, a Claude Code session's transcript and one sub-agent's transcript."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.project = root / "project"
        self.project.mkdir()
        self.transcript = root / f"{CLAUDE}.jsonl"
        self.transcript.touch()
        self.agent = root / CLAUDE / "subagents" / f"agent-{AGENT}.jsonl"
        self.agent.parent.mkdir(parents=True)
        self.agent.touch()
        self.home = Home.resolve(str(self.project / ".ralph"))
        monkeypatch.chdir(self.project)
        monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)

    def start(self, *args: str) -> None:
        assert main(["loop", "start", "Fix it", "--completion-promise", "DONE", *args]) == 0

    def write(self, path: Path, mid: str, usage: dict[str, int], *blocks: dict[str, Any]) -> None:
        with path.open("a") as f:
            for block in blocks:
                message = {"id": mid, "role": "assistant", "content": [block], "usage": usage}
                f.write(json.dumps({"type": "assistant", "isSidechain": True, "message": message}) + "\n")

    def subagent_stop(self, session: str = CLAUDE, **fields: Any) -> tuple[str, str]:
        data = {
            "session_id": session,
            "transcript_path": str(self.transcript),
            "cwd": str(self.project),
            "hook_event_name": "SubagentStop",
            "stop_hook_active": False,
            "agent_id": AGENT,
            "agent_type": "general-purpose",
            "agent_transcript_path": str(self.agent),
            "last_assistant_message": "Found it.",
            **fields,
        }
        out = run(json.dumps(data).encode(), home=self.home)
        assert out.exit_code == 0
        return out.stdout, out.stderr

    def stop(self, text: str = "Working.") -> str:
        line = {"type": "assistant", "message": {"id": f"m{text}", "role": "assistant", "content": []}}
        with self.transcript.open("a") as f:
            f.write(json.dumps(line) + "\n")
        data = {
            "session_id": CLAUDE,
            "transcript_path": str(self.transcript),
            "cwd": str(self.project),
            "last_assistant_message": text,
        }
        return run(json.dumps(data).encode(), home=self.home).stdout

    def events(self, sid: str = f"cc-{CLAUDE}") -> list[E.AnyEvent]:
        path = self.home.journals / f"{sid}.jsonl"
        return read_new(path, Cursor()).events if path.exists() else []

    def recorded(self) -> list[E.SubagentStopped]:
        return [e for e in self.events() if isinstance(e, E.SubagentStopped)]


@pytest.fixture
def session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Session:
    """A stand-in session; a turn that has not landed is not waited for (turn_wait.await_turn)."""
    monkeypatch.setenv("RALPH_TRANSCRIPT_WAIT_MS", "0")
    return Session(tmp_path, monkeypatch)


USAGE = {"input_tokens": 300, "output_tokens": 40, "cache_read_input_tokens": 7}
EDIT = {"type": "tool_use", "name": "Edit", "input": {"file_path": "/p/a.py"}}


def test_a_subagent_stop_with_no_loop_records_nothing_and_allows(session: Session) -> None:
    session.write(session.agent, "s1", USAGE, {"type": "text", "text": "hi"})
    assert session.subagent_stop() == ("", "")
    assert not session.home.journals.exists() or not list(session.home.journals.iterdir())


def test_a_subagent_of_a_running_drop_in_loop_is_recorded_at_its_iteration(session: Session) -> None:
    session.start("--mode", "plugin")
    assert '"decision": "block"' in session.stop()  # iteration 2 now
    session.write(session.agent, "s1", USAGE, {"type": "text", "text": "Found it."}, EDIT)
    assert session.subagent_stop() == ("", "")  # never blocks, prints nothing
    (rec,) = session.recorded()
    assert (rec.iteration, rec.agent_id, rec.agent_type) == (2, AGENT, "general-purpose")
    assert rec.transcript_path == str(session.agent.resolve())
    assert rec.tokens == E.TokenUsage(input=300, output=40, cache_read=7)
    assert (rec.tool_count, rec.files_modified, rec.output_excerpt) == (1, ["/p/a.py"], "Found it.")
    assert rec.transcript_offset == session.agent.stat().st_size
    state = read_state(session.project / STATE_FILE)
    assert state is not None and state.iteration == 2  # the loop itself is untouched


def test_a_resumed_subagent_is_counted_from_where_its_last_record_stopped(session: Session) -> None:
    session.start("--mode", "plugin")
    session.stop()
    session.write(session.agent, "s1", {"input_tokens": 100, "output_tokens": 5}, {"type": "thinking"})
    session.subagent_stop()
    session.write(
        session.agent, "s1", {"input_tokens": 100, "output_tokens": 50}, {"type": "text", "text": "x"}
    )
    session.write(
        session.agent, "s2", {"input_tokens": 20, "output_tokens": 2}, {"type": "text", "text": "y"}
    )
    session.subagent_stop()
    first, second = session.recorded()
    assert first.tokens == E.TokenUsage(input=100, output=5)
    assert second.tokens == E.TokenUsage(input=20, output=47)  # s1's growth, then s2: never twice
    assert second.transcript_offset == session.agent.stat().st_size


def test_a_subagent_in_the_loops_first_turn_claims_it_and_the_first_stop_carries_on(session: Session) -> None:
    session.start("--mode", "plugin")
    session.write(session.agent, "s1", USAGE, {"type": "text", "text": "Found it."})
    session.subagent_stop()
    state = read_state(session.project / STATE_FILE)
    assert state is not None and (state.session_id, state.ledger_session) == (CLAUDE, f"cc-{CLAUDE}")
    assert '"decision": "block"' in session.stop()
    types = [type(e).__name__ for e in session.events()]
    assert types[:3] == ["SubagentStopped", "SessionStarted", "IterationStarted"]
    assert session.recorded()[0].iteration == 1


def test_another_sessions_loop_is_not_recorded_in(session: Session) -> None:
    session.start("--mode", "plugin")
    session.stop()  # claimed by CLAUDE
    session.write(session.agent, "s1", USAGE, {"type": "text", "text": "x"})
    assert session.subagent_stop(OTHER) == ("", "")
    assert session.recorded() == [] and session.events(f"cc-{OTHER}") == []


def test_an_unreadable_subagent_transcript_is_said_and_recorded_without_tokens(session: Session) -> None:
    session.start("--mode", "plugin")
    session.stop()
    out, err = session.subagent_stop(agent_transcript_path=str(session.agent.parent / "missing.jsonl"))
    assert out == ""
    assert err.startswith("ralph-ledger hook: SubagentStop: transcript ") and err.count("\n") == 1
    assert "does not exist; its tokens are not counted" in err
    (rec,) = session.recorded()
    assert rec.tokens == E.TokenUsage() and rec.agent_id == AGENT
    assert any(isinstance(e, E.ErrorRecorded) and "missing.jsonl" in e.message for e in session.events())


def test_an_older_subagent_stop_without_its_own_transcript_is_recorded_quietly(session: Session) -> None:
    session.start("--mode", "plugin")
    session.stop()
    assert session.subagent_stop(agent_id=None, agent_type=None, agent_transcript_path=None) == ("", "")
    (rec,) = session.recorded()
    assert (rec.agent_id, rec.tokens, rec.transcript_path) == ("", E.TokenUsage(), "")


def test_a_subagent_of_a_ledger_native_loop_before_its_first_stop(session: Session) -> None:
    (session.project / "ralph.toml").write_text("[[rules]]\nname = 'ok'\ntype = 'command'\nargv = ['true']\n")
    session.start("--mode", "ledger")
    session.write(session.agent, "s1", USAGE, {"type": "text", "text": "Found it."})
    assert session.subagent_stop() == ("", "")
    loop = read_loop_file(session.project / LOOP_FILE)
    assert loop is not None and (loop.claude_session_id, loop.ledger_session) == (CLAUDE, f"cc-{CLAUDE}")
    assert '"decision"' in session.stop()  # the loop starts even though its journal has an event
    (rec,) = session.recorded()
    assert rec.iteration == 1 and rec.tokens.input == 300


def test_the_event_line_of_a_subagent_stop() -> None:
    from collections import defaultdict

    from ledger.monitor.answers import summary_of

    row = {"type": "subagent_stopped", "agent_type": "Explore", "files_modified": ["x"], "tool_count": 2}
    assert summary_of(defaultdict(lambda: None, row)) == "subagent Explore stopped: 1 file, 2 tools"
