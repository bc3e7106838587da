"""What every agent's limit recogniser returns and reads: ``RateLimit``, the clock, and the helpers
the agents share (a reset from an epoch, a reset some seconds away, an ANSI-free line with straight
quotes)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, Protocol

Clock = Callable[[], datetime]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True, slots=True)
class RateLimit:
    """A limit the agent reported: what it said, and when it resets (``None``: it did not say)."""

    reason: str
    resets_at: datetime | None = None


class Recogniser(Protocol):
    """One agent's limit reports: in a JSON line of its stream, and as a whole line of text."""

    def from_json(self, data: Mapping[str, object], clock: Clock) -> RateLimit | None:
        """The limit one decoded JSON line (an object) reports, or ``None``."""
        ...

    def from_line(self, text: str, clock: Clock) -> RateLimit | None:
        """The limit a whole line of a failed run's output (stripped) reports, or ``None``."""
        ...


def from_epoch(text: str) -> datetime | None:
    """The UTC moment of a Unix time given as text (``None``: not one)."""
    try:
        return datetime.fromtimestamp(int(text), UTC)
    except (ValueError, OverflowError, OSError):
        return None


def seconds_from(now: datetime, amount: str, unit: str) -> datetime | None:
    """``now`` plus ``amount`` ``s`` or ``ms`` (``None``: not a finite number)."""
    try:
        seconds = float(amount) / (1000.0 if unit == "ms" else 1.0)
        return now + timedelta(seconds=seconds)
    except (ValueError, OverflowError):
        return None


_QUOTES: Final = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def straight(text: str) -> str:
    """``text`` stripped, its typographic quotes made straight: agents word the same message with
    either (Codex 0.169.0 says "You\u2019ve hit your usage limit"), and the forms here are written
    with straight ones."""
    return text.translate(_QUOTES).strip()


def plain(text: str) -> str:
    """``text`` stripped, without terminal colour codes, its quotes straight (``straight``)."""
    return straight(_ANSI.sub("", text))
