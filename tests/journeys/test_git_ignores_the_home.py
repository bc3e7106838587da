"""A loop's home stays out of the user's commits: ``git add -A`` after a loop adds only the work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.journeys.conftest import GIT, Project


def untracked(project: Project) -> list[str]:
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=project.dir, capture_output=True,
        text=True, check=True,
    ).stdout  # fmt: skip
    return sorted(line[3:] for line in out.splitlines())


def test_a_loop_leaves_nothing_of_its_home_for_git_add(project: Project, tmp_path: Path) -> None:
    project.write("PROMPT.md", "Write app.py.\n")
    agent = tmp_path / "agent.py"
    agent.write_text("open('app.py', 'w').write('x = 1\\n'); print('<promise>COMPLETE</promise>')\n")
    proc = project.cli("run", "--prompt", "PROMPT.md", "--", sys.executable, str(agent))
    assert proc.returncode == 0, proc
    assert (project.home / "journals").is_dir()
    assert untracked(project) == ["PROMPT.md", "app.py"]
    subprocess.run([*GIT, "add", "-A"], cwd=project.dir, check=True)
    staged = subprocess.run(
        ["git", "diff", "--cached", "--name-only"],
        cwd=project.dir,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert staged == ["PROMPT.md", "app.py"]


def test_a_home_someone_made_keeps_its_own_files(project: Project, tmp_path: Path) -> None:
    """A home that exists already is the user's folder: nothing is written into it unasked."""
    project.home.mkdir()
    (project.home / "notes.txt").write_text("mine\n")
    project.write("PROMPT.md", "Do it.\n")
    promise = "print('<promise>COMPLETE</promise>')"
    proc = project.cli("run", "--prompt", "PROMPT.md", "--", sys.executable, "-c", promise)
    assert proc.returncode == 0, proc
    assert not (project.home / ".gitignore").exists()
