"""Completion promises: find ``<promise>X</promise>`` in agent output (signals: docs/design/signals.md).

What counts as a promise (the tags, what hides one: comments, fences, inline code), the three
vocabularies and their signals, custom phrases, and the reason and context captured after a
promise: ``docs/promises.md``. Detection is linear in the text's length and never raises.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import Final, Literal

import msgspec

from ledger.events import PromiseDetected, Signal

Vocabulary = Literal["standard", "loop", "custom"]

__all__ = [
    "CUSTOM_ACTION",
    "HARNESS_ACTIONS",
    "PRIORITY",
    "VOCABULARY",
    "Detection",
    "Promise",
    "Vocabulary",
    "detect_promises",
    "normalise",
    "strongest",
    "to_event",
    "unwrap",
]


class _Word(msgspec.Struct, frozen=True, gc=False):
    word: str
    vocabulary: Vocabulary
    signal: Signal
    harness_action: str


_WORDS: Final[tuple[_Word, ...]] = (
    _Word("COMPLETE", "standard", "COMPLETE", "iteration_complete"),
    _Word("BLOCKED", "standard", "BLOCKED", "task_update(blocked)"),
    _Word("ESCALATE", "standard", "ESCALATE", "task_update(blocked)"),
    _Word("LOOP_DONE", "loop", "COMPLETE", "exit with success"),
    _Word("LOOP_CONTINUE", "loop", "CONTINUE", "start next iteration"),
    _Word("LOOP_BLOCKED", "loop", "BLOCKED", "pause, request human input"),
    _Word("LOOP_ERROR", "loop", "ESCALATE", "exit with error status, preserve state"),
)
_BY_KEY: Final[dict[str, _Word]] = {w.word.casefold(): w for w in _WORDS}
CUSTOM_ACTION: Final = "allow stop, end loop"

#: Every known word and its signal (custom phrases aside).
VOCABULARY: Final[dict[str, Signal]] = {w.word: w.signal for w in _WORDS}
#: What the harness does on each known word.
HARNESS_ACTIONS: Final[dict[str, str]] = {w.word: w.harness_action for w in _WORDS}
#: Which of several promises decides: BLOCKED > COMPLETE > ESCALATE > CONTINUE
#: (docs/design/signals.md#promise-priority).
PRIORITY: Final[dict[Signal, int]] = {"BLOCKED": 3, "COMPLETE": 2, "ESCALATE": 1, "CONTINUE": 0}


class Promise(msgspec.Struct, frozen=True):
    """One promise found in agent output.

    ``word`` is the canonical word (``COMPLETE``, ``LOOP_DONE``) or, for a
    custom phrase, the phrase as configured (whitespace collapsed); ``raw`` is
    the tag text exactly as written and ``offset`` where it starts in the text.
    """

    word: str
    vocabulary: Vocabulary
    signal: Signal
    harness_action: str
    reason: str
    summary: str
    context: dict[str, str]  # compared, not hashed
    raw: str
    offset: int

    def __hash__(self) -> int:
        return hash(
            (
                self.word,
                self.vocabulary,
                self.signal,
                self.harness_action,
                self.reason,
                self.summary,
                self.raw,
                self.offset,
            )
        )


class Detection(msgspec.Struct, frozen=True):
    """Everything :func:`detect_promises` found, in text order.

    ``unknown`` holds the (whitespace-collapsed) text of promise tags that
    named no known word or configured phrase.
    """

    promises: list[Promise]
    unknown: list[str]


def normalise(phrase: str) -> str:
    """Collapse runs of whitespace to one space and strip the ends."""
    return " ".join(phrase.split())


def unwrap(text: str, *, plugin: bool = False) -> str:
    """The promise ``text`` states: the content of its first ``<promise>`` element (the whole text
    when it has none), trimmed, runs of whitespace collapsed to one space.

    ``'<promise> ALL  GREEN </promise>'`` and ``'ALL GREEN'`` both give ``'ALL GREEN'``. This is how
    a configured phrase is read, and (``plugin=True``) what the ``ralph-loop`` plugin compares with
    its completion promise (``perl -0777 -pe 's/.*?<promise>(.*?)<\\/promise>.*/$1/s; s/^\\s+|\\s+$//g;
    s/\\s+/ /g'``): the same, but tag names only in lower case and only ASCII whitespace. Unlike
    :func:`detect_promises`, code blocks and comments are not looked at.
    """
    if plugin:
        m = _FIRST_TAG_PLUGIN().search(text)
        inner = m.group(1) if m else text
        return _ASCII_SPACE_RUN().sub(" ", inner.strip(_ASCII_SPACE))
    m = _FIRST_TAG().search(text)
    return normalise(m.group(1) if m else text)


# --- scanning ---------------------------------------------------------------


def _lazy(pattern: str, flags: int = 0) -> Callable[[], re.Pattern[str]]:
    """``pattern`` compiled on the first call, then that same object: a Stop hook (a fresh process on
    every stop) compiles only the expressions its text needs."""
    return cache(lambda: re.compile(pattern, flags))


# Prefix allowed before a fence: indentation (any, for nested list items) and
# block quote markers.
_PREFIX: Final = r"[ \t>]*+"
_FENCE_LINE: Final = rf"^{_PREFIX}(?:`{{3,}}+[^`\n]*+|~{{3,}}+[^\n]*+)$"
_SCAN: Final = _lazy(
    rf"(?P<fence>^{_PREFIX}(?:(?P<bt>`{{3,}}+)[^`\n]*+|(?P<tl>~{{3,}}+)[^\n]*+)$)"
    r"|(?P<comment><!--)"
    r"|(?P<ticks>`++)"
    r"|(?P<tag>(?i:<promise>)(?P<body>[^<]*+)(?i:</promise>))",
    re.MULTILINE | re.ASCII,
)
_COMMENT_END: Final = _lazy(r"-->")
# A paragraph ends at a blank line or a line opening a fence.
_PARAGRAPH_END: Final = _lazy(rf"\n[ \t\r]*+(?:\n|$)|{_FENCE_LINE}", re.MULTILINE)
_RUN: Final = _lazy(r"`++")
_FENCE_CLOSE: Final = _lazy(rf"^{_PREFIX}(`{{3,}}+|~{{3,}}+)[ \t]*+\r?$", re.MULTILINE)
# The first promise element of a text, for ``unwrap``: tag names in any case (ours) or exactly as
# written (the ralph-loop plugin's perl); its content may hold anything, ``<`` included.
_FIRST_TAG: Final = _lazy(r"<promise>(.*?)</promise>", re.IGNORECASE | re.ASCII | re.DOTALL)
_FIRST_TAG_PLUGIN: Final = _lazy(r"<promise>(.*?)</promise>", re.DOTALL)
_ASCII_SPACE: Final = " \t\n\r\f\v"
_ASCII_SPACE_RUN: Final = _lazy(r"\s+", re.ASCII)


def _fence_end(text: str, pos: int, char: str, length: int) -> int:
    """End of the line closing a fence of ``length`` ``char``s opened before ``pos`` (or the text's end)."""
    for m in _FENCE_CLOSE().finditer(text, pos):
        run = m.group(1)
        if run[0] == char and len(run) >= length:
            return m.end()
    return len(text)


class _Paragraph(msgspec.Struct):
    """Backtick runs of one paragraph, for matching code span openers to closers."""

    end: int
    runs: dict[int, list[int]]  # run length -> starts, ascending


class _Tag(msgspec.Struct, frozen=True, gc=False):
    start: int
    end: int
    body: str


def _paragraph(text: str, pos: int) -> _Paragraph:
    m = _PARAGRAPH_END().search(text, pos)
    end = m.start() if m else len(text)
    runs: dict[int, list[int]] = {}
    for r in _RUN().finditer(text, pos, end):
        runs.setdefault(r.end() - r.start(), []).append(r.start())
    return _Paragraph(end, runs)


def _scan(text: str) -> tuple[list[_Tag], list[tuple[int, int]]]:
    """Promise tags outside comments and code, and the hidden intervals."""
    tags: list[_Tag] = []
    hidden: list[tuple[int, int]] = []
    para: _Paragraph | None = None
    n = len(text)
    pos = 0
    while pos < n:
        m = _SCAN().search(text, pos)
        if m is None:
            break
        start = m.start()
        if m.start("tag") >= 0:
            tags.append(_Tag(start, m.end(), m.group("body")))
            pos = m.end()
        elif m.start("fence") >= 0:
            char, length = ("`", len(m.group("bt"))) if m.start("bt") >= 0 else ("~", len(m.group("tl")))
            pos = _fence_end(text, m.end(), char, length)
            hidden.append((start, pos))
        elif m.start("comment") >= 0:
            close = _COMMENT_END().search(text, start + 4)
            pos = close.end() if close else n
            hidden.append((start, pos))
        else:  # an inline code span opener, or literal backticks
            from bisect import bisect_right  # here: most texts have no backticks (saves a stop hook 0.3 ms)

            length = m.end() - start
            if para is None or start >= para.end:
                para = _paragraph(text, start)
            starts = para.runs.get(length, [])
            i = bisect_right(starts, start)
            if i < len(starts):
                pos = starts[i] + length
                hidden.append((start, pos))
            else:
                pos = m.end()
    return tags, hidden


def _is_hidden(hidden_starts: list[int], hidden: list[tuple[int, int]], pos: int) -> bool:
    from bisect import bisect_right

    i = bisect_right(hidden_starts, pos) - 1
    return i >= 0 and pos < hidden[i][1]


# --- capture ----------------------------------------------------------------

_KEY: Final = r"(?:\*\*|__)?+(?P<key>reason|summary|blocking[ \t]++issue)(?:\*\*|__)?+[ \t]*+:(?:\*\*|__)?+"
_KEY_LINE: Final = _lazy(
    rf"^[ \t>]*+(?:[-*+][ \t]++)?+{_KEY}[ \t]*+(?P<value>[^\n]*)", re.MULTILINE | re.IGNORECASE | re.ASCII
)
_KEY_INLINE: Final = _lazy(rf"[ \t]*+{_KEY}[ \t]*+(?P<value>[^\n]*)", re.IGNORECASE | re.ASCII)
_STOP_LINE: Final = _lazy(
    rf"[ \t>\r]*+(?:$|<|(?:[-*+][ \t]++)?+{_KEY}|`{{3}}|~{{3}})", re.IGNORECASE | re.ASCII
)
_CONTEXT_OPEN: Final = _lazy(r"<context>", re.IGNORECASE | re.ASCII)
_CONTEXT_CLOSE: Final = _lazy(r"</context>", re.IGNORECASE | re.ASCII)
_CONTEXT_LINE: Final = _lazy(r"[ \t]*+([A-Za-z0-9_][A-Za-z0-9_.\-]*+)[ \t]*+:(.*)")


def _continued(text: str, line_end: int, end: int, first: str, hidden: Callable[[int], bool]) -> str:
    """``first`` plus the continuation lines after ``line_end`` (up to ``end``)."""
    parts = [first.strip()] if first.strip() else []
    pos = line_end
    while pos < end and text[pos] == "\n":
        nxt = text.find("\n", pos + 1, end)
        stop = end if nxt < 0 else nxt
        line = text[pos + 1 : stop]
        if _STOP_LINE().match(line) or hidden(pos + 1):
            break
        parts.append(line.strip())
        pos = stop
    return "\n".join(parts)


def _key_of(m: re.Match[str]) -> str:
    return " ".join(m.group("key").lower().split())


def _parse_context(body: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in body.splitlines():
        m = _CONTEXT_LINE().match(line)
        if m is None:
            continue
        value = m.group(2).strip()
        if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
            value = value[1:-1]
        out[m.group(1).lower()] = value
    return out


def _capture(
    text: str, start: int, end: int, hidden_starts: list[int], hidden: list[tuple[int, int]]
) -> tuple[str, str, dict[str, str]]:
    """Reason, summary and context written after a promise, within ``[start, end)``."""

    def is_hidden(pos: int) -> bool:
        return _is_hidden(hidden_starts, hidden, pos)

    context: dict[str, str] = {}
    ctx_span = (end, end)
    for o in _CONTEXT_OPEN().finditer(text, start, end):
        if is_hidden(o.start()):
            continue
        c = _CONTEXT_CLOSE().search(text, o.end(), end)
        if c is not None:
            context = _parse_context(text[o.end() : c.start()])
            ctx_span = (o.start(), c.end())
        break

    found: dict[str, str] = {}

    def take(m: re.Match[str]) -> None:
        key = _key_of(m)
        if key not in found:
            found[key] = _continued(text, m.end(), end, m.group("value"), is_hidden)

    inline = _KEY_INLINE().match(text, start, end)
    if inline is not None:
        take(inline)
    for m in _KEY_LINE().finditer(text, start, end):
        if len(found) == 3:
            break
        if ctx_span[0] <= m.start() < ctx_span[1] or is_hidden(m.start()):
            continue
        take(m)

    reason = found.get("reason", "") or context.get("reason", "")
    blocking = found.get("blocking issue", "")
    if blocking:
        reason = f"{reason}\nBlocking issue: {blocking}" if reason else blocking
    summary = found.get("summary", "") or context.get("summary", "")
    return reason, summary, context


# --- API --------------------------------------------------------------------


def _phrases(custom: Sequence[str]) -> list[str]:
    """The configured phrases, unwrapped, empty ones dropped."""
    words = (unwrap(phrase) for phrase in ((custom,) if isinstance(custom, str) else custom))
    return [w for w in words if w]


def _custom_table(custom: Sequence[str], *, exclusive: bool = False) -> dict[str, _Word]:
    table: dict[str, _Word] = {}
    listed = _phrases(custom)
    for word in listed:
        key = word.casefold()
        if key not in _BY_KEY and key not in table:
            table[key] = _Word(word, "custom", "COMPLETE", CUSTOM_ACTION)
    if exclusive:  # the vocabulary's completion words complete only when listed
        keep = {w.casefold() for w in listed}
        table.update({k: _UNLISTED for k, w in _BY_KEY.items() if w.signal == "COMPLETE" and k not in keep})
    return table


_UNLISTED: Final = _Word("", "custom", "CONTINUE", "")  # marks a completion word that is not listed


def detect_promises(text: str, custom: Sequence[str] = (), *, exclusive: bool = False) -> Detection:
    """Every completion promise in ``text``, in text order.

    ``custom`` are extra completion phrases (bare or in promise tags); each
    maps to the COMPLETE signal. With ``exclusive``, only they complete: the
    vocabulary's completion words (``COMPLETE``, ``LOOP_DONE``) that are not
    listed land in :attr:`Detection.unknown`, as the ralph-loop plugin's
    ``--completion-promise`` has it. Never raises on a ``str``.
    """
    phrases = _custom_table(custom, exclusive=exclusive)
    tags, hidden = _scan(text)
    hidden_starts = [h[0] for h in hidden]
    promises: list[Promise] = []
    unknown: list[str] = []
    for i, tag in enumerate(tags):
        body = normalise(tag.body)
        key = body.casefold()
        known = phrases.get(key) or _BY_KEY.get(key)
        if known is None or known is _UNLISTED:
            unknown.append(body)
            continue
        end = tags[i + 1].start if i + 1 < len(tags) else len(text)
        reason, summary, context = _capture(text, tag.end, end, hidden_starts, hidden)
        promises.append(
            Promise(
                word=known.word,
                vocabulary=known.vocabulary,
                signal=known.signal,
                harness_action=known.harness_action,
                reason=reason,
                summary=summary,
                context=context,
                raw=text[tag.start : tag.end],
                offset=tag.start,
            )
        )
    return Detection(promises, unknown)


def strongest(promises: Iterable[Promise]) -> Promise | None:
    """The promise that decides: BLOCKED > COMPLETE > ESCALATE > CONTINUE (``PRIORITY``).

    Among equals the last in the text (greatest offset; then the later one
    given) wins. ``None`` when there are no promises.
    """
    best: Promise | None = None
    for p in promises:
        if best is None or (PRIORITY[p.signal], p.offset) >= (PRIORITY[best.signal], best.offset):
            best = p
    return best


def to_event(p: Promise, *, session_id: str, iteration: int) -> PromiseDetected:
    """The journal event recording ``p``."""
    return PromiseDetected(
        session_id=session_id,
        iteration=iteration,
        promise=p.word,
        signal=p.signal,
        reason=p.reason,
        summary=p.summary,
        context=dict(p.context),
        raw=p.raw,
    )
