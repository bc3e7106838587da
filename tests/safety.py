"""Checks shared by the hostile-input and security suites: a deadline for hangs, one-line errors,
snapshots of a directory tree (no file written outside the ledger home), the Stop hook run as a
process, and a tally of what was tried."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import duckdb
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
STATE_TEXT = (
    "---\nactive: true\niteration: 1\nsession_id: \nmax_iterations: 0\n"
    'completion_promise: "DONE"\nstarted_at: "2026-11-22T00:00:00Z"\n---\n\nFix the tests\n'
)
"""A ``ralph-loop`` plugin state file: unclaimed, unlimited, promise ``DONE``."""
PLUGIN_MESSAGE = "⚠️  Ralph loop: "
"""How the plugin's own (multi-line) messages start; the drop-in prints them verbatim."""


class Hang(Exception):
    """A call ran past its deadline."""


@dataclass
class Tally:
    """What a suite tried and what went wrong, printed as one line at the end (visible with -s)."""

    name: str
    inputs: int = 0
    tracebacks: int = 0
    hangs: int = 0
    outside: int = 0
    started: float = field(default_factory=time.perf_counter)

    def line(self) -> str:
        """``hostile suite: 4,210 inputs tried, 0 tracebacks, 0 hangs, 0 files outside the home``."""
        return (
            f"{self.name}: {self.inputs:,} inputs tried, {self.tracebacks} tracebacks, {self.hangs} hangs, "
            f"{self.outside} files outside the home ({time.perf_counter() - self.started:.1f} s)"
        )

    @contextmanager
    def timed(self, seconds: float) -> Iterator[None]:
        """Count one input and run the block under ``deadline(seconds)``, counting a hang."""
        self.inputs += 1
        try:
            with deadline(seconds):
                yield
        except Hang:
            self.hangs += 1
            raise

    def no_traceback(self, text: str) -> None:
        """Count and fail on a Python traceback in ``text``."""
        if "Traceback" in text:
            self.tracebacks += 1
            raise AssertionError(f"traceback in output: {text[:2000]}")

    def no_new_files(self, before: set[str], after: set[str], allowed: Iterable[str] = ()) -> None:
        """Count and fail on paths in ``after`` that were not in ``before`` (nor ``allowed``)."""
        new = after - before - set(allowed)
        if new:
            self.outside += len(new)
            raise AssertionError(f"files written outside the home: {sorted(new)[:10]}")


def hypothesis_settings(long_form: bool, quick: int, factor: int = 20) -> settings:
    """``quick`` examples, or ``quick * factor`` with ``--long``; no deadline, no example database."""
    return settings(
        max_examples=quick * factor if long_form else quick,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise ``Hang`` in the main thread if the block is still running after ``seconds``."""

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        raise Hang(f"still running after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def interrupting(con: duckdb.DuckDBPyConnection, seconds: float) -> Iterator[None]:
    """Interrupt ``con``'s running query after ``seconds`` (a signal cannot stop DuckDB's C code)."""
    timer = threading.Timer(seconds, con.interrupt)
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def tree(root: Path, *, skip: Iterable[Path] = ()) -> set[str]:
    """Every file, directory and link under ``root``, relative to it, except under ``skip``."""
    skipped = {os.path.abspath(p) for p in skip}
    out: set[str] = set()
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if os.path.abspath(os.path.join(here, d)) not in skipped]
        for name in [*dirs, *files]:
            out.add(os.path.relpath(os.path.join(here, name), root))
    return out


def one_line(text: str) -> bool:
    """Whether ``text`` is exactly one non-blank line (a trailing newline allowed), with no traceback."""
    lines = text.splitlines()
    return len(lines) == 1 and bool(lines[0].strip()) and "Traceback" not in text


def hook_process(
    stdin: bytes, *, cwd: Path, home: Path, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``ralph-ledger hook claude-code`` as Claude Code does: a process, the event on stdin."""
    proc = subprocess.run(
        [sys.executable, "-m", "ledger.cli", "hook", "claude-code"],
        input=stdin,
        capture_output=True,
        timeout=timeout,
        env={**os.environ, "RALPH_HOME": str(home)},
        cwd=cwd,
        check=False,
    )
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    )


def cli_process(*args: str, cwd: Path, home: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``ralph-ledger --home HOME ARGS...`` as a process."""
    proc = subprocess.run(
        [sys.executable, "-m", "ledger.cli", "--home", str(home), *args],
        capture_output=True,
        timeout=timeout,
        cwd=cwd,
        check=False,
    )
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    )


def snapshot_journals(journals: Path) -> dict[Path, bytes]:
    """The bytes of every journal in ``journals``."""
    return {p: p.read_bytes() for p in sorted(journals.glob("*.jsonl"))} if journals.is_dir() else {}


def assert_append_only(before: dict[Path, bytes]) -> None:
    """Every journal still starts with what it held before: nothing recorded was lost."""
    for path, data in before.items():
        now = path.read_bytes() if path.exists() else b""
        assert now.startswith(data), f"{path.name} lost recorded bytes"


def fingerprint(con: duckdb.DuckDBPyConnection) -> tuple[Any, ...]:
    """What a read-only query must never change: the events, the ledger's tables and views, its
    metadata, and whether file access is on."""
    return (
        con.execute("SELECT count(*), coalesce(sum(hash(session_id, seq)), 0) FROM events").fetchall(),
        con.execute(
            "SELECT database_name, schema_name, table_name FROM duckdb_tables() WHERE NOT temporary "
            "UNION ALL SELECT database_name, schema_name, view_name FROM duckdb_views() "
            "WHERE NOT internal AND NOT temporary ORDER BY ALL"
        ).fetchall(),
        con.execute("SELECT * FROM ledger_meta ORDER BY ALL").fetchall(),
        con.execute("SELECT database_name FROM duckdb_databases() ORDER BY ALL").fetchall(),
        con.execute("SELECT current_setting('enable_external_access')").fetchall(),
    )


def odd_paths(root: Path) -> dict[str, str]:
    """Paths (made under ``root``) that are not a readable regular file, each in its own way: what a
    hook may be handed as a transcript path or a working directory."""
    (root / "adir").mkdir()
    os.mkfifo(root / "fifo")
    (root / "loop1").symlink_to(root / "loop2")
    (root / "loop2").symlink_to(root / "loop1")
    (root / "to-fifo").symlink_to(root / "fifo")
    return {
        "directory": str(root / "adir"),
        "fifo": str(root / "fifo"),
        "symlink to a fifo": str(root / "to-fifo"),
        "/dev/zero": "/dev/zero",
        "symlink loop": str(root / "loop1"),
        "nonexistent": str(root / "missing.jsonl"),
        "relative": "relative/t.jsonl",
        "home-relative": "~/no/such/transcript.jsonl",
        "nul byte": str(root) + "/a\x00b",
        "too long": "/" + "x" * 5000,
    }
