"""Claude Code 2.1.328's own output, captured against the Anthropic mock
(``tests/fixtures/clients/claude-code-2.1.328/README-run.md``), read by the runner's formats and limit
recognisers: every expected number is computed from the turns the mock served (``run-served.json``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price

from ledger.drivers.runner.formats import FORMATS, detect, plain_refusal
from ledger.drivers.runner.limits import rate_limit
from ledger.events import TokenUsage
from tests.clients.claude_code_client import CAPTURES, PROMPT

SERVED: dict[str, Any] = json.loads((CAPTURES / "run-served.json").read_text())
MODEL = "claude-sonnet-4-5-20250929"


def clock() -> Any:
    from datetime import UTC, datetime

    return datetime(2026, 11, 28, 3, 0, tzinfo=UTC)


def replies(case: str) -> list[dict[str, Any]]:
    return [t["reply"] for t in SERVED[case]["served"] if "reply" in t]


def served_tokens(case: str) -> TokenUsage:
    us = [r["usage"] for r in replies(case)]
    return TokenUsage(
        input=sum(u["input"] for u in us),
        output=sum(u["output"] for u in us),
        cache_read=sum(u["cache_read"] for u in us),
        cache_creation=sum(u["cache_write"] for u in us),
    )


def priced(tokens: TokenUsage) -> float:
    """What genai-prices (the ledger's prices) charges for ``tokens`` of the model."""
    usage = PriceUsage(
        input_tokens=tokens.input + tokens.cache_read + tokens.cache_creation,
        output_tokens=tokens.output,
        cache_read_tokens=tokens.cache_read,
        cache_write_tokens=tokens.cache_creation,
    )
    return float(calc_price(usage, model_ref=MODEL).total_price)


def argv(case: str) -> list[str]:
    return list(SERVED[case]["argv"])


@pytest.mark.parametrize("case", ["run-stream-json.jsonl", "run-json.json"])
def test_the_json_modes_report_what_was_served(case: str) -> None:
    """Tokens (the last turn included), the client's cost (= genai-prices' for the served tokens),
    model, tools, files, final text; stream-json also the context of the last request."""
    fmt = detect(argv(case))
    assert fmt.name == "claude"
    report = fmt.parse((CAPTURES / case).read_text())
    served = replies(case)
    tokens = served_tokens(case)
    assert report.tokens == tokens and tokens.output > 2 * len(served)  # not output_tokens 1 per message
    assert report.cost_usd == pytest.approx(priced(tokens), abs=1e-9)
    assert report.model == MODEL
    assert report.text == served[-1]["text"] and "<promise>COMPLETE</promise>" in report.text
    calls = [c for r in served for c in r["tool_calls"]]
    if case.endswith(".jsonl"):  # json mode is one result object: no tools, files or context in it
        assert report.tool_count == len(calls)
        assert report.files_modified == tuple(c["arguments"]["file_path"] for c in calls)
        last = served[-1]["usage"]
        assert report.context_tokens == last["input"] + last["cache_read"] + last["cache_write"]
    else:
        assert (report.tool_count, report.files_modified, report.context_tokens) == (0, (), 0)
    assert (report.skipped, report.error) == (0, "")
    assert rate_limit((CAPTURES / case).read_text(), False, clock, fmt.limits) is None


def test_stream_json_assistant_lines_carry_one_output_token_each() -> None:
    """Why the tokens come from the ``result`` line: each assistant line repeats its message's
    ``message_start`` usage (issue 22, defect 2)."""
    lines = [json.loads(x) for x in (CAPTURES / "run-stream-json.jsonl").read_text().splitlines()]
    outputs = {
        x["message"]["id"]: x["message"]["usage"]["output_tokens"] for x in lines if x["type"] == "assistant"
    }
    assert set(outputs.values()) == {1}
    result = next(x for x in lines if x["type"] == "result")
    assert result["usage"]["output_tokens"] == served_tokens("run-stream-json.jsonl").output


def test_plain_mode_prints_only_the_final_text() -> None:
    """Plain ``claude -p`` writes the final text alone on stdout: the earlier turn's text and the
    prompt (which holds the promise) are not echoed, so it is read safely as text, never refused."""
    case = "run-text.txt"
    out = (CAPTURES / case).read_text()
    served = replies(case)
    assert out == served[-1]["text"] + "\n"
    assert PROMPT not in out and served[0]["text"] not in out
    assert detect(argv(case)).name == "text" and plain_refusal(argv(case), None) is None
    assert FORMATS["text"].parse(out).text.strip() == served[-1]["text"]


@pytest.mark.parametrize("case", ["run-stream-json-429.jsonl", "run-json-429.json", "run-text-429.txt"])
def test_a_rate_limit_the_client_gave_up_on_is_seen_in_every_mode(case: str) -> None:
    out = (CAPTURES / case).read_text()
    assert SERVED[case]["exit"] == 1
    fmt = detect(argv(case))
    limit = rate_limit(out, True, clock, fmt.limits)
    assert limit is not None and limit.resets_at is None  # the client does not pass retry-after on
    assert limit.reason.startswith("API Error: Request rejected (429) · This request would exceed")
    if fmt.name == "claude":
        report = fmt.parse(out)
        assert (report.tokens, report.cost_usd) == (TokenUsage(), 0)


@pytest.mark.parametrize("case", ["run-stream-json-401.jsonl", "run-text-500.txt"])
def test_other_api_errors_are_no_limit(case: str) -> None:
    """A bad key or a server error is a failed run (the runner fails the iteration), not a limit."""
    out = (CAPTURES / case).read_text()
    assert SERVED[case]["exit"] == 1
    assert rate_limit(out, True, clock, detect(argv(case)).limits) is None
    if case.endswith(".jsonl"):
        report = FORMATS["claude"].parse(out)
        assert (
            report.model == MODEL and report.error == report.text == "Invalid API key · Fix external API key"
        )


def test_max_turns_reached_is_an_error_with_the_turns_spent() -> None:
    """``--max-turns`` reached: exit 1, a ``result`` with no text whose ``errors`` say why; the
    iteration fails saying so, with what the turn spent."""
    case = "run-json-max-turns.json"
    report = FORMATS["claude"].parse((CAPTURES / case).read_text())
    assert SERVED[case]["exit"] == 1 and "--max-turns" in argv(case)
    assert report.error == "Reached maximum number of turns (1)" and report.text == ""
    assert (
        report.tokens == served_tokens(case) and report.tokens.output == replies(case)[0]["usage"]["output"]
    )
    assert report.cost_usd == pytest.approx(priced(report.tokens), abs=1e-9)


def test_a_sub_agents_tokens_count_as_its_cost_does() -> None:
    """The ``result``'s ``usage`` counts the main thread only; its ``modelUsage`` and its cost count
    the sub-agent too: the tokens recorded are every request's, as the cost is."""
    case = "run-stream-json-subagent.jsonl"
    out = (CAPTURES / case).read_text()
    result = json.loads(out.splitlines()[-1])
    served = replies(case)
    main = [served[0]["usage"], served[2]["usage"]]
    assert result["usage"]["input_tokens"] == sum(u["input"] for u in main)  # the sub-agent left out
    report = FORMATS["claude"].parse(out)
    assert report.tokens == served_tokens(case)
    assert report.cost_usd == pytest.approx(priced(report.tokens), abs=1e-9)
    assert report.text == served[-1]["text"] and report.tool_count == 1
    last = served[-1]["usage"]
    assert report.context_tokens == last["input"] + last["cache_read"] + last["cache_write"]  # the main's
