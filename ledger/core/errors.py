"""Errors the ledger reports as one line, and one-line explanations of msgspec
validation errors in configuration.

msgspec says ``Expected `int`, got `str` - at `$.rules[1].timeout_s```; users
get ``ralph.toml: rules[1].timeout_s: expected an integer, got 'soon'``. Used
by ``ledger.loop.config.loop_config`` and ``ledger.loop.validate.rules`` alike.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Final


class LedgerError(Exception):
    """A ledger could not be opened or used; the message is one clear line."""


class LedgerLocked(LedgerError):
    """Another process holds the ledger file; ``holder`` says which, as far as known."""

    def __init__(self, path: Path, holder: str) -> None:
        super().__init__(f"ledger {path} is in use by {holder}")
        self.path = path
        self.holder = holder


_AT = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_PATH_TOKEN = re.compile(r"\[(\d+)\]|\.(\w+)|\[\.\.\.\]")
_EXPECTED = re.compile(r"^Expected `(?P<type>[^`]+)`(?P<rest>.*?)(?:, got `(?P<got>[^`]+)`)?$")
_FIELD = re.compile(r"^Object (?P<kind>contains unknown|missing required) field `(?P<field>[^`]+)`$")
_INVALID = re.compile(r"^Invalid (?:enum )?value (?P<value>.+)$")
_TYPE_WORDS: Final[Mapping[str, str]] = {
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "bool": "a boolean",
    "array": "a list",
    "object": "a table",
    "null": "nothing",
}
MISSING: Final = object()

AllowedKeys = Callable[[object, str], list[str]]

# Shows a list or table a few items and levels deep: a YAML alias bomb (a list of lists of the same
# list, ...) would otherwise take minutes to print.
_SHORT: Final = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxtuple, _SHORT.maxdict, _SHORT.maxstring = 3, 6, 6, 6, 40


def explain(
    message: str,
    data: object,
    *,
    choices: Mapping[str, tuple[str, ...]] | None = None,
    allowed_keys: AllowedKeys | None = None,
) -> tuple[str, str]:
    """(key path, problem) for a msgspec ValidationError message about ``data``.
    ``choices`` lists valid values per field name; ``allowed_keys`` names the
    keys valid at a path, for unknown-key errors. Both are one printable line
    (a key may hold a newline)."""
    path, problem = _explain(message, data, choices, allowed_keys)
    return printable(path), printable(problem)


def printable(text: str) -> str:
    """``text`` with line breaks and other unprintable characters escaped, so it stays one line."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


SLIP: Final = 0.6
"""How alike a word and a known one must be (``difflib``'s ratio) for the word to be taken as a slip
of it: ``sesions`` for ``sessions``, ``max_iteration`` for ``max_iterations``."""


def no_session(session_id: str, home: Path, journal: Path | None = None, known: Iterable[str] = ()) -> str:
    """The error for a session id a home does not hold, in the user's words: where it was looked
    for and how to list the sessions there; with ``journal``, that its journal exists but records
    no start (empty, or only damaged lines). Of the ``known`` ids, those the id begins (``tdd`` for
    ``tdd-success``) or is close to (a typo) are named instead of the listing."""
    where = f"{home}: its journal {journal} records no start" if journal is not None else f"{home}"
    meant = meant_sessions(session_id, known)
    if meant:
        return f"no session {session_id!r} in {where}; did you mean {' or '.join(map(repr, meant))}?"
    return f"no session {session_id!r} in {where}; `ralph-ledger sessions` lists them"


class TaskFileError(ValueError):
    """A task file (``run --tasks``) that cannot be read as a task list: one line naming the file,
    where in it (``line 3``, ``userStories[1].title``) and what was expected (``bad_task_file``)."""


def bad_task_file(path: Path | str, where: str, expected: str) -> TaskFileError:
    """The one line of a task file that does not read: ``tasks.md: line 3: expected ...``."""
    at = f": {printable(where)}" if where else ""
    return TaskFileError(f"{printable(str(path))}{at}: {printable(expected)}")


def meant_sessions(session_id: str, known: Iterable[str], most: int = 3) -> list[str]:
    """The ids of ``known`` a user typing ``session_id`` most likely meant: those it begins (a short
    form of a long id), else those close to it (a typo); at most ``most``, nearest first."""
    import difflib

    ids = sorted(set(known) - {session_id})
    starting = [i for i in ids if session_id and i.startswith(session_id)]
    if starting:
        return starting[:most]
    return difflib.get_close_matches(session_id, ids, n=most, cutoff=SLIP)


def closest(word: str, known: Iterable[str]) -> str:
    """The one of ``known`` that ``word`` is most likely a slip for (``SLIP``), or ``""``: what every
    ``did you mean ...?`` names (a command, an option, a choice, a configuration key)."""
    import difflib

    close = difflib.get_close_matches(word, sorted(set(known)), n=1, cutoff=SLIP)
    return close[0] if close else ""


def one_line(error: BaseException | str, limit: int | None = None) -> str:
    """An error as the one line a user is shown: the first non-blank line of its message (an
    exception without one: its class name), unprintable characters escaped, cut to ``limit``
    characters (the last one ``…``); an OS error says where, as ``os_error`` words it. The one way
    every part of ralph-ledger words an error."""
    message = os_error(error) if isinstance(error, OSError) else str(error)
    first = _first_line(message)
    if not first and isinstance(error, BaseException):
        first = type(error).__name__
    return first if limit is None or len(first) <= limit else first[: limit - 1] + "…"


_OPERATION: Final = "ralph_ledger_operation"


@contextmanager
def operation(what: str) -> Iterator[None]:
    """Run the block; an ``OSError`` raised in it that names no file (``os.write`` on a full disk)
    is marked with ``what`` it was doing (``appending to the journal /p/s1.jsonl``), for
    ``os_error`` to name. The innermost operation is the one kept."""
    try:
        yield
    except OSError as exc:
        if not exc.filename and not hasattr(exc, _OPERATION):
            setattr(exc, _OPERATION, what)
        raise


def os_error(exc: OSError, doing: str = "") -> str:
    """An OS error as one line that says where: ``PATH: reason`` when it names a file, else
    ``OPERATION: reason`` (marked by ``operation``, else ``doing``), else the reason alone."""
    if exc.filename:
        where = str(exc.filename) + (f" -> {exc.filename2}" if exc.filename2 else "")
    else:
        where = getattr(exc, _OPERATION, "") or doing
    return f"{printable(where)}: {error_reason(exc)}" if where else error_reason(exc)


def error_reason(exc: BaseException) -> str:
    """An error's own words as one line, without where: an OS error's ``strerror`` (``No such file or
    directory``), else the first non-blank line of its message, else its class name. For messages that
    name the file themselves (``PATH: cannot read: REASON``)."""
    strerror = getattr(exc, "strerror", None)
    if isinstance(strerror, str) and strerror:
        return printable(strerror)
    return _first_line(str(exc)) or type(exc).__name__


def all_lines(error: BaseException | str) -> str:
    """An error's whole message, where a screen has room for more than ``one_line``: every line
    printable (trailing blanks dropped, blank lines between kept), e.g. DuckDB's ``Candidate
    bindings`` and ``LINE 1:`` caret under the first line."""
    lines = [printable(line.rstrip()) for line in str(error).splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines) or one_line(error)


def _first_line(text: str) -> str:
    """The first non-blank line of ``text``, printable."""
    return printable(next((line.strip() for line in text.splitlines() if line.strip()), ""))


def _explain(
    message: str,
    data: object,
    choices: Mapping[str, tuple[str, ...]] | None,
    allowed_keys: AllowedKeys | None,
) -> tuple[str, str]:
    at = _AT.match(message)
    what, path = (at["what"], at["path"] or "") if at else (message, "")
    if m := _FIELD.match(what):
        problem = "unknown key" if m["kind"] == "contains unknown" else "missing required key"
        if m["kind"] == "contains unknown" and allowed_keys and (allowed := allowed_keys(data, path)):
            problem += f"; expected one of {', '.join(allowed)}"
        return f"{path}.{m['field']}", problem
    if m := _EXPECTED.match(what):
        got = _got(data, path, m["got"])
        return path, f"expected {type_words(m['type'])}{m['rest']}" + (f", got {got}" if got else "")
    if m := _INVALID.match(what):
        field = next((name for _, name in reversed(tokens(path)) if name), "")
        valid = (choices or {}).get(field)
        expected = f"expected one of {', '.join(map(repr, valid))}, " if valid else "invalid value, "
        return path, f"{expected}got {m['value']}"
    return path, what[:1].lower() + what[1:]


def tokens(path: str) -> list[tuple[int | None, str]]:
    """``[1].env[...]`` -> [(1, ''), (None, 'env'), (None, '')]."""
    return [(int(i) if i else None, name or "") for i, name in _PATH_TOKEN.findall(path)]


def lookup(data: object, path: str) -> object:
    """The value at a msgspec error path, or ``MISSING`` when it cannot be found."""
    node = data
    for index, name in tokens(path):
        if index is not None and isinstance(node, list | tuple) and index < len(node):
            node = node[index]
        elif name and isinstance(node, Mapping) and name in node:
            node = node[name]
        else:
            return MISSING
    return node


def _got(data: object, path: str, got_type: str | None) -> str:
    """How to show the offending value: its repr when found, else msgspec's type name in words."""
    value = lookup(data, path)
    if value is MISSING:
        return type_words(got_type) if got_type else ""
    text = _SHORT.repr(value) if isinstance(value, list | tuple | dict) else repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def type_words(types: str) -> str:
    """``array | null`` -> ``a list`` (null is how an omitted key reads, never written in TOML)."""
    parts = [p.strip() for p in types.split("|")]
    if len(parts) > 1:
        parts = [p for p in parts if p != "null"]
    return " or ".join(_TYPE_WORDS.get(p, p) for p in parts)
