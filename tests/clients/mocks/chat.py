"""OpenAI chat completions (``POST /v1/chat/completions``, streamed as server-sent events) for
opencode and GitHub Copilot CLI.

A turn streams a first chunk with the role, one chunk with the reasoning text (``reasoning_content``,
where scripted), one with the text, one per tool call (``delta.tool_calls`` with the whole arguments),
a chunk with the ``finish_reason`` (``tool_calls`` or ``stop``) and, when the request asks for it
(``stream_options.include_usage``), a last chunk with empty ``choices`` and the ``usage``:
``prompt_tokens`` (cache reads included, as OpenAI counts them), ``completion_tokens`` (reasoning
included), ``prompt_tokens_details.cached_tokens`` and ``completion_tokens_details.reasoning_tokens``;
then ``data: [DONE]``. A scripted ``Usage`` gives the input not read from a cache, the output without
thoughts, cache reads and thoughts (OpenAI reports no cache writes). Side requests: ``GET /v1/models``
lists the model; a request that offers no tools (opencode's title) is streamed a short reply without
using a turn, and one that is not streamed gets a short answer.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from typing import Any

from tests.clients.mocks.base import Failure, MockAPI, Reply, Request, Usage, sse

MODEL = "gpt-4.1"
"""The model the tests ask for (priced by genai-prices)."""

_ids = itertools.count(1)


def rate_limited(retry_after_s: int = 1) -> Failure:
    """OpenAI's 429 for a rate limit, with its real error body and headers."""
    return Failure(
        429,
        {
            "error": {
                "message": (
                    f"Rate limit reached for {MODEL} in organization org-mock on tokens per min (TPM): "
                    f"Limit 30000, Used 30000, Requested 100. Please try again in {retry_after_s}s. "
                    "Visit https://platform.openai.com/account/rate-limits to learn more."
                ),
                "type": "tokens",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        },
        (
            ("retry-after", str(retry_after_s)),
            ("retry-after-ms", str(retry_after_s * 1000)),
            ("x-ratelimit-limit-tokens", "30000"),
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-tokens", f"{retry_after_s}s"),
        ),
    )


def chat_usage(reply: Reply) -> dict[str, Any]:
    """The ``usage`` object OpenAI reports for ``reply``."""
    u = reply.usage
    return {
        "prompt_tokens": u.input + u.cache_read,
        "completion_tokens": u.output + u.thoughts,
        "total_tokens": u.input + u.cache_read + u.output + u.thoughts,
        "prompt_tokens_details": {"cached_tokens": u.cache_read, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": u.thoughts,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


class ChatAPI(MockAPI):
    def is_turn(self, request: Request) -> bool:
        body = request.body if isinstance(request.body, dict) else {}
        return (
            request.method == "POST"
            and request.path.split("?")[0].endswith("/chat/completions")
            and bool(body.get("stream"))
            and bool(body.get("tools"))
        )

    def side_reply(self, request: Request) -> Reply | None:
        body = request.body if isinstance(request.body, dict) else {}
        if request.method == "POST" and request.path.split("?")[0].endswith("/chat/completions"):
            return Reply(text="Mock title", usage=Usage(input=1, output=1)) if body.get("stream") else None
        return None

    def side(self, request: Request) -> tuple[int, Any]:
        path = request.path.split("?")[0]
        if request.method == "GET" and path.endswith("/models"):
            return 200, {
                "object": "list",
                "data": [{"id": MODEL, "object": "model", "created": 1722902400, "owned_by": "system"}],
            }
        if request.method == "POST" and path.endswith("/chat/completions"):
            body = request.body if isinstance(request.body, dict) else {}
            return 200, {
                "id": f"chatcmpl-side{next(_ids)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", MODEL),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "ok"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        return super().side(request)

    def stream(self, request: Request, reply: Reply) -> Iterator[bytes]:
        body = request.body if isinstance(request.body, dict) else {}
        model = reply.model or body.get("model") or MODEL
        cid, created = f"chatcmpl-mock{next(_ids):04d}", int(time.time())

        def chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
            data = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_mock",
                "choices": choices,
                **extra,
            }
            return sse(None, data)

        def delta(d: dict[str, Any], finish: str | None = None) -> bytes:
            return chunk([{"index": 0, "delta": d, "logprobs": None, "finish_reason": finish}])

        yield delta({"role": "assistant", "content": "", "refusal": None})
        if reply.thinking:
            yield delta({"reasoning_content": reply.thinking})
        if reply.text:
            yield delta({"content": reply.text})
        for i, call in enumerate(reply.tool_calls):
            yield delta(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": call.id or f"call_mock{next(_ids):04d}",
                            "type": "function",
                            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                        }
                    ]
                }
            )
        yield delta({}, "tool_calls" if reply.tool_calls else "stop")
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage"):
            yield chunk([], usage=chat_usage(reply))
        yield b"data: [DONE]\n\n"
