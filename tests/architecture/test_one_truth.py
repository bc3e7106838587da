"""One truth per rule (issue 10 §6): each rule is written once, and these checks fail when a second
copy of it is written anywhere in the source (``ledger/``, ``tui/``, ``bench/``, ``sample_sessions/``).

The behaviour of each rule is tested where it lives (``test_monitor``, ``test_cli``, ``test_promises``,
``test_runner``, ``test_config``); these tests hold its callers to the one implementation.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from ledger import events as E
from ledger.core.errors import error_reason, one_line
from ledger.core.home import Home
from ledger.events import ENDING_STATUS, SESSION_STATUSES, session_status
from ledger.storage.database import Ledger
from ledger.storage.journal import Journal

ROOT: Final = Path(__file__).resolve().parents[2]
SQL: Final = ROOT / "ledger" / "storage" / "sql"


def sources(*folders: str) -> Iterator[tuple[str, str]]:
    """(path relative to the repository, text) of every Python file under ``folders``; ``sample_sessions``
    stands for its top-level scripts."""
    for folder in folders:
        pattern = "*.py" if folder == "sample_sessions" else "**/*.py"
        for path in sorted((ROOT / folder).glob(pattern)):
            yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")


ALL: Final = ("ledger", "tui", "bench", "sample_sessions")


def strings(tree: ast.AST) -> Iterator[tuple[ast.Constant, str]]:
    """The plain string constants of a module and their text (not the literal parts of f-strings)."""
    in_fstring = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in in_fstring:
            yield node, node.value


# --- listing a home's journals: ledger.core.home.journals_in -------------------------------------

LISTING: Final = re.compile(r"\b(glob|rglob|scandir|iterdir|listdir)\(|endswith\(")


def test_only_journals_in_lists_journals() -> None:
    """No module but ``ledger/core/home.py`` lists a folder's ``*.jsonl`` files or tests a name for the
    suffix: a home, the monitor, the TUI's replay and watcher, the warm worker and the scripts call
    ``journals_in`` / ``is_journal`` (the warm worker had its own ``scandir`` that counted a folder
    named ``x.jsonl`` as a journal)."""
    found = [
        f"{name}:{n}: {line.strip()}"
        for name, text in sources(*ALL)
        if name != "ledger/core/home.py"
        for n, line in enumerate(text.splitlines(), 1)
        if "jsonl" in line and LISTING.search(line)
    ]
    assert found == []


# --- promise unwrapping: ledger.loop.validate.promises ------------------------------------------------------

REGEX_SYNTAX: Final = re.compile(r"\(\.\*|\(\?|\\s|\[\^|\.\*\?|\(\.\+")
READS: Final = {
    "find",
    "rfind",
    "index",
    "rindex",
    "split",
    "rsplit",
    "partition",
    "rpartition",
    "startswith",
    "endswith",
    "removeprefix",
    "removesuffix",
    "replace",
    "count",
    "compile",
    "match",
    "fullmatch",
    "search",
    "sub",
    "findall",
    "finditer",
}


def _reads_tag(node: ast.AST, tagged: set[int]) -> str:
    """How ``node`` reads a promise tag (a pattern, a string method, an ``in`` test), else ``""``."""
    if isinstance(node, ast.Constant) and id(node) in tagged and REGEX_SYNTAX.search(str(node.value)):
        return "a pattern"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in READS:
        return f".{node.func.attr}(...)" if any(id(arg) in tagged for arg in node.args) else ""
    if isinstance(node, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
        return "an `in` test" if any(id(side) in tagged for side in (node.left, *node.comparators)) else ""
    return ""


def test_only_the_promises_module_reads_promise_tags() -> None:
    """``<promise>`` elements are read by ``ledger.loop.validate.promises`` alone (``unwrap``,
    ``detect_promises``):
    elsewhere a string naming the tag may be shown to a user, never matched, searched or split on. Three
    parsers had drifted (the configuration kept inner whitespace, the detector folded it, the drop-in
    had its own regular expression)."""
    found = []
    for name, text in sources("ledger", "tui"):
        if name == "ledger/loop/validate/promises.py":
            continue
        tree = ast.parse(text)
        tagged = {id(c) for c, value in strings(tree) if "promise>" in value.lower()}
        found += [
            f"{name}:{getattr(node, 'lineno', 0)}: {how}"
            for node in ast.walk(tree)
            if (how := _reads_tag(node, tagged))
        ]
    assert found == []


# --- next-prompt composition: ledger.loop.prompt.next_prompt.next_prompt
# --------------------------------------


def test_only_next_prompt_composes_the_next_prompt() -> None:
    """The runner and the ledger-native hook both call ``next_prompt`` (``test_runner`` checks the
    identity); no other module spells out the prompt's ``Feedback from iteration`` section."""
    found = [
        f"{name}:{n}"
        for name, text in sources(*ALL)
        if name != "ledger/loop/prompt/next_prompt.py"
        for n, line in enumerate(text.splitlines(), 1)
        if "Feedback from iteration" in line
    ]
    assert found == []


# --- project configuration discovery: ledger.loop.config.loop_config.config_path
# ------------------------------


def test_only_config_path_finds_the_configuration() -> None:
    """``ralph.toml`` and ``pyproject.toml`` are looked for, and TOML parsed, in
    ``ledger/loop/config/loop_config.py``
    and its light half ``config_file.py`` alone: ``loop start``'s mode (``has_config``), the runner and
    the hook all go through ``config_path`` (``has_config`` and ``find_config`` used to disagree about a
    broken ``pyproject.toml``)."""
    found = []
    for name, text in sources("ledger", "tui"):
        if name in ("ledger/loop/config/loop_config.py", "ledger/loop/config/config_file.py"):
            continue
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                )
                if "tomllib" in names:
                    found.append(f"{name}:{node.lineno}: imports tomllib")
        for c, value in strings(tree):
            if value in ("ralph.toml", "pyproject.toml"):
                found.append(f"{name}:{c.lineno}: {value!r}")
    assert found == []


# --- session status values: ledger.events.SessionStatus -------------------------------------------


def _status_compares(tree: ast.AST) -> Iterator[tuple[int, ast.expr, str]]:
    """(line, the status side, the string) of every comparison of a ``status`` with a string."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for side in sides:
            is_status = (isinstance(side, ast.Attribute) and side.attr == "status") or (
                isinstance(side, ast.Subscript)
                and isinstance(side.slice, ast.Constant)
                and side.slice.value == "status"
            )
            if not is_status:
                continue
            for other in sides:
                if isinstance(other, ast.Constant) and isinstance(other.value, str):
                    yield node.lineno, side, other.value


def test_session_statuses_are_compared_only_as_the_literal() -> None:
    """Every comparison of a session's status with a string in ``ledger/`` and ``tui/`` names one of
    ``SESSION_STATUSES`` and compares a typed value (``SessionView.status``, ``SessionRow.status`` or
    ``session_status(row["status"])``), never a raw row's ``["status"]``, so that mypy's strict
    equality rejects a misspelt one."""
    found = []
    for name, text in sources("ledger", "tui"):
        for line, side, value in _status_compares(ast.parse(text)):
            if value not in SESSION_STATUSES:
                found.append(f"{name}:{line}: {value!r} is not a SessionStatus")
            if isinstance(side, ast.Subscript):
                found.append(f"{name}:{line}: a raw row's status compared with {value!r}")
    assert found == []


def test_the_sql_speaks_of_statuses_as_the_literal() -> None:
    """The ``sessions`` view maps exactly ``ENDING_STATUS`` (else ``running``), and every status the
    views and detectors compare with is one of ``SESSION_STATUSES``."""
    sessions = (SQL / "views" / "sessions.sql").read_text(encoding="utf-8")
    case = sessions[sessions.index("CASE") : sessions.index("END AS status")]
    assert dict(re.findall(r"WHEN '(\w+)' THEN '(\w+)'", case)) == ENDING_STATUS
    assert re.findall(r"ELSE '(\w+)'", case) == ["running"]
    compared = {
        (path.name, value)
        for path in SQL.rglob("*.sql")
        for value in re.findall(r"\bstatus\s*(?:=|<>|!=)\s*'(\w+)'", path.read_text(encoding="utf-8"))
    }
    assert compared and {value for _, value in compared} <= set(SESSION_STATUSES)


def test_each_ending_event_leaves_its_status(tmp_path: Path) -> None:
    """A session ended by each of ``ENDING_STATUS``'s events has that status in the ``sessions`` view
    (and ``session_status`` accepts it); one with no ending is running."""
    home = Home.resolve(tmp_path / "home")
    endings: dict[str, E.Event] = {
        "session_completed": E.SessionCompleted(session_id="a", iteration=1),
        "session_blocked": E.SessionBlocked(session_id="b", iteration=1),
        "session_escalated": E.SessionEscalated(session_id="c", iteration=1),
    }
    assert set(endings) == set(ENDING_STATUS)
    for event in [*endings.values(), None]:
        sid = event.session_id if event else "d"
        journal = Journal.for_session(home.journals, sid, fsync=False)
        journal.append(
            E.SessionStarted(session_id=sid, agent="bot"), E.IterationStarted(session_id=sid, iteration=1)
        )
        if event is not None:
            journal.append(msgspec_replace(event, sid))
    with Ledger.open(home) as ledger:
        ledger.ingest()
        got = {
            sid: session_status(s)
            for sid, s in ledger.con.execute("SELECT session_id, status FROM sessions").fetchall()
        }
    assert got == {"a": "complete", "b": "blocked", "c": "escalated", "d": "running"}
    with pytest.raises(
        ValueError, match=r"unknown session status 'done' \(expected one of running, complete"
    ):
        session_status("done")


def msgspec_replace(event: E.Event, sid: str) -> E.Event:
    """``event`` for session ``sid``."""
    import msgspec

    return msgspec.structs.replace(event, session_id=sid)


# --- token totals: the turn_tokens view -------------------------------------------------------------


def test_only_turn_tokens_adds_up_a_turns_tokens() -> None:
    """The views add a turn's tokens up in ``turn_tokens.sql`` alone (``sessions`` and ``iterations`` sum
    its column); the TUI draws the monitor's totals and never reads a token part itself."""
    sql = [
        str(path.relative_to(SQL))
        for path in SQL.rglob("*.sql")
        if re.search(r"tokens\.(input|output|cache_read|cache_creation)\b", path.read_text(encoding="utf-8"))
    ]
    assert sql == ["views/turn_tokens.sql"]
    assert [name for name, text in sources("tui") if "cache_read" in text or "cache_creation" in text] == []


def test_only_turn_costs_prices_a_turn() -> None:
    """A turn's cost (reported, else tokens x prices) is computed in ``turn_costs.sql`` alone: no other
    view reads the prices or the reported cost (``sessions`` and ``iterations`` sum its column), and
    nothing in Python multiplies tokens by prices."""
    sql = sorted(
        str(path.relative_to(SQL))
        for path in SQL.rglob("*.sql")
        if re.search(r"\bmodel_prices\b|reported_cost_usd|\bp\.cache_read", path.read_text(encoding="utf-8"))
    )
    assert sql == ["views/turn_costs.sql", "views/turn_tokens.sql"]  # turn_tokens only names the column
    tokens_sql = (SQL / "views" / "turn_tokens.sql").read_text(encoding="utf-8")
    assert "model_prices" not in tokens_sql
    priced = [name for name, text in sources("ledger", "tui") if "calc_price" in text]
    assert priced == ["ledger/storage/prices.py"]  # the rates come from the library, once


# --- one-line error text: ledger.core.errors.one_line / error_reason -------------------------------

ERROR_TYPES: Final = {"BaseException", "Exception", "OSError"}
LINE_SPLITS: Final = {"splitlines", "partition", "split"}


def _error_names(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names in ``func`` that hold an exception: parameters annotated as one, ``except ... as``."""
    names = {
        a.arg
        for a in (*func.args.args, *func.args.kwonlyargs)
        if a.annotation is not None and any(t in ast.unparse(a.annotation) for t in ERROR_TYPES)
    }
    names |= {h.name for h in ast.walk(func) if isinstance(h, ast.ExceptHandler) and h.name}
    return names


def test_only_the_errors_module_words_an_error() -> None:
    """An error's one line is worded by ``ledger.core.errors`` (``one_line``; ``error_reason`` for a
    message that names the file itself): no other function takes an error's message apart into lines,
    and none spells out ``exc.strerror`` in a message (``strerror`` may be ``None``; six helpers had
    drifted: blank first lines, unprintable characters, a missing file name)."""
    found = []
    for name, text in sources("ledger", "tui"):
        if name == "ledger/core/errors.py":
            continue
        tree = ast.parse(text)
        for func in (f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)):
            errors = _error_names(func)
            for node in ast.walk(func):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in LINE_SPLITS
                    and (node.func.attr == "splitlines" or "\\n" in ast.unparse(node))
                    and {n.id for n in ast.walk(node.func.value) if isinstance(n, ast.Name)} & errors
                ):
                    found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr | ast.BoolOp) and any(
                isinstance(n, ast.Attribute) and n.attr == "strerror" for n in ast.walk(node)
            ):
                found.append(f"{name}:{node.lineno}: {ast.unparse(node)[:60]}")
    assert found == []


@pytest.mark.parametrize(
    ("error", "line", "reason"),
    [
        (ValueError("\n  first\nsecond"), "first", "first"),
        (ValueError(""), "ValueError", "ValueError"),
        (
            FileNotFoundError(2, "No such file or directory", "/p/x"),
            "/p/x: No such file or directory",
            "No such file or directory",
        ),
        (OSError("bare\nmore"), "bare", "bare"),
        (ValueError("tab\there\x1b[31m"), "tab\\there\\x1b[31m", "tab\\there\\x1b[31m"),
    ],
)
def test_one_line_and_error_reason_agree(error: BaseException, line: str, reason: str) -> None:
    """``error_reason`` is ``one_line`` without the place an OS error names."""
    assert one_line(error) == line
    assert error_reason(error) == reason


# --- a count and its word: ledger.core.words.plural ----------------------------------------------------

HEDGED_PLURAL: Final = re.compile(r"[A-Za-z]\(s\)")


def test_every_count_is_said_with_plural() -> None:
    """What ralph-tui, the CLI, the hook and the loop say counts in words through ``plural`` ("1
    session", "2 sessions"), never "session(s)" (issue 24): no string in ``tui/`` or ``ledger/``,
    f-strings' text included, hedges a plural."""
    found = []
    for name, text in sources("tui", "ledger"):
        tree = ast.parse(text)
        notes = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}  # docstrings
        found += [
            f"{name}:{node.lineno}: {node.value[:60]!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in notes
            and HEDGED_PLURAL.search(node.value)
        ]
    assert found == []
