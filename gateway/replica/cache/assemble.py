"""A stored stream as the plain answer its API would have given. Pure.

Chat: the chunks' content, refusal and tool calls joined per choice, the finish reason,
the usage chunk's usage. Legacy completions: the text per choice. Responses: the
`response.completed` (or `.incomplete`) event carries the whole response. Messages: the
`message_start` message, its blocks built from their deltas, `message_delta`'s stop
reason and usage. The reverse is `replay`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from gateway.domain.endpoints import Endpoint

Events = Sequence[dict[str, Any]]


def as_body(endpoint: Endpoint, events: Events, model: str) -> dict[str, Any]:
    """`model`: the name the client asked for, as a plain answer says it."""
    if endpoint is Endpoint.RESPONSES:
        final = next(e["response"] for e in reversed(events) if e.get("type") in (
            "response.completed", "response.incomplete"))
        return dict(final) | {"model": model}
    if endpoint is Endpoint.MESSAGES:
        return _message(events) | {"model": model}
    return _completion(events, model, chat=endpoint is Endpoint.CHAT_COMPLETIONS)


def _completion(events: Events, model: str, *, chat: bool) -> dict[str, Any]:
    first = events[0] if events else {}
    choices: dict[int, dict[str, Any]] = {}
    usage = None
    for chunk in events:
        usage = chunk.get("usage") or usage
        for c in chunk.get("choices") or []:
            got = choices.setdefault(c.get("index", 0), {"text": [], "calls": {},
                                                          "finish": None, "refusal": []})
            got["finish"] = c.get("finish_reason") or got["finish"]
            if not chat:
                got["text"].append(c.get("text") or "")
                continue
            delta = c.get("delta") or {}
            got["text"].append(delta.get("content") or "")
            got["refusal"].append(delta.get("refusal") or "")
            for call in delta.get("tool_calls") or []:
                _merge_call(got["calls"], call)
    out: list[dict[str, Any]] = []
    for index in sorted(choices):
        got = choices[index]
        text = "".join(got["text"])
        if not chat:
            out.append({"text": text, "index": index, "logprobs": None,
                        "finish_reason": got["finish"]})
            continue
        calls = [got["calls"][n] for n in sorted(got["calls"])]
        message: dict[str, Any] = {"role": "assistant", "content": text or (None if calls
                                                                              else ""),
                                   "refusal": "".join(got["refusal"]) or None}
        if calls:
            message["tool_calls"] = calls
        out.append({"index": index, "message": message, "logprobs": None,
                    "finish_reason": got["finish"]})
    body = {"id": first.get("id"), "object": "chat.completion" if chat else "text_completion",
            "created": first.get("created"), "model": model, "choices": out}
    if first.get("system_fingerprint") is not None:
        body["system_fingerprint"] = first["system_fingerprint"]
    return body | ({"usage": usage} if usage is not None else {})


def _merge_call(calls: dict[int, dict[str, Any]], part: dict[str, Any]) -> None:
    n = part.get("index", 0)
    call = calls.setdefault(n, {"id": None, "type": "function",
                                "function": {"name": "", "arguments": ""}})
    call["id"] = part.get("id") or call["id"]
    call["type"] = part.get("type") or call["type"]
    fn = part.get("function") or {}
    call["function"]["name"] += fn.get("name") or ""
    call["function"]["arguments"] += fn.get("arguments") or ""


def _message(events: Events) -> dict[str, Any]:
    message: dict[str, Any] = {}
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, list[str]] = {}
    for e in events:
        kind = e.get("type")
        if kind == "message_start":
            message = dict(e.get("message") or {})
        elif kind == "content_block_start":
            blocks[e["index"]] = dict(e.get("content_block") or {})
        elif kind == "content_block_delta":
            block, delta = blocks[e["index"]], e.get("delta") or {}
            dkind = delta.get("type")
            if dkind == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif dkind == "input_json_delta":
                partial.setdefault(e["index"], []).append(delta.get("partial_json", ""))
            elif dkind == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif dkind == "signature_delta":
                block["signature"] = delta.get("signature", "")
            elif dkind == "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))
        elif kind == "message_delta":
            message |= e.get("delta") or {}
            message["usage"] = (message.get("usage") or {}) | (e.get("usage") or {})
    for index, parts in partial.items():
        given = "".join(parts)
        blocks[index]["input"] = json.loads(given) if given else {}
    return message | {"content": [blocks[i] for i in sorted(blocks)]}
