"""``ralph-ledger hook claude-code``: the Claude Code hook's entry (Stop, SubagentStop, StopFailure,
SessionStart). It reads the event, finds its project and home (``locate``) and hands it to the one
that decides: a turn an API error ended or a session's start (``lifecycle``), a
sub-agent's stop (``subagent``), a ledger-native loop (``native``: the loop step decides), or the
``ralph-loop`` plugin drop-in (``dropin``). It never wedges the agent: an internal error allows the
stop, prints one line on stderr and is recorded where it can be (``error_sink``). The rules it
follows with Claude Code 2.1.x: docs/design/claude-code-stop.md."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from ledger.core.home import Home
from ledger.core.sync import sync_file
from ledger.drivers.claude_code.stop.dropin import dropin_stop
from ledger.drivers.claude_code.stop.error_sink import ErrorSink, allowing, record_error
from ledger.drivers.claude_code.stop.locate import (
    LOOP_FILE,
    MAX_STDIN,
    STATE_FILE,
    find_project,
    hook_home,
    new_mark,
)
from ledger.drivers.claude_code.stop.loop_sessions import ledger_session
from ledger.drivers.claude_code.stop.stop_input import HookOutcome, parse_input
from ledger.storage.journal import utc_now


def run(
    raw: bytes,
    *,
    home: Home | None = None,
    clock: Callable[[], datetime] = utc_now,
    home_arg: str | None = None,
    mark: str = "",
) -> HookOutcome:
    """One stop, fail-open: the outcome to print; never raises. ``home`` is the ledger home itself,
    ``home_arg`` the ``--home`` given on the command line (see ``locate.hook_home``), ``mark`` the
    hook run's (``locate.new_mark``; a new one when not given): a stop whose identity is recorded
    already is answered from its journal."""
    sink = ErrorSink()
    try:
        data = parse_input(raw)
        stop_id = data.stop_id(mark or new_mark())
        ledger_session(data.session_id)  # a session id that cannot name a journal is refused here
        project = Path(find_project(lambda: data.cwd))
        home = home or Home.resolve(hook_home(str(project), home_arg))
        sink.guess(home, data.session_id, clock)
        if data.hook_event_name == "SubagentStop":  # recorded for the parent loop; never blocks
            from ledger.drivers.claude_code.stop.subagent import subagent_stop

            return subagent_stop(data, project, home, clock, sink, stop_id)
        if data.hook_event_name in ("StopFailure", "SessionStart"):  # never a stop to decide
            from ledger.drivers.claude_code.stop import lifecycle

            if data.hook_event_name == "StopFailure":
                return lifecycle.stop_failure(data, project, home, clock, sink)
            return lifecycle.session_start(data, project, home, clock)
        if (project / LOOP_FILE).exists():  # a ledger-native loop: the engine decides (imports DuckDB)
            from ledger.drivers.claude_code.stop.native import native_stop

            return native_stop(data, project, home, project / LOOP_FILE, clock, sink, stop_id)
        return dropin_stop(data, project / STATE_FILE, home, clock, sink, stop_id)
    except Exception as exc:  # the agent must never be wedged by the hook
        line = allowing(exc)
        record_error(*sink.target(), line)
        return HookOutcome(stderr=line + "\n")


def main(
    stdin: Any = None,
    stdout: Any = None,
    stderr: Any = None,
    *,
    home: str | None = None,
    raw: bytes | None = None,
    mark: str = "",
) -> int:
    """Run one stop in this process: read stdin (or take ``raw``, stdin already read), print the
    outcome, exit 0. ``home`` is ``--home`` (see ``locate.hook_home``); ``mark`` the hook run's,
    when the warm worker was asked first (``warm.hook_main``)."""
    if raw is None:
        raw = (stdin or sys.stdin.buffer).read(MAX_STDIN + 1)
    outcome = run(raw, home_arg=home, mark=mark)
    out = stdout or sys.stdout
    out.write(outcome.stdout)
    out.flush()  # the answer first: a kill from here on leaves the agent's decision recorded
    (stderr or sys.stderr).write(outcome.stderr)
    for path in outcome.sync:
        sync_file(Path(path))
    return outcome.exit_code
