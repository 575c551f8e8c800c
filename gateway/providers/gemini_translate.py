"""Between OpenAI's chat completions and Gemini's generateContent, both directions of one
call: the request out, the answer (whole or chunk by chunk) back. Pure.

Gemini's usage: `promptTokenCount` includes `cachedContentTokenCount`; thinking tokens
(`thoughtsTokenCount`) are billed as output but reported apart from
`candidatesTokenCount`, so our completion tokens are their sum and reasoning the thoughts.
Gemini's tool calls have no ids (newer models may send one): ours are made from the
answer's id and the call's position, and a tool result finds its function's name again
through the assistant turn that made the call.
"""

from __future__ import annotations

from typing import Any

from gateway.domain.pricing import TokenUsage
from gateway.providers.anthropic_requests import DEFAULT_MAX_TOKENS
from gateway.providers.translation import (
    Untranslatable,
    count,
    dumps,
    guarded,
    obj,
    parse_arguments,
)

ROUTE = "chat completions to a native Gemini upstream"
_MAPPED = frozenset({
    "model", "messages", "max_tokens", "max_completion_tokens", "stop", "temperature", "top_p",
    "tools", "tool_choice", "stream", "seed", "presence_penalty", "frequency_penalty",
    "response_format", "n",
})
_IGNORED = frozenset({"stream_options", "store", "metadata", "service_tier", "user",
                      "safety_identifier", "parallel_tool_calls"})
FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter",
          "RECITATION": "content_filter", "BLOCKLIST": "content_filter",
          "PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter"}


def usage_from_gemini(meta: Any) -> TokenUsage | None:
    if not isinstance(meta, dict) or not isinstance(meta.get("promptTokenCount"), int):
        return None
    prompt = count(meta.get("promptTokenCount")) + count(meta.get("toolUsePromptTokenCount"))
    thoughts = count(meta.get("thoughtsTokenCount"))
    return TokenUsage(
        prompt_tokens=prompt,
        cached_prompt_tokens=min(count(meta.get("cachedContentTokenCount")), prompt),
        completion_tokens=count(meta.get("candidatesTokenCount")) + thoughts,
        reasoning_tokens=thoughts,
    )


def _parts(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}]
    if content is None:
        return []
    if not isinstance(content, list):
        raise Untranslatable(f"content of type {type(content).__name__} in {where}", ROUTE)
    parts: list[dict[str, Any]] = []
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            parts.append({"text": str(part.get("text", ""))})
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            head, _, data = str(url).partition(",")
            if not str(url).startswith("data:") or ";base64" not in head:
                raise Untranslatable("an image by URL (Gemini takes inline data)", ROUTE,
                                     f"{where}[{i}]")
            parts.append({"inlineData": {"mimeType": head[5:].split(";")[0], "data": data}})
        else:
            raise Untranslatable(f"a content part of type {kind!r}", ROUTE, f"{where}[{i}]")
    return parts


def _tool_config(choice: Any) -> dict[str, Any] | None:
    if choice is None:
        return None
    if choice in ("auto", "none", "required"):
        mode = {"auto": "AUTO", "none": "NONE", "required": "ANY"}[choice]
        return {"functionCallingConfig": {"mode": mode}}
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return {"functionCallingConfig": {"mode": "ANY",
                                          "allowedFunctionNames": [choice["function"]["name"]]}}
    raise Untranslatable(f"tool_choice {choice!r}", ROUTE, "tool_choice")


def _tools(tools: Any) -> list[dict[str, Any]]:
    declarations = []
    for i, tool in enumerate(tools or ()):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if tool.get("type") != "function" or not isinstance(fn, dict):
            raise Untranslatable(f"a tool of type {tool.get('type')!r}", ROUTE, f"tools[{i}]")
        entry: dict[str, Any] = {"name": fn.get("name")}
        if fn.get("description"):
            entry["description"] = fn["description"]
        if fn.get("parameters"):
            entry["parameters"] = fn["parameters"]
        declarations.append(entry)
    return [{"functionDeclarations": declarations}]


def _generation_config(body: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    caps = [v for v in (body.get("max_completion_tokens"), body.get("max_tokens")) if v]
    config["maxOutputTokens"] = min(caps) if caps else DEFAULT_MAX_TOKENS
    for ours, theirs in (("temperature", "temperature"), ("top_p", "topP"), ("seed", "seed"),
                         ("presence_penalty", "presencePenalty"),
                         ("frequency_penalty", "frequencyPenalty"), ("n", "candidateCount")):
        if body.get(ours) is not None:
            config[theirs] = body[ours]
    stop = body.get("stop")
    if stop:
        config["stopSequences"] = [stop] if isinstance(stop, str) else list(stop)
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema"):
        config["responseMimeType"] = "application/json"
        schema = (fmt.get("json_schema") or {}).get("schema")
        if schema:
            config["responseJsonSchema"] = schema
    elif fmt is not None and not (isinstance(fmt, dict) and fmt.get("type") == "text"):
        raise Untranslatable(f"response_format {fmt!r}", ROUTE, "response_format")
    return config


@guarded(ROUTE)
def chat_to_gemini(body: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat body as Gemini's generateContent body (the model goes in the URL)."""
    unknown = sorted(k for k in body if k not in _MAPPED | _IGNORED)
    if unknown:
        raise Untranslatable(", ".join(f"`{k}`" for k in unknown), ROUTE, unknown[0])
    system: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # tool call id -> function name

    def add(role: str, parts: list[dict[str, Any]]) -> None:
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        elif parts:
            contents.append({"role": role, "parts": parts})

    for i, message in enumerate(body["messages"]):
        where, role = f"messages[{i}]", message.get("role")
        if role in ("system", "developer"):
            system.extend(_parts(message.get("content"), where))
        elif role == "user":
            add("user", _parts(message.get("content"), f"{where}.content"))
        elif role == "assistant":
            parts = _parts(message.get("content"), f"{where}.content")
            for call in message.get("tool_calls") or ():
                fn = call.get("function") or {}
                names[str(call.get("id"))] = str(fn.get("name", ""))
                parts.append({"functionCall": {"name": fn.get("name"),
                                               "args": parse_arguments(fn.get("arguments"))}})
            add("model", parts)
        elif role == "tool":
            call_id = str(message.get("tool_call_id", ""))
            if call_id not in names:
                raise Untranslatable("a tool result for a call not in the conversation",
                                     ROUTE, f"{where}.tool_call_id")
            content = message.get("content")
            text = content if isinstance(content, str) else dumps(content)
            add("user", [{"functionResponse": {"name": names[call_id],
                                               "response": {"result": text}}}])
        else:
            raise Untranslatable(f"a message of role {role!r}", ROUTE, f"{where}.role")
    out: dict[str, Any] = {"contents": contents, "generationConfig": _generation_config(body)}
    if system:
        out["systemInstruction"] = {"parts": system}
    if body.get("tools"):
        out["tools"] = _tools(body["tools"])
        config = _tool_config(body.get("tool_choice"))
        if config is not None:
            out["toolConfig"] = config
    return out


def candidate_message(candidate: dict[str, Any], answer_id: str) -> dict[str, Any]:
    """One Gemini candidate as an OpenAI assistant message (thoughts left out: Gemini
    sends thought summaries only when asked, and chat has no field for them)."""
    text: list[str] = []
    calls: list[dict[str, Any]] = []
    content = obj(candidate.get("content"))
    for part in content.get("parts") or ():
        if not isinstance(part, dict) or part.get("thought"):
            continue
        if isinstance(part.get("text"), str):
            text.append(part["text"])
        call = part.get("functionCall")
        if isinstance(call, dict):
            calls.append({"id": str(call.get("id") or f"call_{answer_id}_{len(calls)}"),
                          "type": "function",
                          "function": {"name": str(call.get("name", "")),
                                       "arguments": dumps(call.get("args") or {})}})
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None,
                               "refusal": None}
    if calls:
        message["tool_calls"] = calls
    return message


def finish_reason(candidate: dict[str, Any], has_calls: bool) -> str | None:
    reason = candidate.get("finishReason")
    if not reason:
        return None
    return "tool_calls" if has_calls else FINISH.get(str(reason), "stop")
