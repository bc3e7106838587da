"""Where a newcomer first runs a loop (issue 24, the sweep): a folder that is not a git repository, a
repository with no commit yet, a path with spaces and accents, a task in Chinese or with an emoji, a
very long task, a shell without ``HOME``, and ``sessions --json`` read by ``jq``."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from tests.journeys.conftest import GIT, Project, clean_env, script

AGENT = """\
#!/bin/sh
cat > /dev/null
echo hello > "made by the agent.txt"
echo "<promise>COMPLETE</promise>"
"""
"""A shell agent run by a relative path: it writes a file and completes."""
COMPLETED_IDS = '.[] | select(.status == "complete") | .session_id'
"""A jq filter: the ids of the completed sessions."""


def folder_with_agent(root: Path, name: str = "agent.sh") -> Path:
    """``root`` made, holding the executable ``AGENT`` as ``name``."""
    root.mkdir(parents=True, exist_ok=True)
    agent = root / name
    agent.write_text(AGENT)
    agent.chmod(0o755)
    return root


def ralph(
    cwd: Path, *words: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``ralph-ledger WORDS`` typed in ``cwd``."""
    return subprocess.run(
        [script("ralph-ledger"), *words], cwd=cwd, input=stdin, capture_output=True, text=True, timeout=120,
        env=env if env is not None else clean_env(),
    )  # fmt: skip


def sessions(cwd: Path, env: dict[str, str] | None = None) -> list[dict[str, object]]:
    """``sessions --json`` in ``cwd``."""
    proc = ralph(cwd, "sessions", "--json", env=env)
    assert proc.returncode == 0 and proc.stderr == "", proc
    rows: list[dict[str, object]] = json.loads(proc.stdout)
    return rows


def columns(text: str) -> int:
    """The terminal columns ``text`` takes (wide characters two, combining marks none)."""
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text
    )


def test_a_loop_in_a_folder_that_is_not_a_git_repository(tmp_path: Path) -> None:
    """It runs and completes; the home is made there, ignored by a git that may come later; no file
    is said to have changed (there is no git to ask)."""
    folder = folder_with_agent(tmp_path / "plain")
    proc = ralph(folder, "run", "--session", "s1", "--", "./agent.sh", stdin="Say hello.\n")
    assert proc.returncode == 0, proc
    assert proc.stdout.splitlines()[-1].startswith("ralph-ledger run: s1: COMPLETE after 1 iteration"), proc
    assert (folder / ".ralph" / ".gitignore").read_text().splitlines()[-1] == "*"
    (row,) = sessions(folder)
    assert (row["session_id"], row["status"], row["task"], row["agent"]) == (
        "s1",
        "complete",
        "Say hello.",
        "agent.sh",
    )
    shown = ralph(folder, "show", "s1", "--json")
    assert json.loads(shown.stdout)[0]["files_modified"] == []


def test_a_loop_in_a_repository_with_no_commit_yet(tmp_path: Path) -> None:
    """``git init`` and nothing committed: the loop runs, and the file the agent made is recorded;
    ``git status`` afterwards shows the user's files, never the home."""
    folder = folder_with_agent(tmp_path / "fresh")
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    proc = ralph(folder, "run", "--session", "s1", "--", "./agent.sh", stdin="Say hello.\n")
    assert proc.returncode == 0, proc
    shown = json.loads(ralph(folder, "show", "s1", "--json").stdout)
    assert shown[0]["files_modified"] == ["made by the agent.txt"]
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=folder, capture_output=True, text=True
    ).stdout
    assert sorted(line[3:].strip('"') for line in status.splitlines()) == [
        "agent.sh",
        "made by the agent.txt",
    ]


def test_spaces_and_accents_in_the_project_prompt_and_agent_paths(tmp_path: Path) -> None:
    """A project folder, prompt file and agent script whose names hold spaces and accents; a task
    with an emoji, quotes and a tab: recorded as written, shown on one line, read back whole."""
    folder = folder_with_agent(tmp_path / "mon prøjet ü", "the agent.sh")
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    subprocess.run([*GIT, "commit", "-q", "--allow-empty", "-m", "init"], cwd=folder, check=True)
    task = 'Réparer les tests 🚀 — "vite"\tet bien'
    (folder / "PRÖMPT à lire.md").write_text(task + "\n")
    proc = ralph(folder, "run", "--session", "s1", "--prompt", "PRÖMPT à lire.md", "--", "./the agent.sh")
    assert proc.returncode == 0, proc
    (row,) = sessions(folder)
    assert (row["task"], row["agent"]) == (task, "the agent.sh")
    table = ralph(folder, "show", "s1").stdout.splitlines()
    assert (
        table[0].startswith("session s1: complete, ")
        and 'task Réparer les tests 🚀 — "vite"\\tet bien,' in table[0]
    )
    csv_text = ralph(folder, "sessions", "--csv").stdout
    assert '"Réparer les tests 🚀 — ""vite""\tet bien"' in csv_text


@pytest.mark.parametrize(
    "task", ["修复失败的测试", "テストを直す", "Fix 🚀 the build 🔥 now", "Cafe\u0301 tests"]
)
def test_a_task_in_wide_characters_keeps_the_table_aligned(project: Project, task: str) -> None:
    """In ``sessions``, the column after the task starts at the same terminal column on every line:
    a Chinese or Japanese task (each character two columns), emoji, or a combining accent. The table
    padded by characters, so the line of a Chinese task ran seven columns past the header."""
    project.write("agent.py", "import sys\nsys.stdin.read()\nprint('<promise>COMPLETE</promise>')\n")
    for session, text in (("wide", task), ("plain", "Make the tests pass.")):
        proc = project.cli("run", "--session", session, "--", sys.executable, "agent.py", input=text)
        assert proc.returncode == 0, proc
    lines = project.cli("sessions").stdout.splitlines()
    header, rows = lines[0], lines[2:4]
    assert any(task in row for row in rows), lines
    at = header.index("iteration")  # the header is ASCII: its characters are its columns
    starts = [columns(row[: row.index("  1  ") + 2]) for row in rows]  # where each row's iteration is
    assert starts == [at, at], (lines, starts, at)


def test_a_very_long_task_is_cut_in_the_table_and_whole_in_json(project: Project) -> None:
    """A 10 KB prompt: the table's task cell is 60 columns ending in ``…``, ``show``'s line too; JSON
    and SQL hold every character."""
    project.write("agent.py", "import sys\nsys.stdin.read()\nprint('<promise>COMPLETE</promise>')\n")
    task = "Fix the bug. " * 800
    project.write("LONG.md", task)
    proc = project.cli("run", "--session", "long", "--prompt", "LONG.md", "--", sys.executable, "agent.py")
    assert proc.returncode == 0, proc
    table = project.cli("sessions").stdout.splitlines()
    assert max(len(line) for line in table) < 300, table
    assert "Fix the bug. Fix the bug." in table[2] and "…" in table[2]
    shown = project.cli("show", "long").stdout.splitlines()[0]
    assert len(shown) < 300 and "…" in shown, shown
    (row,) = project.sessions()
    assert row["task"] == task.strip()
    length = project.cli("sql", "SELECT length(task) AS n FROM sessions", "--csv").stdout
    assert length.splitlines() == ["n", str(len(task.strip()))]


def test_a_shell_without_home_runs_and_lists_loops(project: Project) -> None:
    """``env -u HOME`` (a cron job, a bare container): ``run``, ``sessions`` and ``show`` work as
    anywhere, with nothing written outside the project."""
    project.write("agent.py", "import sys\nsys.stdin.read()\nprint('<promise>COMPLETE</promise>')\n")
    env = {k: v for k, v in clean_env().items() if k != "HOME"}
    proc = project.cli("run", "--session", "s1", "--", sys.executable, "agent.py", input="go", env=env)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc
    assert [r["session_id"] for r in sessions(project.dir, env=env)] == ["s1"]
    shown = project.cli("show", "s1", env=env)
    assert shown.returncode == 0 and shown.stdout.startswith("session s1: complete"), shown
    minimal = {"PATH": "/usr/bin:/bin"}  # env -i: no HOME, no LANG, no venv on PATH
    proc = project.cli("run", "--session", "s2", "--", sys.executable, "agent.py", input="go", env=minimal)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc
    assert {r["session_id"] for r in sessions(project.dir, env=minimal)} == {"s1", "s2"}


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
def test_sessions_json_piped_to_jq_and_to_a_reader_that_stops_early(project: Project) -> None:
    """``ralph-ledger sessions --json | jq -r '.[].session_id'`` lists the ids; ``| head -c 1`` (a
    reader that stops at once) is no error; an empty home is ``[]``."""
    project.write("agent.py", "import sys\nsys.stdin.read()\nprint('<promise>COMPLETE</promise>')\n")
    ledger = script("ralph-ledger")
    empty = subprocess.run(
        f"{ledger} sessions --json | jq length", shell=True, cwd=project.dir, capture_output=True, text=True,
        env=clean_env(), timeout=60,
    )  # fmt: skip
    assert (empty.returncode, empty.stdout, empty.stderr) == (0, "0\n", ""), empty
    for n in range(3):
        assert (
            project.cli("run", "--session", f"s{n}", "--", sys.executable, "agent.py", input="go").returncode
            == 0
        )
    ids = subprocess.run(
        f"set -o pipefail; {ledger} sessions --json | jq -r {shlex.quote(COMPLETED_IDS)}",
        shell=True, executable="/bin/bash", cwd=project.dir, capture_output=True, text=True, env=clean_env(),
        timeout=60,
    )  # fmt: skip
    assert ids.returncode == 0 and sorted(ids.stdout.split()) == ["s0", "s1", "s2"], ids
    early = subprocess.run(
        f"set -o pipefail; {ledger} sessions --json | head -c 1", shell=True, executable="/bin/bash",
        cwd=project.dir, capture_output=True, text=True, env=clean_env(), timeout=60,
    )  # fmt: skip
    assert (early.returncode, early.stdout, early.stderr) == (0, "[", ""), early
