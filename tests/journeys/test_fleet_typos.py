"""Journeys: the fleet commands' wrong arguments, as a user types them, each one line and its exit
code; and an export of a one-session home, as it reads."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.journeys.conftest import Project, clean_env, script

SAMPLES = Path(__file__).resolve().parents[2] / "sample_sessions"


@pytest.mark.parametrize(
    ("words", "code", "said"),
    [
        (
            ["export", "--parquet", "out", "--watch", "0"],
            2,
            "--watch: expected a number of seconds > 0, got '0'",
        ),
        (
            ["schema", "--dialect", "nope"],
            2,
            "invalid choice: 'nope' (choose from 'duckdb', 'spark', 'trino')",
        ),
        (["steer", "s1", ""], 2, "the guidance is empty"),
        (["unblock", "nope"], 1, "no session 'nope'"),
    ],
)
def test_a_wrong_fleet_or_steering_argument_is_one_line(
    project: Project, words: list[str], code: int, said: str
) -> None:
    proc = project.cli(*words)
    assert proc.returncode == code, proc
    assert said in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["--sequential"], "--sequential goes with --replay"),
        (["--dataset", "missing"], "missing: no such directory; expected a dataset"),
    ],
)
def test_a_wrong_ralph_tui_argument_is_one_line(project: Project, words: list[str], said: str) -> None:
    proc = subprocess.run(
        [script("ralph-tui"), *words],
        cwd=project.dir,
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert proc.returncode in (1, 2), proc
    assert said in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_exporting_one_session_says_one_session_and_a_second_export_writes_nothing(project: Project) -> None:
    journals = project.home / "journals"
    journals.mkdir(parents=True)
    shutil.copy(SAMPLES / "tdd-success.jsonl", journals)
    first = project.cli("export", "--parquet", "out", "--source", "m1")
    assert first.returncode == 0, first
    assert " of 1 session to " in first.stdout and "1 day partition written" in first.stdout
    again = project.cli("export", "--parquet", "out", "--source", "m1")
    assert again.returncode == 0, again
    assert "nothing changed since the last export" in again.stdout
