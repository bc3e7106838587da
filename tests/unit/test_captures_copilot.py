"""Real GitHub Copilot CLI 1.0.102 output (``tests/fixtures/clients/copilot-1.0.102/``, made by
``tests/clients/capture_chat.py``) read by the ``copilot`` format and limit recogniser; the expected
numbers come from what the mock served (``capture_chat.CASES``)."""

from __future__ import annotations

import json
import os
import shutil
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ledger.drivers.runner.formats import FORMATS, AgentReport, detect, plain_refusal
from ledger.drivers.runner.formats.copilot_usage import FLAG, CopilotUsage, parse_usage
from ledger.drivers.runner.limits import copilot, rate_limit
from ledger.events import TokenUsage
from tests.clients.capture_chat import ANTHROPIC_MODEL, CASES, COPILOT, USAGE_CASES, WORK
from tests.clients.chat_clients import served_tokens
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
    assert report.tokens == TokenUsage() and report.cost_usd is None  # the usage file has them
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


# --------------------------------------------------------------- --usage-output-file (copilot_usage)
def served(name: str) -> list[Reply]:
    return [t for t in USAGE_CASES[name][0] if isinstance(t, Reply)]


def tokens_of(replies: list[Reply]) -> TokenUsage:
    """What ``replies`` served, as the ledger records it (OpenAI's output counts reasoning)."""
    return TokenUsage(**served_tokens(replies))


def replay(usage: CopilotUsage, *stems: str) -> list[AgentReport]:
    """The reports of the runs ``stems`` of one loop: each stream read by the format, completed
    from the usage file Copilot wrote, as the runner does (the file copied where the run put it)."""
    reports = []
    for stem in stems:
        with usage.run(["copilot", "--allow-all-tools", "--output-format", "json"]) as side:
            shutil.copyfile(COPILOT / f"{stem}.usage.json", side.command[2])
            reports.append(side.read(FORMATS["copilot"].parse((COPILOT / f"{stem}.jsonl").read_text())))
    return reports


def test_the_usage_file_gives_the_runs_exact_tokens_and_model() -> None:
    (report,) = replay(CopilotUsage(), "usage-tools")
    assert report.tokens == tokens_of(served("usage-tools")) and report.model == MODEL
    assert report.models == ((MODEL, report.tokens),)
    last = served("usage-tools")[-1].usage
    assert report.context_tokens == last.input + last.cache_read  # the last request's, cache included
    assert report.text == served("usage-tools")[-1].text and report.cost_usd is None  # priced by the ledger


def test_a_429s_usage_file_has_no_tokens() -> None:
    (report,) = replay(CopilotUsage(), "usage-429")
    assert report.tokens == TokenUsage() and report.error


def test_a_continued_session_records_each_runs_own_tokens() -> None:
    """``--continue`` goes on with the session and its file's totals grow: each run records its own."""
    first, second = replay(CopilotUsage(), "usage-continue", "usage-continue-2")
    one, two = served("usage-continue")
    assert first.tokens == tokens_of([one]) and second.tokens == tokens_of([two])


def test_cache_writes_anthropics_provider() -> None:
    """Copilot's ``inputTokens`` counts cache reads and writes (its Anthropic provider reports writes)."""
    usage = parse_usage((COPILOT / "usage-anthropic.usage.json").read_bytes())
    assert usage is not None and usage.model == ANTHROPIC_MODEL
    assert usage.models == ((ANTHROPIC_MODEL, tokens_of(served("usage-anthropic"))),)
    assert usage.models[0][1].cache_creation == 1000


def test_the_run_adds_a_private_usage_file_and_removes_it() -> None:
    with CopilotUsage().run(["copilot", "--output-format", "json"]) as side:
        assert side.command == ["copilot", FLAG, side.command[2], "--output-format", "json"]
        folder = Path(side.command[2]).parent
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and not Path(side.command[2]).exists()
        assert side.read(AgentReport(text="x")) == AgentReport(text="x")  # Copilot wrote none
    assert not folder.exists()
    wrapper = ["./my-copilot.sh", "--output-format", "json"]  # --agent-format copilot: not ours to change
    with CopilotUsage().run(wrapper) as side:
        assert side.command == wrapper and side.read(AgentReport(text="x")) == AgentReport(text="x")


def test_the_users_own_usage_file_is_read_only_when_the_run_wrote_it(tmp_path: Path) -> None:
    own = tmp_path / "mine.json"
    shutil.copyfile(COPILOT / "usage-tools.usage.json", own)
    cmd = ["copilot", "--output-format", "json", f"{FLAG}={own}"]
    usage = CopilotUsage()
    with usage.run(cmd) as side:
        assert side.command == cmd
        assert side.read(AgentReport()) == AgentReport()  # an earlier run's file
    with usage.run(cmd) as side:
        shutil.copyfile(COPILOT / "usage-continue.usage.json", own)
        os.utime(own, ns=(1, 1))
        assert side.read(AgentReport()).tokens == tokens_of(served("usage-continue")[:1])
    assert own.exists()  # the user's file stays


def test_a_symlink_or_a_bad_file_is_not_read(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    shutil.copyfile(COPILOT / "usage-tools.usage.json", target)
    link = tmp_path / "link.json"
    with CopilotUsage().run(["copilot", "--output-format", "json", FLAG, str(link)]) as side:
        link.symlink_to(target)
        assert side.read(AgentReport()) == AgentReport()
    bad = tmp_path / "bad.json"
    with CopilotUsage().run(["copilot", "--output-format", "json", FLAG, str(bad)]) as side:
        bad.write_text('{"modelMetrics": [1, 2')
        assert side.read(AgentReport()) == AgentReport()
    assert parse_usage(b'{"modelMetrics": {"m": {"usage": {"inputTokens": "x"}}}}') is None


def test_each_models_tokens_are_apart_and_a_continued_runs_are_its_own() -> None:
    """A session on two models (a sub-agent's): each model's tokens recorded apart, less what the
    loop read before for that session and model."""
    one = {"inputTokens": 110, "outputTokens": 7, "cacheReadTokens": 10, "cacheWriteTokens": 0}
    two = {"inputTokens": 50, "outputTokens": 5, "cacheReadTokens": 0, "cacheWriteTokens": 0}
    usage = CopilotUsage()
    reports = []
    for metrics in ({"gpt-4.1": one}, {"gpt-4.1": {**one, "inputTokens": 130}, "gpt-5-mini": two}):
        with usage.run(["copilot", "--output-format", "json"]) as side:
            body = {"modelMetrics": {m: {"usage": u} for m, u in metrics.items()}, "sessionStartTime": "t0"}
            Path(side.command[2]).write_text(json.dumps({**body, "currentModel": "gpt-4.1"}))
            reports.append(side.read(AgentReport(model="gpt-4.1")))
    assert reports[0].models == (("gpt-4.1", TokenUsage(input=100, output=7, cache_read=10)),)
    assert reports[1].models == (
        ("gpt-4.1", TokenUsage(input=20)),
        ("gpt-5-mini", TokenUsage(input=50, output=5)),
    )
    assert reports[1].tokens == TokenUsage(input=70, output=5)
