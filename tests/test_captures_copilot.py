"""Real GitHub Copilot CLI 1.0.102 output (``tests/fixtures/clients/copilot-1.0.102/``, made by
``tests/clients/capture_chat.py``) read by the ``copilot`` format and limit recogniser; the expected
numbers come from what the mock served (``capture_chat.CASES``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ledger.agents.formats import FORMATS, detect, plain_refusal
from ledger.agents.rate_limits import copilot, rate_limit
from ledger.events import TokenUsage
from tests.clients.capture_chat import CASES, COPILOT, WORK
from tests.clients.mocks.base import Reply
from tests.clients.mocks.chat import MODEL

NOW = datetime(2026, 11, 28, 2, 0, tzinfo=UTC)
PROMISE = "<promise>COMPLETE</promise>"


def replies(name: str) -> list[Reply]:
    return [t for t in CASES[name][2] if isinstance(t, Reply)]


def test_json_mode_reads_the_last_message_tools_files_and_model() -> None:
    """The final text is the last ``assistant.message``, not the prompt's echo (``user.message``),
    commentary, reasoning or a command, which all name the promise; no tokens: the stream has none."""
    output = (COPILOT / "json-tools.jsonl").read_text()
    served = replies("json-tools")
    report = FORMATS["copilot"].parse(output)
    assert report.text == served[-1].text and PROMISE not in report.text
    assert output.count(PROMISE) >= 4
    assert report.tool_count == sum(len(r.tool_calls) for r in served)
    assert report.files_modified == (str(WORK / "notes.txt"),)
    assert report.model == MODEL
    assert report.tokens == TokenUsage() and report.cost_usd is None
    assert report.skipped == 0 and report.error == ""


def test_text_mode_echoes_commands_with_the_answer_so_run_refuses_it() -> None:
    stdout = (COPILOT / "text-tools.stdout").read_text()
    assert "echo '<promise>COMPLETE</promise>'" in stdout and replies("text-tools")[-1].text in stdout
    assert "Tokens" in (COPILOT / "text-tools.stderr").read_text()  # its stats go to stderr
    for command in (["copilot", "--allow-all-tools"], ["copilot", "-p", "x", "--output-format", "text"]):
        assert detect(command).name == "text"
        refusal = plain_refusal(command, None)
        assert refusal is not None and "--output-format json" in refusal
    assert plain_refusal(["copilot", "--output-format", "json"], None) is None


def test_a_json_429_is_a_limit_reset_when_openai_said() -> None:
    output = (COPILOT / "json-429.jsonl").read_text()
    limit = rate_limit(output, True, lambda: NOW, "copilot")
    assert limit is not None and "Last error: 429 Rate limit reached for gpt-4.1" in limit.reason
    assert limit.resets_at == NOW + timedelta(seconds=1)
    report = FORMATS["copilot"].parse(output)
    assert report.text == "" and report.error == limit.reason  # the run failed on it


def test_a_text_mode_429_on_stderr_is_a_limit_of_a_failed_run_only() -> None:
    said = (COPILOT / "text-429.stdout").read_text() + "\n" + (COPILOT / "text-429.stderr").read_text()
    limit = rate_limit(said, True, lambda: NOW)  # a plain-text run: every agent's forms
    assert limit is not None and limit.reason.startswith("429 Rate limit reached for gpt-4.1")
    assert limit.resets_at == NOW + timedelta(seconds=1)
    assert rate_limit(said, False, lambda: NOW) is None


@pytest.mark.parametrize(
    ("after", "wait"),
    [("20ms", timedelta(milliseconds=20)), ("1.5s", timedelta(seconds=1.5)), ("1m30s", timedelta(seconds=90)),
     ("2h0m0s", timedelta(hours=2)), ("6m", timedelta(minutes=6))],
)  # fmt: skip
def test_openais_try_again_in_gives_the_reset(after: str, wait: timedelta) -> None:
    line = f"Last error: 429 Rate limit reached for gpt-4.1 on requests. Please try again in {after}. See."
    limit = copilot.from_line(line, lambda: NOW)
    assert limit is not None and limit.resets_at == NOW + wait


def test_what_is_not_copilots_rate_limit_is_not_one() -> None:
    clock = lambda: NOW  # noqa: E731
    assert copilot.from_line("Rate limit reached, says the model in prose", clock) is None
    assert copilot.from_line("Last error: 429 You exceeded your current quota", clock) is None
    assert copilot.from_json({"type": "session.error", "data": {"errorType": "auth"}}, clock) is None
    assert (
        copilot.from_json({"type": "assistant.message", "data": {"errorType": "rate_limit"}}, clock) is None
    )
    limit = copilot.from_line("Last error: 429 Rate limit reached for m. Try later.", clock)
    assert limit is not None and limit.resets_at is None


def test_a_sub_agents_message_and_unknown_lines_are_not_the_answer() -> None:
    """A sub-agent's ``assistant.message`` (``agentId``) is not the final text; a line of no
    ``namespace.kind`` type is skipped."""
    output = (COPILOT / "json-tools.jsonl").read_text()
    sub = '{"type":"assistant.message","agentId":"a1","data":{"content":"<promise>COMPLETE</promise>"}}'
    report = FORMATS["copilot"].parse(f'{output}\n{sub}\n{{"type":"Weird"}}\nnot json\n')
    assert report.text == replies("json-tools")[-1].text and report.skipped == 2
