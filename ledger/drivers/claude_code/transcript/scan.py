"""Fast, forgiving reading of Claude Code transcripts (JSON Lines) for the Stop hook.

:func:`scan` reads the complete lines from a byte offset to the end into a :class:`Scan` (tokens,
tools, files modified, the last text, the stop reason) and says where the next call starts; bad
lines are skipped and counted, nothing in the file can make it raise, a missing or unreadable file
raises ``OSError``. The lines that matter and the rules (turns, messages, sidechains):
docs/design/transcripts.md. Imports only the standard library, msgspec and :mod:`ledger.events`:
a Stop hook runs it on every stop.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import BinaryIO, Final

import msgspec

from ledger.drivers.claude_code.transcript.lines import (
    DEFAULT_MAX_BYTES,
    MAX_LINE_BYTES,
    READ_BUFFER,
    BackwardLines,
    PathArg,
    lines_forward,
    open_regular,
)
from ledger.events import TokenUsage

EDIT_TOOLS: Final = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})

FEEDBACK_PREFIX: Final = "Stop hook feedback:"


class _Usage(msgspec.Struct, gc=False):
    input_tokens: int | None = 0
    output_tokens: int | None = 0
    cache_creation_input_tokens: int | None = 0
    cache_read_input_tokens: int | None = 0


class _ToolInput(msgspec.Struct, gc=False):
    file_path: str | None = None
    notebook_path: str | None = None


class _Block(msgspec.Struct, gc=False):
    type: str | None = None
    text: str | None = None
    name: str | None = None
    input: _ToolInput | None = None


class Message(msgspec.Struct, gc=False):
    """An API message as a transcript line carries it (only the fields read here)."""

    id: str | None = None
    content: str | list[_Block] | None = None
    usage: _Usage | None = None
    stop_reason: str | None = None
    model: str | None = None


class _Line(msgspec.Struct, gc=False, rename="camel"):
    type: str | None = None
    session_id: str | None = None
    request_session_id: str | None = None  # another session's: a fork's copy of its parent's line
    is_meta: bool | None = None
    is_sidechain: bool | None = None
    message: Message | None = None


_decoder: Final = msgspec.json.Decoder(_Line)


def decode_line(raw: bytes) -> _Line | None:
    """The decoded line, or ``None`` when it is not a JSON object of the expected shape."""
    try:
        return _decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def copied(line: _Line) -> bool:
    """Whether ``line`` is a fork's copy of a line of the session it forked from (``--fork-session``:
    Claude Code 2.1.328 copies the parent's messages, each naming the parent in ``requestSessionId``):
    the parent's turn, counted there, never this session's (docs/design/claude-code-hooks.md)."""
    return bool(line.request_session_id and line.session_id and line.request_session_id != line.session_id)


def is_blank(raw: bytes) -> bool:
    """Whether a raw line is empty or only whitespace (skipped, not counted as bad)."""
    return not raw or raw.isspace()


def assistant_message(line: _Line) -> Message | None:
    """The message of an assistant line, else ``None``."""
    return line.message if line.type == "assistant" else None


def _blocks(message: Message) -> list[_Block]:
    content = message.content
    return content if isinstance(content, list) else []


def is_prompt(line: _Line) -> bool:
    """True for a user prompt, the start of a turn (see the module docstring)."""
    if line.type != "user" or line.is_sidechain or line.is_meta or line.message is None:
        return False
    content = line.message.content
    return isinstance(content, str) and not content.startswith(FEEDBACK_PREFIX)


def message_texts(message: Message) -> list[str]:
    """The non-blank text blocks of a message line, stripped, in order."""
    out: list[str] = []
    for block in _blocks(message):
        if block.type == "text" and block.text and not block.text.isspace():
            out.append(block.text.strip())
    return out


def _edited_path(block: _Block) -> str:
    """The file a tool_use block modifies, or ``""``."""
    if block.type != "tool_use" or block.name not in EDIT_TOOLS or block.input is None:
        return ""
    if block.name == "NotebookEdit":
        return block.input.notebook_path or block.input.file_path or ""
    return block.input.file_path or ""


def _token_usage(usage: _Usage) -> TokenUsage:
    return TokenUsage(
        input=usage.input_tokens or 0,
        output=usage.output_tokens or 0,
        cache_creation=usage.cache_creation_input_tokens or 0,
        cache_read=usage.cache_read_input_tokens or 0,
    )


def add_usage(a: TokenUsage, b: TokenUsage) -> TokenUsage:
    """The field-by-field sum of two token counts."""
    return TokenUsage(
        input=a.input + b.input,
        output=a.output + b.output,
        cache_creation=a.cache_creation + b.cache_creation,
        cache_read=a.cache_read + b.cache_read,
    )


def _sub_usage(a: TokenUsage, b: TokenUsage) -> TokenUsage:
    """The field-by-field difference ``a - b``."""
    return TokenUsage(
        input=a.input - b.input,
        output=a.output - b.output,
        cache_creation=a.cache_creation - b.cache_creation,
        cache_read=a.cache_read - b.cache_read,
    )


class Scan(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What :func:`scan` found between ``start`` and ``end``.

    ``end`` is the offset just after the last complete line (``start`` when there is none): pass it as
    the next call's ``start``. ``tokens`` sums, once per ``message.id``, the usage of that message's
    last line in the range, less what a scan ending at ``start`` counted for a message whose lines
    began before ``start`` (its last line there): the tokens of consecutive scans add up to those of
    one scan over the whole file. ``messages`` counts the distinct ids. ``tool_count`` counts tool_use blocks
    and ``files_modified`` lists, first seen first, the files of Edit, Write, MultiEdit and NotebookEdit
    calls. ``last_text`` is the text of the last assistant message with text in the current turn,
    ``stop_reason`` the last non-null one of an assistant line (``""`` if none), ``model`` the last
    ``message.model`` of one (``""`` if none; sub-agents' lines aside, unless the range holds only
    theirs: a sub-agent's own transcript) and ``context_tokens`` the input
    tokens, cache included, of the last one's usage: how full the context was. ``lines`` counts the
    complete lines read, ``bad_lines`` those skipped as undecodable or too long.
    """

    start: int = 0
    end: int = 0
    lines: int = 0
    bad_lines: int = 0
    session_id: str = ""
    messages: int = 0
    tool_count: int = 0
    files_modified: list[str] = []
    tokens: TokenUsage = TokenUsage()
    last_text: str = ""
    stop_reason: str = ""
    model: str = ""
    context_tokens: int = 0
    ended: bool = False
    end_text: str = ""


class _Aggregate:
    """Mutable totals built line by line by :func:`scan`."""

    def __init__(self) -> None:
        self.lines = 0
        self.bad_lines = 0
        self.session_id = ""
        self.usage: dict[str, _Usage | None] = {}
        self.tool_count = 0
        self.files: dict[str, None] = {}
        self.run_id: str | None = None
        self.run_texts: list[str] = []
        self.last_text = ""
        self.stop_reason = ""
        self.model = ""
        self.sidechain_model = ""
        self.context_tokens = 0
        self.ended = [False, False]  # [main chain, sidechain]
        self.end_text = ["", ""]
        self.end_id = ["", ""]
        self.side_only = True  # no main-chain assistant message yet: the range is a sub-agent's

    def feed(self, raw: bytes | None) -> None:
        """Count one complete line (``None`` for a line too long to decode)."""
        self.lines += 1
        if raw is None:
            self.bad_lines += 1
            return
        if is_blank(raw):
            return
        line = decode_line(raw)
        if line is None:
            self.bad_lines += 1
            return
        self._feed_line(line)

    def _feed_line(self, line: _Line) -> None:
        if line.session_id:
            self.session_id = line.session_id
        if copied(line):
            return
        if line.type == "user":  # a tool's result, a prompt, a stop hook's feedback: the turn goes on
            self.ended[bool(line.is_sidechain)] = False
        if is_prompt(line):
            self.run_id, self.run_texts, self.last_text = None, [], ""
            return
        message = assistant_message(line)
        if message is not None:
            self._feed_assistant(message, bool(line.is_sidechain))

    def _feed_assistant(self, message: Message, sidechain: bool) -> None:
        if message.id:
            self.usage[message.id] = message.usage  # the last line of an id wins
        chain = int(sidechain)
        if message.id != self.end_id[chain] or not message.id:
            self.end_id[chain], self.end_text[chain] = message.id or "", ""
        texts = message_texts(message)
        if texts:
            self.end_text[chain] = "\n\n".join(filter(None, (self.end_text[chain], *texts)))
        self.ended[chain] = message.stop_reason != "tool_use"
        for block in _blocks(message):
            if block.type == "tool_use":
                self.tool_count += 1
                path = _edited_path(block)
                if path:
                    self.files[path] = None
        if not sidechain:
            self.side_only = False
            self._feed_main(message)
        elif message.model:
            self.sidechain_model = message.model

    def _feed_main(self, message: Message) -> None:
        if message.stop_reason:
            self.stop_reason = message.stop_reason
        if message.model:
            self.model = message.model
        if message.usage is not None:
            u = message.usage
            used = (
                (u.input_tokens or 0)
                + (u.cache_read_input_tokens or 0)
                + (u.cache_creation_input_tokens or 0)
            )
            self.context_tokens = used or self.context_tokens
        if message.id != self.run_id:
            self.run_id, self.run_texts = message.id, []
        texts = message_texts(message)
        if texts:
            self.run_texts.extend(texts)
            self.last_text = "\n\n".join(self.run_texts)

    def tokens(self, counted: dict[str, _Usage | None] | None = None) -> TokenUsage:
        """Each message's last usage, less what ``counted`` says an earlier range counted for it."""
        total = TokenUsage()
        for mid, usage in self.usage.items():
            if usage is not None:
                total = add_usage(total, _token_usage(usage))
            before = counted.get(mid) if counted else None
            if before is not None:
                total = _sub_usage(total, _token_usage(before))
        return total

    def result(self, start: int, end: int, counted: dict[str, _Usage | None] | None = None) -> Scan:
        return Scan(
            start=start,
            end=end,
            lines=self.lines,
            bad_lines=self.bad_lines,
            session_id=self.session_id,
            messages=len(self.usage),
            tool_count=self.tool_count,
            files_modified=list(self.files),
            tokens=self.tokens(counted),
            last_text=self.last_text,
            stop_reason=self.stop_reason,
            model=self.model or self.sidechain_model,
            context_tokens=self.context_tokens,
            ended=self.ended[self.side_only],
            end_text=self.end_text[self.side_only],
        )


def scan(path: PathArg, start: int = 0, *, max_line_bytes: int = MAX_LINE_BYTES) -> Scan:
    """Aggregate the complete lines of the transcript at ``path`` from byte offset ``start``.

    ``start`` should be a line boundary (``0`` or the ``end`` of an earlier scan); a ``start`` past
    the end of the file reads nothing. Raises ``ValueError`` for a negative ``start`` and ``OSError``
    (``FileNotFoundError`` if missing) when the file cannot be opened or read; never for its content.
    """
    if start < 0:
        raise ValueError(f"start must be >= 0, got {start}")
    agg = _Aggregate()
    end = start
    with open_regular(path, READ_BUFFER) as f:
        f.seek(start)
        for raw, size in lines_forward(f, max_line_bytes):
            agg.feed(raw)
            end += size
        counted = _counted_before(f, start, set(agg.usage), max_line_bytes) if start and agg.usage else None
    return agg.result(start, end, counted)


def _counted_before(f: BinaryIO, start: int, ids: set[str], cap: int) -> dict[str, _Usage | None]:
    """The usage an earlier scan ending at ``start`` counted for the messages of ``ids``: the usage
    of each one's last line before ``start``. A message's lines are one run (other line types and
    messages that also go on after ``start`` aside), so the search reads back from ``start`` and
    stops at a prompt or at the first line of a message that does not go on after ``start``."""
    found: dict[str, _Usage | None] = {}
    for raw in BackwardLines(f, DEFAULT_MAX_BYTES, cap, end=start):
        line = None if raw is None or is_blank(raw) else decode_line(raw)
        if line is None:
            continue
        if is_prompt(line):
            break
        message = assistant_message(line)
        if message is None or not message.id:
            continue
        if message.id not in ids:
            break
        found.setdefault(message.id, message.usage)
        if len(found) == len(ids):
            break
    return found


class _Result(msgspec.Struct, gc=False):
    type: str = ""
    usage: _Usage | None = None


_RESULT = msgspec.json.Decoder(_Result)


def scan_output(lines: Iterable[str]) -> Scan:
    """What an agent's own output says in Claude Code's message format: ``claude -p
    --output-format stream-json`` lines (tokens per ``message.id`` counted once, tools, files),
    or the single ``result`` object of ``--output-format json`` (its ``usage``). Lines that are
    not JSON objects are ignored, so plain text output gives an empty ``Scan``.
    """
    agg = _Aggregate()
    result: TokenUsage | None = None
    for text in lines:
        raw = text.strip().encode()
        if not raw.startswith(b"{"):
            continue
        agg.feed(raw)
        try:
            line = _RESULT.decode(raw)
        except msgspec.DecodeError:
            continue
        if line.type == "result" and line.usage is not None:
            result = _token_usage(line.usage)
    scanned = agg.result(0, 0)
    if result is not None and not agg.usage:
        scanned = msgspec.structs.replace(scanned, tokens=result)
    return scanned
