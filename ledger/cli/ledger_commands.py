"""The commands that read the ledger: ``ingest``, ``rebuild``, ``sessions``, ``show``, ``sql``,
``export``, ``schema`` and ``stats``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.cli.common import CliError, emit, open_current, report_ingest, unknown_session
from ledger.core.home import Home
from ledger.core.words import plural

if TYPE_CHECKING:  # the heavy modules (DuckDB) load only in the commands that use them
    import argparse  # and argparse only when a command line is parsed (not on the Stop hook's fast path)


def cmd_ingest(home: Home, args: argparse.Namespace) -> None:
    """``ingest`` / ``rebuild``: ingest what is new in the journals (``rebuild`` empties the ledger first).

    Prints one summary line (events, journals, seconds, events/s, bad lines); truncated or replaced
    journals and the first ``MAX_BAD_SHOWN`` bad lines go to stderr. Raises ``LedgerLocked`` if
    another process still holds the ledger after ``--wait`` seconds, ``LedgerError`` if it cannot be
    opened.
    """
    from ledger.storage.database import Ledger

    if not home.root.exists():  # the default ./.ralph: nothing ran here; create nothing
        raise CliError(f"ralph-ledger: no ledger home at {home.root} yet: no loop has run here (see --home)")
    with Ledger.open(home, wait=args.wait) as ledger:
        report = ledger.rebuild() if args.command == "rebuild" else ledger.ingest()
    report_ingest(report)
    rate = report.events / report.seconds if report.seconds else 0.0
    emit(
        f"{args.command}: {report.events} events from {report.journals} journals "
        f"in {report.seconds:.2f} s ({rate:,.0f} events/s); {len(report.bad_lines)} bad lines\n"
    )


def cmd_sessions(home: Home, args: argparse.Namespace) -> None:
    """``sessions``: print each session's current state, latest update first.

    Only sessions with ``--status`` if given; as a table, CSV or JSON. Raises ``LedgerError`` if
    the ledger cannot be opened (a locked one falls back to reading the journals).
    """
    from ledger.core.output import fetch, render
    from ledger.storage.ledger_file import interruptible

    with open_current(home, args.wait) as ledger:
        where = "WHERE status = ?" if args.status else ""
        params = [args.status] if args.status else None
        sql = (
            "SELECT session_id, status, paused, agent, task, iteration, max_iterations, last_score, "
            "last_signal, consecutive_failures, tokens, cost_usd, updated_at, branch, chain_break, "
            "tasks_done, tasks_total "
            f"FROM sessions {where} "
            "ORDER BY updated_at DESC, session_id"
        )
        rows = interruptible(ledger.con, lambda: fetch(ledger.con, sql, params))
    emit(render(rows, args.fmt))


def cmd_show(home: Home, args: argparse.Namespace) -> None:
    """``show``: print one session iteration by iteration.

    As a table, a summary line comes first; CSV and JSON hold only the iteration rows. Raises
    ``CliError`` (exit 1) if there is no such session, ``LedgerError`` if the ledger cannot be opened.
    """
    from ledger.core.money import usd
    from ledger.core.output import cell, fetch, render
    from ledger.events import session_status
    from ledger.monitor.live import waiting_until
    from ledger.storage.ledger_file import interruptible

    sql = (
        "SELECT iteration, score, rules_passed, rules_failed, rules_errored, files_modified, "
        "promise, hook_action, signal, guards, duration_s, tokens_total, cost_usd FROM iterations "
        "WHERE session_id = ? ORDER BY iteration"
    )
    with open_current(home, args.wait) as ledger:
        found = interruptible(
            ledger.con,
            lambda: fetch(ledger.con, "SELECT * FROM sessions WHERE session_id = ?", [args.session]),
        )
        if not found.rows:
            raise unknown_session(args.session, home)
        s = dict(zip(found.columns, found.rows[0], strict=True))
        rows = interruptible(ledger.con, lambda: fetch(ledger.con, sql, [args.session]))
        running = session_status(s["status"]) == "running"
        until = waiting_until(ledger.con, args.session) if running else None
    if args.fmt == "table":
        why = f" ({s['max_iterations_reason']})" if s["max_iterations_reason"] else ""
        kind = f", kind {s['task_kind']}" if s["task_kind"] else ""
        emit(
            f"session {s['session_id']}: {s['status']}"
            + (f", waiting until {until:%Y-%m-%d %H:%M} UTC (usage limit)" if until else "")
            + f", iteration {s['iteration']}/"
            f"{s['max_iterations']}{why}, agent {s['agent'] or '-'}{kind}, task {cell(s['task'] or '-')}, "
            f"last score {cell(s['last_score'])}, last signal {s['last_signal'] or '-'}, "
            f"{s['tokens']} tokens, cost {usd(s['cost_usd'])}"
            + (f", worktree {s['worktree']} (branch {s['branch']})" if s.get("branch") else "")
            + (f", tasks {s['tasks_done']}/{s['tasks_total']} done" if s.get("tasks_total") else "")
            + (f" (current: {cell(s['current_task'])})" if s.get("current_task") else "")
            + "\n"
        )
    emit(render(rows, args.fmt))


def cmd_tasks(home: Home, args: argparse.Namespace) -> None:
    """``tasks``: print one task-list loop's tasks, one row each (the ``tasks`` view; docs/tasks.md).

    Raises ``CliError`` (exit 1) if there is no such session or it has no task list, ``LedgerError``
    if the ledger cannot be opened.
    """
    from ledger.core.output import fetch, render
    from ledger.storage.ledger_file import interruptible

    sql = (
        "SELECT task_no, title, status, iterations, tokens, cost_usd, seconds, first_iteration, "
        "last_iteration FROM tasks WHERE session_id = ? ORDER BY task_no"
    )
    with open_current(home, args.wait) as ledger:
        rows = interruptible(ledger.con, lambda: fetch(ledger.con, sql, [args.session]))
        if not rows.rows:
            known = interruptible(
                ledger.con,
                lambda: fetch(ledger.con, "SELECT 1 FROM sessions WHERE session_id = ?", [args.session]),
            )
            if not known.rows:
                raise unknown_session(args.session, home)
            raise CliError(
                f"ralph-ledger tasks: session {args.session!r} has no task list (run --tasks FILE)"
            )
    emit(render(rows, args.fmt))


def cmd_sql(home: Home, args: argparse.Namespace) -> None:
    """``sql``: print the result of one read-only query as a table, CSV or JSON.

    Ctrl-C interrupts the query (``KeyboardInterrupt``). Raises ``CliError`` (exit 1) if the query
    is refused or fails, ``LedgerError`` if the ledger cannot be opened.
    """
    from ledger.core.output import render
    from ledger.storage.ledger_file import interruptible
    from ledger.storage.query import ReadOnlyViolation, run_readonly

    with open_current(home, args.wait) as ledger:
        try:
            result = interruptible(ledger.con, lambda: run_readonly(ledger.con, args.query))
        except ReadOnlyViolation as exc:
            raise CliError(f"ralph-ledger: {exc}{_hints(exc.detail)}") from None
    emit(render(result, args.fmt))


_HINTS = ("did you mean", "candidate bindings:")
"""The lines of an SQL error's detail that say what was meant: DuckDB's and the source check's."""


def _hints(detail: str) -> str:
    """The hints of an SQL error's detail (``Did you mean 'sessions'?``, DuckDB's ``Candidate
    bindings: "session_id"``) as the end of its one line: `` (did you mean 'sessions'?)``; ``""`` when
    it gives none. The TUI's console shows the detail whole."""
    from ledger.core.errors import printable

    said = [line.strip() for line in detail.splitlines()[1:] if line.strip().lower().startswith(_HINTS)]
    return "".join(f" ({printable(h[:1].lower() + h[1:])})" for h in said)


def cmd_export(home: Home, args: argparse.Namespace) -> None:
    """``export --parquet DIR [--source NAME] [--force] [--full] [--watch SECONDS]``: bring this
    home's events under ``DIR/events/source=NAME/`` up to date (only the changed day partitions,
    every one with ``--full``) and the views under ``DIR/views/``; print one line saying what it did.

    With ``--watch``, exports again every SECONDS until Ctrl-C (``KeyboardInterrupt``: exit 130),
    printing the first round's line and then only the lines of rounds that exported something (and
    of the first round after one that failed); a round that fails prints one line on stderr and the
    next round tries again. Warns on stderr
    when other sources of ``DIR`` hold session ids of this home. Raises ``CliError`` (exit 2) for a
    bad ``--source``; without ``--watch``, ``LedgerError`` if ``DIR`` is not a directory of such a
    dataset, its source folder was written by another home (without ``--force``), or the ledger
    cannot be opened.
    """
    import time

    from ledger.core.errors import LedgerError
    from ledger.storage.export import check_source, default_source

    try:
        source = check_source(default_source() if args.source is None else args.source)
    except LedgerError as exc:
        hint = "" if args.source is not None else " (the host name); pass --source NAME"
        raise CliError(f"ralph-ledger export: --source: {exc}{hint}", 2) from None
    if args.watch is None:
        _export_round(home, args, source, full=args.full, warned=set())
        return
    warned: set[tuple[str, str]] = set()
    full = args.full
    say = True  # whether a round that changed nothing is said: the first, and the first after a failure
    while True:
        try:
            _export_round(home, args, source, full=full, warned=warned, stamp=True, unchanged=say)
            full = say = False  # --full rewrites once; later rounds write what changed
        except BrokenPipeError:
            raise  # the reader of the output went away (``| head``): done
        except Exception as exc:
            print(
                f"ralph-ledger: export: {_round_error(home, exc)}; next round in {args.watch:g} s",
                file=sys.stderr,
            )
            say = True
        time.sleep(args.watch)


def _export_round(
    home: Home,
    args: argparse.Namespace,
    source: str,
    *,
    full: bool,
    warned: set[tuple[str, str]],
    stamp: bool = False,
    unchanged: bool = True,
) -> None:
    """One export of ``cmd_export`` (the ledger opened, ingested and closed again), said in one line
    unless it changed nothing and ``unchanged`` is false; the shared session ids not in ``warned``
    are said on stderr and added to it."""
    from datetime import UTC, datetime

    from ledger.storage.export import export_parquet

    with open_current(home, args.wait) as ledger:
        report = export_parquet(ledger, Path(args.parquet), source, force=args.force, full=full)
    if report.shared and not warned.issuperset(report.shared):
        warned.update(report.shared)
        others = sorted({other for _, other in report.shared})
        in_sources = f"{'source' if len(others) == 1 else 'sources'} {', '.join(others)}"
        print(
            f"ralph-ledger: export: {plural(len(report.shared), 'session id')} of source {source} "
            f"{'is' if len(report.shared) == 1 else 'are'} also in {in_sources} of {args.parquet} "
            f"(e.g. {report.shared[0][0]!r}); "
            "the views merge sessions by id, so give each home's sessions distinct ids",
            file=sys.stderr,
        )
    if not report.changed and not unchanged:
        return
    what = f"export: {plural(report.events, 'event')} of {plural(report.sessions, 'session')}"
    if not report.changed:
        what += f" in {report.folder}: nothing changed since the last export"
    else:
        parts = f"{plural(len(report.written), 'day partition')} written, {len(report.removed)} removed"
        what += f" to {report.folder}: {parts}"
    if stamp:
        what = f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ} {what}"
    emit(what + "\n")


def _round_error(home: Home, exc: Exception) -> str:
    """One line for an error of a ``--watch`` round (a damaged ledger is set aside: the next
    round rebuilds it from the journals); Ctrl-C, seen by DuckDB as its own error, is raised again."""
    from ledger.core import interrupts
    from ledger.core.errors import LedgerError, LedgerLocked, one_line, os_error
    from ledger.storage.journal import JournalError
    from ledger.storage.ledger_file import set_aside

    if interrupts.interrupted():
        raise KeyboardInterrupt from None
    if isinstance(exc, LedgerLocked):
        return f"{exc}; pass --wait SECONDS to wait for it"
    if isinstance(exc, (LedgerError, JournalError, CliError)):
        return one_line(exc)
    if isinstance(exc, OSError):
        return os_error(exc, "exporting")
    if set_aside(home.database, exc):
        return f"the ledger was damaged ({one_line(exc, 200)}): set aside, rebuilt from the journals"
    return f"internal error ({type(exc).__name__}): {one_line(exc, 300)}"


def cmd_schema(home: Home, args: argparse.Namespace) -> None:
    """``schema``: print every view and detector (with its parameters) and its columns and types.

    Reads them from an in-memory ledger, so the home is not touched; raises nothing of its own.
    With ``--portable``, prints them instead as the SQL that ``export`` writes next to a Parquet
    dataset, in ``--dialect`` (DuckDB's by default; a dialect alone implies ``--portable``).
    """
    from ledger.storage.database import Ledger
    from ledger.storage.sql import definitions

    if args.portable or args.dialect:
        from ledger.storage.export import portable_sql

        emit(portable_sql(args.dialect or "duckdb"))
        return
    ledger = Ledger.memory()
    lines: list[str] = []
    for d in definitions():
        target = d.name if d.kind == "view" else f"{d.name}()"
        cols = ledger.con.execute(f"DESCRIBE SELECT * FROM {target}").fetchall()
        lines.append(f"{d.kind} {d.name}" + (f"({d.params})" if d.kind == "detector" else ""))
        lines += [f"  {name:<24} {typ}" for name, typ, *_ in cols]
    emit("\n".join(lines) + "\n")


def cmd_stats(home: Home, args: argparse.Namespace) -> None:
    """``stats``: print the ``loop_metrics`` view (one row per agent), then ``success_by_iterations``,
    then, when the ledger holds a task-list loop, each task's iterations and cost (``TASK_STATS``).

    Both in every format: as tables under a title each, as CSV one after the other (each with its
    header, an empty line between), as JSON one object (view name -> rows). With ``--suggest``, the
    ``limit_suggestions`` view instead, as ``sessions`` prints its rows. Raises ``LedgerError`` if the
    ledger cannot be opened.
    """
    from ledger.core.output import fetch, render, render_many
    from ledger.storage.ledger_file import interruptible

    if args.suggest:
        with open_current(home, args.wait) as ledger:
            sql = "SELECT * FROM limit_suggestions ORDER BY agent, task_kind"
            emit(render(interruptible(ledger.con, lambda: fetch(ledger.con, sql)), args.fmt))
        return
    with open_current(home, args.wait) as ledger:
        parts = interruptible(
            ledger.con,
            lambda: [
                (
                    "loop_metrics",
                    "loops per agent",
                    fetch(ledger.con, "SELECT * FROM loop_metrics ORDER BY agent"),
                ),
                (
                    "success_by_iterations",
                    "success rate by iterations used",
                    fetch(ledger.con, "SELECT * FROM success_by_iterations ORDER BY ALL"),
                ),
                ("tasks", "iterations and cost per task", fetch(ledger.con, TASK_STATS)),
            ],
        )
    if not parts[-1][2].rows:  # no task-list loop in the ledger: no table of tasks
        parts = parts[:-1]
    emit(render_many(parts, args.fmt))


TASK_STATS = (
    "SELECT session_id, task_no, title, status, iterations, tokens, cost_usd, seconds FROM tasks"
    " ORDER BY session_id, task_no"
)
"""``stats``' part on task-list loops (docs/tasks.md): each task's iterations, tokens, cost and time."""
