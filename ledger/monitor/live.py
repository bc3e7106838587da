"""The ``Monitor``: opens sources of journals, ingests their backlog in batches, then only what is
appended, and answers a front end's questions with the ledger's views; also the saved example
queries and where the default home is.
"""

from __future__ import annotations

import os
import queue
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import astuple
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import duckdb

from ledger.core.home import Home, default_home, is_journal, journals_in
from ledger.events import session_status
from ledger.monitor.answers import (
    Alert,
    Checkpoint,
    EventLine,
    Fleet,
    Heat,
    IterationDetail,
    IterationRow,
    Progress,
    RuleCell,
    SessionRow,
    TaskRow,
    Update,
    ahead,
    alert_of,
    aware,
    detail_of,
    fleet_of,
    iteration_of,
    session_of,
    summary_of,
    task_of,
)
from ledger.storage.database import Ledger
from ledger.storage.ingest import BATCH_BYTES, IngestReport, Stored
from ledger.storage.journal import utc_now
from ledger.storage.query import QueryResult, ReadOnlyViolation, lock_down, run_readonly

SPARK_POINTS: Final = 20


MEMORY_LIMIT: Final = "250MB"
"""DuckDB's memory limit for a file-backed monitor. Loading 1M events (one INSERT) then peaks at about
330 MB of RSS, the app included; the default (80% of RAM) lets DuckDB alone reach 800 MB, and 200 MB
makes that INSERT 25% slower (250 MB: 15%; bench_tui, docs/performance.md)."""


MANY_IDS: Final = 2000
"""More sessions than this are read by reading them all (``Monitor.sessions``)."""
FEW_IDS: Final = 8
"""Up to this many sessions are read one ``session_id = ?`` each (``Monitor.sessions``): DuckDB takes
an equality into every branch of the ``sessions`` view, an ``IN`` list not (1M events: one session
13 ms by equality, 90 ms by ``IN``)."""


STEP_SQL: Final = """SELECT session_id,
    arg_max(CASE WHEN type = 'iteration_started' THEN '' ELSE signal END, seq)
      FILTER (WHERE type IN ('iteration_started', 'signal_resolved')) IN ('BLOCKED', 'ESCALATE') AS stopped,
    bool_or(type = 'session_started' AND len(command) > 0) AS runner,
    CASE WHEN max(seq) FILTER (WHERE type = 'rate_limited')
              > coalesce(max(seq) FILTER (WHERE type IN ('iteration_started', 'agent_turn')), -1)
         THEN arg_max(coalesce(resets_at, ts + to_microseconds(CAST(round(wait_s * 1e6) AS BIGINT))), seq)
                FILTER (WHERE type = 'rate_limited') END AS limit_until
  FROM events
  WHERE type IN ('session_started', 'iteration_started', 'signal_resolved', 'rate_limited', 'agent_turn')
    {where}
  GROUP BY session_id"""
"""Per session: whether its loop's latest step is a BLOCKED or ESCALATE signal with no iteration
started since (``stopped``: a running one is stalled, ``SessionRow.stalled``), and whether
``ralph-ledger run`` drives it (``runner``: it recorded its agent command), and until when a usage
limit holds it (``limit_until``: its latest ``rate_limited`` came after its latest turn; the reset
time, else the wait's end; ``SessionRow.waiting_until``). The one definition of a stalled session
and of a waiting one: the monitor's rows and its fleet totals read it (docs/ralph-tui.md).
``{where}``: ``AND session_id IN (...)`` or nothing."""


def waiting_until(
    con: duckdb.DuckDBPyConnection, session_id: str, now: datetime | None = None
) -> datetime | None:
    """Until when a usage limit holds the loop of ``session_id`` (``STEP_SQL``'s ``limit_until``, while
    it is ahead of ``now``); None when nothing holds it. Whether the session still runs is the caller's."""
    row = con.execute(
        f"SELECT limit_until FROM ({STEP_SQL.format(where='AND session_id = ?')})", [session_id]
    ).fetchone()
    return ahead(aware(row[0]) if row else None, now or datetime.now(UTC))


ALERT_TYPES: Final = ("session_completed", "session_blocked", "session_escalated")
"""The events that raise an alert: a session's end. A guard trip is not one of its own: it forces the
end (BLOCKED or ESCALATE) it is recorded with, whose alert names the guard (one event, one alert)."""


EXAMPLE_QUERIES: Final = {
    "completion rate by agent": (
        "SELECT agent, sessions, completed, round(100 * completion_rate, 1) AS completion_pct,\n"
        "       round(100 * autonomous_completion_rate, 1) AS autonomous_pct,\n"
        "       round(mean_iterations_to_completion, 1) AS mean_iterations\n"
        "FROM loop_metrics ORDER BY sessions DESC"
    ),
    "quality regressions": (
        "SELECT session_id, iteration, first_score, score, drop\n"
        "FROM quality_regression(span := 3, min_drop := 10) ORDER BY drop DESC LIMIT 50"
    ),
    "thrashing files": (
        "SELECT session_id, file, times, iterations\n"
        "FROM thrashing(min_iterations := 3) ORDER BY times DESC LIMIT 50"
    ),
    "validation stalls": "SELECT * FROM validation_stall(span := 3) ORDER BY session_id, iteration LIMIT 50",
    "failure streaks": "SELECT * FROM failure_streak(min_streak := 2) ORDER BY streak DESC LIMIT 50",
    "slowest rules": (
        "SELECT rule, count(*) AS runs, round(avg(duration_ms)) AS avg_ms,\n"
        "       round(max(duration_ms)) AS max_ms\n"
        "FROM rule_results GROUP BY rule ORDER BY avg_ms DESC LIMIT 20"
    ),
    "guard trips": "SELECT guard, signal, count(*) AS trips FROM guard_trips GROUP BY ALL ORDER BY 3 DESC",
    "token use by session": (
        "SELECT session_id, agent, status, iteration, tokens FROM sessions ORDER BY tokens DESC LIMIT 50"
    ),
}
"""Saved example queries for a SQL console: name -> a query over the ledger's views and detectors."""


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The ledger home a front end watches, chosen as ralph-ledger chooses it (``Home.resolve``):
    ``home``, else ``$RALPH_HOME``, else the project's ``.ralph``, absolute, ``~`` expanded; one its
    group or others can write in is refused (``UnsafeHome``, docs/design/homes.md)."""
    return Home.resolve(home, write=False).root


def default_home_here(cwd: Path | None = None) -> Path:
    """The home used when none is named, seen from ``cwd`` (``ledger.core.home.default_home``)."""
    return default_home(cwd)


class _Stopped(Exception):
    """A load's generator was closed: its ingest stops and is undone."""


class Monitor:
    """Live, incremental reads of one or more sources of journals (see the module docstring)."""

    def __init__(
        self,
        sources: Sequence[Path] = (),
        *,
        homes: Sequence[Path] = (),
        now: Callable[[], datetime] = utc_now,
        memory_limit: str | None = MEMORY_LIMIT,
    ) -> None:
        if not sources and not homes:
            raise ValueError("Monitor needs at least one source")
        self.now = now
        self._lock = threading.RLock()
        self._query_lock = threading.Lock()
        self._query_con: duckdb.DuckDBPyConnection | None = None
        self._dirs: list[Path] = []
        self._files: list[Path] = []
        self.homes: list[Path] = []
        """The ledger homes read (``journals/`` watched), whether they exist yet or not."""
        found: list[Home] = []
        for source in sources:
            path = Path(source).expanduser().resolve()
            if path.is_file():
                self._files.append(path)
            elif (path / "journals").is_dir() or (path / "ledger.duckdb").exists():
                found.append(Home.resolve(path, write=False))
            elif path.is_dir():
                self._dirs.append(path)
                if not journals_in(path):
                    # An empty folder: a directory of journals to come, or a home before its first loop
                    # (RALPH_HOME=PATH ralph-ledger run): both are watched, as --home PATH watches the
                    # second; nothing is created in it.
                    self.homes.append(path)
                    self._dirs.append(Home(path).journals)
            else:
                raise FileNotFoundError(f"{path}: no such ledger home, journal directory or journal")
        # A home named as one (--home, $RALPH_HOME, ./.ralph) is one even when it is empty or does not
        # exist yet: its journals/ is watched for the first loop's journal, and it is not created.
        found += [Home.resolve(Path(h).expanduser().resolve(), write=False) for h in homes]
        for home in found:
            self.homes.append(home.root)
            self._dirs.append(home.journals)
        if len(found) == 1 and len(sources) + len(homes) == 1 and found[0].root.is_dir():
            self.ledger = Ledger.open(found[0], fallback=True)
        else:
            self.ledger = Ledger.memory(None)
        if memory_limit and self.ledger.path is not None:  # a file-backed ledger can spill to disk
            self.ledger.con.execute(f"SET memory_limit = '{memory_limit}'")
        self._own_scratch: Path | None = None
        self.allowed = self._lock_down()
        """The folders DuckDB may read and write files in: this monitor's own ingest's (user SQL
        runs under the same lockdown, ``ledger.storage.query.lock_down``)."""
        self._known: dict[str, Path] = {}
        """Every journal seen, by name (as ``ingest_positions`` keys them): where it was."""
        self._present = {p for p in self._sources() if p.exists()}
        """The sources that existed at the last look (``_look``)."""
        self._deleted: set[Path] = set()
        """Sources deleted while watched, not back yet."""

    def _lock_down(self) -> list[Path]:
        """Lock the ledger's database down before anything runs on it (docs/design/query-lockdown.md):
        file access only in the folder of its ingest's scratch files, which is one of its own when
        the ledger would use the system's temporary folder (every user's). The folders allowed."""
        scratch = self.ledger.scratch_dir()
        if scratch == Path(tempfile.gettempdir()):
            scratch = Path(tempfile.mkdtemp(prefix="ralph-monitor-"))
            self._own_scratch = self.ledger.scratch = scratch
        allowed = [scratch.absolute()]
        lock_down(self.ledger.con, allowed, final=False)
        return allowed

    # -- what to read ----------------------------------------------------------
    @property
    def watch_paths(self) -> list[Path]:
        """The directories to watch for changes (a file source's directory included); a home's
        ``journals/`` is among them even before it exists."""
        return sorted({*self._dirs, *(f.parent for f in self._files)})

    def watch_roots(self) -> list[Path]:
        """What a watcher watches now: each of ``watch_paths``, or while one does not exist yet, its
        nearest existing ancestor (so the watcher sees the directory appear, then watches it)."""
        roots: set[Path] = set()
        for path in self.watch_paths:
            while not path.is_dir() and path.parent != path:
                path = path.parent
            roots.add(path)
        return sorted(roots)

    def awaited(self, path: Path) -> bool:
        """Whether a change at ``path`` concerns a watched directory (it, or a folder on its way, was
        created or removed): a watcher of ``watch_roots`` then starts again."""
        return any(w.is_relative_to(path) for w in self.watch_paths)

    def journal_files(self) -> list[Path]:
        """Every journal of the sources, now."""
        found = {str(p): p for d in self._dirs if d.is_dir() for p in journals_in(d)}
        found.update((str(f), f) for f in self._files if f.exists())
        files = [found[key] for key in sorted(found)]
        self._known.update((f.name, f) for f in files)
        return files

    def _sources(self) -> list[Path]:
        """What may be deleted while watched: the homes, the directories of journals, the journals named."""
        return sorted({*self.homes, *self._dirs, *self._files})

    def _wanted(self, path: Path) -> bool:
        if not is_journal(path):
            return False
        if path in self._files or path.parent in self._dirs:  # the watcher's paths need no resolving
            return True
        path = path.resolve()
        return path in self._files or path.parent in self._dirs

    def _offsets(self) -> dict[str, int]:
        rows = self.ledger.con.execute("SELECT journal, byte_offset FROM ingest_positions").fetchall()
        return {str(r[0]): int(r[1]) for r in rows}

    def pending(self) -> Progress:
        """How much of the journals is not ingested yet."""
        with self._lock:
            offsets = self._offsets()
        files = self.journal_files()
        todo = [max(0, _size(f) - offsets.get(f.name, 0)) for f in files]
        waiting = sum(1 for t in todo if t)
        return Progress(
            files_done=len(files) - waiting,
            files_total=len(files),
            bytes_done=0,
            bytes_total=sum(todo),
            events=0,
        )

    def load(self, batch_bytes: int = BATCH_BYTES) -> Iterator[Progress]:
        """Ingest the backlog with the ledger's bulk ingest (one transaction and, unless
        ``batch_bytes`` is smaller, one INSERT, as ``ralph-ledger ingest`` does), yielding as each
        INSERT goes on (DuckDB's progress of it) and after it, then once it is committed with every
        session it brought in (``sessions``; the earlier steps name none).
        Closing the generator early undoes the ingest (after the INSERT under way)."""
        with self._lock:
            offsets = self._offsets()
        work = [(f, max(0, _size(f) - offsets.get(f.name, 0))) for f in self.journal_files()]
        work = [(f, n) for f, n in work if n]
        if not work:
            return
        total = sum(n for _, n in work)
        steps: queue.Queue[Stored | IngestReport | BaseException] = queue.Queue()
        stop = threading.Event()

        def told(stored: Stored) -> None:
            if stop.is_set():
                raise _Stopped
            steps.put(stored)

        def run() -> None:
            try:
                with self._lock:
                    files = [f for f, _ in work]
                    steps.put(self.ledger.ingest(files, batch_bytes=batch_bytes, progress=told))
            except BaseException as exc:  # handed over to the generator
                steps.put(exc)

        loader = threading.Thread(target=run, name="ralph-monitor-load", daemon=True)
        loader.start()
        seen = Stored(0, 0, 0)
        try:
            while not isinstance(item := steps.get(), IngestReport):
                if isinstance(item, BaseException):
                    raise item
                # (a retry in another mode starts from zero again: the bar never goes back)
                seen = Stored(*map(max, zip(astuple(seen), astuple(item), strict=True)))
                if seen.bytes < total:
                    yield Progress(
                        files_done=min(seen.journals, len(work)),
                        files_total=len(work),
                        bytes_done=seen.bytes,
                        bytes_total=total,
                        events=seen.events,
                    )
            yield Progress(
                files_done=len(work),
                files_total=len(work),
                bytes_done=total,
                bytes_total=total,
                events=item.events,
                sessions=sorted(item.seqs),
            )
        finally:
            stop.set()
            loader.join()

    def bad_lines(self) -> list[str]:
        """Every bad line the ledger holds for these journals (``path:line: reason``, by journal and
        line): found by this monitor's load or by an earlier ingest of the home's ledger."""
        paths = {f.name: f for f in self.journal_files()}
        with self._lock:
            rows = self.ledger.con.execute(
                "SELECT journal, line_no, reason FROM ingest_errors ORDER BY journal, line_no"
            ).fetchall()
        return [f"{paths[j]}:{n}: {reason}" for j, n, reason in rows if j in paths]

    def refresh(self, changed: Iterable[Path] | None = None) -> Update:
        """Ingest what was appended to ``changed`` journals (every journal when ``None``); first
        drop the sessions of sources deleted since the last refresh (``Update.vanished``)."""
        vanished, returned = self._look()
        files = self.journal_files() if changed is None else sorted({p for p in changed if self._wanted(p)})
        files = [f for f in files if f.exists()]
        if not files:
            return Update(
                sessions=[], alerts=[], events=0, bad_lines=[], reset=[], vanished=vanished, returned=returned
            )
        with self._lock:
            report = self.ledger.ingest(files, live=True)
            changed_ids = sorted(report.seqs)
            alerts = self._alerts({s: report.seqs[s][0] for s in changed_ids})
        by_name = {f.name: f for f in files}
        return Update(
            sessions=sorted({*changed_ids, *(Path(name).stem for name in report.reset)}),
            alerts=alerts,
            events=report.events,
            bad_lines=[str(b) for b in report.bad_lines],
            reset=[str(by_name.get(name, name)) for name in report.reset],
            vanished=vanished,
            returned=returned,
        )

    def _look(self) -> tuple[dict[str, list[str]], list[str]]:
        """The sources deleted since the last look, each with the sessions it held (dropped from the
        ledger here), and those deleted before that exist again."""
        present = {p for p in self._sources() if p.exists()}
        lost, self._present = self._present - present, present
        returned = sorted(self._deleted & present)
        self._deleted = (self._deleted - present) | lost
        # a deleted home's journals/ goes with it: name the outermost source deleted
        named = sorted(p for p in lost if not any(p != q and p.is_relative_to(q) for q in lost))
        vanished: dict[str, list[str]] = {}
        if named:
            files = {f.name for f in self.journal_files()}
            gone = {name: path for name, path in self._known.items() if name not in files}
            for source in named:
                names = sorted(n for n, path in gone.items() if path.is_relative_to(source))
                vanished[str(source)] = [Path(n).stem for n in names]
            held = self._forget(sorted(gone))
            told = {sid for ids in vanished.values() for sid in ids}
            vanished[str(named[0])] += sorted(set(held) - told)  # (a deleted ledger file's other rows)
        return vanished, [str(p) for p in returned]

    def _forget(self, names: list[str]) -> list[str]:
        """Drop the sessions of these journals (deleted) from the ledger. A ledger file deleted with
        its home cannot be written any more: an empty in-memory ledger takes its place (the journals of
        a home created again there are read into it), and every session it held is returned."""
        for name in names:
            self._known.pop(name, None)
        with self._query_lock, self._lock:
            if self.ledger.path is not None and not self.ledger.path.exists():
                held = self.ledger.con.execute("SELECT DISTINCT session_id FROM events").fetchall()
                if self._query_con is not None:
                    self._query_con.close()
                    self._query_con = None
                self.ledger.close()
                self.ledger = Ledger.memory(None)
                return [str(r[0]) for r in held]
            if not names:
                return []
            ids = [Path(n).stem for n in names]
            con = self.ledger.con
            con.execute("BEGIN TRANSACTION")
            con.execute("DELETE FROM events WHERE session_id IN (SELECT unnest($ids))", {"ids": ids})
            for table in ("ingest_positions", "ingest_errors"):
                con.execute(f"DELETE FROM {table} WHERE journal IN (SELECT unnest($names))", {"names": names})
            con.execute("COMMIT")
        return []

    def _alerts(self, since: dict[str, int]) -> list[Alert]:
        if not since:
            return []
        rows = self.ledger.rows(
            "SELECT e.session_id, e.iteration, e.type, e.seq, e.ts, e.reason, e.guard, e.detail, e.promise, "
            "e.total_iterations FROM events e JOIN (SELECT unnest($ids) AS sid, unnest($seqs) AS since) s "
            "ON e.session_id = s.sid AND e.seq > s.since WHERE e.type IN (SELECT unnest($types)) "
            "ORDER BY e.session_id, e.seq",
            {"ids": list(since), "seqs": list(since.values()), "types": list(ALERT_TYPES)},
        )
        return [alert_of(r) for r in rows]

    # -- answers -----------------------------------------------------------------
    def recent_sessions(self, limit: int) -> list[SessionRow]:
        """The ``limit`` most recently active sessions, most recent first: a first screen, read in
        a fraction of the time all sessions take on a large ledger."""
        with self._lock:
            ids = self.ledger.con.execute(
                "SELECT session_id FROM events GROUP BY session_id ORDER BY max(ts) DESC, session_id LIMIT ?",
                [limit],
            ).fetchall()
        return self.sessions([str(r[0]) for r in ids])

    def sessions(self, ids: Sequence[str] | None = None) -> list[SessionRow]:
        """Sessions (all, or these), most recently active first."""
        # A literal IN list lets DuckDB push the filter into the views' scans (a subquery does not);
        # a list of thousands (a whole backlog just loaded) costs more than reading every row.
        ids = list(ids) if ids is not None else None
        if ids is not None and len(ids) > MANY_IDS:
            wanted = set(ids)
            return [r for r in self.sessions() if r.session_id in wanted]
        if ids is not None and not ids:
            return []
        where = f"WHERE session_id IN ({', '.join('?' * len(ids))})" if ids else ""
        picked = f"SELECT * FROM sessions {where}"
        if ids and len(ids) <= FEW_IDS:
            picked = " UNION ALL ".join(["SELECT * FROM sessions WHERE session_id = ?"] * len(ids))
        also = where.replace("WHERE", "AND")
        with self._lock:
            rows = self.ledger.rows(
                f"""SELECT s.*, sc.scores, coalesce(s.status = 'running' AND st.stopped, FALSE) AS stalled,
                      coalesce(st.runner, FALSE) AS runner,
                      CASE WHEN s.status = 'running' THEN st.limit_until END AS waiting_until
                    FROM ({picked}) s LEFT JOIN (
                      SELECT session_id, list(score ORDER BY iteration)[-{SPARK_POINTS}:] AS scores
                      FROM iteration_scores WHERE score IS NOT NULL {also}
                      GROUP BY session_id) sc USING (session_id)
                    LEFT JOIN ({STEP_SQL.format(where=also)}) st USING (session_id)
                    ORDER BY updated_at DESC NULLS LAST, session_id""",
                [*ids, *ids, *ids] if ids else None,
            )
        return [session_of(r) for r in rows]

    def fleet(self) -> Fleet:
        """Totals over every session."""
        with self._lock:
            rows = self.ledger.con.execute(
                "SELECT s.status, count(*), count(*) FILTER (WHERE s.status = 'running' AND st.stopped) "
                f"FROM sessions s LEFT JOIN ({STEP_SQL.format(where='')}) st USING (session_id) GROUP BY 1"
            ).fetchall()
        counts = {session_status(status): int(n) for status, n, _ in rows}
        return fleet_of(counts, stalled=sum(int(stalled) for _, _, stalled in rows))

    def iterations(self, session_id: str) -> list[IterationRow]:
        """The session's iteration timeline, first iteration first."""
        with self._lock:
            rows = self.ledger.rows(
                "SELECT * FROM iterations WHERE session_id = ? ORDER BY iteration", [session_id]
            )
            cells = self.ledger.rows(
                "SELECT iteration, rule, passed, errored, message, duration_ms FROM rule_results "
                "WHERE session_id = ? ORDER BY iteration, seq",
                [session_id],
            )
        by_iteration: dict[int, dict[str, RuleCell]] = {}
        for c in cells:
            by_iteration.setdefault(int(c["iteration"]), {})[str(c["rule"])] = RuleCell(
                rule=str(c["rule"]),
                passed=bool(c["passed"]),
                errored=bool(c["errored"]),
                message=str(c["message"] or ""),
                duration_ms=float(c["duration_ms"] or 0.0),
            )
        return [iteration_of(r, list(by_iteration.get(int(r["iteration"]), {}).values())) for r in rows]

    def detail(self, session_id: str, iteration: int) -> IterationDetail:
        """The agent's output excerpt, the feedback and the next prompt of one iteration, and the
        summary of the loop its prompt carried (``summary_given``)."""
        with self._lock:
            rows = self.ledger.rows(
                "SELECT type, output_excerpt, feedback, next_prompt, reason, loop_summary, guidance "
                "FROM events WHERE session_id = ? AND iteration = ? AND type IN ('agent_turn', "
                "'signal_resolved', 'hook_decided', 'summary_given', 'iteration_started') ORDER BY seq",
                [session_id, iteration],
            )
        return detail_of(iteration, rows)

    def diff(self, session_id: str, iteration: int) -> str:
        """The git diff of one iteration's snapshot, as git prints it, or one line saying why there is
        none (``ledger.monitor.snapshots.iteration_diff``; docs/snapshots.md)."""
        from ledger.monitor.snapshots import iteration_diff

        with self._lock:
            rows = self.ledger.rows(
                'SELECT "commit", parent, work_tree, left_out FROM events WHERE session_id = ? '
                "AND iteration = ? AND type = 'snapshot_taken' ORDER BY seq DESC LIMIT 1",
                [session_id, iteration],
            )
        homes = [p.parent.parent for p in self.journal_files() if p.stem == session_id]
        return iteration_diff(session_id, iteration, rows[0] if rows else None, homes[0] if homes else None)

    def heat(self, session_id: str) -> Heat:
        """Which files changed in which iteration."""
        with self._lock:
            rows = self.ledger.con.execute(
                "SELECT iteration, files_modified FROM iterations WHERE session_id = ? ORDER BY iteration",
                [session_id],
            ).fetchall()
        iterations = [int(r[0]) for r in rows]
        counts: dict[str, int] = {}
        for _, files in rows:
            for f in files or []:
                counts[f] = counts.get(f, 0) + 1
        files = sorted(counts, key=lambda f: (-counts[f], f))
        cells = [[f in (r[1] or []) for r in rows] for f in files]
        return Heat(files=files, iterations=iterations, cells=cells)

    def tasks(self, session_id: str) -> list[TaskRow]:
        """The tasks of a task-list loop, in the list's order (none for a loop without a list)."""
        with self._lock:
            rows = self.ledger.rows("SELECT * FROM tasks WHERE session_id = ? ORDER BY task_no", [session_id])
        return [task_of(r) for r in rows]

    def checkpoints(self, session_id: str) -> list[Checkpoint]:
        """The session's checkpoints, oldest first."""
        with self._lock:
            rows = self.ledger.rows(
                "SELECT checkpoint_id, iteration, trigger, created_at, expired FROM checkpoints "
                "WHERE session_id = ? ORDER BY seq",
                [session_id],
            )
        return [
            Checkpoint(
                checkpoint_id=str(r["checkpoint_id"]),
                iteration=int(r["iteration"] or 0),
                trigger=str(r["trigger"] or ""),
                created_at=aware(r["created_at"]),
                expired=bool(r["expired"]),
            )
            for r in rows
        ]

    def events(self, session_id: str, limit: int = 200) -> list[EventLine]:
        """The session's last ``limit`` events, oldest first, each summarised on one line."""
        with self._lock:
            rows = self.ledger.rows(
                "SELECT * FROM (SELECT seq, ts, type, iteration, promise, signal, reason, guard, detail,"
                " score, passed, decision, message, action, hook_id, files_modified, tool_count, trigger,"
                " checkpoint_id, kind, total_iterations, component, wait_s, resets_at, agent_type, agent_id,"
                " notice, targets, failed, octet_length(encode(loop_summary)) AS summary_bytes, guidance"
                " FROM events WHERE session_id = ?"
                " ORDER BY seq DESC LIMIT ?) ORDER BY seq",
                [session_id, limit],
            )
        return [
            EventLine(
                seq=int(r["seq"]),
                ts=aware(r["ts"]) or datetime.min.replace(tzinfo=UTC),
                type=str(r["type"]),
                iteration=int(r["iteration"] or 0),
                text=summary_of(r),
            )
            for r in rows
        ]

    def query(self, sql: str, *, max_rows: int | None = None, timeout_s: float | None = None) -> QueryResult:
        """One read-only query (``ledger.storage.query``), at most ``max_rows`` rows, stopped after
        ``timeout_s``; raises ``ReadOnlyViolation`` with a one-line message. It runs on a
        connection of its own, so live ingest goes on while a slow query runs."""
        with self._query_lock:
            with self._lock:
                if self._query_con is None:
                    self._query_con = self.ledger.con.cursor()
                    self.ledger.views_on(self._query_con)
                con = self._query_con
            timer = threading.Timer(timeout_s, con.interrupt) if timeout_s else None
            if timer is not None:
                timer.daemon = True
                timer.start()
            try:
                return run_readonly(con, sql, lock=False, allowed=self.allowed, max_rows=max_rows)
            except ReadOnlyViolation as exc:
                if timer is not None and timer.finished.is_set() and "interrupt" in str(exc).lower():
                    raise ReadOnlyViolation(f"query stopped after {timeout_s:g} s (time limit)") from None
                raise
            finally:
                if timer is not None:
                    timer.cancel()

    def interrupt_query(self) -> None:
        """Stop the query ``query`` is running (it raises ``ReadOnlyViolation``); nothing when none runs."""
        con = self._query_con
        if con is not None:
            con.interrupt()

    def close(self) -> None:
        """Close the ledger (and remove the scratch folder of its own, if it made one)."""
        with self._lock:
            if self._query_con is not None:
                self._query_con.close()
            self.ledger.close()
            if self._own_scratch is not None:
                shutil.rmtree(self._own_scratch, ignore_errors=True)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
