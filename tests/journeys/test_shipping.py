"""Journeys: shipping a home into a Parquet dataset incrementally with the installed ``ralph-ledger
export``: only the changed day partitions are written, each replaced atomically, ``--full`` rewrites
all, a rebuilt history rewrites the days it changed, the clobber guard holds, and ``--watch`` keeps
the dataset current until Ctrl-C."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq

from tests.journeys.conftest import Project, script, spawn

DAY1, DAY2, DAY3 = "2026-01-05", "2026-01-06", "2026-01-07"


def add_events(home: Path, session: str, day: str, n: int, *, hour: int = 10) -> None:
    """Append ``n`` events of ``session`` on ``day`` to its journal (a session_started first when
    the journal is new), as the engine writes them: one JSON line each, seq without gaps."""
    path = home / "journals" / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    seq = len(path.read_text().splitlines()) if path.exists() else 0
    lines = []
    for i in range(n):
        seq += 1
        ts = f"{day}T{hour:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z"
        event: dict[str, object] = {"session_id": session, "seq": seq, "ts": ts, "iteration": 1}
        if seq == 1:
            event |= {"type": "session_started", "task": f"task {session}", "iteration": 0}
        else:
            event |= {"type": "iteration_started", "notes": f"step {seq}"}
        lines.append(json.dumps(event) + "\n")
    with path.open("a") as fh:
        fh.write("".join(lines))


def parts(dest: Path, source: str) -> dict[str, tuple[int, int]]:
    """Each day partition file of ``source``: day -> (inode, mtime in ns)."""
    out = {}
    for p in sorted((dest / "events" / f"source={source}").glob("day=*/*.parquet")):
        st = p.stat()
        out[p.parent.name.removeprefix("day=")] = (st.st_ino, st.st_mtime_ns)
    return out


def day_rows(dest: Path, source: str) -> dict[str, int]:
    """Rows per day of ``source`` as a Parquet reader sees them."""
    return {
        p.parent.name.removeprefix("day="): pq.read_metadata(p).num_rows
        for p in sorted((dest / "events" / f"source={source}").glob("day=*/*.parquet"))
    }


def export(project: Project, dest: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``ralph-ledger export --parquet DEST --source box EXTRA`` in the project; must succeed."""
    proc = project.cli("export", "--parquet", str(dest), "--source", "box", *extra)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_a_second_export_writes_only_the_new_and_changed_days(project: Project, tmp_path: Path) -> None:
    dest = tmp_path / "fleet"
    add_events(project.home, "s1", DAY1, 5)
    add_events(project.home, "s2", DAY2, 4)
    first = export(project, dest)
    assert "9 events of 2 sessions" in first.stdout and "2 day partitions written" in first.stdout
    assert day_rows(dest, "box") == {DAY1: 5, DAY2: 4}
    before = parts(dest, "box")
    manifest = dest / "events" / "source=box" / "_export.json"
    stamp = manifest.stat().st_mtime_ns

    again = export(project, dest)  # nothing new: nothing written, and it says so
    assert "nothing changed since the last export" in again.stdout
    assert parts(dest, "box") == before and manifest.stat().st_mtime_ns == stamp

    add_events(project.home, "s2", DAY2, 3, hour=11)  # a day that grew
    add_events(project.home, "s3", DAY3, 2)  # a new day
    third = export(project, dest)
    assert "14 events of 3 sessions" in third.stdout
    assert "2 day partitions written, 0 removed" in third.stdout
    after = parts(dest, "box")
    assert after[DAY1] == before[DAY1]  # the untouched day: same file, not rewritten
    assert after[DAY2][0] != before[DAY2][0]  # the grown day: a new file renamed over the old one
    assert day_rows(dest, "box") == {DAY1: 5, DAY2: 7, DAY3: 2}
    assert sorted(p.name for p in (dest / ".staging").iterdir()) == ["box.lock"]
    recorded = json.loads(manifest.read_text())["days"]
    assert {d: r["events"] for d, r in recorded.items()} == {DAY1: 5, DAY2: 7, DAY3: 2}

    # a partition file lost or damaged by hand is noticed (its size is recorded) and written again
    (dest / "events" / "source=box" / f"day={DAY3}" / "part-0.parquet").unlink()
    (dest / "events" / "source=box" / f"day={DAY1}" / "part-0.parquet").write_bytes(b"PAR1 torn")
    fixed = export(project, dest)
    assert "2 day partitions written" in fixed.stdout
    assert day_rows(dest, "box") == {DAY1: 5, DAY2: 7, DAY3: 2}

    full = export(project, dest, "--full")  # --full: every day again
    assert "3 day partitions written" in full.stdout
    rewritten = parts(dest, "box")
    assert all(rewritten[d] != after[d] for d in (DAY1, DAY2))
    assert day_rows(dest, "box") == {DAY1: 5, DAY2: 7, DAY3: 2}


def test_a_rebuilt_history_rewrites_the_days_it_changed(project: Project, tmp_path: Path) -> None:
    dest = tmp_path / "fleet"
    add_events(project.home, "s1", DAY1, 5)
    add_events(project.home, "s2", DAY2, 4)
    add_events(project.home, "s3", DAY3, 3)
    export(project, dest)
    before = parts(dest, "box")
    # s2's journal is replaced by another history of the same length (other times), s3's is gone
    (project.home / "journals" / "s2.jsonl").unlink()
    add_events(project.home, "s2", DAY2, 4, hour=15)
    (project.home / "journals" / "s3.jsonl").unlink()
    proc = project.cli("rebuild")
    assert proc.returncode == 0, proc.stderr
    out = export(project, dest).stdout
    assert "9 events of 2 sessions" in out and "1 day partition written, 1 removed" in out
    after = parts(dest, "box")
    assert set(after) == {DAY1, DAY2} and after[DAY1] == before[DAY1] and after[DAY2] != before[DAY2]
    assert not (dest / "events" / "source=box" / f"day={DAY3}").exists()
    hours = pq.read_table(dest / "events" / "source=box" / f"day={DAY2}" / "part-0.parquet").column("ts")
    assert {t.as_py().hour for t in hours} == {15}
    # rebuilt again from the same journals: the same history, nothing to write
    assert project.cli("rebuild").returncode == 0
    assert "nothing changed" in export(project, dest).stdout


def test_a_rewritten_day_is_replaced_atomically(project: Project, tmp_path: Path) -> None:
    """A reader listing and reading the day's files while exports rewrite it always finds one whole
    file, with the old rows or the new ones; a reader that opened the old file keeps reading it whole."""
    dest = tmp_path / "fleet"
    add_events(project.home, "s1", DAY1, 300)
    export(project, dest)
    day = dest / "events" / "source=box" / f"day={DAY1}"
    held = (day / "part-0.parquet").open("rb")  # a reader in the middle of the old file
    add_events(project.home, "s1", DAY1, 300, hour=12)
    seen: list[object] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            files = sorted(day.glob("*.parquet"))
            try:
                seen.append(tuple(pq.read_metadata(f).num_rows for f in files))
            except (OSError, ValueError) as exc:  # a missing or half-written file
                seen.append(repr(exc))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for _ in range(3):
            export(project, dest, "--full")
    finally:
        done.set()
        reader.join()
    assert seen and set(seen) <= {(300,), (600,)}, sorted(set(map(str, seen)))
    assert pq.ParquetFile(held).metadata.num_rows == 300  # the old file, still whole
    held.close()


def test_the_clobber_guard_still_refuses_another_homes_folder(project: Project, tmp_path: Path) -> None:
    dest = tmp_path / "fleet"
    add_events(project.home, "s1", DAY1, 5)
    add_events(project.home, "s2", DAY2, 4)
    export(project, dest)
    before = parts(dest, "box")
    other = Project(tmp_path / "other")
    add_events(other.home, "t1", DAY3, 2)
    proc = other.cli("export", "--parquet", str(dest), "--source", "box")
    assert proc.returncode == 1
    assert len(proc.stderr.strip().splitlines()) == 1
    assert f"{dest}/events/source=box holds the export of" in proc.stderr and "--force" in proc.stderr
    assert parts(dest, "box") == before
    # --force takes the folder over: rewritten whole, the first home's days removed
    forced = other.cli("export", "--parquet", str(dest), "--source", "box", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "1 day partition written, 2 removed" in forced.stdout
    assert day_rows(dest, "box") == {DAY3: 2}
    # and now the first home is the stranger
    assert project.cli("export", "--parquet", str(dest), "--source", "box").returncode == 1


def _lines(stream: object, into: queue.Queue[str]) -> None:
    for line in iter(stream.readline, ""):  # type: ignore[attr-defined]
        into.put(line)


def _wait_line(lines: queue.Queue[str], text: str, timeout: float = 20.0) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            line = lines.get(timeout=max(0.01, end - time.monotonic()))
        except queue.Empty:
            break
        if text in line:
            return line
    raise AssertionError(f"no line with {text!r} within {timeout} s")


def test_watch_keeps_the_dataset_current_until_ctrl_c(project: Project, tmp_path: Path) -> None:
    dest = tmp_path / "fleet"
    add_events(project.home, "s1", DAY1, 5)
    proc, out, err, threads = _watch(project, dest, every="0.2")
    try:
        _wait_line(out, "1 day partition written")
        time.sleep(0.5)  # rounds that change nothing (said by nothing: test_watch_is_quiet_...)
        add_events(project.home, "s2", DAY2, 3)
        _wait_line(out, "8 events of 2 sessions")  # picked up within a round
        assert day_rows(dest, "w") == {DAY1: 5, DAY2: 3}
        # a round that fails is one line, and the next round tries again
        junk = dest / "events" / "junk.txt"
        junk.write_text("not a source folder")
        line = _wait_line(err, "expected only source=NAME folders")
        assert line.startswith("ralph-ledger: export: ") and "next round in 0.2 s" in line
        junk.unlink()
        add_events(project.home, "s3", DAY3, 2)
        _wait_line(out, "10 events of 3 sessions")
        time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 130
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    for t in threads:
        t.join(timeout=5)
    rest = []
    while not err.empty():
        rest.append(err.get())
    assert rest[-1:] == ["ralph-ledger: interrupted\n"], rest
    assert not any("Traceback" in line for line in rest)
    assert day_rows(dest, "w") == {DAY1: 5, DAY2: 3, DAY3: 2}


def _quiet_for(lines: queue.Queue[str], seconds: float) -> list[str]:
    """The lines that came within ``seconds``."""
    time.sleep(seconds)
    came = []
    while not lines.empty():
        came.append(lines.get())
    return came


def _watch(
    project: Project, dest: Path, every: str = "0.1"
) -> tuple[subprocess.Popen[str], queue.Queue[str], queue.Queue[str], list[threading.Thread]]:
    """``export --watch EVERY`` started, its stdout and stderr read line by line (by the threads)."""
    proc = spawn(
        [script("ralph-ledger"), "export", "--parquet", str(dest), "--source", "w", "--watch", every],
        project.dir,
        "",
    )
    out: queue.Queue[str] = queue.Queue()
    err: queue.Queue[str] = queue.Queue()
    threads = [
        threading.Thread(target=_lines, args=(stream, into), daemon=True)
        for stream, into in ((proc.stdout, out), (proc.stderr, err))
    ]
    for t in threads:
        t.start()
    return proc, out, err, threads


def _ctrl_c(proc: subprocess.Popen[str]) -> None:
    try:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 130
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def test_watch_is_quiet_while_nothing_changes(project: Project, tmp_path: Path) -> None:
    """``export --watch`` says its first round, then only the rounds that exported something: a
    dozen rounds with nothing new print nothing."""
    dest = tmp_path / "fleet"
    add_events(project.home, "s1", DAY1, 5)
    proc, out, err, _ = _watch(project, dest)
    try:
        _wait_line(out, "5 events of 1 session to ")
        assert _quiet_for(out, 1.5) == []  # ~12 rounds, nothing new: nothing said
        add_events(project.home, "s2", DAY2, 3)
        line = _wait_line(out, "8 events of 2 sessions")
        assert line.endswith("1 day partition written, 0 removed\n"), line
        assert _quiet_for(out, 1.0) == []
    finally:
        _ctrl_c(proc)
    # a watch started on a dataset already current says so once, then nothing
    proc, out, err, _ = _watch(project, dest)
    try:
        first = _wait_line(out, "8 events of 2 sessions")
        assert first.endswith("nothing changed since the last export\n"), first
        assert _quiet_for(out, 1.0) == []
    finally:
        _ctrl_c(proc)
    assert _quiet_for(err, 0.2) == ["ralph-ledger: interrupted\n"]
