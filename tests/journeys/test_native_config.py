"""Journeys: ``ralph.toml`` edited or broken while a ledger-native Claude Code loop runs. The loop goes
on with the configuration it started with (docs/design/loop-config.md), and every block says so in
its system message, naming the settings the file now changes, or the file's one-line error."""

from __future__ import annotations

import sys

from tests.journeys.conftest import Project
from tests.journeys.test_claude_code import Claude, block, start

PASSING = f"[[rules]]\nname = 'ok'\ntype = 'command'\nargv = [{sys.executable!r}, '-c', '']\n"
FAILING = (
    "[[rules]]\nname = 'strict'\ntype = 'command'\n"
    f"argv = [{sys.executable!r}, '-c', 'raise SystemExit(1)']\n"
)
KEPT = "it goes on with the configuration it started with (`ralph-ledger set` changes its limits, a new "


def test_an_edited_or_broken_ralph_toml_is_said_and_the_loop_keeps_its_own(project: Project) -> None:
    project.write("ralph.toml", PASSING)
    claude = Claude(project)
    start(project, "Make it green", "--max-iterations", "6")
    claude.prompt("go")
    claude.text("Step one.")
    first = block(claude.stop())
    assert (
        first["systemMessage"] == "🔄 Ralph iteration 2 of 6 | score 100 | validation passing"
    )  # the file as it started: nothing said

    project.write("ralph.toml", "summary = true\n" + FAILING)  # a summary, another rule
    claude.text("Step two.")
    edited = block(claude.stop())
    status, note = edited["systemMessage"].split("\n")
    assert (
        status == "🔄 Ralph iteration 3 of 6 | score 100 | validation passing"
    )  # the started rule still passes: no 'strict' failing
    assert note == (
        f"⚠ {project.dir / 'ralph.toml'} changed since this loop started (rules, summary); "
        f"{KEPT}`loop start` takes the file)"
    )
    sid = f"cc-{claude.session}"
    decided = [e for e in project.journal(sid) if e["type"] == "stop_decided"]
    assert decided[-1]["system_message"] == edited["systemMessage"]  # recorded as shown
    assert not any(e["type"] == "rule_result" and e.get("rule") == "strict" for e in project.journal(sid))

    project.write("ralph.toml", "[[rules]\nname = 'ok'\n")  # broken: not TOML
    claude.text("Step three.")
    broken = block(claude.stop())  # the loop goes on: its configuration is the one it started with
    status, note = broken["systemMessage"].split("\n")
    assert status == "🔄 Ralph iteration 4 of 6 | score 100 | validation passing"
    assert note.startswith(f"⚠ {project.dir / 'ralph.toml'}: not valid TOML: ")
    assert note.endswith("; this loop goes on with the configuration it started with")

    project.write("ralph.toml", PASSING)  # as it was: nothing said again
    claude.text("Step four.")
    assert (
        block(claude.stop())["systemMessage"] == "🔄 Ralph iteration 5 of 6 | score 100 | validation passing"
    )


def test_an_unblocked_loop_with_overrides_is_not_said_to_have_changed(project: Project) -> None:
    """``loop start``'s overrides (limit, promise, kind) are the loop's, not the file's: once an
    ``unblock`` wrote the loop file again, an unchanged ``ralph.toml`` is still said to be unchanged."""
    project.write("ralph.toml", PASSING)
    claude = Claude(project)
    start(
        project,
        "Pick a database",
        "--max-iterations",
        "3",
        "--completion-promise",
        "ALL GREEN",
        "--kind",
        "db",
    )
    claude.prompt("go")
    claude.text("<promise>BLOCKED</promise>\nReason: which database?")
    assert claude.stop().stdout.startswith("⛔ Ralph loop blocked at iteration 1")
    sid = f"cc-{claude.session}"
    assert project.cli("unblock", sid, "use sqlite", "--iterations", "4").returncode == 0
    claude.prompt("go on")
    claude.text("Alright.")
    assert "⚠" not in block(claude.stop())["systemMessage"]
    project.write("ralph.toml", "max_iterations = 9\n" + PASSING)  # under the loop's own limit: no change
    claude.text("Still at it.")
    assert "⚠" not in block(claude.stop())["systemMessage"]
    project.write("ralph.toml", "require_passing_validation = true\n" + PASSING)
    claude.text("And again.")
    note = block(claude.stop())["systemMessage"].split("\n")[1]
    assert note.startswith(
        f"⚠ {project.dir / 'ralph.toml'} changed since this loop started (require_passing_validation)"
    )
