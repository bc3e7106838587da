"""A loop's own git worktree (``ledger.drivers.runner.worktrees``): the names it takes, what an older journal
says of it, and the files changed in a worktree that lies inside the ledger home."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ledger import events as ev
from ledger.core.home import Home, default_home
from ledger.drivers.runner.changes import files_changed, snapshot
from ledger.drivers.runner.worktrees import WorktreeError, branch_of, check_name, ensure, folder_of
from ledger.storage.database import Ledger

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


@pytest.mark.parametrize("name", ["a", "fix-login", "v1.2", "under_score", "A9", "x" * 64])
def test_a_folder_and_branch_name_is_taken(name: str) -> None:
    assert check_name(name) == name
    assert branch_of(name) == f"ralph/{name}"
    ok = subprocess.run(["git", "check-ref-format", "--branch", branch_of(name)], capture_output=True)
    assert ok.returncode == 0


@pytest.mark.parametrize("name", ["a b", "..", "a..b", "a.", ".a", "-a", "a/b", "x.lock", "", "é", "x" * 65])
def test_anything_else_is_refused(name: str) -> None:
    with pytest.raises(WorktreeError, match="expected a folder and branch name") as caught:
        check_name(name)
    assert caught.value.code == 2


def test_an_older_session_started_decodes_as_run_in_the_projects_checkout(tmp_path: Path) -> None:
    line = b'{"type":"session_started","session_id":"old","seq":1,"ts":"2025-01-01T00:00:00Z","iteration":0}'
    event = ev.decode(line)
    assert isinstance(event, ev.SessionStarted) and (event.worktree, event.branch) == ("", "")
    home = Home(tmp_path / "home")
    home.ensure()
    (home.journals / "old.jsonl").write_bytes(line + b"\n")
    ledger = Ledger.memory(home)
    ledger.ingest()
    assert ledger.rows("SELECT worktree, branch FROM sessions") == [{"worktree": None, "branch": None}]


def repository(root: Path) -> Path:
    """A git repository with one commit, its home folder made."""
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / "a.txt").write_text("a\n")
    subprocess.run([*GIT, "add", "-A"], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-qm", "init"], cwd=root, check=True)
    (root / ".ralph" / "journals").mkdir(parents=True)
    return root


def test_files_changed_in_a_worktree_inside_the_home_are_seen(tmp_path: Path) -> None:
    """The home's own files stay out of the main checkout's changes; a worktree in the home keeps all
    of its paths (they all lie under the home, and were all left out before)."""
    repo = repository(tmp_path / "repo")
    home = repo / ".ralph"
    tree = ensure(repo, folder_of(repo, "w"), branch_of("w")).path
    assert tree == home / "worktrees" / "w" and tree.is_dir()
    before = snapshot(tree, home)
    (tree / "a.txt").write_text("changed\n")
    (tree / "new.txt").write_text("new\n")
    assert files_changed(before, snapshot(tree, home)) == ["a.txt", "new.txt"]
    main_before = snapshot(repo, home)
    (home / "journals" / "s.jsonl").write_text("{}\n")
    assert files_changed(main_before, snapshot(repo, home)) == []
    assert (repo / "a.txt").read_text() == "a\n"


def test_the_default_home_in_a_worktree_is_its_repositorys(tmp_path: Path) -> None:
    repo = repository(tmp_path / "repo")
    tree = ensure(repo, folder_of(repo, "w"), branch_of("w")).path
    (tree / "sub").mkdir()
    assert default_home(tree) == default_home(tree / "sub") == repo / ".ralph"
    assert default_home(repo) == repo / ".ralph"
