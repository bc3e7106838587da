"""Git snapshots (``ledger.core.snapshots``, ``ledger.loop.snapshots``): the user's index, branch and
``HEAD`` untouched, a repository without commits, ignored and large files, session ids in ref names,
and a git that is missing (one line, the iteration still recorded)."""

from __future__ import annotations

import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ledger import events as ev
from ledger.core import snapshots as git
from ledger.core.home import Home
from ledger.loop.config.loop_config import LoopConfig
from ledger.loop.decision import Turn
from ledger.loop.engine import Engine
from ledger.loop.snapshots import base_of
from ledger.loop.step import LoopSession

WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


def run(cwd: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    run(root, "init", "-q")
    (root / "a.txt").write_text("one\n")
    run(root, "add", "a.txt")
    run(root, "commit", "-qm", "init")
    return root


def test_a_snapshot_leaves_the_users_index_head_and_branch_alone(repo: Path) -> None:
    (repo / "a.txt").write_text("one\ntwo\n")
    (repo / "staged.txt").write_text("staged\n")
    run(repo, "add", "staged.txt")
    (repo / "untracked.txt").write_text("u\n")
    index, head = (repo / ".git" / "index").read_bytes(), run(repo, "rev-parse", "HEAD")
    status = run(repo, "status", "--porcelain")
    r = git.repo_of(repo)
    assert r is not None and r.head == head.strip()
    snap = git.take(r, git.ref_name("s", 1), r.head, when=WHEN, message="m")
    assert (repo / ".git" / "index").read_bytes() == index
    assert run(repo, "rev-parse", "HEAD") == head and run(repo, "status", "--porcelain") == status
    assert run(repo, "rev-parse", "refs/ralph/s/1").strip() == snap.commit
    names = run(repo, "ls-tree", "--name-only", snap.commit).split()
    assert names == ["a.txt", "staged.txt", "untracked.txt"]
    assert sorted(snap.files) == [("a.txt", 1, 0), ("staged.txt", 1, 0), ("untracked.txt", 1, 0)]
    assert not list((repo / ".git").glob("ralph-index*"))  # the temporary index is gone


def test_a_repository_without_commits_and_the_size_limit(tmp_path: Path) -> None:
    root = tmp_path / "new"
    root.mkdir()
    run(root, "init", "-q")
    (root / ".gitignore").write_text("*.log\n")
    (root / "x.log").write_text("ignored\n")
    (root / "big.bin").write_bytes(b"\0" * 2000)
    (root / "small.bin").write_bytes(b"\0\1\2")
    r = git.repo_of(root)
    assert r is not None and r.head == ""
    snap = git.take(r, git.ref_name("s", 1), "", when=WHEN, message="m", max_bytes=1000)
    assert snap.parent == "" and snap.left_out == ("big.bin",)
    assert sorted(snap.files) == [(".gitignore", 1, 0), ("small.bin", None, None)]


def test_outside_git_there_is_no_repository(tmp_path: Path) -> None:
    assert git.repo_of(tmp_path) is None


@pytest.mark.parametrize("bad", ["a..b", "x.lock", "a/b", "end.", ".dot", "sp ace", ""])
def test_a_session_id_that_cannot_name_a_ref_is_refused(bad: str) -> None:
    with pytest.raises(git.SnapshotError, match="cannot name a git ref"):
        git.ref_name(bad, 1)


def test_the_parent_follows_a_rollback() -> None:
    snaps = [ev.SnapshotTaken(session_id="s", iteration=n, commit=f"c{n}", tree=f"t{n}") for n in (1, 2, 3)]
    assert base_of(snaps, 1) == ("", "") and base_of(snaps, 3) == ("c2", "t2")
    rolled: list[ev.AnyEvent] = [
        *snaps,
        ev.Override(session_id="s", iteration=3, kind="rollback", commit="c1"),
    ]
    assert base_of(rolled, 4) == ("c1", "t1")


def _turn_in(repo: Path, home: Path, monkeypatch: pytest.MonkeyPatch | None = None) -> list[ev.AnyEvent]:
    engine = Engine(Home.resolve(home), work_dir=repo, fsync=False)
    engine.start("s", LoopConfig(max_iterations=5))
    session = LoopSession(engine, "s", "task")
    if monkeypatch is not None:
        monkeypatch.setenv("PATH", str(repo / "no-git-here"))
    session.take_turn(Turn("working"))
    session.take_turn(Turn("working"))
    return session.events()


def test_the_step_records_a_snapshot_with_the_turn(repo: Path, tmp_path: Path) -> None:
    (repo / "a.txt").write_text("changed\n")
    events = _turn_in(repo, tmp_path / "home")
    taken = [e for e in events if isinstance(e, ev.SnapshotTaken)]
    assert [e.iteration for e in taken] == [1, 2]
    assert taken[0].files == [ev.FileChange(path="a.txt", added=1, removed=1)] and taken[1].files == []
    kinds = [type(e).__name__ for e in events if e.iteration == 1]
    assert kinds.index("SnapshotTaken") < kinds.index("ValidationRan")  # the guards see it


def test_a_missing_git_is_one_line_and_the_iteration_is_still_recorded(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = _turn_in(repo, tmp_path / "home", monkeypatch)
    errors = [e for e in events if isinstance(e, ev.ErrorRecorded)]
    assert [(e.component, e.message) for e in errors] == [
        ("snapshot", "no snapshot of iteration 1: git is not installed (not on PATH)")
    ]  # said once, not at every iteration
    assert len([e for e in events if isinstance(e, ev.ValidationRan)]) == 2


def test_a_file_rewritten_at_once_at_the_same_size_is_seen(repo: Path) -> None:
    """Git's racy-entry check needs the private index to keep the user's index's time: a copy made a
    second later would make the entry look clean by its stat data alone."""
    (repo / "a.txt").write_text("two\n")  # the same size, in the second the index was written
    time.sleep(1.1)  # the snapshot a second later (an agent's turn ends after its last write)
    r = git.repo_of(repo)
    assert r is not None
    snap = git.take(r, git.ref_name("s", 1), r.head, when=WHEN, message="m")
    assert snap.files == (("a.txt", 1, 1),)


def test_the_loop_files_are_never_in_a_snapshot(repo: Path) -> None:
    from ledger.drivers.claude_code.stop.locate import LOOP_FILE, STATE_FILE

    assert set(git.LOOP_STATE) == {LOOP_FILE, STATE_FILE}  # one list of the loop's own files
    (repo / ".claude").mkdir()
    for name in (*git.LOOP_STATE, ".claude/settings.json"):
        (repo / name).write_text("{}\n")
    r = git.repo_of(repo)
    assert r is not None
    snap = git.take(r, git.ref_name("s", 1), r.head, when=WHEN, message="m")
    assert [f[0] for f in snap.files] == [".claude/settings.json"]
