"""The sender process (``python -m ledger.notify``): one notification, composed and sent.

It reads a :class:`ledger.notify.Request` on stdin, reads the session's row of the ``sessions`` view
from its journal (task, status, iterations, cost: one truth with ``ralph-ledger show``), composes the
title and body (:func:`compose`), sends them to each URL with apprise, one URL at a time so that
one that fails does not hide the others, and records a ``notification_sent`` event (services by
scheme only, never a URL) and an ``error_recorded`` (component ``notify``) per URL that failed. A
failure is also one line on stderr (the caller's own stderr for ``ralph-ledger run``, else nowhere).
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
from pathlib import Path
from typing import Any, Final

import msgspec

from ledger import events as ev
from ledger.core.errors import one_line
from ledger.core.money import usd
from ledger.notify import COMPONENT, Request
from ledger.storage.journal import Journal, JournalError

TITLES: Final = {"complete": "completed", "blocked": "blocked", "escalated": "escalated"}
BODY_LIMIT: Final = 2000
"""The longest body sent (a chat message, a phone's notification)."""


def compose(request: Request, row: dict[str, Any] | None) -> tuple[str, str]:
    """The title (``ralph-ledger: <session> escalated``) and body of ``request``'s notification:
    the task (its first line, short), the status and iteration, the reason, the guard with its
    detail and evidence, the agent, tokens and cost when known. ``row`` is the session's row of the
    ``sessions`` view (``None``: not readable; the request alone is told)."""
    sid, notice = request.session_id, request.notice
    what = TITLES.get(notice) or f"guard {request.guard or ''} tripped".replace("  ", " ")
    title = f"ralph-ledger: {sid} {what}"
    row = row or {}
    lines = [f"Session {sid}: {what}"]
    task = str(row.get("task") or "").strip().splitlines()
    if task:
        lines.append(f"Task: {_cut(task[0], 120)}")
    status = row.get("status") or ("complete" if notice == "complete" else notice)
    of = f" of {row['max_iterations']}" if row.get("max_iterations") else ""
    lines.append(f"Status: {status} at iteration {request.iteration}{of}")
    if request.reason:
        lines.append(f"Reason: {request.reason}")
    if request.guard:
        said = request.detail and request.detail not in request.reason  # not twice over
        lines.append(f"Guard: {request.guard}" + (f": {request.detail}" if said else ""))
    if request.evidence:
        lines.append(f"Evidence: {request.evidence}")
    if row.get("agent"):
        lines.append(f"Agent: {row['agent']}")
    spent = [f"{int(row['tokens']):,} tokens"] if row.get("tokens") else []
    if row.get("cost_usd") is not None:
        spent.append(f"cost {usd(float(row['cost_usd']))}")
    if spent:
        lines.append("Spent: " + ", ".join(spent))
    return title, _cut("\n".join(lines), BODY_LIMIT)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def session_row(journal: Path, session_id: str) -> dict[str, Any] | None:
    """The session's ``sessions`` row, read from its journal (``None`` when it cannot be read)."""
    try:
        from ledger.core.home import Home
        from ledger.storage.fold import ledger_of

        rows = ledger_of(journal, Home(journal.parent.parent)).rows(
            "SELECT * FROM sessions WHERE session_id = ?", [session_id]
        )
    except Exception:  # the notification goes out with what the request says
        return None
    return dict(rows[0]) if rows else None


def scheme(url: str) -> str:
    """A URL's scheme (``slack``, ``ntfy``, ``json``): what a record may say of it."""
    return url.partition("://")[0].strip().lower() or "?"


TIMEOUT: Final = re.compile(r"\((read|connect) timeout=([0-9.]+)\)")
"""How requests (under apprise) says which wait ran out, and how long it was."""


class _Said(logging.Handler):
    """What apprise said at WARNING and above while sending to one URL (its reasons for a failure),
    and the wait that ran out when its socket timed out (``read`` or ``connect``, seconds)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)  # its socket's own error is said at DEBUG only
        self.lines: list[str] = []
        self.timed_out: tuple[str, float | None] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the record's message (a DEBUG one only when it says a socket timed out)."""
        message = record.getMessage()
        if record.levelno >= logging.WARNING:
            self.lines.append(message)
        elif "timed out" in message and message.startswith("Socket Exception"):
            found = TIMEOUT.search(message)
            self.timed_out = (found[1], float(found[2])) if found else ("read", None)


def _where(url: str, plugin: Any) -> str:
    """``scheme://host[:port]`` of a URL when apprise shows its host as it is in its private form (a
    web hook's server), else ``scheme://`` (the host part of ``slack://`` or ``discord://`` is a
    token: apprise masks it, and so does this)."""
    from urllib.parse import urlsplit

    shown = f"{scheme(url)}://"
    with contextlib.suppress(Exception):
        private = urlsplit(plugin.url(privacy=True))
        host = str(getattr(plugin, "host", "") or "")
        if host and private.hostname and private.hostname.lower() == host.lower():
            shown += private.netloc.rpartition("@")[2]
    return shown


def _timed_out(plugin: Any, timed_out: tuple[str, float | None]) -> str:
    """A timeout said as one: the service, the wait that ran out and how to make it longer."""
    wait, seconds = timed_out
    key = "cto" if wait == "connect" else "rto"
    if seconds is None:
        seconds = float(getattr(plugin, f"socket_{wait}_timeout", 0) or 0)
    service = str(getattr(plugin, "service_name", "") or "the service")
    what = "could not be reached" if wait == "connect" else "did not answer"
    return f"timed out: {service} {what} within {seconds:g} s (?{key}=SECONDS in the URL waits longer)"


def deliver(url: str, title: str, body: str, notice: str) -> str:
    """Send to one apprise URL: ``""`` when it went out, else why not, in apprise's words when it
    gave some (one line, the URL itself left out: it may hold a secret); a timeout is said as one,
    naming the service, its host when that is no secret (``_where``) and the seconds waited."""
    import apprise

    kinds = {"complete": apprise.NotifyType.SUCCESS, "escalated": apprise.NotifyType.FAILURE}
    said = _Said()
    log = logging.getLogger("apprise")
    level = log.level
    log.addHandler(said)
    log.setLevel(logging.DEBUG)
    where = f"{scheme(url)}://"
    try:
        sender = apprise.Apprise()
        if not sender.add(url):
            return f"{where}: not a URL apprise understands (see its list of services)"
        plugin = sender[0]
        kind = kinds.get(notice, apprise.NotifyType.WARNING)
        if sender.notify(title=title, body=body, notify_type=kind):
            return ""
        if said.timed_out is not None:
            return f"{_where(url, plugin)}: {_timed_out(plugin, said.timed_out)}"
        why = said.lines[-1] if said.lines else "the service did not accept the notification"
    except Exception as exc:
        why = one_line(exc, 200)
    finally:
        log.removeHandler(said)
        log.setLevel(level)
    return f"{where}: {one_line(why.replace(url, '<url>'), 200)}"


def send(request: Request) -> int:
    """Compose, send to every URL, record; the number of URLs that failed."""
    journal = Path(request.journal)
    title, body = compose(request, session_row(journal, request.session_id))
    failures = [f for f in (deliver(url, title, body, request.notice) for url in request.urls) if f]
    sid, n = request.session_id, request.iteration
    events: list[ev.Event] = [
        ev.NotificationSent(
            session_id=sid,
            iteration=n,
            notice=request.notice,
            title=title,
            body=body,
            services=[scheme(u) for u in request.urls],
            targets=len(request.urls),
            failed=len(failures),
        )
    ]
    events += [
        ev.ErrorRecorded(session_id=sid, iteration=n, component=COMPONENT, message=f"not sent: {f}")
        for f in failures
    ]
    with contextlib.suppress(OSError, JournalError):
        Journal(journal).append(*events)
    for failure in failures:
        sys.stderr.write(f"ralph-ledger: notification for {sid} not sent: {failure}\n")
    return len(failures)


def main() -> int:
    """``python -m ledger.notify``: the request on stdin; exit 1 when a URL failed."""
    logging.getLogger("apprise").propagate = False  # what it says of a failure is recorded instead
    try:
        request = msgspec.json.decode(sys.stdin.buffer.read(), type=Request)
    except msgspec.DecodeError as exc:
        sys.stderr.write(f"ralph-ledger notify: a bad request on stdin: {one_line(exc, 200)}\n")
        return 2
    return 1 if send(request) else 0
