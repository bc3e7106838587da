"""The concurrency and load suite: many Stop hooks for many Claude Code sessions sharing one ledger
home, while a reader ingests and queries the ledger continuously.

One driver, used by ``tests/reliability/test_load.py`` (quick form, ``--long``) and ``bench/bench_load.py``
(the
same figures as a markdown table). ``run_load`` starts:

- ``procs`` worker processes (``python -m tests.load_suite worker``), each owning ``sessions``
  Claude Code sessions: one project directory per session with a ``.claude/ralph-loop.local.md``
  written by the helpers ``ralph-ledger loop start`` uses, and a transcript that grows by one turn
  (a prompt, then an assistant message with text, an Edit and token usage) before every stop. Each
  stop calls ``ledger.drivers.claude_code.stop.hook.main``, the function ``ralph-ledger hook claude-code``
  calls, with stdin and stdout replaced; every session's journal is in the one home named by ``RALPH_HOME``.
  Stops go round-robin over a worker's sessions, ``stops`` per session; the last one ends the loop,
  with the completion promise (even sessions) or at ``max_iterations`` (odd ones).
- a reader process (``python -m tests.load_suite reader``) that, until told to stop, either opens
  the ledger file, ingests, queries the ``sessions`` view, a detector and the seqs, and closes it
  (``ledger``), or keeps a ``ledger.monitor.Monitor`` open (it then holds the DuckDB file for the
  whole run) and refreshes and queries it (``monitor``); it records every error.
- meanwhile, from threads of the driver: real ``ralph-ledger hook claude-code`` processes for
  sessions of their own (started with a real ``ralph-ledger loop start``), timed whole; and
  ``ralph-ledger sessions --json`` processes, a second reader wanting the same DuckDB file.

Then every journal and the ingested ledger are checked: seqs 1..n without gap or repeat, each stop's
events in order with its own turn, each hook answer and exit code, nothing unexpected on stderr.
"""

from __future__ import annotations

import io
import itertools
import math
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Literal, NamedTuple

import msgspec

from ledger import events as ev
from ledger.core.home import Home
from ledger.storage.journal import Cursor, journal_path, read_new

ROOT: Final = Path(__file__).resolve().parent.parent
PROMPT: Final = "Make the failing tests pass"
PROMISE: Final = "DONE"
INPUT_TOKENS: Final = 100
OUTPUT_TOKENS: Final = 10
FILES: Final = ("src/app.py", "src/db.py", "tests/test_app.py")
MAX_PROBLEMS: Final = 50
READER_WAIT_S: Final = 10.0
FALLBACK_LINE: Final = re.compile(r"^ralph-ledger: ledger .+ is in use by .+; reading the journals instead$")
SEQ_CHECK_SQL: Final = (
    "SELECT session_id, count(*) AS n, count(DISTINCT seq) AS distinct_seqs, min(seq) AS lo, "
    "max(seq) AS hi FROM events GROUP BY session_id "
    "HAVING count(*) != count(DISTINCT seq) OR min(seq) != 1 OR max(seq) != count(*)"
)
DETECTOR_SQL: Final = "SELECT count(*) FROM thrashing(min_iterations := 3)"
SESSIONS_SQL: Final = "SELECT count(*), count(*) FILTER (WHERE status = 'running') FROM sessions"

ReaderMode = Literal["ledger", "monitor"]
Ending = Literal["promise", "max"]


class LoadParams(msgspec.Struct, frozen=True, kw_only=True):
    """The shape of one run: worker processes x sessions each x stops per session, real hook
    processes (``real_sessions`` x ``real_stops``), ``ralph-ledger sessions`` runs, the reader."""

    procs: int
    sessions: int
    stops: int
    real_sessions: int
    real_stops: int
    cli_reads: int
    reader: ReaderMode = "ledger"

    @property
    def total_stops(self) -> int:
        """Stops driven in-process."""
        return self.procs * self.sessions * self.stops


QUICK: Final = LoadParams(procs=4, sessions=5, stops=30, real_sessions=2, real_stops=4, cli_reads=2)
LONG: Final = LoadParams(procs=16, sessions=20, stops=100, real_sessions=4, real_stops=10, cli_reads=8)


# --------------------------------------------------------------------------- one session


def claude_session(worker: int, index: int) -> str:
    """The Claude Code session id of a worker's ``index``-th session (``worker`` -1: real hooks)."""
    return f"real-{index:02d}" if worker < 0 else f"w{worker:02d}-s{index:02d}"


def ending_of(index: int) -> Ending:
    """How a session's loop ends: with the completion promise (even ``index``) or at its limit."""
    return "promise" if index % 2 == 0 else "max"


def loop_words(ending: Ending, stops: int) -> list[str]:
    """``loop start`` words for a loop that ends after ``stops`` stops."""
    limit = ["--max-iterations", "0"] if ending == "promise" else ["--max-iterations", str(stops)]
    return [PROMPT, *limit, "--completion-promise", PROMISE]


def turn_text(session: str, k: int, stops: int, ending: Ending) -> str:
    """What the agent says at stop ``k``: the promise at the last stop of a promise-ending loop."""
    if k == stops and ending == "promise":
        return f"Stop {k} of {session}: all tests pass. <promise>{PROMISE}</promise>"
    return f"Stop {k} of {session}: tests still failing."


def add_turn(transcript: Path, session: str, k: int, text: str) -> None:
    """Append one turn as Claude Code writes it: the prompt, then the answer with an Edit."""
    lines = [
        {"type": "user", "sessionId": session, "message": {"role": "user", "content": f"{PROMPT} ({k})"}},
        {
            "type": "assistant",
            "sessionId": session,
            "message": {
                "id": f"msg-{session}-{k}",
                "role": "assistant",
                "content": [
                    {"type": "text", "text": text},
                    {"type": "tool_use", "name": "Edit", "input": {"file_path": FILES[k % len(FILES)]}},
                ],
                "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS},
                "stop_reason": "end_turn",
            },
        },
    ]
    with transcript.open("ab") as f:
        f.write(b"".join(msgspec.json.encode(line) + b"\n" for line in lines))


def stop_input(project: Path, transcript: Path, session: str) -> bytes:
    """The Stop hook's stdin for one stop of ``session``."""
    return msgspec.json.encode(
        {
            "session_id": session,
            "transcript_path": str(transcript),
            "cwd": str(project),
            "hook_event_name": "Stop",
            "stop_hook_active": True,
        }
    )


def check_answer(stdout: str, stderr: str, code: int, k: int, stops: int, ending: Ending) -> str:
    """What is wrong with the hook's answer to stop ``k`` of ``stops`` ("" when it is right)."""
    if code != 0:
        return f"exit code {code}"
    if stderr:
        return f"stderr {stderr[:200]!r}"
    if k < stops:
        try:
            block = msgspec.json.decode(stdout)
        except msgspec.DecodeError:
            return f"stdout is not the block JSON: {stdout[:200]!r}"
        want = f"🔄 Ralph iteration {k + 1} |"
        if not isinstance(block, dict) or block.get("decision") != "block" or block.get("reason") != PROMPT:
            return f"stdout does not block with the prompt: {stdout[:200]!r}"
        if not str(block.get("systemMessage", "")).startswith(want):
            return f"system message does not start with {want!r}: {stdout[:200]!r}"
        return ""
    if ending == "promise":
        want = f"✅ Ralph loop: Detected <promise>{PROMISE}</promise>\n"
    else:
        want = f"🛑 Ralph loop: Max iterations ({stops}) reached.\n"
    return "" if stdout == want else f"last stop printed {stdout[:200]!r}, expected {want!r}"


def expected_tags(k: int, stops: int, ending: Ending) -> list[str]:
    """The event tags stop ``k`` appends, in order."""
    tags = ["session_started", "iteration_started"] if k == 1 else []
    tags.append("agent_turn")
    if k < stops:
        return [*tags, "stop_decided", "iteration_started"]
    if ending == "promise":
        return [*tags, "promise_detected", "stop_decided", "session_completed"]
    return [*tags, "stop_decided", "guard_tripped", "session_escalated"]


def tag(e: ev.Event) -> str:
    """An event's permanent tag."""
    return str(type(e).__struct_config__.tag)


def seq_faults(seqs: Sequence[int]) -> tuple[int, int]:
    """(missing seqs in 1..max, repeated seqs) of one session."""
    distinct = set(seqs)
    valid = {s for s in distinct if s >= 1}
    return max(valid, default=0) - len(valid), len(seqs) - len(distinct)


def check_journal(events: Sequence[ev.AnyEvent], session: str, stops: int, ending: Ending) -> str:
    """What is wrong with one session's journal ("" when each stop's events are there, in order)."""
    want = [t for k in range(1, stops + 1) for t in expected_tags(k, stops, ending)]
    got = [tag(e) for e in events]
    if got != want:
        first = next(
            (i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), min(len(got), len(want))
        )
        return f"{len(got)} events, expected {len(want)}; first difference at event {first + 1}"
    if [e.seq for e in events] != list(range(1, len(events) + 1)):
        return "seqs are not 1..n"
    turns = [e for e in events if isinstance(e, ev.AgentTurn)]
    for k, t in enumerate(turns, 1):
        if t.iteration != k or t.output_excerpt != turn_text(session, k, stops, ending):
            return f"stop {k}: agent_turn has iteration {t.iteration} and text {t.output_excerpt[:80]!r}"
        if t.files_modified != [FILES[k % len(FILES)]] or t.tokens.input != INPUT_TOKENS:
            return f"stop {k}: agent_turn has files {t.files_modified} and tokens {t.tokens}"
    if any(b.transcript_offset <= a.transcript_offset for a, b in itertools.pairwise(turns)):
        return "transcript offsets do not grow from stop to stop"
    decided = [e.decision for e in events if isinstance(e, ev.StopDecided)]
    if decided != ["block"] * (stops - 1) + ["allow"]:
        return f"stop decisions {decided[:5]}..., expected {stops - 1} blocks then allow"
    return ""


# --------------------------------------------------------------------------- worker process


class WorkerResult(msgspec.Struct, kw_only=True):
    """What one worker did: per-stop latencies (ms), when it ran (``time.monotonic``), problems."""

    index: int
    latencies_ms: list[float]
    started: float
    finished: float
    problems: list[str]


class Session(NamedTuple):
    """One Claude Code session of the run: its id, how its loop ends, its stops, where it lives."""

    name: str
    ending: Ending
    stops: int
    project: Path

    @property
    def transcript(self) -> Path:
        """The session's transcript, grown by one turn before each stop."""
        return self.project / "transcript.jsonl"

    def next_turn(self, k: int) -> bytes:
        """Append the turn of stop ``k`` to the transcript; the hook's stdin for that stop."""
        add_turn(self.transcript, self.name, k, turn_text(self.name, k, self.stops, self.ending))
        return stop_input(self.project, self.transcript, self.name)


def plugin_session(projects: Path, name: str, ending: Ending, stops: int) -> Session:
    """A project with a ``ralph-loop`` state file, written as ``ralph-ledger loop start`` writes it."""
    from ledger.drivers.claude_code.stop.locate import STATE_FILE
    from ledger.drivers.claude_code.stop.plugin import new_state, parse_loop_args, write_state

    project = projects / name
    project.mkdir(parents=True)
    write_state(project / STATE_FILE, new_state(parse_loop_args(loop_words(ending, stops))))
    return Session(name, ending, stops, project)


def stop_in_process(session: Session, k: int) -> tuple[float, str]:
    """Stop ``k`` through ``ledger.drivers.claude_code.stop.hook.main`` (stdin and stdout replaced): its
    latency (ms) and what was wrong with its answer ("" when right). ``RALPH_HOME`` names the home."""
    from ledger.drivers.claude_code.stop.hook import main as hook_main

    raw = session.next_turn(k)
    out, err = io.StringIO(), io.StringIO()
    t = time.perf_counter()
    code = hook_main(io.BytesIO(raw), out, err)
    ms = (time.perf_counter() - t) * 1000
    return ms, check_answer(out.getvalue(), err.getvalue(), code, k, session.stops, session.ending)


def worker(argv: Sequence[str]) -> int:
    """``python -m tests.load_suite worker PROJECTS INDEX SESSIONS STOPS`` (``RALPH_HOME`` set):
    set up the sessions, print ``ready``, wait for a line on stdin, drive every stop, print the
    ``WorkerResult`` as JSON."""
    from ledger.drivers.claude_code.stop.locate import STATE_FILE

    projects, index, sessions, stops = Path(argv[0]), int(argv[1]), int(argv[2]), int(argv[3])
    owned = [plugin_session(projects, claude_session(index, s), ending_of(s), stops) for s in range(sessions)]
    print("ready", flush=True)
    sys.stdin.readline()
    latencies: list[float] = []
    problems: list[str] = []
    started = time.monotonic()
    for k in range(1, stops + 1):
        for session in owned:
            ms, problem = stop_in_process(session, k)
            latencies.append(ms)
            if problem and len(problems) < MAX_PROBLEMS:
                problems.append(f"{session.name} stop {k}: {problem}")
    finished = time.monotonic()
    for session in owned:
        if (session.project / STATE_FILE).exists():
            problems.append(f"{session.name}: the loop state file is still there after the last stop")
    result = WorkerResult(
        index=index, latencies_ms=latencies, started=started, finished=finished, problems=problems
    )
    sys.stdout.write(msgspec.json.encode(result).decode() + "\n")
    return 0


# --------------------------------------------------------------------------- reader process


class ReaderResult(msgspec.Struct, kw_only=True):
    """What the reader did: each round that ingested (start and end, ``time.monotonic``, and the
    events it found), events ingested, bad lines, sessions seen with a gap or repeat in the ledger
    mid-run, errors (lock errors counted apart), and whether the monitor had to read the journals
    into memory instead of the file."""

    mode: str
    rounds: list[tuple[float, float, int]] = msgspec.field(default_factory=list)
    events: int = 0
    bad_lines: list[str] = msgspec.field(default_factory=list)
    seq_faults: list[str] = msgspec.field(default_factory=list)
    errors: list[str] = msgspec.field(default_factory=list)
    lock_errors: int = 0
    in_memory: bool = False

    @property
    def ingests(self) -> int:
        """Rounds that ingested and queried without an error."""
        return len(self.rounds)


def _is_lock_error(exc: BaseException) -> bool:
    from ledger.core.errors import LedgerLocked

    return isinstance(exc, LedgerLocked) or "could not set lock" in str(exc).lower()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"[:300]


def reader(argv: Sequence[str]) -> int:
    """``python -m tests.load_suite reader HOME MODE STOP_FILE``: ingest and query until
    ``STOP_FILE`` exists, then once more; print ``ready`` after the first round and the
    ``ReaderResult`` as JSON at the end."""
    home, mode, stop_file = Home.resolve(argv[0]), argv[1], Path(argv[2])
    result = ReaderResult(mode=mode)
    round_ = _monitor_round(home, result) if mode == "monitor" else _ledger_round(home, result)
    ready = False
    while True:
        last = stop_file.exists()
        try:
            round_()
        except Exception as exc:  # recorded and reported: the suite fails on any
            result.lock_errors += _is_lock_error(exc)
            if len(result.errors) < MAX_PROBLEMS:
                result.errors.append(_first_line(exc))
            time.sleep(0.05)
        if not ready:
            print("ready", flush=True)
            ready = True
        if last:
            break
    sys.stdout.write(msgspec.json.encode(result).decode() + "\n")
    return 0


def _record(
    result: ReaderResult, start: float, events: int, bad: Sequence[str], faults: Sequence[tuple[Any, ...]]
) -> None:
    result.rounds.append((start, time.monotonic(), events))
    result.events += events
    result.bad_lines.extend(list(bad)[: MAX_PROBLEMS - len(result.bad_lines)])
    for row in faults[: MAX_PROBLEMS - len(result.seq_faults)]:
        result.seq_faults.append(f"ingest {result.ingests}: {row}")


def _ledger_round(home: Home, result: ReaderResult) -> Callable[[], None]:
    from ledger.storage.database import Ledger

    def round_() -> None:
        start = time.monotonic()
        with Ledger.open(home, wait=READER_WAIT_S) as led:
            report = led.ingest()
            led.con.execute(SESSIONS_SQL).fetchall()
            led.con.execute(DETECTOR_SQL).fetchall()
            faults = led.con.execute(SEQ_CHECK_SQL).fetchall()
        _record(result, start, report.events, [str(b) for b in report.bad_lines], faults)

    return round_


def _monitor_round(home: Home, result: ReaderResult) -> Callable[[], None]:
    from ledger.monitor import Monitor

    monitor = Monitor([home.root])
    result.in_memory = monitor.ledger.path is None

    def round_() -> None:
        start = time.monotonic()
        update = monitor.refresh()
        monitor.sessions()
        monitor.fleet()
        monitor.query(DETECTOR_SQL)
        faults = monitor.query(SEQ_CHECK_SQL).rows
        _record(result, start, update.events, update.bad_lines, faults)

    return round_


# --------------------------------------------------------------------------- the driver


class Timed(msgspec.Struct, kw_only=True):
    """Whole-process runs from a driver thread: wall times (ms), problems, fallbacks to memory,
    when each ended (``time.monotonic``)."""

    latencies_ms: list[float] = msgspec.field(default_factory=list)
    problems: list[str] = msgspec.field(default_factory=list)
    fallbacks: int = 0
    ended: list[float] = msgspec.field(default_factory=list)


class LoadReport(msgspec.Struct, kw_only=True):
    """Everything one run measured and found. ``load`` is when the in-process stops ran and
    ``appending_until`` when the last hook (in-process or real) ended (``time.monotonic``)."""

    params: LoadParams
    load: tuple[float, float]
    appending_until: float
    seconds: float
    hook_ms: list[float]
    real_ms: list[float]
    real_under_load: int
    cli_reads: int
    cli_fallbacks: int
    reader: ReaderResult
    sessions: int
    events: int
    journal_gaps: int
    journal_duplicates: int
    ledger_gaps: int
    ledger_duplicates: int
    problems: list[str]

    @property
    def stops(self) -> int:
        """In-process stops driven."""
        return len(self.hook_ms)

    @property
    def rate(self) -> float:
        """In-process stops per second, over the wall time of the load."""
        return self.stops / self.seconds if self.seconds else 0.0

    @property
    def gaps(self) -> int:
        """Missing seqs, journals and ledger together."""
        return self.journal_gaps + self.ledger_gaps

    @property
    def duplicates(self) -> int:
        """Repeated seqs, journals and ledger together."""
        return self.journal_duplicates + self.ledger_duplicates

    @property
    def live_ingests(self) -> int:
        """The reader's ingests that found new events while hooks (in-process or real) appended."""
        start, end = self.load[0], self.appending_until
        return sum(1 for a, b, n in self.reader.rounds if n and a < end and b > start)

    @property
    def reader_errors(self) -> int:
        """Errors the reader met (lock errors included)."""
        return len(self.reader.errors)

    def summary(self) -> str:
        """The suite's one-line result."""
        p, hook, real = self.params, self.hook_ms, self.real_ms
        return (
            f"load suite: {p.procs} procs x {p.sessions} sessions x {p.stops} stops = {self.stops:,} stops "
            f"in {self.seconds:.1f} s ({self.rate:,.0f} stops/s), hook p50 {percentile(hook, 50):.1f} ms "
            f"p99 {percentile(hook, 99):.1f} ms in-process; {len(real)} real hook processes "
            f"p50 {percentile(real, 50):.0f} ms p99 {percentile(real, 99):.0f} ms; "
            f"reader ({self.reader.mode}): {self.reader.ingests} ingests ({self.live_ingests} while hooks "
            f"appended), {self.reader_errors} errors; "
            f"{self.gaps} gaps, {self.duplicates} duplicates"
        )

    def table(self) -> str:
        """The figures as a markdown table."""
        p = self.params
        rows = [
            ("parameters", f"{p.procs} processes x {p.sessions} sessions x {p.stops} stops, one ledger home"),
            ("stops (in-process hook calls)", f"{self.stops:,} in {self.seconds:.1f} s"),
            ("throughput", f"{self.rate:,.0f} stops/s"),
            (
                "hook latency in-process, p50 / p99",
                f"{percentile(self.hook_ms, 50):.1f} / {percentile(self.hook_ms, 99):.1f} ms",
            ),
            (
                f"real `ralph-ledger hook claude-code` processes: {len(self.real_ms)} "
                f"({self.real_under_load} ended during the load), p50 / p99",
                f"{percentile(self.real_ms, 50):.0f} / {percentile(self.real_ms, 99):.0f} ms",
            ),
            (
                f"reader ({self.reader.mode}): ingests (while hooks appended, with new events) / events",
                f"{self.reader.ingests} ({self.live_ingests}) / {self.reader.events:,}",
            ),
            ("reader errors (lock errors)", f"{self.reader_errors} ({self.reader.lock_errors})"),
            (
                "`ralph-ledger sessions` during the load (fell back to the journals)",
                f"{self.cli_reads} ({self.cli_fallbacks})",
            ),
            ("sessions / events checked", f"{self.sessions:,} / {self.events:,}"),
            ("seq gaps / duplicates: journals", f"{self.journal_gaps} / {self.journal_duplicates}"),
            ("seq gaps / duplicates: ledger", f"{self.ledger_gaps} / {self.ledger_duplicates}"),
            ("other problems", str(len(self.problems))),
        ]
        lines = ["| measurement | value |", "| --- | ---: |"]
        return "\n".join([*lines, *(f"| {a} | {b} |" for a, b in rows)])


def percentile(values: Sequence[float], pct: float) -> float:
    """The nearest-rank percentile (0.0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


def _ralph() -> list[str]:
    script = Path(sys.executable).parent / "ralph-ledger"
    return [str(script)] if script.exists() else [sys.executable, "-m", "ledger.cli"]


def _env(home: Home) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CLAUDE_CODE_SESSION_ID"}
    return {**env, "RALPH_HOME": str(home.root)}


def _spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.load_suite", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _await_ready(proc: subprocess.Popen[str], what: str) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "ready":
        _, err = proc.communicate(timeout=60)
        raise RuntimeError(f"{what} did not start: {line!r} {err[-2000:]}")


def _finish(proc: subprocess.Popen[str], what: str, timeout: float) -> tuple[str, list[str]]:
    """The process's last stdout line and problems (exit code, anything on stderr); raises
    ``RuntimeError`` when it printed no result."""
    out, err = proc.communicate(timeout=timeout)
    problems = [f"{what}: exit code {proc.returncode}"] if proc.returncode else []
    problems += [f"{what} stderr: {line}" for line in err.splitlines()[:10]]
    lines = out.strip().splitlines()
    if not lines or not lines[-1].startswith("{"):
        raise RuntimeError(f"{what} printed no result: {problems or out[-500:]}")
    return lines[-1], problems


def _real_setup(params: LoadParams, projects: Path, home: Home, out: Timed) -> list[Session]:
    """The real-process sessions, each started by a real ``ralph-ledger loop start``."""
    sessions = []
    for r in range(params.real_sessions):
        session = Session(
            claude_session(-1, r), ending_of(r), params.real_stops, projects / claude_session(-1, r)
        )
        session.project.mkdir(parents=True)
        started = subprocess.run(
            [*_ralph(), "loop", "start", "--mode", "plugin", *loop_words(session.ending, session.stops)],
            cwd=session.project,
            env=_env(home),
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if started.returncode or started.stderr:
            out.problems.append(
                f"{session.name}: loop start failed: {started.returncode} {started.stderr[:300]!r}"
            )
        sessions.append(session)
    return sessions


def _real_hooks(params: LoadParams, sessions: list[Session], home: Home, out: Timed) -> None:
    """Drive the real-process sessions, each stop a fresh ``ralph-ledger hook claude-code``."""
    env = _env(home)
    for k in range(1, params.real_stops + 1):
        for session in sessions:
            raw = session.next_turn(k)
            t = time.perf_counter()
            proc = subprocess.run(
                [*_ralph(), "hook", "claude-code"],
                input=raw,
                cwd=session.project,
                env=env,
                capture_output=True,
                check=False,
                timeout=120,
            )
            out.latencies_ms.append((time.perf_counter() - t) * 1000)
            out.ended.append(time.monotonic())
            problem = check_answer(
                proc.stdout.decode(), proc.stderr.decode(), proc.returncode, k, session.stops, session.ending
            )
            if problem:
                out.problems.append(f"{session.name} stop {k} (real process): {problem}")


def _cli_reads(params: LoadParams, home: Home, out: Timed, done: threading.Event) -> None:
    """``ralph-ledger sessions --json`` now and then while the load runs: a second reader of the
    DuckDB file, which must answer (falling back to the journals when the file is held)."""
    for i in range(params.cli_reads):
        if i:
            done.wait(timeout=0.5)  # once the load is over, the remaining reads run at once
        t = time.perf_counter()
        proc = subprocess.run(
            [*_ralph(), "--home", str(home.root), "sessions", "--json"],
            env=_env(home),
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        out.latencies_ms.append((time.perf_counter() - t) * 1000)
        lines = proc.stderr.splitlines()
        out.fallbacks += any(FALLBACK_LINE.match(line) for line in lines)
        unexpected = [line for line in lines if not FALLBACK_LINE.match(line)]
        if proc.returncode or unexpected:
            out.problems.append(
                f"ralph-ledger sessions: exit code {proc.returncode}, stderr {unexpected[:3]}"
            )
            continue
        try:
            rows = msgspec.json.decode(proc.stdout)
        except msgspec.DecodeError:
            out.problems.append(f"ralph-ledger sessions: not JSON: {proc.stdout[:200]!r}")
            continue
        if not isinstance(rows, list) or any(not isinstance(r, dict) or "session_id" not in r for r in rows):
            out.problems.append(f"ralph-ledger sessions: unexpected answer {proc.stdout[:200]!r}")


def _guarded(out: Timed, fn: Callable[..., None], *args: Any) -> Callable[[], None]:
    """``fn(*args)`` for a thread, any exception it raises recorded as a problem in ``out``."""

    def target() -> None:
        try:
            fn(*args)
        except Exception as exc:
            out.problems.append(f"{fn.__name__}: {_first_line(exc)}")

    return target


def run_load(params: LoadParams, root: Path, log: Callable[[str], None] | None = None) -> LoadReport:
    """Run the load in ``root`` (the home is ``root/home``, the projects ``root/projects``)."""
    say = log or (lambda _: None)
    home = Home.resolve(root / "home")
    home.ensure()
    projects = root / "projects"
    projects.mkdir(parents=True, exist_ok=True)
    stop_file = root / "reader.stop"
    env = _env(home)
    say(f"starting {params.procs} workers and the {params.reader} reader")
    workers = [
        _spawn(["worker", str(projects), str(i), str(params.sessions), str(params.stops)], env)
        for i in range(params.procs)
    ]
    read = _spawn(["reader", str(home.root), params.reader, str(stop_file)], env)
    try:
        for i, w in enumerate(workers):
            _await_ready(w, f"worker {i}")
        _await_ready(read, "reader")
        real, cli, done = Timed(), Timed(), threading.Event()
        real_sessions = _real_setup(params, projects, home, real)
        threads = [
            threading.Thread(target=_guarded(real, _real_hooks, params, real_sessions, home, real)),
            threading.Thread(target=_guarded(cli, _cli_reads, params, home, cli, done)),
        ]
        say("go")
        started = time.monotonic()
        for w in workers:
            assert w.stdin is not None
            w.stdin.write("go\n")
            w.stdin.flush()
        for t in threads:
            t.start()
        results: list[WorkerResult] = []
        problems: list[str] = []
        for i, w in enumerate(workers):
            line, trouble = _finish(w, f"worker {i}", timeout=3600)
            problems += trouble
            results.append(msgspec.json.decode(line, type=WorkerResult))
        done.set()
        for t in threads:
            t.join()
        say("load done; stopping the reader")
        stop_file.touch()
        line, trouble = _finish(read, "reader", timeout=600)
        problems += trouble
        reader_result = msgspec.json.decode(line, type=ReaderResult)
    finally:
        for proc in [*workers, read]:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    load = (min(started, *(r.started for r in results)), max(r.finished for r in results))
    problems += [p for r in results for p in r.problems] + real.problems + cli.problems
    report = LoadReport(
        params=params,
        load=load,
        appending_until=max([load[1], *real.ended]),
        seconds=load[1] - load[0],
        hook_ms=[x for r in results for x in r.latencies_ms],
        real_ms=real.latencies_ms,
        real_under_load=sum(t <= load[1] for t in real.ended),
        cli_reads=len(cli.latencies_ms),
        cli_fallbacks=cli.fallbacks,
        reader=reader_result,
        sessions=0,
        events=0,
        journal_gaps=0,
        journal_duplicates=0,
        ledger_gaps=0,
        ledger_duplicates=0,
        problems=problems,
    )
    say("checking the journals and the ledger")
    verify(report, home)
    return report


def all_sessions(params: LoadParams) -> list[tuple[str, int, Ending]]:
    """Every session of a run: (Claude Code session id, its stops, how it ends)."""
    out = [
        (claude_session(w, s), params.stops, ending_of(s))
        for w in range(params.procs)
        for s in range(params.sessions)
    ]
    return out + [
        (claude_session(-1, r), params.real_stops, ending_of(r)) for r in range(params.real_sessions)
    ]


def verify(report: LoadReport, home: Home) -> None:
    """Check every journal, then the ledger after a last ingest, against what the stops did."""
    from ledger.storage.database import Ledger

    sessions = all_sessions(report.params)
    problems = report.problems
    journals: dict[str, list[tuple[int, str]]] = {}
    for session, stops, ending in sessions:
        sid = f"cc-{session}"
        path = journal_path(home.journals, sid)
        if not path.exists():
            problems.append(f"{sid}: no journal")
            continue
        read = read_new(path, Cursor())
        problems += [f"{sid}: bad journal line {b}" for b in read.bad]
        journals[sid] = [(e.seq, tag(e)) for e in read.events]
        gaps, dups = seq_faults([e.seq for e in read.events])
        report.journal_gaps += gaps
        report.journal_duplicates += dups
        if problem := check_journal(read.events, session, stops, ending):
            problems.append(f"{sid}: {problem}")
    report.sessions = len(journals)
    report.events = sum(len(v) for v in journals.values())
    extra = sorted({p.stem for p in home.journal_files()} - {f"cc-{s}" for s, _, _ in sessions})
    problems += [f"{sid}: unexpected journal (an error was recorded?)" for sid in extra]
    with Ledger.open(home, wait=READER_WAIT_S) as led:
        led.ingest()
        rows = led.con.execute(
            "SELECT session_id, list(seq ORDER BY seq), list(type ORDER BY seq) FROM events GROUP BY ALL"
        ).fetchall()
        errors = led.con.execute("SELECT journal, line_no, reason FROM ingest_errors").fetchall()
        status = dict(
            led.con.execute("SELECT session_id, concat(status, ' ', tokens) FROM sessions").fetchall()
        )
    problems += [f"ingest error: {e}" for e in errors]
    ingested = {str(r[0]): list(zip(r[1], r[2], strict=True)) for r in rows}
    for got in ingested.values():
        gaps, dups = seq_faults([s for s, _ in got])
        report.ledger_gaps += gaps
        report.ledger_duplicates += dups
    for session, stops, ending in sessions:
        sid = f"cc-{session}"
        if sid in journals and ingested.get(sid) != sorted(journals[sid]):
            problems.append(f"{sid}: the ledger's events differ from the journal's")
        want = (
            f"{'complete' if ending == 'promise' else 'escalated'} {stops * (INPUT_TOKENS + OUTPUT_TOKENS)}"
        )
        if status.get(sid) != want:
            problems.append(f"{sid}: sessions view says {status.get(sid)!r}, expected {want!r}")
    if report.reader.seq_faults:
        problems += [f"reader saw a seq fault: {f}" for f in report.reader.seq_faults]
    problems += [f"reader: bad line {b}" for b in report.reader.bad_lines]
    problems += [f"reader error: {e}" for e in report.reader.errors]
    if report.reader.in_memory:
        problems.append("the monitor could not open the ledger file and read the journals instead")
    del problems[MAX_PROBLEMS:]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the worker and reader processes."""
    args = list(sys.argv[1:] if argv is None else argv)
    roles: dict[str, Callable[[Sequence[str]], int]] = {"worker": worker, "reader": reader}
    if not args or args[0] not in roles:
        print("usage: python -m tests.load_suite worker|reader ARGS...", file=sys.stderr)
        return 2
    return roles[args[0]](args[1:])


if __name__ == "__main__":
    sys.exit(main())
