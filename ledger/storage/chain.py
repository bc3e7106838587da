"""The hash chain of a journal: each event written carries in ``prev`` the hash of the line before it
(``START`` for a journal's first line), so an edited, removed, reordered or inserted line breaks the
links after it. ``link_of`` is the hash, ``follows`` the ingest's incremental check of new lines and
``check_journal`` the whole check ``ralph-ledger verify`` runs, naming the first line where a chain
breaks and how. What the chain proves and what it does not: docs/design/hash-chain.md.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable
from typing import Any, Final

import msgspec

from ledger import events as ev

LINK_BYTES: Final = 16
"""The hash is BLAKE2b cut to 16 bytes (32 hex characters): docs/design/hash-chain.md says why."""
START: Final = "0" * (2 * LINK_BYTES)
"""What the first line of a journal links to."""
LINKING: bool = True
"""Whether appends link their events (``bench/bench_hook.py`` turns it off to time the chain; no user
switch)."""
_KEY: Final = b',"prev":"'
_LINK: Final = re.compile(rb',"prev":"([0-9a-f]{%d})"' % (2 * LINK_BYTES))


def _blake2b() -> Callable[..., Any]:
    """``hashlib.blake2b``, which is ``_blake2.blake2b``: importing that alone skips ``hashlib``'s
    OpenSSL setup (about 5 ms, on every stop hook)."""
    try:
        from _blake2 import blake2b
    except ImportError:  # a Python built without its own BLAKE2: hashlib finds one
        from hashlib import blake2b
    return blake2b


blake2b: Final = _blake2b()
"""``hashlib.blake2b`` (the journal's head fingerprint uses it too)."""


def link_of(line: bytes) -> str:
    """The link to ``line`` (a journal line without its newline) that the line after it carries."""
    return str(blake2b(line, digest_size=LINK_BYTES).hexdigest())


_hasher: Final = functools.partial(blake2b, digest_size=LINK_BYTES)
_digest: Final = operator.methodcaller("digest")


def follows(data: bytes, last: str, on: bool) -> tuple[str, bool] | None:
    """The chain's state after the complete lines ``data`` of one journal, when they link as they
    should after a line hashing to ``last`` ("" before a journal's first line; ``on``: a linked line
    came before): (the link to the last line, whether a line was linked). ``None`` when they may not
    (a line not linked to the one before it, an unlinked one after a linked one, a line the quick
    reading of links cannot tell): ``check_journal`` then says whether and where it breaks."""
    lines = data.split(b"\n")
    lines.pop()
    if not lines:
        return last, on
    links = _LINK.findall(data) if _KEY in data else []
    if not links:  # an old journal's lines, not linked yet: only the last one's hash is needed
        return None if on else (link_of(lines[-1]), False)
    if len(links) != len(lines):
        return None
    digests = b"".join(map(_digest, map(_hasher, lines)))  # no Python frame per line: ~20% less
    before = bytes.fromhex(last) if last else bytes.fromhex(START)
    if bytes.fromhex(b"".join(links).decode()) != before + digests[:-LINK_BYTES]:
        return None
    return digests[-LINK_BYTES:].hex(), True


class Verdict(msgspec.Struct, frozen=True):
    """One journal's chain: its lines checked, how many carry a link, where it first breaks ("" when it
    holds: ``"line N: how"``), and the link to its last complete line ("" for an empty journal)."""

    path: str
    lines: int
    linked: int
    broken: str = ""
    last: str = ""
    on: bool = False


class Known(msgspec.Struct, frozen=True):
    """What the ledger read of a journal (``ingest_positions``): up to byte ``offset``, whose last line
    links as ``last``, up to seq ``last_seq``."""

    offset: int
    last: str
    last_seq: int


def check_journal(path: str, data: bytes, known: Known | None = None) -> Verdict:
    """The whole chain of the journal ``path`` whose bytes are ``data``: the first line whose link does
    not hold, and how it broke (docs/verify.md lists the words); ``known``, what the ledger read of it
    before, also finds a cut or edited tail, which no link after it shows."""
    body, newline, _unfinished = data.rpartition(b"\n")
    lines = body.split(b"\n") if newline else []  # a last line without its newline is not checked:
    # an append in progress, or a crash's, which the next append closes and links to
    parsed: list[ev.Event | None] = []
    for line in lines:
        try:
            parsed.append(ev.decode(line))
        except (msgspec.DecodeError, msgspec.ValidationError):
            parsed.append(None)
    hashes = [link_of(line) for line in lines]
    linked = sum(1 for p in parsed if p is not None and p.prev)
    broken = _first_break(lines, parsed, hashes)
    if not broken and known is not None:
        broken = _against_known(data, hashes, parsed, known, len(lines))
    on = any(p is not None and p.prev for p in parsed)
    return Verdict(str(path), len(lines), linked, broken, hashes[-1] if hashes else "", on)


LAST_NOT_AN_EVENT: Final = "edited (not an event)"
"""How the chain breaks at a last line that is not an event (nothing links to it to tell): said of the
journal as it is, until a line linked to it follows (then it was a bad line inside the chain, as a
rebuild reads it), so the ingest checks such a journal again rather than keep the break."""


def _first_break(lines: list[bytes], parsed: list[ev.Event | None], hashes: list[str]) -> str:
    where = {h: i for i, h in reversed(list(enumerate(hashes, 1)))}
    seqs: set[int] = set()
    on = False
    for i, p in enumerate(parsed, 1):
        if p is None:
            if i == len(lines) and on:
                return f"line {i}: {LAST_NOT_AN_EVENT}"
            continue
        expected = hashes[i - 2] if i > 1 else START
        if p.prev and p.prev != expected:
            return _why(i, p, parsed, where, seqs)
        if not p.prev and on:
            return f"line {i}: inserted (a line without a link inside the chain)"
        if p.seq in seqs and on:
            return f"line {i}: inserted (seq {p.seq} again)"
        on = on or bool(p.prev)
        seqs.add(p.seq)
    return ""


def _why(i: int, p: ev.Event, parsed: list[ev.Event | None], where: dict[str, int], seqs: set[int]) -> str:
    """How line ``i``'s link came to miss the line before it."""
    if p.seq in seqs:
        return f"line {i}: inserted (seq {p.seq} again)"
    j = where.get(p.prev)
    if j is not None and j >= i:
        return f"line {i}: reordered (it belongs after line {j})"
    if j is not None:
        last = i - 1
        span = f"line {j + 1}" if j + 1 == last else f"lines {j + 1}-{last}"
        return f"line {j + 1}: inserted ({span} not in the chain)"
    before = parsed[i - 2] if i > 1 else None
    seq_before = before.seq if before is not None else (0 if i == 1 else -1)
    if seq_before >= 0 and p.seq > seq_before + 1:
        gone = p.seq - seq_before - 1
        seqs_gone = f"seq {seq_before + 1}" if gone == 1 else f"seq {seq_before + 1}-{p.seq - 1}"
        return f"line {i}: removed before it ({gone} line{'s' if gone > 1 else ''}, {seqs_gone})"
    if i == 1:
        return "line 1: edited (its link is not the start value)"
    return f"line {i - 1}: edited (line {i} links to other text)"


def _against_known(
    data: bytes, hashes: list[str], parsed: list[ev.Event | None], known: Known, complete: int
) -> str:
    """A tail cut off or edited since the ledger read it (no link after it can show it)."""
    if known.offset <= 0 or not known.last:
        return ""
    if len(data) < known.offset:
        seqs = [p.seq for p in parsed if p is not None]
        return (
            f"line {complete + 1}: truncated tail (the ledger read up to seq {known.last_seq}, "
            f"the journal ends at seq {max(seqs, default=0)})"
        )
    if data[known.offset - 1 : known.offset] != b"\n":
        return ""
    n = data.count(b"\n", 0, known.offset)
    if n and hashes[n - 1] != known.last:
        return f"line {n}: edited (the ledger read other text there)"
    return ""


def check_new(
    path: str, read: Callable[[int, int], bytes], start: int, end: int, tip: tuple[str, bool, str]
) -> tuple[str, bool, str]:
    """The chain's state (link to the last line, whether a line was linked, where it broke) after a
    journal's complete lines from byte ``start`` to ``end``, from ``tip``, its state at ``start``: the
    ingest's incremental check (``read(a, b)`` gives bytes ``a`` to ``b``). Only a break found in the
    new lines reads the journal from its start, to name the line."""
    last, on, broken = tip if start else ("", False, "")
    if end <= start:
        return last, on, broken
    if broken.endswith(LAST_NOT_AN_EVENT):  # that line is the last no longer: what is it now?
        verdict = check_journal(path, read(0, end))
        return verdict.last, verdict.on, verdict.broken
    data = read(start, end)
    if broken:  # named once: only the link to the last line is kept up
        return link_of(data[data.rfind(b"\n", 0, len(data) - 1) + 1 : -1]), on, broken
    state = follows(data, last, on)
    if state is not None:
        return state[0], state[1], ""
    verdict = check_journal(path, read(0, end))
    return verdict.last, verdict.on, verdict.broken
