"""Finding the agent's last text in a Claude Code transcript by reading backwards from its end,
decoding only the lines of the current turn (:func:`find_last_text`, :func:`last_text`).

Like ``transcript``, it imports only the standard library, msgspec and the vocabulary.
"""

from __future__ import annotations

import msgspec

from ledger.drivers.claude_code.transcript.lines import (
    DEFAULT_MAX_BYTES,
    MAX_LINE_BYTES,
    BackwardLines,
    PathArg,
    open_regular,
)
from ledger.drivers.claude_code.transcript.scan import (
    Message,
    assistant_message,
    decode_line,
    is_blank,
    is_prompt,
    message_texts,
)


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
        if is_blank(raw):
            return False
        self.lines_decoded += 1
        line = decode_line(raw)
        if line is None:
            self.bad_lines += 1
            return False
        if is_prompt(line):
            return True
        message = assistant_message(line)
        if message is None or line.is_sidechain:
            return False
        return self._take(message)

    def _take(self, message: Message) -> bool:
        if message.id != self.run_id:
            if self.texts:  # the run before this one had text: that was the last message with text
                return True
            self.run_id = message.id
        self.texts.extend(reversed(message_texts(message)))
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
    with open_regular(path, 0) as f:
        lines = BackwardLines(f, max_bytes, max_line_bytes)
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
