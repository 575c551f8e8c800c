"""A chat stream as the Responses stream: `response.created` … `response.completed`.

Wraps the upstream adapter's chat stream parser, so usage, text and the end stay its own.
Each output item (the text message, each function call) is added, fed with deltas and
done in order; the terminal event (`response.completed`, or `response.incomplete` when
the output hit its limit) carries the whole Response with its usage. Events are numbered
(`sequence_number`) as OpenAI numbers them.
"""

from __future__ import annotations

from typing import Any

from gateway.domain.pricing import TokenUsage
from gateway.providers.adapter import StreamParser
from gateway.providers.responses_chat.replies import (
    call_item,
    message_item,
    response_id,
    response_object,
)
from gateway.providers.translation import obj


class ChatToResponsesStream:
    __slots__ = ("_closed", "_created", "_finish", "_id", "_inner", "_items", "_model",
                 "_open", "_seq", "_tools")

    def __init__(self, inner: StreamParser) -> None:
        self._inner = inner
        self._id = ""
        self._model = ""
        self._created = False
        self._closed = False
        self._seq = 0
        self._items: list[dict[str, Any]] = []  # output items so far, in order
        self._open: int | None = None  # index of the item receiving deltas
        self._tools: dict[int, int] = {}  # chat tool call index -> output index
        self._finish: str | None = None

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

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return event

    def _response(self, finish: str | None) -> dict[str, Any]:
        usage = self._inner.usage if finish is not None else None
        return response_object(self._id, self._model, list(self._items), usage, finish)

    def feed(self, payload: bytes) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for chunk in self._inner.feed(payload):
            self._chunk(chunk, out)
        if self._inner.done:
            out.extend(self.close())
        return out

    def _start(self, chunk: dict[str, Any], out: list[dict[str, Any]]) -> None:
        if self._created:
            return
        self._created = True
        self._id = response_id(str(chunk.get("id") or ""))
        self._model = str(chunk.get("model") or "")
        out.append(self._event("response.created", response=self._response(None)))
        out.append(self._event("response.in_progress", response=self._response(None)))

    def _close_item(self, out: list[dict[str, Any]]) -> None:
        if self._open is None:
            return
        index, item = self._open, self._items[self._open]
        self._open = None
        item["status"] = "completed"
        if item["type"] == "message":
            part = item["content"][0]
            where = {"item_id": item["id"], "output_index": index, "content_index": 0}
            out.append(self._event("response.output_text.done", **where, text=part["text"]))
            out.append(self._event("response.content_part.done", **where, part=part))
        else:
            out.append(self._event("response.function_call_arguments.done",
                                   item_id=item["id"], output_index=index,
                                   arguments=item["arguments"]))
        out.append(self._event("response.output_item.done", output_index=index, item=item))

    def _add(self, item: dict[str, Any], out: list[dict[str, Any]]) -> int:
        self._close_item(out)
        self._items.append(item)
        index = self._open = len(self._items) - 1
        added = {**item, "content": []} if item["type"] == "message" else dict(item)
        out.append(self._event("response.output_item.added", output_index=index, item=added))
        if item["type"] == "message":
            out.append(self._event("response.content_part.added", item_id=item["id"],
                                   output_index=index, content_index=0,
                                   part={"type": "output_text", "text": "", "annotations": []}))
        return index

    def _chunk(self, chunk: dict[str, Any], out: list[dict[str, Any]]) -> None:
        self._start(chunk, out)
        for raw in chunk.get("choices") or ():
            choice = obj(raw)
            if choice.get("index", 0) != 0:
                continue
            delta = obj(choice.get("delta"))
            text = delta.get("content")
            if isinstance(text, str) and text:
                current = self._items[self._open] if self._open is not None else None
                if current is None or current["type"] != "message":
                    self._add(message_item(f"msg_{self._id[5:]}_{len(self._items)}", "",
                                           "in_progress"), out)
                assert self._open is not None
                item = self._items[self._open]
                item["content"][0]["text"] += text
                out.append(self._event("response.output_text.delta", item_id=item["id"],
                                       output_index=self._open, content_index=0, delta=text))
            for call in delta.get("tool_calls") or ():
                self._tool_call(obj(call), out)
            if choice.get("finish_reason"):
                self._finish = str(choice["finish_reason"])

    def _tool_call(self, call: dict[str, Any], out: list[dict[str, Any]]) -> None:
        fn = obj(call.get("function"))
        index = self._tools.get(call.get("index", 0))
        if index is None:
            item = call_item(f"fc_{self._id[5:]}_{len(self._items)}",
                             str(call.get("id") or ""), str(fn.get("name") or ""), "",
                             "in_progress")
            index = self._tools[call.get("index", 0)] = self._add(item, out)
        arguments = fn.get("arguments")
        if isinstance(arguments, str) and arguments:
            item = self._items[index]
            item["arguments"] += arguments
            out.append(self._event("response.function_call_arguments.delta",
                                   item_id=item["id"], output_index=index, delta=arguments))

    def close(self) -> list[dict[str, Any]]:
        """The terminal events, once: the open item's end, then the whole Response."""
        if self._closed:
            return []
        self._closed = True
        out: list[dict[str, Any]] = []
        self._start({}, out)
        self._close_item(out)
        finish = self._finish or "stop"
        kind = "response.incomplete" if finish == "length" else "response.completed"
        out.append(self._event(kind, response=self._response(finish)))
        return out
