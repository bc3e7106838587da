"""The prompt of the next iteration: the one rule every driver of a loop follows.

``next_prompt`` composes it: the task, always; then what the loop learned from the iteration (the
hooks' next prompt and every feedback line it does not already say); then, with ``summary = true``,
the summary of the loop so far (``ledger.loop.prompt.summary``); then a person's guidance, once.
The order and why: docs/design/summary-and-prompt.md#the-next-prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Learned(Protocol):
    """What one iteration taught the loop (``ledger.loop.engine.ValidateResult`` is one)."""

    @property
    def iteration(self) -> int:
        """The iteration validated."""

    @property
    def next_prompt(self) -> str:
        """The deciding hook's next prompt (``""`` when it gave none)."""

    @property
    def feedback(self) -> Sequence[str]:
        """The tripped guards' details and the failing rules' messages."""


def next_prompt(task: str, result: Learned, summary: str = "", *, guidance: str = "") -> str:
    """The prompt of the iteration after ``result``: ``task``, then the hooks' next prompt and the
    feedback lines neither it nor ``summary`` contains (``task`` alone when there is neither), then
    ``summary`` (the loop so far) when one is given, then the ``guidance`` a human steered the loop
    with (``ledger.loop.steering.commands``), when there is some."""
    hint = result.next_prompt.strip()
    if hint == task.strip():
        hint = ""  # a hook that answers with the task itself adds nothing
    learned = [hint] if hint else []
    carried = set(summary.splitlines())  # the summary's own bullet lines
    learned += [
        f"- {line}"
        for line in result.feedback
        if line.strip() and line not in hint and f"- {line}" not in carried
    ]
    prompt = task
    if learned:
        prompt = f"{task.rstrip()}\n\nFeedback from iteration {result.iteration}:\n" + "\n".join(learned)
    if summary.strip():
        prompt = f"{prompt.rstrip()}\n\n{summary.strip()}"
    if guidance.strip():
        prompt = f"{prompt.rstrip()}\n\n{GUIDANCE_HEADING}\n{guidance.strip()}"
    return prompt


GUIDANCE_HEADING = "Guidance from the person running this loop:"
"""The line before a human's guidance in a prompt (``ralph-ledger steer`` / ``unblock``)."""
