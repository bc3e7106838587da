"""Claude Code's block cap (``ledger.drivers.claude_code.stop.block_cap``): the count of stops blocked in a
row without a tool call, read from the journal, the cap from the environment, and a drop-in loop
stopped at the cap by the hook itself (run in-process, as the warm worker runs it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ledger import events as E
from ledger.cli import main
from ledger.core.home import Home
from ledger.drivers.claude_code.stop import block_cap as bc
from ledger.drivers.claude_code.stop.hook import run
from ledger.drivers.claude_code.stop.locate import STATE_FILE
from ledger.storage.journal import Cursor, read_new

SID = "s"
CLAUDE = "7e1f0c2a-0000-4000-8000-00000000cccc"


def turn(tools: int = 0) -> E.AgentTurn:
    return E.AgentTurn(session_id=SID, tool_count=tools)


def stop(decision: E.StopDecision) -> E.StopDecided:
    return E.StopDecided(session_id=SID, decision=decision)


# --- the count ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("events", "count"),
    [
        ([], 0),
        ([turn()], 0),
        ([turn(), stop("block")], 1),
        ([turn(), stop("block"), turn(), stop("block"), turn()], 2),
        ([turn(), stop("block"), turn(tools=1)], 0),  # the continuation ran a tool: progress
        ([turn(), stop("block"), turn(tools=2), stop("block"), turn(), stop("block")], 2),
        ([turn(), stop("block"), turn(), stop("allow"), turn()], 0),  # an allow ends the run
        ([turn(), stop("block"), E.SubagentStopped(session_id=SID, tool_count=3), turn()], 1),
    ],
)
def test_blocks_without_progress(events: list[E.Event], count: int) -> None:
    assert bc.blocks_without_progress(events) == count


def test_the_cap_is_reached_by_the_block_that_would_go_past_the_cap() -> None:
    """Claude Code 2.1.328 honours CAP blocks in a row and overrides the next one (seen for real:
    tests/clients/test_claude_code_stop.py)."""
    events: list[E.Event] = [turn()]
    for n in range(1, 5):
        assert bc.cap_reached(events, 4) == 0, n  # blocks 1, 2, 3 and 4 go through
        events += [stop("block"), turn()]
    assert bc.cap_reached(events, 4) == 5
    assert bc.cap_reached(events, 0) == 0  # 0: no cap, as in Claude Code
    assert bc.cap_reached([*events[:-1], turn(tools=1)], 4) == 0


@pytest.mark.parametrize(
    ("env", "cap", "warned"),
    [({}, 8, False), ({bc.ENV: " "}, 8, False), ({bc.ENV: "3"}, 3, False), ({bc.ENV: "0"}, 0, False)]
    + [({bc.ENV: bad}, 8, True) for bad in ("-1", "three", "2.5", "٣")],
)
def test_the_cap_from_the_environment(env: dict[str, str], cap: int, warned: bool) -> None:
    got, line = bc.block_cap(env)
    assert got == cap
    if warned:
        assert line.startswith(f"ralph-ledger hook: {bc.ENV}={env[bc.ENV]!r}: expected a whole number")
        assert line.endswith("using 8") and "\n" not in line
    else:
        assert line == ""


# --- a drop-in loop at the cap -------------------------------------------------------------------------


class DropIn:
    """A ralph-loop drop-in loop whose stops run in this process."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.project = root / "project"
        self.project.mkdir()
        self.transcript = root / "t.jsonl"
        self.transcript.touch()
        self.home = Home.resolve(str(self.project / ".ralph"))
        self.n = 0
        monkeypatch.chdir(self.project)
        monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
        assert main(["loop", "start", "Fix it", "--completion-promise", "DONE", "--mode", "plugin"]) == 0

    def stop(self, *, tools: int = 0) -> dict[str, Any]:
        """One turn (``tools`` tool calls) and its stop: what the hook printed, and its stderr."""
        self.n += 1
        content: list[dict[str, Any]] = [{"type": "text", "text": f"turn {self.n}"}]
        content += [{"type": "tool_use", "name": "Bash", "input": {}}] * tools
        line = {"type": "assistant", "message": {"id": f"m{self.n}", "role": "assistant", "content": content}}
        with self.transcript.open("a") as f:
            f.write(json.dumps(line) + "\n")
        raw = json.dumps(
            {"session_id": CLAUDE, "transcript_path": str(self.transcript), "cwd": str(self.project)}
        )
        out = run(raw.encode(), home=self.home)
        return {"stdout": out.stdout, "stderr": out.stderr}

    def events(self) -> list[E.AnyEvent]:
        return read_new(self.home.journals / f"cc-{CLAUDE}.jsonl", Cursor()).events


def test_a_drop_in_loop_stops_at_the_cap_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(bc.ENV, "3")
    loop = DropIn(tmp_path, monkeypatch)
    assert '"decision": "block"' in loop.stop()["stdout"]
    assert '"decision": "block"' in loop.stop()["stdout"]
    assert '"decision": "block"' in loop.stop()["stdout"]  # three blocks in a row: the cap, honoured
    out = loop.stop()  # the fourth would go past the cap: Claude Code would override it
    message = json.loads(out["stdout"])["systemMessage"]
    assert out["stderr"] == "" and message.startswith("🛑 Ralph loop escalated at iteration 4: 3 stops")
    assert bc.ENV in message
    assert not (loop.project / STATE_FILE).exists()
    events = loop.events()
    trips = [e for e in events if isinstance(e, E.GuardTripped)]
    assert [(t.guard, t.evidence) for t in trips] == [("block_cap", {"blocks_without_progress": 3, "cap": 3})]
    assert isinstance(events[-1], E.SessionEscalated) and events[-1].guard == "block_cap"
    assert [e.decision for e in events if isinstance(e, E.StopDecided)] == [
        "block",
        "block",
        "block",
        "allow",
    ]


def test_a_tool_call_sets_the_count_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(bc.ENV, "3")
    loop = DropIn(tmp_path, monkeypatch)
    for tools in (0, 0, 0, 1, 0, 0):  # without the tool call the fourth stop would have tripped
        assert '"decision": "block"' in loop.stop(tools=tools)["stdout"]
    assert "systemMessage" in json.loads(loop.stop()["stdout"])  # 1 (after the tool call) + 3 = 4
    assert [e.guard for e in loop.events() if isinstance(e, E.GuardTripped)] == ["block_cap"]


def test_a_bad_cap_says_so_and_the_default_applies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(bc.ENV, "lots")
    loop = DropIn(tmp_path, monkeypatch)
    for _ in range(8):  # the default cap: 8 blocks go through, the 9th would be overridden
        out = loop.stop()
        assert '"decision": "block"' in out["stdout"]
        assert (
            out["stderr"]
            == f"ralph-ledger hook: {bc.ENV}='lots': expected a whole number >= 0 (0: no cap); using 8\n"
        )
    assert "decision" not in json.loads(loop.stop()["stdout"])


def test_a_cap_of_zero_never_trips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(bc.ENV, "0")
    loop = DropIn(tmp_path, monkeypatch)
    for _ in range(10):
        assert '"decision": "block"' in loop.stop()["stdout"]
    assert not [e for e in loop.events() if isinstance(e, E.GuardTripped)]
