"""Benchmark ralph-tui (the Textual monitor) on a home of 1M events / 10,000 sessions.

Run from the repository root::

    .venv/bin/python bench/bench_tui.py            # 10,000 sessions x 100 events = 1M events
    .venv/bin/python bench/bench_tui.py --quick    # 200 sessions x 100 events, well under a minute

What it measures, and how: docs/performance.md (How the benches measure).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, ClassVar, Final

if TYPE_CHECKING:
    from tui.app import RalphApp

from tables import cpu_model, markdown_table, parse_with_smoke  # bench/tables.py, beside this script

BENCH_DIR: Final = Path(__file__).resolve().parent
SCRIPT: Final = Path(__file__).resolve()
SIZE: Final = (120, 40)

STARTUP_TARGET_S: Final = 1.5
RESPONSIVE_TARGET_MS: Final = 250.0
APPEND_P50_TARGET_MS: Final = 100.0
APPEND_P95_TARGET_MS: Final = 250.0
RSS_TARGET_MB: Final = 400.0
BACKLOG_RATIO_TARGET: Final = 1.5
"""The backlog load at most this many times ``ralph-ledger ingest`` on the same journals."""

PING_KEY: Final = "f12"
PING_EVERY_S: Final = 0.05
LAG_SLEEP_S: Final = 0.01
APPEND_GAP_S: Final = (0.05, 0.10)
SPACED_GAP_S: Final = (0.3, 0.4)
"""Appends one at a time: each is on screen before the next is written (no queueing)."""
CHILD_TIMEOUT_S: Final = 900.0


# -- configuration -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Config:
    sessions: int
    events_per_session: int
    seed: int
    startup_runs: int
    backlog_runs: int
    appends: int
    baseline_runs: int
    out: Path
    quick: bool

    @property
    def total_events(self) -> int:
        return self.sessions * self.events_per_session


SMOKE: Final = (
    "--quick", "--sessions", "30", "--events-per-session", "20", "--startup-runs", "1",
    "--backlog-runs", "1", "--appends", "5", "--baseline-runs", "1",
)  # fmt: skip
"""``--smoke``: 600 events, one run of each measure, 5 appends."""


def parse_args(argv: Sequence[str] | None = None) -> tuple[Config, argparse.Namespace]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="200 sessions (20,000 events), fewer repeats")
    p.add_argument("--sessions", type=int, help="sessions (default 10,000; --quick 200)")
    p.add_argument("--events-per-session", type=int, default=100)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--startup-runs", type=int, help="start-up runs on the ingested home (default 5)")
    p.add_argument("--backlog-runs", type=int, help="start-up + load runs on a fresh home (default 3)")
    p.add_argument("--appends", type=int, help="single-event appends while live (default 120)")
    p.add_argument("--baseline-runs", type=int, help="runs of each baseline command (default 10)")
    p.add_argument("--out", type=Path, default=BENCH_DIR / "out", help="work directory (default bench/out)")
    # the child process (internal)
    p.add_argument(
        "--child", choices=("startup", "backlog", "live", "append", "ingest"), help=argparse.SUPPRESS
    )
    p.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--expect", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--gap", default=",".join(f"{g:g}" for g in APPEND_GAP_S), help=argparse.SUPPRESS)
    a = parse_with_smoke(p, argv, SMOKE)
    quick = bool(a.quick)
    cfg = Config(
        sessions=max(1, a.sessions or (200 if quick else 10_000)),
        events_per_session=a.events_per_session,
        seed=a.seed,
        startup_runs=max(1, a.startup_runs or (3 if quick else 5)),
        backlog_runs=max(1, a.backlog_runs or (1 if quick else 3)),
        appends=max(1, a.appends or (20 if quick else 120)),
        baseline_runs=max(1, a.baseline_runs or (5 if quick else 10)),
        out=a.out.resolve(),
        quick=quick,
    )
    if cfg.events_per_session < 2:
        p.error("--events-per-session must be at least 2")
    return cfg, a


def log(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


# ================================================================================================
# The child: the app, headless, observed
# ================================================================================================


class Recorder:
    """Timestamped JSON lines to the parent (on a copy of stdout, which Textual leaves alone)."""

    def __init__(self) -> None:
        self._out: IO[str] = os.fdopen(os.dup(1), "w", buffering=1)
        self._lock = threading.Lock()
        self.marks: dict[str, float] = {}

    def emit(self, name: str, /, **fields: Any) -> float:
        t = time.time()
        line = json.dumps({"ev": name, "t": t, **fields})
        with self._lock:
            self._out.write(line + "\n")
            self._out.flush()
        return t

    def mark(self, name: str) -> float:
        """Emit ``name`` once (the first time)."""
        if name not in self.marks:
            self.marks[name] = self.emit(name)
        return self.marks[name]

    def end(self) -> None:
        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        self.emit("end", maxrss_kb=maxrss, hwm_kb=vm_hwm_kb() or maxrss)


def vm_hwm_kb() -> int:
    """This process's own peak RSS (``VmHWM``). ``ru_maxrss`` is not quite that on Linux: exec keeps the
    high-water mark of the memory it replaces, so a child spawned (vfork + exec) by a large parent
    starts with the parent's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def make_app(rec: Recorder, home: Path, expect: int) -> RalphApp:
    """A ``RalphApp`` on ``home`` that reports when things reach the screen."""
    from textual import events
    from textual.binding import Binding, BindingType
    from textual.message import Message

    from tui.app import RalphApp
    from tui.messages import LoadDone, Loaded, Pending, Refreshed, Watching

    class BenchApp(RalphApp):
        BINDINGS: ClassVar[list[BindingType]] = [Binding(PING_KEY, "bench_ping", "ping", show=False)]

        def __init__(self) -> None:
            super().__init__([home])
            self.pings: deque[float] = deque()
            self.ping_ms: list[float] = []
            self.batches = 0
            self.tracking = False  # record Refreshed rows and dirty files (live phase)
            self.watching = False
            mark_dirty = self.feed.mark_dirty

            def marked(paths: set[Path] | None) -> None:
                if self.tracking and paths:
                    rec.emit("dirty", files=sorted(p.name for p in paths))
                mark_dirty(paths)

            self.feed.mark_dirty = marked  # type: ignore[method-assign]

        def painted(self, name: str, **fields: Any) -> None:
            """Mark ``name`` after the next repaint."""

            def done() -> None:
                if name not in rec.marks:
                    rec.marks[name] = rec.emit(name, rows=self.sessions_screen.table.row_count, **fields)

            self.call_after_refresh(done)

        # These handlers run before RalphApp's (same name, earlier in the MRO); both run.
        def on_mount(self) -> None:
            self.painted("first_frame")

        def on_pending(self, message: Pending) -> None:
            rec.mark("opened_handled")
            self.painted("opened", bytes=message.pending.bytes_total)

        def on_loaded(self, message: Loaded) -> None:
            self.batches += 1
            if self.batches == 1:
                rec.mark("loaded_handled")
                self.painted("first_screen", rows_read=len(message.rows))
            if len(message.rows) >= expect:
                rec.mark("all_rows_handled")
                self.painted("all_rows")

        def on_load_done(self, message: LoadDone) -> None:
            self.painted("load_done", batches=self.batches)

        def on_watching(self, message: Watching) -> None:
            self.watching = True
            rec.mark("watching")

        def on_refreshed(self, message: Refreshed) -> None:
            if not self.tracking:
                return
            handled = time.time()
            rows = [[r.session_id, r.updated_at.isoformat() if r.updated_at else ""] for r in message.rows]

            def shown() -> None:
                rec.emit("shown", handled=handled, rows=rows)

            self.call_after_refresh(shown)

        def post_message(self, message: Message) -> bool:
            if self.tracking and isinstance(message, Refreshed):
                rec.emit("posted", sessions=list(message.update.sessions))
            return super().post_message(message)

        def send_ping(self) -> None:
            """A key press, the way a terminal driver delivers one."""
            assert self._driver is not None
            key = events.Key(PING_KEY, None)
            key.set_sender(self)
            self.pings.append(time.perf_counter())
            self._driver.send_message(key)

        def action_bench_ping(self) -> None:
            if self.pings:
                self.ping_ms.append((time.perf_counter() - self.pings.popleft()) * 1000)

    return BenchApp()


async def wait_until(done: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.005)


async def repainted(app: RalphApp) -> float:
    """The time of the next repaint."""
    future: asyncio.Future[float] = asyncio.get_running_loop().create_future()

    def done() -> None:
        if not future.done():
            future.set_result(time.time())

    app.call_after_refresh(done)
    return await future


async def render_stats(app: RalphApp, rec: Recorder) -> None:
    """How many lines a full repaint of the sessions table renders, against the rows it holds."""
    table = app.sessions_screen.table
    lines: list[int] = []
    render_line = table.render_line

    def counting(y: int) -> Any:
        lines.append(y)
        return render_line(y)

    setattr(table, "render_line", counting)  # noqa: B010 (an instance attribute shadows the method)
    try:
        table.refresh()
        await repainted(app)
        await repainted(app)
    finally:
        delattr(table, "render_line")
    rec.emit(
        "render",
        row_count=table.row_count,
        lines=len(lines),
        distinct=len(set(lines)),
        height=table.size.height,
        virtual_height=table.virtual_size.height,
    )


TIMED: Final = (
    "Monitor.__init__",
    "Monitor.recent_sessions",
    "Monitor.fleet",
    "Monitor.pending",
    "Ledger.ingest",
    "Monitor.sessions",
    "Monitor.refresh",
    "SessionsScreen.apply",
)


def time_calls(rec: Recorder, app: RalphApp) -> None:
    """Report the duration of the monitor's calls (worker threads) and of the sessions screen's
    ``apply`` (the UI thread): one "timed" line each."""
    from ledger.monitor import Monitor
    from ledger.storage.database import Ledger

    def wrap(owner: Any, attr: str, label: str) -> None:
        original = getattr(owner, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                rec.emit("timed", what=label, ms=(time.perf_counter() - started) * 1000)

        setattr(owner, attr, timed)

    for label in TIMED:
        owner, attr = label.split(".")
        if owner == "SessionsScreen":
            wrap(app.sessions_screen, attr, label)
        else:
            wrap({"Monitor": Monitor, "Ledger": Ledger}[owner], attr, label)


async def child_startup(rec: Recorder, home: Path, expect: int) -> None:
    """Start on an ingested home; stop once the table is full and painted (then count rendered lines)."""
    app = make_app(rec, home, expect)
    time_calls(rec, app)
    async with app.run_test(size=SIZE):
        await wait_until(lambda: "all_rows" in rec.marks or app.errors, 120, "the sessions table")
        if app.errors:
            raise RuntimeError(app.errors[0])
        await render_stats(app, rec)
    app.cleanup()


async def child_backlog(rec: Recorder, home: Path, expect: int) -> None:
    """Start on journals only; probe responsiveness until the whole backlog is loaded and painted."""
    app = make_app(rec, home, expect)
    time_calls(rec, app)
    lags: list[float] = []

    async def lag_probe() -> None:
        while "load_done" not in rec.marks:
            started = time.perf_counter()
            await asyncio.sleep(LAG_SLEEP_S)
            lags.append((time.perf_counter() - started - LAG_SLEEP_S) * 1000)

    async def ping_probe() -> None:
        send = getattr(app, "send_ping")  # noqa: B009 (BenchApp's)
        while "load_done" not in rec.marks:
            send()
            await asyncio.sleep(PING_EVERY_S)

    async with app.run_test(size=SIZE):
        probes = [asyncio.create_task(lag_probe()), asyncio.create_task(ping_probe())]
        await wait_until(lambda: "load_done" in rec.marks or app.errors, CHILD_TIMEOUT_S, "the backlog")
        if app.errors:
            raise RuntimeError(app.errors[0])
        await asyncio.gather(*probes)
        pending: deque[float] = getattr(app, "pings")  # noqa: B009
        await wait_until(lambda: not pending, 30, "the last key presses")
        ping_ms: list[float] = getattr(app, "ping_ms")  # noqa: B009
        rec.emit("probes", lag_ms=lags, ping_ms=ping_ms)
    app.cleanup()


async def child_live(rec: Recorder, home: Path, expect: int) -> None:
    """Run on an ingested home, live; report what reaches the screen until the parent says quit."""
    app = make_app(rec, home, expect)
    time_calls(rec, app)
    quit_event = asyncio.Event()
    loop = asyncio.get_running_loop()

    def read_stdin() -> None:
        sys.stdin.readline()
        loop.call_soon_threadsafe(quit_event.set)

    threading.Thread(target=read_stdin, daemon=True).start()
    async with app.run_test(size=SIZE):
        await wait_until(lambda: "load_done" in rec.marks or app.errors, 300, "the sessions table")
        await wait_until(lambda: getattr(app, "watching", False) or app.errors, 60, "the watcher")
        if app.errors:
            raise RuntimeError(app.errors[0])
        # the catch-up refresh of every journal that follows the watcher's start
        await wait_until(
            lambda: not any(w.group == "refresh" and not w.is_finished for w in app.workers),
            300,
            "the catch-up refresh",
        )
        await repainted(app)
        setattr(app, "tracking", True)  # noqa: B010
        rec.mark("live")
        await quit_event.wait()
    app.cleanup()


def last_line(path: Path) -> dict[str, Any]:
    with path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - 8192))
        tail = f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    value: dict[str, Any] = json.loads(tail)
    return value


def child_append(
    rec: Recorder, home: Path, count: int, seed: int, gap: tuple[float, float] = APPEND_GAP_S
) -> None:
    """Append ``count`` events one at a time to random journals, ``gap`` seconds apart (a range)."""
    from ledger import events as ev
    from ledger.core.home import journals_in
    from ledger.storage.journal import Journal

    rng = random.Random(seed)
    files = journals_in(home / "journals")
    for _ in range(count):
        path = rng.choice(files)
        last = last_line(path)
        event = ev.ValidationRan(
            session_id=str(last["session_id"]),
            iteration=int(last.get("iteration", 0)),
            results=[],
            passed=rng.random() < 0.5,
            score=round(rng.uniform(0, 100), 1),
        )
        started = time.time()
        written = Journal(path, fsync=True).append(event)[0]
        rec.emit(
            "append", sid=written.session_id, seq=written.seq, ts=written.ts.isoformat(), started=started
        )
        time.sleep(rng.uniform(*gap))


def child_ingest(rec: Recorder, home: Path) -> None:
    """``Ledger.open(home).ingest()`` (in its own process, so that the bench stays small: a child's
    ``ru_maxrss`` starts at its parent's)."""
    from ledger.core.home import Home as LedgerHome
    from ledger.storage.database import Ledger

    with Ledger.open(LedgerHome.resolve(home)) as ledger:
        rec.emit("ingested", events=ledger.ingest().events)


def child_main(a: argparse.Namespace, cfg: Config) -> int:
    rec = Recorder()
    rec.mark("main")
    home: Path = a.home
    try:
        if a.child == "append":
            low, high = (float(x) for x in a.gap.split(","))
            child_append(rec, home, cfg.appends, cfg.seed, (low, high))
        elif a.child == "ingest":
            child_ingest(rec, home)
        else:
            import tui.app  # noqa: F401 (timed: the app's imports)

            rec.mark("imported")
            run = {"startup": child_startup, "backlog": child_backlog, "live": child_live}[a.child]
            asyncio.run(run(rec, home, a.expect))
    except Exception as exc:
        rec.emit("error", error=f"{type(exc).__name__}: {exc}")
        rec.end()
        return 1
    rec.end()
    return 0


# ================================================================================================
# The parent: dataset, homes, child processes, report
# ================================================================================================


class Child:
    """A child process whose JSON lines are collected as they arrive."""

    def __init__(self, mode: str, home: Path, *extra: str, stdin: bool = False) -> None:
        cmd = [sys.executable, str(SCRIPT), "--child", mode, "--home", str(home), *extra]
        self.records: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self.rusage: resource.struct_rusage | None = None
        self._cond = threading.Condition()
        self.t0 = time.time()
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self._threads = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                with self._cond:
                    self.records.append(json.loads(line))
                    self._cond.notify_all()
            else:
                self.stderr.append(line)
        with self._cond:
            self.records.append({"ev": "eof", "t": time.time()})
            self._cond.notify_all()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def events(self, name: str) -> list[dict[str, Any]]:
        with self._cond:
            return [r for r in self.records if r["ev"] == name]

    def first(self, name: str) -> dict[str, Any]:
        found = self.events(name)
        if not found:
            raise RuntimeError(f"child reported no {name!r}: {self.failure()}")
        return found[0]

    def wait_for(self, name: str, timeout: float = CHILD_TIMEOUT_S) -> dict[str, Any]:
        with self._cond:
            ok = self._cond.wait_for(
                lambda: any(r["ev"] in (name, "eof", "error") for r in self.records), timeout
            )
        if not ok:
            self.kill()
            raise RuntimeError(f"timed out waiting for {name!r} from the child")
        return self.first(name)

    def failure(self) -> str:
        errors = [r["error"] for r in self.events("error")]
        return "; ".join(errors) or "".join(self.stderr)[-2000:] or f"exit code {self.proc.returncode}"

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text)
        self.proc.stdin.flush()

    def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()

    def finish(self, timeout: float = CHILD_TIMEOUT_S) -> None:
        """Wait for the child (``os.wait4``, keeping its rusage); raise if it failed."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                self.proc.returncode = os.waitstatus_to_exitcode(status)
                self.rusage = usage
                break
            if time.monotonic() > deadline:
                self.proc.kill()
                timeout = 30.0
                deadline = time.monotonic() + timeout
            time.sleep(0.02)
        for t in self._threads:
            t.join(10)
        if self.proc.returncode != 0 or self.events("error"):
            raise RuntimeError(f"child failed: {self.failure()}")

    def since_spawn(self, name: str) -> float:
        return float(self.first(name)["t"]) - self.t0

    @property
    def maxrss_mb(self) -> float:
        return float(self.first("end")["maxrss_kb"]) / 1024

    @property
    def hwm_mb(self) -> float:
        return float(self.first("end")["hwm_kb"]) / 1024

    def timed(self, start: float = 0.0, end: float = float("inf")) -> dict[str, list[float]]:
        """Durations (ms) of the timed calls that ended between two times."""
        out: dict[str, list[float]] = {}
        for r in self.events("timed"):
            if start <= float(r["t"]) <= end:
                out.setdefault(str(r["what"]), []).append(float(r["ms"]))
        return out

    @property
    def wait4_mb(self) -> float:
        return self.rusage.ru_maxrss / 1024 if self.rusage else float("nan")


@dataclass(slots=True)
class Home:
    """A fresh home under the work directory with a copy of the dataset's journals."""

    root: Path

    @classmethod
    def copy(cls, journals: Path, work: Path) -> Home:
        root = Path(tempfile.mkdtemp(prefix="tui-home-", dir=work))
        started = time.perf_counter()
        shutil.copytree(journals, root / "journals")
        log(f"copied the journals to {root} in {time.perf_counter() - started:.1f} s")
        return cls(root)

    def ingest(self) -> tuple[int, float]:
        """Ingest every journal (in a helper process); returns the events and the helper's peak RSS."""
        child = Child("ingest", self.root)
        child.finish()
        events = int(child.first("ingested")["events"])
        seconds = float(child.first("end")["t"]) - child.t0
        log(f"ingested {events:,} events into {self.root}/ledger.duckdb in {seconds:.1f} s (helper process)")
        return events, child.hwm_mb

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def timed_command(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - started


@dataclass(slots=True)
class Baselines:
    bare: list[float] = field(default_factory=list)
    textual: list[float] = field(default_factory=list)
    tui: list[float] = field(default_factory=list)


def bench_baselines(cfg: Config) -> Baselines:
    b = Baselines()
    timed_command("import tui.app")  # warm-up: bytecode and page cache
    for _ in range(cfg.baseline_runs):
        b.bare.append(timed_command("pass"))
        b.textual.append(timed_command("import textual.app"))
        b.tui.append(timed_command("import tui.app"))
    bare, textual, tui = (statistics.median(x) * 1000 for x in (b.bare, b.textual, b.tui))
    log(f"baselines: python -c pass {bare:.0f} ms, import textual.app {textual:.0f} ms, tui.app {tui:.0f} ms")
    return b


@dataclass(frozen=True, slots=True)
class Memory:
    """A child's peak RSS, three ways (MB): its VmHWM, its ru_maxrss, and os.wait4's ru_maxrss."""

    hwm: float
    maxrss: float
    wait4: float

    @classmethod
    def of(cls, child: Child) -> Memory:
        return cls(child.hwm_mb, child.maxrss_mb, child.wait4_mb)

    def __str__(self) -> str:
        return f"{self.hwm:.0f} MB (ru_maxrss {self.maxrss:.0f}, wait4 {self.wait4:.0f})"


@dataclass(slots=True)
class StartupRun:
    ready_s: float  # Popen -> the full table painted
    first_s: float  # Popen -> the first screen painted (the latest sessions and the fleet totals)
    imported_s: float  # Popen -> import tui.app done
    loaded_s: float  # Popen -> the first Loaded handled (before RalphApp's handler applies it)
    timed: dict[str, list[float]]  # calls that ended before the table was painted
    render: dict[str, Any]
    memory: Memory


def bench_startup(cfg: Config, home: Home) -> list[StartupRun]:
    runs = []
    for k in range(cfg.startup_runs):
        child = Child("startup", home.root, "--expect", str(cfg.sessions))
        child.finish()
        run = StartupRun(
            ready_s=child.since_spawn("all_rows"),
            first_s=child.since_spawn("first_screen"),
            imported_s=child.since_spawn("imported"),
            loaded_s=child.since_spawn("loaded_handled"),
            timed=child.timed(end=float(child.first("all_rows")["t"])),
            render=child.first("render"),
            memory=Memory.of(child),
        )
        log(
            f"start-up (ingested) run {k + 1}: first screen {run.first_s:.2f} s, table of "
            f"{run.render['row_count']:,} rows on screen {run.ready_s:.2f} s after spawn (imports done "
            f"{run.imported_s:.2f} s, "
            f"Loaded handled {run.loaded_s:.2f} s); peak RSS {run.memory}"
        )
        runs.append(run)
    return runs


@dataclass(frozen=True, slots=True)
class CliIngest:
    """One ``ralph-ledger ingest`` of a fresh home: Popen -> exit, the seconds it reported itself, the
    events, its peak RSS."""

    seconds: float
    reported_s: float
    events: int
    maxrss_mb: float


def cli_ingest(home: Home) -> CliIngest:
    """Run ``ralph-ledger --home HOME ingest`` (the installed script beside this interpreter, else
    ``python -m ledger.cli``) and time it from ``Popen`` to its exit (``os.wait4``: its rusage)."""
    script = Path(sys.executable).with_name("ralph-ledger")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "ledger.cli"]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.time()
        proc = subprocess.Popen([*cmd, "--home", str(home.root), "ingest"], stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.time() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, errors = out.read().decode(), err.read().decode()
    if proc.returncode != 0:
        raise RuntimeError(f"ralph-ledger ingest failed: {errors[-2000:]}")
    # "ingest: N events from J journals in S s (R events/s); B bad lines"
    words = text.split()
    events, reported = int(words[1]), float(words[words.index("in") + 1])
    return CliIngest(seconds, reported, events, usage.ru_maxrss / 1024)


@dataclass(slots=True)
class BacklogRun:
    first_frame_s: float
    opened_s: float
    loaded_s: float  # Popen -> LoadDone painted
    rows: int
    batches: int
    lag_ms: list[float]
    ping_ms: list[float]
    timed: dict[str, list[float]]
    memory: Memory
    cli: CliIngest


def bench_cli_ingest(cfg: Config, journals: Path) -> CliIngest:
    home = Home.copy(journals, cfg.out)
    try:
        cli = cli_ingest(home)
    finally:
        home.remove()
    if cli.events != cfg.total_events:
        raise SystemExit(f"ralph-ledger ingest stored {cli.events:,} events, expected {cfg.total_events:,}")
    log(
        f"ralph-ledger ingest: {cli.seconds:.2f} s from spawn to exit ({cli.reported_s:.2f} s reported, "
        f"{cli.events / cli.seconds:,.0f} events/s whole process)"
    )
    return cli


def bench_backlog(cfg: Config, journals: Path) -> list[BacklogRun]:
    runs = []
    for k in range(cfg.backlog_runs):
        cli = bench_cli_ingest(cfg, journals) if k % 2 == 0 else None  # the pair's order alternates
        home = Home.copy(journals, cfg.out)
        try:
            child = Child("backlog", home.root, "--expect", str(cfg.sessions))
            child.finish()
        finally:
            home.remove()
        if cli is None:
            cli = bench_cli_ingest(cfg, journals)
        probes = child.first("probes")
        done = child.first("load_done")
        run = BacklogRun(
            first_frame_s=child.since_spawn("first_frame"),
            opened_s=child.since_spawn("opened"),
            loaded_s=child.since_spawn("load_done"),
            rows=int(done["rows"]),
            batches=int(done["batches"]),
            lag_ms=[float(x) for x in probes["lag_ms"]],
            ping_ms=[float(x) for x in probes["ping_ms"]],
            timed=child.timed(end=float(done["t"])),
            memory=Memory.of(child),
            cli=cli,
        )
        log(
            f"backlog run {k + 1}: progress bar on screen {run.opened_s:.2f} s after spawn, "
            f"{run.rows:,} rows loaded at {run.loaded_s:.1f} s ({run.batches} batches); key -> action "
            f"p50 {statistics.median(run.ping_ms):.0f} ms max {max(run.ping_ms):.0f} ms "
            f"({len(run.ping_ms)} presses); loop lag max {max(run.lag_ms):.0f} ms; peak RSS {run.memory}"
        )
        runs.append(run)
    return runs


@dataclass(slots=True)
class LiveRun:
    latency_ms: list[float] = field(default_factory=list)  # append returned -> repainted
    notice_ms: list[float] = field(default_factory=list)  # append returned -> the watcher marked the file
    posted_ms: list[float] = field(default_factory=list)  # append returned -> Refreshed posted (worker)
    handled_ms: list[float] = field(default_factory=list)  # append returned -> Refreshed handled
    paint_ms: list[float] = field(default_factory=list)  # Refreshed handled -> repainted
    missing: int = 0
    timed: dict[str, list[float]] = field(default_factory=dict)
    catch_up_s: float = 0.0
    memory: Memory | None = None
    spaced_ms: list[float] = field(default_factory=list)  # the same, for appends 300-400 ms apart


def parse_ts(text: str) -> datetime:
    return datetime.fromisoformat(text)


def match_appends(appends: list[dict[str, Any]], child: Child) -> LiveRun:
    """Each append's first repaint showing a row of its session at least as recent as the event."""
    shown: dict[str, list[tuple[datetime, float, float]]] = {}
    for r in child.events("shown"):
        for sid, updated in r["rows"]:
            if updated:
                shown.setdefault(sid, []).append((parse_ts(updated), float(r["handled"]), float(r["t"])))
    dirty: dict[str, list[float]] = {}
    for r in child.events("dirty"):
        for name in r["files"]:
            dirty.setdefault(name, []).append(float(r["t"]))
    posted: dict[str, list[float]] = {}
    for r in child.events("posted"):
        for sid in r["sessions"]:
            posted.setdefault(sid, []).append(float(r["t"]))
    run = LiveRun()
    for a in appends:
        sid, ts, t, started = a["sid"], parse_ts(a["ts"]), float(a["t"]), float(a["started"])
        hits = [(h, p) for updated, h, p in shown.get(sid, []) if updated >= ts]
        if not hits:
            run.missing += 1
            continue
        handled, painted = min(hits, key=lambda x: x[1])
        run.latency_ms.append((painted - t) * 1000)
        run.handled_ms.append((handled - t) * 1000)
        run.paint_ms.append((painted - handled) * 1000)
        noticed = [d for d in dirty.get(f"{sid}.jsonl", []) if d >= started]
        if noticed:
            run.notice_ms.append((min(noticed) - t) * 1000)
        sent = [p for p in posted.get(sid, []) if started <= p <= handled]
        if sent:
            run.posted_ms.append((max(sent) - t) * 1000)
    return run


def bench_live(cfg: Config, home: Home) -> LiveRun:
    child = Child("live", home.root, "--expect", str(cfg.sessions), stdin=True)
    try:
        live = child.wait_for("live")
        catch_up = float(live["t"]) - float(child.first("watching")["t"])
        log(f"live {float(live['t']) - child.t0:.1f} s after spawn (catch-up refresh {catch_up:.1f} s)")
        appender = Child("append", home.root, "--appends", str(cfg.appends), "--seed", str(cfg.seed))
        appender.finish()
        appends = appender.events("append")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and match_appends(appends, child).missing:
            time.sleep(0.1)
        spaced_gap = ",".join(f"{g:g}" for g in SPACED_GAP_S)
        spacer = Child(
            "append",
            home.root,
            "--appends",
            str(max(5, cfg.appends // 4)),
            "--seed",
            str(cfg.seed + 1),
            "--gap",
            spaced_gap,
        )
        spacer.finish()
        spaced = spacer.events("append")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and match_appends(spaced, child).missing:
            time.sleep(0.1)
        time.sleep(0.5)
        child.send("quit\n")
        child.finish()
    finally:
        child.kill()
    run = match_appends(appends, child)
    run.spaced_ms = match_appends(spaced, child).latency_ms
    run.catch_up_s = catch_up
    run.timed = child.timed(start=float(live["t"]))
    run.memory = Memory.of(child)
    if run.latency_ms:
        log(
            f"append -> on screen over {len(run.latency_ms)} appends: p50 "
            f"{statistics.median(run.latency_ms):.0f} ms, p95 {percentile(run.latency_ms, 95):.0f} ms, "
            f"max {max(run.latency_ms):.0f} ms ({run.missing} never shown); peak RSS {run.memory}"
        )
    return run


# -- report --------------------------------------------------------------------------------------


@dataclass(slots=True)
class Row:
    metric: str
    value: str
    target: str = ""
    result: str = ""
    vs_pass: str = ""
    vs_textual: str = ""


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def fmt_s(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds < 100 else f"{seconds:.0f} s"


def fmt_ms(ms: float) -> str:
    return f"{ms:,.0f} ms" if ms >= 10 else f"{ms:.1f} ms"


def render(rows: list[Row]) -> str:
    header = Row("metric", "value", "target", "result", "/ python -c pass", "/ import textual.app")
    cells = [[r.metric, r.value, r.target, r.result, r.vs_pass, r.vs_textual] for r in (header, *rows)]
    right = {1, 4, 5}
    return markdown_table(cells, right)


@dataclass(slots=True)
class Results:
    dataset: str = ""
    baselines: Baselines = field(default_factory=Baselines)
    ingest_hwm_mb: float = 0.0
    startup: list[StartupRun] = field(default_factory=list)
    backlog: list[BacklogRun] = field(default_factory=list)
    live: LiveRun | None = None


def med(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def total_s(runs: Sequence[StartupRun | BacklogRun], what: str) -> float:
    """The median over runs of the total time of one timed call (seconds)."""
    return med([sum(r.timed.get(what, [])) / 1000 for r in runs])


def startup_row(label: str, seconds: float, b: Baselines, *, target: bool = True) -> Row:
    bare, textual = med(b.bare), med(b.textual)
    return Row(
        label,
        fmt_s(seconds),
        f"<= {STARTUP_TARGET_S:g} s" if target else "",
        verdict(seconds <= STARTUP_TARGET_S) if target else "",
        f"{seconds / bare:.0f}x",
        f"{seconds / textual:.1f}x",
    )


def memory_row(label: str, memory: Memory) -> Row:
    return Row(label, str(memory), f"<= {RSS_TARGET_MB:g} MB", verdict(memory.hwm <= RSS_TARGET_MB))


def startup_rows(s: list[StartupRun], b: Baselines, n: int, m: int) -> list[Row]:
    ready, loaded = med([x.ready_s for x in s]), med([x.loaded_s for x in s])
    worker = ("Monitor.__init__", "Monitor.recent_sessions", "Monitor.fleet", "Monitor.sessions")
    return [
        startup_row(
            f"start-up, ingested ({m:,} events): spawn -> first screen: latest sessions + fleet totals "
            f"(median of {len(s)})",
            med([x.first_s for x in s]),
            b,
        ),
        startup_row(f"  spawn -> all {n:,} rows in the table", ready, b, target=False),
        Row("  spawn -> import tui.app done", fmt_s(med([x.imported_s for x in s]))),
        Row(
            "  worker: Monitor() + recent_sessions() + fleet(); every sessions() call",
            " + ".join(f"{total_s(s, w):.2f}" for w in worker[:3]) + f"; {total_s(s, worker[3]):.2f} s",
        ),
        Row("  spawn -> first Loaded handled", fmt_s(loaded)),
        Row(
            "  UI thread: SessionsScreen.apply(), every call before the full table",
            f"{total_s(s, 'SessionsScreen.apply'):.2f} s",
        ),
    ]


def backlog_rows(k: list[BacklogRun], b: Baselines, m: int) -> list[Row]:
    pings = [p for x in k for p in x.ping_ms]
    lags = [p for x in k for p in x.lag_ms]
    worst_ping = med([max(x.ping_ms) for x in k])
    loaded = med([x.loaded_s for x in k])
    cli = med([x.cli.seconds for x in k])
    applies = [max(x.timed.get("SessionsScreen.apply", [0.0])) for x in k]
    return [
        startup_row(
            f"start-up, {m:,} events to ingest: spawn -> progress bar on screen (median of {len(k)})",
            med([x.opened_s for x in k]),
            b,
        ),
        Row("  spawn -> first frame ('opening…')", fmt_s(med([x.first_frame_s for x in k]))),
        Row(
            f"  spawn -> whole backlog loaded, {min(x.rows for x in k):,} rows on screen "
            f"({k[0].batches} batches)",
            fmt_s(loaded),
            result=f"{m / loaded:,.0f} ev/s",
        ),
        Row(
            f"  ralph-ledger ingest on a copy of the same journals: spawn -> exit (median of {len(k)})",
            fmt_s(cli),
            result=f"{m / cli:,.0f} ev/s",
        ),
        Row(
            "  ralph-ledger ingest: peak RSS (wait4's ru_maxrss, max)",
            f"{max(x.cli.maxrss_mb for x in k):.0f} MB",
        ),
        Row(
            "  backlog load / ralph-ledger ingest (medians)",
            f"{loaded / cli:.2f}x",
            f"<= {BACKLOG_RATIO_TARGET:g}x",
            verdict(loaded / cli <= BACKLOG_RATIO_TARGET),
        ),
        Row(
            "  worker: Ledger.ingest() + Monitor.sessions(), all batches",
            " + ".join(f"{total_s(k, w):.1f}" for w in ("Ledger.ingest", "Monitor.sessions")) + " s",
        ),
        Row(
            "  UI thread: SessionsScreen.apply(), all batches / the longest",
            f"{total_s(k, 'SessionsScreen.apply'):.1f} s / {fmt_ms(med(applies))}",
        ),
        Row(
            f"  while loading: key press -> action ran, p50 / max ({len(pings):,} presses; "
            "max: median of the runs')",
            f"{fmt_ms(med(pings))} / {fmt_ms(worst_ping)}",
            f"max <= {RESPONSIVE_TARGET_MS:g} ms",
            verdict(worst_ping <= RESPONSIVE_TARGET_MS),
        ),
        Row(
            f"  while loading: event-loop lag (sleep({LAG_SLEEP_S:g}) overshoot), p50 / max",
            f"{fmt_ms(med(lags))} / {fmt_ms(med([max(x.lag_ms) for x in k]))}",
        ),
    ]


def live_rows(live: LiveRun, m: int) -> list[Row]:
    lat = live.latency_ms
    p50, p95 = med(lat), percentile(lat, 95)
    complete = not live.missing
    rows = [
        Row(
            f"append -> on screen, p50 ({len(lat)} appends, random sessions; app live on {m:,} events)",
            fmt_ms(p50),
            f"<= {APPEND_P50_TARGET_MS:g} ms",
            verdict(p50 <= APPEND_P50_TARGET_MS and complete),
        ),
        Row(
            "append -> on screen, p95",
            fmt_ms(p95),
            f"<= {APPEND_P95_TARGET_MS:g} ms",
            verdict(p95 <= APPEND_P95_TARGET_MS and complete),
        ),
        Row("append -> on screen, max", fmt_ms(max(lat)), result=f"{live.missing} never shown"),
    ]
    if live.spaced_ms:
        gap = f"{SPACED_GAP_S[0] * 1000:.0f}-{SPACED_GAP_S[1] * 1000:.0f} ms"
        rows.append(
            Row(
                f"  one at a time ({len(live.spaced_ms)} appends {gap} apart): p50 / p95",
                f"{fmt_ms(med(live.spaced_ms))} / {fmt_ms(percentile(live.spaced_ms, 95))}",
            )
        )
    for label, values in (
        ("append -> the watcher marks the file", live.notice_ms),
        ("append -> Refreshed posted (worker done)", live.posted_ms),
        ("append -> Refreshed handled", live.handled_ms),
        ("Refreshed handled -> repainted", live.paint_ms),
    ):
        if values:
            rows.append(Row(f"  p50: {label}", fmt_ms(med(values))))
    for what in ("Monitor.refresh", "Monitor.sessions", "SessionsScreen.apply"):
        times = live.timed.get(what)
        if times:
            rows.append(
                Row(f"  per update: {what}(), p50 / max", f"{fmt_ms(med(times))} / {fmt_ms(max(times))}")
            )
    return rows


def report_rows(r: Results, cfg: Config) -> list[Row]:
    b, n, m = r.baselines, cfg.sessions, cfg.total_events
    rows: list[Row] = []
    if r.startup:
        rows += startup_rows(r.startup, b, n, m)
    if r.backlog:
        rows += backlog_rows(r.backlog, b, m)
    if r.live is not None and r.live.latency_ms:
        rows += live_rows(r.live, m)
    if r.backlog:
        peak = max((x.memory for x in r.backlog), key=lambda x: x.hwm)
        rows.append(
            memory_row(f"peak RSS, start-up + ingesting {m:,} events (max of {len(r.backlog)})", peak)
        )
    if r.live is not None and r.live.memory is not None:
        rows.append(memory_row("peak RSS, live on the ingested home + the appends", r.live.memory))
    if r.startup:
        rs = r.startup[-1].render
        rows.append(
            Row(
                "sessions table: rows held / lines rendered by a full repaint (table height)",
                f"{rs['row_count']:,} / {rs['distinct']} ({rs['height']})",
                "all rows, visible only",
                verdict(rs["row_count"] == n and rs["distinct"] <= rs["height"]),
            )
        )
    bare, textual, tui = (med(x) for x in (b.bare, b.textual, b.tui))
    rows += [
        Row(f"baseline: python -c pass (median of {len(b.bare)})", fmt_ms(bare * 1000), vs_pass="1x"),
        Row(
            "baseline: python -c 'import textual.app'",
            fmt_ms(textual * 1000),
            vs_pass=f"{textual / bare:.0f}x",
            vs_textual="1.0x",
        ),
        Row(
            "baseline: python -c 'import tui.app'",
            fmt_ms(tui * 1000),
            vs_pass=f"{tui / bare:.0f}x",
            vs_textual=f"{tui / textual:.1f}x",
        ),
    ]
    return rows


def machine_info() -> str:
    import textual

    model = cpu_model()
    load = "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    return (
        f"machine: nproc={len(os.sched_getaffinity(0))}, {model}, {platform.system()} {platform.release()}, "
        f"{load}\nsoftware: python {platform.python_version()}, textual {textual.__version__}"
    )


def print_report(r: Results, cfg: Config) -> None:
    print(machine_info())
    print(r.dataset)
    print(
        f"app: headless ({SIZE[0]}x{SIZE[1]}), a fresh process per run; times from the parent's Popen to "
        "the child's time.time() in a call_after_refresh callback (the screen repainted)"
    )
    print()
    print(render(report_rows(r, cfg)))
    print()
    if r.live is not None:
        print(
            "live: the catch-up refresh of every journal when the watcher starts took "
            f"{r.live.catch_up_s:.1f} s (before the first append)."
        )
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        f"peak RSS = the app process's VmHWM; ru_maxrss = its getrusage(RUSAGE_SELF) (on Linux at least the "
        f"bench's own peak, which exec carries over); wait4 = the parent's view of that child. "
        f"RUSAGE_CHILDREN (largest child of this run): {children:.0f} MB, the ingest helper "
        f"{r.ingest_hwm_mb:.0f} MB."
    )


# -- main ----------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    cfg, a = parse_args(argv)
    if a.child:
        return child_main(a, cfg)
    sys.path.insert(0, str(BENCH_DIR))
    from bench_ledger import Config as DatasetConfig
    from bench_ledger import ensure_dataset, journals_size

    cfg.out.mkdir(parents=True, exist_ok=True)
    dataset, how = ensure_dataset(
        DatasetConfig(
            sessions=cfg.sessions,
            events_per_session=cfg.events_per_session,
            seed=cfg.seed,
            repeat=1,
            ingest_repeat=1,
            appends=1,
            sqlite_sample=1,
            out=cfg.out,
            quick=cfg.quick,
        )
    )
    r = Results(
        dataset=(
            f"dataset: {cfg.sessions:,} sessions x {cfg.events_per_session} events = {cfg.total_events:,} "
            f"events, {journals_size(dataset) / 1e6:,.0f} MB of journals (seed {cfg.seed}, {how}; "
            f"{dataset.root})"
        )
    )
    log(r.dataset)
    r.baselines = bench_baselines(cfg)
    ingested = Home.copy(dataset.journals, cfg.out)
    try:
        events, r.ingest_hwm_mb = ingested.ingest()
        if events != cfg.total_events:
            raise SystemExit(f"ingested {events:,} events, expected {cfg.total_events:,}")
        r.startup = bench_startup(cfg, ingested)
        r.backlog = bench_backlog(cfg, dataset.journals)
        r.live = bench_live(cfg, ingested)
    finally:
        ingested.remove()
    print_report(r, cfg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
