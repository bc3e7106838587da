"""Journeys: Claude Code's StopFailure and SessionStart with the installed scripts in a real git
project (the stand-in hook input is what Claude Code 2.1.328 sends: tests/fixtures/clients/
claude-code-2.1.328/lifecycle/): a usage limit in a ledger-native loop waits at the same iteration,
with its reset time, and the next stop after the reset goes on with that iteration; a resumed
session is told which iteration goes on. The rules: docs/design/claude-code-hooks.md."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from ledger.drivers.claude_code.install.settings import detached
from ledger.monitor import Monitor
from tests.journeys.conftest import Project
from tests.journeys.test_claude_code import CLAUDE, Claude, at_iteration_2, block, start

SID = f"cc-{CLAUDE}"


def limit_message(resets: datetime) -> str:
    """Claude Code's usage-limit line for a reset at ``resets`` (UTC), its apostrophe typographic."""
    clock = resets.strftime("%I:%M%p").lstrip("0").lower()
    return f"You\u2019ve hit your limit \u00b7 resets {clock} (UTC)"


def test_init_installs_the_hook_for_stop_failure_and_session_start_once(project: Project) -> None:
    other = {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "my-start"}]}]}}
    project.write(".claude/settings.json", json.dumps(other))
    first = project.cli("init", "claude-code")
    assert first.returncode == 0 and first.stdout.startswith("installed: "), first
    settings = json.loads((project.dir / ".claude" / "settings.json").read_text())
    hooks = settings["hooks"]
    assert sorted(hooks) == ["SessionStart", "Stop", "StopFailure", "SubagentStop"]
    assert hooks["SessionStart"][0] == other["hooks"]["SessionStart"][0]  # the user's own hook kept
    ours = {
        k: [h["command"] for e in v for h in e["hooks"] if h["command"] != "my-start"]
        for k, v in hooks.items()
    }
    command = ours["Stop"][0]
    assert command.endswith("ralph-ledger hook claude-code")
    assert ours == {
        "Stop": [command],
        "SubagentStop": [command],
        "SessionStart": [command],
        "StopFailure": [detached(command)],
    }  # detached: the client does not wait for it
    again = project.cli("init", "claude-code")
    assert again.stdout.startswith("already installed: ")
    assert json.loads((project.dir / ".claude" / "settings.json").read_text()) == settings


def test_a_usage_limit_waits_and_the_next_stop_after_the_reset_goes_on_with_the_same_iteration(
    project: Project,
) -> None:
    claude = at_iteration_2(project)
    claude.prompt("carry on")
    resets = (datetime.now(UTC) + timedelta(minutes=3)).replace(second=0, microsecond=0)
    said = limit_message(resets)
    claude.text(said, tokens=(0, 0))  # the client writes its error as the turn's message
    failed = claude.stop(hook_event_name="StopFailure", error="rate_limit", last_assistant_message=said)
    assert (failed.stdout, failed.stderr) == ("", "")
    last = project.journal(SID)[-1]
    assert (last["type"], last["iteration"]) == ("rate_limited", 2)
    assert last["reason"] == "You've hit your limit · resets " + said.rsplit("resets ", 1)[1]
    assert datetime.fromisoformat(last["resets_at"]) == resets
    (row,) = project.sessions()
    assert (row["status"], row["iteration"]) == ("running", 2)  # waiting, not a failed iteration
    monitor = Monitor([project.home / "journals"])
    list(monitor.load())
    shown = monitor.events(SID)[-1].text
    assert shown.endswith(f"until {resets:%Y-%m-%d %H:%M} UTC"), shown
    (held,) = monitor.sessions([SID])
    assert held.waiting_at(datetime.now(UTC)) == resets  # ralph-tui: ◷ waiting
    show = project.cli("show", SID)
    waits = f"waiting until {resets:%Y-%m-%d %H:%M} UTC (usage limit)"
    assert f"{SID}: running, {waits}, iteration 2/" in show.stdout, show.stdout
    resumed = claude.stop(hook_event_name="SessionStart", source="resume")  # claude --resume after it
    assert resumed.stdout == f"[ralph-ledger] This session runs the loop {SID}: iteration 2 goes on.\n"
    claude.prompt("go on")
    claude.text("Step two.")
    answer = block(claude.stop())  # iteration 2's own turn: validated once, iteration 3 begins
    assert answer["systemMessage"].startswith("🔄 Ralph iteration 3 of 5")
    events = project.journal(SID)
    assert [e["iteration"] for e in events if e["type"] == "validation_ran"] == [1, 2]
    assert [e["iteration"] for e in events if e["type"] == "iteration_started"] == [1, 2, 3]
    assert "guard_tripped" not in [e["type"] for e in events]
    assert "waiting" not in project.cli("show", SID).stdout  # the turn after the limit ended the wait


def test_another_api_error_is_recorded_and_the_loop_goes_on(project: Project) -> None:
    claude = at_iteration_2(project)
    said = "API Error: 500 Internal server error."
    claude.stop(hook_event_name="StopFailure", error="server_error", last_assistant_message=said)
    last = project.journal(SID)[-1]
    assert (last["type"], last["component"], last["iteration"]) == (
        "error_recorded",
        "claude-code StopFailure",
        2,
    )
    assert "server_error" in last["message"] and said in last["message"]
    claude.text("Step two.")
    assert block(claude.stop())["systemMessage"].startswith("🔄 Ralph iteration 3 of 5")


def test_a_fork_never_drives_the_loop_of_the_session_it_forked_from(project: Project) -> None:
    claude = at_iteration_2(project)
    before = project.journal(SID)
    fork = Claude(project, "9d1c2b7e-0000-4000-8000-00000000f0f0")
    assert fork.stop(hook_event_name="SessionStart", source="fork").stdout == ""
    fork.prompt("try another way")
    fork.text("Forked work.")
    assert fork.stop().stdout == ""  # allowed, nothing recorded: the loop is the parent's
    assert project.journal(SID) == before
    claude.text("Step two.")
    assert block(claude.stop())["systemMessage"].startswith("🔄 Ralph iteration 3 of 5")


def test_a_usage_limit_in_a_drop_in_loop_is_recorded_as_the_same_wait(project: Project) -> None:
    claude = Claude(project)
    start(
        project, "Make it green", "--completion-promise", "DONE", "--max-iterations", "5", "--mode", "plugin"
    )
    claude.prompt("go")
    claude.text("Step one.")
    block(claude.stop())
    said = "API Error: Request rejected (429) · Rate limited"
    claude.stop(hook_event_name="StopFailure", error="rate_limit", last_assistant_message=said)
    (row,) = project.sessions()
    last = project.journal(row["session_id"])[-1]
    assert (last["type"], last["iteration"], last["reason"]) == ("rate_limited", 2, said)
    claude.text("<promise>DONE</promise>")
    assert claude.stop().stdout.startswith("✅ Ralph loop")  # the same iteration's turn completes it
    (row,) = project.sessions()
    assert (row["status"], row["iteration"]) == ("complete", 2)
