"""Claude Code's other hook events for a loop: ``StopFailure`` (a turn an API error ended, usage
limits included) and ``SessionStart`` (a session started, resumed, forked, cleared or compacted).
They translate; the loop step decides (``LoopSession.turn_failed``). Neither ever blocks: Claude Code
ignores a StopFailure's answer, and a SessionStart prints only the reminder of a running loop (its
stdout is shown to the agent). The rules and what Claude Code 2.1.328 sends:
docs/design/claude-code-hooks.md."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ledger.core.home import Home
from ledger.drivers.claude_code.stop.error_sink import ErrorSink
from ledger.drivers.claude_code.stop.locate import LOOP_FILE
from ledger.drivers.claude_code.stop.loop_file import read_loop_file
from ledger.drivers.claude_code.stop.loop_sessions import (
    DROP_IN,
    LoopRecord,
    belongs,
    loop_session,
    read_record,
)
from ledger.drivers.claude_code.stop.stop_input import HookInput, HookOutcome
from ledger.storage.journal import Journal, journal_path

if TYPE_CHECKING:
    from ledger import events as ev
    from ledger.loop.decide.failures import FailedTurn

COMPONENT: Final = "claude-code StopFailure"
"""The component an API error other than a limit is recorded under."""
LIMIT_ERRORS: Final = frozenset({"rate_limit"})
"""The StopFailure ``error`` kinds that are a usage or rate limit (2.1.328's list: ``rate_limit``,
``overloaded``, ``authentication_failed``, ``billing_error``, ``server_error``, ... ``unknown``)."""
BACKOFF_S: Final = 60.0
"""The first wait of a limit that gave no reset time (the runner's ``--rate-limit-wait`` default)."""
REMINDED: Final = frozenset({"resume", "compact"})
"""The SessionStart sources after which a running loop's session is told where its loop is."""


def running_loop(data: HookInput, home: Home, clock: Callable[[], datetime]) -> tuple[str, LoopRecord]:
    """The ledger session of the Claude Code session's running loop (either mode) and its record;
    ``""`` when there is none."""
    sid, record, _ = loop_session(home, data.session_id, lambda _: True, clock)
    return (sid if record.started and not record.ended else ""), record


def stop_failure(
    data: HookInput, project: Path, home: Home, clock: Callable[[], datetime], sink: ErrorSink
) -> HookOutcome:
    """Record a turn an API error ended in the session's running loop (nothing without one): through
    the loop step for a ledger-native loop, straight into the journal for a drop-in one (whose
    rules are the plugin's, with no engine)."""
    sid, record = running_loop(data, home, clock)
    if not sid:
        return HookOutcome()
    sink.use_session(home, sid, clock)
    journal = Journal(journal_path(home.journals, sid), clock=clock)
    synced = (str(journal.path),)
    if record.config.get("mode") == DROP_IN:
        from ledger.loop.decide.failures import failure_events
        from ledger.storage.fold import events_of

        failed = failed_turn(data, list(events_of(journal.path)), clock)
        journal.append(*failure_events(sid, record.iteration or 1, failed, COMPONENT))
        return HookOutcome(sync=synced)
    from ledger.loop.engine import Engine  # only here: a StopFailure of a running ledger-native loop
    from ledger.loop.step import LoopSession

    engine = Engine(home, work_dir=project, clock=clock, fsync=False)
    session = LoopSession(engine, sid, "")
    session.turn_failed(failed_turn(data, session.events(), clock), COMPONENT)
    return HookOutcome(sync=synced)


def failed_turn(data: HookInput, events: list[ev.AnyEvent], clock: Callable[[], datetime]) -> FailedTurn:
    """The StopFailure read as a ``FailedTurn``: a limit when its ``error`` is one or its message is
    one of Claude Code's limit reports (``ledger.drivers.runner.limits.claude``: the reset time, if
    it gave one), with the runner's wait (``wait_s``)."""
    from ledger.drivers.runner.limits import claude, wait_s
    from ledger.drivers.runner.limits.limit import RateLimit
    from ledger.loop.decide.failures import FailedTurn, limited_in_a_row

    error = (data.error or "unknown").strip() or "unknown"
    message = (data.last_assistant_message or data.error_details or "").strip()
    limit = claude.from_line(message, clock) if message else None
    if limit is None and error in LIMIT_ERRORS:
        limit = RateLimit(message or error)
    if limit is None:
        return FailedTurn(error=error, message=message)
    iteration = max((e.iteration for e in events), default=0)
    attempt = limited_in_a_row(events, iteration)
    wait = wait_s(limit, clock(), attempt, BACKOFF_S)
    return FailedTurn(
        error=error,
        message=message,
        limited=True,
        reason=limit.reason,
        resets_at=limit.resets_at,
        wait_s=wait,
    )


def session_start(data: HookInput, project: Path, home: Home, clock: Callable[[], datetime]) -> HookOutcome:
    """A resumed or compacted session that owns a running ledger-native loop is reminded of it (what
    it prints reaches the agent); every other start prints nothing and changes nothing."""
    if data.source not in REMINDED:
        return HookOutcome()
    loop = read_loop_file(project / LOOP_FILE)
    owned = loop is not None and loop.claude_session_id == data.session_id
    if loop is None or not owned or not belongs(loop.ledger_session, data.session_id):
        return HookOutcome()  # no loop, or another session's, or one not claimed yet
    sid = loop.ledger_session
    record = read_record(Journal(journal_path(home.journals, sid), clock=clock))
    if not record.started or record.ended:
        return HookOutcome()
    from ledger.loop.engine import Engine
    from ledger.loop.step import LoopSession

    session = LoopSession(Engine(home, work_dir=project, clock=clock, fsync=False), sid, loop.prompt)
    n = record.iteration or 1
    head = f"[ralph-ledger] This session runs the loop {sid}: iteration {n} goes on."
    if data.source == "compact":  # the summary may have lost what the iteration asks
        return HookOutcome(stdout=f"{head} What it asks:\n\n{session.prompt_of(n)}\n")
    return HookOutcome(stdout=head + "\n")
