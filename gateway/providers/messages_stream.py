"""OpenAI chat chunks as Anthropic's Messages stream, for `/v1/messages` on an upstream
that does not speak it (OpenAI-compatible, Gemini). Pure.

It wraps the upstream adapter's chat stream parser, so usage, text and the end stay the
upstream's. An OpenAI stream reports usage only at its end: `message_start` then carries
zeros and the closing `message_delta` the whole usage, input included (its counts are
cumulative, so a client that takes the last value per field gets it right).
"""

from __future__ import annotations

from typing import Any

from gateway.domain.pricing import TokenUsage
from gateway.providers.adapter import StreamParser
from gateway.providers.anthropic_replies import FINISH_TO_STOP, anthropic_usage
from gateway.providers.translation import obj


class ChatToMessagesStream:
    __slots__ = ("_block", "_block_kind", "_closed", "_inner", "_model", "_next_block",
                 "_started", "_stop", "_tools")

    def __init__(self, inner: StreamParser, model: str = "") -> None:
        self._inner = inner
        self._model = model
        self._started = False
        self._closed = False
        self._block: int | None = None  # the open content block's index
        self._block_kind = ""
        self._next_block = 0
        self._tools: dict[int, int] = {}  # chat tool call index -> content block index
        self._stop = "end_turn"

    @property
    def finished(self) -> bool:
        return self._inner.finished

    @property
    def done(self) -> bool:
        return self._inner.done

    @property
    def usage(self) -> TokenUsage | None:
        return self._inner.usage

    def text(self) -> str:
        return self._inner.text()

    def feed(self, payload: bytes) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for chunk in self._inner.feed(payload):
            self._chunk(chunk, out)
        if self._inner.done:
            out.extend(self.close())
        return out

    def _start(self, chunk: dict[str, Any], out: list[dict[str, Any]]) -> None:
        if self._started:
            return
        self._started = True
        upstream_id = str(chunk.get("id") or "")
        out.append({"type": "message_start", "message": {
            "id": upstream_id if upstream_id.startswith("msg_") else f"msg_{upstream_id}",
            "type": "message", "role": "assistant", "model": self._model, "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0}}})

    def _open(self, kind: str, block: dict[str, Any], out: list[dict[str, Any]]) -> int:
        self._close_block(out)
        self._block, self._block_kind = self._next_block, kind
        self._next_block += 1
        out.append({"type": "content_block_start", "index": self._block,
                    "content_block": block})
        return self._block

    def _close_block(self, out: list[dict[str, Any]]) -> None:
        if self._block is not None:
            out.append({"type": "content_block_stop", "index": self._block})
            self._block = None

    def _chunk(self, chunk: dict[str, Any], out: list[dict[str, Any]]) -> None:
        self._start(chunk, out)
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = obj(choice.get("delta"))
            text = delta.get("content")
            if isinstance(text, str) and text:
                if self._block is None or self._block_kind != "text":
                    self._open("text", {"type": "text", "text": ""}, out)
                out.append({"type": "content_block_delta", "index": self._block,
                            "delta": {"type": "text_delta", "text": text}})
            for call in delta.get("tool_calls") or ():
                self._tool_call(call, out)
            finish = choice.get("finish_reason")
            if finish:
                self._stop = FINISH_TO_STOP.get(str(finish), "end_turn")

    def _tool_call(self, call: Any, out: list[dict[str, Any]]) -> None:
        if not isinstance(call, dict):
            return
        index = call.get("index", 0)
        fn = obj(call.get("function"))
        block = self._tools.get(index)
        if block is None:
            block = self._tools[index] = self._open("tool_use", {
                "type": "tool_use", "id": str(call.get("id") or f"toolu_{index}"),
                "name": str(fn.get("name", "")), "input": {}}, out)
        arguments = fn.get("arguments")
        if isinstance(arguments, str) and arguments:
            out.append({"type": "content_block_delta", "index": block,
                        "delta": {"type": "input_json_delta", "partial_json": arguments}})

    def close(self) -> list[dict[str, Any]]:
        """The closing events, once: the last block's stop, the usage, message_stop."""
        if self._closed:
            return []
        self._closed = True
        out: list[dict[str, Any]] = []
        self._start({}, out)
        self._close_block(out)
        out.append({"type": "message_delta",
                    "delta": {"stop_reason": self._stop, "stop_sequence": None},
                    "usage": anthropic_usage(self._inner.usage)})
        out.append({"type": "message_stop"})
        return out
