"""A command line's slips and the words meant: argparse's ``invalid choice`` and ``unrecognized
arguments`` completed with ``did you mean ...?`` (``ledger.cli.parser``'s parser says them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.core.errors import closest

if TYPE_CHECKING:
    import argparse


def command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser | None:
    """The parser of ``parser``'s subcommand ``command`` (None when it has none)."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            found: argparse.ArgumentParser = action.choices[command]
            return found
    return None


def all_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """``parser``'s actions and those of its own subcommands (``checkpoint list``'s options)."""
    import argparse

    nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return [*parser._actions, *(x for a in nested for q in a.choices.values() for x in q._actions)]


_CHOICE = r"invalid choice: (?P<q>['\"]?)(?P<value>.*?)(?P=q) \(choose from (?P<choices>.*)\)$"


def meant_choice(message: str) -> str:
    """For argparse's ``invalid choice: 'sesions' (choose from ...)``: ``; did you mean 'sessions'?``
    when one of the choices is close, else ``""``."""
    import re

    m = re.search(_CHOICE, message)
    if m is None:
        return ""
    choices = [c.strip().strip("'\"") for c in m["choices"].split(",")]
    hint = closest(m["value"], choices)
    return f"; did you mean {hint!r}?" if hint else ""
