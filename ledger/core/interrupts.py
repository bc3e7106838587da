"""Ctrl-C in the console scripts: one line and exit 130, never a traceback, from the first import on.

``ralph-ledger`` and ``ralph-tui`` install ``leave`` as the SIGINT handler before anything else is
imported (``ledger/__init__.py``): Ctrl-C ends the process at once, which also releases the ledger.
The journal and the ledger are crash-safe, so that is all a read needs; a command with something of
its own to clean up takes SIGINT over (``ready``: ``KeyboardInterrupt`` again; the runner's own
handlers)."""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # not ``signal``: it imports enum, which Ctrl-C may hit
import os
import sys
from types import FrameType

PROGRAMS = ("ralph-ledger", "ralph-tui")  # (no ``typing.Final``: the Stop hook never imports typing)
_INTERRUPTED: list[bool] = []


def _leave(signum: int, frame: FrameType | None) -> None:
    os.write(2, f"{os.path.basename(sys.argv[0])}: interrupted\n".encode())
    os._exit(130)


def quiet_start() -> None:
    """In a process started as one of ``PROGRAMS`` whose SIGINT has its default handler, Ctrl-C ends
    it from now on with ``PROGRAM: interrupted`` on stderr and exit 130. Does nothing in any other
    process (a test, a library user) or when SIGINT is ignored (``nohup``, a background job)."""
    if os.path.basename(sys.argv[0]) not in PROGRAMS:
        return
    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        _signal.signal(_signal.SIGINT, _leave)


def _raise(signum: int, frame: FrameType | None) -> None:
    _INTERRUPTED.append(True)
    raise KeyboardInterrupt


def ready() -> None:
    """The caller handles Ctrl-C itself from now on: it raises ``KeyboardInterrupt`` again, and
    ``interrupted()`` remembers it (DuckDB turns it into its own "Query interrupted" error)."""
    if _signal.getsignal(_signal.SIGINT) in (_signal.default_int_handler, _leave):
        _signal.signal(_signal.SIGINT, _raise)


def interrupted() -> bool:
    """Whether Ctrl-C was pressed since ``ready()``."""
    return bool(_INTERRUPTED)
