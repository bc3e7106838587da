"""Notifications that reach people: ``[notify]`` in the configuration (``ledger.loop.config.loop_config``).

Every path that decides a loop's fate appends its deciding events and then calls
:func:`notify_events` with them; when ``[notify]`` asks for it, the notification is handed to a
detached sender (``python -m ledger.notify``, :mod:`.send`), which composes, sends and records it,
so the caller never waits for a network. Nothing here raises. This module imports only the standard
library and the vocabulary at import time, so the Stop hook can import it. The rules:
docs/notifications.md.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from ledger import events as ev

if TYPE_CHECKING:
    import subprocess

COMPONENT: Final = "notify"
"""The ``component`` of the ``error_recorded`` events of notifications."""
WAIT_S: Final = 10.0
"""How long ``ralph-ledger run`` waits, when its loop ends, for the notifications still on their way."""
SAY_WAIT_S: Final = 3.0
"""After this long, that wait is said on stderr (with how to stop it)."""
TEXT_LIMIT: Final = 1000
"""The longest reason or detail a request carries (a notification is read on a phone)."""

_ENDINGS: Final[dict[type[ev.Event], str]] = {
    ev.SessionCompleted: "complete",
    ev.SessionBlocked: "blocked",
    ev.SessionEscalated: "escalated",
}


class Request(msgspec.Struct, frozen=True, kw_only=True):
    """What the sender process is handed on its stdin (never on its command line: the URLs may hold
    secrets): the session's journal, the notice, what decided it and where to send it."""

    journal: str
    session_id: str
    notice: str
    iteration: int = 0
    reason: str = ""
    guard: str = ""
    detail: str = ""
    evidence: str = ""
    urls: list[str] = []


class _Sender(msgspec.Struct, frozen=True):
    """A sender process this process started, and what its notification is about."""

    proc: subprocess.Popen[bytes]
    session_id: str
    notice: str


class _Senders:
    """The sender processes this process started, and whether they report failures on its stderr."""

    echo = False
    pending: list[_Sender] = []  # noqa: RUF012 (one list, this process's)


def notice_of(events: Sequence[ev.Event], on: Sequence[str]) -> str | None:
    """What ``events`` (one append) notify about, of ``on``: the session's end (``complete``,
    ``blocked``, ``escalated``) if it is in ``on``, else ``guard`` when a guard tripped; ``None``
    when nothing in them is wanted."""
    wanted = [_ENDINGS[type(e)] for e in events if type(e) in _ENDINGS]
    if any(isinstance(e, ev.GuardTripped) for e in events):
        wanted.append("guard")
    return next((w for w in wanted if w in on), None)


def request_of(journal: Path, events: Sequence[ev.Event], notice: str, urls: Sequence[str]) -> Request:
    """The sender's request for ``notice`` about ``events``: the session, the iteration, the reason
    and the guard (its detail and evidence) that decided it, each cut to ``TEXT_LIMIT``."""
    trip = next((e for e in events if isinstance(e, ev.GuardTripped)), None)
    end = next((e for e in events if type(e) in _ENDINGS), None)
    first = end or trip or events[0]
    ending = ev.SessionCompleted | ev.SessionBlocked | ev.SessionEscalated
    reason = end.reason if isinstance(end, ending) else ""
    if isinstance(end, ev.SessionCompleted) and not reason and end.promise:
        reason = f"the agent promised {end.promise}"
    evidence = msgspec.json.encode(trip.evidence).decode() if trip is not None and trip.evidence else ""
    return Request(
        journal=str(journal),
        session_id=first.session_id,
        notice=notice,
        iteration=first.iteration,
        reason=reason[:TEXT_LIMIT],
        guard=trip.guard if trip is not None else "",
        detail=trip.detail[:TEXT_LIMIT] if trip is not None else "",
        evidence=evidence[:TEXT_LIMIT],
        urls=list(urls),
    )


def notify_events(journal: Path, events: Sequence[ev.Event], project: Path) -> None:
    """After ``events`` were appended to ``journal``: if they complete, block or escalate the
    session, or a guard tripped, and ``project``'s ``[notify]`` asks for it, start the sender
    (detached; this returns at once). Never raises: a failure is recorded in ``journal``."""
    if not any(type(e) in _ENDINGS or isinstance(e, ev.GuardTripped) for e in events):
        return  # the common case, and all a stop that goes on pays
    from ledger.loop.config.config_file import (
        ConfigError,
        load_notify,
    )  # [notify] alone: light, as the hook needs

    try:
        config = load_notify(project)
        notice = notice_of(events, config.on) if config is not None and config.urls else None
        if config is None or notice is None:
            return
        _spawn(request_of(journal, events, notice, config.urls))
    except ConfigError as exc:
        record_failure(journal, events[0].session_id, f"not sent: {exc}")
    except Exception as exc:  # a notification never breaks the loop it is about
        record_failure(journal, events[0].session_id, f"not sent: {type(exc).__name__}: {exc}")


def _spawn(request: Request) -> None:
    """Start ``python -m ledger.notify`` in its own session, ``request`` on its stdin, its output
    discarded (its stderr is this process's with ``_Senders.echo``)."""
    import subprocess

    _reap()
    root = str(Path(__file__).resolve().parents[2])  # the folder holding ``ledger``, wherever it runs
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger.notify"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=None if _Senders.echo else subprocess.DEVNULL,
        start_new_session=True,  # a hook killed, a terminal closed: the notification still goes
        cwd="/",
        env=env,
    )
    assert proc.stdin is not None
    try:
        proc.stdin.write(msgspec.json.encode(request))  # a few kilobytes: the pipe's buffer holds them
    finally:
        proc.stdin.close()
    _Senders.pending.append(_Sender(proc, request.session_id, request.notice))


def _reap() -> None:
    """Forget (and reap) the senders that have finished."""
    _Senders.pending = [p for p in _Senders.pending if p.proc.poll() is None]


def wait_pending(timeout_s: float = WAIT_S, say_after_s: float = SAY_WAIT_S) -> None:
    """Wait up to ``timeout_s`` in all for the senders this process started (those still running
    then go on by themselves: they are in their own session). A wait longer than ``say_after_s`` is
    said on stderr; Ctrl-C stops it, saying what the loop's notifications were about and that they
    are not all sent (docs/notifications.md): the caller goes on, with the outcome it had."""
    import time

    _reap()
    if not _Senders.pending:
        return
    stopped = False
    with _ctrl_c_raises():
        try:
            _wait_for(time.monotonic() + timeout_s, say_after_s)
        except KeyboardInterrupt:
            stopped = True
    _reap()
    if stopped and _Senders.pending:
        _say(
            f"{_about(_Senders.pending)}; Ctrl-C stopped the wait: {_count()} not sent yet (still on the "
            "way in the background; `notification_sent` in the journal says when one went out)"
        )


def _wait_for(end: float, say_after_s: float) -> None:
    """Wait for the pending senders until ``end`` (monotonic), saying so after ``say_after_s``."""
    import subprocess
    import time

    start, said = time.monotonic(), False
    for sender in _Senders.pending:
        while sender.proc.poll() is None and (left := end - time.monotonic()) > 0:
            if not said and time.monotonic() - start >= say_after_s:
                _say(
                    f"{_about(_Senders.pending)}; waiting up to {left:.0f} s more for {_count()} to be "
                    "sent (Ctrl-C stops waiting)"
                )
                said = True
            step = left if said else min(left, start + say_after_s - time.monotonic())
            with contextlib.suppress(subprocess.TimeoutExpired):
                sender.proc.wait(max(step, 0.0))


def _count() -> str:
    """How many notifications are still on the way: "1 notification", "2 notifications"."""
    n = len([s for s in _Senders.pending if s.proc.poll() is None])
    return f"{n} notification" + ("" if n == 1 else "s")


def _about(senders: Sequence[_Sender]) -> str:
    """What the notifications of ``senders`` are about: the loops that ended, and how."""
    ended = {s.session_id: s.notice for s in senders if s.notice != "guard"}
    if ended:
        return "; ".join(f"loop {sid} finished ({notice})" for sid, notice in ended.items())
    return "; ".join(f"loop {sid}: a guard tripped" for sid in dict.fromkeys(s.session_id for s in senders))


def _say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"ralph-ledger: {line}\n")
        sys.stderr.flush()


@contextlib.contextmanager
def _ctrl_c_raises() -> Iterator[None]:
    """While inside, Ctrl-C raises ``KeyboardInterrupt`` (in the main thread; the console scripts' own
    handler would end the process at once), then the handler before is back."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@contextlib.contextmanager
def reporting() -> Iterator[None]:
    """While inside: each sender says on this process's stderr, in one line, what failed; on the
    way out, wait for the senders (``wait_pending``). ``ralph-ledger run`` runs its loop inside."""
    before = _Senders.echo
    _Senders.echo = True
    try:
        yield
    finally:
        _Senders.echo = before
        wait_pending()


def record_failure(journal: Path, session_id: str, message: str) -> None:
    """Record an ``error_recorded`` of component ``notify`` in ``journal`` (best effort), and say it on
    stderr while ``reporting``."""
    from ledger.storage.journal import Journal, JournalError

    if _Senders.echo:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(f"ralph-ledger: notification for {session_id} {message}\n")

    with contextlib.suppress(OSError, JournalError):
        error = ev.ErrorRecorded(session_id=session_id, component=COMPONENT, message=message)
        Journal(journal).append(error)
