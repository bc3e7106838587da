"""A run that hit a usage or rate limit, as Claude Code reports one, told apart from prose about one."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pytest

from ledger.agents.rate_limits import (
    MARGIN_S,
    MAX_BACKOFF_S,
    MAX_WAIT_S,
    RateLimit,
    from_message,
    rate_limit,
    wait_s,
)

NOW = datetime(2026, 4, 22, 13, 40, tzinfo=UTC)  # 16:40 in Moscow (UTC+3), 10:40 in Recife (UTC-3)


def clock() -> datetime:
    return NOW


def stream(*lines: Mapping[str, object]) -> str:
    return "\n".join(json.dumps(line) for line in lines)


def test_a_rejected_rate_limit_event_gives_its_reset_time() -> None:
    event = {
        "type": "rate_limit_event",
        "rate_limit_info": {"status": "rejected", "resetsAt": 1774447200, "rateLimitType": "five_hour"},
    }
    found = rate_limit(stream({"type": "system", "subtype": "init"}, event), False, clock)
    assert found == RateLimit("five_hour limit reached", datetime.fromtimestamp(1774447200, UTC))


def test_an_allowed_rate_limit_event_is_not_a_limit() -> None:
    # as in anthropics/claude-code#38673: a stream that went through carries an "allowed" event
    event = {"type": "rate_limit_event", "rate_limit_info": {"status": "allowed", "resetsAt": 1774447200}}
    assert (
        rate_limit(stream(event, {"type": "result", "is_error": False, "result": "Hello."}), False, clock)
        is None
    )


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
    found = from_message(message, clock)
    assert found is not None and found.resets_at == resets
    error_result = {"type": "result", "subtype": "success", "is_error": True, "result": message}
    assert rate_limit(stream(error_result), False, clock) == found
    assert rate_limit(f"starting\n{message}\n", True, clock) == found  # the whole line of a failed run


def test_prose_about_a_limit_is_not_a_limit() -> None:
    said = "Claude AI usage limit reached|1762952400"
    assert rate_limit(f"{said}\n", False, clock) is None  # the run succeeded: it only printed it
    assert rate_limit(f"The log says: {said}\n", True, clock) is None  # not the whole line
    ok_result = {"type": "result", "is_error": False, "result": said}
    assert rate_limit(stream(ok_result), True, clock) is None
    assert rate_limit("not json {\n{broken", True, clock) is None


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
