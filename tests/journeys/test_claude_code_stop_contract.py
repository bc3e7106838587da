"""Journeys through Claude Code 2.1.x's Stop contract, with the hook ``init claude-code`` installed run
as Claude Code runs it (its command from ``.claude/settings.json``, the event's JSON on stdin):
``last_assistant_message`` before a transcript that lags, ``SubagentStop`` recorded for the parent
loop, and the block cap (``CLAUDE_CODE_STOP_HOOK_BLOCK_CAP``) kept by the loop itself."""

from __future__ import annotations

import json
import subprocess
import threading
from typing import Any

import pytest

from ledger import events as E
from tests.journeys.conftest import Project, clean_env
from tests.journeys.test_claude_code import CLAUDE, Claude, block, by_id, ledger_project, start
from tests.unit.test_costs import SONNET, library_price

SID = f"cc-{CLAUDE}"
HAIKU = "claude-haiku-4-5-20251001"
CAP = "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"


def installed(project: Project, event: str) -> str:
    """``init claude-code``, then the command it installed for ``event``."""
    assert project.cli("init", "claude-code").returncode == 0
    settings = json.loads((project.dir / ".claude" / "settings.json").read_text())
    (entry,) = settings["hooks"][event]
    (hook,) = entry["hooks"]
    return str(hook["command"])


def as_claude_runs_it(
    project: Project, command: str, stdin: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["/bin/sh", "-c", command],
        input=stdin,
        capture_output=True,
        text=True,
        env=clean_env(**(env or {})),
        cwd=project.dir,
        timeout=120,
    )
    assert proc.returncode == 0, proc
    return proc


def show(project: Project) -> list[dict[str, Any]]:
    proc = project.cli("show", SID, "--json")
    assert proc.returncode == 0, proc.stderr
    rows: list[dict[str, Any]] = json.loads(proc.stdout)
    return rows


def usage(i: int, o: int) -> dict[str, int]:
    return {"input_tokens": i, "output_tokens": o}


def assistant(
    claude: Claude,
    mid: str,
    tokens: dict[str, int],
    *blocks: dict[str, Any],
    model: str = "",
    side: bool = False,
) -> None:
    """Lines of one assistant message (``side``: a sub-agent's, marked ``isSidechain`` as Claude Code
    marks every line of a sub-agent's own transcript)."""
    for b in blocks:
        message = {
            "id": mid,
            "role": "assistant",
            "content": [b],
            "usage": tokens,
            **({"model": model} if model else {}),
        }
        claude.lines(
            {"type": "assistant", "sessionId": claude.session, "isSidechain": side, "message": message}
        )


# --- last_assistant_message first; the transcript's lag caught up at the next stop --------------------


@pytest.mark.parametrize("mode", ["plugin", "ledger"])
def test_the_text_comes_from_stdin_and_a_lagging_transcript_is_caught_up_once(
    project: Project, mode: str
) -> None:
    if mode == "ledger":
        ledger_project(project)
    command = installed(project, "Stop")
    start(project, "Fix it", "--max-iterations", "5", "--completion-promise", "DONE", "--mode", mode)
    claude = Claude(project)
    claude.prompt("go")
    edit = {"type": "tool_use", "name": "Edit", "input": {"file_path": str(project.dir / "a.py")}}
    assistant(
        claude, "m1", usage(1000, 5), {"type": "thinking", "thinking": "hmm"}
    )  # all that is written yet
    short = {"RALPH_TRANSCRIPT_WAIT_MS": "50", "RALPH_TRANSCRIPT_END_WAIT_MS": "50"}  # never lands here
    first = as_claude_runs_it(
        project, command, claude.event(last_assistant_message="Editing a.py next."), short
    )
    assert block(first)["reason"].startswith("Fix it")
    assistant(claude, "m1", usage(1000, 70), {"type": "text", "text": "Editing a.py next."}, edit)  # late
    assistant(claude, "m2", usage(200, 9), {"type": "text", "text": "Done."})  # the promise is not in it
    last = claude.event(last_assistant_message="All green.\n<promise>DONE</promise>", stop_hook_active=True)
    as_claude_runs_it(project, command, last, short)
    row = by_id(project)[SID]
    assert row["status"] == "complete"  # the promise was read from stdin, not from the transcript
    assert row["tokens"] == 1000 + 70 + 200 + 9  # every message once, at its final count
    iterations = show(project)
    assert [r["tokens_total"] for r in iterations] == [1005, 65 + 209]  # the lag counted when it appeared
    assert [r["files_modified"] for r in iterations] == [[], [str(project.dir / "a.py")]]


@pytest.mark.parametrize("mode", ["plugin", "ledger"])
def test_a_turn_that_lands_while_a_stop_waits_is_counted_by_that_stop(project: Project, mode: str) -> None:
    """Claude Code writes the transcript after it runs the hook (1-100 ms later; see
    docs/design/claude-code-stop.md): a stop waits for its turn; the loop's last stop, which no
    stop reads on after, waits longer, so the last turn is counted too."""
    if mode == "ledger":
        ledger_project(project)
    command = installed(project, "Stop")
    start(project, "Fix it", "--max-iterations", "5", "--completion-promise", "DONE", "--mode", mode)
    claude = Claude(project)
    claude.prompt("go")
    edit = {"type": "tool_use", "name": "Edit", "input": {"file_path": str(project.dir / "a.py")}}
    waits = {"RALPH_TRANSCRIPT_WAIT_MS": "100", "RALPH_TRANSCRIPT_END_WAIT_MS": "5000"}

    def later(mid: str, tokens: dict[str, int], *blocks: dict[str, Any]) -> threading.Timer:
        timer = threading.Timer(0.4, lambda: assistant(claude, mid, tokens, *blocks))
        timer.start()
        return timer

    said = {"type": "text", "text": "Editing a.py next."}
    timer = later("m1", usage(1000, 70), said, edit)  # lands after this stop's 100 ms
    block(as_claude_runs_it(project, command, claude.event(last_assistant_message=said["text"]), waits))
    timer.join()
    timer = later("m2", usage(200, 9), {"type": "text", "text": "<promise>DONE</promise>"})
    last = claude.event(last_assistant_message="<promise>DONE</promise>", stop_hook_active=True)
    assert as_claude_runs_it(project, command, last, waits).stdout.startswith("✅")
    timer.join()
    row = by_id(project)[SID]
    assert (row["status"], row["tokens"]) == ("complete", 1000 + 70 + 200 + 9)  # nothing lost, nothing twice
    lags = [e for e in project.journal(SID) if e["type"] == "error_recorded"]
    assert len(lags) == 1 and "counted when they land" in lags[0]["message"]  # the first stop's


# --- SubagentStop -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["plugin", "ledger"])
def test_a_subagents_tokens_appear_under_the_parent_loop(project: Project, mode: str) -> None:
    if mode == "ledger":
        ledger_project(project)
    stop_command = installed(project, "Stop")
    assert installed(project, "SubagentStop") == stop_command  # one hook, both events; init is idempotent
    start(project, "Research it", "--max-iterations", "5", "--mode", mode)
    claude = Claude(project)
    claude.prompt("go")
    assistant(claude, "m1", usage(500, 20), {"type": "tool_use", "name": "Task", "input": {}}, model=SONNET)
    agent = claude.transcript.parent / claude.session / "subagents" / "agent-a7f3.jsonl"
    agent.parent.mkdir(parents=True)
    sub = Claude(project, session=claude.session)
    sub.transcript = agent
    edit = {"type": "tool_use", "name": "Write", "input": {"file_path": str(project.dir / "notes.md")}}
    sub_usage = {**usage(4000, 300), "cache_read_input_tokens": 1200}
    said = {"type": "text", "text": "The parser lives in src/parse.py."}
    assistant(sub, "s1", sub_usage, said, edit, model=HAIKU, side=True)
    subagent = claude.event(
        hook_event_name="SubagentStop",
        agent_id="a7f3",
        agent_type="Explore",
        agent_transcript_path=str(agent),
        last_assistant_message="The parser lives in src/parse.py.",
    )
    proc = as_claude_runs_it(project, stop_command, subagent)
    assert (proc.stdout, proc.stderr) == ("", "")  # a SubagentStop never blocks
    assistant(claude, "m2", usage(600, 30), {"type": "text", "text": "Read the notes."}, model=SONNET)
    block(as_claude_runs_it(project, stop_command, claude.event()))
    row = by_id(project)[SID]
    assert row["tokens"] == (500 + 20 + 600 + 30) + (4000 + 300 + 1200)
    # each priced at its own model, as the price library prices it: the sub-agent's at Haiku's rates
    own = library_price(SONNET, E.TokenUsage(input=1100, output=50))
    sub_cost = library_price(HAIKU, E.TokenUsage(input=4000, output=300, cache_read=1200))
    assert row["cost_usd"] == pytest.approx(own + sub_cost, rel=1e-6)
    assert sub_cost > 0.001  # not lost in the rounding
    assert show(project)[0]["tokens_total"] == row["tokens"]  # under the loop's iteration 1
    proc = project.cli("show", SID)
    assert f"{row['tokens']} tokens" in proc.stdout
    (event,) = [e for e in project.journal(SID) if e["type"] == "subagent_stopped"]
    assert (event["agent_id"], event["agent_type"], event["iteration"]) == ("a7f3", "Explore", 1)
    assert (event["tool_count"], event["files_modified"]) == (1, [str(project.dir / "notes.md")])
    assert event["model"] == HAIKU


def test_a_subagent_stop_with_no_loop_records_nothing(project: Project) -> None:
    command = installed(project, "SubagentStop")
    claude = Claude(project)
    stdin = claude.event(
        hook_event_name="SubagentStop", agent_id="x", agent_transcript_path=str(claude.transcript)
    )
    assert as_claude_runs_it(project, command, stdin).stdout == ""
    assert not (project.home / "journals").exists() or not list((project.home / "journals").iterdir())


# --- the block cap ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["plugin", "ledger"])
def test_the_block_cap_trips_at_the_cap_and_not_before(project: Project, mode: str) -> None:
    if mode == "ledger":
        ledger_project(project)
    command = installed(project, "Stop")
    start(project, "Fix it", "--max-iterations", "20", "--mode", mode)
    claude = Claude(project)
    claude.prompt("go")
    env = {CAP: "3"}
    tool = {"type": "tool_use", "name": "Bash", "input": {"command": "pytest"}}
    turns = [False, False, True, False, False]  # the tool call sets the count back: 2 blocks, then 1, 2, 3
    for n, uses_tool in enumerate(turns, 1):
        claude.says({"type": "text", "text": f"turn {n}"}, *([tool] if uses_tool else []))
        block(as_claude_runs_it(project, command, claude.event(stop_hook_active=n > 1), env))
    claude.text("turn 6")  # a fourth block in a row without a tool call: Claude Code would override it
    proc = as_claude_runs_it(project, command, claude.event(stop_hook_active=True), env)
    message = json.loads(proc.stdout)["systemMessage"]
    assert (
        message.startswith("🛑 Ralph loop escalated at iteration 6: 3 stops blocked in a row")
        and CAP in message
    )
    row = by_id(project)[SID]
    assert (row["status"], row["iteration"]) == ("escalated", 6)
    assert [r["guards"] for r in show(project)] == [[], [], [], [], [], ["block_cap"]]
    trip = [e for e in project.journal(SID) if e["type"] == "guard_tripped"][-1]
    assert trip["evidence"] == {"blocks_without_progress": 3, "cap": 3}
    assert not (
        project.dir / ".claude" / ("ralph-loop.local.md" if mode == "plugin" else "ralph-ledger.local.json")
    ).exists()
    claude.text("after")  # the loop is over: the next stop is the user's own
    assert as_claude_runs_it(project, command, claude.event(), env).stdout == ""
