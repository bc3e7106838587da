"""What ralph-ledger trusts on disk, tried for real: a home made by another local user (uid 65534, a
forked child that drops root), journals that are symbolic links (read and appended to), a journal line
over 16 MiB, and a home on a read-only file system (a tmpfs remounted read-only). The rules:
docs/design/homes.md."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ledger import events as E
from ledger.core.trust import UnsafeHome
from ledger.monitor import Monitor, resolve_home
from ledger.storage.journal import MAX_LINE, Journal
from tests.safety import STATE_TEXT, cli_process, one_line, tree
from tests.second_user import NOBODY, become_nobody

SECRET = "SECRET-LINE"


def as_nobody(work: Callable[[], None]) -> None:
    """Run ``work`` in a forked child that is uid and gid 65534 with umask 0; fail if it fails."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        code = 1
        try:
            become_nobody()
            os.umask(0)
            work()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the second user's work failed"


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder every user may create in (sticky, like /tmp), outside the test's private tmp_path (which
    the second user cannot reach); short enough for an AF_UNIX path."""
    if os.geteuid() != 0:
        pytest.skip("acting as a second local user (uid 65534) needs root")
    base = Path(tempfile.mkdtemp(prefix="ralph-trust-", dir="/tmp"))
    base.chmod(0o1777)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def session_lines(sid: str) -> bytes:
    """A small finished loop's journal (with a checkpoint), as bytes."""
    with tempfile.TemporaryDirectory() as scratch:
        journal = Journal.for_session(Path(scratch), sid, fsync=False)
        journal.append(
            E.SessionStarted(session_id=sid, task="make it green", agent="bot", max_iterations=5),
            E.IterationStarted(session_id=sid, iteration=1),
            E.AgentTurn(session_id=sid, iteration=1, output_excerpt="done"),
            E.CheckpointCreated(session_id=sid, iteration=1, checkpoint_id=f"{sid}-cp1", trigger="hook"),
            E.SessionCompleted(session_id=sid, iteration=1, total_iterations=1, score=100.0),
        )
        return journal.path.read_bytes()


def others_home(shared: Path, mode: int, *, name: str = "home") -> Path:
    """A home the second user makes in ``shared`` with ``mode`` (its journals/ and journal too), holding
    the loop ``s1``."""
    home = shared / name
    data = session_lines("s1")
    file_mode = 0o666 if mode & 0o002 else 0o644

    def make() -> None:
        os.mkdir(home, mode)
        os.mkdir(home / "journals", mode)
        fd = os.open(home / "journals" / "s1.jsonl", os.O_WRONLY | os.O_CREAT | os.O_EXCL, file_mode)
        os.write(fd, data)
        os.close(fd)

    as_nobody(make)
    assert home.stat().st_uid == NOBODY
    return home


def refusal(proc: subprocess.CompletedProcess[str], home: Path) -> str:
    """The one line a command refusing ``home`` printed (exit 1)."""
    assert proc.returncode == 1, (proc.args, proc.stdout, proc.stderr)
    assert one_line(proc.stderr), proc.stderr
    assert str(home) in proc.stderr and "not a safe ledger home" in proc.stderr, proc.stderr
    return proc.stderr.strip()


# --- a home another user could write in (issue 25, item 13) ---------------------------------------------


def test_another_users_open_home_is_refused_by_every_entry_point(shared: Path, tmp_path: Path) -> None:
    """A 0777 folder made by uid 65534, given as the home: every command (reading ones too), the MCP
    server, ralph-tui and the monitor refuse it in one line naming it, its owner and mode, and what is
    expected; nothing is written in it."""
    home = others_home(shared, 0o777)
    before = {p: os.lstat(home / p).st_mtime_ns for p in tree(home)}
    for args in (
        ["sessions"],
        ["show", "s1"],
        ["sql", "SELECT count(*) FROM events"],
        ["stats"],
        ["checkpoint", "list", "s1"],
        ["export", "--parquet", str(tmp_path / "out"), "--source", "w"],
        ["ingest"],
        ["pause", "s1"],
        ["stop", "s1"],
        ["mcp"],
    ):
        line = refusal(cli_process(*args, cwd=tmp_path, home=home), home)
        assert "owned by nobody (uid 65534) with mode 0777, writable by its group and others" in line, line
        assert "expected" in line
    env_home = subprocess.run(
        [sys.executable, "-m", "ledger.cli", "sessions"],
        cwd=tmp_path,
        env={**os.environ, "RALPH_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    refusal(env_home, home)
    tui = subprocess.run(
        [sys.executable, "-m", "tui.main", "--home", str(home)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    refusal(tui, home)
    with pytest.raises(UnsafeHome, match="not a safe ledger home"):
        resolve_home(home)
    with pytest.raises(UnsafeHome, match="not a safe ledger home"):
        Monitor(homes=[home])
    with pytest.raises(UnsafeHome):  # an append finds it too, whatever entry point it came through
        Journal.for_session(home / "journals", "s2", fsync=False).append(E.AgentTurn(session_id="s2"))
    assert {p: os.lstat(home / p).st_mtime_ns for p in tree(home)} == before


def test_the_hook_hands_nothing_to_a_listener_in_another_users_home(shared: Path, tmp_path: Path) -> None:
    """The second user listens on ``stop-worker.sock`` in the 0777 home the owner's hook is pointed at:
    the hook never connects (its environment, API keys included, would go there), allows the stop
    with one line and writes nothing in that home."""
    home = others_home(shared, 0o777)
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "ralph-loop.local.md").write_text(STATE_TEXT)
    ready, told = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child: the second user's listener)
        code = 1
        try:
            os.close(ready)
            become_nobody()
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind(str(home / "stop-worker.sock"))
            server.listen(4)
            os.write(told, b"L")
            server.settimeout(60)
            conn, _ = server.accept()
            conn.settimeout(5)
            got = conn.recv(1 << 20)
            os.write(told, b"C" + str(len(got)).encode())
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(told)
    try:
        assert os.read(ready, 1) == b"L"
        before = tree(home)
        stop = json.dumps(
            {"session_id": "s1", "transcript_path": str(tmp_path / "t.jsonl"), "cwd": str(project)}
        )
        proc = subprocess.run(
            [sys.executable, "-m", "ledger.cli", "hook", "claude-code"],
            input=stop,
            cwd=project,
            env={**os.environ, "RALPH_HOME": str(home), "RALPH_WARM": "1", "API_KEY": "sk-do-not-leak"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        connected = select.select([ready], [], [], 1.0)[0]
        said = os.read(ready, 64) if connected else b""
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(ready)
    assert said == b"", f"the hook talked to the other user's listener: {said!r}"
    assert proc.returncode == 0 and proc.stdout == "", (proc.stdout, proc.stderr)
    assert one_line(proc.stderr) and "not a safe ledger home" in proc.stderr, proc.stderr
    assert proc.stderr.startswith("ralph-ledger hook: ") and proc.stderr.rstrip().endswith(
        "allowing the stop"
    )
    assert tree(home) == before  # no journal, lock or socket of the owner's in it


def test_another_users_private_home_is_only_read_from_its_journals(shared: Path, tmp_path: Path) -> None:
    """A home uid 65534 keeps to itself (0755: no one else can write in it) may be read: the reading
    commands answer from its journals in memory, never opening (or creating) its ledger file; every
    command that writes refuses it."""
    home = others_home(shared, 0o755)
    before = tree(home)
    sessions = cli_process("sessions", "--json", cwd=tmp_path, home=home)
    assert sessions.returncode == 0, sessions.stderr
    assert [r["session_id"] for r in json.loads(sessions.stdout)] == ["s1"]
    assert one_line(sessions.stderr), sessions.stderr
    assert f"cannot write in {home} (owned by nobody (uid 65534), not by you)" in sessions.stderr
    assert sessions.stderr.rstrip().endswith("reading the journals instead")
    for args in (["sql", "SELECT count(*) AS n FROM events", "--csv"], ["checkpoint", "list", "s1", "--csv"]):
        proc = cli_process(*args, cwd=tmp_path, home=home)
        assert proc.returncode == 0, proc.stderr
        assert "n\n5" in proc.stdout or "s1-cp1" in proc.stdout, proc.stdout
    for args in (["ingest"], ["pause", "s1"], ["steer", "s1", "go on"], ["run", "--resume", "s1"]):
        line = refusal(cli_process(*args, cwd=tmp_path, home=home), home)
        assert "owned by nobody (uid 65534) with mode 0755; expected a folder you own (uid 0)" in line, line
    assert tree(home) == before and not (home / "ledger.duckdb").exists()


def test_a_home_its_group_can_write_is_refused_even_for_reading(tmp_path: Path) -> None:
    """The user's own home, but group-writable (0775): refused for reading too, as ssh refuses a
    group-writable ``~/.ssh``; the line says how to mend it."""
    home = tmp_path / "home"
    Journal.for_session(home / "journals", "s1", fsync=False).append(E.AgentTurn(session_id="s1"))
    home.chmod(0o775)
    line = refusal(cli_process("sessions", cwd=tmp_path, home=home), home)
    assert (
        "with mode 0775, writable by its group; expected a folder only its owner can write: chmod go-w"
        in line
    )
    home.chmod(0o700)
    (home / "journals").chmod(0o777)
    line = refusal(cli_process("sessions", cwd=tmp_path, home=home), home / "journals")
    assert "writable by its group and others" in line
    (home / "journals").chmod(0o700)
    assert cli_process("sessions", cwd=tmp_path, home=home).returncode == 0


# --- symbolic links among the journals (item 14) ---------------------------------------------------------


def secret_file(tmp_path: Path) -> Path:
    """A file outside the home that a journal must never show: lines like /etc/passwd's."""
    path = tmp_path / "secret"
    path.write_text("".join(f"user{i}:x:{i}:{i}:{SECRET}-{i}:/home/u:/bin/sh\n" for i in range(40)))
    return path


def test_a_symlinked_journal_is_never_read(tmp_path: Path) -> None:
    """``journals/evil.jsonl -> a file outside``: ingest, the reading commands, the fold of one session
    and the monitor's tail each refuse it in one line naming it; none of its lines is printed or stored."""
    home = tmp_path / "home"
    Journal.for_session(home / "journals", "s1", fsync=False).append(
        E.SessionStarted(session_id="s1", task="t", agent="bot", max_iterations=3)
    )
    evil = home / "journals" / "evil.jsonl"
    evil.symlink_to(secret_file(tmp_path))
    sessions = cli_process("sessions", "--json", cwd=tmp_path, home=home)
    assert sessions.returncode == 0, sessions.stderr
    assert [r["session_id"] for r in json.loads(sessions.stdout)] == ["s1"]
    assert one_line(sessions.stderr) and str(evil) in sessions.stderr, sessions.stderr
    assert "symbolic link" in sessions.stderr and SECRET not in sessions.stderr
    stored = cli_process("sql", "SELECT * FROM ingest_errors", "--json", cwd=tmp_path, home=home)
    assert stored.returncode == 0 and json.loads(stored.stdout) == [], stored.stdout
    folded = cli_process("pause", "evil", cwd=tmp_path, home=home)  # the session's fold
    assert folded.returncode == 1 and one_line(folded.stderr), folded.stderr
    assert folded.stderr.startswith(f"ralph-ledger: {evil}: refused: a symbolic link"), folded.stderr
    assert SECRET not in folded.stderr + folded.stdout
    assert SECRET in (tmp_path / "secret").read_text() and "pause" not in (tmp_path / "secret").read_text()
    monitor = Monitor(homes=[home])
    try:
        list(monitor.load())
        assert [s.session_id for s in monitor.sessions()] == ["s1"]
        later = home / "journals" / "later.jsonl"
        later.symlink_to("/etc/passwd")
        update = monitor.refresh([later, evil])
        assert update.events == 0 and len(update.bad_lines) == 2, update.bad_lines
        assert all("symbolic link" in b for b in update.bad_lines), update.bad_lines
        assert "root:" not in repr(update) and SECRET not in repr(update)
        assert monitor.ledger.con.execute("SELECT count(*) FROM ingest_errors").fetchall() == [(0,)]
    finally:
        monitor.close()


def test_an_append_never_follows_a_symlinked_journal(tmp_path: Path) -> None:
    """A journal symlinked to a file outside the home (another loop's journal, say) receives no append:
    ``pause`` and a direct append refuse it in one line naming it; a dangling link creates nothing."""
    outside = tmp_path / "elsewhere" / "journals"
    Journal.for_session(outside, "s1", fsync=False).append(
        E.SessionStarted(session_id="s1", task="t", agent="bot", max_iterations=3)
    )
    target = outside / "s1.jsonl"
    kept = target.read_bytes()
    home = tmp_path / "home"
    (home / "journals").mkdir(parents=True, mode=0o700)
    link = home / "journals" / "s1.jsonl"
    link.symlink_to(target)
    pause = cli_process("pause", "s1", cwd=tmp_path, home=home)
    assert pause.returncode == 1 and one_line(pause.stderr), pause.stderr
    assert str(link) in pause.stderr and "symbolic link" in pause.stderr, pause.stderr
    with pytest.raises(OSError, match="symbolic link") as raised:
        Journal(link, fsync=False).append(E.AgentTurn(session_id="s1"))
    assert raised.value.filename == str(link)
    assert target.read_bytes() == kept
    dangling = home / "journals" / "s2.jsonl"
    dangling.symlink_to(tmp_path / "created-through-the-link")
    with pytest.raises(OSError, match="symbolic link"):
        Journal(dangling, fsync=False).append(E.AgentTurn(session_id="s2"))
    assert not (tmp_path / "created-through-the-link").exists()


# --- one line over 16 MiB (item 8) -----------------------------------------------------------------------


def test_a_line_over_16_mib_is_a_bad_line_and_the_rest_is_stored(tmp_path: Path) -> None:
    """A real 17 MiB line (a valid event) in one journal of two: ingest stores every other event, says
    that line in one line naming the file and line, and keeps it in ``ingest_errors``; the session reads
    on past it, and later appends are ingested."""
    home = tmp_path / "home"
    journals = home / "journals"
    a = Journal.for_session(journals, "a", fsync=False)
    a.append(E.SessionStarted(session_id="a", task="t", agent="bot", max_iterations=3))
    # 15.5 MiB of short lines first: where DuckDB's JSON reader refuses the long line that follows
    turn = E.AgentTurn(session_id="a", iteration=1, output_excerpt="y" * 1000)
    a.append(*[turn] * (int(15.5 * 1024 * 1024) // len(E.encode(turn))))
    stored_a = len(a.read_all().events)
    b = Journal.for_session(journals, "b", fsync=False)
    b.append(E.SessionStarted(session_id="b", task="t", agent="bot", max_iterations=3))
    b.append(E.AgentTurn(session_id="b", iteration=1, output_excerpt="x" * (17 * 1024 * 1024)))
    b.append(E.IterationStarted(session_id="b", iteration=2))
    assert os.path.getsize(b.path) > MAX_LINE
    proc = cli_process("ingest", cwd=tmp_path, home=home)
    assert proc.returncode == 0, proc.stderr
    assert one_line(proc.stderr), proc.stderr
    assert f"skipped bad line {b.path}:2: line of " in proc.stderr and "16,777,216" in proc.stderr
    assert proc.stdout.startswith(f"ingest: {stored_a + 2} events from 2 journals"), proc.stdout
    errors = cli_process(
        "sql", "SELECT journal, line_no FROM ingest_errors", "--csv", cwd=tmp_path, home=home
    )
    assert errors.stdout.splitlines() == ["journal,line_no", "b.jsonl,2"], errors.stdout
    b.append(E.IterationStarted(session_id="b", iteration=3))
    seqs = cli_process(
        "sql",
        "SELECT session_id, string_agg(seq::VARCHAR, ' ' ORDER BY seq) AS seqs FROM events GROUP BY ALL "
        "ORDER BY 1",
        "--csv",
        cwd=tmp_path,
        home=home,
    )
    assert seqs.returncode == 0, seqs.stderr
    assert seqs.stdout.splitlines()[1:] == [f"a,{' '.join(map(str, range(1, stored_a + 1)))}", "b,1 3 4"]
    for args in (["show", "b"], ["checkpoint", "list", "b"]):  # the ledger, then the session's fold
        proc = cli_process(*args, cwd=tmp_path, home=home)
        assert proc.returncode == 0, (args, proc.stderr)


# --- a home on a read-only file system (item 9) ----------------------------------------------------------


@pytest.fixture
def read_only_disk(tmp_path: Path) -> Iterator[Callable[[], None]]:
    """A tmpfs mounted at ``tmp_path/disk`` (root only); calling the fixture's value remounts it
    read-only. Unmounted afterwards."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs and remounting it read-only needs root; the tests run as a user")
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(disk)], capture_output=True
    )
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mount.stderr.decode().strip()}")

    def read_only() -> None:
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True, capture_output=True)

    try:
        yield read_only
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_home_on_a_read_only_file_system_is_read(
    tmp_path: Path, read_only_disk: Callable[[], None]
) -> None:
    """A home on a tmpfs remounted read-only (its scratch files go to /tmp, another file system: the
    kernel will not copy across): sessions, show, stats, sql, export and checkpoint list answer from
    the journals with one line saying so; ingest and pause refuse in one line."""
    home = tmp_path / "disk" / "home"
    (home / "journals").mkdir(parents=True)
    for sid in ("s1", "s2"):
        (home / "journals" / f"{sid}.jsonl").write_bytes(session_lines(sid))
    assert cli_process("ingest", cwd=tmp_path, home=home).returncode == 0  # a ledger file there too
    read_only_disk()
    assert subprocess.run(["touch", str(home / "probe")], capture_output=True).returncode != 0
    saying = f"ralph-ledger: cannot write in {home} (a read-only file system); reading the journals instead"
    for args in (
        ["sessions", "--json"],
        ["show", "s1"],
        ["stats"],
        ["sql", "SELECT count(*) AS n FROM events", "--csv"],
        ["export", "--parquet", str(tmp_path / "out"), "--source", "w"],
        ["checkpoint", "list", "s1", "--csv"],
    ):
        proc = cli_process(*args, cwd=tmp_path, home=home)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "Traceback" not in proc.stderr and "cross-device" not in proc.stderr, proc.stderr
        if args[0] != "checkpoint":
            assert proc.stderr.strip() == saying, (args, proc.stderr)
        if args[0] == "sessions":
            assert sorted(r["session_id"] for r in json.loads(proc.stdout)) == ["s1", "s2"]
        elif args[0] == "sql":
            assert proc.stdout.splitlines() == ["n", "10"]
        elif args[0] == "export":
            assert "10 events of 2 sessions" in proc.stdout, proc.stdout
        elif args[0] == "checkpoint":
            assert "s1-cp1" in proc.stdout, proc.stdout
        elif args[0] == "show":
            assert proc.stdout.startswith("session s1: complete"), proc.stdout
    for args in (["ingest"], ["pause", "s1"]):
        proc = cli_process(*args, cwd=tmp_path, home=home)
        assert proc.returncode == 1 and one_line(proc.stderr), (args, proc.stderr)
        assert str(home) in proc.stderr and "read-only file system" in proc.stderr.lower(), proc.stderr
