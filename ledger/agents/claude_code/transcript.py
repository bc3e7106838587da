"""Fast, forgiving reading of Claude Code transcripts (JSON Lines) for the Stop hook.

A transcript (``~/.claude/projects/<project>/<session>.jsonl``) has one JSON object per line. The lines
that matter here:

- ``assistant``: one content block per line (``thinking``, ``text`` or ``tool_use``); the blocks of one
  API message share ``message.id`` and each line repeats ``message.usage``, the later lines of a
  message carrying the final counts;
- ``user``: ``tool_result`` blocks, or a prompt (``message.content`` is a string). A blocked stop shows
  up as a user line with ``isMeta: true`` whose content starts with ``Stop hook feedback:``.

Every other line type (``summary``, ``progress``, ``system``, ``file-history-snapshot``,
``queue-operation`` and whatever comes next) is read and ignored.

Two entry points:

- :func:`scan` reads the complete lines from a byte offset to the end and aggregates them into a
  :class:`Scan` (tokens, tools, files modified, the last text, the stop reason). Its ``end`` is the
  offset to give the next call, so a hook can read a growing transcript incrementally.
- :func:`last_text` (and :func:`find_last_text`, which also reports its cost) finds the agent's last
  text by reading backwards from the end of the file, decoding only the lines of the current turn.

Decisions:

- Lines are decoded with msgspec into narrow Structs (unknown fields skipped, every field optional,
  ``gc=False``) by one reused decoder. A line that is not JSON or has the wrong types is skipped and
  counted in ``bad_lines``; nothing in the file's content can make these functions raise.
- Only complete lines (ending with ``\\n``) are read: a partial last line is left for a later call,
  which sees it whole. Lines longer than :data:`MAX_LINE_BYTES` are skipped without being decoded
  (or held in memory) and counted as bad. Blank lines are skipped and not counted as bad.
- A turn starts at a *prompt*: a ``user`` line, not a sidechain, not ``isMeta``, whose content is a
  string not starting with ``Stop hook feedback:``. The last text is the text of the current turn:
  :attr:`Scan.last_text` is reset by a prompt, and :func:`last_text` stops reading at one, so the two
  agree. Lines with ``isSidechain: true`` (sub-agents in Claude Code 1.x) count for tokens, tools and
  files, but never for the last text, the stop reason or turn boundaries.
- The text of a message is its non-blank text blocks, each stripped, joined by a blank line, in file
  order. A message is taken as a run of consecutive assistant lines with one ``message.id`` (other
  line types in between do not break a run), which is how Claude Code writes them.
- ``session_id`` is the last non-empty ``sessionId`` in the range read (summary and snapshot lines
  have none).
- A missing or unreadable file raises ``OSError`` (``FileNotFoundError`` for a missing one) from both
  functions: the caller decides whether that is fatal. So does anything but a regular file (a FIFO,
  a device such as ``/dev/zero``, a directory), without blocking: it could never be read to its end.

This module imports only the standard library, msgspec and :mod:`ledger.events`: never DuckDB or
pyarrow, since a Stop hook runs it on every stop.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Iterator
from typing import BinaryIO, Final

import msgspec

from ledger.events import TokenUsage

MAX_LINE_BYTES: Final = 8 * 1024 * 1024
"""Lines longer than this (newline excluded) are skipped without decoding and counted as bad."""

BACK_BLOCK: Final = 64 * 1024
"""First block read backwards by :func:`find_last_text`; each further block doubles, up to 4 MB."""

MAX_BACK_BLOCK: Final = 4 * 1024 * 1024

DEFAULT_MAX_BYTES: Final = 32 * 1024 * 1024
"""How far back :func:`last_text` reads at most, by default."""

EDIT_TOOLS: Final = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
FEEDBACK_PREFIX: Final = "Stop hook feedback:"

_SKIP_CHUNK: Final = 1024 * 1024  # read size while skipping the rest of an enormous line
_READ_BUFFER: Final = 256 * 1024

PathArg = str | os.PathLike[str]


# --- what is decoded from a line (everything else is skipped by msgspec) ---------------------------


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


class _Message(msgspec.Struct, gc=False):
    id: str | None = None
    content: str | list[_Block] | None = None
    usage: _Usage | None = None
    stop_reason: str | None = None


class _Line(msgspec.Struct, gc=False, rename="camel"):
    type: str | None = None
    session_id: str | None = None
    is_meta: bool | None = None
    is_sidechain: bool | None = None
    message: _Message | None = None


_decoder: Final = msgspec.json.Decoder(_Line)


def _decode(raw: bytes) -> _Line | None:
    """The decoded line, or ``None`` when it is not a JSON object of the expected shape."""
    try:
        return _decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _is_blank(raw: bytes) -> bool:
    return not raw or raw.isspace()


# --- line predicates and extractors ------------------------------------------------------------------


def _assistant(line: _Line) -> _Message | None:
    """The message of an assistant line, else ``None``."""
    return line.message if line.type == "assistant" else None


def _blocks(message: _Message) -> list[_Block]:
    content = message.content
    return content if isinstance(content, list) else []


def _is_prompt(line: _Line) -> bool:
    """True for a user prompt, the start of a turn (see the module docstring)."""
    if line.type != "user" or line.is_sidechain or line.is_meta or line.message is None:
        return False
    content = line.message.content
    return isinstance(content, str) and not content.startswith(FEEDBACK_PREFIX)


def _texts(message: _Message) -> list[str]:
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


# --- forward scan ---------------------------------------------------------------------------------


class Scan(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What :func:`scan` found between ``start`` and ``end``.

    ``end`` is the offset just after the last complete line (``start`` when there is none): pass it as
    the next call's ``start``. ``tokens`` sums, once per ``message.id``, the usage of that message's
    last line in the range, less what a scan ending at ``start`` counted for a message whose lines
    began before ``start`` (its last line there): the tokens of consecutive scans add up to those of
    one scan over the whole file. ``messages`` counts the distinct ids. ``tool_count`` counts tool_use blocks
    and ``files_modified`` lists, first seen first, the files of Edit, Write, MultiEdit and NotebookEdit
    calls. ``last_text`` is the text of the last assistant message with text in the current turn,
    ``stop_reason`` the last non-null one of an assistant line (``""`` if none). ``lines`` counts the
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

    def feed(self, raw: bytes | None) -> None:
        """Count one complete line (``None`` for a line too long to decode)."""
        self.lines += 1
        if raw is None:
            self.bad_lines += 1
            return
        if _is_blank(raw):
            return
        line = _decode(raw)
        if line is None:
            self.bad_lines += 1
            return
        self._feed_line(line)

    def _feed_line(self, line: _Line) -> None:
        if line.session_id:
            self.session_id = line.session_id
        if _is_prompt(line):
            self.run_id, self.run_texts, self.last_text = None, [], ""
            return
        message = _assistant(line)
        if message is not None:
            self._feed_assistant(message, bool(line.is_sidechain))

    def _feed_assistant(self, message: _Message, sidechain: bool) -> None:
        if message.id:
            self.usage[message.id] = message.usage  # the last line of an id wins
        for block in _blocks(message):
            if block.type == "tool_use":
                self.tool_count += 1
                path = _edited_path(block)
                if path:
                    self.files[path] = None
        if not sidechain:
            self._feed_main(message)

    def _feed_main(self, message: _Message) -> None:
        if message.stop_reason:
            self.stop_reason = message.stop_reason
        if message.id != self.run_id:
            self.run_id, self.run_texts = message.id, []
        texts = _texts(message)
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
        )


def _skip_rest_of_line(f: BinaryIO) -> int | None:
    """Read to the end of the current line; its length, or ``None`` if the file ends first."""
    skipped = 0
    while True:
        chunk = f.readline(_SKIP_CHUNK)
        if not chunk:
            return None
        skipped += len(chunk)
        if chunk.endswith(b"\n"):
            return skipped


def _lines_forward(f: BinaryIO, cap: int) -> Iterator[tuple[bytes | None, int]]:
    """Yield ``(line, size)`` for each complete line from the current position.

    ``line`` is ``None`` for a line longer than ``cap`` (which is never held whole in memory);
    ``size`` counts the newline. A partial last line is not yielded.
    """
    while True:
        raw = f.readline(cap + 1)
        if raw.endswith(b"\n"):
            yield raw, len(raw)
        elif len(raw) <= cap:  # end of file: nothing left, or a partial last line
            return
        else:
            rest = _skip_rest_of_line(f)
            if rest is None:
                return
            yield None, len(raw) + rest


def _open_regular(path: PathArg, buffering: int) -> BinaryIO:
    """``path`` opened for reading; ``OSError`` for anything but a regular file, without blocking on
    a FIFO."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fsdecode(path))
        os.set_blocking(fd, True)
        return open(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


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
    with _open_regular(path, _READ_BUFFER) as f:
        f.seek(start)
        for raw, size in _lines_forward(f, max_line_bytes):
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
    for raw in _BackwardLines(f, DEFAULT_MAX_BYTES, cap, end=start):
        line = None if raw is None or _is_blank(raw) else _decode(raw)
        if line is None:
            continue
        if _is_prompt(line):
            break
        message = _assistant(line)
        if message is None or not message.id:
            continue
        if message.id not in ids:
            break
        found.setdefault(message.id, message.usage)
        if len(found) == len(ids):
            break
    return found


# --- backward search for the last text ----------------------------------------------------------------


class LastText(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What :func:`find_last_text` found, and what it cost.

    ``text`` is ``""`` when the current turn has no assistant text. ``lines_decoded`` counts the lines
    handed to the JSON decoder, ``bad_lines`` those that failed or were too long, ``bytes_read`` the
    bytes read from the file. ``exhausted`` is true when the search stopped at ``max_bytes`` (the text,
    if any, may then be incomplete).
    """

    text: str = ""
    lines_decoded: int = 0
    bad_lines: int = 0
    bytes_read: int = 0
    exhausted: bool = False


class _BackwardLines:
    """Complete lines of a file, last first, read in blocks that double in size."""

    def __init__(self, f: BinaryIO, max_bytes: int, cap: int, *, end: int | None = None) -> None:
        self.f = f
        self.max_bytes = max_bytes
        self.cap = cap
        self.end = end  # read the lines before this offset (None: the end of the file)
        self.bytes_read = 0
        self.exhausted = False

    def _ends_with_partial_line(self, size: int) -> bool:
        self.f.seek(size - 1)
        self.bytes_read += 1
        return self.f.read(1) != b"\n"

    def _read(self, pos: int, n: int) -> bytes:
        self.f.seek(pos)
        chunk = self.f.read(n)
        self.bytes_read += len(chunk)
        return chunk

    def __iter__(self) -> Iterator[bytes | None]:
        """Yield each complete line without its newline (``None`` for one longer than ``cap``)."""
        pos = self.f.seek(0, os.SEEK_END) if self.end is None else self.end
        if pos == 0:
            return
        skipping = self._ends_with_partial_line(pos)  # the partial last line is not read
        tail = b""  # the start of the line that ends where the previous block began, newline included
        block = BACK_BLOCK
        while pos > 0:
            budget = self.max_bytes - self.bytes_read
            if budget <= 0:
                self.exhausted = True
                return
            n = min(block, pos, budget)
            block = min(block * 2, MAX_BACK_BLOCK)
            pos -= n
            chunk = self._read(pos, n)
            if len(chunk) != n:  # the file shrank under us
                return
            if skipping:
                cut = chunk.rfind(b"\n")
                if cut < 0:
                    continue
                chunk, skipping = chunk[: cut + 1], False
            parts = (chunk + tail).split(b"\n")  # always ends with b"" after the last newline
            for raw in reversed(parts[1:-1]):
                yield raw if len(raw) <= self.cap else None
            head = parts[0]
            if pos == 0:
                yield head if len(head) <= self.cap else None
            elif len(head) > self.cap:
                yield None
                skipping, tail = True, b""
            else:
                tail = head + b"\n"


class _TextSearch:
    """State of the backward search: the current run of one message's lines and its texts."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.texts: list[str] = []  # last first
        self.lines_decoded = 0
        self.bad_lines = 0

    def done_after(self, raw: bytes | None) -> bool:
        """Take one line (last first); True when the search is over."""
        if raw is None:
            self.bad_lines += 1
            return False
        if _is_blank(raw):
            return False
        self.lines_decoded += 1
        line = _decode(raw)
        if line is None:
            self.bad_lines += 1
            return False
        if _is_prompt(line):
            return True
        message = _assistant(line)
        if message is None or line.is_sidechain:
            return False
        return self._take(message)

    def _take(self, message: _Message) -> bool:
        if message.id != self.run_id:
            if self.texts:  # the run before this one had text: that was the last message with text
                return True
            self.run_id = message.id
        self.texts.extend(reversed(_texts(message)))
        return False

    def text(self) -> str:
        return "\n\n".join(reversed(self.texts))


def find_last_text(
    path: PathArg, *, max_bytes: int = DEFAULT_MAX_BYTES, max_line_bytes: int = MAX_LINE_BYTES
) -> LastText:
    """The agent's last text in the current turn, found by reading ``path`` backwards.

    Reads blocks from the end (64 KB, then doubling), decoding complete lines last first, until the
    lines of the last assistant message with text have all been seen, a prompt starts the turn, the
    start of the file, or ``max_bytes`` read. Gives the same text as ``scan(path).last_text`` (within
    ``max_bytes``). Raises ``OSError`` (``FileNotFoundError`` if missing) when the file cannot be read.
    """
    search = _TextSearch()
    with _open_regular(path, 0) as f:
        lines = _BackwardLines(f, max_bytes, max_line_bytes)
        for raw in lines:
            if search.done_after(raw):
                break
    return LastText(
        text=search.text(),
        lines_decoded=search.lines_decoded,
        bad_lines=search.bad_lines,
        bytes_read=lines.bytes_read,
        exhausted=lines.exhausted,
    )


def last_text(path: PathArg, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """The agent's last text in the current turn (``""`` if none); see :func:`find_last_text`."""
    return find_last_text(path, max_bytes=max_bytes).text


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
