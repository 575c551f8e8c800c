"""Request bodies between OpenAI's chat completions and Anthropic's Messages, both ways.

Pure. `chat_to_messages` serves a chat completion routed to a native Anthropic upstream;
`messages_to_chat` serves `/v1/messages` routed to an OpenAI-compatible one (and, through
the Gemini adapter, to Gemini). Fields without a faithful equivalent are a 400
(`Untranslatable`) naming them; fields that do not change what the model generates
(`stream_options`, `store`, `service_tier`) are left behind on purpose.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.providers.translation import (
    Untranslatable,
    dumps,
    guarded,
    parse_arguments,
    unknown_fields,
)

# Anthropic requires max_tokens; OpenAI's default is "until the model stops". 4096 is
# what the OpenAI-compatible endpoint of Anthropic itself assumes.
DEFAULT_MAX_TOKENS = 4096
TO_ANTHROPIC = "chat completions to a native Anthropic upstream"
TO_CHAT = "Anthropic messages to an OpenAI-compatible upstream"

_CHAT_MAPPED = frozenset({
    "model", "messages", "max_tokens", "max_completion_tokens", "stop", "temperature", "top_p",
    "tools", "tool_choice", "parallel_tool_calls", "user", "safety_identifier", "stream",
})
# no effect on the generation: the gateway handles them or they concern OpenAI's storage
_CHAT_IGNORED = frozenset({"stream_options", "store", "metadata", "service_tier", "n"})
_MESSAGES_MAPPED = frozenset({
    "model", "messages", "system", "max_tokens", "stop_sequences", "temperature", "top_p",
    "tools", "tool_choice", "metadata", "stream",
})


# -- chat completions -> Anthropic Messages ------------------------------------------------


def _text_of(content: Any, where: str) -> str:
    """System and tool messages' content: a string or text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise Untranslatable(f"non-text content in {where}", TO_ANTHROPIC, where)
            texts.append(str(part.get("text", "")))
        return "".join(texts)
    if content is None:
        return ""
    raise Untranslatable(f"content of type {type(content).__name__} in {where}", TO_ANTHROPIC)


def _image_block(url: str, where: str) -> dict[str, Any]:
    if url.startswith("data:"):
        head, _, data = url.partition(",")
        media_type = head[5:].split(";")[0]
        if ";base64" not in head or not media_type:
            raise Untranslatable(f"a non-base64 data URL in {where}", TO_ANTHROPIC, where)
        return {"type": "image", "source": {"type": "base64", "media_type": media_type,
                                            "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _user_blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise Untranslatable(f"content of type {type(content).__name__} in {where}", TO_ANTHROPIC)
    blocks = []
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            blocks.append({"type": "text", "text": str(part.get("text", ""))})
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str):
                raise Untranslatable(f"an image without a URL in {where}", TO_ANTHROPIC, where)
            blocks.append(_image_block(url, f"{where}[{i}]"))
        else:
            raise Untranslatable(f"a content part of type {kind!r} in {where}", TO_ANTHROPIC,
                                 f"{where}[{i}]")
    return blocks


def _assistant_blocks(message: dict[str, Any], where: str) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    content = message.get("content")
    text = _text_of(content, where) if content is not None else ""
    if text:
        blocks.append({"type": "text", "text": text})
    for j, call in enumerate(message.get("tool_calls") or ()):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or call.get("type", "function") != "function":
            raise Untranslatable("a tool call that is not a function call", TO_ANTHROPIC,
                                 f"{where}.tool_calls[{j}]")
        blocks.append({"type": "tool_use", "id": str(call.get("id") or f"toolu_{j}"),
                       "name": str(fn.get("name", "")),
                       "input": parse_arguments(fn.get("arguments"))})
    return blocks


def _append(out: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    """Consecutive turns of one role become one turn: Anthropic alternates roles, and a
    chat's parallel tool results are one user turn of several tool_result blocks."""
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": blocks})


def _tools_to_anthropic(tools: Any) -> list[dict[str, Any]]:
    out = []
    for i, tool in enumerate(tools or ()):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if tool.get("type") != "function" or not isinstance(fn, dict):
            raise Untranslatable(f"a tool of type {tool.get('type')!r}", TO_ANTHROPIC,
                                 f"tools[{i}]")
        entry: dict[str, Any] = {"name": fn.get("name"),
                                 "input_schema": fn.get("parameters") or {"type": "object"}}
        if fn.get("description"):
            entry["description"] = fn["description"]
        out.append(entry)
    return out


def _tool_choice_to_anthropic(choice: Any, parallel: Any) -> dict[str, Any] | None:
    if choice is None and parallel is not False:
        return None
    if choice is None or choice == "auto":
        out: dict[str, Any] = {"type": "auto"}
    elif choice == "none":
        out = {"type": "none"}
    elif choice == "required":
        out = {"type": "any"}
    elif isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        out = {"type": "tool", "name": choice["function"].get("name")}
    else:
        raise Untranslatable(f"tool_choice {choice!r}", TO_ANTHROPIC, "tool_choice")
    if parallel is False and out["type"] != "none":
        out["disable_parallel_tool_use"] = True
    return out


@guarded(TO_ANTHROPIC)
def chat_to_messages(body: dict[str, Any], upstream_model: str) -> dict[str, Any]:
    """An OpenAI chat body as Anthropic's Messages body, or `Untranslatable`."""
    unknown = [k for k in unknown_fields(body, _CHAT_MAPPED | _CHAT_IGNORED)]
    if body.get("n") not in (None, 1):
        unknown.append("n")
    if unknown:
        raise Untranslatable(", ".join(f"`{k}`" for k in unknown), TO_ANTHROPIC, unknown[0])
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for i, message in enumerate(body["messages"]):
        where, role = f"messages[{i}]", message.get("role")
        if role in ("system", "developer"):
            text = _text_of(message.get("content"), where)
            if turns:
                raise Untranslatable("a system message after the conversation started",
                                     TO_ANTHROPIC, where)
            system.append({"type": "text", "text": text})
        elif role == "user":
            _append(turns, "user", _user_blocks(message.get("content"), f"{where}.content"))
        elif role == "assistant":
            _append(turns, "assistant", _assistant_blocks(message, where))
        elif role == "tool":
            _append(turns, "user", [{
                "type": "tool_result", "tool_use_id": str(message.get("tool_call_id", "")),
                "content": _text_of(message.get("content"), where)}])
        else:
            raise Untranslatable(f"a message of role {role!r}", TO_ANTHROPIC, f"{where}.role")
    out: dict[str, Any] = {"model": upstream_model, "messages": turns}
    caps = [v for v in (body.get("max_completion_tokens"), body.get("max_tokens")) if v]
    out["max_tokens"] = min(caps) if caps else DEFAULT_MAX_TOKENS
    if system:
        out["system"] = system
    stop = body.get("stop")
    if stop:
        out["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    for name in ("temperature", "top_p"):
        if body.get(name) is not None:
            out[name] = body[name]
    if body.get("tools"):
        out["tools"] = _tools_to_anthropic(body["tools"])
    choice = _tool_choice_to_anthropic(body.get("tool_choice"), body.get("parallel_tool_calls"))
    if choice is not None and out.get("tools"):
        out["tool_choice"] = choice
    end_user = body.get("safety_identifier") or body.get("user")  # the newer name first
    if isinstance(end_user, str):
        out["metadata"] = {"user_id": end_user}
    if body.get("stream"):
        out["stream"] = True
    return out


# -- Anthropic Messages -> chat completions ------------------------------------------------


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise Untranslatable(f"content of type {type(content).__name__} in {where}", TO_CHAT)
    return [b for b in content if isinstance(b, dict)]


def _chat_part(block: dict[str, Any], where: str) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": str(block.get("text", ""))}
    if kind == "image":
        source = block.get("source") or {}
        if source.get("type") == "base64":
            url = f"data:{source.get('media_type')};base64,{source.get('data')}"
        elif source.get("type") == "url":
            url = str(source.get("url"))
        else:
            raise Untranslatable(f"an image source of type {source.get('type')!r}", TO_CHAT,
                                 where)
        return {"type": "image_url", "image_url": {"url": url}}
    raise Untranslatable(f"a content block of type {kind!r}", TO_CHAT, where)


def _tool_result_text(block: dict[str, Any], where: str) -> str:
    content = block.get("content")
    if content is None or isinstance(content, str):
        text = content or ""
    else:
        parts = [_chat_part(b, where) for b in _blocks(content, where)]
        if any(p["type"] != "text" for p in parts):
            raise Untranslatable("an image inside a tool_result", TO_CHAT, where)
        text = "".join(p["text"] for p in parts)
    if block.get("is_error"):
        raise Untranslatable("a tool_result with is_error", TO_CHAT, where)
    return text


def _user_turn(content: Any, where: str) -> list[dict[str, Any]]:
    """One Anthropic user turn: its tool results first (as tool messages, which must follow
    the assistant's calls), then what the user wrote."""
    tools: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for j, block in enumerate(_blocks(content, where)):
        here = f"{where}.content[{j}]"
        if block.get("type") == "tool_result":
            tools.append({"role": "tool", "tool_call_id": str(block.get("tool_use_id", "")),
                          "content": _tool_result_text(block, here)})
        else:
            parts.append(_chat_part(block, here))
    out = tools
    if parts:
        only_text = all(p["type"] == "text" for p in parts)
        out.append({"role": "user", "content": "".join(p["text"] for p in parts)
                    if only_text else parts})
    return out


def _assistant_turn(content: Any, where: str) -> dict[str, Any]:
    text: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(_blocks(content, where)):
        kind = block.get("type")
        if kind == "text":
            text.append(str(block.get("text", "")))
        elif kind == "tool_use":
            calls.append({"id": str(block.get("id", "")), "type": "function",
                          "function": {"name": str(block.get("name", "")),
                                       "arguments": dumps(block.get("input") or {})}})
        elif kind in ("thinking", "redacted_thinking"):
            # Anthropic itself leaves earlier turns' thinking out of the model's context;
            # an OpenAI upstream has no place for it either
            continue
        else:
            raise Untranslatable(f"an assistant block of type {kind!r}", TO_CHAT,
                                 f"{where}.content[{j}]")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        message["tool_calls"] = calls
    return message


def _tools_to_chat(tools: Any) -> list[dict[str, Any]]:
    out = []
    for i, tool in enumerate(tools or ()):
        if not isinstance(tool, dict) or tool.get("type", "custom") != "custom":
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise Untranslatable(f"the server tool {kind!r}", TO_CHAT, f"tools[{i}]")
        fn: dict[str, Any] = {"name": tool.get("name"),
                              "parameters": tool.get("input_schema") or {"type": "object"}}
        if tool.get("description"):
            fn["description"] = tool["description"]
        out.append({"type": "function", "function": fn})
    return out


def _tool_choice_to_chat(choice: Any, out: dict[str, Any]) -> None:
    if not isinstance(choice, dict):
        return
    kind = choice.get("type")
    mapping: dict[str, Any] = {"auto": "auto", "any": "required", "none": "none"}
    if kind == "tool":
        out["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    elif kind in mapping:
        out["tool_choice"] = mapping[kind]
    else:
        raise Untranslatable(f"tool_choice of type {kind!r}", TO_CHAT, "tool_choice")
    if choice.get("disable_parallel_tool_use") is True:
        out["parallel_tool_calls"] = False


def system_text(system: Any) -> str:
    """Anthropic's `system` (a string or text blocks; cache_control hints left out: an
    OpenAI upstream caches prefixes by itself)."""
    if system is None or isinstance(system, str):
        return system or ""
    texts = []
    for j, block in enumerate(_blocks(system, "system")):
        if block.get("type") != "text":
            raise Untranslatable(f"a system block of type {block.get('type')!r}", TO_CHAT,
                                 f"system[{j}]")
        texts.append(str(block.get("text", "")))
    return "\n\n".join(texts)


@guarded(TO_CHAT)
def messages_to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic Messages body (validated) as an OpenAI chat body, or `Untranslatable`."""
    unknown = unknown_fields(body, _MESSAGES_MAPPED)
    if unknown:
        raise Untranslatable(", ".join(f"`{k}`" for k in unknown), TO_CHAT, unknown[0])
    messages: list[dict[str, Any]] = []
    system = system_text(body.get("system"))
    if system:
        messages.append({"role": "system", "content": system})
    for i, turn in enumerate(body["messages"]):
        where = f"messages[{i}]"
        if turn.get("role") == "assistant":
            messages.append(_assistant_turn(turn.get("content"), where))
        else:
            messages.extend(_user_turn(turn.get("content"), where))
    out: dict[str, Any] = {"model": body["model"], "messages": messages,
                           "max_tokens": body["max_tokens"]}
    if body.get("stop_sequences"):
        out["stop"] = list(body["stop_sequences"])
    for name in ("temperature", "top_p"):
        if body.get(name) is not None:
            out[name] = body[name]
    if body.get("tools"):
        out["tools"] = _tools_to_chat(body["tools"])
        _tool_choice_to_chat(body.get("tool_choice"), out)
    metadata = body.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("user_id"), str):
        out["user"] = metadata["user_id"]
    if body.get("stream"):
        out["stream"] = True
    return out


def estimate_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The prompt of a Messages body as chat messages, for offline token estimates only
    (never sent): every block's text, nothing refused."""
    out = [{"role": "system", "content": json.dumps(body.get("system") or "")}]
    for turn in body.get("messages") or ():
        if isinstance(turn, dict):
            content = turn.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            out.append({"role": str(turn.get("role", "user")), "content": text})
    return out
