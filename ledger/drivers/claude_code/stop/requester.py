"""Whether a stop's requester still waits for its answer: the warm worker serves a stop for a
hook process that may be killed meanwhile; nothing is decided for a requester gone
(:func:`decision_point`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator


class RequesterGone(Exception):
    """The hook process that asked the warm worker for this stop has ended: nothing is decided."""


_requester_alive: Callable[[], bool] | None = None


@contextlib.contextmanager
def served_for(alive: Callable[[], bool]) -> Iterator[None]:
    """Run a stop on behalf of another process (the warm worker for a hook): ``alive`` says whether
    that process still waits for the answer (see :func:`decision_point`)."""
    global _requester_alive
    _requester_alive = alive
    try:
        yield
    finally:
        _requester_alive = None


def decision_point() -> None:
    """Called right before a stop records its decision: ``RequesterGone`` when the process that
    asked for the stop has ended (it was killed), so no decision is recorded that no agent gets."""
    if _requester_alive is not None and not _requester_alive():
        raise RequesterGone("the hook process that asked for this stop ended before it was decided")
