"""Reading Anthropic's Messages stream: natively (events passed on as they are) or as
OpenAI chat chunks. Pure: payloads in, dicts out.

Usage comes in pieces: `message_start` carries the input side (and a first output count),
each `message_delta` the cumulative counts so far. Cumulative means the last one wins,
field by field: summing them would bill the output twice.
"""

from __future__ import annotations

from typing import Any

from gateway.domain import json_codec
from gateway.domain.pricing import TokenUsage
from gateway.providers.adapter import MalformedReply
from gateway.providers.anthropic_replies import STOP_TO_FINISH, openai_usage, usage_from_anthropic
from gateway.providers.translation import obj

_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


class UpstreamStreamError(MalformedReply):
    """Anthropic's `error` event mid-stream (overloaded, api_error): the upstream ended the
    answer itself. A Messages client can be handed the event as it came."""

    def __init__(self, event: dict[str, Any]) -> None:
        self.kind = str(obj(event.get("error")).get("type") or "api_error")
        super().__init__(f"an error event mid-stream ({self.kind})")
        self.event = {"type": "error", "error": {
            "type": self.kind, "message": str(obj(event.get("error")).get("message") or "")}}


def _event(payload: bytes) -> dict[str, Any]:
    try:
        event = json_codec.loads(payload)
    except ValueError as err:
        raise MalformedReply(f"an upstream stream event is not JSON: {err}") from None
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise MalformedReply("an upstream stream event without a type")
    if event["type"] == "error":
        raise UpstreamStreamError(event)
    return event


class _Tracker:
    """What both readers note: usage (last value per field), text, and the end."""

    def __init__(self) -> None:
        self.raw_usage: dict[str, Any] = {}
        self.texts: list[str] = []
        self.finished = False
        self.done = False
        self.stop_reason: str | None = None

    def note(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "message_start":
            message = obj(event.get("message"))
            self._usage(message.get("usage"))
        elif kind == "content_block_delta":
            delta = obj(event.get("delta"))
            for key in ("text", "partial_json", "thinking"):
                if isinstance(delta.get(key), str):
                    self.texts.append(delta[key])
        elif kind == "message_delta":
            self._usage(event.get("usage"))
            delta = obj(event.get("delta"))
            if delta.get("stop_reason"):
                self.stop_reason = str(delta["stop_reason"])
                self.finished = True
        elif kind == "message_stop":
            self.finished = self.done = True

    def _usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            for name in _USAGE_FIELDS:
                if isinstance(usage.get(name), int):
                    self.raw_usage[name] = usage[name]
            # the tier served and the server tools' calls (billed per call)
            for name in ("service_tier", "server_tool_use"):
                if usage.get(name) is not None:
                    self.raw_usage[name] = usage[name]

    @property
    def usage(self) -> TokenUsage | None:
        return usage_from_anthropic(self.raw_usage) if self.raw_usage else None


class AnthropicEventStream:
    """Native: each event passes on as it came (the relay renames the model); usage,
    text and the end are noted on the way."""

    __slots__ = ("_t",)

    def __init__(self) -> None:
        self._t = _Tracker()

    @property
    def finished(self) -> bool:
        return self._t.finished

    @property
    def done(self) -> bool:
        return self._t.done

    @property
    def usage(self) -> TokenUsage | None:
        return self._t.usage

    def text(self) -> str:
        return "".join(self._t.texts)

    def feed(self, payload: bytes) -> list[dict[str, Any]]:
        event = _event(payload)
        self._t.note(event)
        return [] if event["type"] == "ping" else [event]

    def close(self) -> list[dict[str, Any]]:
        return []


class AnthropicChatStream:
    """Anthropic's events as OpenAI chat chunks, for a chat completion on a native upstream."""

    __slots__ = ("_calls", "_id", "_model", "_t", "_tool_index")

    def __init__(self) -> None:
        self._t = _Tracker()
        self._id = ""
        self._model = ""
        self._calls = 0
        self._tool_index: dict[int, int] = {}  # content block index -> tool call index

    @property
    def finished(self) -> bool:
        return self._t.finished

    @property
    def done(self) -> bool:
        return self._t.done

    @property
    def usage(self) -> TokenUsage | None:
        return self._t.usage

    def text(self) -> str:
        return "".join(self._t.texts)

    def _chunk(self, delta: dict[str, Any] | None, finish: str | None = None) -> dict[str, Any]:
        choices = [] if delta is None else [
            {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        return {"id": self._id, "object": "chat.completion.chunk", "created": 0,
                "model": self._model, "choices": choices}

    def feed(self, payload: bytes) -> list[dict[str, Any]]:
        event = _event(payload)
        self._t.note(event)
        kind = event["type"]
        if kind == "message_start":
            message = obj(event.get("message"))
            self._id = str(message.get("id", ""))
            self._model = str(message.get("model", ""))
            return [self._chunk({"role": "assistant", "content": ""})]
        if kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") == "tool_use":
                index = self._tool_index[int(event.get("index", 0))] = self._calls
                self._calls += 1
                return [self._chunk({"tool_calls": [{
                    "index": index, "id": str(block.get("id", "")), "type": "function",
                    "function": {"name": str(block.get("name", "")), "arguments": ""}}]})]
            return []
        if kind == "content_block_delta":
            return self._delta(event)
        if kind == "message_delta" and obj(event.get("delta")).get("stop_reason"):
            # one finish chunk: a later message_delta may carry usage only
            return [self._chunk({}, STOP_TO_FINISH.get(str(self._t.stop_reason), "stop"))]
        if kind == "message_stop":
            usage = self._t.usage
            if usage is None:
                return []
            chunk = self._chunk(None)
            chunk["usage"] = openai_usage(usage)
            return [chunk]
        return []

    def _delta(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        delta = obj(event.get("delta"))
        kind = delta.get("type")
        if kind == "text_delta":
            return [self._chunk({"content": str(delta.get("text", ""))})]
        if kind == "thinking_delta":
            return [self._chunk({"reasoning_content": str(delta.get("thinking", ""))})]
        if kind == "input_json_delta":
            index = self._tool_index.get(int(event.get("index", 0)))
            if index is None:
                raise MalformedReply("tool input for a block that is not a tool_use")
            return [self._chunk({"tool_calls": [{
                "index": index, "function": {"arguments": str(delta.get("partial_json", ""))}}]})]
        return []  # signature deltas and newer kinds: nothing a chat client can take
