"""Answers between Anthropic's Messages and OpenAI's chat completions, and Anthropic's
usage in our token classes. Pure.

Anthropic's `input_tokens` leave out the tokens read from and written to its prompt cache
(`cache_read_input_tokens`, `cache_creation_input_tokens`); OpenAI's `prompt_tokens`, and
so `TokenUsage.prompt_tokens`, include them. Thinking tokens are inside `output_tokens`,
which Anthropic does not split.
"""

from __future__ import annotations

import time
from typing import Any

from gateway.domain.pricing import TokenUsage, service_tier_name
from gateway.providers.translation import count, dumps, obj, parse_arguments

STOP_TO_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
FINISH_TO_STOP = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


def usage_from_anthropic(usage: Any) -> TokenUsage | None:
    if not isinstance(usage, dict) or not isinstance(usage.get("input_tokens"), int):
        return None
    read = count(usage.get("cache_read_input_tokens"))
    written = count(usage.get("cache_creation_input_tokens"))
    server_tools = usage.get("server_tool_use")
    searches = (
        count(server_tools.get("web_search_requests")) if isinstance(server_tools, dict) else 0
    )
    return TokenUsage(
        prompt_tokens=count(usage.get("input_tokens")) + read + written,
        cached_prompt_tokens=read,
        cache_write_tokens=written,
        completion_tokens=count(usage.get("output_tokens")),
        web_search_calls=searches,
        service_tier=service_tier_name(usage.get("service_tier")),
    )


def anthropic_usage(usage: TokenUsage | None) -> dict[str, int]:
    """Our token classes as Anthropic's usage object (translated answers)."""
    if usage is None:
        return {"input_tokens": 0, "output_tokens": 0}
    return {
        "input_tokens": usage.prompt_tokens - usage.cached_prompt_tokens
        - usage.cache_write_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cached_prompt_tokens,
        "output_tokens": usage.completion_tokens,
    }


def openai_usage(usage: TokenUsage) -> dict[str, Any]:
    """Our token classes as OpenAI's usage object (translated answers)."""
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_prompt_tokens,
                                  "cache_write_tokens": usage.cache_write_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def message_text(message: dict[str, Any]) -> str:
    """Everything a message generated (text, tool input, thinking), for estimates."""
    parts = []
    for block in message.get("content") or ():
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            parts.append(dumps(block.get("input") or {}))
        elif block.get("type") == "thinking":
            parts.append(str(block.get("thinking", "")))
    return "".join(parts)


def message_to_completion(message: dict[str, Any]) -> dict[str, Any]:
    """A Messages answer as OpenAI's chat completion."""
    text: list[str] = []
    thinking: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in message.get("content") or ():
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            text.append(str(block.get("text", "")))
        elif kind == "thinking":
            thinking.append(str(block.get("thinking", "")))
        elif kind == "tool_use":
            calls.append({"id": str(block.get("id", "")), "type": "function",
                          "function": {"name": str(block.get("name", "")),
                                       "arguments": dumps(block.get("input") or {})}})
    reply: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None,
                             "refusal": None}
    if thinking:
        reply["reasoning_content"] = "".join(thinking)
    if calls:
        reply["tool_calls"] = calls
    body: dict[str, Any] = {
        "id": str(message.get("id", "")),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(message.get("model", "")),
        "choices": [{"index": 0, "message": reply, "logprobs": None,
                     "finish_reason": STOP_TO_FINISH.get(str(message.get("stop_reason")),
                                                         "stop")}],
    }
    usage = usage_from_anthropic(message.get("usage"))
    if usage is not None:
        body["usage"] = openai_usage(usage)
    return body


def completion_to_message(completion: dict[str, Any], usage: TokenUsage | None,
                          model: str) -> dict[str, Any]:
    """An OpenAI chat completion (its first choice: `/v1/messages` never asks for more)
    as Anthropic's message."""
    choices = completion.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    reply = obj(choice.get("message"))
    content: list[dict[str, Any]] = []
    if isinstance(reply.get("content"), str) and reply["content"]:
        content.append({"type": "text", "text": reply["content"]})
    for call in reply.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            content.append({"type": "tool_use", "id": str(call.get("id", "")),
                            "name": str(fn.get("name", "")),
                            "input": parse_arguments(fn.get("arguments"))})
    upstream_id = str(completion.get("id", ""))
    return {
        "id": upstream_id if upstream_id.startswith("msg_") else f"msg_{upstream_id}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": FINISH_TO_STOP.get(str(choice.get("finish_reason")), "end_turn"),
        "stop_sequence": None,
        "usage": anthropic_usage(usage),
    }
