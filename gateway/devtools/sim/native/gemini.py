"""Gemini-shaped bytes: generateContent bodies, streamGenerateContent's SSE chunks, errors.

Thinking tokens (the plan's reasoning) are reported as `thoughtsTokenCount`, apart from
`candidatesTokenCount`, as Gemini does; a function call arrives whole in one chunk.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.devtools.sim import bodies
from gateway.devtools.sim.behaviour import PlannedChoice, ReplyPlan

FINISH = {"stop": "STOP", "length": "MAX_TOKENS", "tool_calls": "STOP"}
_STATUS = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED",
           500: "INTERNAL", 502: "UNAVAILABLE", 503: "UNAVAILABLE"}


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def usage_metadata(plan: ReplyPlan) -> dict[str, Any]:
    u = plan.usage
    visible = u.completion_tokens - u.reasoning_tokens
    meta: dict[str, Any] = {"promptTokenCount": u.prompt_tokens,
                            "candidatesTokenCount": visible,
                            "totalTokenCount": u.prompt_tokens + u.completion_tokens}
    if u.cached_tokens:
        meta["cachedContentTokenCount"] = u.cached_tokens
    if u.reasoning_tokens:
        meta["thoughtsTokenCount"] = u.reasoning_tokens
    return meta


def _parts(choice: PlannedChoice) -> list[dict[str, Any]]:
    if choice.tool_call:
        return [{"functionCall": {"name": choice.tool_call.name,
                                  "args": json.loads(choice.tool_call.arguments)}}]
    return [{"text": choice.content or ""}]


def answer_body(response_id: str, model: str, plan: ReplyPlan, with_usage: bool) -> bytes:
    body: dict[str, Any] = {
        "candidates": [{"content": {"role": "model", "parts": _parts(c)},
                        "finishReason": FINISH.get(c.finish_reason, "STOP"), "index": c.index}
                       for c in plan.choices],
        "modelVersion": model, "responseId": response_id}
    if with_usage:
        body["usageMetadata"] = usage_metadata(plan)
    return _dumps(body).encode()


def error_body(status: int, message: str) -> bytes:
    return _dumps({"error": {"code": status, "message": message,
                             "status": _STATUS.get(status, "INTERNAL")}}).encode()


class GenerateEncoder(bodies.ChunkEncoder):
    """One streamGenerateContent stream: a chunk per text piece, then one last chunk with
    every candidate's finish reason (and function call) and the whole usage."""

    done = ""

    def __init__(self, response_id: str, model: str, plan: ReplyPlan, with_usage: bool):
        self._id, self._model, self._plan, self._with_usage = response_id, model, plan, with_usage
        self.include_usage = False  # the last chunk carries it
        self._prompt = _dumps({"promptTokenCount": plan.usage.prompt_tokens,
                               "totalTokenCount": plan.usage.prompt_tokens})
        self._tail = f',"modelVersion":{_dumps(model)},"responseId":"{response_id}"}}\n\n'

    def opening(self, choice: PlannedChoice) -> str:
        return ""

    def pieces(self, choice: PlannedChoice, start: int, stop: int) -> list[str]:
        if choice.tool_call:
            return []
        head = ('data: {"candidates":[{"content":{"role":"model","parts":[{"text":')
        after = f'}}]}},"index":{choice.index}}}],"usageMetadata":{self._prompt}{self._tail}'
        return [head + piece + after for piece in choice.pieces_json[start:stop]]

    def closing(self, choice: PlannedChoice) -> str:
        if choice.index != self._plan.choices[-1].index:
            return ""
        candidates = []
        for c in self._plan.choices:
            parts = _parts(c) if c.tool_call else [{"text": ""}]
            candidates.append({"content": {"role": "model", "parts": parts},
                               "finishReason": FINISH.get(c.finish_reason, "STOP"),
                               "index": c.index})
        body: dict[str, Any] = {"candidates": candidates, "modelVersion": self._model,
                                "responseId": self._id}
        if self._with_usage:
            body["usageMetadata"] = usage_metadata(self._plan)
        return f"data: {_dumps(body)}\n\n"

    def broken(self) -> str:
        return 'data: {"candidates":[{"content":{"role":"model","parts":[{"te\n\n'
