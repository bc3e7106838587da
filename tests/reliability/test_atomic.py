"""ledger.core.atomic: rewrites replace a file whole, and remove only the temp files of dead writers."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.core.atomic import atomic_write, sweep_temps, temp_name
from ledger.core.errors import one_line, operation, os_error


def dead_pid() -> int:
    """The pid of a process that has ended (and was reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", ""])
    proc.wait()
    return proc.pid


def test_a_rewrite_removes_the_temp_files_of_dead_writers_only(tmp_path: Path) -> None:
    target = tmp_path / "ralph-loop.local.md"
    target.write_text("old\n")
    gone = dead_pid()
    dead_new = tmp_path / temp_name(target.name, pid=gone)
    dead_old = tmp_path / f".{target.name}.{gone}.123456.tmp"  # as earlier versions named them
    live = tmp_path / temp_name(target.name, pid=os.getppid())
    mine = tmp_path / temp_name(target.name)
    other_file = tmp_path / temp_name("settings.json", pid=gone)  # another file's: its own rewrite
    not_ours = [tmp_path / f".{target.name}.bak", tmp_path / f".{target.name}.tmp", tmp_path / "x.tmp"]
    for p in [dead_new, dead_old, live, mine, other_file, *not_ours]:
        p.write_text("partial")
    atomic_write(target, b"new\n")
    assert target.read_text() == "new\n"
    assert not dead_new.exists() and not dead_old.exists()
    assert all(p.exists() for p in [live, mine, other_file, *not_ours])
    assert sweep_temps(tmp_path / "settings.json") == [other_file]


def test_a_rewrite_keeps_the_mode_or_sets_the_one_given(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_text("a")
    target.chmod(0o640)
    atomic_write(target, b"b")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    atomic_write(tmp_path / "g", b"c", mode=0o600)
    assert stat.S_IMODE((tmp_path / "g").stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f", "g"]


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (
            OSError(errno.ENOSPC, "No space left on device"),
            "writing the journal /p/s.jsonl: No space left on device",
        ),
        (
            FileNotFoundError(errno.ENOENT, "No such file or directory", "/p/x"),
            "/p/x: No such file or directory",
        ),
    ],
)
def test_an_os_error_names_its_file_or_the_operation(error: OSError, line: str) -> None:
    outer, inner = operation("ingesting into /p/ledger.duckdb"), operation("writing the journal /p/s.jsonl")
    with pytest.raises(OSError) as raised, outer, inner:  # the innermost operation is named
        raise error
    assert os_error(raised.value) == line
    assert one_line(raised.value) == line
    assert os_error(OSError(errno.ENOSPC, "No space left on device"), "running x") == (
        "running x: No space left on device"
    )
