"""Journeys through the Claude Code integration: ``ralph-ledger init claude-code``, ``loop start`` and
the Stop hook run by its installed script with the JSON Claude Code writes on its stdin, in a fresh git
project, with transcripts written the way Claude Code writes them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.journeys.conftest import Project, clean_env, script

CLAUDE = "4b0c6a1e-7d2f-4c3b-9a8e-1f2d3c4b5a69"


class Claude:
    """One Claude Code session on a project: its transcript and its Stop hook calls."""

    def __init__(self, project: Project, session: str = CLAUDE) -> None:
        self.project = project
        self.session = session
        self.transcript = project.dir.parent / f"{session}.jsonl"
        self.transcript.touch()
        self.messages = 0

    def prompt(self, text: str) -> None:
        """The user types ``text``: a new turn starts."""
        self.lines({"type": "user", "sessionId": self.session, "message": {"role": "user", "content": text}})

    def says(self, *blocks: dict[str, Any], tokens: tuple[int, int] = (100, 10), mid: str = "") -> str:
        """One assistant message, one transcript line per content block (as Claude Code writes them),
        every line repeating the message's usage; the output count grows to its final value."""
        self.messages += 1
        mid = mid or f"msg_{self.messages:03d}"
        for i, block in enumerate(blocks, 1):
            usage = {"input_tokens": tokens[0], "output_tokens": tokens[1] * i // len(blocks)}
            message = {"id": mid, "role": "assistant", "content": [block], "usage": usage}
            self.lines({"type": "assistant", "sessionId": self.session, "message": message})
        return mid

    def text(self, text: str, **kw: Any) -> str:
        """An assistant message with one text block."""
        return self.says({"type": "text", "text": text}, **kw)

    def works(self, text: str, **kw: Any) -> str:
        """An assistant message that runs a command (a tool call, no file edited), then says
        ``text``: a turn that made progress, as Claude Code's stop-hook block cap counts it."""
        run = {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:12]}", "name": "Bash"}
        return self.says({**run, "input": {"command": "pytest -q"}}, {"type": "text", "text": text}, **kw)

    def lines(self, *objs: dict[str, Any]) -> None:
        with self.transcript.open("a") as f:
            f.writelines(json.dumps(o) + "\n" for o in objs)

    def event(self, cwd: Path | None = None, **fields: Any) -> str:
        """The Stop hook's stdin, as Claude Code sends it."""
        data = {
            "session_id": self.session,
            "transcript_path": str(self.transcript),
            "cwd": str(cwd or self.project.dir),
            "permission_mode": "default",
            "hook_event_name": "Stop",
            "stop_hook_active": False,
            **fields,
        }
        return json.dumps(data)

    def stop(
        self, *options: str, cwd: Path | None = None, env: dict[str, str] | None = None, **fields: Any
    ) -> subprocess.CompletedProcess[str]:
        """``ralph-ledger [OPTIONS] hook claude-code`` with the Stop event on stdin, run from ``cwd``
        (the project by default) with stdin's ``cwd`` the same."""
        proc = self.project.cli(
            *options, "hook", "claude-code", input=self.event(cwd, **fields), cwd=cwd, env=env
        )
        assert proc.returncode == 0, proc
        return proc


def block(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The block decision the hook printed."""
    assert proc.stderr == "", proc.stderr
    answer: dict[str, Any] = json.loads(proc.stdout)
    assert answer["decision"] == "block", answer
    return answer


def tags(project: Project, session: str) -> list[str]:
    return [e["type"] for e in project.journal(session)]


def start(project: Project, *args: str, cwd: Path | None = None) -> str:
    proc = project.cli("loop", "start", *args, cwd=cwd)
    assert proc.returncode == 0 and proc.stderr == "", proc
    return proc.stdout


def by_id(project: Project) -> dict[str, dict[str, Any]]:
    return {row["session_id"]: row for row in project.sessions()}


def ledger_project(project: Project) -> None:
    """Give the project a ralph configuration (so ``loop start`` defaults to the ledger mode)
    whose one rule passes."""
    project.write(
        "ralph.toml", f"[[rules]]\nname = 'ok'\ntype = 'command'\nargv = [{sys.executable!r}, '-c', '']\n"
    )


# --- 3.1 loop identity ----------------------------------------------------------------------------


def test_two_plugin_loops_in_one_claude_session_are_two_sessions(project: Project) -> None:
    claude = Claude(project)
    assert project.cli("init", "claude-code").returncode == 0
    start(project, "Write the parser", "--completion-promise", "DONE", "--max-iterations", "5")
    claude.prompt("/ralph-loop Write the parser")
    claude.text("Started on the parser.")
    assert block(claude.stop())["reason"] == "Write the parser"
    claude.text("Parser written.\n<promise>DONE</promise>")
    assert claude.stop().stdout == "✅ Ralph loop: Detected <promise>DONE</promise>\n"
    first = project.journal(f"cc-{CLAUDE}")

    start(project, "Write the printer", "--completion-promise", "SHIPPED")
    claude.prompt("/ralph-loop Write the printer")
    claude.text("Started on the printer.")
    assert block(claude.stop())["reason"] == "Write the printer"
    claude.text("<promise>SHIPPED</promise>")
    assert claude.stop().stdout == "✅ Ralph loop: Detected <promise>SHIPPED</promise>\n"

    assert project.journal(f"cc-{CLAUDE}") == first  # the finished loop is not appended to
    assert tags(project, f"cc-{CLAUDE}-2")[0] == "session_started"
    rows = by_id(project)
    assert {s: (r["task"], r["status"], r["iteration"]) for s, r in rows.items()} == {
        f"cc-{CLAUDE}": ("Write the parser", "complete", 2),
        f"cc-{CLAUDE}-2": ("Write the printer", "complete", 2),
    }
    assert sum(r["tokens"] for r in rows.values()) == 4 * 110  # every message counted once, in one loop
    assert project.cli("show", f"cc-{CLAUDE}").returncode == 0  # the first loop keeps its old id


def test_a_loop_restarted_within_the_same_second_is_a_new_session(project: Project) -> None:
    """The user deletes a running loop's file (as ``loop start`` tells them to) and starts another in
    the second the first one started: ``started_at`` is the same, yet the new loop is its own session."""
    claude = Claude(project)
    start(project, "Write the parser", "--max-iterations", "9")
    state = project.dir / ".claude" / "ralph-loop.local.md"
    first_file = state.read_text()
    claude.prompt("go")
    claude.text("one")
    assert block(claude.stop())["reason"] == "Write the parser"
    state.unlink()
    start(project, "Write the printer", "--max-iterations", "9")
    started_at = next(line for line in first_file.splitlines() if line.startswith("started_at:"))
    second = state.read_text()
    state.write_text(  # as if written in the same second: only the time is the same
        "\n".join(started_at if line.startswith("started_at:") else line for line in second.splitlines())
    )
    claude.prompt("now the printer")
    claude.text("two")
    answer = block(claude.stop())
    assert (answer["reason"], answer["systemMessage"].split(" |")[0]) == (
        "Write the printer",
        "🔄 Ralph iteration 2",
    )
    rows = by_id(project)
    assert {s: (r["task"], r["iteration"]) for s, r in rows.items()} == {
        f"cc-{CLAUDE}": ("Write the parser", 2),
        f"cc-{CLAUDE}-2": ("Write the printer", 2),
    }


def test_two_ledger_loops_in_one_claude_session_are_two_sessions(project: Project) -> None:
    ledger_project(project)
    claude = Claude(project)
    assert "rules and guards" in start(project, "First task")
    claude.prompt("go")
    claude.text("Done.\n<promise>COMPLETE</promise>")
    assert claude.stop().stdout.startswith("✅ Ralph loop complete after 1 iteration")
    assert "rules and guards" in start(project, "Second task", "--max-iterations", "4")
    claude.prompt("go again")
    claude.text("Half way.")
    assert block(claude.stop())["reason"].startswith("Second task")  # not thrown away
    claude.text("<promise>COMPLETE</promise>")
    assert claude.stop().stdout.startswith("✅ Ralph loop complete after 2 iterations")
    rows = by_id(project)
    assert {s: (r["task"], r["status"], r["iteration"]) for s, r in rows.items()} == {
        f"cc-{CLAUDE}": ("First task", "complete", 1),
        f"cc-{CLAUDE}-2": ("Second task", "complete", 2),
    }


# --- 3.2 finding the loop and the home --------------------------------------------------------------


def test_the_hook_finds_the_loop_after_the_agent_cd_into_a_subdirectory(project: Project) -> None:
    claude = Claude(project)
    start(project, "Fix src", "--max-iterations", "9")
    deep = project.dir / "src" / "pkg"
    deep.mkdir(parents=True)
    claude.prompt("go")
    claude.text("one")
    assert block(claude.stop(cwd=deep))["reason"] == "Fix src"  # run from there, stdin cwd there: walk up
    claude.text("two")
    elsewhere = project.dir.parent
    env = clean_env(CLAUDE_PROJECT_DIR=str(project.dir))
    assert block(claude.stop(cwd=elsewhere, env=env))["systemMessage"].startswith("🔄 Ralph iteration 3")
    claude.text("three")
    proc = project.cli("hook", "claude-code", input=claude.event(cwd=deep), cwd=project.dir)
    assert block(proc)["systemMessage"].startswith("🔄 Ralph iteration 4")  # the hook's own directory
    assert not (deep / ".ralph").exists() and not (deep / ".claude").exists()
    assert [e["iteration"] for e in project.journal(f"cc-{CLAUDE}") if e["type"] == "agent_turn"] == [1, 2, 3]


def test_loop_start_from_a_subdirectory_writes_the_loop_in_the_project_root(project: Project) -> None:
    deep = project.dir / "src"
    deep.mkdir()
    assert str(project.dir / ".claude") in start(project, "Task", cwd=deep)
    assert (project.dir / ".claude" / "ralph-loop.local.md").exists() and not (deep / ".claude").exists()


def test_the_hook_honours_home(project: Project, tmp_path: Path) -> None:
    claude = Claude(project)
    start(project, "Task", "--max-iterations", "9")
    claude.prompt("go")
    claude.text("one")
    block(claude.stop("--home", str(tmp_path / "elsewhere")))
    assert (tmp_path / "elsewhere" / "journals" / f"cc-{CLAUDE}.jsonl").exists()
    claude.text("two")
    deep = project.dir / "src"
    deep.mkdir()
    block(claude.stop("--home=rel-home", cwd=deep))  # relative: from the project, wherever it runs
    assert not (deep / "rel-home").exists()
    claude.text("three")
    proc = project.cli("hook", "claude-code", "--home", "after", input=claude.event())  # after the command
    assert block(proc)["systemMessage"].startswith("🔄 Ralph iteration 4")
    assert (project.dir / "after" / "journals" / f"cc-{CLAUDE}.jsonl").exists()
    assert (project.dir / "rel-home" / "journals" / f"cc-{CLAUDE}.jsonl").exists()
    assert not project.home.exists()
    proc = project.cli("--home", str(tmp_path / "elsewhere"), "sessions", "--json")
    assert [r["session_id"] for r in json.loads(proc.stdout)] == [f"cc-{CLAUDE}"]


# --- 3.3 a custom promise in the ledger mode --------------------------------------------------------


def test_a_custom_promise_is_the_only_one_that_completes_a_ledger_loop(project: Project) -> None:
    ledger_project(project)
    claude = Claude(project)
    start(project, "Make it green", "--completion-promise", "ALL GREEN", "--max-iterations", "5")
    claude.prompt("go")
    claude.text("<promise>COMPLETE</promise>")
    block(claude.stop())
    claude.text("Checked twice.\n<promise>ALL GREEN</promise>")
    out = claude.stop().stdout
    assert out.startswith("✅") and "ALL GREEN" in out and "COMPLETE<" not in out
    row = by_id(project)[f"cc-{CLAUDE}"]
    assert (row["status"], row["iteration"]) == ("complete", 2)


# --- 3.4 tokens exact across stops ------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["plugin", "ledger"])
def test_a_message_split_between_two_stops_is_counted_once(project: Project, mode: str) -> None:
    claude = Claude(project)
    if mode == "ledger":
        ledger_project(project)
    start(project, "Task", "--max-iterations", "9", "--mode", mode)
    claude.prompt("go")
    usage = {"input_tokens": 1000, "output_tokens": 5}
    first = {"id": "msg_split", "role": "assistant", "content": [{"type": "thinking"}], "usage": usage}
    claude.lines({"type": "assistant", "message": first})
    block(claude.stop())  # the stop sees the message's first line only
    rest = {**first, "content": [{"type": "text", "text": "done"}], "usage": {**usage, "output_tokens": 70}}
    claude.lines({"type": "assistant", "message": rest})
    block(claude.stop())
    assert by_id(project)[f"cc-{CLAUDE}"]["tokens"] == 1070


# --- 3.5 init claude-code -------------------------------------------------------------------------------


def test_init_writes_a_hook_command_that_runs_without_the_venv_on_path(project: Project) -> None:
    env = clean_env(PATH="/usr/bin:/bin")  # as Claude Code may run it: this venv is not on PATH
    proc = project.cli("init", "claude-code", env=env)
    assert proc.returncode == 0, proc
    assert "not on PATH" in proc.stdout and script("ralph-ledger") in proc.stdout
    settings = json.loads((project.dir / ".claude" / "settings.json").read_text())
    command = settings["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert command.split()[0] == script("ralph-ledger") and command.endswith(" hook claude-code")
    start(project, "Task", "--max-iterations", "3")
    claude = Claude(project)
    claude.prompt("go")
    claude.text("one")
    run = subprocess.run(
        ["/bin/sh", "-c", command],
        input=claude.event(),
        capture_output=True,
        text=True,
        env=env,
        cwd=project.dir,
    )
    assert (run.returncode, json.loads(run.stdout)["decision"]) == (0, "block"), run
    again = project.cli("init", "claude-code", env=env)
    assert again.stdout.startswith("already installed")
    assert len(json.loads((project.dir / ".claude" / "settings.json").read_text())["hooks"]["Stop"]) == 1


def test_init_updates_the_bare_command_an_older_version_wrote(project: Project) -> None:
    old = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "ralph-ledger hook claude-code"}]}]}}
    project.write(".claude/settings.json", json.dumps(old))
    assert project.cli("init", "claude-code").returncode == 0
    stop = json.loads((project.dir / ".claude" / "settings.json").read_text())["hooks"]["Stop"]
    assert [h["command"] for e in stop for h in e["hooks"]] == [f"{script('ralph-ledger')} hook claude-code"]


def test_init_from_a_subdirectory_installs_the_hook_where_loop_start_writes_the_loop(
    project: Project,
) -> None:
    """Run from ``src/``, ``init`` and ``loop start`` both act on the project root (the git work tree's),
    where Claude Code started there reads its settings; ``$CLAUDE_PROJECT_DIR`` wins when set."""
    deep = project.dir / "src" / "pkg"
    deep.mkdir(parents=True)
    proc = project.cli("init", "claude-code", cwd=deep)
    assert proc.returncode == 0 and str(project.dir / ".claude" / "settings.json") in proc.stdout, proc
    assert (project.dir / ".claude" / "settings.json").exists() and not (deep / ".claude").exists()
    start(project, "Task", cwd=deep)
    assert sorted(os.listdir(project.dir / ".claude")) == ["ralph-loop.local.md", "settings.json"]
    other = project.dir.parent / "declared"
    other.mkdir()
    proc = project.cli("init", "claude-code", cwd=deep, env=clean_env(CLAUDE_PROJECT_DIR=str(other)))
    assert proc.returncode == 0 and (other / ".claude" / "settings.json").exists(), proc
    proc = project.cli("init", "claude-code", "--project", ".", cwd=deep)  # said outright: that one
    assert proc.returncode == 0 and (deep / ".claude" / "settings.json").exists(), proc


def test_init_with_a_project_that_does_not_exist_is_a_usage_error(project: Project) -> None:
    missing = project.dir / "nope"
    proc = project.cli("init", "claude-code", "--project", str(missing))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and str(missing) in proc.stderr and "does not exist" in proc.stderr
    assert not missing.exists()


# --- 3.6 loop start --help --------------------------------------------------------------------------


def test_loop_start_help_starts_nothing(project: Project) -> None:
    for flag in ("--help", "-h"):
        proc = project.cli("loop", "start", flag)
        assert proc.returncode == 0 and proc.stdout.startswith("usage: ralph-ledger loop start"), proc
        assert "--completion-promise" in proc.stdout and proc.stderr == ""
        proc = project.cli("loop", "start", "A task", flag)
        assert proc.returncode == 0 and proc.stdout.startswith("usage:")
    assert not (project.dir / ".claude").exists()


def test_loop_start_checks_the_configuration_before_any_stop(project: Project) -> None:
    """A ``ralph.toml`` every stop would refuse is refused by ``loop start``: one line naming the file
    and the key, exit 1, no loop file (the agent never runs on a loop that cannot work)."""
    project.write("ralph.toml", "max_iterations = 0\nhooks = ['defualt']\n")
    proc = project.cli("loop", "start", "Fix it", "--mode", "ledger")
    assert proc.returncode == 1, proc
    assert len(proc.stderr.splitlines()) == 1 and "ralph.toml" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (project.dir / ".claude").exists()


def test_loop_start_refuses_a_loop_no_promise_could_complete(project: Project) -> None:
    """``exclusive_promises`` with none listed: only ``--completion-promise`` can give the loop a way to
    end; without it ``loop start`` says so in one line and writes nothing (it used to start a loop
    that ran to its limit and escalated, saying it would end on COMPLETE)."""
    project.write("ralph.toml", "exclusive_promises = true\ncompletion_promises = []\n")
    proc = project.cli("loop", "start", "Fix it", "--mode", "ledger")
    assert proc.returncode == 1 and len(proc.stderr.splitlines()) == 1, proc
    assert "ralph.toml: completion_promises:" in proc.stderr and "--completion-promise" in proc.stderr
    assert not (project.dir / ".claude").exists()
    proc = project.cli("loop", "start", "Fix it", "--mode", "ledger", "--completion-promise", "ALL GREEN")
    assert proc.returncode == 0 and "<promise>ALL GREEN</promise>" in proc.stdout, proc


# --- 3.7 a transcript the drop-in cannot use ----------------------------------------------------------


def test_an_unusable_transcript_stops_a_plugin_loop_with_one_line(project: Project) -> None:
    claude = Claude(project)
    start(project, "Task", "--max-iterations", "9")
    claude.prompt("go")
    claude.text("one")
    block(claude.stop())
    missing = project.dir.parent / "gone.jsonl"
    proc = claude.stop(transcript_path=str(missing))  # an older Claude Code: no last_assistant_message
    assert proc.stdout == "" and proc.stderr.count("\n") == 1, proc
    assert proc.stderr.startswith("⚠️  Ralph loop: ") and str(missing) in proc.stderr
    assert not (project.dir / ".claude" / "ralph-loop.local.md").exists()  # nothing keeps running
    row = by_id(project)[f"cc-{CLAUDE}"]
    assert row["status"] == "escalated"
    assert str(missing) in project.journal(f"cc-{CLAUDE}")[-1]["reason"]
    claude.text("three")
    assert claude.stop().stdout == ""  # no loop any more
    assert os.listdir(project.home / "journals") == [f"cc-{CLAUDE}.jsonl"]


def at_iteration_2(project: Project) -> Claude:
    """A ledger-native loop of at most 5 iterations whose first stop was blocked: iteration 2 begins."""
    ledger_project(project)
    claude = Claude(project)
    start(project, "Make it green", "--max-iterations", "5")
    claude.prompt("go")
    claude.text("Step one.")
    block(claude.stop())
    return claude
