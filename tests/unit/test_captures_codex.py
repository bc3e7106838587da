"""The real output of OpenAI Codex 0.169.0 (``tests/fixtures/clients/codex-0.169.0/``, made against
the Responses mock: see its README), replayed through the ``codex`` format, plain-mode reading and the
limit recognisers. Expected numbers come from what the mock served (each capture's ``.served.json``)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger.drivers.runner.changes import in_project
from ledger.drivers.runner.formats import FORMATS, detect, plain_refusal
from ledger.drivers.runner.limits import rate_limit
from ledger.events import TokenUsage
from ledger.loop.validate.promises import detect_promises

CAPTURES = Path(__file__).parents[1] / "fixtures" / "clients" / "codex-0.169.0"
WORK = Path("/tmp/codex-0.169.0")
"""Where the captures were made (``$TMP`` of the README): each case's project is ``WORK/CASE/work``."""
PROMISE = "<promise>COMPLETE</promise>"


def capture(name: str) -> str:
    return (CAPTURES / name).read_text()


def served(case: str) -> list[dict[str, Any]]:
    """What the mock served in ``case``, in order."""
    data: list[dict[str, Any]] = json.loads(capture(f"{case}.served.json"))
    return data


def expected_tokens(case: str) -> TokenUsage:
    """The tokens served in ``case``: input without cache reads and writes, output with reasoning."""
    usages = [t["usage"] for t in served(case) if "usage" in t]
    return TokenUsage(
        input=sum(u["input"] for u in usages),
        output=sum(u["output"] + u["thoughts"] for u in usages),
        cache_read=sum(u["cache_read"] for u in usages),
        cache_creation=sum(u["cache_write"] for u in usages),
    )


@pytest.fixture
def utc() -> Iterator[None]:
    """This process in UTC, the zone the captures were made in (Codex says a reset's local time)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TZ", "UTC")
        time.tzset()
        yield
    time.tzset()


# ----------------------------------------------------------------------------- exec --json
@pytest.mark.parametrize("case", ["exec-json-tools", "exec-json-complete"])
def test_json_tokens_text_and_tools_are_what_was_served(case: str) -> None:
    report = FORMATS["codex"].parse(capture(f"{case}.jsonl"))
    turns = served(case)
    assert report.tokens == expected_tokens(case)
    assert report.text == turns[-1]["text"]
    assert report.tool_count == sum(len(t["tool_calls"]) for t in turns)
    assert report.skipped == 0 and report.error == "" and report.model == ""


def test_json_capture_holds_cache_writes_and_decoys() -> None:
    """The numbers above are not vacuous: cache writes were served, and the promise is in the
    reasoning and the command's output of the run that must not complete."""
    assert expected_tokens("exec-json-tools").cache_creation > 0
    out = capture("exec-json-tools.jsonl")
    assert out.count(PROMISE) >= 3
    report = FORMATS["codex"].parse(out)
    assert not detect_promises(report.text).promises
    assert detect_promises(FORMATS["codex"].parse(capture("exec-json-complete.jsonl")).text).promises


def test_json_files_are_absolute_and_stored_relative_to_the_project() -> None:
    report = FORMATS["codex"].parse(capture("exec-json-tools.jsonl"))
    project = WORK / "exec-json-tools" / "work"
    assert report.files_modified == (str(project / "notes.txt"),)
    assert in_project(report.files_modified, project) == ["notes.txt"]
    assert in_project(["/elsewhere/x.txt", "sub/y.txt"], project) == ["/elsewhere/x.txt", "sub/y.txt"]


def test_json_401_is_the_reports_error_and_no_limit() -> None:
    out = capture("exec-json-401.jsonl")
    report = FORMATS["codex"].parse(out)
    assert served("exec-json-401")[0]["status"] == 401
    assert report.error.startswith("unexpected status 401 Unauthorized: Incorrect API key provided")
    assert rate_limit(out, True, lambda: datetime.now(UTC), "codex") is None


# ----------------------------------------------------------------------------- usage limits
def test_json_usage_limit_with_its_reset(utc: None) -> None:
    out = capture("exec-json-usage-limit.jsonl")
    assert "You\u2019ve hit your usage limit" in out  # a typographic apostrophe
    resets = datetime.fromtimestamp(served("exec-json-usage-limit")[0]["body"]["error"]["resets_at"], UTC)
    made = resets - timedelta(hours=3)  # the capture asked for a reset three hours on
    limit = rate_limit(out, True, lambda: made, "codex")
    assert limit is not None and limit.reason.startswith("You've hit your usage limit.")
    assert limit.resets_at == resets.replace(second=0)  # Codex says the minute
    assert FORMATS["codex"].parse(out).error == limit.reason.replace("'", "\u2019")


def test_json_usage_limit_without_a_reset() -> None:
    out = capture("exec-json-usage-limit-no-reset.jsonl")
    limit = rate_limit(out, True, lambda: datetime.now(UTC), "codex")
    assert limit is not None and limit.resets_at is None
    assert limit.reason.endswith("or try again later.")


def test_plain_usage_limit_is_on_stderr() -> None:
    stdout, stderr = (
        capture("exec-plain-usage-limit.stdout.txt"),
        capture("exec-plain-usage-limit.stderr.txt"),
    )
    assert stdout == ""
    limit = rate_limit(f"{stdout}\n{stderr}", True, lambda: datetime.now(UTC), None)  # a text run
    assert limit is not None and limit.reason.startswith("You've hit your usage limit.")


# ----------------------------------------------------------------------------- plain exec
def test_plain_stdout_is_the_final_answer_alone() -> None:
    argv = ["codex", "exec", "--skip-git-repo-check"]
    fmt = detect(argv)
    assert fmt.name == "text" and plain_refusal(argv, None) is None
    stdout, stderr = capture("exec-plain-tools.stdout.txt"), capture("exec-plain-tools.stderr.txt")
    report = fmt.parse(stdout)
    assert report.text.strip() == served("exec-plain-tools")[-1]["text"]
    assert not detect_promises(report.text).promises
    assert stderr.count(PROMISE) >= 3  # the prompt, the reasoning and the command, echoed on stderr


def test_json_429_after_codexs_retries_is_a_limit_without_a_reset() -> None:
    out = capture("exec-json-429.jsonl")
    assert served("exec-json-429")[0]["body"]["error"]["code"] == "rate_limit_exceeded"
    limit = rate_limit(out, True, lambda: datetime.now(UTC), "codex")
    assert limit is not None and limit.resets_at is None
    assert limit.reason == "exceeded retry limit, last status: 429 Too Many Requests"


def test_json_message_before_a_call_is_commentary_not_the_answer() -> None:
    """The last request answered nothing: Codex's last message came before its command."""
    out = capture("exec-json-commentary.jsonl")
    report = FORMATS["codex"].parse(out)
    assert served("exec-json-commentary")[-1]["text"] == ""
    assert PROMISE in out and report.text == ""
    assert report.tokens == expected_tokens("exec-json-commentary") and report.tool_count == 1


def test_plain_stdout_is_codexs_last_message_even_before_a_call() -> None:
    """Plain mode cannot tell: stdout is Codex's last message, here the commentary (a model whose last
    request answers nothing; docs/design/clients.md)."""
    stdout = capture("exec-plain-commentary.stdout.txt")
    assert stdout.strip() == served("exec-plain-commentary")[0]["text"]
