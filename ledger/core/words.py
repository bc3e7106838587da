"""Words that go with a count: ``1 session``, ``2 sessions``, never ``session(s)``. The one helper for
them: ralph-tui, the monitor's answers and the CLI's summaries write every count with it."""

from __future__ import annotations


def plural(n: int, word: str, many: str = "") -> str:
    """``n`` and ``word``, plural unless ``n`` is one: ``1 session``, ``2 sessions``; ``many`` is the
    plural when adding an ``s`` is wrong (``plural(3, "entry", "entries")``); thousands separated
    (``1,234 rows``)."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"
