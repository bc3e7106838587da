"""Gemini API ``streamGenerateContent`` (server-sent events with ``?alt=sse``) for Gemini CLI.

A model turn is ``POST /v1beta/models/{model}:streamGenerateContent?alt=sse``; each event's data is
one ``GenerateContentResponse``: a candidate whose ``content.parts`` hold thought parts
(``thought: true``), text parts and ``functionCall`` parts, the model that answered
(``modelVersion``: the one in the path unless the reply names another) and ``usageMetadata``. As the
real API does, every chunk carries ``usageMetadata`` (the prompt's count, a running total); the last
one carries the whole turn's: ``promptTokenCount`` (cache reads included),
``cachedContentTokenCount``, ``candidatesTokenCount`` (thoughts excluded), ``thoughtsTokenCount`` and
``totalTokenCount`` (their sum), with ``finishReason`` ``STOP``.

Side requests, answered without using a turn (Gemini CLI 0.61.0's, seen in the request log):

- ``:generateContent`` (not streamed): the model router's classifier when Gemini CLI chooses the
  model itself (no ``-m``: ``auto``), asking ``gemini-3.5-flash-lite`` for a JSON complexity score
  (answered ``route_score``: at or above the CLI's threshold, the pro model; below it, flash); the
  next-speaker and loop checks (answered too, though 0.61.0 was not seen sending them); anything
  else gets ``"ok"``. Each reports ``side_usage``, logged in ``sides`` with its model: the CLI counts
  them in its ``stats.models``, so ``usage_by_model`` holds them beside the turns.
- ``:countTokens``: a count.

A ``Failure`` is sent as the API sends errors: ``{"error": {"code", "message", "status", "details"}}``
(``quota_exceeded`` builds the API's HTTP 429 ``RESOURCE_EXHAUSTED``, as the Gemini API writes it:
taken from gemini-cli's ``packages/core/src/utils/googleQuotaErrors.test.ts``, Apache-2.0,
https://github.com/google-gemini/gemini-cli, which copies the API's answers).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.clients.mocks.base import Failure, MockAPI, Reply, Request, Usage

MODEL = "gemini-2.5-pro"
"""The model the tests pass with ``-m`` (priced by genai-prices)."""

ROUTER_MODEL = "gemini-3.5-flash-lite"
"""The model Gemini CLI 0.61.0's router asks when no ``-m`` is given."""

PRO_AUTO = "gemini-3.1-pro-preview"
"""The model Gemini CLI 0.61.0 (no ``-m``) asks for a turn the router scored complex (its
``-customtools`` variant once tools were called)."""

FLASH_AUTO = "gemini-3.8-flash"
"""The model Gemini CLI 0.61.0 (no ``-m``) asks for a turn the router scored simple."""

_ids = itertools.count(1)


_METRIC = "generativelanguage.googleapis.com/generate_content_free_tier_requests"


def quota_exceeded(model: str = MODEL, per: str = "Day", retry_s: int = 17) -> Failure:
    """The Gemini API's HTTP 429 for a free-tier quota (``per``: ``Day`` or ``Minute``), with its
    ``QuotaFailure``, ``Help`` and ``RetryInfo`` details (as gemini-cli's own tests quote it)."""
    message = (
        "You exceeded your current quota, please check your plan and billing details. For more "
        "information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. To "
        "monitor your current usage, head to: https://ai.dev/usage?tab=rate-limit. \n* Quota exceeded "
        "for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 2, "
        f"model: {model}\nPlease retry in {retry_s}.185908122s."
    )
    return Failure(
        429,
        {
            "error": {
                "code": 429,
                "message": message,
                "status": "RESOURCE_EXHAUSTED",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                        "violations": [
                            {
                                "quotaMetric": _METRIC,
                                "quotaId": f"GenerateRequestsPer{per}PerProjectPerModel-FreeTier",
                                "quotaDimensions": {"location": "global", "model": model},
                                "quotaValue": "2",
                            }
                        ],
                    },
                    {
                        "@type": "type.googleapis.com/google.rpc.Help",
                        "links": [
                            {
                                "description": "Learn more about Gemini API quotas",
                                "url": "https://ai.google.dev/gemini-api/docs/rate-limits",
                            }
                        ],
                    },
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{retry_s}s"},
                ],
            }
        },
    )


def usage_metadata(u: Usage) -> dict[str, int]:
    """A turn's ``usageMetadata`` as the API reports it (``Usage.input``: not read from a cache)."""
    prompt = u.input + u.cache_read
    out: dict[str, int] = {"promptTokenCount": prompt, "candidatesTokenCount": u.output}
    if u.cache_read:
        out["cachedContentTokenCount"] = u.cache_read
    if u.thoughts:
        out["thoughtsTokenCount"] = u.thoughts
    out["totalTokenCount"] = prompt + u.output + u.thoughts
    return out


def _model_of(request: Request) -> str:
    """The model a request's path names (``/v1beta/models/{model}:method``)."""
    tail = request.path.split("?")[0].rsplit("/", 1)[-1]
    return tail.split(":", 1)[0]


def _method(request: Request) -> str:
    return request.path.split("?")[0].rsplit(":", 1)[-1] if ":" in request.path else ""


def _data(obj: Any) -> bytes:
    return f"data: {json.dumps(obj)}\r\n\r\n".encode()


@dataclass
class GeminiAPI(MockAPI):
    route_scores: tuple[int, ...] = (90,)
    """The complexity the router's classifier is answered, in order (the last one repeats): at or
    above Gemini CLI 0.61.0's threshold the pro model takes the turns, below it flash."""
    side_usage: Usage = field(default_factory=lambda: Usage(input=40, output=6))
    """The usage each side ``generateContent`` reports."""
    sides: list[tuple[str, Usage]] = field(default_factory=list)
    """The side ``generateContent`` answers: their model and usage."""
    log: list[tuple[str, Usage, bool]] = field(default_factory=list)
    """Every usage served, in order: its model, the usage, and whether it was a turn's."""

    def is_turn(self, request: Request) -> bool:
        return request.method == "POST" and _method(request) == "streamGenerateContent"

    def runs(self, turns: list[int]) -> list[dict[str, Usage]]:
        """The usage served by model, per run of the client: the first run made ``turns[0]`` turns,
        the next ``turns[1]``, ...; a side request belongs to the run of the turn after it."""
        out: list[dict[str, Usage]] = [{} for _ in turns]
        run, made = 0, 0
        for model, u, turn in self.log:
            while run < len(turns) - 1 and made >= turns[run]:
                run, made = run + 1, 0
            out[run][model] = out[run].get(model, Usage()) + u
            made += turn
        return out

    def usage_by_model(self) -> dict[str, Usage]:
        """Every model's usage served, turns and side answers together."""
        out: dict[str, Usage] = {}
        for model, u, _ in self.log:
            out[model] = out.get(model, Usage()) + u
        return out

    def side(self, request: Request) -> tuple[int, Any]:
        method = _method(request)
        if method == "countTokens":
            return 200, {"totalTokens": 100}
        if method != "generateContent":
            return super().side(request)
        body = request.body if isinstance(request.body, dict) else {}
        wanted = json.dumps(body.get("generationConfig", {})) + json.dumps(body.get("systemInstruction", {}))
        if "complexity_score" in wanted:
            routed = sum(1 for _, _, turn in self.log if not turn)
            score = self.route_scores[min(routed, len(self.route_scores) - 1)]
            text = json.dumps({"complexity_reasoning": "mock router", "complexity_score": score})
        elif "next_speaker" in wanted:
            text = json.dumps({"reasoning": "mock", "next_speaker": "user"})
        else:
            text = "ok"
        model = _model_of(request)
        with self._lock:
            self.sides.append((model, self.side_usage))
            self.log.append((model, self.side_usage, False))
        return 200, {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": usage_metadata(self.side_usage),
            "modelVersion": model,
            "responseId": f"mock-side-{next(_ids)}",
        }

    def stream(self, request: Request, reply: Reply) -> Iterator[bytes]:
        model = reply.model or _model_of(request)
        rid = f"mock-{next(_ids):04d}"
        u = reply.usage
        with self._lock:
            self.log.append((model, u, True))
        prompt = u.input + u.cache_read
        head = {"promptTokenCount": prompt}

        def chunk(parts: list[dict[str, Any]], usage: dict[str, int], last: bool = False) -> bytes:
            candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
            if last:
                candidate["finishReason"] = "STOP"
            return _data(
                {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model, "responseId": rid}
            )

        if reply.thinking:
            yield chunk(
                [{"text": reply.thinking, "thought": True}],
                {**head, "thoughtsTokenCount": u.thoughts, "totalTokenCount": prompt + u.thoughts},
            )
        parts: list[dict[str, Any]] = []
        if reply.text:
            parts.append({"text": reply.text})
        for call in reply.tool_calls:
            parts.append({"functionCall": {"name": call.name, "args": call.arguments}})
        if parts and reply.thinking:  # the first part after the thoughts carries their signature
            parts[0]["thoughtSignature"] = "bW9jay1zaWduYXR1cmU="
        if reply.text and reply.tool_calls:  # the text streams first, the calls end the turn
            yield chunk(parts[:1], {**head, "totalTokenCount": prompt + u.thoughts})
            parts = parts[1:]
        yield chunk(parts, usage_metadata(u), last=True)
