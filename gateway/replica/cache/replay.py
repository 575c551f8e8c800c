"""A stored plain answer as the events of a stream, in the API's own format. Pure.

One entry answers a plain and a streamed request alike (the key leaves `stream` out): a
stored stream is replayed as it came, and a stored plain answer is turned into the events
its API would have streamed: role, the text in word-sized pieces, tool calls, the finish,
and the usage (chat and completions: as the last chunk, which the client format drops
unless `stream_options.include_usage` asked for it). The reverse is `assemble`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from gateway.domain.endpoints import Endpoint

_WORDS = re.compile(r"\s*\S+\s*|\s+")
WORDS_PER_PIECE = 4


def pieces(text: str) -> Iterator[str]:
    """The text in pieces of a few words (whitespace kept: they join back to it)."""
    words = _WORDS.findall(text)
    for i in range(0, len(words), WORDS_PER_PIECE):
        yield "".join(words[i:i + WORDS_PER_PIECE])


def as_events(endpoint: Endpoint, body: dict[str, Any]) -> list[dict[str, Any]]:
    if endpoint is Endpoint.RESPONSES:
        return _responses(body)
    if endpoint is Endpoint.MESSAGES:
        return _messages(body)
    return _chunks(body, chat=endpoint is Endpoint.CHAT_COMPLETIONS)


def _chunks(body: dict[str, Any], *, chat: bool) -> list[dict[str, Any]]:
    """Chat completion chunks (`chat`), or legacy completion ones."""
    head = {"id": body.get("id"), "object": "chat.completion.chunk" if chat else
            "text_completion", "created": body.get("created"), "model": body.get("model")}
    if body.get("system_fingerprint") is not None:
        head["system_fingerprint"] = body["system_fingerprint"]
    out: list[dict[str, Any]] = []

    def chunk(index: int, finish: str | None = None, **fields: Any) -> None:
        choice: dict[str, Any] = {"index": index}
        choice |= {"delta": fields} if chat else {"text": fields.get("text", "")}
        out.append(head | {"choices": [choice | {"logprobs": None, "finish_reason": finish}]})

    for choice in body.get("choices") or []:
        index = choice.get("index", 0)
        if not chat:
            for piece in pieces(choice.get("text") or ""):
                chunk(index, text=piece)
            chunk(index, choice.get("finish_reason"), text="")
            continue
        message = choice.get("message") or {}
        text = message.get("content")
        first: dict[str, Any] = {"role": message.get("role") or "assistant", "content": ""}
        if message.get("refusal") is not None:
            first["refusal"] = message["refusal"]
        chunk(index, **first)
        for piece in pieces(text if isinstance(text, str) else ""):
            chunk(index, content=piece)
        for n, call in enumerate(message.get("tool_calls") or []):
            chunk(index, tool_calls=[{"index": n, **call}])
        chunk(index, choice.get("finish_reason"))
    if body.get("usage") is not None:
        out.append(head | {"choices": [], "usage": body["usage"]})
    return out


def _responses(body: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def event(kind: str, **fields: Any) -> None:
        out.append({"type": kind, "sequence_number": len(out)} | fields)

    started = body | {"status": "in_progress", "output": [], "usage": None}
    event("response.created", response=started)
    event("response.in_progress", response=started)
    for at, item in enumerate(body.get("output") or []):
        kind, item_id = item.get("type"), item.get("id")
        where = {"item_id": item_id, "output_index": at}
        if kind == "message":
            event("response.output_item.added", output_index=at,
                  item=item | {"status": "in_progress", "content": []})
            for n, part in enumerate(item.get("content") or []):
                text = part.get("text") if part.get("type") == "output_text" else None
                empty = part | {"text": ""} if text is not None else part
                event("response.content_part.added", **where, content_index=n, part=empty)
                if text is not None:
                    for piece in pieces(text):
                        event("response.output_text.delta", **where, content_index=n,
                              delta=piece)
                    event("response.output_text.done", **where, content_index=n, text=text)
                event("response.content_part.done", **where, content_index=n, part=part)
        elif kind == "function_call":
            arguments = item.get("arguments") or ""
            event("response.output_item.added", output_index=at,
                  item=item | {"status": "in_progress", "arguments": ""})
            event("response.function_call_arguments.delta", **where, delta=arguments)
            event("response.function_call_arguments.done", **where, arguments=arguments)
        else:
            event("response.output_item.added", output_index=at, item=item)
        event("response.output_item.done", output_index=at, item=item)
    closing = "response.incomplete" if body.get("status") == "incomplete" else (
        "response.completed")
    event(closing, response=body)
    return out


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    usage = body.get("usage") or {}
    start = body | {"content": [], "stop_reason": None, "stop_sequence": None,
                    "usage": usage | {"output_tokens": 0}}
    out: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for at, block in enumerate(body.get("content") or []):
        kind = block.get("type")
        deltas: list[dict[str, Any]] = []
        if kind == "text":
            opened = block | {"text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in pieces(block.get("text", ""))]
        elif kind == "tool_use":
            opened = block | {"input": {}}
            given = json.dumps(block.get("input") or {}, separators=(",", ":"))
            deltas = [{"type": "input_json_delta", "partial_json": given}]
        elif kind == "thinking":
            opened = block | {"thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p}
                      for p in pieces(block.get("thinking", ""))]
            if block.get("signature"):
                deltas.append({"type": "signature_delta", "signature": block["signature"]})
        else:  # redacted thinking, server tool results: whole in their start
            opened = block
        out.append({"type": "content_block_start", "index": at, "content_block": opened})
        out += [{"type": "content_block_delta", "index": at, "delta": d} for d in deltas]
        out.append({"type": "content_block_stop", "index": at})
    out.append({"type": "message_delta", "usage": usage,
                "delta": {"stop_reason": body.get("stop_reason"),
                          "stop_sequence": body.get("stop_sequence")}})
    out.append({"type": "message_stop"})
    return out
