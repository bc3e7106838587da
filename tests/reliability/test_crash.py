"""The crash suite: writers, ingests and loops killed with SIGKILL at random points, then checked.

- every append that returned is in its journal and in the ledger afterwards;
- a reader polling the journals meanwhile only ever gets whole events with consecutive seqs;
- an ingest or rebuild killed part-way converges, on the next ingest, to the ledger a rebuild
  from the journals gives;
- a loop killed at any point resumes in a fresh engine in the state the journals say, and
  runs on to completion;
- a damaged ledger file (deleted, truncated, bytes overwritten) is rebuilt from the journals.

Quick by default; ``pytest --long`` kills hundreds of times. The generator is seeded: the seed is
printed, and ``CRASH_SEED=<seed>`` repeats a run's choices (not its timing).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import shutil
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.context import ForkServerContext
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ledger import events as E
from ledger.cli import main
from ledger.core.errors import LedgerError, LedgerLocked
from ledger.core.home import Home
from ledger.loop.engine import Engine
from ledger.storage.database import Ledger
from ledger.storage.journal import Cursor, Journal, journal_path, read_new
from tests import crash_workers as W

SEED = int(os.environ.get("CRASH_SEED") or random.SystemRandom().randrange(1, 10**9))


@dataclass
class Tally:
    """What the whole suite survived and checked."""

    kills: int = 0
    events: int = 0
    lost: int = 0


TALLY = Tally()


@pytest.fixture(scope="module", autouse=True)
def summary() -> Iterator[None]:
    """Print the suite's totals once its tests have run (visible with ``-s``)."""
    print(f"\ncrash suite: seed {SEED} (CRASH_SEED={SEED} repeats its choices)")
    yield
    print(
        f"\ncrash suite: {TALLY.kills:,} kills survived, {TALLY.events:,} events checked, "
        f"{TALLY.lost} lost (seed {SEED})"
    )


@pytest.fixture(scope="module")
def procs() -> ForkServerContext:
    """Worker processes forked from a clean server that has imported the workers (and DuckDB)
    once: starting one takes milliseconds, and none inherits this process's threads."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["tests.crash_workers"])
    return ctx


def rng_for(test: str) -> random.Random:
    """The seeded generator of one test."""
    return random.Random(f"{SEED}-{test}")


def kill(proc: multiprocessing.process.BaseProcess) -> None:
    """SIGKILL a worker and check that it was still running (a worker that died on its own
    failed: its traceback is on stderr)."""
    proc.kill()
    proc.join(30)
    assert proc.exitcode == -signal.SIGKILL, f"worker {proc.name} ended on its own: exit {proc.exitcode}"


# What ingest writes, plus the sessions view, each with the columns that order its rows.
TABLES = {
    "events": "session_id, seq",
    "sessions": "session_id",
    "ingest_errors": "journal, line_no, reason",
    "ingest_positions": "journal",
}
Contents = dict[str, Any]


def contents(ledger: Ledger, *, full: bool = True) -> Contents:
    """Every row of ``TABLES`` in order (``SELECT * FROM events ORDER BY session_id, seq``, ...);
    else, to compare many times over, each table's row count and a digest of its ordered rows."""
    if full:
        return {t: W.rows(ledger, f"SELECT * FROM {t} ORDER BY {key}") for t, key in TABLES.items()}
    digests = ", ".join(
        f"(SELECT (count(*), md5(coalesce(string_agg(t::VARCHAR, '|' ORDER BY {key}), ''))) FROM {t} t)"
        for t, key in TABLES.items()
    )
    return dict(zip(TABLES, W.rows(ledger, f"SELECT {digests}")[0], strict=True))


def rebuilt(home: Home, *, full: bool = True) -> Contents:
    """What a ledger built from scratch from ``home``'s journals holds."""
    ledger = Ledger.memory(home)
    try:
        ledger.ingest()
        return contents(ledger, full=full)
    finally:
        ledger.close()


def reingested(home: Home, *, full: bool = True) -> Contents:
    """What ``home``'s ledger file holds after a fresh ``ingest()``."""
    with Ledger.open(home, wait=30) as ledger:
        ledger.ingest()
        return contents(ledger, full=full)


# -- appending -----------------------------------------------------------------------------------


class Reader:
    """Reads every journal incrementally with ``read_new`` while writers are killed, checking that
    each event is whole, of its session and next in seq, and that a bad line is only a torn one."""

    def __init__(self, journals: Path, sessions: list[str]) -> None:
        self.paths = {s: journal_path(journals, s) for s in sessions}
        self.cursors = {s: Cursor() for s in sessions}
        self.events: dict[str, list[E.AnyEvent]] = {s: [] for s in sessions}
        self.bad: Counter[str] = Counter()
        self.problems: list[str] = []
        self.polls = 0

    def poll(self) -> None:
        """Read what was appended since the last poll."""
        self.polls += 1
        for sid, path in self.paths.items():
            if not path.exists():
                continue
            got = read_new(path, self.cursors[sid])
            if got.truncated:
                self.problems.append(f"{sid}: the journal looked truncated or replaced")
            for bad in got.bad:
                self.bad[sid] += 1
                if "torn line" not in bad.reason:
                    self.problems.append(f"{sid}: a bad line that is not a torn one: {bad}")
            seen = self.events[sid]
            for e in got.events:
                if e.session_id != sid or e.seq != len(seen) + 1 or not isinstance(e, E.AgentTurn):
                    self.problems.append(
                        f"{sid}: got seq {e.seq} of {e.session_id}, expected {len(seen) + 1}"
                    )
                seen.append(e)

    def run(self, stop: threading.Event) -> None:
        """Poll until ``stop`` is set, recording any exception as a problem."""
        try:
            while not stop.is_set():
                self.poll()
                time.sleep(0.001)
        except Exception as exc:  # reported by the test, which runs in another thread
            self.problems.append(f"reader failed: {exc!r}")


def whole_lines(path: Path) -> bool:
    """Whether a file ends with a newline (a writer killed mid-write leaves a torn tail)."""
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def size_of(path: Path) -> int:
    """A file's size (0 before it exists)."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def test_appends_survive_sigkill_and_readers_never_see_a_torn_event(
    tmp_path: Path, procs: ForkServerContext, long_form: bool
) -> None:
    """Two appending processes (fsync on) are SIGKILLed at random points and replaced, and every
    sixth kill hits a third one in the middle of a 2.4 MB write (a torn line), while a reader
    polls the journals; then every acknowledged append is in its journal and in the ledger."""
    rng = rng_for("append")
    kills_wanted = 320 if long_form else 24
    home = Home.resolve(tmp_path / "home")
    home.ensure()
    sessions = ["a-0", "a-1"]
    big_journal = journal_path(home.journals, "a-big")
    reports = tmp_path / "reports"
    reports.mkdir()
    reader = Reader(home.journals, [*sessions, "a-big"])
    stop = threading.Event()
    polling = threading.Thread(target=reader.run, args=(stop,), daemon=True)
    polling.start()

    started = 0

    def spawn(big: bool = False) -> multiprocessing.process.BaseProcess:
        nonlocal started
        started += 1
        name = f"w{started}"
        where = ["a-big"] if big else sessions
        args = (str(home.journals), where, str(reports / f"{name}.txt"), name, rng.randrange(2**32), big)
        proc = procs.Process(target=W.append_worker, args=args, name=name, daemon=True)
        proc.start()
        return proc

    alive = [spawn(), spawn()]
    kills = 0
    try:
        while kills < kills_wanted:
            if kills % 6 == 5:
                big = spawn(big=True)
                said = reports / f"{big.name}.txt"
                deadline = time.monotonic() + 60
                while not (go := W.read_reports(said)):
                    assert time.monotonic() < deadline and big.is_alive(), "the big writer never began"
                    time.sleep(0.0005)
                size = int(go[0][1])
                while size_of(big_journal) == size and time.monotonic() < deadline:
                    pass  # once the write has begun, kill it while the kernel copies the rest
                kill(big)
            else:
                time.sleep(rng.uniform(0.002, 0.12))
                victim = alive.pop(rng.randrange(len(alive)))
                kill(victim)
                alive.append(spawn())
            kills += 1
    finally:
        for proc in alive:
            kill(proc)
            kills += 1
        stop.set()
        polling.join(30)
    reader.poll()
    assert not reader.problems, reader.problems[:10]

    acked = [r for f in sorted(reports.iterdir()) for r in W.read_reports(f) if r[0] != "go"]
    assert len(acked) > kills_wanted, "the workers barely appended anything before being killed"
    journals: dict[str, list[E.AnyEvent]] = {}
    torn = tails = 0
    for sid in [*sessions, "a-big"]:
        whole = Journal.for_session(home.journals, sid).read_all()
        journals[sid] = whole.events
        torn += len(whole.bad)
        tails += not whole_lines(journal_path(home.journals, sid))
        assert all("torn line" in b.reason for b in whole.bad), whole.bad
        assert [e.seq for e in whole.events] == list(range(1, len(whole.events) + 1)), sid
        tokens = [W.token_of(e) for e in whole.events]
        assert len(set(tokens)) == len(tokens), f"{sid}: an event was written twice"
        assert reader.events[sid] == whole.events, (
            f"{sid}: the reader saw other events than the journal holds"
        )
        assert reader.bad[sid] == len(whole.bad)
    lost = [
        (sid, seq, token)
        for sid, seq, token in acked
        if int(seq) > len(journals[sid]) or W.token_of(journals[sid][int(seq) - 1]) != token
    ]
    ledger = Ledger.memory(home)
    report = ledger.ingest()
    stored = set(
        W.rows(ledger, "SELECT session_id, seq::VARCHAR, split_part(output_excerpt, '|', 1) FROM events")
    )
    ledger.close()
    not_stored = [a for a in acked if tuple(a) not in stored]
    TALLY.lost += len(lost) + len(not_stored)
    assert len(report.bad_lines) == torn
    assert lost == [] and not_stored == [], (lost[:5], not_stored[:5])
    checked = len(acked) + sum(len(v) for v in reader.events.values())
    TALLY.kills += kills
    TALLY.events += checked
    print(
        f"\ncrash suite, appending: {kills} kills survived, {len(acked):,} events of returned appends "
        f"found in journals and ledger, {sum(len(v) for v in journals.values()):,} events read by a "
        f"live reader in {reader.polls:,} polls, {torn} torn lines and {tails} torn tails (never an "
        "event), 0 lost"
    )


def test_a_torn_tail_is_carried_and_never_repeats_a_seq(tmp_path: Path) -> None:
    """What a writer killed mid-write leaves: a line cut short, or a whole event missing only its
    newline. A reader carries either without reporting it; the next append ends that line, so the
    cut one becomes one bad line and the whole one an event whose seq the next event follows."""
    journal = Journal(tmp_path / "t.jsonl", fsync=False)
    journal.append(E.AgentTurn(session_id="t", tool_count=1))
    line = E.encode(E.AgentTurn(session_id="t", seq=2, tool_count=2))
    cursor = Cursor()
    assert [e.seq for e in read_new(journal.path, cursor).events] == [1]
    expected = [  # (seq, tool_count) of the events the next read gets, line numbers of bad lines
        ([(2, 2), (3, 3)], []),
        ([(4, 4)], [4]),
    ]
    for n, (tail, (events, bad)) in enumerate(
        zip((line[:-1], line[: len(line) // 2]), expected, strict=True), 3
    ):
        with journal.path.open("ab") as f:
            f.write(tail)
        carried = read_new(journal.path, cursor)
        assert (carried.events, carried.bad, carried.truncated) == ([], [], False)
        journal.append(E.AgentTurn(session_id="t", tool_count=n))
        after = read_new(journal.path, cursor)
        turns = [e for e in after.events if isinstance(e, E.AgentTurn)]
        assert [(e.seq, e.tool_count) for e in turns] == events and turns == after.events
        assert [b.line_no for b in after.bad] == bad
        assert all("torn line" in b.reason for b in after.bad)
    ledger = Ledger.memory()
    report = ledger.ingest([journal.path])
    assert [b.line_no for b in report.bad_lines] == [4]
    stored = W.rows(ledger, "SELECT seq, tool_count FROM events ORDER BY seq")
    assert stored == [(1, 1), (2, 2), (3, 3), (4, 4)]


# -- ingesting -----------------------------------------------------------------------------------


class Appender:
    """Appends loop iterations to a home's journals from a thread (and now and then a line that
    is not an event), so that ingests killed meanwhile had new lines to read."""

    def __init__(self, home: Home, sessions: list[str], rng: random.Random, pace: float = 0.03) -> None:
        self.home = home
        self.rng = rng
        self.pace = pace
        self.next = dict.fromkeys(sessions, 1)
        self.events = 0
        self.garbage = 0

    def add(self, iterations: int) -> None:
        """Append ``iterations`` iterations to a random session."""
        sid = self.rng.choice(list(self.next))
        first = self.next[sid]
        batch = list(W.session_events(sid, first, iterations, self.rng.randrange(2**32)))
        Journal.for_session(self.home.journals, sid, fsync=False).append(*batch)
        self.next[sid] = first + iterations
        self.events += len(batch)
        if self.rng.random() < 0.03:
            fd = os.open(journal_path(self.home.journals, sid), os.O_WRONLY | os.O_APPEND)
            os.write(fd, b'{"type": "agent_turn", "session_id": "' + sid.encode() + b'", "seq": "oops"}\n')
            os.close(fd)
            self.garbage += 1

    def run(self, stop: threading.Event) -> None:
        """Append a few iterations every ``pace`` seconds or so until ``stop`` is set."""
        while not stop.wait(self.rng.uniform(0.2, 1.8) * self.pace):
            self.add(self.rng.randint(1, 3))


def test_ingest_killed_anywhere_converges_to_a_rebuild(
    tmp_path: Path, procs: ForkServerContext, long_form: bool
) -> None:
    """A process ingesting into (or rebuilding) the ledger file is SIGKILLed at random points
    while the journals grow; a fresh ``ingest()`` then gives exactly the rows, sessions, bad
    lines and positions of a ledger built from scratch from the journals."""
    rng = rng_for("ingest")
    kills_wanted = 110 if long_form else 8
    home = Home.resolve(tmp_path / "home")
    home.ensure()
    appender = Appender(home, [f"i-{n}" for n in range(6)], rng, pace=0.05)
    for _ in range(40):
        appender.add(6)
    reports = tmp_path / "reports"
    reports.mkdir()
    phases: Counter[str] = Counter()
    checks = checked = left = 0
    killed: set[int] = set()
    for k in range(1, kills_wanted + 1):
        stop = threading.Event()
        growing = threading.Thread(target=appender.run, args=(stop,), daemon=True)
        growing.start()
        path = reports / f"k{k}.txt"
        proc = procs.Process(target=W.ingest_worker, args=(str(home.root), str(path), rng.randrange(2**32)))
        proc.start()
        assert proc.pid is not None
        killed.add(proc.pid)
        if k % 2:  # at any point
            time.sleep(rng.uniform(0.05, 1.5))
        else:  # aimed: just after a rebuild began (it empties the tables, then reads every journal)
            wait_for(path, "rebuild", proc)
            time.sleep(rng.uniform(0, 0.03))
        kill(proc)
        stop.set()
        growing.join(30)
        left += len(scratch_of_dead(home, killed))
        said = W.read_reports(path)
        phases[said[-1][0] if said else "starting"] += 1
        if rng.random() < 0.5:  # else the next ingest starts from this one's wreck
            got, want = reingested(home, full=False), rebuilt(home, full=False)
            assert got == want, f"kill {k}: re-ingest differs from a rebuild"
            checks += 1
            checked += want["events"][0]
    got, want = reingested(home), rebuilt(home)
    for table in TABLES:
        assert got[table] == want[table], f"{table}: re-ingest differs from a rebuild"
    checks += 1
    checked += len(want["events"])
    assert phases["ingest"] + phases["rebuild"] > 0, f"no kill landed inside an ingest: {phases}"
    assert scratch_of_dead(home, killed) == [], "the scratch files of killed ingests were kept"
    TALLY.kills += kills_wanted
    TALLY.events += checked
    print(
        f"\ncrash suite, ingesting: {kills_wanted} kills survived (last phase reported: "
        f"{', '.join(f'{n} {p}' for p, n in phases.most_common())}), {checks} re-ingests equal to "
        f"a rebuild ({checked:,} events compared; the last row by row), {appender.events:,} events and "
        f"{appender.garbage} bad lines appended meanwhile, {left} scratch files left by killed "
        "ingests (removed by the next one), 0 lost"
    )


def wait_for(path: Path, word: str, proc: multiprocessing.process.BaseProcess) -> None:
    """Wait until a worker reports ``word`` (a minute at most)."""
    deadline = time.monotonic() + 60
    while not any(r[0] == word for r in W.read_reports(path)):
        assert time.monotonic() < deadline and proc.is_alive(), f"the worker never reported {word!r}"
        time.sleep(0.001)


def scratch_of_dead(home: Home, pids: set[int]) -> list[Path]:
    """The scratch files in ``home`` of ingests run by ``pids`` that no longer run (not reused)."""

    def dead(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    found = [(p, int(p.name.split("-")[1])) for p in home.tmp.glob("ingest-*-*.jsonl")]
    return [p for p, pid in found if pid in pids and dead(pid)]


# -- running loops -------------------------------------------------------------------------------


def check_journal(home: Home, sid: str) -> list[E.AnyEvent]:
    """A loop's journal after kills: seqs run 1..n, iterations start once each and in order, at
    most one start, nothing after the end."""
    read = Journal.for_session(home.journals, sid).read_all()
    assert all("torn line" in b.reason for b in read.bad), read.bad
    events = read.events
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), sid
    started = [e.iteration for e in events if isinstance(e, E.IterationStarted)]
    assert started == list(range(1, len(started) + 1)), f"{sid}: iterations started {started}"
    assert sum(isinstance(e, E.SessionStarted) for e in events) <= 1, sid
    ends = [i for i, e in enumerate(events) if isinstance(e, W.TERMINAL)]
    assert ends in ([], [len(events) - 1]), f"{sid}: events after the end, or two ends"
    return events


def test_loops_killed_anywhere_resume_with_identical_state(
    tmp_path: Path, procs: ForkServerContext, long_form: bool
) -> None:
    """A process running loops through the engine is SIGKILLed at random points. After each kill
    a fresh engine reports, for every session, the state a ledger built from the journals and the
    incrementally ingested ledger file report; in the end every loop runs on to completion."""
    rng = rng_for("engine")
    kills_wanted = 40 if long_form else 5
    home = Home.resolve(tmp_path / "home")
    home.ensure()
    work = tmp_path / "work"
    work.mkdir()
    names = [f"e-{n:03d}" for n in range(200)]
    reports = tmp_path / "reports"
    reports.mkdir()
    steps: Counter[str] = Counter()
    compared = 0
    for k in range(1, kills_wanted + 1):
        path = reports / f"k{k}.txt"
        args = (str(home.root), str(work), names, str(path), rng.randrange(2**32))
        proc = procs.Process(target=W.engine_worker, args=args)
        proc.start()
        time.sleep(rng.uniform(0.1, 1.6))
        kill(proc)
        steps.update(what for _, what in W.read_reports(path) if what != "ended")
        sessions = [p.stem for p in home.journal_files()]
        events = {sid: check_journal(home, sid) for sid in sessions}
        fresh = Engine(home, work_dir=work)
        incremental = reingested(home, full=False)
        from_journals, rows = journal_state(home)
        assert incremental == from_journals, f"kill {k}: the ledger file differs from a rebuild"
        for sid in sessions:
            if not any(isinstance(e, E.SessionStarted) for e in events[sid]):
                continue  # killed inside its start: a fresh engine starts it again (checked below)
            if not any(isinstance(e, W.TERMINAL) for e in events[sid]):
                assert fresh.status(sid) == rows[sid], f"kill {k}: {sid}"
            compared += len(events[sid])
    finished = Engine(home, work_dir=work)
    sessions = [p.stem for p in home.journal_files()]
    for sid in sessions:
        W.run_to_end(finished, sid)
        status = finished.status(sid)
        assert (status["status"], status["iteration"]) == ("complete", W.target_of(sid)), sid
        check_journal(home, sid)
    assert rebuilt(home) == reingested(home)
    TALLY.kills += kills_wanted
    TALLY.events += compared
    print(
        f"\ncrash suite, loops: {kills_wanted} kills survived after "
        f"{', '.join(f'{n} {s}' for s, n in sorted(steps.items()))} steps; {len(sessions)} sessions "
        f"resumed and completed, {compared:,} events compared, 0 lost"
    )


@pytest.mark.parametrize("left", ["nothing", "a torn line"])
def test_a_loop_killed_inside_its_start_starts_afresh(tmp_path: Path, left: str) -> None:
    """A kill inside ``start`` leaves an empty journal (created, not yet written) or a torn first
    line; a fresh engine starts that session and runs it to completion."""
    home = Home.resolve(tmp_path / "home")
    home.ensure()
    sid = "s-2"  # completes at iteration 2
    line = E.encode(E.SessionStarted(session_id=sid, seq=1, task="t"))
    journal_path(home.journals, sid).write_bytes(b"" if left == "nothing" else line[: len(line) // 2])
    engine = Engine(home, work_dir=tmp_path)
    assert W.step(engine, sid) == "start"
    W.run_to_end(engine, sid)
    status = engine.status(sid)
    assert (status["status"], status["iteration"]) == ("complete", W.target_of(sid)) == ("complete", 2)
    events = check_journal(home, sid)
    assert isinstance(events[0], E.SessionStarted) and events[0].seq == 1


def journal_state(home: Home) -> tuple[Contents, dict[str, dict[str, Any]]]:
    """A ledger built from the journals: its contents' digests and its sessions rows by id."""
    ledger = Ledger.memory(home)
    try:
        ledger.ingest()
        rows = {r["session_id"]: r for r in ledger.rows("SELECT * FROM sessions")}
        return contents(ledger, full=False), rows
    finally:
        ledger.close()


# -- damaged ledger files ------------------------------------------------------------------------

Damage = Callable[[Path, random.Random], None]


def delete(path: Path, rng: random.Random) -> None:
    """The file is gone."""
    path.unlink()


def empty(path: Path, rng: random.Random) -> None:
    """The file is empty (a copy or a disk that filled up)."""
    path.write_bytes(b"")


def garbage_header(path: Path, rng: random.Random) -> None:
    """The file's first block is not DuckDB's."""
    data = bytearray(path.read_bytes())
    data[:64] = b"not a database " * 4 + b"...."
    path.write_bytes(bytes(data))


def cut(path: Path, rng: random.Random) -> None:
    """The file is truncated at a random length."""
    data = path.read_bytes()
    path.write_bytes(data[: rng.randrange(len(data))])


def scribble(path: Path, rng: random.Random) -> None:
    """One to five runs of random bytes overwrite the file at random places."""
    data = bytearray(path.read_bytes())
    for _ in range(rng.randint(1, 5)):
        at = rng.randrange(len(data))
        n = min(rng.randint(1, 64), len(data) - at)
        data[at : at + n] = rng.randbytes(n)
    path.write_bytes(bytes(data))


def scribble_column(path: Path, rng: random.Random) -> None:
    """Random bytes overwrite the stored ``type`` column of the events, which opening the ledger
    and ingesting never read: only a query meets the damage."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        ((block_size,),) = con.execute("SELECT block_size FROM pragma_database_size()").fetchall()
        block, offset = con.execute(
            "SELECT block_id, block_offset FROM pragma_storage_info('events') "
            "WHERE column_name = 'type' AND block_id >= 0 ORDER BY ALL LIMIT 1"
        ).fetchall()[0]
    finally:
        con.close()
    at = 3 * 4096 + block * block_size + 8 + offset + 16  # after three 4 KiB headers; a block's checksum
    data = bytearray(path.read_bytes())
    data[at : at + 32] = rng.randbytes(32)
    path.write_bytes(bytes(data))


# Damage the commands must detect, each with a command that meets it; then random damage.
UNREADABLE: list[tuple[Damage, list[str]]] = [
    (empty, ["ingest"]),
    (garbage_header, ["sessions", "--csv"]),
    (scribble_column, ["sql", "SELECT type, count(*) AS n FROM events GROUP BY type ORDER BY type"]),
]
COMMANDS = [
    ["sessions", "--csv"],
    ["ingest"],
    ["rebuild"],
    ["stats", "--csv"],
    ["sql", "SELECT type, count(*) AS n FROM events GROUP BY type ORDER BY type"],
    ["show", "i-0", "--csv"],
]
# Every row of the tables ingest writes, as digests: one query that reads all of them.
DIGEST = (
    "SELECT (SELECT md5(string_agg(e::VARCHAR, '|' ORDER BY session_id, seq)) FROM events e) AS events, "
    "(SELECT md5(string_agg(x::VARCHAR, '|' ORDER BY journal, line_no)) FROM ingest_errors x) AS bad, "
    "(SELECT md5(string_agg(p::VARCHAR, '|' ORDER BY journal)) FROM ingest_positions p) AS positions, "
    "(SELECT count(*) FROM events) AS n"
)


def test_a_damaged_ledger_file_is_rebuilt_from_the_journals(
    tmp_path: Path, long_form: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each CLI command, given a ledger file that was deleted, emptied, truncated or overwritten
    in places, succeeds with the output it gave before: a file it cannot read, whether opening,
    ingesting or querying finds that out, is moved aside (one line on stderr) and rebuilt from
    the journals, and then holds the same rows as before the damage."""
    rng = rng_for("damage")
    home = Home.resolve(tmp_path / "home")
    home.ensure()
    appender = Appender(home, [f"i-{n}" for n in range(4)], rng)
    for _ in range(30):
        appender.add(5)
    root = str(home.root)

    def run(cmd: list[str]) -> tuple[str, str]:
        code = main(["--home", root, *cmd])
        out, err = capsys.readouterr()
        assert code == 0, f"{cmd}: {err}"
        return out, err

    before = {tuple(cmd): run(cmd)[0] for cmd in COMMANDS}
    digest = run(["sql", DIGEST, "--csv"])[0]
    events = len(rebuilt(home)["events"])
    assert digest.splitlines()[1].endswith(f",{events}") and events > 500
    pristine = home.database.read_bytes()
    assert not Path(f"{home.database}.wal").exists()
    randoms = 60 if long_form else 5
    trials = [
        *UNREADABLE,
        (delete, COMMANDS[0]),
        *((rng.choice([cut, scribble]), rng.choice(COMMANDS)) for _ in range(randoms)),
    ]
    moved = 0
    for damage, cmd in trials:
        home.database.write_bytes(pristine)
        damage(home.database, rng)
        what = f"{damage.__name__} then {cmd}"
        out, err = run(cmd)
        if cmd[0] not in ("ingest", "rebuild"):
            assert out == before[tuple(cmd)], what
        after, err_after = run(["sql", DIGEST, "--csv"])  # reads every row: damage left unmet is met here
        assert after == digest, what
        aside = [p for p in home.root.glob("ledger.duckdb.corrupt-*") if p.suffix != ".wal"]
        said = [line for line in (err + err_after).splitlines() if "moved it aside" in line]
        assert len(said) == len(aside) <= 1, (what, err, aside)
        if aside:
            assert aside[0].name in said[0] and "cannot be read" in said[0], said
            moved += 1
        else:
            assert damage not in [d for d, _ in UNREADABLE], f"{what}: the file was not moved aside"
        for p in home.root.glob("ledger.duckdb.corrupt-*"):
            p.unlink()
        TALLY.events += events
    print(
        f"\ncrash suite, damaged ledger files: {len(trials)} damaged files ({moved} unreadable, moved "
        f"aside and rebuilt; the rest deleted or damaged only unused space), {events:,} events each, "
        "all rows equal after, 0 lost"
    )


def test_a_held_ledger_is_locked_not_damaged(
    tmp_path: Path, procs: ForkServerContext, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ledger file another process holds is never taken for a damaged one: opening it raises
    ``LedgerLocked``, ``ingest`` fails with the lock message, ``sessions`` reads the journals, and
    nothing is moved aside. Once the holder is SIGKILLed, the file opens and holds every event."""
    home = Home.resolve(tmp_path / "home")
    home.ensure()
    appender = Appender(home, ["h-0", "h-1"], rng_for("held"))
    for _ in range(10):
        appender.add(3)
    path = tmp_path / "held.txt"
    holder = procs.Process(target=W.hold_ledger, args=(str(home.root), str(path)))
    holder.start()
    deadline = time.monotonic() + 60
    while not W.read_reports(path):
        assert time.monotonic() < deadline and holder.is_alive(), "the holder never opened the ledger"
        time.sleep(0.02)
    try:
        with pytest.raises(LedgerLocked, match=f"in use by PID {holder.pid}"):
            Ledger.open(home, wait=0.1)
        assert main(["--home", str(home.root), "--wait", "0.1", "ingest"]) == 1
        assert "is in use by PID" in capsys.readouterr().err
        assert main(["--home", str(home.root), "--wait", "0.1", "sessions", "--csv"]) == 0
        out, err = capsys.readouterr()
        assert "reading the journals instead" in err and "h-0" in out and "h-1" in out
        assert list(home.root.glob("ledger.duckdb.corrupt-*")) == []
    finally:
        kill(holder)
    assert reingested(home) == rebuilt(home)
    TALLY.kills += 1


def test_a_damaged_ledger_file_opened_read_only_is_reported_and_kept(tmp_path: Path) -> None:
    """Read-only, a damaged file cannot be rebuilt: opening it raises one line and leaves it."""
    home = Home.resolve(tmp_path / "home")
    home.ensure()
    home.database.write_bytes(b"garbage" * 1000)
    with pytest.raises(LedgerError, match="cannot open ledger"):
        Ledger.open(home, read_only=True)
    assert home.database.read_bytes() == b"garbage" * 1000
    assert list(home.root.glob("ledger.duckdb.corrupt-*")) == []


def test_a_deleted_ledger_directory_is_rebuilt(tmp_path: Path) -> None:
    """Everything but the journals may go, scratch directory included."""
    home = Home.resolve(tmp_path / "home")
    home.ensure()
    Appender(home, ["d-0"], rng_for("deleted")).add(4)
    want = rebuilt(home)
    assert reingested(home) == want
    shutil.rmtree(home.tmp)
    home.database.unlink()
    assert reingested(home) == want
