"""Ingest on a full disk, for real (a small tmpfs filled to its last byte): the failure is one line
that says where, the ledger file it leaves is valid (or there is none), the next command never takes
it for a damaged file (no ``ledger.duckdb.corrupt-*``, no "cannot be read" line), and once space is
back the ledger holds every event of the journals."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from ledger.core.home import Home
from ledger.storage.journal import Journal
from tests.crash_workers import session_events
from tests.journeys.conftest import Project, fill, release


def write_journals(home: Home, sessions: list[str], iterations: int) -> int:
    """Journals of ``sessions`` (``iterations`` loop iterations each) in ``home``; the events written."""
    written = 0
    for n, sid in enumerate(sessions):
        batch = list(session_events(sid, 1, iterations, n))
        Journal.for_session(home.journals, sid, fsync=False).append(*batch)
        written += len(batch)
    return written


def failed_for_space(proc: subprocess.CompletedProcess[str], home: Home) -> str:
    """The one line a command printed when the disk was full: exit 1, no traceback, no internal
    error, no move-aside, and it names a path in the home (or what it was doing there)."""
    assert proc.returncode == 1, proc
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith("ralph-ledger: ") and line.endswith("No space left on device"), line
    assert "Traceback" not in line and "internal error" not in line, line
    assert ": :" not in line and not line.startswith("ralph-ledger: No space"), line
    assert str(home.root) in line, line
    return line


def no_false_damage(home: Home) -> None:
    """Nothing was moved aside as corrupt, and no build of a new ledger file was left behind."""
    names = sorted(p.name for p in home.root.iterdir())
    assert [n for n in names if "corrupt" in n] == [], names
    assert set(names) <= {".gitignore", "journals", "tmp", "ledger.duckdb", "ledger.duckdb.wal"}, names
    assert list(home.tmp.iterdir()) == [], list(home.tmp.iterdir())


def valid_or_absent(home: Home) -> None:
    """The ledger file is absent, or a DuckDB database with an ``events`` table (read as is)."""
    if home.database.exists():
        con = duckdb.connect(str(home.database), read_only=True)
        try:
            con.execute("SELECT count(*) FROM events").fetchall()
        finally:
            con.close()


def events_in_ledger(project: Project, home: Home) -> int:
    """``SELECT count(*) FROM events`` through the CLI; it must print nothing on stderr."""
    proc = project.cli("--home", str(home.root), "sql", "SELECT count(*) AS n FROM events", "--csv")
    assert proc.returncode == 0 and proc.stderr == "", proc
    return int(proc.stdout.splitlines()[1])


def test_a_first_ingest_on_a_full_disk_leaves_no_ledger_and_the_next_commands_no_corrupt_file(
    project: Project, small_disk: Path
) -> None:
    home = Home(small_disk / "home")
    home.ensure()
    written = write_journals(home, ["s1", "s2", "s3"], 30)
    fill(small_disk)
    for command in (["ingest"], ["sessions"], ["ingest"], ["rebuild"]):
        line = failed_for_space(project.cli("--home", str(home.root), *command), home)
        assert "cannot be read" not in line, line
        assert not home.database.exists(), (command, line)  # no half-made file to mistake for damage
        no_false_damage(home)

    release(small_disk)
    proc = project.cli("--home", str(home.root), "sessions", "--csv")
    assert proc.returncode == 0 and proc.stderr == "", proc
    assert sorted(row.split(",")[0] for row in proc.stdout.splitlines()[1:]) == ["s1", "s2", "s3"]
    assert events_in_ledger(project, home) == written
    no_false_damage(home)


@pytest.mark.parametrize("ledger", ["none yet", "holding events"])
def test_ingest_failing_for_space_at_any_point_is_never_taken_for_damage(
    project: Project, small_disk: Path, ledger: str
) -> None:
    """Space comes back a little at a time: each ingest fails wherever it runs out (creating the
    ledger, its scratch file, the commit, the checkpoint) until one succeeds. Every failure is one
    line, leaves a valid ledger (or none) and no move-aside; the last ingest holds every event."""
    home = Home(small_disk / "home")
    home.ensure()
    written = 0
    if ledger == "holding events":
        written += write_journals(home, ["old-1", "old-2"], 20)
        assert project.cli("--home", str(home.root), "ingest").returncode == 0
    written += write_journals(home, ["new-1", "new-2", "new-3"], 40)
    fill(small_disk)
    failures: list[str] = []
    steps = [4096] * 4 + [64 * 1024] * 40
    for step in steps:
        proc = project.cli("--home", str(home.root), "ingest")
        if proc.returncode == 0:
            assert proc.stderr == "", proc.stderr
            break
        failures.append(failed_for_space(proc, home))
        valid_or_absent(home)
        no_false_damage(home)
        release(small_disk, step)
    else:
        pytest.fail(f"ingest still fails with all of the disk's space back: {failures[-1]}")
    assert len(failures) >= 3, failures  # it did fail, at several points
    assert events_in_ledger(project, home) == written
    release(small_disk)
    assert events_in_ledger(project, home) == written
    no_false_damage(home)


def test_new_ledger_files_that_killed_processes_were_building_are_removed(project: Project) -> None:
    """A ledger file is built under a temp name beside ``ledger.duckdb`` and renamed into place; a
    process killed meanwhile leaves it (and maybe its WAL). The next ingest removes those of
    processes that are gone, and keeps a live process's build and files not of that pattern."""
    home = Home(project.home)
    home.ensure()
    written = write_journals(home, ["s1"], 3)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        left = [
            f".ledger.duckdb.ralph-tmp.{dead.pid}.12345",
            f".ledger.duckdb.ralph-tmp.{dead.pid}.12345.wal",
        ]
        kept = [f".ledger.duckdb.ralph-tmp.{live.pid}.67890", ".ledger.duckdb.bak", "ledger.duckdb.tmp"]
        for name in left + kept:
            (home.root / name).write_bytes(b"")
        for recreated in ([], left[1:]):  # the first ingest creates the ledger, the second one finds it
            for name in recreated:  # a WAL whose build is gone is removed on its own too
                (home.root / name).write_bytes(b"")
            proc = project.cli("--home", str(home.root), "ingest")
            assert proc.returncode == 0 and proc.stderr == "", proc
            ours = [
                p
                for p in home.root.iterdir()
                if p.name.startswith((".", "ledger.duckdb.")) and p.name != ".gitignore"
            ]
            assert sorted(p.name for p in ours) == sorted(kept)
        assert events_in_ledger(project, home) == written
    finally:
        live.kill()
        live.wait()
