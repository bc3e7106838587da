"""OpenAI Responses API (``POST /v1/responses``, streamed as server-sent events) for OpenAI Codex.

A turn streams ``response.created`` and ``response.in_progress``; then one output item per
reasoning text (``reasoning``, its summary streamed as ``response.reasoning_summary_*``), text
(``message``: ``response.content_part.added``, ``response.output_text.delta``, ``.done``) and tool
call (``function_call``: ``response.function_call_arguments.delta`` / ``.done``), each between
``response.output_item.added`` and ``response.output_item.done``; and ``response.completed`` with
the usage as OpenAI reports it: ``input_tokens`` (cache reads included),
``input_tokens_details.cached_tokens``, ``output_tokens`` (reasoning included),
``output_tokens_details.reasoning_tokens`` and ``total_tokens``. The Responses API reports no cache
writes, so a ``Reply`` served here has ``cache_write`` 0. ``Usage.output`` is the output without the
reasoning tokens (``Usage.thoughts``), as the base's ``Usage`` says.

Side requests: ``GET /v1/models`` answers the one model (``MODEL``); anything else is a 404.

``usage_limit`` and ``rate_limited`` are the bodies of the real HTTP 429s, in the shape Codex's
``codex-rs/core/src/api_bridge.rs`` reads (openai/codex, Apache-2.0): ``error.type``
``usage_limit_reached`` with ``plan_type`` and ``resets_at`` (epoch seconds), and OpenAI's
``rate_limit_exceeded`` error object.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from typing import Any

from tests.clients.mocks.base import Failure, MockAPI, Reply, Request, sse

MODEL = "gpt-5.5"
"""The model the tests pass with ``-m`` (priced by genai-prices)."""

_ids = itertools.count(1)
ROLE = "assistant"


def usage_limit(resets_at: int | None, plan_type: str = "plus") -> Failure:
    """The 429 a ChatGPT plan's usage limit answers: ``usage_limit_reached``, reset at ``resets_at``
    (epoch seconds; ``None``: the body gives no reset)."""
    error: dict[str, Any] = {
        "type": "usage_limit_reached",
        "message": "The usage limit has been reached",
        "plan_type": plan_type,
    }
    if resets_at is not None:
        error |= {"resets_at": resets_at, "resets_in_seconds": max(resets_at - int(time.time()), 0)}
    return Failure(429, {"error": error})


def rate_limited(seconds: float = 1.0) -> Failure:
    """The 429 of OpenAI's rate limit (``rate_limit_exceeded``), with its ``retry-after`` header."""
    return Failure(
        429,
        {
            "error": {
                "message": (
                    f"Rate limit reached for {MODEL} in organization org-mock on tokens per min (TPM): "
                    f"Limit 30000, Used 30000, Requested 100. Please try again in {seconds:g}s."
                ),
                "type": "tokens",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        },
        headers=(("retry-after", f"{seconds:g}"),),
    )


def unauthorized() -> Failure:
    """The 401 of a wrong API key, as OpenAI answers it."""
    return Failure(
        401,
        {
            "error": {
                "message": "Incorrect API key provided: sk-test-****0000.",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
        },
    )


class ResponsesAPI(MockAPI):
    def is_turn(self, request: Request) -> bool:
        return request.method == "POST" and request.path.split("?")[0].endswith("/responses")

    def side(self, request: Request) -> tuple[int, Any]:
        path = request.path.split("?")[0]
        if request.method == "GET" and path.endswith("/models"):
            return 200, {
                "object": "list",
                "data": [{"id": MODEL, "object": "model", "created": 1700000000, "owned_by": "openai"}],
            }
        return super().side(request)

    def stream(self, request: Request, reply: Reply) -> Iterator[bytes]:
        body = request.body if isinstance(request.body, dict) else {}
        model = reply.model or body.get("model") or MODEL
        rid = f"resp_mock_{next(_ids):04d}"
        seq = itertools.count()
        created = int(time.time())

        def response(status: str, output: list[dict[str, Any]], usage: Any) -> dict[str, Any]:
            return {
                "id": rid,
                "object": "response",
                "created_at": created,
                "status": status,
                "error": None,
                "incomplete_details": None,
                "model": model,
                "output": output,
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
                "usage": usage,
            }

        def event(kind: str, **data: Any) -> bytes:
            return sse(kind, {"type": kind, "sequence_number": next(seq), **data})

        yield event("response.created", response=response("in_progress", [], None))
        yield event("response.in_progress", response=response("in_progress", [], None))
        output: list[dict[str, Any]] = []
        if reply.thinking:
            index, iid = len(output), f"rs_mock_{next(_ids):04d}"
            yield event(
                "response.output_item.added",
                output_index=index,
                item={"id": iid, "type": "reasoning", "summary": []},
            )
            part = {"type": "summary_text", "text": ""}
            where = {"item_id": iid, "output_index": index, "summary_index": 0}
            yield event("response.reasoning_summary_part.added", **where, part=part)
            yield event("response.reasoning_summary_text.delta", **where, delta=reply.thinking)
            yield event("response.reasoning_summary_text.done", **where, text=reply.thinking)
            done = {"type": "summary_text", "text": reply.thinking}
            yield event("response.reasoning_summary_part.done", **where, part=done)
            item = {"id": iid, "type": "reasoning", "summary": [done], "encrypted_content": None}
            output.append(item)
            yield event("response.output_item.done", output_index=index, item=item)
        if reply.text:
            index, iid = len(output), f"msg_mock_{next(_ids):04d}"
            yield event(
                "response.output_item.added",
                output_index=index,
                item={"id": iid, "type": "message", "status": "in_progress", "content": [], "role": ROLE},
            )
            where = {"item_id": iid, "output_index": index, "content_index": 0}
            empty: dict[str, Any] = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
            yield event("response.content_part.added", **where, part=empty)
            yield event("response.output_text.delta", **where, delta=reply.text, logprobs=[])
            yield event("response.output_text.done", **where, text=reply.text, logprobs=[])
            part = {**empty, "text": reply.text}
            yield event("response.content_part.done", **where, part=part)
            item = {"id": iid, "type": "message", "status": "completed", "content": [part], "role": ROLE}
            output.append(item)
            yield event("response.output_item.done", output_index=index, item=item)
        custom = {t.get("name") for t in body.get("tools") or () if t.get("type") == "custom"}
        for call in reply.tool_calls:
            index = len(output)
            call_id = call.id or f"call_mock_{next(_ids):04d}"
            if call.name in custom:  # a freeform tool: its input is the text ``arguments["input"]``
                kind, field, prefix = "custom_tool_call", "input", "ctc"
                text, stream = str(call.arguments.get("input", "")), "custom_tool_call_input"
            else:
                kind, field, prefix = "function_call", "arguments", "fc"
                text, stream = json.dumps(call.arguments), "function_call_arguments"
            iid = f"{prefix}_mock_{next(_ids):04d}"
            start = {"id": iid, "type": kind, "status": "in_progress", field: ""}
            start |= {"call_id": call_id, "name": call.name}
            yield event("response.output_item.added", output_index=index, item=start)
            where = {"item_id": iid, "output_index": index}
            yield event(f"response.{stream}.delta", **where, delta=text)
            yield event(f"response.{stream}.done", **where, **{field: text})
            item = {**start, "status": "completed", field: text}
            output.append(item)
            yield event("response.output_item.done", output_index=index, item=item)
        u = reply.usage
        usage = {
            "input_tokens": u.input + u.cache_read + u.cache_write,
            "input_tokens_details": {"cached_tokens": u.cache_read, "cache_write_tokens": u.cache_write},
            "output_tokens": u.output + u.thoughts,
            "output_tokens_details": {"reasoning_tokens": u.thoughts},
            "total_tokens": u.input + u.cache_read + u.cache_write + u.output + u.thoughts,
        }
        yield event("response.completed", response=response("completed", output, usage))
