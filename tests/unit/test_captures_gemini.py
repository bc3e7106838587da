"""Gemini CLI 0.61.0's real output (``tests/fixtures/clients/gemini-cli-0.61.0``, made by
``tests/clients/capture_gemini.py``) read back: what the parser, the format detection, the plain-mode
refusal and the limit recogniser make of it equals what the mock served (``CASE.served.json``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger.drivers.runner.formats import detect, plain_refusal, text
from ledger.drivers.runner.formats.gemini import parse
from ledger.drivers.runner.formats.report import by_model
from ledger.drivers.runner.limits import rate_limit
from ledger.events import TokenUsage
from tests.clients.capture_gemini import CASES, OUT
from tests.clients.gemini_client import PROMISE
from tests.clients.mocks.gemini import MODEL, ROUTER_MODEL

NOW = datetime(2026, 11, 28, 3, 0, tzinfo=UTC)


def clock() -> datetime:
    return NOW


def case(name: str) -> tuple[str, str, dict[str, Any]]:
    """A case's stdout, stderr ("" when not captured) and what the mock served."""
    ext = CASES[name][3]
    stderr = OUT / f"{name}.stderr.txt"
    served = json.loads((OUT / f"{name}.served.json").read_text())
    return (OUT / f"{name}.{ext}").read_text(), stderr.read_text() if stderr.exists() else "", served


def tokens(usages: list[dict[str, int]]) -> TokenUsage:
    """What the ledger records for ``usages``: thoughts billed, so counted, as output."""
    return TokenUsage(
        input=sum(u["input"] for u in usages),
        output=sum(u["output"] + u["thoughts"] for u in usages),
        cache_read=sum(u["cache_read"] for u in usages),
    )


def models(served: dict[str, Any]) -> dict[str, TokenUsage]:
    """Each model's tokens as served."""
    names = dict.fromkeys(e["model"] for e in served["log"])
    return {m: tokens([e["usage"] for e in served["log"] if e["model"] == m]) for m in names}


REPLIES = ["stream-json-auto-tools", "stream-json-model-tools", "json-auto-tools", "json-model"]


@pytest.mark.parametrize("name", REPLIES)
def test_a_captured_run_reads_as_the_mock_served_it(name: str) -> None:
    stdout, _, served = case(name)
    report = parse(stdout)
    assert detect(["gemini", *CASES[name][0]]).name == "gemini"
    assert report.text == served["final_text"]
    assert report.tokens == tokens([e["usage"] for e in served["log"]])  # the router's included
    assert dict(report.models) == models(served)
    turn_models = {e["model"] for e in served["log"] if e["turn"]}
    assert len(turn_models) == 1 and report.model in turn_models  # never "auto", never the router
    own, others = by_model(report)
    assert own == models(served)[report.model]
    assert dict(others) == {m: t for m, t in models(served).items() if m != report.model}
    assert report.tool_count == served["tool_calls"] and report.skipped == 0
    if name.startswith("stream-json"):
        assert list(report.files_modified) == served["files"]  # json names no paths: git tells
    assert report.tokens.output > sum(e["usage"]["output"] for e in served["log"])  # thoughts: not vacuous


def test_the_auto_captures_used_the_router_and_the_model_captures_did_not() -> None:
    assert ROUTER_MODEL in models(case("stream-json-auto-tools")[2])
    assert ROUTER_MODEL in models(case("json-auto-tools")[2])
    assert set(models(case("stream-json-model-tools")[2])) == {MODEL}


def test_plain_output_holds_the_commentary_so_plain_gemini_is_refused() -> None:
    stdout, _, served = case("plain-tools")
    assert PROMISE in text.parse(stdout).text and PROMISE not in served["final_text"]
    assert detect(["gemini", *CASES["plain-tools"][0]]).name == "text"
    refusal = plain_refusal(["gemini", *CASES["plain-tools"][0]], None)
    assert refusal is not None and "-o stream-json" in refusal
    assert plain_refusal(["gemini", "-o", "stream-json", "--yolo"], None) is None
    assert plain_refusal(["gemini", "--yolo"], "gemini") is None  # a format named is the user's word


@pytest.mark.parametrize("name", ["stream-json-429", "json-429"])
def test_a_captured_429_is_a_limit_with_its_whole_reason_and_reset(name: str) -> None:
    stdout, stderr, _ = case(name)
    limit = rate_limit(f"{stdout}\n{stderr}", True, clock, "gemini")
    assert limit is not None
    stream = name.startswith("stream")  # stream-json's API error, or -o json's bare message
    assert limit.reason.startswith("[API Error: You exceeded" if stream else "You exceeded")
    assert limit.reason.endswith("Suggested retry after 1s.]" if stream else "Suggested retry after 1s.")
    assert "\n" not in limit.reason and "limit: 2, model: gemini-2.5-pro" in limit.reason
    assert limit.resets_at == NOW + timedelta(seconds=1.185908122)
    assert parse(stdout).tokens == TokenUsage()  # nothing was served


def test_a_captured_daily_quota_is_a_limit_without_a_reset() -> None:
    stdout, stderr, _ = case("stream-json-429-daily")
    limit = rate_limit(f"{stdout}\n{stderr}", True, clock, "gemini")
    assert limit is not None
    assert limit.reason == "[API Error: You have exhausted your daily quota on this model.]"
    assert limit.resets_at is None


def test_every_case_was_captured() -> None:
    names = {p.name.split(".")[0] for p in Path(OUT).iterdir() if p.name != "README.md"}
    assert names == set(CASES)


@pytest.mark.parametrize("name", ["stream-json-empty", "json-empty"])
def test_an_empty_answer_is_an_error_though_gemini_exits_0(name: str) -> None:
    stdout, _, served = case(name)
    report = parse(stdout)
    assert report.error.startswith("The model returned an empty response")
    assert report.text == "" and report.tokens == tokens([e["usage"] for e in served["log"]])
