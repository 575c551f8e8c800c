"""Anthropic-shaped bytes: Messages bodies, the named SSE events of a stream, errors.

The stream encoder has the chat encoder's interface (`bodies.ChunkEncoder`), so the
server's one streaming loop paces it, cuts it and breaks it like a chat stream.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.devtools.sim import bodies
from gateway.devtools.sim.behaviour import PlannedChoice, ReplyPlan

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def usage(plan: ReplyPlan, cache_read: int, cache_write: int) -> dict[str, Any]:
    """Anthropic's usage: input_tokens leave out what was read from or written to the cache."""
    return {
        "input_tokens": plan.usage.prompt_tokens - cache_read - cache_write,
        "cache_creation_input_tokens": cache_write,
        "cache_read_input_tokens": cache_read,
        "output_tokens": plan.usage.completion_tokens,
        "service_tier": plan.anthropic_tier,
        **({"server_tool_use": {"web_search_requests": plan.web_searches}}
           if plan.web_searches else {}),
    }


def _block(choice: PlannedChoice) -> dict[str, Any]:
    if choice.tool_call:
        return {"type": "tool_use", "id": choice.tool_call.id.replace("call_", "toolu_"),
                "name": choice.tool_call.name, "input": json.loads(choice.tool_call.arguments)}
    return {"type": "text", "text": choice.content or ""}


def message_body(request_id: str, model: str, plan: ReplyPlan,
                 usage_: dict[str, Any] | None) -> bytes:
    choice = plan.choices[0]
    body: dict[str, Any] = {
        "id": request_id, "type": "message", "role": "assistant", "model": model,
        "content": [_block(choice)],
        "stop_reason": STOP_REASONS.get(choice.finish_reason, "end_turn"),
        "stop_sequence": None,
    }
    if usage_ is not None:
        body["usage"] = usage_
    return _dumps(body).encode()


def error_body(status: int, message: str) -> bytes:
    kind = {400: "invalid_request_error", 401: "authentication_error",
            404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error",
            503: "overloaded_error"}.get(status, "api_error")
    return _dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()


def _event(payload: dict[str, Any]) -> str:
    return f"event: {payload['type']}\ndata: {_dumps(payload)}\n\n"


class MessagesEncoder(bodies.ChunkEncoder):
    """One Messages stream: message_start with the input usage, one content block, its
    deltas, then message_delta with the cumulative usage and message_stop. No [DONE]."""

    done = ""

    def __init__(self, request_id: str, model: str, plan: ReplyPlan,
                 usage_: dict[str, Any] | None):
        self._id, self._model, self._plan, self._usage = request_id, model, plan, usage_
        self.include_usage = False  # the usage rides in message_start and message_delta

    def opening(self, choice: PlannedChoice) -> str:
        start_usage = None if self._usage is None else {**self._usage, "output_tokens": 1}
        message: dict[str, Any] = {
            "id": self._id, "type": "message", "role": "assistant", "model": self._model,
            "content": [], "stop_reason": None, "stop_sequence": None}
        if start_usage is not None:
            message["usage"] = start_usage
        block = _block(choice)
        if block["type"] == "tool_use":
            block["input"] = {}
        else:
            block["text"] = ""
        return (_event({"type": "message_start", "message": message})
                + _event({"type": "content_block_start", "index": 0, "content_block": block})
                + _event({"type": "ping"}))

    def pieces(self, choice: PlannedChoice, start: int, stop: int) -> list[str]:
        kind, key = ("input_json_delta", "partial_json") if choice.tool_call \
            else ("text_delta", "text")
        before = ('event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
                  f'"delta":{{"type":"{kind}","{key}":')
        return [f"{before}{piece}}}}}\n\n" for piece in choice.pieces_json[start:stop]]

    def closing(self, choice: PlannedChoice) -> str:
        delta: dict[str, Any] = {
            "type": "message_delta",
            "delta": {"stop_reason": STOP_REASONS.get(choice.finish_reason, "end_turn"),
                      "stop_sequence": None}}
        if self._usage is not None:
            # cumulative, as Anthropic sends it: the input side again, the whole output
            delta["usage"] = {k: v for k, v in self._usage.items() if k != "service_tier"}
        return (_event({"type": "content_block_stop", "index": 0}) + _event(delta)
                + _event({"type": "message_stop"}))

    def broken(self) -> str:
        return 'event: content_block_delta\ndata: {"type":"content_block_delta","ind\n\n'
