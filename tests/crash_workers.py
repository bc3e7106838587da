"""Worker processes of the crash suite (``tests/reliability/test_crash.py``),
killed with SIGKILL at random points.

Each worker reports what it finished to the parent through an append-only file, one line per
report, written with ``O_APPEND`` only after the work returned: whatever a report names was done
before the kill. A report torn by the kill has no newline and is ignored.
"""

from __future__ import annotations

import os
import random
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ledger import events as E
from ledger.core.home import Home
from ledger.loop.config.loop_config import LoopConfig
from ledger.loop.decide.guards import (
    CircuitBreaker,
    GuardConfig,
    QualityRegression,
    Thrashing,
    ValidationStall,
)
from ledger.loop.engine import Engine
from ledger.loop.engine_types import EngineError
from ledger.storage.database import Ledger
from ledger.storage.journal import Cursor, Journal, journal_path, read_new
from tests.fixtures.scenarios import iteration, start
from tests.helpers import validate

TERMINAL = (E.SessionCompleted, E.SessionBlocked, E.SessionEscalated)


class Reports:
    """An append-only report file: one ``os.write`` per line on an ``O_APPEND`` descriptor."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def write(self, *words: object) -> None:
        """Report one line of space-separated words."""
        os.write(self.fd, (" ".join(map(str, words)) + "\n").encode())


def read_reports(path: Path) -> list[list[str]]:
    """The complete lines of a report file, split into words (a line torn by a kill is dropped)."""
    if not path.exists():
        return []
    data = path.read_bytes()
    return [line.split() for line in data[: data.rfind(b"\n") + 1].decode().splitlines()]


# -- appending ---------------------------------------------------------------------------------


def token_of(event: E.Event) -> str:
    """The unique token an appending worker put at the start of an agent turn's output."""
    return event.output_excerpt.split("|", 1)[0] if isinstance(event, E.AgentTurn) else ""


def append_worker(
    journals: str, sessions: list[str], reports: str, name: str, seed: int, big: bool = False
) -> None:
    """Append batches of agent turns (fsync on) to random sessions forever, reporting
    ``session seq token`` for each event of every append that returned. With ``big``, each batch
    is two events of about 1.2 MB (one write of 2.4 MB, which the kernel copies in 2 MB parts),
    and ``go <journal size>`` is reported just before each append, so that the parent, watching
    the size grow, can kill it mid-write."""
    rng = random.Random(seed)
    out = Reports(Path(reports))
    journal = {s: Journal.for_session(Path(journals), s, fsync=True) for s in sessions}
    n = 0
    while True:
        sid = rng.choice(sessions)
        batch = []
        for _ in range(2 if big else rng.randint(1, 6)):
            n += 1
            size = rng.randint(1_100_000, 1_300_000) if big else rng.randint(0, 1500)
            batch.append(
                E.AgentTurn(session_id=sid, output_excerpt=f"{name}.{n}|" + "x" * size, tool_count=n)
            )
        if big:
            path = journal[sid].path
            out.write("go", path.stat().st_size if path.exists() else 0)
        written = journal[sid].append(*batch)
        for e in written:
            out.write(sid, e.seq, token_of(e))


# -- ingesting ---------------------------------------------------------------------------------


def session_events(sid: str, first: int, count: int, seed: int) -> Iterator[E.Event]:
    """``count`` iterations of a session from iteration ``first`` (1 starts the session), varied
    by ``seed``: rule outcomes, files, promises and checkpoints as a real loop records them."""
    rng = random.Random(seed)
    if first == 1:
        yield from start(sid, f"task of {sid}")
    for n in range(first, first + count):
        outcome = "".join(rng.choice("ppfe") for _ in range(rng.randint(1, 4)))
        files = [f"src/m{rng.randint(0, 9)}.py" for _ in range(rng.randint(0, 3))]
        yield from iteration(sid, n, outcome, files, output=f"iteration {n} " + "y" * rng.randint(0, 400))
        if rng.random() < 0.2:
            yield E.CheckpointCreated(
                session_id=sid,
                iteration=n,
                checkpoint_id=f"{sid}-cp{n}",
                step=n,
                agent_context={"n": n, "files": files},
            )


def ingest_worker(root: str, reports: str, seed: int) -> None:
    """Open the home's ledger file and ingest or rebuild it, again and again, reporting each
    phase (``open``, ``ingest``/``rebuild``, ``done``, ``closed``) before and after it."""
    rng = random.Random(seed)
    out = Reports(Path(reports))
    home = Home(Path(root))
    while True:
        out.write("open")
        with Ledger.open(home, wait=60) as ledger:
            for _ in range(rng.randint(1, 3)):
                op = rng.choice(["ingest", "ingest", "rebuild"])
                out.write(op)
                report = ledger.rebuild() if op == "rebuild" else ledger.ingest()
                out.write("done", report.events)
        out.write("closed")


# -- running loops -----------------------------------------------------------------------------


def loop_config(target: int) -> LoopConfig:
    """A loop that completes at iteration ``target``: two cheap rules (one passes only once the
    output says it is done), the default hook, and the guards that repeated validations of one
    iteration could trip switched off."""
    return LoopConfig(
        task=f"complete at iteration {target}",
        agent="crash",
        max_iterations=target + 10,
        rules=[
            {"name": "done", "type": "content_pattern", "pattern": r"step \d+: all done"},
            {"name": "no_panic", "type": "content_pattern", "pattern": "panic", "must_match": False},
        ],
        hooks=["default"],
        guards=GuardConfig(
            circuit_breaker=CircuitBreaker(enabled=False),
            quality_regression=QualityRegression(enabled=False),
            thrashing=Thrashing(enabled=False),
            validation_stall=ValidationStall(enabled=False),
        ),
    )


def target_of(sid: str) -> int:
    """The iteration at which session ``sid`` completes (2 to 5, fixed by its name)."""
    return 2 + zlib.crc32(sid.encode()) % 4


def step(engine: Engine, sid: str) -> str:
    """Take one lifecycle step of session ``sid`` (start, validate, next or complete), deciding from
    its journal alone as a fresh process would; returns what it did (``"ended"`` when nothing is left)."""
    path = journal_path(engine.home.journals, sid)
    events = read_new(path, Cursor()).events if path.exists() else []
    if not any(isinstance(e, E.SessionStarted) for e in events):
        engine.start(sid, loop_config(target_of(sid)))
        return "start"
    if any(isinstance(e, TERMINAL) for e in events):
        return "ended"
    last = next((e for e in reversed(events) if isinstance(e, E.IterationStarted | E.SignalResolved)), None)
    if isinstance(last, E.SignalResolved) and last.signal == "CONTINUE":
        engine.next(sid)
        return "next"
    if isinstance(last, E.SignalResolved) and last.signal == "COMPLETE":
        engine.complete(sid, last.promise)
        return "complete"
    n = max((e.iteration for e in events if isinstance(e, E.IterationStarted)), default=0)
    done = n >= target_of(sid)
    output = f"step {n}: " + ("all done <promise>COMPLETE</promise>" if done else "still working")
    validate(engine, sid, output, files_modified=[f"src/f{n}.py"], tool_count=n)
    return "validate"


def run_to_end(engine: Engine, sid: str, limit: int = 100) -> int:
    """Step session ``sid`` until it has ended; returns the steps taken."""
    for taken in range(limit):
        if step(engine, sid) == "ended":
            return taken
    raise EngineError(f"session {sid!r} did not end in {limit} steps")


def engine_worker(root: str, work: str, sessions: list[str], reports: str, seed: int) -> None:
    """Advance up to three sessions at a time, a step each in turn, through the engine (fsync on),
    reporting ``sid what`` after each step, until every session has ended."""
    rng = random.Random(seed)
    out = Reports(Path(reports))
    engine = Engine(Home(Path(root)), work_dir=Path(work))
    pending = list(sessions)
    active: list[str] = []
    while pending or active:
        while pending and len(active) < 3:
            active.append(pending.pop(0))
        sid = rng.choice(active)
        what = step(engine, sid)
        out.write(sid, what)
        if what == "ended":
            active.remove(sid)


# -- holding the ledger ------------------------------------------------------------------------


def hold_ledger(root: str, reports: str) -> None:
    """Open the home's ledger file, report ``held``, and keep it open until killed."""
    out = Reports(Path(reports))
    with Ledger.open(Home(Path(root))) as ledger:
        ledger.ingest()
        out.write("held")
        while True:
            time.sleep(0.05)


def rows(ledger: Ledger, sql: str) -> list[tuple[Any, ...]]:
    """All rows of a query, as tuples."""
    return ledger.con.execute(sql).fetchall()
