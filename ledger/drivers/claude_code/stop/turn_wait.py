"""The agent's turn in the transcript, which usually lands 1-100 ms after the Stop event: waited for
up to a deadline (:func:`read_turn`), caught up once at the stop that ends a loop (:func:`catch_up`);
docs/design/claude-code-stop.md."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Final, NamedTuple

from ledger.core.errors import error_reason
from ledger.drivers.claude_code.stop.stop_input import HookInput, resolve_transcript
from ledger.drivers.claude_code.transcript.last_text import find_last_text
from ledger.drivers.claude_code.transcript.scan import Scan, scan

LAG: Final = "hook claude-code: transcript"
"""The ``component`` of the ``error_recorded`` event a stop appends when its turn had not landed in
the transcript by the deadline (:func:`await_turn`)."""


WAIT_ENV: Final = "RALPH_TRANSCRIPT_WAIT_MS"


DEFAULT_WAIT_MS: Final = 2000
"""How long a stop waits for its turn to land in the transcript (docs/design/claude-code-stop.md)."""


POLL_SECONDS: Final = 0.005


END_WAIT_ENV: Final = "RALPH_TRANSCRIPT_END_WAIT_MS"


DEFAULT_END_WAIT_MS: Final = 10000
"""How much longer the stop that ends a loop waits for a turn still missing: nothing reads the
transcript after it (docs/design/claude-code-stop.md)."""


def _ms(name: str, default: int) -> float:
    raw = os.environ.get(name, "").strip()
    return (int(raw) if raw.isascii() and raw.isdigit() else default) / 1000


def wait_seconds() -> float:
    """The bounded wait for a turn that has not landed yet: ``$RALPH_TRANSCRIPT_WAIT_MS`` (a whole
    number of milliseconds), else :data:`DEFAULT_WAIT_MS`."""
    return _ms(WAIT_ENV, DEFAULT_WAIT_MS)


def end_wait_seconds() -> float:
    """The further wait at the stop that ends the loop: ``$RALPH_TRANSCRIPT_END_WAIT_MS``, else
    :data:`DEFAULT_END_WAIT_MS`."""
    return _ms(END_WAIT_ENV, DEFAULT_END_WAIT_MS)


def _words(text: str) -> str:
    return " ".join(text.split())


def holds_turn(turn: Scan | None, last_message: str | None) -> bool:
    """Whether the range ``turn`` read holds the turn the stop is about: with no
    ``last_assistant_message`` (an older Claude Code) whatever is there is taken; else the range must
    end with a finished turn whose last message says the same (whitespace aside)."""
    if last_message is None:
        return True
    if turn is None or not turn.ended:
        return False
    said, seen = _words(last_message), _words(turn.end_text)
    return said == seen or (bool(said) and bool(seen) and (said.endswith(seen) or seen.endswith(said)))


class TurnRead(NamedTuple):
    """What a stop read of its transcript: the path (None when it cannot be read: ``problem`` says
    why), the range read since the offset, and whether that range holds the turn (``landed``)."""

    transcript: Path | None
    problem: str
    turn: Scan | None
    landed: bool


def await_turn(
    given: str | None, key: str, last_message: str | None, start: int, wait: float | None = None
) -> TurnRead:
    """Read the transcript ``given`` (stdin's ``key``) from ``start`` (from 0 again when the file is
    now shorter: rewritten), waiting up to :func:`wait_seconds` for it to hold the turn that
    ``last_message`` ends (:func:`holds_turn`), or to exist at all (``wait``: other seconds). What
    has not landed by then is left past the range's ``end``: the next read from there counts it,
    once (docs/design/claude-code-stop.md)."""
    deadline = time.monotonic() + (wait_seconds() if wait is None else wait)
    while True:
        path, problem = resolve_transcript(given, key)
        turn: Scan | None = None
        if path is not None:
            try:
                turn = scan(path, start if start <= path.stat().st_size else 0)
            except OSError as exc:
                problem = f"transcript {path} cannot be read: {error_reason(exc)}"
        landed = holds_turn(turn, last_message)
        missing = path is None and problem.endswith("does not exist")
        if landed or time.monotonic() >= deadline or not (turn is not None or missing):
            return TurnRead(path, problem, turn, landed)
        time.sleep(POLL_SECONDS)


def lagging(read: TurnRead) -> str:
    """The line recorded when the turn had not landed by the deadline (see :func:`await_turn`)."""
    what = read.problem or f"transcript {read.transcript} did not hold the turn yet"
    waited = int(wait_seconds() * 1000)
    return f"{what} after {waited} ms: its lines are counted when they land, at the next stop"


def catch_up(data: HookInput, read: TurnRead, start: int) -> TurnRead:
    """At the stop that ends a loop, a turn that had not landed: read again from ``start`` (where
    ``read`` began), waiting up to :func:`end_wait_seconds` more; ``read`` itself when it had landed."""
    if read.landed:
        return read
    return await_turn(
        data.transcript_path, "transcript_path", data.last_assistant_message, start, end_wait_seconds()
    )


def read_turn(data: HookInput, start: int) -> tuple[str | None, TurnRead]:
    """The text the stop decides from (stdin's ``last_assistant_message``; from the transcript only
    when a Claude Code too old to send it; None when there is no way to know it) and the transcript
    read for the turn (:func:`await_turn`)."""
    read = await_turn(data.transcript_path, "transcript_path", data.last_assistant_message, start)
    if data.last_assistant_message is not None:
        return data.last_assistant_message, read
    if read.turn is not None and read.turn.last_text:
        return read.turn.last_text, read
    if read.transcript is None:
        return None, read
    return find_last_text(read.transcript).text, read
