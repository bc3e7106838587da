"""Faults reproduced for real: a Stop hook killed with SIGKILL in the middle of rewriting the loop's
state file, and a home on a small filesystem that fills up under ``ingest``, ``sql`` and ``run``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.journeys.conftest import Project, fill, spawn
from tests.journeys.test_claude_code import CLAUDE, Claude, block, ledger_project, start

STATE = ".claude/ralph-loop.local.md"

KILLED_REWRITE = """\
import os, signal, sys
def replace(src, dst, *a, **k):  # the temp file is written in full; the kill comes before the rename
    os.kill(os.getpid(), signal.SIGKILL)
os.replace = replace
from ledger.cli import main
sys.exit(main(sys.argv[1:]))
"""
"""``ralph-ledger ARGS`` whose process kills itself when it is about to rename a rewritten file."""


def leftovers(project: Project) -> list[str]:
    """The names of the files beside the state file that are not the state file."""
    state = project.dir / STATE
    return sorted(p.name for p in state.parent.iterdir() if p.name != state.name and state.name in p.name)


def killed_stop(project: Project, claude: Claude) -> int:
    """A Stop hook that is killed (SIGKILL) in the middle of the state file's rewrite; its pid."""
    proc = spawn([sys.executable, "-c", KILLED_REWRITE, "hook", "claude-code"], project.dir, claude.event())
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, (out, err)
    assert out == "", out  # killed before it could answer
    return proc.pid


def test_a_stop_killed_mid_rewrite_leaves_no_temp_file_once_the_next_stop_ran(
    project: Project, tmp_path: Path
) -> None:
    assert project.cli("init", "claude-code").returncode == 0
    start(project, "Write the parser", "--completion-promise", "DONE", "--max-iterations", "9")
    claude = Claude(project)
    claude.prompt("/ralph-loop Write the parser")
    claude.text("Started on the parser.")
    dead = killed_stop(project, claude)
    orphans = leftovers(project)
    assert len(orphans) == 1 and str(dead) in orphans[0], orphans  # the fault, as it happens

    # a rewrite in progress in a live process, and files that are not ours, are never touched
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        in_progress = f".ralph-loop.local.md.ralph-tmp.{live.pid}.{time.monotonic_ns()}"  # our pattern
        (project.dir / ".claude" / in_progress).write_text("being written\n")
        (project.dir / ".claude" / ".ralph-loop.local.md.bak").write_text("the user's\n")
        (project.dir / ".claude" / ".ralph-loop.local.md.tmp").write_text("the user's\n")
        assert block(claude.stop())["reason"] == "Write the parser"
        assert leftovers(project) == sorted(
            [in_progress, ".ralph-loop.local.md.bak", ".ralph-loop.local.md.tmp"]
        )
    finally:
        live.kill()
        live.wait()

    # the loop ends (the state file is removed, not rewritten): the writer is gone, so is its file
    claude.text("Parser written.\n<promise>DONE</promise>")
    assert claude.stop().stdout == "✅ Ralph loop: Detected <promise>DONE</promise>\n"
    assert not (project.dir / STATE).exists()
    assert leftovers(project) == [".ralph-loop.local.md.bak", ".ralph-loop.local.md.tmp"]


def test_a_loop_start_after_a_killed_rewrite_removes_the_orphan(project: Project) -> None:
    assert project.cli("init", "claude-code").returncode == 0
    start(project, "Write the parser", "--max-iterations", "9")
    claude = Claude(project)
    claude.text("Started on the parser.")
    killed_stop(project, claude)
    assert len(leftovers(project)) == 1
    (project.dir / STATE).unlink()  # as `loop start` says to, to start another loop
    start(project, "Write the lexer", "--max-iterations", "3")  # it writes the state file anew
    assert leftovers(project) == []
    assert "Write the lexer" in (project.dir / STATE).read_text()


def test_a_ledger_loop_stop_killed_mid_rewrite_leaves_no_temp_file_once_the_next_stop_ran(
    project: Project,
) -> None:
    ledger_project(project)
    assert project.cli("init", "claude-code").returncode == 0
    start(project, "Write the parser", "--max-iterations", "9")
    loop_file = project.dir / ".claude" / "ralph-ledger.local.json"
    assert loop_file.exists()
    claude = Claude(project)
    claude.text("Started on the parser.")
    dead = killed_stop(project, claude)  # killed as it claims the loop file for this session

    def ours() -> list[str]:
        return [p.name for p in loop_file.parent.iterdir() if p.name.startswith(f".{loop_file.name}.")]

    assert len(ours()) == 1 and str(dead) in ours()[0], ours()
    assert block(claude.stop())["decision"] == "block"
    assert ours() == []
    assert json.loads(loop_file.read_text())["claude_session_id"] == CLAUDE


# --- a full disk --------------------------------------------------------------------------------


def one_error_line(proc: subprocess.CompletedProcess[str], *names: str) -> str:
    """The one line the command printed on a full disk; it says where (one of ``names``) and why."""
    assert proc.returncode == 1, proc
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith("ralph-ledger: ") and line.endswith("No space left on device"), line
    assert ": :" not in line and not line.startswith("ralph-ledger: No space"), line
    assert any(name in line for name in names), line
    return line


def test_a_full_disk_is_named_by_ingest_sql_and_run(project: Project, small_disk: Path) -> None:
    home = small_disk / "home"
    project.write("PROMPT.md", "Do it.\n")
    agent = project.write("agent.py", "print('<promise>COMPLETE</promise>')\n")

    def run(session: str) -> subprocess.CompletedProcess[str]:
        argv = ["--home", str(home), "run", "--session", session, "--prompt", "PROMPT.md", "--"]
        return project.cli(*argv, sys.executable, str(agent))

    assert run("s1").returncode == 0
    assert project.cli("--home", str(home), "ingest").returncode == 0
    assert run("s2").returncode == 0  # not ingested yet: the next ingest has work to write
    fill(small_disk)

    scratch = str(home / "tmp")
    ingest = one_error_line(project.cli("--home", str(home), "ingest"), scratch, str(home / "ledger.duckdb"))
    assert "into the scratch file" in ingest, ingest  # the operation that failed
    sql = project.cli("--home", str(home), "sql", "SELECT count(*) FROM events")
    one_error_line(sql, scratch, str(home / "ledger.duckdb"))
    journal = str(home / "journals" / "s3.jsonl")
    assert f"appending to the journal {journal}" in one_error_line(run("s3"), journal)
    assert list((home / "tmp").iterdir()) == []  # a failed scratch file is removed at once


def test_a_stop_hook_on_a_full_disk_allows_the_stop_and_names_what_failed(
    project: Project, small_disk: Path
) -> None:
    home = small_disk / "home"
    assert project.cli("init", "claude-code").returncode == 0
    start(project, "Write the parser", "--max-iterations", "9")
    claude = Claude(project)
    home.mkdir()
    fill(small_disk)  # the loop's journal is a new file: it needs room the disk no longer has
    claude.text("Started on the parser.")
    proc = claude.stop("--home", str(home))
    assert proc.stdout == ""  # the stop is allowed: the hook never wedges the agent
    line = proc.stderr.strip()
    assert "\n" not in line and "Traceback" not in line, proc.stderr
    assert line.startswith("ralph-ledger hook: ") and line.endswith("; allowing the stop"), line
    assert f"appending to the journal {home / 'journals'}" in line, line
    assert "No space left on device" in line and ": :" not in line, line
