"""Real opencode 1.18.33 output (``tests/fixtures/clients/opencode-1.18.33/``, made by
``tests/clients/capture_chat.py``) read by the ``opencode`` format and limit recogniser; the expected
numbers come from what the mock served (``capture_chat.CASES``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from ledger.drivers.runner.formats import FORMATS, detect, plain_refusal
from ledger.drivers.runner.limits import rate_limit
from ledger.events import TokenUsage
from tests.clients.capture_chat import CASES, OPENCODE
from tests.clients.mocks.base import Reply
from tests.clients.test_opencode_run import PRICE

NOW = datetime(2026, 11, 28, 2, 0, tzinfo=UTC)
PROMISE = "<promise>COMPLETE</promise>"


def replies(name: str) -> list[Reply]:
    return [t for t in CASES[name][2] if isinstance(t, Reply)]


def test_json_mode_reports_what_was_served() -> None:
    """Tokens (reasoning billed as output) and cost per step summed, both tools, the file written,
    and the text after the last tool call: not the commentary before it, which names the promise."""
    output = (OPENCODE / "run-json-tools.jsonl").read_text()
    served = replies("run-json-tools")
    report = FORMATS["opencode"].parse(output)
    assert report.tokens == TokenUsage(
        input=sum(r.usage.input for r in served),
        output=sum(r.usage.output + r.usage.thoughts for r in served),
        cache_read=sum(r.usage.cache_read for r in served),
    )
    assert report.cost_usd == pytest.approx(
        sum(
            r.usage.input * PRICE["input"]
            + (r.usage.output + r.usage.thoughts) * PRICE["output"]
            + r.usage.cache_read * PRICE["cache_read"]
            for r in served
        )
        / 1e6,
        rel=1e-9,
    )
    assert report.text == served[-1].text and PROMISE not in report.text
    assert PROMISE in output  # in the commentary and in the command's output
    assert report.tool_count == sum(len(r.tool_calls) for r in served)
    assert report.files_modified == ("notes.txt",)
    assert report.model == "" and report.skipped == 0 and report.error == ""


def test_plain_mode_mixes_commentary_with_the_answer_so_run_refuses_it() -> None:
    """Plain ``opencode run`` writes every text part to stdout, commentary before a tool call too (the
    tools' echo goes to stderr): the promise in the commentary cannot be told from an answer."""
    stdout = (OPENCODE / "run-plain-tools.stdout").read_text()
    stderr = (OPENCODE / "run-plain-tools.stderr").read_text()
    assert stdout.splitlines() == [r.text for r in replies("run-plain-tools")]
    assert PROMISE in stdout.splitlines()[0] and "echo '<promise>COMPLETE</promise>'" in stderr
    command = ["opencode", "run", "-m", "mock/gpt-4.1"]
    assert detect(command).name == "text"
    refusal = plain_refusal(command, None)
    assert refusal is not None and "--format json" in refusal
    assert plain_refusal([*command, "--format", "json"], None) is None
    assert plain_refusal(command, "text") is None  # the user's word


def test_a_429_it_gave_up_on_is_a_limit_reset_after_its_retry_after() -> None:
    output = (OPENCODE / "run-json-429.jsonl").read_text()
    limit = rate_limit(output, True, lambda: NOW, "opencode")
    assert limit is not None and limit.reason.startswith("Rate limit reached for gpt-4.1")
    assert limit.resets_at == NOW + timedelta(seconds=1)  # retry-after-ms: 1000
    report = FORMATS["opencode"].parse(output)
    assert report.text == "" and report.error == limit.reason  # the run failed on it


def test_a_zero_cost_for_tokens_spent_is_unknown_and_the_command_names_the_model() -> None:
    """opencode reports cost 0 when its configuration gives the model no price: not free, unknown,
    and priced by the ledger from the model ``-m provider/model`` names."""
    from ledger.drivers.runner.formats import command_model

    lines = [json.loads(x) for x in (OPENCODE / "run-json-tools.jsonl").read_text().splitlines() if x]
    for e in lines:
        if e.get("type") == "step_finish":
            e["part"]["cost"] = 0
    report = FORMATS["opencode"].parse("\n".join(map(json.dumps, lines)))
    assert report.tokens != TokenUsage() and report.cost_usd is None
    assert command_model(["opencode", "run", "--format", "json", "-m", "openai/gpt-4.1"]) == "gpt-4.1"
    assert command_model(["opencode", "run", "--model", "gpt-4.1"]) == "gpt-4.1"
