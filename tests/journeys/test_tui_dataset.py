"""Journey: two homes export into one Parquet dataset and the installed ``ralph-tui --dataset DIR``
shows both in a real terminal, each session with its source; a new export shows up live; a session
opens read-only; a folder that is no dataset is one line and exit 1."""

from __future__ import annotations

import subprocess

from tests.journeys.conftest import Project, Terminal, clean_env, script
from tests.journeys.test_tui import run_loop


def export(project: Project, dataset: str, source: str, *home: str) -> None:
    proc = project.cli(*home, "export", "--parquet", dataset, "--source", source)
    assert proc.returncode == 0, proc.stderr


def test_two_homes_in_one_dataset_live_and_read_only(project: Project, terminals: list[Terminal]) -> None:
    dataset = str(project.dir.parent / "fleet")
    other = ["--home", str(project.dir.parent / "build-box" / ".ralph")]
    run_loop(project, "on-laptop")
    run_loop(project, "on-ci", *other)
    export(project, dataset, "laptop")
    export(project, dataset, "ci-01", *other)
    term = Terminal([script("ralph-tui"), "--dataset", dataset], cwd=project.dir, size=(120, 30))
    terminals.append(term)
    screen = term.wait_for(lambda s: "on-laptop" in s and "on-ci" in s)
    rows = {line.split()[2]: line for line in screen.splitlines() if "on-laptop" in line or "on-ci" in line}
    assert "laptop" in rows["on-laptop"].split() and "ci-01" in rows["on-ci"].split()
    run_loop(project, "later-on-ci", *other)  # exported again: shows up without a restart
    export(project, dataset, "ci-01", *other)
    term.wait_for("later-on-ci", timeout=10)
    term.press("/")
    term.wait_for("Enter keeps it")
    term.press(*"laptop", "Enter")
    term.wait_for(lambda s: "filter “laptop”" in s and "on-laptop" in s and "on-ci" not in s)
    term.press("Enter")
    term.wait_for(lambda s: "Iteration 1" in s)
    term.press("P")  # pause: a dataset is read-only
    screen = term.wait_for("steering needs the session's own home")
    term.press("Escape")
    term.wait_for("⏎ Open")
    term.press("q")
    assert term.exit_code() == 0


def test_a_folder_that_is_not_a_dataset_is_one_line(project: Project) -> None:
    proc = subprocess.run(
        [script("ralph-tui"), "--dataset", str(project.dir)],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "not an exported dataset" in proc.stderr
