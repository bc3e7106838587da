"""Where an error of a stop is recorded (:class:`ErrorSink`): a hook never wedges the agent, it
allows the stop, prints one line and records what it could."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime

from ledger import events as ev
from ledger.core.errors import one_line
from ledger.core.home import Home
from ledger.drivers.claude_code.stop.loop_sessions import loop_session
from ledger.storage.journal import Journal, JournalError, journal_path, utc_now


class ErrorSink:
    """Where an error of this stop is recorded: the loop's session once it is known; before that,
    the Claude Code session's latest loop while it runs, else the session its next loop will have
    (so an error never lands in a loop that has ended)."""

    def __init__(self) -> None:
        self.journal: Journal | None = None
        self.sid = ""
        self._guess: Callable[[], str] | None = None
        self._clock: Callable[[], datetime] = utc_now
        self._home: Home | None = None

    def use(self, journal: Journal, sid: str) -> None:
        """Record errors in ``journal`` (of session ``sid``) from now on."""
        self.journal, self.sid, self._guess = journal, sid, None

    def use_session(self, home: Home, sid: str, clock: Callable[[], datetime]) -> None:
        """Record errors in the journal of session ``sid`` of ``home`` from now on."""
        self.use(Journal(journal_path(home.journals, sid), clock=clock), sid)

    def guess(self, home: Home, claude_session: str, clock: Callable[[], datetime]) -> None:
        """Until :meth:`use` names the loop's session, find it from the Claude Code session's loops."""
        self._home, self._clock = home, clock
        self._guess = lambda: loop_session(home, claude_session, lambda _: True, clock)[0]

    def target(self) -> tuple[Journal | None, str]:
        """The journal and session an error is recorded in (None when nothing is known yet)."""
        if self._guess is not None and self._home is not None:
            with contextlib.suppress(Exception):  # best effort, like the recording itself
                sid = self._guess()
                return Journal(journal_path(self._home.journals, sid), clock=self._clock), sid
        return self.journal, self.sid


def allowing(exc: BaseException | str) -> str:
    """The one line a stop prints on stderr when ``exc`` (or what it says) makes it allow the stop."""
    return f"ralph-ledger hook: {exc if isinstance(exc, str) else one_line(exc, 300)}; allowing the stop"


def record_error(journal: Journal | None, sid: str, line: str) -> None:
    """Record ``line`` in ``journal`` (of session ``sid``), best effort: the stop is allowed anyway."""
    if journal is None or not sid:
        return
    with contextlib.suppress(OSError, JournalError):  # best effort: the stop is allowed whatever happens
        journal.append(ev.ErrorRecorded(session_id=sid, component="hook claude-code", message=line))
