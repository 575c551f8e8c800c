"""OpenAI-shaped bytes: chat.completion bodies, SSE chunks, errors, and broken ones.

Stream chunks are assembled from pre-encoded strings because the simulator sends one
chunk per token and must stay much cheaper than the gateway it is measured against.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.devtools.sim.behaviour import PlannedChoice, ReplyPlan, ToolCall

FINGERPRINT = "fp_costgate_sim"
DONE = "data: [DONE]\n\n"


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _message(choice: PlannedChoice) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": choice.content,
                               "refusal": choice.refusal, "annotations": []}
    if choice.tool_call:
        message["tool_calls"] = [_tool_call(choice.tool_call, choice.tool_call.arguments)]
    return message


def _tool_call(call: ToolCall, arguments: str) -> dict[str, Any]:
    return {"id": call.id, "type": "function",
            "function": {"name": call.name, "arguments": arguments}}


def completion_body(request_id: str, created: int, model: str, plan: ReplyPlan,
                    with_usage: bool = True) -> bytes:
    body: dict[str, Any] = {
        "id": request_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {"index": c.index, "message": _message(c), "logprobs": None,
             "finish_reason": c.finish_reason}
            for c in plan.choices
        ],
        "service_tier": plan.service_tier,
        "system_fingerprint": FINGERPRINT,
    }
    if with_usage:
        body["usage"] = plan.usage.as_dict()
    return _dumps(body).encode()


class ChunkEncoder:
    """Encodes one stream's `data: ...` events (as str: the caller encodes each write once);
    `usage: null` on each when usage was asked for, like OpenAI."""

    done = DONE  # what ends the stream (other formats' encoders end with nothing)

    def __init__(self, request_id: str, created: int, model: str, include_usage: bool):
        self._head = (
            f'data: {{"id":"{request_id}","object":"chat.completion.chunk",'
            f'"created":{created},"model":{_dumps(model)},"service_tier":"default",'
            f'"system_fingerprint":"{FINGERPRINT}","choices":['
        )
        self._tail = '],"usage":null}\n\n' if include_usage else "]}\n\n"
        self._id, self._created, self._model = request_id, created, model
        self.include_usage = include_usage
        self._piece_frames: dict[tuple[int, bool], tuple[str, str]] = {}

    def _event(self, index: int, delta: str, finish: str = "null") -> str:
        return (f'{self._head}{{"index":{index},"delta":{delta},"logprobs":null,'
                f'"finish_reason":{finish}}}{self._tail}')

    def opening(self, choice: PlannedChoice) -> str:
        if choice.tool_call:
            call = _tool_call(choice.tool_call, "")
            call["index"] = 0
            delta = _dumps({"role": "assistant", "content": None, "tool_calls": [call],
                            "refusal": None})
        else:
            delta = '{"role":"assistant","content":"","refusal":null}'
        return self._event(choice.index, delta)

    def pieces(self, choice: PlannedChoice, start: int, stop: int) -> list[str]:
        """Events for the choice's pieces [start, stop) (fewer if it is shorter)."""
        before, after = self._frame(choice)
        return [before + text + after for text in choice.pieces_json[start:stop]]

    def _frame(self, choice: PlannedChoice) -> tuple[str, str]:
        key = (choice.index, choice.tool_call is not None)
        frame = self._piece_frames.get(key)
        if frame is None:
            # everything around the piece's text, built once per choice
            marker = "\x00"
            if choice.tool_call:
                delta = f'{{"tool_calls":[{{"index":0,"function":{{"arguments":{marker}}}}}]}}'
            else:
                delta = f'{{"content":{marker}}}'
            before, after = self._event(choice.index, delta).split(marker)
            frame = self._piece_frames[key] = (before, after)
        return frame

    def closing(self, choice: PlannedChoice) -> str:
        return self._event(choice.index, "{}", f'"{choice.finish_reason}"')

    def usage(self, plan: ReplyPlan) -> str:
        body = {"id": self._id, "object": "chat.completion.chunk", "created": self._created,
                "model": self._model, "service_tier": plan.service_tier,
                "system_fingerprint": FINGERPRINT, "choices": [],
                "usage": plan.usage.as_dict()}
        return f"data: {_dumps(body)}\n\n"

    def broken(self) -> str:
        """A chunk cut off mid-object: what a malformed upstream stream looks like."""
        return self._event(0, '{"content":" broken"}')[: len(self._head) + 25] + "\n\n"


def error_body(message: str, kind: str, code: str | None = None,
               param: str | None = None) -> bytes:
    return _dumps({"error": {"message": message, "type": kind, "param": param,
                             "code": code}}).encode()


def malformed_body(request_id: str, model: str) -> bytes:
    """A 200 body that stops in the middle of the JSON."""
    return (f'{{"id":"{request_id}","object":"chat.completion","model":{_dumps(model)},'
            f'"choices":[{{"index":0,"message":{{"role":"assistant","content":"Hel').encode()


def models_body(model_ids: list[str], created: int) -> bytes:
    return _dumps({"object": "list", "data": [
        {"id": m, "object": "model", "created": created, "owned_by": "costgate-sim"}
        for m in model_ids
    ]}).encode()
