"""Journeys of the git snapshots (docs/snapshots.md): ``ralph-ledger run`` in a real git project with a
scripted agent that changes files each iteration, then ``diff``, ``rollback`` and
``checkpoint prune --snapshots`` as a user types them; outside git, nothing is taken."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import AGENT_PREAMBLE
from tests.journeys.conftest import GIT, Project

AGENT = (
    "import os, shutil\n"
    + AGENT_PREAMBLE
    + """\
root = pathlib.Path.cwd()
if n == 1:
    (root / "app.py").write_text("print('v1')\\n")
    (root / "notes.txt").write_text("first notes\\n")
elif n == 2:
    (root / "app.py").write_text("print('v2')\\nprint('more')\\n")
    (root / "notes.txt").unlink()
    (root / "new.txt").write_text("new\\n")
    (root / "logo.bin").write_bytes(bytes(range(256)))
    (root / "build").mkdir(exist_ok=True)
    (root / "build" / "out.log").write_text("ignored\\n")
    (root / "big.bin").write_bytes(os.urandom(8192))
if n == 1:  # what the work tree held when iteration 1 ended, byte for byte
    keep = state / "after1"
    for p in root.rglob("*"):
        rel = p.relative_to(root)
        if p.is_file() and rel.parts[0] not in (".git", ".ralph"):
            (keep / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, keep / rel)
print("<promise>COMPLETE</promise>" if n >= 3 else f"iteration {n} done")
"""
)
"""A stand-in agent: iteration 1 writes two files, iteration 2 edits, deletes, adds a text file, a
small binary, an ignored file and one over the size limit; iteration 3 completes."""


def _loop(project: Project, tmp: Path, config: str = "snapshot_max_bytes = 4096\n") -> Path:
    """Run the scripted agent to its end in ``project`` (session ``s1``); the agent's state folder."""
    project.write(".gitignore", "build/\n")
    project.write("ralph.toml", config)
    subprocess.run([*GIT, "add", "-A"], cwd=project.dir, check=True)
    subprocess.run([*GIT, "commit", "-qm", "config"], cwd=project.dir, check=True)
    state = tmp / "state"
    state.mkdir()
    agent = tmp / "agent.py"
    agent.write_text(AGENT)
    done = project.cli("run", "--session", "s1", "--", sys.executable, str(agent), str(state), input="go\n")
    assert done.returncode == 0, done.stderr
    said = [line for line in (done.stdout + done.stderr).splitlines() if "left out" in line]
    big = "snapshot_max_bytes = 4096" in config
    assert said == (
        ["[ralph-ledger] s1: iteration 2: left out of its git snapshot (over the size limit): big.bin"]
        if big
        else []
    )
    return state


def _git(project: Project, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=project.dir, capture_output=True, text=True, check=True).stdout


def test_diff_of_iteration_2_is_what_it_changed(project: Project, tmp_path: Path) -> None:
    _loop(project, tmp_path)
    head = _git(project, "rev-parse", "HEAD")
    diff = project.cli("diff", "s1", "2")
    assert diff.returncode == 0, diff.stderr
    assert "\x1b[" not in diff.stdout  # no colour: not a terminal
    assert "+print('v2')" in diff.stdout and "-print('v1')" in diff.stdout
    assert "deleted file mode" in diff.stdout and "a/notes.txt" in diff.stdout
    assert "b/new.txt" in diff.stdout and "Binary files /dev/null and b/logo.bin differ" in diff.stdout
    assert "build/out.log" not in diff.stdout and "big.bin" not in diff.stdout
    assert diff.stderr == "ralph-ledger: left out of the snapshots (over the size limit): big.bin\n"
    one = project.cli("diff", "s1", "1")
    assert "+print('v1')" in one.stdout and "+first notes" in one.stdout and "new.txt" not in one.stdout
    both = project.cli("diff", "s1", "1..2")
    assert "+print('v2')" in both.stdout and "notes.txt" not in both.stdout
    rows = project.cli("sql", "SELECT iteration, path, added, removed FROM changes ORDER BY 1, 2", "--json")
    assert json.loads(rows.stdout) == [
        {"iteration": 1, "path": "app.py", "added": 1, "removed": 0},
        {"iteration": 1, "path": "notes.txt", "added": 1, "removed": 0},
        {"iteration": 2, "path": "app.py", "added": 2, "removed": 1},
        {"iteration": 2, "path": "logo.bin", "added": None, "removed": None},
        {"iteration": 2, "path": "new.txt", "added": 1, "removed": 0},
        {"iteration": 2, "path": "notes.txt", "added": 0, "removed": 1},
    ]
    taken = [e for e in project.journal("s1") if e["type"] == "snapshot_taken"]
    assert [e["iteration"] for e in taken] == [1, 2, 3]
    assert taken[1]["left_out"] == ["big.bin"] and taken[1]["parent"] == taken[0]["commit"]
    assert taken[0]["parent"] == head.strip()
    refs = _git(project, "for-each-ref", "--format=%(refname) %(objectname)", "refs/ralph/")
    assert refs.split("\n")[:3] == [f"refs/ralph/s1/{e['iteration']} {e['commit']}" for e in taken]
    # the user's branch, HEAD, index and stash are as they were
    assert _git(project, "rev-parse", "HEAD") == head and _git(project, "stash", "list") == ""
    assert _git(project, "diff", "--cached", "--name-only") == ""
    assert _git(project, "log", "--format=%s") == "config\ninit\n"
    missing = project.cli("diff", "s1", "7")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1
    assert "no snapshot of iteration 7" in missing.stderr


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and p.relative_to(root).parts[0] not in (".git", ".ralph")
    }


def test_rollback_to_iteration_1_restores_the_tree_byte_for_byte(project: Project, tmp_path: Path) -> None:
    state = _loop(project, tmp_path)
    head = _git(project, "rev-parse", "HEAD")
    back = project.cli("rollback", "s1", "--to", "1")
    assert back.returncode == 0, back.stderr
    assert "restored to iteration 1" in back.stdout
    now, then = _files(project.dir), _files(state / "after1")
    left_alone = {"build/out.log", "big.bin"}  # ignored, and left out for its size: never touched
    assert {k: v for k, v in now.items() if k not in left_alone} == then
    assert set(now) - set(then) == left_alone
    assert _git(project, "rev-parse", "HEAD") == head
    assert _git(project, "diff", "--cached", "--name-only") == ""
    override = [e for e in project.journal("s1") if e["type"] == "override"][-1]
    taken = [e for e in project.journal("s1") if e["type"] == "snapshot_taken"]
    assert override["kind"] == "rollback" and override["commit"] == taken[0]["commit"]
    again = project.cli("rollback", "s1", "--to", "3")  # the tree is a snapshot's: no refusal
    assert again.returncode == 0, again.stderr
    assert (project.dir / "app.py").read_text() == "print('v2')\nprint('more')\n"


def test_rollback_refuses_over_changes_in_no_snapshot(project: Project, tmp_path: Path) -> None:
    _loop(project, tmp_path)
    project.write("app.py", "print('my own edit')\n")
    refused = project.cli("rollback", "s1", "--to", "1")
    assert refused.returncode == 1
    assert refused.stderr.count("\n") == 1 and "in no snapshot of session 's1'" in refused.stderr
    assert "--force" in refused.stderr
    assert (project.dir / "app.py").read_text() == "print('my own edit')\n"
    assert not [e for e in project.journal("s1") if e["type"] == "override"]
    forced = project.cli("rollback", "s1", "--to", "1", "--force")
    assert forced.returncode == 0, forced.stderr
    assert (project.dir / "app.py").read_text() == "print('v1')\n"


def test_prune_removes_the_sessions_refs(project: Project, tmp_path: Path) -> None:
    _loop(project, tmp_path)
    pruned = project.cli("checkpoint", "prune", "s1", "--snapshots")
    assert pruned.returncode == 0, pruned.stderr
    assert "removed 3 snapshot refs" in pruned.stderr
    assert _git(project, "for-each-ref", "refs/ralph/") == ""


def test_snapshots_off_in_the_configuration(project: Project, tmp_path: Path) -> None:
    _loop(project, tmp_path, "snapshots = false\n")
    assert not [e for e in project.journal("s1") if e["type"] in ("snapshot_taken", "error_recorded")]
    assert _git(project, "for-each-ref", "refs/ralph/") == ""
    said = project.cli("diff", "s1", "1")
    assert said.returncode == 1 and "has no snapshots" in said.stderr


def test_outside_git_nothing_is_taken(tmp_path: Path) -> None:
    project = Project(tmp_path / "plain")
    shutil.rmtree(project.dir / ".git")
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    (tmp_path / "state").mkdir()
    cmd = [sys.executable, str(agent), str(tmp_path / "state")]
    done = project.cli("run", "--session", "s1", "--", *cmd, input="go\n")
    assert done.returncode == 0, done.stderr
    assert not [e for e in project.journal("s1") if e["type"] in ("snapshot_taken", "error_recorded")]
    said = project.cli("diff", "s1")
    assert said.returncode == 1 and said.stderr.count("\n") == 1 and "has no snapshots" in said.stderr


def test_a_wrong_iteration_is_one_line_in_the_same_words_for_diff_and_rollback(
    project: Project, tmp_path: Path
) -> None:
    """``diff s1 9`` and ``rollback s1 --to 9`` said the missing snapshot in two wordings; both now name
    the iterations that have one, in one line, exit 1, and nothing is touched."""
    _loop(project, tmp_path)
    before = _files(project.dir)
    said = "session 's1' has no snapshot of iteration 9 (3 snapshots: iterations 1, 2, 3)\n"
    diff, back = project.cli("diff", "s1", "9"), project.cli("rollback", "s1", "--to", "9")
    assert (diff.returncode, diff.stderr) == (1, f"ralph-ledger diff: {said}")
    assert (back.returncode, back.stderr) == (1, f"ralph-ledger rollback: {said}")
    assert _files(project.dir) == before
