"""Journeys: reading a home with the installed ``ralph-ledger`` (sessions, show, stats, sql) as a user
does: every value type, Ctrl-C, a read-only home, a home that does not exist, a held ledger, an
output that cannot be written."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger import events as E
from ledger.storage.journal import Journal
from tests.journeys.conftest import Project, clean_env, script

SLOW_QUERY = "SELECT count(*) FROM range(100000000) a, range(1000000) b"
"""A query that runs for minutes unless it is interrupted."""


def strict_json(text: str) -> Any:
    """``text`` parsed as RFC 8259 JSON: a bare NaN or Infinity is an error."""

    def refuse(name: str) -> Any:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def add_sessions(project: Project) -> None:
    """Two loops of agent ``bot`` in the project's home: one completed in 2 iterations, one blocked."""
    journals = project.home / "journals"
    done = Journal.for_session(journals, "done-1", fsync=False)
    done.append(E.SessionStarted(session_id="done-1", task="make it green", agent="bot", max_iterations=5))
    for i in (1, 2):
        done.append(E.IterationStarted(session_id="done-1", iteration=i))
        done.append(E.ValidationRan(session_id="done-1", iteration=i, passed=i == 2, score=50.0 * i))
    done.append(E.SessionCompleted(session_id="done-1", iteration=2, total_iterations=2, score=100.0))
    stuck = Journal.for_session(journals, "stuck-1", fsync=False)
    stuck.append(E.SessionStarted(session_id="stuck-1", task="fix it", agent="bot", max_iterations=3))
    stuck.append(E.IterationStarted(session_id="stuck-1", iteration=1))
    stuck.append(E.SessionBlocked(session_id="stuck-1", iteration=1, reason="tests never pass"))


def wait_until_held(project: Project) -> subprocess.CompletedProcess[str]:
    """Wait (30 s at most) until another process holds the project's ledger; the refused ``ingest``."""
    deadline = time.monotonic() + 30
    while True:
        busy = project.cli("--wait", "0", "ingest")
        if busy.returncode != 0 or time.monotonic() > deadline:
            return busy
        time.sleep(0.2)


def one_line_err(proc: subprocess.CompletedProcess[str]) -> str:
    """The one line the command printed on stderr (and no traceback)."""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_every_kind_of_value_in_every_format(project: Project) -> None:
    """TIMESTAMPTZ (pytz is not needed), INTERVAL, NaN, infinities, HUGEINT, BLOB and nested values
    print in the table, as CSV and as strict JSON, timestamps with their zone."""
    query = (
        "SELECT TIMESTAMPTZ '2024-05-01 12:00:00+02' AS tz, INTERVAL 1 MONTH AS gap, 'nan'::DOUBLE AS nan, "
        "'-inf'::DOUBLE AS low, 170141183460469231731687303715884105727::HUGEINT AS huge, "
        "'\\x00ab'::BLOB AS raw, {'at': [TIMESTAMP '2024-05-01 10:00:00'], 'n': NULL} AS nest, "
        "MAP {1: 'one'} AS m, [1, 2]::INTEGER[2] AS arr, 12.50::DECIMAL(6,2) AS price"
    )
    table = project.cli("sql", query)
    assert table.returncode == 0, table.stderr
    assert "(1 row)" in table.stdout and "2024-05-01T10:00:00+00:00" in table.stdout
    assert "1 month" in table.stdout and "NaN" in table.stdout and "-Infinity" in table.stdout

    out = project.cli("sql", query, "--json")
    assert out.returncode == 0, out.stderr
    [row] = strict_json(out.stdout)
    assert row == {
        "tz": "2024-05-01T10:00:00+00:00",
        "gap": "1 month",
        "nan": "NaN",
        "low": "-Infinity",
        "huge": 170141183460469231731687303715884105727,
        "raw": "\\x00ab",
        "nest": {"at": ["2024-05-01T10:00:00+00:00"], "n": None},
        "m": {"1": "one"},
        "arr": [1, 2],
        "price": 12.5,
    }
    assert '"price": 12.50' in out.stdout  # DECIMAL digit for digit

    rows = list(csv.reader(io.StringIO(project.cli("sql", query, "--csv").stdout)))
    assert rows[0] == list(row) and len(rows) == 2
    fields = dict(zip(rows[0], rows[1], strict=True))
    assert fields["tz"] == "2024-05-01T10:00:00+00:00" and fields["nan"] == "NaN"
    assert json.loads(fields["nest"]) == row["nest"]


def test_the_table_and_csv_print_the_same_text(project: Project) -> None:
    """A timestamp with a fraction and doubles print the same text in the table as in CSV (and as in
    JSON): the fraction kept, ``100.0`` not ``100``, every digit of a double."""
    query = (
        "SELECT TIMESTAMPTZ '2024-05-01 10:00:00.5+00' AS half, TIMESTAMP '2024-05-01 10:00:00' AS whole, "
        "100::DOUBLE AS score, 0.1::DOUBLE AS tenth, 1234567.891::DOUBLE AS big, 3 AS n"
    )
    table = project.cli("sql", query)
    assert table.returncode == 0, table.stderr
    header, rule, row, count = table.stdout.splitlines()
    assert count == "(1 row)" and set(rule) == {"-", " "}
    rows = list(csv.reader(io.StringIO(project.cli("sql", query, "--csv").stdout)))
    assert rows[1] == [
        "2024-05-01T10:00:00.500000+00:00",
        "2024-05-01T10:00:00+00:00",
        "100.0",
        "0.1",
        "1234567.891",
        "3",
    ]
    assert header.split() == rows[0] and row.split() == rows[1]
    [as_json] = strict_json(project.cli("sql", query, "--json").stdout)
    assert [str(v) for v in as_json.values()] == rows[1]


def test_ctrl_c_interrupts_a_running_query_and_releases_the_ledger(project: Project) -> None:
    """SIGINT during a minutes-long query: the command ends within a second with one line and exit
    130, and the ledger is free for the next command."""
    project.home.mkdir()
    proc = subprocess.Popen(
        [script("ralph-ledger"), "sql", SLOW_QUERY],
        cwd=project.dir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    try:
        wait_until_held(project)
        time.sleep(0.5)  # past opening the ledger: inside the query
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert took < 1.0, f"took {took:.2f} s to stop"  # "within a second"
    assert err.strip().splitlines() == ["ralph-ledger: interrupted"] and out == ""
    after = project.cli("--wait", "0", "ingest")
    assert after.returncode == 0, after.stderr


def _readonly_runner(home: Path) -> list[str] | None:
    """A command prefix that runs a command with ``home`` read-only, or None when none works here.

    Not root: the home is made read-only with permissions (see ``_chmod_tree``). Root writes
    through permissions, so the home is mounted read-only over itself in a private mount namespace.
    """
    if os.geteuid() != 0:
        return []
    if shutil.which("unshare") is None:
        return None
    wrap = [
        "unshare",
        "-m",
        "sh",
        "-c",
        'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"',
        str(home),
    ]
    probe = subprocess.run([*wrap, "sh", "-c", f"! touch {home}/probe 2>/dev/null"], capture_output=True)
    return wrap if probe.returncode == 0 else None


def _chmod_tree(root: Path, readonly: bool) -> None:
    for path in [root, *root.rglob("*")]:
        if path.is_dir():
            path.chmod(0o500 if readonly else 0o700)
        else:
            path.chmod(0o400 if readonly else 0o600)


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def test_a_read_only_home_is_read_from_its_journals(project: Project) -> None:
    """sessions, show, stats and sql answer from the journals of a home nothing may write to, say
    why in one line, and write nothing there."""
    add_sessions(project)
    assert project.cli("ingest").returncode == 0  # the ledger file exists, and is older than a journal
    journal = project.home / "journals" / "stuck-1.jsonl"
    Journal.for_session(journal.parent, "stuck-1", fsync=False).append(
        E.Override(session_id="stuck-1", iteration=1, kind="note", reason="seen")
    )
    with _home_read_only(project) as ralph:
        for args in (
            ["sessions", "--json"],
            ["show", "done-1"],
            ["stats"],
            ["sql", "SELECT count(*) AS n FROM events WHERE session_id = 'stuck-1'", "--csv"],
        ):
            proc = ralph(*args)
            why = one_line_err(proc)
            assert why.startswith(f"ralph-ledger: cannot write in {project.home} (")
            assert why.endswith("; reading the journals instead")
            if args[0] == "sessions":
                assert {r["session_id"] for r in strict_json(proc.stdout)} == {"done-1", "stuck-1"}
            elif args[0] == "show":
                assert proc.stdout.startswith("session done-1: complete, iteration 2/5")
            elif args[0] == "stats":
                assert "loops per agent" in proc.stdout and "bot" in proc.stdout
            else:
                assert proc.stdout.splitlines() == ["n", "4"]  # the event appended after the ingest too


@contextlib.contextmanager
def _home_read_only(project: Project) -> Iterator[Callable[..., subprocess.CompletedProcess[str]]]:
    """The project's home read-only for the block (a read-only bind mount, or its modes for a user
    other than root; skipped when neither can be had): yields a runner of ``ralph-ledger ARGS``
    there (``env``: more variables) that asserts exit 0; the home is unchanged afterwards."""
    prefix = _readonly_runner(project.home)
    if prefix is None:
        pytest.skip("running as root, and no read-only bind mount can be made here (unshare -m)")

    def ralph(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [*prefix, script("ralph-ledger"), *args],
            cwd=project.dir,
            capture_output=True,
            text=True,
            timeout=120,
            env=clean_env(**env),
        )
        assert proc.returncode == 0, (args, proc.stderr)
        return proc

    before = _tree(project.home)
    if not prefix:
        _chmod_tree(project.home, readonly=True)
    try:
        yield ralph
    finally:
        if not prefix:
            _chmod_tree(project.home, readonly=False)
    assert _tree(project.home) == before


def _other_file_system(path: Path, tmp_path: Path) -> Path | None:
    """A fresh folder on another file system than ``path`` (a tmpfs: ``/dev/shm``), or None."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK) or shm.stat().st_dev == path.stat().st_dev:
        return None
    folder = shm / f"ralph-scratch-{tmp_path.name}-{os.getpid()}"
    folder.mkdir()
    return folder


def test_a_read_only_home_on_its_own_file_system_is_read(project: Project, tmp_path: Path) -> None:
    """A read-only home whose journals are on another file system than the temporary folder (where
    the scratch files of an in-memory ledger go): sessions, show, stats, sql, export and checkpoint
    list|show|resume all answer from the journals (the kernel cannot copy across file systems: the
    copy is read and written instead)."""
    add_sessions(project)
    Journal.for_session(project.home / "journals", "done-1", fsync=False).append(
        E.CheckpointCreated(session_id="done-1", iteration=2, checkpoint_id="done-1-cp2", trigger="hook")
    )
    scratch = _other_file_system(project.home, tmp_path)
    if scratch is None:
        pytest.skip("no writable /dev/shm on another file system than the home")
    dest = tmp_path / "fleet"
    try:
        with _home_read_only(project) as ralph:
            for args in (
                ["sessions", "--json"],
                ["show", "done-1"],
                ["stats"],
                ["sql", "SELECT count(*) AS n FROM events", "--csv"],
                ["export", "--parquet", str(dest), "--source", "w"],
                ["checkpoint", "list", "done-1", "--csv"],
                ["checkpoint", "show", "done-1", "done-1-cp2", "--json"],
                ["checkpoint", "resume", "done-1"],
            ):
                proc = ralph(*args, TMPDIR=str(scratch))
                assert "Traceback" not in proc.stderr and "cross-device" not in proc.stderr, proc.stderr
                if args[0] == "sessions":
                    assert {r["session_id"] for r in strict_json(proc.stdout)} == {"done-1", "stuck-1"}
                elif args[0] == "show":
                    assert proc.stdout.startswith("session done-1: complete, iteration 2/5")
                elif args[0] == "sql":
                    assert proc.stdout.splitlines() == ["n", "10"]
                elif args[0] == "export":
                    assert "10 events of 2 sessions" in proc.stdout, proc.stdout
                elif args[0] == "stats":
                    assert "loops per agent" in proc.stdout and "bot" in proc.stdout
                elif args[1] == "list":
                    listed = csv.DictReader(io.StringIO(proc.stdout))
                    assert [r["checkpoint_id"] for r in listed] == ["done-1-cp2"]
                elif args[1] == "show":
                    assert strict_json(proc.stdout)[0]["trigger"] == "hook"
                elif args[1] == "resume":
                    resumed = "done-1-cp2 (iteration 2): Resume iteration 2 of 5 of make it green"
                    assert proc.stdout.startswith(resumed)
            assert list(scratch.iterdir()) == []  # the scratch files are gone
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def test_stop_and_set_on_a_read_only_home_say_why(project: Project) -> None:
    """``stop``, ``set`` and ``checkpoint prune`` of a running loop in a home nothing may write to: one
    line naming the session and the home (not an internal scratch file), exit 1, nothing written."""
    live = Journal.for_session(project.home / "journals", "live-1", fsync=False)
    live.append(E.SessionStarted(session_id="live-1", task="t", agent="bot", max_iterations=5))
    live.append(E.IterationStarted(session_id="live-1", iteration=1))
    assert project.cli("ingest").returncode == 0
    prefix = _readonly_runner(project.home)
    if prefix is None:
        pytest.skip("running as root, and no read-only bind mount can be made here (unshare -m)")
    before = _tree(project.home)
    if not prefix:
        _chmod_tree(project.home, readonly=True)
    try:
        for args, verb in (
            (["stop", "live-1"], "stop"),
            (["set", "live-1", "--max-iterations", "9"], "change"),
            (["checkpoint", "prune", "live-1"], "prune"),
        ):
            proc = subprocess.run(
                [*prefix, script("ralph-ledger"), *args],
                cwd=project.dir,
                capture_output=True,
                text=True,
                timeout=120,
                env=clean_env(),
            )
            assert proc.returncode == 1, (args, proc.stderr)
            line = one_line_err(proc)
            assert line.startswith(
                f"ralph-ledger: cannot {verb} session 'live-1': cannot write in {project.home} ("
            )
    finally:
        if not prefix:
            _chmod_tree(project.home, readonly=False)
    assert _tree(project.home) == before


def test_a_home_that_does_not_exist_is_an_error_not_a_new_home(project: Project) -> None:
    """``--home`` or ``RALPH_HOME`` naming no directory: one line, exit 2, nothing created. The default
    ``./.ralph`` of a project where nothing ran yet lists no sessions, and is not created either."""
    missing = project.dir / "typo"
    for args in (["sessions"], ["show", "x"], ["stats", "--json"], ["sql", "SELECT 1"], ["ingest"]):
        proc = project.cli("--home", str(missing), *args)
        assert proc.returncode == 2, proc.stderr
        expected = f"ralph-ledger: --home {missing}: the ledger home {missing} does not exist"
        assert one_line_err(proc) == expected
    proc = project.cli("sessions", env=clean_env(RALPH_HOME=str(missing)))
    assert proc.returncode == 2 and f"RALPH_HOME={missing}" in one_line_err(proc)
    assert not missing.exists()
    for args in (["sessions"], ["sql", "SELECT 1", "--home", ""], ["run", "--", "true"]):
        proc = project.cli("--home", "", *args)  # an unset variable: not the project folder as a home
        assert proc.returncode == 2, proc.stderr
        assert one_line_err(proc) == "ralph-ledger: --home: an empty path; give the ledger home's directory"
    assert sorted(p.name for p in project.dir.iterdir()) == [".git", "README.md"]
    assert project.sessions() == []
    assert not project.home.exists()


def test_stats_csv_and_json_carry_both_tables(project: Project) -> None:
    """``stats --json`` is one object with both views; ``--csv`` both tables, one after the other."""
    add_sessions(project)
    proc = project.cli("stats", "--json")
    assert proc.returncode == 0, proc.stderr
    data = strict_json(proc.stdout)
    assert list(data) == ["loop_metrics", "success_by_iterations"]
    [metrics] = data["loop_metrics"]
    assert (metrics["agent"], metrics["sessions"], metrics["ended"], metrics["completed"]) == ("bot", 2, 2, 1)
    assert {(r["iterations"], r["completed"]) for r in data["success_by_iterations"]} == {(1, 0), (2, 1)}
    parts = project.cli("stats", "--csv").stdout.split("\n\n")
    assert len(parts) == 2
    first, second = (list(csv.reader(io.StringIO(p))) for p in parts)
    assert first[0][:2] == ["agent", "sessions"] and len(first) == 2
    assert second[0] == ["agent", "iterations", "ended", "completed", "success_rate"] and len(second) == 3


def test_the_lock_message_names_the_program_holding_the_ledger(project: Project) -> None:
    """While ``ralph-ledger sql`` holds the ledger, ``ingest`` says which program holds it."""
    add_sessions(project)
    holder = subprocess.Popen(
        [script("ralph-ledger"), "--home", str(project.home), "sql", SLOW_QUERY],
        cwd=project.dir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=clean_env(),
    )
    try:
        busy = wait_until_held(project)
        line = one_line_err(busy)
        assert busy.returncode == 1
        assert f"is in use by PID {holder.pid} (ralph-ledger sql); try again" in line, line
    finally:
        holder.kill()
        holder.wait()


def test_errors_speak_the_users_words(project: Project) -> None:
    """An unknown session names the home and the command that lists sessions; stop and set too."""
    add_sessions(project)
    hint = f"no session 'nope' in {project.home}; `ralph-ledger sessions` lists them"
    for args in (["show", "nope"], ["stop", "nope"], ["set", "nope", "--max-iterations", "3"]):
        proc = project.cli(*args)
        assert proc.returncode == 1
        assert one_line_err(proc) == f"ralph-ledger: {hint}"
    hollow = project.home / "journals" / "hollow.jsonl"
    hollow.write_text("")  # a journal that records no start: not the API's 'no session_started event'
    for args in (
        ["stop", "hollow"],
        ["set", "hollow", "--max-iterations", "3"],
        ["run", "--resume", "hollow"],
    ):
        proc = project.cli(*args)
        assert proc.returncode == 1
        assert one_line_err(proc).endswith(
            f": no session 'hollow' in {project.home}: its journal {hollow} records no start; "
            "`ralph-ledger sessions` lists them"
        )


def test_an_output_that_cannot_be_written_is_named(project: Project) -> None:
    """A full disk and a closed stdout are one line naming stdout, also for an output longer than
    one buffer (``schema``); a reader that stops early (``| head``) is no error at all."""
    add_sessions(project)
    for args in (["sessions"], ["schema"], ["schema", "--portable"]):
        with open("/dev/full", "w") as full:
            proc = subprocess.run(
                [script("ralph-ledger"), *args],
                cwd=project.dir,
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
            )
        assert proc.returncode == 1, args
        assert one_line_err(proc) == (
            "ralph-ledger: cannot write the output to stdout (/dev/full): No space left on device"
        ), args
    closed = subprocess.run(
        f"exec {script('ralph-ledger')} sessions >&-",
        shell=True,
        cwd=project.dir,
        capture_output=True,
        text=True,
    )
    assert closed.returncode == 1
    assert one_line_err(closed) == "ralph-ledger: cannot write the output: stdout is closed"
    head = subprocess.run(
        f"{script('ralph-ledger')} sql 'SELECT range FROM range(200000)' | head -1; exit ${{PIPESTATUS[0]}}",
        shell=True,
        executable="/bin/bash",
        cwd=project.dir,
        capture_output=True,
        text=True,
    )
    assert head.stdout == "range\n" and head.stderr == "" and head.returncode == 0


def test_home_and_wait_after_the_command(project: Project, tmp_path: Path) -> None:
    """``ralph-ledger sessions --home DIR`` as well as ``ralph-ledger --home DIR sessions``."""
    elsewhere = Project(tmp_path / "elsewhere")
    elsewhere.write("agent.py", "import sys\nsys.stdin.read()\nprint('<promise>COMPLETE</promise>')\n")
    proc = elsewhere.cli("run", "--session", "far", "--", sys.executable, "agent.py", input="go")
    assert proc.returncode == 0, proc.stderr
    home = str(elsewhere.home)
    for args in (
        ["--home", home, "sessions", "--json"],
        ["sessions", "--json", "--home", home, "--wait", "0"],
    ):
        proc = project.cli(*args)
        assert proc.returncode == 0, proc.stderr
        assert [row["session_id"] for row in json.loads(proc.stdout)] == ["far"]
    assert project.cli("sessions", "--wait", "-1").returncode == 2


def test_from_a_subdirectory_the_commands_find_the_projects_home(project: Project) -> None:
    """As git finds ``.git``: a loop run from a subdirectory of a project with no home yet records in
    the project root's ``.ralph`` (where the Stop hook keeps it), and every command run from any
    subdirectory reads that home, not a ``./.ralph`` of its own."""
    deep = project.dir / "src" / "pkg"
    deep.mkdir(parents=True)
    project.write("src/agent.py", "import sys\nsys.stdin.read()\nprint('<promise>COMPLETE</promise>')\n")
    run = project.cli(
        "run", "--session", "from-src", "--", "python3", "agent.py", input="go", cwd=deep.parent
    )
    assert run.returncode == 0, run.stderr
    assert (project.home / "journals" / "from-src.jsonl").is_file()
    assert not (deep.parent / ".ralph").exists() and not (deep / ".ralph").exists()
    listed = project.cli("sessions", "--json", cwd=deep)
    assert listed.returncode == 0, listed.stderr
    assert [s["session_id"] for s in json.loads(listed.stdout)] == ["from-src"]
    shown = project.cli("show", "from-src", cwd=deep)
    assert shown.returncode == 0 and "complete" in shown.stdout, shown
