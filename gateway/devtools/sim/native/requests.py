"""Anthropic and Gemini request bodies read into the simulator's `ChatRequest`, so that
one reply plan (latency, length, tool calls, usage) serves every format.

Written apart from the gateway's own translations on purpose: the simulator checks what
the gateway sends, it must not share its mistakes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gateway.devtools.sim.request import ChatRequest, InvalidRequest, service_tier, web_searches


@dataclass(frozen=True)
class NativeRequest:
    chat: ChatRequest
    # how many of chat.messages lead up to (and include) the last cache_control block:
    # Anthropic caches the prefix up to there, only when asked
    cache_prefix_messages: int = 0


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return json.dumps(content, sort_keys=True)


def _has_cache_control(value: Any) -> bool:
    return isinstance(value, list) and any(
        isinstance(b, dict) and b.get("cache_control") for b in value)


def parse_anthropic(body: Any) -> NativeRequest:
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("model: Field required", "model")
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise InvalidRequest("max_tokens: Field required", "max_tokens")
    turns = body.get("messages")
    if not isinstance(turns, list) or not turns:
        raise InvalidRequest("messages: at least one message is required", "messages")
    messages: list[dict[str, Any]] = []
    breakpoint_at = 0
    system = body.get("system")
    if system:
        messages.append({"role": "system", "content": _text(system)})
        if _has_cache_control(system):
            breakpoint_at = len(messages)
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict) or turn.get("role") not in ("user", "assistant"):
            raise InvalidRequest(f"messages.{i}.role: Input should be 'user' or 'assistant'",
                                 f"messages.{i}.role")
        content = turn.get("content")
        tool_result = isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
        role = "tool" if tool_result else turn["role"]
        messages.append({"role": role, "content": _text(content)})
        if _has_cache_control(content):
            breakpoint_at = len(messages)
    tools = []
    searches = 0
    for tool in body.get("tools") or ():
        if isinstance(tool, dict) and str(tool.get("type", "")).startswith("web_search"):
            searches = web_searches([tool], tool.get("max_uses"))  # a server tool
        elif isinstance(tool, dict) and isinstance(tool.get("name"), str):
            tools.append({"type": "function", "function": {
                "name": tool["name"], "parameters": tool.get("input_schema") or {}}})
    choice = body.get("tool_choice") or {}
    kinds = {"auto": "auto", "any": "required", "none": "none"}
    tool_choice: Any = kinds.get(str(choice.get("type"))) if isinstance(choice, dict) else None
    if isinstance(choice, dict) and choice.get("type") == "tool":
        tool_choice = {"type": "function", "function": {"name": choice.get("name")}}
    chat = ChatRequest(model=model, messages=tuple(messages), stream=body.get("stream") is True,
                       include_usage=True, max_tokens=max_tokens, tools=tuple(tools),
                       tool_choice=tool_choice, service_tier=service_tier(body),
                       web_searches=searches)
    return NativeRequest(chat, breakpoint_at)


def parse_gemini(model: str, body: Any, stream: bool) -> NativeRequest:
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        raise InvalidRequest("* GenerateContentRequest.contents: contents is not specified",
                             "contents")
    messages: list[dict[str, Any]] = []
    system = body.get("systemInstruction")
    if isinstance(system, dict):
        messages.append({"role": "system", "content": _text(system.get("parts"))})
    for i, content in enumerate(contents):
        if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
            raise InvalidRequest(f"contents[{i}].parts is required", f"contents[{i}]")
        parts = content["parts"]
        answered = any(isinstance(p, dict) and "functionResponse" in p for p in parts)
        role = "tool" if answered else \
            {"user": "user", "model": "assistant"}.get(content.get("role", "user"), "user")
        messages.append({"role": role, "content": _text(parts)})
    tools = []
    for group in body.get("tools") or ():
        for fn in (group or {}).get("functionDeclarations") or ():
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                tools.append({"type": "function", "function": {
                    "name": fn["name"], "parameters": fn.get("parameters") or {}}})
    calling = ((body.get("toolConfig") or {}).get("functionCallingConfig") or {})
    mode = calling.get("mode")
    tool_choice: Any = {"AUTO": "auto", "ANY": "required", "NONE": "none"}.get(str(mode))
    allowed = calling.get("allowedFunctionNames")
    if mode == "ANY" and allowed:
        tool_choice = {"type": "function", "function": {"name": allowed[0]}}
    config = body.get("generationConfig") or {}
    cap = config.get("maxOutputTokens")
    n = config.get("candidateCount") or 1
    chat = ChatRequest(model=model, messages=tuple(messages), stream=stream,
                       include_usage=True, n=n if isinstance(n, int) and n > 0 else 1,
                       max_tokens=cap if isinstance(cap, int) and cap > 0 else None,
                       tools=tuple(tools), tool_choice=tool_choice,
                       seed=config.get("seed") if isinstance(config.get("seed"), int) else None)
    return NativeRequest(chat)
