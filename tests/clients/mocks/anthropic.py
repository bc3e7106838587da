"""Anthropic Messages API (``POST /v1/messages``, streamed as server-sent events) for Claude Code.

A turn streams ``message_start`` (the input side of the usage, ``output_tokens`` 1, as the real API
does), one block per thinking text, text and tool call, ``message_delta`` with the final
``output_tokens`` and the stop reason, and ``message_stop``. Side requests: ``count_tokens`` answers a
count; a one-token ``quota`` probe and requests that are not streamed get a short reply without using a
turn.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

from tests.clients.mocks.base import MockAPI, Reply, Request, sse

MODEL = "claude-sonnet-4-5-20250929"
"""The model the tests pass with ``--model`` (priced by genai-prices)."""

_ids = itertools.count(1)


class AnthropicAPI(MockAPI):
    def is_turn(self, request: Request) -> bool:
        body = request.body if isinstance(request.body, dict) else {}
        return (
            request.method == "POST"
            and request.path.split("?")[0] == "/v1/messages"
            and bool(body.get("stream"))
            and body.get("max_tokens", 2) > 1
        )

    def side(self, request: Request) -> tuple[int, Any]:
        path = request.path.split("?")[0]
        if path == "/v1/messages/count_tokens":
            return 200, {"input_tokens": 100}
        if path == "/v1/messages":
            body = request.body if isinstance(request.body, dict) else {}
            return 200, {
                "id": f"msg_side_{next(_ids)}",
                "type": "message",
                "role": "assistant",
                "model": body.get("model", MODEL),
                "content": [{"type": "text", "text": "ok"}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        return super().side(request)

    def stream(self, request: Request, reply: Reply) -> Iterator[bytes]:
        body = request.body if isinstance(request.body, dict) else {}
        model = reply.model or body.get("model") or MODEL
        u = reply.usage
        mid = f"msg_mock_{next(_ids):04d}"
        yield sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": mid,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": u.input,
                        "cache_creation_input_tokens": u.cache_write,
                        "cache_read_input_tokens": u.cache_read,
                        "output_tokens": 1,
                    },
                },
            },
        )
        blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []  # (start, deltas) per block
        if reply.thinking:
            blocks.append(
                (
                    {"type": "thinking", "thinking": ""},
                    [
                        {"type": "thinking_delta", "thinking": reply.thinking},
                        {"type": "signature_delta", "signature": "c2ln"},
                    ],
                )
            )
        if reply.text:
            blocks.append(({"type": "text", "text": ""}, [{"type": "text_delta", "text": reply.text}]))
        for call in reply.tool_calls:
            tool_id = call.id or f"toolu_mock_{next(_ids):04d}"
            start = {"type": "tool_use", "id": tool_id, "name": call.name, "input": {}}
            blocks.append((start, [{"type": "input_json_delta", "partial_json": json.dumps(call.arguments)}]))
        for index, (start, deltas) in enumerate(blocks):
            yield sse(
                "content_block_start", {"type": "content_block_start", "index": index, "content_block": start}
            )
            for delta in deltas:
                yield sse(
                    "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
                )
            yield sse("content_block_stop", {"type": "content_block_stop", "index": index})
        yield sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
                    "stop_sequence": None,
                },
                "usage": {
                    "input_tokens": u.input,
                    "cache_creation_input_tokens": u.cache_write,
                    "cache_read_input_tokens": u.cache_read,
                    "output_tokens": u.output,
                },
            },
        )
        yield sse("message_stop", {"type": "message_stop"})
