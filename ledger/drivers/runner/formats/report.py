"""What an agent's own output says about its run: one ``AgentReport`` per format, read line by line.

Every format module reads the agent's stdout as JSON Lines (or plain text) with the helpers here:
a line that is blank is ignored; a line that is not a JSON object of the expected shape, or whose
``type`` the format does not know, is skipped and counted in ``AgentReport.skipped``. Nothing in
the output can make a parser raise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Generic, TypeVar

import msgspec

from ledger.events import TokenUsage

T = TypeVar("T")


class AgentReport(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What one agent run reported about itself.

    ``text`` is its final text (what promises are looked for in), ``tokens`` what it spent
    (input not read from a cache, output, cache reads, cache writes), ``cost_usd`` the cost it
    reported itself (``None``: it did not), ``model`` the model it named (``""``: none),
    ``tool_count`` its tool calls, ``files_modified`` the files its edit tools named (first seen
    first), ``context_tokens`` the input tokens, cache included, of its last model request (how
    full the context was; 0: not known), ``skipped`` the non-blank lines skipped as malformed or
    of an unknown type, and ``error`` the error its stream said ended the run (``""``: none; a
    failed iteration). ``models`` holds each model's tokens when the agent reported them apart
    (``tokens`` is then their sum, ``model`` the run's own): each is priced at its model (``by_model``).
    """

    text: str = ""
    tokens: TokenUsage = TokenUsage()
    cost_usd: float | None = None
    model: str = ""
    tool_count: int = 0
    files_modified: tuple[str, ...] = ()
    context_tokens: int = 0
    skipped: int = 0
    error: str = ""
    models: tuple[tuple[str, TokenUsage], ...] = ()


def by_model(report: AgentReport) -> tuple[TokenUsage, tuple[tuple[str, TokenUsage], ...]]:
    """The tokens of the report's own ``model`` and those of each other model it spent some on
    (none when it reported no split, or its model is not among them: then all its tokens are its
    model's)."""
    own = dict(report.models).get(report.model)
    if own is None:
        return report.tokens, ()
    return own, tuple((m, t) for m, t in report.models if m != report.model and t != TokenUsage())


Parser = Callable[[str], AgentReport]
"""A format's parser: the agent's whole stdout in, its report out."""


class Lines(Generic[T]):
    """The JSON object lines of an output, decoded with one msgspec type; counts what it skips."""

    def __init__(self, output: str, kind: type[T]) -> None:
        self.output = output
        self.decoder = msgspec.json.Decoder(kind)
        self.skipped = 0

    def __iter__(self) -> Iterator[T]:
        """Each line decoded (blank lines ignored; a line that does not decode is counted)."""
        for text in self.output.splitlines():
            raw = text.strip()
            if not raw:
                continue
            try:
                yield self.decoder.decode(raw)
            except (msgspec.DecodeError, msgspec.ValidationError):
                self.skipped += 1

    def unknown(self) -> None:
        """Count a decoded line whose type the format does not read."""
        self.skipped += 1


def uncached(total_input: int, cached: int) -> int:
    """The input tokens not read from a cache, for agents whose input count includes cache reads."""
    return max(total_input - cached, 0)


@dataclass(frozen=True, slots=True)
class SideRun:
    """One agent run as a format's ``Sidecar`` prepares it: the ``command`` to run, and ``read``,
    which completes the report of its stdout with what the format reads beside it, after the run."""

    command: list[str]
    read: Callable[[AgentReport], AgentReport]


class Sidecar:
    """What a format reads beside its agent's stdout, for one loop (its state lasts the loop's
    runs): nothing, by default. A format whose stream lacks something its agent writes to a file
    (Copilot's tokens: ``ledger.drivers.runner.formats.copilot_usage``) overrides ``run``."""

    def run(self, agent_cmd: Sequence[str]) -> AbstractContextManager[SideRun]:
        """The agent command to run and how to complete its report (the context lasts the run)."""
        return nullcontext(SideRun(list(agent_cmd), lambda report: report))
