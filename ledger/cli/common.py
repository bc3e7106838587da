"""What every ``ralph-ledger`` command shares: its one-line error, writing the output, opening the
ledger with the journals ingested.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from ledger.core.home import Home

if TYPE_CHECKING:  # the heavy modules (DuckDB) load only in the commands that use them
    from ledger.storage.database import Ledger
    from ledger.storage.ingest import IngestReport


MAX_BAD_SHOWN = 20


class CliError(Exception):
    """A one-line error for the user; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def report_ingest(report: IngestReport) -> None:
    """Say on stderr which journals an ingest re-read, which bad lines it skipped (the first few)
    and its notes (a model whose price is not known)."""
    for name in report.reset:
        print(f"ralph-ledger: journal {name} was truncated or replaced; re-ingested it", file=sys.stderr)
    for bad in report.bad_lines[:MAX_BAD_SHOWN]:
        print(f"ralph-ledger: skipped bad line {bad}", file=sys.stderr)
    more = len(report.bad_lines) - MAX_BAD_SHOWN
    if more > 0:
        print(f"ralph-ledger: ... and {more} more bad lines (SELECT * FROM ingest_errors)", file=sys.stderr)
    for name, where in report.broken:
        print(f"ralph-ledger: journal {name}: hash chain broken at {where}", file=sys.stderr)
    for note in report.notes:  # a model without a known price, said once
        print(f"ralph-ledger: note: {note}", file=sys.stderr)


def open_current(home: Home, wait: float) -> Ledger:
    """The home's ledger with the journals ingested. If another process holds the file, or the
    home cannot be written, an in-memory ledger read from the journals instead (said in one line on
    stderr); a home that does not exist yet (the default one before any loop) is an empty ledger, and
    is not created."""
    from ledger.storage.database import Ledger

    if not home.root.exists():
        return Ledger.memory(None)
    ledger = Ledger.open(home, wait=wait, fallback=True)
    if ledger.path is not None:
        report_ingest(ledger.ingest())
    return ledger


def emit(text: str) -> None:
    """Write ``text`` to stdout, now: an error writing it (stdout closed, a full disk) raises
    ``CliError`` naming the output; a reader that went away (``| head``) raises ``BrokenPipeError``."""
    out = sys.stdout
    if out is None:
        raise CliError("ralph-ledger: cannot write the output: stdout is closed")
    try:
        out.write(text)
        out.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError) as exc:  # ValueError: the file object is closed
        from ledger.core.errors import error_reason

        raise CliError(
            f"ralph-ledger: cannot write the output to {_stdout_name()}: {error_reason(exc)}"
        ) from None


def _stdout_name() -> str:
    """``stdout`` and, when it is a file or device, its path (``stdout (/dev/full)``)."""
    try:
        target = os.readlink("/proc/self/fd/1")
    except OSError:
        return "stdout"
    return f"stdout ({target})" if target.startswith("/") else "stdout"


def unknown_session(session: str, home: Home) -> CliError:
    """The error for a session id the home does not hold, in the user's words: the ids of its
    journals that were likely meant, else how to list them."""
    from ledger.core.errors import no_session
    from ledger.core.home import journals_in

    try:
        known = [path.stem for path in journals_in(home.journals)]
    except OSError:  # an unreadable home: the plain error
        known = []
    return CliError(f"ralph-ledger: {no_session(session, home.root, known=known)}")
