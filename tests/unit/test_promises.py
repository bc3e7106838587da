"""Completion promise detection (ledger/loop/validate/promises.py): the design's examples, edge cases,
properties."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ledger import events as E
from ledger.loop.validate.promises import (
    HARNESS_ACTIONS,
    VOCABULARY,
    Detection,
    Promise,
    detect_promises,
    strongest,
    to_event,
    unwrap,
)

FAST = settings(max_examples=200, deadline=None)


def words(text: str, custom: tuple[str, ...] = ()) -> list[str]:
    return [p.word for p in detect_promises(text, custom).promises]


def only(text: str, custom: tuple[str, ...] = ()) -> Promise:
    found = detect_promises(text, custom).promises
    assert len(found) == 1, found
    return found[0]


# --- the examples the promise grammar was designed with --------------------------

SEED_EXAMPLES: list[tuple[str, str, list[str]]] = [
    # the grammar's examples: valid
    ("C valid: bare", "<promise>COMPLETE</promise>", ["COMPLETE"]),
    (
        "C valid: blocked + reason",
        "<promise>BLOCKED</promise>\nReason: External dependency unavailable",
        ["BLOCKED"],
    ),
    (
        "C valid: complete + free text",
        "<promise>COMPLETE</promise>\nAll tests passing (15/15), coverage 89%, lint clean.",
        ["COMPLETE"],
    ),
    # the grammar's examples: invalid
    ("C invalid: missing tags", "COMPLETE (missing XML tags)", []),
    ("C invalid: wrong tag name", "<incomplete>COMPLETE</incomplete> (wrong tag name)", []),
    ("C invalid: commented out", "<!-- <promise>COMPLETE</promise> --> (commented out)", []),
    # the grammar's regexes are case-insensitive (/i)
    ("C regex /i", "<promise>complete</promise> and <PROMISE>Blocked</PROMISE>", ["COMPLETE", "BLOCKED"]),
    # an agent definition's "Emit Completion Promise" step (docs/design/agent-definitions.md)
    (
        "2.2 complete",
        "Implementation complete. All tests passing, lint clean.\n\n<promise>COMPLETE</promise>\n",
        ["COMPLETE"],
    ),
    (
        "2.2 blocked",
        "Cannot proceed: Database migration requires DBA approval.\n\n<promise>BLOCKED</promise>\n"
        "Reason: Requires human decision on schema changes.\n",
        ["BLOCKED"],
    ),
    # an agent definition shows the promise inside a fenced example: that is documentation, not a promise
    ("2.2 as fenced documentation", "```\nDone.\n\n<promise>COMPLETE</promise>\n```\n", []),
    # the promise format (docs/promises.md)
    ("3.4 standard", "<promise>COMPLETE</promise>", ["COMPLETE"]),
    (
        "3.4 summary",
        "<promise>COMPLETE</promise>\nSummary: All 5 test cases passing, coverage at 87%, lint clean.",
        ["COMPLETE"],
    ),
    (
        "3.4 blocked",
        "<promise>BLOCKED</promise>\nReason: Database schema migration requires DBA review and approval.\n"
        "Blocking issue: Cannot proceed with implementation until migration is approved.",
        ["BLOCKED"],
    ),
    ("3.4 in an xml fence", "```xml\n<promise>COMPLETE</promise>\n```", []),
    # the conflict example (docs/design/signals.md#decisions; the guard part is signals.py's business)
    ("3.3 conflict", 'Agent output: "Tests passing! <promise>COMPLETE</promise>"', ["COMPLETE"]),
    # the loop vocabulary's four promises (docs/design/signals.md#promises)
    ("004 LOOP_DONE", "<promise>LOOP_DONE</promise>", ["LOOP_DONE"]),
    ("004 LOOP_CONTINUE", "<promise>LOOP_CONTINUE</promise>", ["LOOP_CONTINUE"]),
    ("004 LOOP_BLOCKED", "<promise>LOOP_BLOCKED</promise>", ["LOOP_BLOCKED"]),
    ("004 LOOP_ERROR", "<promise>LOOP_ERROR</promise>", ["LOOP_ERROR"]),
    ("004 xml fence", "```xml\n<promise>LOOP_DONE</promise>\n```", []),
    # a loop evaluator's pseudocode emits promises from inside a python fence
    (
        "004 evaluator code",
        "```python\ndef evaluate_loop():\n    if all_issues_done():\n"
        '        emit("<promise>LOOP_DONE</promise>")\n```',
        [],
    ),
    # a harness's pseudocode and safety limits mention bare words
    ("004 harness grep", 'if contains "$output" "LOOP_DONE"; then', []),
    ("004 safety limit", "action_at_limit:\n  - Output LOOP_BLOCKED\n", []),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in SEED_EXAMPLES], ids=[c[0] for c in SEED_EXAMPLES]
)
def test_seed_examples(text: str, expected: list[str]) -> None:
    assert words(text) == expected


def test_seed_004_context_example() -> None:
    text = (
        "<promise>LOOP_DONE</promise>\n"
        "<context>\n"
        '  session_id: "sess-2026-01-05-001"\n'
        "  iterations: 5\n"
        "  issues_completed: 3\n"
        "  remaining_blocked: 1\n"
        "  duration_minutes: 45\n"
        '  reason: "All proposed issues completed. 1 issue blocked awaiting dependency."\n'
        "</context>\n"
    )
    p = only(text)
    assert (p.word, p.vocabulary, p.signal) == ("LOOP_DONE", "loop", "COMPLETE")
    assert p.harness_action == "exit with success"
    assert p.context == {
        "session_id": "sess-2026-01-05-001",
        "iterations": "5",
        "issues_completed": "3",
        "remaining_blocked": "1",
        "duration_minutes": "45",
        "reason": "All proposed issues completed. 1 issue blocked awaiting dependency.",
    }
    # no Reason: line, so the context's reason is the promise's reason
    assert p.reason == "All proposed issues completed. 1 issue blocked awaiting dependency."
    assert p.raw == "<promise>LOOP_DONE</promise>"


def test_seed_000_3_4_blocked_reason_and_blocking_issue() -> None:
    p = only(
        "<promise>BLOCKED</promise>\n"
        "Reason: Database schema migration requires DBA review and approval.\n"
        "Blocking issue: Cannot proceed with implementation until migration is approved.\n"
    )
    assert p.reason == (
        "Database schema migration requires DBA review and approval.\n"
        "Blocking issue: Cannot proceed with implementation until migration is approved."
    )
    assert p.summary == ""


def test_seed_000_5_4_multi_line_reason() -> None:
    p = only(
        "Agent detects need for human decision:\n\n"
        "<promise>BLOCKED</promise>\n"
        "Reason: Database migration strategy requires architectural decision:\n"
        "- Option A: Add new table (breaking change)\n"
        "- Option B: Add column (backward compatible)\n\n"
        "Cannot proceed without human choice.\n"
    )
    assert p.reason == (
        "Database migration strategy requires architectural decision:\n"
        "- Option A: Add new table (breaking change)\n"
        "- Option B: Add column (backward compatible)"
    )


@pytest.mark.parametrize(
    ("word", "vocabulary", "signal", "action"),
    [
        ("COMPLETE", "standard", "COMPLETE", "iteration_complete"),
        ("BLOCKED", "standard", "BLOCKED", "task_update(blocked)"),
        ("ESCALATE", "standard", "ESCALATE", "task_update(blocked)"),
        ("LOOP_DONE", "loop", "COMPLETE", "exit with success"),
        ("LOOP_CONTINUE", "loop", "CONTINUE", "start next iteration"),
        ("LOOP_BLOCKED", "loop", "BLOCKED", "pause, request human input"),
        ("LOOP_ERROR", "loop", "ESCALATE", "exit with error status, preserve state"),
    ],
)
def test_vocabulary(word: str, vocabulary: str, signal: str, action: str) -> None:
    p = only(f"ok <promise>{word}</promise>")
    assert (p.word, p.vocabulary, p.signal, p.harness_action) == (word, vocabulary, signal, action)
    assert VOCABULARY[word] == signal and HARNESS_ACTIONS[word] == action
    assert p.offset == 3 and p.raw == f"<promise>{word}</promise>"


# --- tags and case ------------------------------------------------------------

TAGS: list[tuple[str, str, list[str], list[str]]] = [
    ("upper tags", "<PROMISE>COMPLETE</PROMISE>", ["COMPLETE"], []),
    ("mixed tags", "<Promise>complete</pRoMiSe>", ["COMPLETE"], []),
    ("lower word", "<promise>loop_done</promise>", ["LOOP_DONE"], []),
    ("padded word", "<promise>  BLOCKED \t</promise>", ["BLOCKED"], []),
    ("word on its own line", "<promise>\n  ESCALATE\n</promise>", ["ESCALATE"], []),
    ("no closing tag", "<promise>COMPLETE", [], []),
    ("no opening tag", "COMPLETE</promise>", [], []),
    ("space in open tag", "<promise >COMPLETE</promise>", [], []),
    ("space in close tag", "<promise>COMPLETE</ promise>", [], []),
    ("attribute", '<promise type="x">COMPLETE</promise>', [], []),
    ("self-closing", "<promise/>COMPLETE", [], []),
    ("wrong tag", "<incomplete>COMPLETE</incomplete>", [], []),
    ("prefixed tag", "<xpromise>COMPLETE</xpromise>", [], []),
    ("non-ASCII look-alike tag", "<promi\u017fe>COMPLETE</promi\u017fe>", [], []),
    ("bare word", "COMPLETE", [], []),
    ("bare loop word", "LOOP_DONE", [], []),
    ("word split", "<promise>COM PLETE</promise>", [], ["COM PLETE"]),
    ("unknown word", "<promise>FINISHED</promise>", [], ["FINISHED"]),
    ("unknown keeps case, collapses space", "<promise> All  done\n</promise>", [], ["All done"]),
    ("empty", "<promise></promise>", [], [""]),
    ("markup inside", "<promise><b>COMPLETE</b></promise>", [], []),
    ("nested open", "<promise><promise>COMPLETE</promise>", ["COMPLETE"], []),
    ("two on a line", "<promise>COMPLETE</promise><promise>BLOCKED</promise>", ["COMPLETE", "BLOCKED"], []),
    ("known and unknown", "<promise>NOPE</promise> <promise>COMPLETE</promise>", ["COMPLETE"], ["NOPE"]),
    ("in a block quote", "> <promise>COMPLETE</promise>", ["COMPLETE"], []),
    ("in a sentence", "I hereby <promise>COMPLETE</promise> the task.", ["COMPLETE"], []),
    ("CRLF", "done\r\n<promise>COMPLETE</promise>\r\n", ["COMPLETE"], []),
]


@pytest.mark.parametrize(("text", "expected", "unknown"), [c[1:] for c in TAGS], ids=[c[0] for c in TAGS])
def test_tags(text: str, expected: list[str], unknown: list[str]) -> None:
    got = detect_promises(text)
    assert [p.word for p in got.promises] == expected
    assert got.unknown == unknown


# --- comments and code --------------------------------------------------------

P = "<promise>COMPLETE</promise>"

HIDING: list[tuple[str, str, int]] = [
    # HTML comments
    ("comment", f"<!-- {P} -->", 0),
    ("comment, no spaces", f"<!--{P}-->", 0),
    ("multi-line comment", f"<!--\nnote:\n{P}\n-->", 0),
    ("unterminated comment", f"text <!-- {P}", 0),
    ("after a comment", f"<!-- x --> {P}", 1),
    ("between comments", f"<!-- a -->{P}<!-- b -->", 1),
    ("comment closes at the first -->", f"<!-- a --> {P} -->", 1),
    ("comment opener in code span", f"`<!--` {P}", 1),
    ("fence inside a comment opens nothing", f"<!--\n```\n-->\n{P}", 1),
    # backtick fences
    ("fence", f"```\n{P}\n```", 0),
    ("fence with info", f"```xml\n{P}\n```\n", 0),
    ("after a fence", f"```\ncode\n```\n{P}", 1),
    ("unclosed fence", f"intro\n```\n{P}\n", 0),
    ("longer fence", f"`````\n```\n{P}\n```\n`````", 0),
    ("longer fence, after", f"`````\n```\n```\n`````\n{P}", 1),
    ("closed by a longer fence", f"```\n{P}\n``````\n{P}", 1),
    ("not closed by a shorter fence", f"````\n```\n{P}", 0),
    ("not closed by the other char", f"```\n~~~\n{P}", 0),
    ("closing fence takes no info", f"```\n```js\n{P}", 0),
    ("indented fence", f"1. step\n\n    ```\n    {P}\n    ```", 0),
    ("fence in a block quote", f"> ```\n> {P}\n> ```", 0),
    ("backtick in info: not a fence", f"```a`b\n{P}", 1),
    ("two backticks: not a fence", f"``\n\n{P}\n\n``", 1),
    ("CRLF fence", f"```\r\n{P}\r\n```\r\n{P}", 1),
    # tilde fences
    ("tilde fence", f"~~~\n{P}\n~~~", 0),
    ("tilde fence with info", f"~~~ markdown\n{P}\n~~~\n", 0),
    ("unclosed tilde fence", f"~~~\n{P}", 0),
    ("longer tilde fence", f"~~~~~\n~~~\n{P}\n~~~\n~~~~~", 0),
    ("after a tilde fence", f"~~~~\n~~~\n~~~~~\n{P}", 1),
    ("tilde fence may hold backticks in info", f"~~~ a`b\n{P}\n~~~", 0),
    ("strikethrough is not a fence", f"~~old~~ {P}", 1),
    # inline code
    ("code span", f"`{P}`", 0),
    ("double code span", f"``a ` {P} ``", 0),
    ("after a code span", f"`x` {P}", 1),
    ("code span across a line", f"`a\n{P}\nb`", 0),
    ("unclosed backtick", f"`oops {P}", 1),
    ("unmatched run length", f"`` a {P} `", 1),
    ("code span stops at a blank line", f"`a\n\n{P}\n\nb`", 1),
    ("code span stops at a fence", f"`a\n```\nx\n```\n{P} `", 1),
    ("tag before a code span", f"{P} `x`", 1),
]


@pytest.mark.parametrize(("text", "count"), [c[1:] for c in HIDING], ids=[c[0] for c in HIDING])
def test_comments_and_code_hide_promises(text: str, count: int) -> None:
    got = detect_promises(text)
    assert [p.word for p in got.promises] == ["COMPLETE"] * count
    assert got.unknown == []


def test_a_hidden_promise_does_not_end_the_reason_region() -> None:
    p = only(f"<promise>BLOCKED</promise>\n<!-- {P} -->\nReason: r")
    assert p.reason == "r"


# --- one reading of a promise ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ours", "plugin"),
    [
        ("<promise>ALL GREEN</promise>", "ALL GREEN", "ALL GREEN"),
        ("  <promise>\n ALL \t GREEN \n</promise> trailing", "ALL GREEN", "ALL GREEN"),
        ("ALL  GREEN", "ALL GREEN", "ALL GREEN"),  # no tag: the whole text
        ("<PROMISE>done</PROMISE>", "done", "<PROMISE>done</PROMISE>"),  # the plugin's perl: tags as written
        ("<promise>a</promise> <promise>b</promise>", "a", "a"),  # the first element
        ("<promise>ALL\u00a0GREEN</promise>", "ALL GREEN", "ALL\u00a0GREEN"),  # the plugin: ASCII space only
    ],
)
def test_unwrap(text: str, ours: str, plugin: str) -> None:
    assert unwrap(text) == ours
    assert unwrap(text, plugin=True) == plugin


def test_a_configured_phrase_reads_the_same_everywhere() -> None:
    from ledger.loop.config.loop_config import promise_word

    for phrase in ("<promise> ALL  GREEN </promise>", "ALL \n GREEN", "<PROMISE>ALL GREEN</PROMISE>"):
        assert promise_word(phrase) == unwrap(phrase) == "ALL GREEN"
        assert words("<promise>all green</promise>", (phrase,)) == ["ALL GREEN"]


def test_only_this_module_parses_promise_tags() -> None:
    """One parser of ``<promise>`` elements: no other module of ledger/ compiles its own."""
    from pathlib import Path

    ledger = Path(__file__).resolve().parents[2] / "ledger"
    own = [
        f"{path.name}:{n}"
        for path in sorted(ledger.rglob("*.py"))
        if path.name != "promises.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "<promise>" in line and re.search(r"\bre\.(compile|match|fullmatch|search|sub|findall)\(", line)
    ]
    assert own == []


@pytest.mark.parametrize(
    ("text", "custom", "expected", "unknown"),
    [
        ("<promise>COMPLETE</promise>", ("ALL GREEN",), [], ["COMPLETE"]),
        ("<promise>LOOP_DONE</promise>", ("ALL GREEN",), [], ["LOOP_DONE"]),
        ("<promise>ALL GREEN</promise>", ("ALL GREEN",), ["ALL GREEN"], []),
        ("<promise>BLOCKED</promise>", ("ALL GREEN",), ["BLOCKED"], []),  # not a completion word
        ("<promise>COMPLETE</promise>", ("<promise>COMPLETE</promise>",), ["COMPLETE"], []),
        (
            "<promise>LOOP_DONE</promise> <promise>COMPLETE</promise>",
            ("COMPLETE",),
            ["COMPLETE"],
            ["LOOP_DONE"],
        ),
        ("<promise>COMPLETE</promise>", (), [], ["COMPLETE"]),
    ],
)
def test_exclusive_phrases_are_the_only_completion(
    text: str, custom: tuple[str, ...], expected: list[str], unknown: list[str]
) -> None:
    got = detect_promises(text, custom, exclusive=True)
    assert [p.word for p in got.promises] == expected and got.unknown == unknown
    assert [p.word for p in detect_promises(text, custom).promises] != [] or not unknown


# --- custom phrases -----------------------------------------------------------

CUSTOM: list[tuple[str, str, tuple[str, ...], list[str], list[str]]] = [
    ("exact", "<promise>DONE ALL</promise>", ("DONE ALL",), ["DONE ALL"], []),
    ("odd whitespace", "<promise>done   all</promise>", ("DONE ALL",), ["DONE ALL"], []),
    ("tabs and newlines", "<promise>\n\tDone \n All  </promise>", ("DONE ALL",), ["DONE ALL"], []),
    ("configured with odd whitespace", "<promise>done all</promise>", ("  DONE \t ALL ",), ["DONE ALL"], []),
    ("word keeps configured case", "<promise>DONE ALL</promise>", ("Done  all",), ["Done all"], []),
    ("configured in tags", "<promise>done all</promise>", ("<promise>DONE ALL</promise>",), ["DONE ALL"], []),
    ("no space is another phrase", "<promise>DONEALL</promise>", ("DONE ALL",), [], ["DONEALL"]),
    ("prefix is not enough", "<promise>DONE ALL NOW</promise>", ("DONE ALL",), [], ["DONE ALL NOW"]),
    ("untagged phrase", "DONE ALL", ("DONE ALL",), [], []),
    ("not configured", "<promise>DONE ALL</promise>", (), [], ["DONE ALL"]),
    ("empty phrase ignored", "<promise></promise>", ("",), [], [""]),
    ("blank phrase ignored", "<promise>  </promise>", ("  \n",), [], [""]),
    ("hidden in a fence", "```\n<promise>DONE ALL</promise>\n```", ("DONE ALL",), [], []),
    (
        "unicode",
        "<promise>FERTIG \u00dcBERALL</promise>",
        ("fertig \u00fcberall",),
        ["fertig \u00fcberall"],
        [],
    ),
    ("standard words still work", "<promise>BLOCKED</promise>", ("DONE ALL",), ["BLOCKED"], []),
    ("several phrases", "<promise>a b</promise><promise>c</promise>", ("A B", "C"), ["A B", "C"], []),
]


@pytest.mark.parametrize(
    ("text", "custom", "expected", "unknown"), [c[1:] for c in CUSTOM], ids=[c[0] for c in CUSTOM]
)
def test_custom_phrases(text: str, custom: tuple[str, ...], expected: list[str], unknown: list[str]) -> None:
    got = detect_promises(text, custom)
    assert [p.word for p in got.promises] == expected
    assert got.unknown == unknown


def test_custom_phrase_signal_and_action() -> None:
    p = only("<promise>done all</promise>", ("DONE ALL",))
    assert (p.vocabulary, p.signal, p.harness_action) == ("custom", "COMPLETE", "allow stop, end loop")


@pytest.mark.parametrize(
    ("phrase", "vocabulary", "signal"),
    [("BLOCKED", "standard", "BLOCKED"), ("<promise>loop_error</promise>", "loop", "ESCALATE")],
)
def test_custom_phrase_naming_a_known_word_keeps_its_signal(
    phrase: str, vocabulary: str, signal: str
) -> None:
    word = phrase.removeprefix("<promise>").removesuffix("</promise>").upper()
    p = only(f"<promise>{word}</promise>", (phrase,))
    assert (p.vocabulary, p.signal) == (vocabulary, signal)


def test_custom_given_as_one_string_is_one_phrase() -> None:
    got = detect_promises("<promise>DONE ALL</promise><promise>D</promise>", "DONE ALL")
    assert [p.word for p in got.promises] == ["DONE ALL"]
    assert got.unknown == ["D"]


# --- several promises and the strongest one -------------------------------------

STRONGEST: list[tuple[str, str, tuple[str, ...], int | None]] = [
    ("none", "no promise here", (), None),
    ("one", "<promise>COMPLETE</promise>", (), 0),
    ("BLOCKED beats an earlier COMPLETE", "<promise>COMPLETE</promise> <promise>BLOCKED</promise>", (), 1),
    ("BLOCKED beats a later COMPLETE", "<promise>BLOCKED</promise> <promise>COMPLETE</promise>", (), 0),
    ("COMPLETE beats ESCALATE", "<promise>ESCALATE</promise> <promise>COMPLETE</promise>", (), 1),
    ("COMPLETE beats a later ESCALATE", "<promise>COMPLETE</promise> <promise>ESCALATE</promise>", (), 0),
    ("ESCALATE beats CONTINUE", "<promise>LOOP_CONTINUE</promise> <promise>LOOP_ERROR</promise>", (), 1),
    ("COMPLETE beats CONTINUE", "<promise>LOOP_DONE</promise> <promise>LOOP_CONTINUE</promise>", (), 0),
    ("CONTINUE alone", "<promise>LOOP_CONTINUE</promise>", (), 0),
    ("tie: the last", "<promise>LOOP_DONE</promise> <promise>COMPLETE</promise>", (), 1),
    ("tie: the last, other order", "<promise>COMPLETE</promise> <promise>LOOP_DONE</promise>", (), 1),
    (
        "tie of three",
        "<promise>BLOCKED</promise><promise>LOOP_BLOCKED</promise><promise>BLOCKED</promise>",
        (),
        2,
    ),
    (
        "LOOP_BLOCKED beats custom",
        "<promise>done all</promise> <promise>LOOP_BLOCKED</promise>",
        ("DONE ALL",),
        1,
    ),
    ("custom beats ESCALATE", "<promise>LOOP_ERROR</promise> <promise>done all</promise>", ("DONE ALL",), 1),
    (
        "all four",
        "<promise>LOOP_CONTINUE</promise><promise>ESCALATE</promise><promise>BLOCKED</promise>"
        "<promise>COMPLETE</promise>",
        (),
        2,
    ),
    ("hidden BLOCKED does not count", "<promise>COMPLETE</promise> `<promise>BLOCKED</promise>`", (), 0),
]


@pytest.mark.parametrize(
    ("text", "custom", "index"), [c[1:] for c in STRONGEST], ids=[c[0] for c in STRONGEST]
)
def test_strongest(text: str, custom: tuple[str, ...], index: int | None) -> None:
    found = detect_promises(text, custom).promises
    assert [p.offset for p in found] == sorted(p.offset for p in found)
    best = strongest(found)
    if index is None:
        assert best is None
    else:
        assert best is found[index]


def test_strongest_uses_offsets_not_argument_order() -> None:
    found = detect_promises("<promise>COMPLETE</promise> <promise>LOOP_DONE</promise>").promises
    assert strongest(reversed(found)) is found[1]
    assert strongest([]) is None


# --- Reason, Summary, context --------------------------------------------------

CAPTURE: list[tuple[str, str, str, str]] = [
    ("reason", "<promise>BLOCKED</promise>\nReason: no network", "no network", ""),
    ("summary", "<promise>COMPLETE</promise>\nSummary: 5 tests pass", "", "5 tests pass"),
    ("both", "<promise>COMPLETE</promise>\nSummary: s\nReason: r\n", "r", "s"),
    ("keys in any case", "<promise>BLOCKED</promise>\nREASON: r\nsummary:s", "r", "s"),
    ("same line", "<promise>BLOCKED</promise> Reason: r", "r", ""),
    ("indented", "<promise>BLOCKED</promise>\n   Reason:   r  ", "r", ""),
    ("bold key", "<promise>BLOCKED</promise>\n**Reason:** r\n**Summary**: s", "r", "s"),
    ("bullet key", "<promise>BLOCKED</promise>\n- Reason: r", "r", ""),
    ("first occurrence wins", "<promise>BLOCKED</promise>\nReason: one\n\nReason: two", "one", ""),
    ("later paragraph", "<promise>BLOCKED</promise>\n\nSome words.\n\nReason: later", "later", ""),
    ("before the promise is not captured", "Reason: early\n<promise>BLOCKED</promise>", "", ""),
    ("not part of the key", "<promise>BLOCKED</promise>\nTreason: r\nReasonable: r", "", ""),
    (
        "blocking issue alone",
        "<promise>BLOCKED</promise>\nBlocking issue: waiting on DBA",
        "waiting on DBA",
        "",
    ),
    (
        "blocking issue before the reason",
        "<promise>BLOCKED</promise>\nBlocking issue: b\nReason: r",
        "r\nBlocking issue: b",
        "",
    ),
    ("continuation lines", "<promise>BLOCKED</promise>\nReason: a\n  b\nc\n\nd", "a\nb\nc", ""),
    ("continuation stops at a key", "<promise>COMPLETE</promise>\nSummary: a\nReason: r\nb", "r\nb", "a"),
    (
        "continuation stops at a tag",
        "<promise>BLOCKED</promise>\nReason: a\n<context>\nx: 1\n</context>",
        "a",
        "",
    ),
    ("continuation stops at a fence", "<promise>BLOCKED</promise>\nReason: a\n```\nb\n```", "a", ""),
    ("empty value takes the next lines", "<promise>BLOCKED</promise>\nReason:\n- x\n- y", "- x\n- y", ""),
    (
        "in a fence: ignored",
        "<promise>BLOCKED</promise>\n```\nReason: example\n```\nReason: real",
        "real",
        "",
    ),
    ("in a comment: ignored", "<promise>BLOCKED</promise>\n<!--\nReason: no\n-->\nReason: yes", "yes", ""),
    ("context reason is a fallback", "<promise>BLOCKED</promise>\n<context>\nreason: c\n</context>", "c", ""),
    (
        "a Reason line beats the context's",
        "<promise>BLOCKED</promise>\n<context>\nreason: c\nsummary: cs\n</context>\nReason: r",
        "r",
        "cs",
    ),
    ("CRLF", "<promise>COMPLETE</promise>\r\nSummary: s\r\nmore\r\n\r\nnot", "", "s\nmore"),
]


@pytest.mark.parametrize(("text", "reason", "summary"), [c[1:] for c in CAPTURE], ids=[c[0] for c in CAPTURE])
def test_reason_and_summary(text: str, reason: str, summary: str) -> None:
    p = only(text)
    assert (p.reason, p.summary) == (reason, summary)


def test_capture_stops_at_the_next_promise() -> None:
    first, second = detect_promises(
        "<promise>COMPLETE</promise>\n<promise>BLOCKED</promise>\nReason: r\nSummary: s\n"
        "<context>\nk: v\n</context>"
    ).promises
    assert (first.reason, first.summary, first.context) == ("", "", {})
    assert (second.reason, second.summary, second.context) == ("r", "s", {"k": "v"})


def test_capture_stops_at_an_unknown_promise_tag_too() -> None:
    p = only("<promise>COMPLETE</promise>\n<promise>meh</promise>\nSummary: s")
    assert p.summary == ""


CONTEXT: list[tuple[str, str, dict[str, str]]] = [
    ("simple", "<context>\nk: v\n</context>", {"k": "v"}),
    ("one line", "<context>a: 1</context>", {"a": "1"}),
    ("keys lower-cased", "<context>\nSession_ID: X\n</context>", {"session_id": "X"}),
    (
        "quotes stripped",
        '<context>\na: "q"\nb: "\nc: ""\nd: "x" y\n</context>',
        {"a": "q", "b": '"', "c": "", "d": '"x" y'},
    ),
    ("single quotes kept", "<context>\na: 'q'\n</context>", {"a": "'q'"}),
    ("colons in value", "<context>\nurl: http://h:1/x\n</context>", {"url": "http://h:1/x"}),
    ("empty value", "<context>\nnotes:\n</context>", {"notes": ""}),
    (
        "malformed lines skipped",
        "<context>\njust text\n: nokey\n- item: x\n  ok: yes\nbad key: z\n\n</context>",
        {"ok": "yes"},
    ),
    ("later key wins", "<context>\na: 1\nA: 2\n</context>", {"a": "2"}),
    ("tags in any case", "<CONTEXT>\na: 1\n</Context>", {"a": "1"}),
    ("unclosed: none", "<context>\na: 1\n", {}),
    ("first block only", "<context>a: 1</context>\n<context>b: 2</context>", {"a": "1"}),
    ("hidden block skipped", "`<context>a: 1</context>`\n<context>b: 2</context>", {"b": "2"}),
    ("summary key", '<context>\nsummary: "s"\n</context>', {"summary": "s"}),
]


@pytest.mark.parametrize(("body", "context"), [c[1:] for c in CONTEXT], ids=[c[0] for c in CONTEXT])
def test_context_block(body: str, context: dict[str, str]) -> None:
    p = only(f"<promise>LOOP_DONE</promise>\n{body}")
    assert p.context == context


def test_context_fallback_summary_is_unquoted() -> None:
    p = only('<promise>COMPLETE</promise>\n<context>\n  summary: "all green"\n</context>')
    assert p.summary == "all green"


# --- API ------------------------------------------------------------------------


def test_to_event() -> None:
    p = only(
        'Done.\n<promise>LOOP_BLOCKED</promise>\nReason: r\nSummary: s\n<context>\nk: "v"\n</context>',
    )
    ev = to_event(p, session_id="s1", iteration=4)
    assert ev == E.PromiseDetected(
        session_id="s1",
        iteration=4,
        promise="LOOP_BLOCKED",
        signal="BLOCKED",
        reason="r",
        summary="s",
        context={"k": "v"},
        raw="<promise>LOOP_BLOCKED</promise>",
    )
    assert E.decode(E.encode(ev)) == ev
    assert ev.context is not p.context


def test_results_are_frozen_values() -> None:
    p = only("<promise>COMPLETE</promise>")
    with pytest.raises(AttributeError):
        p.word = "BLOCKED"  # type: ignore[misc]
    assert hash(p) == hash(only("<promise>COMPLETE</promise>"))
    assert detect_promises("") == Detection([], [])


def test_raw_is_the_tag_as_written() -> None:
    text = "x <Promise>\n  loop_done \n</PROMISE> y"
    p = only(text)
    assert p.raw == "<Promise>\n  loop_done \n</PROMISE>"
    assert text[p.offset : p.offset + len(p.raw)] == p.raw


@pytest.mark.parametrize(
    "text",
    [
        "`" * 200_000,
        "".join("`" * k + " " for k in range(1, 1400)),
        "<promise>" * 150_000,
        "<promise>" + "a" * 1_000_000,
        "<!--" * 300_000,
        "```\n" * 300_000,
        "".join("~" * k + "\n" for k in range(1400, 3, -1)),
        " " * 1_000_000 + "`",
        "<promise>BLOCKED</promise>\n" + "Reason: x\n" * 150_000,
        "<promise>BLOCKED</promise>\n" + "<context>\n" * 150_000,
        "<promise>BLOCKED</promise>\nReason:" + " " * 1_000_000 + "x",
        "<promise>LOOP_DONE</promise><context>\na:" + " " * 1_000_000 + "x\n</context>",
        "<promise>COMPLETE</promise>\nSummary: s\n" * 30_000,
        "a `b` <!-- c --> ~~~\n<promise>X</promise>\n" * 30_000,
    ],
    ids=lambda t: repr(t[:30]),
)
def test_large_adversarial_inputs_are_fast(text: str) -> None:
    t0 = time.perf_counter()
    detect_promises(text, ("DONE ALL",))
    assert time.perf_counter() - t0 < 3.0


# --- properties -------------------------------------------------------------------

KNOWN = sorted(VOCABULARY)
FRAGMENTS = st.sampled_from(
    [
        "<promise>",
        "</promise>",
        "<PROMISE>",
        "<promise >",
        "<promis",
        "e>",
        "</",
        "<",
        ">",
        "COMPLETE",
        "BLOCKED",
        "LOOP_DONE",
        "<!--",
        "-->",
        "-",
        "```",
        "~~~",
        "`",
        "``",
        "\n",
        "\n\n",
        " ",
        "\t",
        "\r\n",
        "> ",
        "Reason: ",
        "Summary: ",
        "<context>",
        "</context>",
        "k: v",
        "\u017f",
        "\u0130",
    ]
)
SOUP = st.lists(st.one_of(FRAGMENTS, st.text(max_size=5)), max_size=30).map("".join)
# the same with whole promises mixed in
TAGGED = st.sampled_from(
    ["<promise>COMPLETE</promise>", "<promise>DONE ALL</promise>", "<promise>?</promise>"]
)
RICH_SOUP = st.lists(st.one_of(FRAGMENTS, TAGGED, st.text(max_size=5)), max_size=30).map("".join)
_CLOSES_BACKTICK_FENCE = re.compile(r"^[ \t>]*`{3,}[ \t]*\r?$", re.MULTILINE)


@FAST
@given(SOUP)
def test_no_promise_without_an_opening_tag(text: str) -> None:
    assume("<promise>" not in text.lower())
    got = detect_promises(text, ("COMPLETE", "x"))
    assert got.promises == [] and got.unknown == []


@FAST
@given(RICH_SOUP)
def test_a_text_inside_a_comment_has_no_promise(inner: str) -> None:
    assume("-->" not in inner)
    got = detect_promises(f"<!--{inner}-->", ("DONE ALL",))
    assert got.promises == [] and got.unknown == []


@FAST
@given(RICH_SOUP)
def test_a_text_inside_a_closed_fence_has_no_promise(inner: str) -> None:
    assume(not _CLOSES_BACKTICK_FENCE.search(inner))
    got = detect_promises(f"```\n{inner}\n```", ("DONE ALL",))
    assert got.promises == [] and got.unknown == []


@FAST
@given(st.sampled_from(KNOWN), st.text(alphabet=st.characters(exclude_characters="<`~")))
def test_a_known_word_in_plain_text_is_found_once(word: str, text: str) -> None:
    got = detect_promises(f"{text}<promise>{word}</promise>{text}")
    assert [p.word for p in got.promises] == [word]
    assert got.promises[0].offset == len(text)
    assert got.unknown == []


@FAST
@given(
    st.sampled_from(KNOWN),
    st.text(alphabet=" \t\n", max_size=4),
    st.text(alphabet=" \t\n", max_size=4),
    st.booleans(),
)
def test_known_words_ignore_case_and_padding(word: str, left: str, right: str, lower: bool) -> None:
    p = only(f"<promise>{left}{word.lower() if lower else word}{right}</promise>")
    assert p.word == word and p.signal == VOCABULARY[word]


@FAST
@given(
    st.lists(st.text(alphabet="abcXYZ\u00e9", min_size=1, max_size=6), min_size=1, max_size=4),
    st.lists(st.text(alphabet=" \t\n", min_size=1, max_size=3), min_size=5, max_size=5),
)
def test_custom_phrases_match_across_whitespace(parts: list[str], gaps: list[str]) -> None:
    phrase = " ".join(parts)
    # the parts, case swapped, with 1-3 whitespace characters before, between and after
    written = gaps[0] + "".join(part.swapcase() + gap for part, gap in zip(parts, gaps[1:], strict=False))
    p = only(f"<promise>{written}</promise>", (phrase,))
    assert p.word == phrase and p.vocabulary == "custom" and p.signal == "COMPLETE"


@FAST
@given(st.text(), st.lists(st.text(max_size=8), max_size=3))
def test_never_raises_on_any_text(text: str, custom: list[str]) -> None:
    got = detect_promises(text, custom)
    assert isinstance(got, Detection)


@FAST
@given(RICH_SOUP, st.lists(st.sampled_from(["DONE ALL", "x", ""]), max_size=2))
def test_promises_are_in_text_order_and_raw_is_exact(text: str, custom: list[str]) -> None:
    got = detect_promises(text, custom)
    offsets = [p.offset for p in got.promises]
    assert offsets == sorted(set(offsets))
    for p in got.promises:
        assert text[p.offset : p.offset + len(p.raw)] == p.raw
        assert p.raw.lower().startswith("<promise>") and p.raw.lower().endswith("</promise>")
    best = strongest(got.promises)
    assert (best is None) == (not got.promises)
