"""A run that hit a usage or rate limit, as each agent reports one (the strings are the agents' own:
see each module of ``ledger.drivers.runner.limits``), told apart from prose about one."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta

import pytest

from ledger.drivers.runner.formats import FORMATS
from ledger.drivers.runner.limits import (
    MARGIN_S,
    MAX_BACKOFF_S,
    MAX_WAIT_S,
    RECOGNISERS,
    RateLimit,
    claude,
    rate_limit,
    wait_s,
)

NOW = datetime(2026, 4, 22, 13, 40, tzinfo=UTC)  # 16:40 in Moscow (UTC+3), 10:40 in Recife (UTC-3)


def clock() -> datetime:
    return NOW


def stream(*lines: Mapping[str, object]) -> str:
    return "\n".join(json.dumps(line) for line in lines)


def test_every_format_names_an_agent_whose_limits_are_known() -> None:
    assert {f.limits for f in FORMATS.values()} - {None} <= set(RECOGNISERS)
    assert FORMATS["amp"].limits == FORMATS["claude"].limits == "claude"  # Amp writes Claude's stream
    assert (FORMATS["codex"].limits, FORMATS["gemini"].limits) == ("codex", "gemini")
    assert FORMATS["text"].limits is None


# -- Claude Code ---------------------------------------------------------------------------------


def test_a_rejected_rate_limit_event_gives_its_reset_time() -> None:
    event = {
        "type": "rate_limit_event",
        "rate_limit_info": {"status": "rejected", "resetsAt": 1774447200, "rateLimitType": "five_hour"},
    }
    found = rate_limit(stream({"type": "system", "subtype": "init"}, event), False, clock, "claude")
    assert found == RateLimit("five_hour limit reached", datetime.fromtimestamp(1774447200, UTC))


def test_an_allowed_rate_limit_event_is_not_a_limit() -> None:
    # as in anthropics/claude-code#38673: a stream that went through carries an "allowed" event
    event = {"type": "rate_limit_event", "rate_limit_info": {"status": "allowed", "resetsAt": 1774447200}}
    ok = {"type": "result", "is_error": False, "result": "Hello."}
    assert rate_limit(stream(event, ok), False, clock, "claude") is None


@pytest.mark.parametrize(
    ("message", "resets"),
    [
        ("Claude AI usage limit reached|1762952400", datetime.fromtimestamp(1762952400, UTC)),
        ("You've hit your limit · resets 3:30am (Europe/Moscow)", datetime(2026, 4, 23, 0, 30, tzinfo=UTC)),
        ("You've hit your limit · resets 7pm (Europe/Moscow)", datetime(2026, 4, 22, 16, 0, tzinfo=UTC)),
        (
            "You've hit your limit · resets Apr 23 at 4pm (America/Recife)",
            datetime(2026, 4, 23, 19, tzinfo=UTC),
        ),
        ("You've hit your limit · resets 4pm (Mars/Olympus)", None),  # an unknown zone: no time
    ],
)
def test_claude_codes_limit_messages_give_their_reset_time(message: str, resets: datetime | None) -> None:
    found = claude.from_line(message, clock)
    assert found is not None and found.resets_at == resets
    error_result = {"type": "result", "subtype": "success", "is_error": True, "result": message}
    assert rate_limit(stream(error_result), False, clock, "claude") == found
    assert rate_limit(f"starting\n{message}\n", True, clock, "claude") == found  # a failed run's line
    assert rate_limit(f"starting\n{message}\n", True, clock) == found  # a plain-text run tries it too


def test_prose_about_a_claude_limit_is_not_a_limit() -> None:
    said = "Claude AI usage limit reached|1762952400"
    for agent in ("claude", None):
        assert rate_limit(f"{said}\n", False, clock, agent) is None  # the run succeeded: it only said it
        assert rate_limit(f"The log says: {said}\n", True, clock, agent) is None  # not the whole line
        ok_result = {"type": "result", "is_error": False, "result": said}
        assert rate_limit(stream(ok_result), True, clock, agent) is None
        assert rate_limit("not json {\n{broken", True, clock, agent) is None


def test_a_plain_text_run_that_succeeded_reports_no_limit_even_in_json() -> None:
    event = {"type": "rate_limit_event", "rate_limit_info": {"status": "rejected", "resetsAt": 1774447200}}
    assert rate_limit(stream(event), False, clock) is None
    assert rate_limit(stream(event), True, clock) is not None


# -- OpenAI Codex ----------------------------------------------------------------------------------

CODEX_NOW = datetime(2024, 1, 1, tzinfo=UTC)  # the `base` of codex-rs/core/src/error.rs's tests


@pytest.fixture
def local_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This machine's zone set to UTC for the test (Codex writes its reset in local time)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def codex_clock() -> datetime:
    return CODEX_NOW


# The messages codex-rs/core/src/error.rs's tests assert (`expected_time` is its
# format_retry_timestamp of the test's reset, rendered here in UTC as the test's base is).
CODEX_LIMITS = [
    (
        "You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing), visit "
        "https://chatgpt.com/codex/settings/usage to purchase more credits or try again later.",
        None,
    ),
    (
        "You've hit your usage limit. Upgrade to Plus to continue using Codex (https://openai.com/chatgpt/pricing).",
        None,
    ),
    ("You've hit your usage limit. Try again later.", None),
    (
        "You've hit your usage limit. To get more access now, send a request to your admin "
        "or try again later.",
        None,
    ),
    (
        "You've hit your usage limit. To get more access now, send a request to your admin "
        "or try again at 1:00 AM.",
        datetime(2024, 1, 1, 1, 0, tzinfo=UTC),
    ),
    (
        "You've hit your usage limit. Visit https://chatgpt.com/codex/settings/usage "
        "to purchase more credits or try again at 1:00 AM.",
        datetime(2024, 1, 1, 1, 0, tzinfo=UTC),
    ),
    ("You've hit your usage limit. Try again at 12:05 AM.", datetime(2024, 1, 1, 0, 5, tzinfo=UTC)),
    (
        "You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing), visit "
        "https://chatgpt.com/codex/settings/usage to purchase more credits or try again at 3:32 AM.",
        datetime(2024, 1, 1, 3, 32, tzinfo=UTC),
    ),
    (
        "You've hit your usage limit. Try again at Jan 3rd, 2024 3:05 AM.",
        datetime(2024, 1, 3, 3, 5, tzinfo=UTC),
    ),
    # RateLimitedError's and RetryLimitReachedError's Display (a StatusCode shows as "429 Too Many Requests")
    (
        "rate limited (status 429 Too Many Requests), retry after 30s, request id: req-123",
        CODEX_NOW + timedelta(seconds=30),
    ),
    ("rate limited (status 429 Too Many Requests)", None),
    ("exceeded retry limit, last status: 429 Too Many Requests, request id: req-123", None),
]


@pytest.mark.usefixtures("local_zone")
@pytest.mark.parametrize(("message", "resets"), CODEX_LIMITS)
def test_codexs_limit_reports_give_their_reset_time(message: str, resets: datetime | None) -> None:
    expected = RateLimit(message, resets)
    error = {"type": "error", "message": message}
    failed = {"type": "turn.failed", "error": {"message": message}}
    started = {"type": "thread.started", "thread_id": "t1"}
    assert (
        rate_limit(stream(started, {"type": "turn.started"}, error, failed), True, codex_clock, "codex")
        == expected
    )
    assert rate_limit(stream(failed), False, codex_clock, "codex") == expected  # the event is the report
    assert rate_limit(f"warning: x\nERROR: {message}\n", True, codex_clock, "codex") == expected  # plain exec
    assert (
        rate_limit(f"\x1b[31mERROR:\x1b[0m {message}\n", True, codex_clock) == expected
    )  # coloured, any text run
    detailed = {"type": "turn.failed", "error": {"message": f"{message} (upstream detail)"}}
    found = rate_limit(stream(detailed), True, codex_clock, "codex")  # newer versions add details
    assert found is not None and found.resets_at == resets


@pytest.mark.usefixtures("local_zone")
@pytest.mark.parametrize(("message", "resets"), [m for m in CODEX_LIMITS if "You've" in m[0]])
def test_codexs_typographic_apostrophe_is_the_same_report(message: str, resets: datetime | None) -> None:
    """Codex 0.169.0 writes "You’ve" (``tests/fixtures/clients/codex-0.169.0/``): read as "You've";
    an escaped one in a JSON line too."""
    typographic = message.replace("'", "’")
    expected = RateLimit(message, resets)
    assert rate_limit(f"ERROR: {typographic}\n", True, codex_clock, "codex") == expected
    escaped = json.dumps({"type": "error", "message": typographic}, ensure_ascii=True)
    assert "\\u2019" in escaped
    assert rate_limit(escaped + "\n", True, codex_clock, "codex") == expected
    raw = json.dumps({"type": "error", "message": typographic}, ensure_ascii=False)
    assert rate_limit(raw + "\n", False, codex_clock, "codex") == expected


def test_claudes_typographic_apostrophe_is_the_same_report() -> None:
    said = "You’ve hit your limit · resets 7pm (Europe/Moscow)"
    assert claude.from_line(said, clock) == claude.from_line(said.replace("’", "'"), clock)
    assert claude.from_line(said, clock) is not None


def test_codexs_reset_time_is_read_in_this_machines_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "America/Recife")  # UTC-3 all year
    time.tzset()
    try:
        message = "You've hit your usage limit. Try again at Jan 3rd, 2024 3:05 AM."
        found = rate_limit(stream({"type": "error", "message": message}), True, codex_clock, "codex")
        assert found == RateLimit(message, datetime(2024, 1, 3, 6, 5, tzinfo=UTC))
    finally:
        monkeypatch.undo()
        time.tzset()


def test_what_codex_says_that_is_not_a_limit_report_is_not_a_limit() -> None:
    said = "You've hit your usage limit. Try again later."
    message = {"type": "item.completed", "item": {"id": "item_1", "type": "agent_message", "text": said}}
    assert rate_limit(stream(message), True, codex_clock, "codex") is None  # the model's words
    assert rate_limit(f"ERROR: {said}\n", False, codex_clock, "codex") is None  # the run succeeded
    assert rate_limit(f"{said}\n", True, codex_clock, "codex") is None  # not codex's ERROR line
    assert rate_limit(f"note: ERROR: {said}\n", True, codex_clock, "codex") is None  # not the whole line
    billing = {"type": "error", "message": "Quota exceeded. Check your plan and billing details."}
    assert rate_limit(stream(billing), True, codex_clock, "codex") is None  # billing: waiting won't help
    other = {
        "type": "turn.failed",
        "error": {"message": "exceeded retry limit, last status: 500 Internal Server Error"},
    }
    assert rate_limit(stream(other), True, codex_clock, "codex") is None
    assert (
        rate_limit(stream({"type": "error", "message": said}), True, codex_clock, "claude") is None
    )  # other agent


# -- Gemini CLI ----------------------------------------------------------------------------------------

GEMINI_429_LINES = [  # packages/core/src/utils/errorParsing.ts: added to the message for HTTP 429 only
    "Please wait and try again later. To increase your limits, request a quota increase through AI Studio, "
    "or switch to another /auth method",
    "Please wait and try again later. To increase your limits, request a quota increase through Vertex, "
    "or switch to another /auth method",
    "Possible quota limitations in place or slow response times detected. Switching to the gemini-2.5-flash "
    "model for the rest of this session.",
]

GEMINI_QUOTAS = [  # the API's and Gemini CLI's quota messages, from googleQuotaErrors.ts and its tests
    (
        "You exceeded your current quota, please check your plan and billing details. For more information "
        "on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n* Quota exceeded for "
        "metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 2\n"
        "Please retry in 56.185908122s.",
        56.185908122,
    ),
    ("Resource exhausted. Please retry in 5s", 5.0),
    ("Too many requests\nSuggested retry after 60s.", 60.0),
    ("You exceeded your current quota. Please retry in 900.2ms.", 0.9002),
    ("You have exhausted your daily quota on this model.", None),
    ("Rate limit exceeded", None),
]


def gemini_error(message: str) -> dict[str, object]:
    """The line ``handleError`` writes (packages/cli/src/utils/errors.ts) for a run ending on an error."""
    stats = {"total_tokens": 0, "input_tokens": 0, "output_tokens": 0, "duration_ms": 0, "tool_calls": 0}
    error = {"type": "unknown", "message": message}
    return {
        "type": "result",
        "timestamp": "2025-10-10T12:00:00.000Z",
        "status": "error",
        "error": error,
        "stats": stats,
    }


@pytest.mark.parametrize("too_many", GEMINI_429_LINES)
@pytest.mark.parametrize(("api", "retry_s"), GEMINI_QUOTAS)
def test_gemini_clis_quota_errors_give_their_retry_delay(
    api: str, retry_s: float | None, too_many: str
) -> None:
    message = f"[API Error: {api}]\n{too_many}"  # as parseAndFormatApiError writes a 429
    init = {
        "type": "init",
        "timestamp": "2025-10-10T12:00:00.000Z",
        "session_id": "s",
        "model": "gemini-2.5-pro",
    }
    found = rate_limit(stream(init, gemini_error(message)), True, clock, "gemini")
    assert found is not None
    said = " ".join(f"[API Error: {api}]".split())  # the whole API error, its lines joined
    assert found.reason == said and found.reason.endswith("]")
    assert found.resets_at == (None if retry_s is None else NOW + timedelta(seconds=retry_s))
    assert rate_limit(stream(gemini_error(message)), True, clock) == found  # a plain-text run that failed


def test_what_gemini_says_that_is_not_a_limit_report_is_not_a_limit() -> None:
    too_many = GEMINI_429_LINES[0]
    # other errors: no 429 line (a context overflow is RESOURCE_EXHAUSTED too, packages/core/src/agent/)
    overflow = "[API Error: Context window will overflow (estimated: 1000, remaining: 10)]"
    key = "[API Error: API key not valid. Please pass a valid API key. (Status: INVALID_ARGUMENT)]"
    for message in (overflow, key, f"[API Error: Rate limit exceeded] {too_many}"):
        assert rate_limit(stream(gemini_error(message)), True, clock, "gemini") is None
    words = {"type": "message", "role": "assistant", "content": f"[API Error: x]\n{too_many}", "delta": True}
    ok = {
        "type": "result",
        "status": "success",
        "error": {"type": "x", "message": f"[API Error: x]\n{too_many}"},
    }
    assert rate_limit(stream(words, ok), True, clock, "gemini") is None
    assert (
        rate_limit(f"[API Error: Rate limit exceeded]\n{too_many}\n", True, clock, "gemini") is None
    )  # text
    assert rate_limit(stream(gemini_error(f"[API Error: x]\n{too_many}")), False, clock) is None  # succeeded


# -- opencode --------------------------------------------------------------------------------------


def opencode_error(status: int | None, headers: Mapping[str, str] | None = None) -> dict[str, object]:
    """The line ``opencode run --format json`` writes for a ``session.error`` (cli/cmd/run.ts): an
    ``APIError`` as ``NamedError.toObject`` gives it (session/message-v2.ts)."""
    data: dict[str, object] = {"message": "Too Many Requests", "isRetryable": False}
    if status is not None:
        data["statusCode"] = status
    if headers is not None:
        data["responseHeaders"] = dict(headers)
    error = {"name": "APIError", "data": data}
    return {"type": "error", "timestamp": 1760000000000, "sessionID": "ses_1", "error": error}


@pytest.mark.parametrize(
    ("headers", "resets"),
    [
        (None, None),
        ({"retry-after-ms": "1500"}, NOW + timedelta(seconds=1.5)),
        ({"retry-after": "30"}, NOW + timedelta(seconds=30)),
        ({"retry-after": "Wed, 22 Apr 2026 14:00:00 GMT"}, datetime(2026, 4, 22, 14, tzinfo=UTC)),
        ({"retry-after": "soon"}, None),
    ],
)
def test_opencodes_429_error_gives_the_retry_after_it_got(
    headers: Mapping[str, str] | None, resets: datetime | None
) -> None:
    found = rate_limit(stream(opencode_error(429, headers)), True, clock, "opencode")
    assert found == RateLimit("Too Many Requests", resets)
    assert rate_limit(stream(opencode_error(429, headers)), True, clock) == found  # a plain-text run


def test_what_opencode_says_that_is_not_a_limit_report_is_not_a_limit() -> None:
    for other in (opencode_error(401), opencode_error(None), opencode_error(500)):
        assert rate_limit(stream(other), True, clock, "opencode") is None
    named = {
        "type": "error",
        "error": {"name": "UnknownError", "data": {"message": "429", "statusCode": 429}},
    }
    words = {"type": "text", "part": {"type": "text", "text": json.dumps(opencode_error(429))}}
    assert rate_limit(stream(named, words), True, clock, "opencode") is None
    assert rate_limit(stream(opencode_error(429)), False, clock) is None  # a plain-text run that succeeded


# -- the wait --------------------------------------------------------------------------------------


def test_the_wait_is_until_the_reset_or_a_bounded_back_off() -> None:
    soon = RateLimit("x", NOW + timedelta(seconds=30))
    assert wait_s(soon, NOW, 0, 60) == 30 + MARGIN_S
    assert wait_s(RateLimit("x", NOW - timedelta(hours=1)), NOW, 0, 60) == MARGIN_S  # already past
    assert wait_s(RateLimit("x", NOW + timedelta(days=3)), NOW, 0, 60) == MAX_WAIT_S
    unknown = RateLimit("x")
    assert [wait_s(unknown, NOW, a, 60) for a in range(6)] == [
        60,
        120,
        240,
        480,
        MAX_BACKOFF_S,
        MAX_BACKOFF_S,
    ]


@pytest.mark.usefixtures("local_zone")
@pytest.mark.parametrize(
    ("now", "said", "resets"),
    [
        (datetime(2024, 1, 1, 23, 0, tzinfo=UTC), "1:07 AM", datetime(2024, 1, 2, 1, 7, tzinfo=UTC)),
        (datetime(2024, 1, 1, 5, 8, 30, tzinfo=UTC), "5:07 AM", datetime(2024, 1, 1, 5, 7, tzinfo=UTC)),
        (datetime(2024, 1, 1, 0, 0, 1, tzinfo=UTC), "11:59 PM", datetime(2024, 1, 1, 23, 59, tzinfo=UTC)),
    ],
    ids=["after-midnight-is-tomorrow", "a-minute-past-has-come", "tonight"],
)
def test_codexs_reset_time_without_a_date_is_the_next_one(now: datetime, said: str, resets: datetime) -> None:
    """Codex names only the time of day: ``1:07 AM`` said at 11 PM is tomorrow's (a 2-hour wait, not
    an escalation after a dozen immediate retries); a minute just past has come."""
    message = f"You’ve hit your usage limit. Try again at {said}."
    found = rate_limit(f"ERROR: {message}\n", True, lambda: now, "codex")
    assert found is not None and found.resets_at == resets
