"""Journeys of ``ralph-ledger run --worktree NAME``: several loops on one repository at once, each in
its own git worktree and branch, all recorded in the repository's one home."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import AGENT_PREAMBLE
from tests.journeys.conftest import GIT, Project, Terminal, clean_env, script
from tests.journeys.test_run import resume, wait_for_file

AGENT = (
    AGENT_PREAMBLE
    + """\
import os
label = sys.argv[2]
before = pathlib.Path("shared.txt").read_text()
runs = len(list(state.glob(f"{label}-run*.json"))) + 1  # (the two loops' agents share STATE)
(state / f"{label}-run{runs}.json").write_text(json.dumps(
    {"cwd": os.getcwd(), "home": os.environ.get("RALPH_HOME"), "before": before}))
pathlib.Path("shared.txt").write_text(f"edit by {label}\\n")
(state / f"started-{label}").touch()
if len(sys.argv) > 3:  # wait for the other loop's agent: both run at the same time, or neither promises
    end = time.monotonic() + 20
    while not (state / f"started-{sys.argv[3]}").exists():
        if time.monotonic() > end:
            print("the other loop never ran beside this one")
            sys.exit(1)
        time.sleep(0.05)
print("edited shared.txt\\n<promise>COMPLETE</promise>")
"""
)
"""A scripted agent (``agent.py STATE LABEL [PARTNER]``): it keeps where it ran, its ``RALPH_HOME`` and
the ``shared.txt`` it found, writes ``edit by LABEL`` over it, waits for PARTNER's agent to have
started too, and promises."""

HANG = (
    AGENT_PREAMBLE
    + """\
import os
before = pathlib.Path("shared.txt").read_text()
(state / f"run{n}.json").write_text(json.dumps({"cwd": os.getcwd(), "before": before}))
if n == 1:  # edit and commit on the loop's branch, then hang until the loop is interrupted
    pathlib.Path("shared.txt").write_text("committed by run 1\\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "commit", "-qam", "run 1"], check=True)
    (state / "ready").touch()
    time.sleep(60)
print("<promise>COMPLETE</promise>")
"""
)
"""An agent whose first run commits an edit and hangs; its second run promises."""

GATE = (
    AGENT_PREAMBLE
    + """\
label = sys.argv[2]
pathlib.Path("shared.txt").write_text(f"edit by {label}\\n")
(state / f"started-{label}").touch()
while not (state / "go").exists():  # hold the loop open until the test lets it finish
    time.sleep(0.05)
print("<promise>COMPLETE</promise>")
"""
)
"""An agent (``agent.py STATE LABEL``) that edits ``shared.txt``, says it started and promises once
``STATE/go`` exists."""

RULE = "import pathlib, sys; sys.exit(0 if pathlib.Path('shared.txt').read_text().startswith('edit') else 1)"
"""A validation rule that passes only where ``shared.txt`` was edited (never in the main checkout)."""


class Repo:
    """A git project with a committed ``shared.txt``, an untracked ``ralph.toml`` holding ``RULE``
    and a prompt, a scripted agent in ``tmp``."""

    def __init__(self, project: Project, tmp: Path, agent: str = AGENT) -> None:
        self.project, self.dir = project, project.dir
        project.write("shared.txt", "original\n")
        git(self.dir, "add", "-A")
        git(self.dir, "commit", "-qm", "shared")
        self.branch = git(self.dir, "branch", "--show-current")
        project.write("PROMPT.md", "Edit shared.txt.\n")
        rule = [sys.executable, "-c", RULE]
        project.write("ralph.toml", f"[[rules]]\nname = 'edited'\ntype = 'command'\nargv = {rule!r}\n")
        self.state = tmp / "state"
        self.state.mkdir(parents=True)
        (tmp / "agent.py").write_text(agent)
        self.agent = [sys.executable, str(tmp / "agent.py"), str(self.state)]

    def worktree(self, name: str) -> Path:
        """Where the worktree ``name`` lives."""
        return self.dir / ".ralph" / "worktrees" / name

    def start(self, *args: str) -> subprocess.Popen[str]:
        """``ralph-ledger run --max-iterations 1 --prompt PROMPT.md ARGS`` in the background, in its
        own process group (``ARGS`` end with ``--`` and the agent command)."""
        return subprocess.Popen(
            [script("ralph-ledger"), "run", "--max-iterations", "1", "--prompt", "PROMPT.md", *args],
            cwd=self.dir,
            env=clean_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def run(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Any:
        """``ralph-ledger run --prompt PROMPT.md ARGS``, to its end."""
        return self.project.cli("run", "--prompt", "PROMPT.md", *args, cwd=cwd, env=env, timeout=60)

    def ran(self, name: str) -> dict[str, Any]:
        """What the agent kept of its run ``name``."""
        record: dict[str, Any] = json.loads((self.state / f"{name}.json").read_text())
        return record


def git(cwd: Path, *args: str) -> str:
    """``git ARGS`` in ``cwd`` (a fixed identity), its output stripped; it must succeed."""
    done = subprocess.run([*GIT, *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def started(project: Project, session: str) -> dict[str, Any]:
    """The session's ``session_started`` event."""
    (event,) = [e for e in project.journal(session) if e["type"] == "session_started"]
    return event


def test_two_loops_at_once_each_edit_their_own_worktree(project: Project, tmp_path: Path) -> None:
    """Two loops started together edit the same file differently: each edit is in its worktree, on
    its branch; the main checkout is untouched; both sessions are in the one home, with where they ran."""
    repo = Repo(project, tmp_path)
    a = repo.start("--worktree", "a", "--", *repo.agent, "a", "b")
    b = repo.start("--worktree", "b", "--", *repo.agent, "b", "a")
    for proc in (a, b):
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, out + err
    assert (repo.dir / "shared.txt").read_text() == "original\n"  # the main checkout is untouched
    assert git(repo.dir, "status", "--porcelain", "--untracked-files=no") == ""
    assert git(repo.dir, "branch", "--show-current") == repo.branch
    rows = {r["branch"]: r for r in project.sessions()}
    assert sorted(rows) == ["ralph/a", "ralph/b"]
    for name in ("a", "b"):
        tree = repo.worktree(name)
        assert (tree / "shared.txt").read_text() == f"edit by {name}\n"
        assert git(tree, "branch", "--show-current") == f"ralph/{name}"
        assert git(tree, "diff", "--name-only") == "shared.txt"
        ran = repo.ran(f"{name}-run1")
        assert (Path(ran["cwd"]), ran["home"], ran["before"]) == (tree, str(project.home), "original\n")
        assert not (tree / ".ralph").exists()  # one home: the repository's
        row = rows[f"ralph/{name}"]
        session = row["session_id"]
        assert row["status"] == "complete" and session.startswith(f"{name}-"), row
        event = started(project, session)
        assert (event["worktree"], event["branch"]) == (str(tree), f"ralph/{name}")
        summary = project.cli("show", session).stdout.splitlines()[0]
        assert summary.endswith(f", worktree {tree} (branch ralph/{name})"), summary
        events = project.journal(session)
        (turn,) = [e for e in events if e["type"] == "agent_turn"]
        assert turn["files_modified"] == ["shared.txt"]  # what changed, seen in the worktree
        (validation,) = [e for e in events if e["type"] == "validation_ran"]
        assert validation["passed"], validation  # the rule ran in the worktree
    homes = sorted(p.parent.parent for p in repo.dir.rglob("journals/*.jsonl"))
    assert set(homes) == {project.home} and len(homes) == 2
    shown = project.cli("sql", "SELECT session_id, worktree FROM sessions ORDER BY branch", "--json")
    assert [Path(r["worktree"]) for r in json.loads(shown.stdout)] == [repo.worktree("a"), repo.worktree("b")]


def test_a_worktree_is_reused_and_held_by_one_loop_at_a_time(project: Project, tmp_path: Path) -> None:
    """A second loop in a worktree finds the first one's work there; while a loop runs, another one
    in the same worktree is refused in one line."""
    repo = Repo(project, tmp_path)
    first = repo.run("--worktree", "a", "--session", "a1", "--", *repo.agent, "a1")
    assert first.returncode == 0, first.stderr
    second = repo.run("--worktree", "a", "--session", "a2", "--", *repo.agent, "a2")
    assert second.returncode == 0, second.stderr
    assert "(reused)" in second.stdout and "(made from HEAD)" in first.stdout
    assert repo.ran("a2-run1")["before"] == "edit by a1\n"
    assert started(project, "a2")["worktree"] == str(repo.worktree("a"))
    assert git(repo.dir, "worktree", "list").count(".ralph/worktrees/a ") == 1
    seen = project.cli("sessions", "--json", cwd=repo.worktree("a"))  # from a shell in the worktree
    assert sorted(r["session_id"] for r in json.loads(seen.stdout)) == ["a1", "a2"], seen.stderr

    hang = Repo(Project(tmp_path / "other"), tmp_path / "hang", HANG)
    loop = hang.start("--worktree", "a", "--session", "s1", "--", *hang.agent)
    try:
        wait_for_file(hang.state / "ready", loop)
        busy = hang.run("--worktree", "a", "--session", "s2", "--", *hang.agent)
        assert busy.returncode == 1
        assert busy.stderr.strip().splitlines() == [
            f"ralph-ledger run: --worktree: {hang.worktree('a')} is in use by another running loop"
        ]
        assert not (hang.project.home / "journals" / "s2.jsonl").exists()
    finally:
        loop.send_signal(signal.SIGTERM)
        loop.communicate(timeout=20)


def test_resume_runs_in_the_worktree_the_session_recorded(project: Project, tmp_path: Path) -> None:
    """An interrupted loop resumes in its worktree, on its branch, without naming it again, even after
    the worktree was removed (made again from the branch); another --worktree is refused."""
    repo = Repo(project, tmp_path, HANG)
    loop = repo.start("--worktree", "a", "--session", "s1", "--", *repo.agent)
    wait_for_file(repo.state / "ready", loop)
    loop.send_signal(signal.SIGTERM)
    assert loop.wait(timeout=20) == 143
    tree = repo.worktree("a")
    wrong = project.cli("run", "--resume", "s1", "--worktree", "b")
    assert wrong.returncode == 2
    assert wrong.stderr.strip().splitlines() == [
        f"ralph-ledger run: session s1 ran in worktree {tree} (branch ralph/a): resume it without --worktree"
    ]
    git(repo.dir, "worktree", "remove", "--force", str(tree))
    assert not tree.exists()
    resumed = resume(project)
    assert resumed.returncode == 0, resumed.stderr
    assert f"s1: worktree {tree} on branch ralph/a (made from branch ralph/a)" in resumed.stdout
    second = repo.ran("run2")
    assert (Path(second["cwd"]), second["before"]) == (tree, "committed by run 1\n")  # the branch's work
    assert git(tree, "branch", "--show-current") == "ralph/a"
    assert [e["type"] for e in project.journal("s1")].count("session_started") == 1
    assert (repo.dir / "shared.txt").read_text() == "original\n"


@pytest.mark.parametrize("name", ["a b", "../x", "a..b", "x.lock", "", ".hidden", "a/b", "é", "x" * 65])
def test_a_bad_name_is_one_line_exit_2(project: Project, tmp_path: Path, name: str) -> None:
    repo = Repo(project, tmp_path)
    proc = repo.run(f"--worktree={name}", "--", *repo.agent, "a")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "ralph-ledger run: argument --worktree: expected a folder and branch name (1-64 letters, digits, "
        f"'_', '-', single dots inside, not ending in .lock), got {name!r} (see --help)"
    ]
    assert not (project.home / "worktrees").exists() and not list(repo.state.iterdir())


def refused(repo: Repo, proc: subprocess.CompletedProcess[str], line: str) -> None:
    """``proc`` exited 2 with ``line`` alone on stderr, and nothing started."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [line]
    assert not list(repo.state.iterdir())  # the agent never ran
    assert not (repo.project.home / "journals").exists()


def test_a_worktree_that_cannot_be_used_is_one_line_exit_2(project: Project, tmp_path: Path) -> None:
    """A folder outside any repository, a repository without a commit, git missing, the worktree
    checked out on another branch, its branch checked out elsewhere: one line each, exit 2."""
    repo = Repo(project, tmp_path)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "PROMPT.md").write_text("Edit shared.txt.\n")
    env = clean_env(GIT_CEILING_DIRECTORIES=str(tmp_path))
    proc = repo.run("--worktree", "a", "--", *repo.agent, "a", cwd=plain, env=env)
    refused(
        repo,
        proc,
        f"ralph-ledger run: --worktree: {plain} is not in a git repository (git init, commit, then run)",
    )
    assert not (plain / ".ralph").exists()

    subprocess.run(["git", "init", "-q"], cwd=plain, check=True)
    proc = repo.run("--worktree", "a", "--", *repo.agent, "a", cwd=plain, env=env)
    refused(repo, proc, f"ralph-ledger run: --worktree: {plain} has no commit yet: commit once, then run")

    no_git = tmp_path / "no-git"
    no_git.mkdir()
    proc = repo.run("--worktree", "a", "--", *repo.agent, "a", env=clean_env(PATH=str(no_git)))
    refused(repo, proc, "ralph-ledger run: --worktree needs git, which is not installed (not found on PATH)")

    tree = repo.worktree("a")
    git(repo.dir, "worktree", "add", "-q", "-b", "other", str(tree))
    proc = repo.run("--worktree", "a", "--", *repo.agent, "a")
    refused(
        repo,
        proc,
        f"ralph-ledger run: --worktree: {tree} has other checked out, not ralph/a "
        f"(git -C {tree} switch ralph/a, or remove that worktree)",
    )

    git(repo.dir, "switch", "-q", "-c", "ralph/b")
    proc = repo.run("--worktree", "b", "--", *repo.agent, "b")
    refused(repo, proc, f"ralph-ledger run: --worktree: branch ralph/b is checked out in {repo.dir}")
    assert not repo.worktree("b").exists()


def test_ralph_tui_shows_the_loops_side_by_side_with_their_branches(
    project: Project, tmp_path: Path, terminals: list[Terminal]
) -> None:
    """Two loops running at once in their worktrees are two rows of the sessions table, each showing
    its branch, live until they complete; the filter finds a loop by its branch, and its screen
    names the branch too."""
    repo = Repo(project, tmp_path, GATE)
    loops = [repo.start("--worktree", n, "--session", f"s-{n}", "--", *repo.agent, n) for n in "ab"]
    try:
        for name, loop in zip("ab", loops, strict=True):
            wait_for_file(repo.state / f"started-{name}", loop)
        term = Terminal([script("ralph-tui")], cwd=repo.dir, env=clean_env(), size=(200, 30))
        terminals.append(term)
        screen = term.wait_for(lambda s: rows(s, "running"), timeout=30)
        assert "⎇ ralph/a · Edit shared.txt." in next(x for x in screen.splitlines() if " s-a " in x), screen
        (repo.state / "go").touch()
        for loop in loops:
            out, err = loop.communicate(timeout=60)
            assert loop.returncode == 0, out + err
    finally:
        (repo.state / "go").touch()
        for loop in loops:
            if loop.poll() is None:
                loop.kill()
                loop.communicate()
    term.wait_for(lambda s: rows(s, "complete"), timeout=30)
    term.press("/")
    term.wait_for("Enter keeps it")  # the filter has the keys before it is typed in
    term.press("ralph/b", "Enter")
    term.wait_for(lambda s: "s-a" not in s and "s-b" in s)
    term.press("Enter")
    term.wait_for(lambda s: "s-b" in s and "⎇ ralph/b" in s and "iteration" in s.lower())
    term.press("q")
    assert term.exit_code() == 0


def rows(screen: str, status: str) -> bool:
    """Whether the screen shows two rows of loops in worktrees, both of ``status``."""
    lines = [line for line in screen.splitlines() if "⎇ ralph/" in line]
    return len(lines) == 2 and all(status in line for line in lines)


def readme_section() -> list[str]:
    """The manual's section on parallel loops (docs/runner.md), as lines."""
    lines = (Path(__file__).resolve().parents[2] / "docs" / "runner.md").read_text().splitlines()
    start = lines.index(next(x for x in lines if x.startswith("### Parallel loops in one repository")))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("#")), len(lines))
    return lines[start:end]


def fenced(lines: list[str], kind: str) -> list[str]:
    """The lines of the first ```kind block in ``lines``."""
    start = lines.index(f"```{kind}") + 1
    return lines[start : lines.index("```", start)]


def test_the_readme_pattern_runs_two_loops_in_their_worktrees(tmp_path: Path) -> None:
    """The manual's commands (docs/runner.md), run as written (``claude`` a stand-in that promises):
    two sessions complete, each in its worktree on its branch; the one merged is kept, the one dropped
    is gone."""
    from tests.journeys.test_readme import Demo, command, run_line

    demo = Demo(tmp_path / "demo")
    for line in fenced(readme_section(), "sh"):
        run_line(demo, tmp_path, command(line))
    rows = demo.cli("sql", "SELECT status, branch, worktree FROM sessions WHERE branch IS NOT NULL", "--json")
    tree = demo.home / "worktrees"
    assert sorted(json.loads(rows.stdout), key=lambda r: r["branch"]) == [
        {"status": "complete", "branch": "ralph/docs", "worktree": str(tree / "docs")},
        {"status": "complete", "branch": "ralph/health", "worktree": str(tree / "health")},
    ]
    assert (tree / "health").is_dir() and not (tree / "docs").exists()
    assert git(demo.dir, "branch", "--list", "--format=%(refname:short)", "ralph/*") == "ralph/health"


def test_the_readme_refusal_is_what_run_prints(project: Project, tmp_path: Path) -> None:
    (shown,) = fenced(readme_section(), "text")
    repo = Repo(project, tmp_path)
    git(repo.dir, "worktree", "add", "-q", "-b", "fix-login", str(repo.worktree("health")))
    proc = repo.run("--worktree", "health", "--", *repo.agent, "a")
    assert proc.returncode == 2
    assert proc.stderr.strip().replace(str(repo.dir), "/p") == shown


def test_run_from_a_subfolder_works_in_that_folder_of_the_worktree(project: Project, tmp_path: Path) -> None:
    """Started in a committed subfolder, the agent and the rules work in the same subfolder of the
    worktree; a subfolder the worktree does not have, or a folder where the worktree should be, is
    refused in one line."""
    repo = Repo(project, tmp_path)
    sub = project.write("pkg/shared.txt", "original\n").parent
    git(repo.dir, "add", "pkg")
    git(repo.dir, "commit", "-qm", "pkg")
    (sub / "PROMPT.md").write_text("Edit shared.txt.\n")
    (sub / "ralph.toml").write_text((repo.dir / "ralph.toml").read_text())
    proc = repo.run("--worktree", "a", "--session", "s1", "--", *repo.agent, "a", cwd=sub)
    assert proc.returncode == 0, proc.stderr
    assert Path(repo.ran("a-run1")["cwd"]) == repo.worktree("a") / "pkg"
    assert (repo.worktree("a") / "pkg" / "shared.txt").read_text() == "edit by a\n"
    assert (sub / "shared.txt").read_text() == "original\n"
    (turn,) = [e for e in project.journal("s1") if e["type"] == "agent_turn"]
    assert turn["files_modified"] == ["pkg/shared.txt"]

    new = project.write("new/PROMPT.md", "Edit shared.txt.\n").parent  # not committed
    proc = repo.run("--worktree", "b", "--session", "s2", "--", *repo.agent, "b", cwd=new)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"ralph-ledger run: --worktree: new is not in {repo.worktree('b')} (not committed): "
        "run from a folder HEAD has"
    ]
    assert not (project.home / "journals" / "s2.jsonl").exists() and not repo.worktree("b").exists()
    assert git(repo.dir, "branch", "--list", "ralph/b") == ""

    (repo.worktree("c") / "notes").mkdir(parents=True)
    proc = repo.run("--worktree", "c", "--", *repo.agent, "c")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"ralph-ledger run: --worktree: {repo.worktree('c')} exists and is not a worktree of {repo.dir}"
    ]
